"""The communication rules against labels they did not make: precision and recall of "solved" on the
labelled set (bench/answer_labels.py), the old rule (every output matched anywhere in the text) beside the
new one (a field-bound value told for its field, rewards.field_answers), and each policy's success under both.

    python bench/answer_check.py [bench/data/answer_labels_cpu_demo.json] [--out bench/results/answers_cpu_demo.json]

An episode is solved by a rule when its world state is the gold one (the episode's own world_state
component) and the rule's communication score is 1.0, as the demo's evaluation counts it. Targets for the
new rule: precision >= 0.99 and recall >= 0.97. One JSON line last.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from rewards.verifiable import CommunicationReward
from synth.episode import Trajectory
from synth.tasks import Task

RULES = {"old": CommunicationReward(by_field=False), "new": CommunicationReward()}
TARGETS = {"precision": 0.99, "recall": 0.97}


def ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


async def verdicts(data: dict[str, Any]) -> list[dict[str, Any]]:
    tasks = {t["id"]: Task.model_validate(t) for t in data["tasks"]}
    out = []
    for ep in data["episodes"]:
        t = tasks[ep["task_id"]]
        traj = Trajectory(task_id=t.id, domain=t.domain, seed=t.seed, messages=ep["messages"])
        state = (ep["components"] or {}).get("world_state") == 1.0
        row = {"policy": ep["policy"], "family": t.id.split("-")[0], "greedy": ep["greedy"],
               "label": ep["label"]["solved"]}
        for name, rule in RULES.items():
            row[name] = state and (await rule.score(t, traj)).score == 1.0
        out.append(row)
    return out


def agreement(rows: list[dict[str, Any]], rule: str) -> dict[str, Any]:
    tp = sum(r[rule] and r["label"] for r in rows)
    fp = sum(r[rule] and not r["label"] for r in rows)
    fn = sum(r["label"] and not r[rule] for r in rows)
    return {"precision": ratio(tp, tp + fp), "recall": ratio(tp, tp + fn), "true_pos": tp, "false_pos": fp,
            "false_neg": fn}


def success(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per policy and family: sampled success under the labels and both rules."""
    out: dict[str, Any] = {}
    for pol in dict.fromkeys(r["policy"] for r in rows):
        for fam in dict.fromkeys(r["family"] for r in rows):
            mine = [r for r in rows if r["policy"] == pol and r["family"] == fam and not r["greedy"]]
            if mine:
                out.setdefault(pol, {})[fam] = {k: ratio(sum(r[k] for r in mine), len(mine))
                                                for k in ("label", "old", "new")} | {"episodes": len(mine)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("labels", nargs="?", type=Path, default=Path("bench/data/answer_labels_cpu_demo.json"))
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    data = json.loads(a.labels.read_text())
    rows = anyio.run(verdicts, data)
    rules = {name: agreement(rows, name) for name in RULES}
    for name, r in rules.items():
        print(f"{name} rule: precision {r['precision']}, recall {r['recall']} "
              f"({r['true_pos']} right, {r['false_pos']} false solved, {r['false_neg']} missed)")
    new = rules["new"]
    met = all(new[k] is not None and new[k] >= v for k, v in TARGETS.items())
    result = {"bench": "answer_check", "labels": str(a.labels), "source": data.get("source"), "episodes": len(rows),
              "labelled_solved": sum(r["label"] for r in rows), "rules": rules, "targets": TARGETS,
              "target_met": met, "success": success(rows)}
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
