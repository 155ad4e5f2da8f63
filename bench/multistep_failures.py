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

Plus the terminations (``max_tokens``: the completion budget ran out), the solved share per held-out entity
(``by_entity``: the ids the gold calls name and the gold tools; the split holds out a few ids per family, so
one id can carry a seed), where the read_report answer's values come from (``answers``: each ``"key": "value"``
pair an episode that made its gold reads wrote, against the reads' outputs; ``asked_written``: per key the
request quotes, the share of answers that write it), whether a read_report plan names
the asked keys (``plan_keys``, for answers=keyed_plan priming) and a few failed episodes per outcome as examples. One JSON line last.
"""

from __future__ import annotations

import argparse
import json
import re
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


def _pairs(value: Any) -> set[tuple[str, str]]:
    """Every scalar (key, value) of a tool output, nested records included, values as the answer writes them."""
    from synth.task_values import output_pairs

    return {(str(k), v if isinstance(v, str) else json.dumps(v))
            for k, v in output_pairs(value) if not isinstance(v, (dict, list))}


_KEYED = re.compile(r'"([A-Za-z_]+)"\s*:\s*"([^"]*)"')


def answer_sources(task: Any, traj: dict[str, Any]) -> Counter[str]:
    """Where each ``"key": "value"`` pair of a read_report answer comes from, once the gold reads are made:
    ``copied`` (the reads' outputs hold that value under that key), ``other_key`` (the outputs hold the value,
    under another key), ``not_in_output`` (written from elsewhere: a value recalled or made up); and
    ``asked_key`` / ``other_key_named``: whether the key is one the user asked for (a key whose output value is
    an expected output); ``asked:KEY`` / ``written:KEY`` for each key the request quotes (1) and whether some
    answer writes it (0 or 1). Empty when the gold reads were not all made."""
    good = [c for c in _calls(traj) if c.get("name") and c["arguments"] is not None]
    if not {a.name for a in task.gold_actions} <= {c["name"] for c in good}:
        return Counter()
    out = set().union(*(_pairs(c.get("output")) for c in good))
    values = {v for _, v in out}
    asked = {k for k, v in out if v in task.expected_outputs}
    from synth.task_values import asked_fields

    tally: Counter[str] = Counter()
    written: set[str] = set()
    for m in traj.get("messages", []):
        if m.get("role") != "assistant" or m.get("tool_calls"):
            continue
        for k, v in _KEYED.findall(m.get("content") or ""):
            tally["copied" if (k, v) in out else "other_key" if v in values else "not_in_output"] += 1
            tally["asked_key" if k in asked else "other_key_named"] += 1
            written.add(k)
    for k in asked_fields(task.instruction):  # the keys the request quotes: does any answer write each?
        tally[f"asked:{k}"] += 1
        tally[f"written:{k}"] += k in written
    return tally


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


_PLAN_KEYS = re.compile(r'\) tell the (.*?)\.(?:\s|$)')


def plan_keys(task: Any, traj: dict[str, Any]) -> str:
    """What the first turn's plan says it will tell (answers=keyed_plan priming: `2) tell the "room" and the
    "type".`) against the keys the request asks for: ``same_order``, ``same_set``, ``one_asked`` (some asked
    key, not all), ``none_asked``, or ``no_plan_step``."""
    from synth.task_values import asked_fields

    first = next((m.get("content") or "" for m in traj.get("messages", []) if m.get("role") == "assistant"), "")
    m = _PLAN_KEYS.search(first)
    if not m:
        return "no_plan_step"
    said, asked = re.findall(r'"([A-Za-z_]+)"', m.group(1)), asked_fields(task.instruction)
    return ("same_order" if said == asked else "same_set" if set(said) == set(asked)
            else "one_asked" if set(said) & set(asked) else "none_asked")


def entity_key(task: Any) -> str:
    """``LK-1 get_home_device_status``: the ids a task's gold calls name, then its gold tools."""
    from synth.task_families import entities

    return f"{','.join(sorted(entities(task))) or '-'} {'+'.join(a.name for a in task.gold_actions)}"


def answer_shares(tally: Counter[str]) -> dict[str, Any]:
    """``answer_sources`` pooled over episodes: the pairs counted and each source's and key's share."""
    pairs = tally["copied"] + tally["other_key"] + tally["not_in_output"]
    asked = {k.split(":", 1)[1]: n for k, n in tally.items() if k.startswith("asked:")}
    return {"pairs": pairs, **{k: round(tally[k] / pairs, 3) if pairs else None
                               for k in ("copied", "other_key", "not_in_output", "asked_key")},
            # per key the request quotes: how many episodes asked it, and the share whose answer writes it
            "asked_written": {k: {"asked": n, "written": round(tally[f"written:{k}"] / n, 3)}
                              for k, n in sorted(asked.items(), key=lambda kv: -kv[1])}}


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
    by_entity: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    sources: Counter[str] = Counter()
    planned: Counter[str] = Counter()
    for line in (Path(args.eval_dir) / "trajectories.jsonl").read_text().splitlines():
        traj = json.loads(line)
        task = tasks.get(traj["task_id"])
        fam = family_of(task) if task else None
        if fam not in FAMILIES:
            continue
        what = classify(task, fam, traj)
        per[fam][what] += 1
        ends[fam][traj.get("termination") or "?"] += 1
        cell = by_entity[fam][entity_key(task)]
        cell[0] += 1
        cell[1] += what == "solved"
        if fam == "read_report":
            sources += answer_sources(task, traj)
            planned[plan_keys(task, traj)] += 1
        if what != "solved" and len(examples[f"{fam}/{what}"]) < args.examples:
            examples[f"{fam}/{what}"].append({
                "task": task.instruction, "gold": [a.model_dump() for a in task.gold_actions],
                "expected_outputs": task.expected_outputs, "termination": traj.get("termination"),
                "calls": [{"name": c.get("name"), "arguments": c["arguments"]} for c in _calls(traj)],
                "said": _said(traj)[-400:]})
    result = {"families": {f: {"episodes": sum(c.values()),
                               "share": {k: round(v / sum(c.values()), 3) for k, v in c.most_common()},
                               "terminations": dict(ends[f]),
                               "by_entity": {k: {"episodes": n, "solved": round(ok / n, 3)}
                                             for k, (n, ok) in sorted(by_entity[f].items())}}
                           for f, c in per.items()},
              "answers": answer_shares(sources),
              "plan_keys": {k: round(v / sum(planned.values()), 3) for k, v in planned.most_common()}, "examples": examples, "eval_dir": args.eval_dir}
    if args.save:
        Path(args.save).write_text(json.dumps(result, indent=2) + "\n")
    emit(result, head=("families",))
    return 0


if __name__ == "__main__":
    sys.exit(main())
