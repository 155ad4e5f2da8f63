"""Where a GPU training step's memory goes: `dojo train` launches of the 0.49B bench policy
(bench/train_multi.py's setup) with one setting changed each, against the bench as it ran before
issue 32 item 1 (the KV cache from free memory, no gradient checkpointing), in the same run.

    python bench/train_memory.py [--variants before,work,gc,gc2,before_ddp2,gc_ddp2,gc2_ddp2,shared_prefix]
                                 [--steps 6] [--repeat 2] [--save partial.json]
    python bench/train_memory.py --quick      # the tiny model on CPU, before and gc, 2 steps: a smoke run

Each launch records per rank the peak allocated GPU memory of generation (the rollout) and of
training (forward, backward, optimizer), tokens/s over the timed steps (all but the first), and
the step split into rollout and the rest (``train_s``: scoring, backward, optimizer, which is what
checkpointing slows). ``--repeat`` runs the variants in alternating rounds (before, gc, ..., before,
gc, ...): launches of identical settings have differed by ~8% in tokens/s over 3 timed steps, since
what is sampled differs. Per variant: the mean over rounds; ``speed_kept`` = its mean tokens/s / the
baseline's with as many processes (``before`` for one GPU, ``before_ddp2`` for two; without that,
``before`` per process). ``--save`` rewrites the summary after every launch, so a run cut off by a
time limit keeps what it measured. The LAST line on stdout is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (first: fixes sys.path, taking bench/ off it)


def _train_multi():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_train_multi", Path(__file__).with_name("train_multi.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


tm = _train_multi()  # its launch(): the real `accelerate launch` of `dojo train`, with the step clock

BEFORE = ["rollout.generation_memory=free", "grpo.gradient_checkpointing=false"]
GC = ["grpo.gradient_checkpointing=true"]
GC2 = [*GC, 'grpo.gradient_checkpointing_kwargs={"every_n_layers": 2}']
VARIANTS: dict[str, tuple[int, list[str]]] = {
    "before": (1, BEFORE),
    "before_ddp2": (2, BEFORE),
    "work": (1, ["grpo.gradient_checkpointing=false"]),  # the cache sized to the work (default now)
    "gc": (1, GC),
    "gc2": (1, GC2),
    "gc_ddp2": (2, GC),
    "gc2_ddp2": (2, GC2),
    "shared_prefix": (1, ["grpo.gradient_checkpointing=false", "trainer.shared_prefix=true"]),
}


def summarise(result: dict[str, Any]) -> None:
    """Per variant: means over its successful launches, the peak over them, the speed kept against the
    baseline with as many processes."""
    for v in result["variants"].values():
        ok = [r for r in v["launches"] if r.get("returncode") == 0 and r.get("tokens_per_s")]
        v["ran"] = len(ok)
        for k in ("tokens_per_s", "tokens_per_s_per_process", "step_s", "rollout_s", "train_s"):
            vals = [r[k] for r in ok if r.get(k) is not None]
            v[k] = round(sum(vals) / len(vals), 3) if vals else None
        v["peak_mem_gb"] = max((max(r["peak_mem_gb"]) for r in ok if r.get("peak_mem_gb")), default=None)
    variants = result["variants"]
    for name, v in variants.items():
        procs = VARIANTS[name][0]
        ref, key = ("before" if procs == 1 else f"before_ddp{procs}"), "tokens_per_s"
        if not variants.get(ref, {}).get(key):  # no baseline with as many processes: one GPU's, per process
            ref, key = "before", "tokens_per_s_per_process"
        base, mine = variants.get(ref, {}).get(key), v.get(key)
        v.pop("speed_kept", None)
        v.pop("speed_kept_against", None)
        if base and mine:
            v["speed_kept"] = round(mine / base, 3)
            v["speed_kept_against"] = ref if key == "tokens_per_s" else f"{ref}, per process"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="before,work,gc,gc2,gc_ddp2,gc2_ddp2")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=1, help="rounds of all variants, alternating")
    ap.add_argument("--quick", action="store_true", help="the tiny model on CPU, 2 steps (figures are smoke values)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--save", type=Path, help="the summary so far, rewritten after every launch")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "tooldojo-bench-train-memory")
    args = ap.parse_args()
    if args.quick:
        args.variants, args.steps = "before,gc", 2
    names = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {sorted(VARIANTS)}")
    names = sorted(names, key=lambda n: not n.startswith("before"))  # the baselines first
    import torch

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        policy = ["rollout.max_turns=1", "grpo.max_completion_length=64"]
    else:
        model = tm.build_model(out / "model-0.5b", tm.SHAPES["0.5b"])
        policy = ["grpo.max_completion_length=256", "model.tiny=false", f"model.name_or_path={model}",
                  "grpo.learning_rate=1e-6"]
    base = [*tm.common_overrides(args.backend), *policy, f"grpo.max_steps={args.steps}",
            f"grpo.per_device_train_batch_size={args.batch}"]
    result: dict[str, Any] = {"bench": "train_memory", "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available()
                              else None, "model": "tiny" if args.quick else "0.5b", "quick": args.quick, "batch_per_process": args.batch, "steps": args.steps,
                              "variants": {}}
    tasks = out / "tasks"
    keep = ("procs", "returncode", "error", "steps", "tokens_per_s", "tokens_per_s_per_process", "step_s",
            "rollout_s", "train_s", "peak_mem_gb", "phases_gb", "reward")
    for rnd in range(args.repeat):
        for name in names:
            procs, extra = VARIANTS[name]
            data = [f"data.tasks={tasks}"] if tasks.exists() else ["data.synthesize=16"]
            run = tm.launch(f"{name}-{rnd}", out, procs, [*base, *data, *extra], timeout=600)
            if not tasks.exists() and (out / f"{name}-{rnd}" / "tasks").exists():
                import shutil

                shutil.copytree(out / f"{name}-{rnd}" / "tasks", tasks)
            v = result["variants"].setdefault(name, {"overrides": extra, "launches": []})
            v["launches"].append({k: run.get(k) for k in keep})
            tm.log(f"{name} round {rnd}: {run.get('tokens_per_s')} tokens/s, {json.dumps(run.get('peak_mem_gb'))} GB")
            summarise(result)
            if args.save:
                args.save.write_text(json.dumps(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
