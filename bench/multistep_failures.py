"""Why multi-step episodes fail: each held-out episode of ``lookup_act``, ``read_report`` and ``ask_user`` sorted
into the first step it got wrong (issue 28: the next lever, measured).

    python bench/multistep_failures.py EVAL_DIR TASKS_DIR [--save out.json] [--examples N]

EVAL_DIR is a policy's held-out evaluation (``trajectories.jsonl``, as rl.evaluate writes it), TASKS_DIR the
held-out tasks (``tasks.jsonl``). Per family, the share of episodes in each outcome, in the order an
episode meets them:

- ``no_call``: no well-formed tool call at all (``malformed`` counted apart);
- ``wrong_first_tool``: the first call is not the gold read (read_report: ``missed_a_gold_read``, a gold
  read never called);
- ``stopped_after_read``: the read is right, no write follows (lookup_act) / the answer never repeats the
  value (read_report: ``value_not_said``, split by whether the value was in the read's output);
- ``wrong_id_other_record``: the write names an id that is in the read's output, but another record's;
  ``wrong_id_not_in_output``: an id the output does not hold (made up or misspelt);
- ``wrong_other_args``: the id is right, another argument is not;
- ``right_calls_unsolved``: the gold calls were made, the episode still failed (answer, extra writes);
- ask_user: ``asked_then_failed`` (the user revealed the withheld detail, the episode still failed),
  ``acted_without_asking`` (calls, no question the user answered), ``no_question_no_call`` (neither: the turn
  was text that asked nothing, or a tool call broken into text);
- ``solved``.

Plus the terminations (``max_tokens``: the completion budget ran out) and a few failed episodes per
outcome as examples. One JSON line last.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench._common import emit  # noqa: E402


FAMILIES = ("lookup_act", "read_report", "ask_user")


def _calls(traj: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for c in traj.get("tool_calls") or []:
        args = c.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = None
        out.append({**c, "arguments": args if isinstance(args, dict) else None})
    return out


def _said(traj: dict[str, Any]) -> str:
    return " ".join(m.get("content") or "" for m in traj.get("messages", []) if m.get("role") == "assistant")


def classify(task: Any, family: str, traj: dict[str, Any]) -> str:
    if traj.get("solved"):
        return "solved"
    calls = _calls(traj)
    good = [c for c in calls if c.get("name") and c["arguments"] is not None]
    if family == "ask_user":
        if (((traj.get("stats") or {}).get("user") or {}).get("revealed") or 0) > 0:
            return "asked_then_failed"
        return "acted_without_asking" if good else "malformed" if calls else "no_question_no_call"
    if not good:
        return "malformed" if calls else "no_call"
    gold = task.gold_actions
    read_out = json.dumps([c.get("output") for c in good], ensure_ascii=False, default=str)
    if family == "read_report":
        if not {a.name for a in gold} <= {c["name"] for c in good}:
            return "missed_a_gold_read"
        said = _said(traj)
        missing = [o for o in task.expected_outputs if o not in said]
        if missing:
            return "value_not_said_but_in_output" if all(o in read_out for o in missing) else "value_not_said"
        return "right_calls_unsolved"
    if good[0]["name"] != gold[0].name:
        return "wrong_first_tool"
    write = gold[-1]
    mine = [c for c in good[1:] if c["name"] == write.name]
    if not mine:
        return "stopped_after_read" if len(good) == 1 else "wrong_write_tool"
    args = mine[0]["arguments"]
    from synth.task_values import id_like

    for k, v in write.arguments.items():
        if id_like(k, v) and args.get(k) != v:
            return "wrong_id_other_record" if isinstance(args.get(k), str) and args[k] in read_out \
                else "wrong_id_not_in_output"
    if any(args.get(k) != v for k, v in write.arguments.items()):
        return "wrong_other_args"
    return "right_calls_unsolved"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir")
    ap.add_argument("tasks_dir")
    ap.add_argument("--save", default=None)
    ap.add_argument("--examples", type=int, default=2, help="failed episodes kept per outcome")
    args = ap.parse_args()

    from synth.task_families import family_of
    from synth.tasks import load_tasks

    tasks = {t.id: t for t in load_tasks(args.tasks_dir)}
    per: dict[str, Counter[str]] = defaultdict(Counter)
    ends: dict[str, Counter[str]] = defaultdict(Counter)
    examples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in (Path(args.eval_dir) / "trajectories.jsonl").read_text().splitlines():
        traj = json.loads(line)
        task = tasks.get(traj["task_id"])
        fam = family_of(task) if task else None
        if fam not in FAMILIES:
            continue
        what = classify(task, fam, traj)
        per[fam][what] += 1
        ends[fam][traj.get("termination") or "?"] += 1
        if what != "solved" and len(examples[f"{fam}/{what}"]) < args.examples:
            examples[f"{fam}/{what}"].append({
                "task": task.instruction, "gold": [a.model_dump() for a in task.gold_actions],
                "expected_outputs": task.expected_outputs, "termination": traj.get("termination"),
                "calls": [{"name": c.get("name"), "arguments": c["arguments"]} for c in _calls(traj)],
                "said": _said(traj)[-400:]})
    result = {"families": {f: {"episodes": sum(c.values()),
                               "share": {k: round(v / sum(c.values()), 3) for k, v in c.most_common()},
                               "terminations": dict(ends[f])} for f, c in per.items()},
              "examples": examples, "eval_dir": args.eval_dir}
    if args.save:
        Path(args.save).write_text(json.dumps(result, indent=2) + "\n")
    emit(result, head=("families",))
    return 0


if __name__ == "__main__":
    sys.exit(main())
