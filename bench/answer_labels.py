"""Label held-out home_devices episodes by hand-simple rules, apart from the reward code: the labelled set that
bench/answer_check.py measures the communication rules against.

    python bench/answer_labels.py RUN_DIR TASKS_JSONL --out bench/data/answer_labels_cpu_demo.json

RUN_DIR is a `dojo demo` run (its eval/{base,sft,grpo}/trajectories.jsonl); TASKS_JSONL its held-out tasks
as the current code writes them (expected outputs with their fields). The labeller knows nothing of
rewards/: for each asked field (a quoted word of the instruction that is a key of the device record) the
truth is the device's record in the episode's final state, and what the agent said for it is every
`"field": value` pair in its messages. A field is right when the agent said it and every value it said is
the record's; an episode is solved when the state is the gold one and every asked field is right.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

FAMILIES = ("read_report", "ask_user", "lookup_act")
POLICIES = ("base", "sft", "grpo")


def device_of(task: dict[str, Any]) -> str | None:
    """The device the task is about: the last gold call's device_id."""
    ids = [a["arguments"]["device_id"] for a in task["gold_actions"] if "device_id" in a["arguments"]]
    return ids[-1] if ids else None


def asked_fields(instruction: str, record: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(w for w in re.findall(r'"([A-Za-z_]+)"', instruction) if w in record))


def said(messages: list[dict[str, Any]], field: str) -> list[str]:
    pat = re.compile(rf'"{re.escape(field)}"\s*:\s*(?:"([^"\n]*)"|([^,;}}\]\s"]+))')
    out = []
    for m in messages:
        if m.get("role") == "assistant" and isinstance(m.get("content"), str):
            out += [a or b for a, b in pat.findall(m["content"])]
    return out


def label(task: dict[str, Any], ep: dict[str, Any]) -> dict[str, Any]:
    state_ok = bool(ep.get("final_state_hash")) and ep.get("final_state_hash") == ep.get("expected_state_hash")
    dev = device_of(task)
    record = ((ep.get("final_state") or {}).get("devices") or {}).get(dev) if dev else None
    fields = []
    if task["expected_outputs"] and record is not None:
        for f in asked_fields(task["instruction"], record):
            truth, vals = str(record[f]), said(ep["messages"], f)
            fields.append({"field": f, "truth": truth, "said": vals,
                           "right": bool(vals) and all(v.strip().lower() == truth.lower() for v in vals)})
    return {"state_reached": state_ok, "fields": fields,
            "solved": state_ok and all(x["right"] for x in fields) and (bool(fields) or not task["expected_outputs"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("tasks", type=Path)
    ap.add_argument("--out", type=Path, default=Path("bench/data/answer_labels_cpu_demo.json"))
    ap.add_argument("--source", default="CPU demo (examples/demo.yaml, seed 0)")
    a = ap.parse_args(argv)
    tasks = {t["id"]: t for t in map(json.loads, a.tasks.read_text().splitlines()) if t["id"].startswith(FAMILIES)}
    episodes = []
    for pol in POLICIES:
        path = a.run_dir / "eval" / pol / "trajectories.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        per_task: dict[str, int] = {}
        for ep in rows:  # sampled episodes first, then one greedy per task (rl.evaluate)
            per_task[ep["task_id"]] = per_task.get(ep["task_id"], 0) + 1
        seen: dict[str, int] = {}
        for ep in rows:
            t = tasks.get(ep["task_id"])
            if t is None:
                continue
            seen[t["id"]] = seen.get(t["id"], 0) + 1
            greedy = pol != "base" and seen[t["id"]] == per_task[t["id"]]
            episodes.append({"policy": pol, "task_id": t["id"], "greedy": greedy,
                             "messages": [{k: m[k] for k in ("role", "content") if k in m} for m in ep["messages"]
                                          if m.get("role") != "system"],
                             "components": ep.get("components"), "label": label(t, ep)})
    data = {"source": a.source, "labeller": "bench/answer_labels.py", "tasks": list(tasks.values()),
            "episodes": episodes}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    solved = sum(e["label"]["solved"] for e in episodes)
    print(json.dumps({"episodes": len(episodes), "solved": solved, "out": str(a.out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
