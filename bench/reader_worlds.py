"""Do primed policies read? Several checkpoints evaluated on ONE folder's held-out tasks (issue 28, section 13
of bench/results/reader_gpu.md): e.g. a policy primed on one home_devices world and one primed on 32 worlds
(``domain_seeds``), both on the 32-world held-out tasks, with the demo's own evaluation (4 samples at the
training temperature + greedy, the same seed for every model, so the only difference is the weights).

    PYTHONPATH=. python bench/reader_worlds.py --models NAME=DIR,NAME=DIR --tasks-dir RUN [--set KEY=VALUE ...]
        [--samples 4] [--out FILE]

RUN is a folder with ``tasks/held_out`` (a ``dojo demo`` run, or a seed folder of bench/rl_budget.py); ``--set``
takes demo overrides for the evaluation settings (e.g. ``train.rollout.use_vllm=false``). Per model: sampled,
greedy and pass@k success, the multi-step families pooled, and per family (rl.evaluate.by_family). One JSON
line last.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench import _stages  # noqa: E402

FAMILIES = ("lookup_act", "read_report", "ask_user")


def parse_models(text: str) -> dict[str, Path]:
    """``NAME=DIR,NAME=DIR`` (a bare DIR is named by its path) -> {name: folder}."""
    out: dict[str, Path] = {}
    for item in (s.strip() for s in text.split(",") if s.strip()):
        name, sep, path = item.partition("=")
        name, path = (name, path) if sep else (item, item)
        if name in out:
            raise SystemExit(f"reader_worlds: model name {name!r} given twice")
        out[name] = Path(path)
    if not out:
        raise SystemExit("reader_worlds: --models names no model")
    return out


def summary(res: dict[str, Any]) -> dict[str, Any]:
    """The figures a comparison reads: success (sampled, greedy, pass@k), multi-step pooled, per family."""
    row = {k: round(res[k], 4) for k in ("success", "greedy_success", "pass_at_k", "multistep_success",
                                          "multistep_greedy_success", "multistep_pass_at_k") if res.get(k) is not None}
    row["families"] = {f: {k: res["by_tool"][f][k] for k in ("tasks", "success", "pass_at_k", "never_solved")}
                       for f in FAMILIES if f in res.get("by_tool", {})}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="NAME=DIR,NAME=DIR: primed checkpoints")
    ap.add_argument("--tasks-dir", required=True, help="a folder with tasks/held_out")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="demo overrides")
    ap.add_argument("--samples", type=int, default=4, help="sampled episodes per task (plus the greedy one)")
    ap.add_argument("--work", default="/tmp/reader_worlds")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    models = parse_models(args.models)
    from synth.tasks import load_tasks

    held = load_tasks(Path(args.tasks_dir) / "tasks" / "held_out")
    cfg = _stages.demo_config([*args.set, f"eval_samples={args.samples}", f"out_dir={args.work}"])
    backend = _stages.backend_of(cfg, Path(args.work))
    result: dict[str, Any] = {"bench": "reader_worlds", "tasks_dir": args.tasks_dir, "held_out_tasks": len(held),
                              "samples": args.samples, "overrides": args.set, "models": {}}
    t0 = time.time()
    for name, path in models.items():
        res = _stages.evaluate(cfg, path, held, Path(args.work) / name, backend)
        result["models"][name] = {"path": str(path), **summary(res)}
        print(f"[reader_worlds] {name}: {json.dumps(result['models'][name])}", file=sys.stderr, flush=True)
    result["seconds"] = round(time.time() - t0, 1)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
