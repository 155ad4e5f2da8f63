"""Benchmark the demo's held-out evaluation: transformers ``generate`` (what the demo ran before)
against a vLLM engine loaded with the policy (rl.evaluate.HeldOutEval), on the same episodes.

    python bench/heldout_eval.py --run runs/demo [--policy sft] [--samples 4] [--sandboxes 8,32]
    python bench/heldout_eval.py --quick          (the tiny random model, 4 tasks: a smoke run)

``--run`` is a ``dojo demo`` output folder (its held-out tasks and checkpoints; the settings are
``--config``'s, the demo's by default). Each variant plays every held-out task ``--samples`` times
at the training temperature plus once greedily (rl.evaluate.EvalSettings), with N sandboxes, i.e.
at most N episodes, and so N sequences per generation batch, at once:

* ``transformers_8``: the baseline, ``evaluate_policy`` with 8 sandboxes (the demo's evaluation
  before this bench);
* ``vllm_N`` for each N of ``--sandboxes``: one in-process engine (``engine_start_s`` is reported
  apart: in the demo the training run's engine is reused, so it costs nothing there).

Per variant: seconds, episodes/s, sampled and greedy success (the engines sample with different
random streams, so success agrees within sampling noise, not exactly). The LAST line on stdout is
one JSON object; ``speedup`` is the baseline's seconds over the fastest engine variant's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (first: fixes sys.path)
from rich.console import Console

console = Console(stderr=True, highlight=False)


def engine(model_dir: str, max_num_batched_tokens: int) -> Any:
    """An in-process vLLM engine as TRL's colocate mode builds it here (float32, CPU)."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in process: rl.vllm_sync's reload_weights path
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    from vllm import LLM

    return LLM(model=model_dir, dtype="float32", enforce_eager=True, seed=0, enable_prefix_caching=True,
               max_num_batched_tokens=max_num_batched_tokens)


def quick_setup(tmp: Path) -> tuple[str, list[Any], Any, int]:
    from rl.evaluate import EvalSettings
    from rl.tiny import build_tiny_model
    from synth.tasks import synthesize_tasks
    from tests.conftest import any_backend

    backend = any_backend()
    tasks = synthesize_tasks(4, seed=3, domains=["retail_orders"], backend=backend, sandboxes=2).tasks
    return (str(build_tiny_model()), tasks,
            EvalSettings(samples=1, max_completion_length=24, backend=backend, sandboxes=2), 4096)


def demo_setup(args: argparse.Namespace) -> tuple[str, list[Any], Any, int]:
    from rl.demo import eval_settings, load_demo_config, sandbox_backend, train_config
    from synth.tasks import load_tasks

    run = Path(args.run)
    cfg = load_demo_config(args.config, [f"eval_samples={args.samples}"])
    tcfg = train_config(cfg, run)
    settings = eval_settings(cfg, tcfg, sandbox_backend(cfg))
    tasks = load_tasks(run / "tasks" / "held_out" / "tasks.jsonl")
    if args.tasks:
        tasks = tasks[:args.tasks]
    return str(run / args.policy), tasks, settings, tcfg.rollout.vllm_max_num_batched_tokens


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", help="a dojo demo output folder (runs/demo)")
    p.add_argument("--config", default="examples/demo.yaml", help="the demo config the run used")
    p.add_argument("--policy", default="sft", help="the checkpoint folder inside --run (sft, grpo/final, base)")
    p.add_argument("--samples", type=int, default=4, help="sampled episodes per task (plus one greedy)")
    p.add_argument("--tasks", type=int, default=0, help="only the first N held-out tasks (0: all)")
    p.add_argument("--sandboxes", default="8,32", help="engine variants: episodes at once, comma-separated")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if not args.quick and not args.run:
        p.error("--run RUN_DIR (a dojo demo output folder) or --quick")
    try:
        sizes = [int(x) for x in args.sandboxes.split(",")]
    except ValueError:
        p.error(f"--sandboxes: comma-separated integers, got {args.sandboxes!r}")
    if not sizes or min(sizes) < 1 or max(sizes) > 256:
        p.error("--sandboxes: each between 1 and 256")

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.evaluate import engine_generators, evaluate_policy
    from rl.vllm_sync import sync_weights

    result: dict[str, Any] = {"bench": "heldout_eval", "quick": args.quick, "variants": {}, "errors": {}}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, tasks, settings, budget = quick_setup(Path(tmp)) if args.quick else demo_setup(args)
        if args.quick:
            sizes = [2]
        result.update(policy=model_dir, tasks=len(tasks), samples=settings.samples, backend=settings.backend,
                      episodes=len(tasks) * (settings.samples + int(settings.greedy)))

        def record(name: str, ev: Any, seconds: float) -> None:
            result["variants"][name] = {"seconds": round(seconds, 2),
                                        "episodes_per_s": round(result["episodes"] / seconds, 3),
                                        "success": round(ev.success, 4), "greedy_success": ev.greedy_success,
                                        "mean_sampled_tokens": round(ev.mean_sampled_tokens, 1), "engine": ev.engine}
            console.print(f"{name}: {seconds:.1f} s, success {ev.success:.1%}, greedy {ev.greedy_success:.1%}")

        base = "transformers_8" if not args.quick else "transformers_2"
        t0 = time.perf_counter()
        ev = evaluate_policy(model_dir, tasks, **(dict(settings) | {"sandboxes": 8 if not args.quick else 2}))
        record(base, ev, time.perf_counter() - t0)

        t0 = time.perf_counter()
        llm = engine(model_dir, budget)
        result["engine_start_s"] = round(time.perf_counter() - t0, 2)
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32")
        for n in sizes:
            st = settings.model_copy(update={"sandboxes": n})
            t0 = time.perf_counter()
            sync_weights(llm, model)  # as HeldOutEval does per policy
            with st.rollout(tasks, tok) as rollout:
                ev = st.run(model_dir, tasks, rollout, engine_generators(llm), start=t0, out_dir=None, engine="vllm")
            record(f"vllm_{n}", ev, time.perf_counter() - t0)
    fastest = min((v["seconds"] for k, v in result["variants"].items() if k.startswith("vllm")), default=None)
    result["baseline"] = base
    result["speedup"] = round(result["variants"][base]["seconds"] / fastest, 2) if fastest else None
    _common.emit(result, head=("bench", "quick"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
