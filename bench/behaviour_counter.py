"""How right the behaviour counter (rl.behaviours.HeuristicCounter) is: precision and recall per behaviour on a
labelled set of trajectories (issue 33 #2).

The set, bench/data/behaviour_labels.jsonl (built by bench/data/build_behaviour_labels.py): priming traces
labelled by the generator that inserted the behaviours, and held-out episodes of a demo run's base, primed and
Dr. GRPO policies labelled by reading (the rubric is in the builder's docstring); a batch of those was labelled
after the counter's fix without looking at its counts, and is also scored on its own (held_out_batch). A trajectory counts as showing a
behaviour when the counter counts at least one instance; precision = right ones among those it flags, recall =
flagged ones among those labelled present. Per policy too, and the disagreements with the labels' reasons.

    PYTHONPATH=. .venv/bin/python bench/behaviour_counter.py            # writes bench/results/behaviour_counter.json
    PYTHONPATH=. .venv/bin/python bench/behaviour_counter.py --out x.json
"""

from __future__ import annotations

import _common  # noqa: F401  (sys.path)

import argparse
import json
from pathlib import Path
from typing import Any

from _common import HERE, emit

LABELS = HERE / "data" / "behaviour_labels.jsonl"
RESULT = HERE / "results" / "behaviour_counter.json"


def scores(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """(label, flagged) pairs -> counts, precision, recall (None where undefined)."""
    tp = sum(1 for y, p in pairs if y and p)
    fp = sum(1 for y, p in pairs if not y and p)
    fn = sum(1 for y, p in pairs if y and not p)
    tn = len(pairs) - tp - fp - fn
    return {"present": tp + fn, "absent": fp + tn, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": round(tp / (tp + fp), 4) if tp + fp else None,
            "recall": round(tp / (tp + fn), 4) if tp + fn else None}


def measure(path: Path = LABELS) -> dict[str, Any]:
    from rl.behaviours import HeuristicCounter
    from synth.behaviours import BEHAVIOURS

    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    counter = HeuristicCounter()
    flagged = [counter.counts(r["messages"]) for r in rows]
    out: dict[str, Any] = {"labelled": str(path.relative_to(HERE.parent)) if path.is_relative_to(HERE.parent)
                           else str(path), "counter": counter.name, "trajectories": len(rows),
                           "by_source": {}, "behaviours": {}, "by_policy": {}, "disagreements": []}
    for r in rows:
        out["by_source"][r["policy"]] = out["by_source"].get(r["policy"], 0) + 1
    for b in BEHAVIOURS:
        out["behaviours"][b] = scores([(r["labels"][b], c[b] > 0) for r, c in zip(rows, flagged, strict=True)])
    held = [(r, c) for r, c in zip(rows, flagged, strict=True) if r.get("batch") == "held_out"]
    if held:  # rows labelled after the counter was last changed, without looking at its counts
        out["held_out_batch"] = {"trajectories": len(held), **{
            b: scores([(r["labels"][b], c[b] > 0) for r, c in held]) for b in BEHAVIOURS}}
    for pol in out["by_source"]:
        out["by_policy"][pol] = {b: scores([(r["labels"][b], c[b] > 0) for r, c in zip(rows, flagged, strict=True)
                                            if r["policy"] == pol]) for b in BEHAVIOURS}
    for r, c in zip(rows, flagged, strict=True):
        for b in BEHAVIOURS:
            if r["labels"][b] != (c[b] > 0):
                out["disagreements"].append({"id": r["id"], "behaviour": b, "label": r["labels"][b], "count": c[b],
                                             "reason": r["reason"]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    res = measure(args.labels)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    for b, s in res["behaviours"].items():
        print(f"{b:18s} precision {s['precision']}  recall {s['recall']}  (tp {s['tp']} fp {s['fp']} fn {s['fn']} "
              f"tn {s['tn']})")
    emit({"trajectories": res["trajectories"], **{f"{b}_{k}": s[k] for b, s in res["behaviours"].items()
                                                 for k in ("precision", "recall")}}, head=("trajectories",))


if __name__ == "__main__":
    main()
