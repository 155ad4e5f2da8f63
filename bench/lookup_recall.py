"""Can a look-up be passed by recall? Per demo task split (``<dir>/tasks/{train,held_out}``), how many
training ``lookup_act`` tasks name a record whose id the name always gives in training (the user says
"the scene whose name is Good night", and in every training look-up naming it the id is SC-1), and how
the held-out look-ups' write tools compare with the training ones' (issue 28, bench/results/reader_gpu.md
section 19). CPU, no model.

    PYTHONPATH=. python bench/lookup_recall.py /tmp/rq/worlds32_kd/seed-0 /tmp/rq/worlds32_kd/seed-1 \\
        [--min-count 3] [--share 0.9] [--save bench/results/lookup_recall_cpu.json]

A name counts as recallable when it names at least ``--min-count`` training look-ups and at least
``--share`` of them write with the same id. One JSON line last.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# bench/ holds rewards.py and synth.py: keep the packages of those names importable
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NAMED = (re.compile(r"whose name is ([^)]*?)\)"), re.compile(r'"name": "([^"]*)"'))


def named_write(task: Any) -> tuple[str | None, str | None]:
    """(the record's name as the user gives it, the id the look-up's last gold call writes with)."""
    ids = [v for k, v in task.gold_actions[-1].arguments.items() if k.endswith("_id") and isinstance(v, str)]
    name = next((m.group(1) for rx in NAMED if (m := rx.search(task.instruction))), None)
    return name, ids[0] if ids else None


def recall_report(train: list[Any], held: list[Any], min_count: int = 3, share: float = 0.9) -> dict[str, Any]:
    """The counts for one split's look-ups (``train`` and ``held`` are its ``lookup_act`` tasks)."""
    writes = [named_write(t) for t in train]
    by_name: dict[str | None, Counter[str | None]] = defaultdict(Counter)
    for name, rid in writes:
        by_name[name][rid] += 1
    recallable: Counter[str] = Counter()
    for name, rid in writes:
        seen = sum(by_name[name].values())
        if name is not None and seen >= min_count and by_name[name][rid] >= share * seen:
            recallable[name] += 1
    tools = {"train": Counter(t.gold_actions[-1].name for t in train),
             "held_out": Counter(t.gold_actions[-1].name for t in held)}
    n_train, n_held = max(len(train), 1), max(len(held), 1)
    tv = 0.5 * sum(abs(tools["held_out"][k] / n_held - tools["train"][k] / n_train)
                   for k in set(tools["train"]) | set(tools["held_out"]))
    return {"train_lookups": len(train), "held_out_lookups": len(held),
            "recallable": sum(recallable.values()),
            "recallable_share": round(sum(recallable.values()) / n_train, 4) if train else None,
            "recallable_names": dict(recallable.most_common()),
            "write_tools": {k: dict(v.most_common()) for k, v in tools.items()},
            "write_tool_distance": round(tv, 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="folders holding tasks/{train,held_out} (a demo's out_dir)")
    ap.add_argument("--min-count", type=int, default=3)
    ap.add_argument("--share", type=float, default=0.9)
    ap.add_argument("--save", type=Path, default=None)
    args = ap.parse_args()
    from synth.task_families import family_of
    from synth.tasks import load_tasks

    out: dict[str, Any] = {"min_count": args.min_count, "share": args.share, "splits": {}}
    for d in args.dirs:
        look = {s: [t for t in load_tasks(d / "tasks" / s) if family_of(t) == "lookup_act"] for s in ("train", "held_out")}
        rep = recall_report(look["train"], look["held_out"], args.min_count, args.share)
        out["splits"][str(d)] = rep
        print(f"{d}: {rep['recallable']} of {rep['train_lookups']} training look-ups recallable "
              f"({rep['recallable_names']}); held-out write tools {rep['write_tools']['held_out']} against "
              f"training {rep['write_tools']['train']} (distance {rep['write_tool_distance']})", file=sys.stderr)
    shares = [r["recallable_share"] for r in out["splits"].values() if r["recallable_share"] is not None]
    out["recallable_share_mean"] = round(sum(shares) / len(shares), 4) if shares else None
    line = json.dumps(out)
    if args.save:
        args.save.write_text(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
