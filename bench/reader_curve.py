"""The held-out curve of a Dr. GRPO chain, per family (issue 28 item 3): every evaluated variant of the
bench/rl_budget.py JSONs given, placed at its step count, the primed policy at step 0.

    python bench/reader_curve.py A.json B.json ... [--png curve.png] [--save curve.json]

A variant trained ``from=OTHER`` starts where OTHER ended, so its steps are its own plus OTHER's, followed across
the files (OTHER may be a variant trained with ``eval=false`` in another call: it adds steps, not a point). All
points must share one primed policy per seed (the same baseline in every file): gains over different primed
policies (another session's priming) are not one curve. One JSON line last; ``--png`` draws a panel per figure,
a thin line per seed and a thick one for the mean.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402, F401  (first: fixes sys.path)
from bench import _stages  # noqa: E402

FAMILIES = ("read_report", "ask_user", "lookup_act")
# figure -> (the primed policy's key in rl_budget's per-seed record, the trained policy's); families come from by_tool
FIGURES = {"multistep": ("sft_multistep_success", "grpo_multistep_success"),
           "overall": ("sft_success", "grpo_success"),
           "multistep_greedy": ("sft_multistep_greedy_success", "grpo_multistep_greedy_success"),
           "greedy": ("sft_greedy_success", "grpo_greedy_success")}


class CurveError(ValueError):
    """The JSONs given do not make one curve (a missing ``from=`` variant, two primed policies, nothing evaluated)."""


def figures(rec: dict[str, Any], trained: bool) -> dict[str, float]:
    out = {name: rec[keys[trained]] for name, keys in FIGURES.items()}
    by_tool = rec.get("by_tool") or {}
    out.update({f: by_tool[f]["success"] for f in FAMILIES if f in by_tool})
    return out


def curve(runs: list[dict[str, Any]]) -> dict[str, Any]:
    variants: dict[str, dict[str, Any]] = {}
    primed: dict[str, dict[str, float]] | None = None
    for run in runs:
        for name, v in run["variants"].items():
            if name in variants:
                raise CurveError(f"variant {name} is in two of the files given; give each once")
            variants[name] = v
        these = {s: figures(r, trained=False) for s, r in run["primed"]["per_seed"].items()}
        if primed is None:
            primed = these
        elif any(primed.get(s) not in (None, f) for s, f in these.items()):
            raise CurveError("the files hold different primed policies (another session's priming): "
                             "give the JSONs of one chain")
        else:
            primed.update(these)
    if primed is None:
        raise CurveError("no rl_budget JSON given")

    def steps(name: str, seed: str, seen: tuple[str, ...] = ()) -> int:
        if name not in variants:
            raise CurveError(f"from={name}: give the JSON of the call that trained it")
        if name in seen:
            raise CurveError(f"variant {name}: its from= chain loops")
        v = variants[name]
        own = v["per_seed"][seed]["grpo_steps"]
        return own + (steps(v["from"], seed, (*seen, name)) if v.get("from") else 0)

    seeds = sorted(primed, key=int)
    points = [{"variant": "primed", "steps": {s: 0 for s in seeds}, "per_seed": primed}]
    for name, v in variants.items():
        per_seed = {s: r for s, r in v["per_seed"].items() if r.get("grpo_multistep_success") is not None}
        if per_seed:
            points.append({"variant": name, "steps": {s: steps(name, s) for s in per_seed},
                           "per_seed": {s: figures(r, trained=True) for s, r in per_seed.items()}})
    if len(points) == 1:
        raise CurveError("none of the variants given was evaluated (all eval=false)")
    points.sort(key=lambda p: max(p["steps"].values()))
    for p in points:
        names = sorted({k for f in p["per_seed"].values() for k in f})
        p["mean"] = {k: _stages.stats([f[k] for f in p["per_seed"].values()])["mean"] for k in names}
        base = {k: _stages.stats([primed[s][k] for s in p["per_seed"]])["mean"] for k in names}
        p["gain"] = {k: round(p["mean"][k] - base[k], 4) + 0.0 for k in names}
    return {"seeds": seeds, "points": points}


def plot(result: dict[str, Any], path: Path, title: str) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = ["multistep", *FAMILIES, "overall", "greedy"]
    fig = Figure(figsize=(13, 7))
    FigureCanvasAgg(fig)
    for ax, key in zip(fig.subplots(2, 3).flat, panels, strict=True):
        pts = [p for p in result["points"] if key in p["mean"]]
        for s in result["seeds"]:
            xy = [(p["steps"][s], p["per_seed"][s][key]) for p in pts if s in p["per_seed"]]
            ax.plot(*zip(*xy, strict=True), marker="o", lw=0.8, alpha=0.45, label=f"seed {s}")
        ax.plot([max(p["steps"].values()) for p in pts], [p["mean"][key] for p in pts], marker="o", lw=2.2,
                color="black", label="mean")
        ax.set_title(key.replace("_", " "), fontsize=10)
        ax.set_xlabel("Dr. GRPO steps")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    fig.axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jsons", nargs="+", type=Path, help="bench/rl_budget.py --save files of one chain")
    ap.add_argument("--png", type=Path, default=None)
    ap.add_argument("--save", default=None)
    args = ap.parse_args(argv)
    try:
        result = curve([json.loads(p.read_text()) for p in args.jsons])
    except (CurveError, OSError, json.JSONDecodeError, KeyError) as e:
        what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        print(f"error: {what} (reader_curve takes bench/rl_budget.py JSONs)", file=sys.stderr)
        return 2
    result["files"] = [p.name for p in args.jsons]
    if args.png:
        title = f"held-out success per family, {len(result['seeds'])} seeds (primed at step 0)"
        result["png"] = str(plot(result, args.png, title))
    _stages.report(result, args.save, head=("seeds", "files"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
