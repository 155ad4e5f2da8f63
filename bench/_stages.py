"""The `dojo demo` pipeline (rl/demo.py) cut into stages a study can run separately and share.

bench/priming_study.py builds the base model, the tasks and the base policy's held-out evaluation
once per seed (none depends on the priming condition) and then runs priming -> SFT -> GRPO ->
evaluation per condition; bench/length_bias.py builds one primed checkpoint and trains it twice.
Each stage does what the same stage of ``rl.demo.run_demo`` does, with the demo's own config
(``rl.demo.load_demo_config``: its defaults, YAML and ``key=value`` overrides) and helpers
(``train_config``, ``pick_tools``), so a study's numbers are the demo's numbers, stage by stage.
The one difference: the stages are placed in folders the study picks (the tasks of a seed are
shared by its conditions).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

# The GPU machine runs these (no vLLM there; local bubblewrap sandboxes): `--set` adds them. Padded
# generation: a study runs several trainers on one GPU, and each continuous-batching session would
# reserve half the free memory for its KV cache (and padded batches reproduce from their seeds).
GPU_OVERRIDES = ["train.rollout.use_vllm=false", "train.rollout.sandbox_backend=local",
                 "train.rollout.hf_generation=padded"]


def add_run_options(ap: Any, *, workers_help: str, save_help: str) -> None:
    """The options both studies share: overrides, GPU mode, parallelism, work folder, output, the worker hook."""
    import argparse

    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a demo config override (rl.demo.DemoConfig), e.g. train.grpo.max_steps=20; repeatable")
    ap.add_argument("--gpu", action="store_true", help=f"add {' '.join(GPU_OVERRIDES)}")
    ap.add_argument("--workers", type=int, default=None, help=workers_help)
    ap.add_argument("--threads", type=int, default=None, help="torch threads per job (default: cpus // jobs at a time)")
    ap.add_argument("--out", default=None, help="work folder (default: a fresh temp dir, removed unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the temp work folder")
    ap.add_argument("--save", default=None, help=save_help)
    ap.add_argument("--job-timeout", type=float, default=3 * 3600.0, help="seconds per job")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)


def run_overrides(args: Any, quick: list[str]) -> list[str]:
    """A study's overrides of the demo config: its --quick settings, the GPU machine's, then --set's."""
    return [*(quick if args.quick else []), *(GPU_OVERRIDES if args.gpu else []), *args.overrides]


def demo_config(overrides: list[str]) -> Any:
    """The demo's config (its defaults kept) plus ``overrides``."""
    from rl.demo import load_demo_config

    return load_demo_config(None, overrides)


def backend_of(cfg: Any, out: Path) -> str:
    from rl.demo import sandbox_backend

    return sandbox_backend(cfg)


def engine_of(cfg: Any, out: Path) -> str:
    from rl.demo import rollout_engine

    return rollout_engine(cfg)


def build_base(cfg: Any, out: Path) -> Path:
    """Stage 1 (rl.demo.build_base)."""
    from rl.demo import build_base as build

    return build(cfg, out)


def make_tasks(cfg: Any, out: Path, backend: str) -> tuple[list[Any], list[Any]]:
    """Stage 2 (rl.demo.make_tasks)."""
    from rl.demo import make_tasks as make

    return make(cfg, out, backend)


def load_split(tasks_dir: Path) -> tuple[list[Any], list[Any]]:
    from synth.tasks import load_tasks

    return load_tasks(tasks_dir / "train"), load_tasks(tasks_dir / "held_out")


def train_sample(train: list[Any], held: list[Any], per_family: int, seed: int) -> list[Any]:
    """Training tasks drawn like the held-out set, for telling a fitted policy from one that transfers
    (bench/results/reader_gpu.md sections 14 and 21): per family the held-out set has, up to ``per_family``
    of its training tasks (never more than the held-out set has of it), seeded, in the training order."""
    import random
    from collections import Counter

    from synth.task_families import family_of

    want = Counter(family_of(t) for t in held)
    rng = random.Random(seed)
    picked: set[str] = set()
    for fam, n in sorted(want.items()):
        ids = [t.id for t in train if family_of(t) == fam]
        picked.update(rng.sample(ids, min(per_family, n, len(ids))))
    return [t for t in train if t.id in picked]


def prime_condition(cfg: Any, base: Path, train_tasks: list[Any], out: Path, backend: str,
                    console: Any = None) -> dict[str, Any]:
    """Stages 3-4: the condition's priming traces (``out/prime``) and SFT on them (``out/sft``)."""
    from rl.demo import train_config
    from rl.sft import prime

    export = priming_traces(cfg, train_tasks, out / "prime", backend, train_config(cfg, out).rollout.system_prompt)
    callbacks = []
    if console is not None:
        from rl.run import RichProgressCallback

        callbacks = [RichProgressCallback(console)]
    sft = prime(base, export.dataset, out / "sft", cfg.sft, callbacks=callbacks)
    return {"traces": export.rows, "sft_dir": sft.model_dir, "sft_steps": sft.steps, "sft_first_loss": sft.first_loss,
            "sft_final_loss": sft.final_loss, "sft_token_accuracy": sft.mean_token_accuracy}


def priming_traces(cfg: Any, train_tasks: list[Any], out_dir: Path, backend: str, system_prompt: str) -> Any:
    """The condition's priming traces of ``train_tasks``, written into ``out_dir`` (seeded: the same tasks and
    settings give the same traces)."""
    from rl.demo import priming_drills_of
    from synth.behaviours import generate_traces
    from synth.sft_data import write_trajectories

    traces = generate_traces(train_tasks, cfg.condition, backend=backend, system_prompt=system_prompt,
                             seed=cfg.seed, answers=cfg.answers, narrow_reads=cfg.narrow_reads)
    return write_trajectories(traces + priming_drills_of(cfg), out_dir)


def grpo_config(cfg: Any, tasks_dir: Path, model_dir: Path, run_dir: Path, rl_tasks: Path | None = None) -> Any:
    """The demo's ``dojo train`` config of stage 5, trained on ``rl_tasks`` (default ``tasks_dir/train``)
    into ``run_dir``."""
    from rl.demo import train_config

    t = train_config(cfg, run_dir.parent, model_dir)
    tasks = rl_tasks or tasks_dir / "train"
    return t.model_copy(update={"data": t.data.model_copy(update={"tasks": str(tasks)}),
                                "run": t.run.model_copy(update={"output_dir": str(run_dir)})})


def run_grpo(cfg: Any, tasks_dir: Path, model_dir: Path, run_dir: Path) -> dict[str, Any]:
    """Stage 5: GRPO (the demo's Dr. GRPO unless ``cfg.train`` says otherwise) into ``run_dir``; with
    ``cfg.rl_multistep`` on the seed's training tasks plus fresh multi-step ones (rl.demo.rl_tasks, made in
    ``run_dir``'s parent)."""
    from rl.demo import rl_tasks, sandbox_backend
    from rl.trainer import train

    done = finished_run(run_dir)
    if done is not None:  # a job cut during its evaluation: the next call evaluates, it does not train again
        return done
    tasks, fresh = tasks_dir / "train", 0
    if cfg.rl_multistep:
        tasks, fresh = rl_tasks(cfg, run_dir.parent, sandbox_backend(cfg), *load_split(tasks_dir))
    tcfg = replay_traces(cfg, grpo_config(cfg, tasks_dir, model_dir, run_dir, tasks), tasks_dir)
    res = train(tcfg, run_dir=run_dir, progress=False)
    return {"grpo_steps": res.steps, "first_reward": res.first_reward_mean, "final_reward": res.final_reward_mean,
            "final_dir": str(run_dir / "final"), "fresh_rl_tasks": fresh}


def replay_traces(cfg: Any, tcfg: Any, tasks_dir: Path) -> Any:
    """``tcfg`` with its priming replay's traces in place: the seed's own (``tasks_dir``'s sibling
    ``prime``) where they are kept, else made again into ``replay.data`` from the seed's training tasks
    (the same traces: generate_traces is seeded; a seed carried without them, e.g. reader_gpu.sh's tarballs)."""
    from rl.replay import has_traces

    r = tcfg.replay
    if r.coef <= 0 or has_traces(r.data):
        return tcfg
    kept = tasks_dir.parent / "prime"
    if has_traces(kept):
        return tcfg.model_copy(update={"replay": r.model_copy(update={"data": str(kept)})})
    train_tasks, _ = load_split(tasks_dir)
    priming_traces(cfg, train_tasks, Path(r.data), backend_of(cfg, Path(r.data).parent), tcfg.rollout.system_prompt)
    return tcfg


def finished_run(run_dir: Path) -> dict[str, Any] | None:
    """What ``run_grpo`` returns, read back from a run whose ``run.json`` says it finished and whose
    ``final`` model is there; None otherwise."""
    from rl.metrics import read_metrics_jsonl
    from rl.run import read_run_record

    run = read_run_record(run_dir)
    if run.get("status") != "finished" or not (run_dir / "final" / "config.json").is_file():
        return None
    rewards = [h["reward"] for h in read_metrics_jsonl(run_dir / "metrics.jsonl") if "reward" in h]
    return {"grpo_steps": run.get("final_step"), "first_reward": rewards[0] if rewards else None,
            "final_reward": rewards[-1] if rewards else None, "final_dir": str(run_dir / "final"),
            "fresh_rl_tasks": None, "resumed": True}


def evaluate(cfg: Any, model: Path, held: list[Any], out_dir: Path, backend: str) -> dict[str, Any]:
    """Stage 6 for one policy: held-out success, sampled and greedy, exactly as the demo runs it."""
    from rl.demo import train_config
    from rl.evaluate import evaluate_policy, pass_at_k
    from synth.episode import EpisodeLimits

    tcfg = train_config(cfg, out_dir)
    ro = tcfg.rollout
    ev = evaluate_policy(
        model, held, reward=tcfg.reward, samples=cfg.eval_samples, temperature=tcfg.grpo.temperature,
        max_completion_length=tcfg.grpo.max_completion_length,
        limits=EpisodeLimits(max_turns=ro.max_turns, max_tool_calls=ro.max_tool_calls, max_tokens=10**9),
        system_prompt=ro.system_prompt, backend=backend, seed=cfg.seed + 1, out_dir=out_dir)
    from rl.evaluate import pooled_success
    from synth.task_families import family_of, is_multistep

    multi = {t.id for t in held if is_multistep(family_of(t))}
    mine = [o for o in ev.per_task if o.task_id in multi]
    return {"success": ev.success, "greedy_success": ev.greedy_success, "mean_reward": ev.mean_reward,
            "mean_sampled_tokens": ev.mean_sampled_tokens, "seconds": round(ev.seconds, 1),
            "pass_at_k": pass_at_k(ev.per_task),
            "by_tool": by_gold_tool(held, ev.per_task),
            # the multi-step families pooled (issue 23): sampled, greedy, pass@k
            "multistep_success": pooled_success(ev.per_task, multi),
            "multistep_greedy_success": sum(bool(o.greedy_solved) for o in mine) / len(mine) if mine else None,
            "multistep_pass_at_k": pass_at_k(mine) if mine else None}


def by_gold_tool(tasks: list[Any], per_task: list[Any]) -> dict[str, dict[str, Any]]:
    """Held-out success per task family (rl.evaluate.by_family)."""
    from rl.evaluate import by_family

    return by_family(tasks, per_task)


def parse_variant(text: str) -> tuple[str, list[str]]:
    """A ``--variant NAME:KEY=VALUE;KEY=VALUE`` of the RL studies as (name, overrides)."""
    name, sep, sets = text.partition(":")
    if not sep or not name.strip():
        raise SystemExit(f"--variant {text!r}: write NAME:KEY=VALUE;KEY=VALUE (or NAME: for the demo's settings)")
    return name.strip(), [s.strip() for s in sets.split(";") if s.strip()]


def seed_overrides(seed: int) -> list[str]:
    """A study's per-seed overrides: the demo, the tiny model's init (base=random) and SFT all take the seed."""
    return [f"seed={seed}", f"tiny.seed={seed}", f"sft.seed={seed}"]


def record_failures(result: dict[str, Any], runs: dict[tuple[str, int], dict[str, Any]],
                    log: Callable[[str], None]) -> None:
    """Each failed (name, seed) job into ``result["errors"]``, and its log tail to ``log``."""
    for (name, seed), r in runs.items():
        if not r.get("ok"):
            result["errors"][f"{name}/seed-{seed}"] = r.get("error")
            log(f"{name} seed {seed} failed; log tail:\n{r.get('log_tail', '')}")


def study_settings(overrides: list[str], work: Path, workers: int, threads: int, first: dict[str, Any],
                   per_seed: str, **extra: Any) -> dict[str, Any]:
    """What a seeds x jobs study ran with: the overrides, the resolved demo config, the parallelism."""
    cfg = demo_config(overrides)
    return {"overrides": overrides, "workers": workers, "threads_per_worker": threads,
            "sandbox_backend": first.get("backend"), "rollout_engine": first.get("engine"),
            "tasks": cfg.tasks, "held_out": cfg.held_out, "eval_samples": cfg.eval_samples, **extra,
            "base": cfg.base, "sft": cfg.sft.model_dump(exclude={"seed"}),
            "tiny": cfg.tiny.model_dump(exclude={"out_dir", "seed"}),
            "train": grpo_config(cfg, work, work, work / "grpo").grpo.model_dump(), "per_seed": per_seed}


def report(result: dict[str, Any], save: str | None, head: tuple[str, ...]) -> None:
    """The study's JSON to ``save`` (when given), then as the one line printed last."""
    from bench._common import emit

    if save:
        Path(save).parent.mkdir(parents=True, exist_ok=True)
        Path(save).write_text(json.dumps(result, indent=2) + "\n")
    emit(result, head=head)


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def stats(xs: list[float | None]) -> dict[str, float | int | None]:
    """mean, std (population), min, max and n of the finite values."""
    v = [float(x) for x in xs if finite(x)]
    if not v:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    m = sum(v) / len(v)
    return {"mean": round(m, 4), "std": round(math.sqrt(sum((x - m) ** 2 for x in v) / len(v)), 4),
            "min": round(min(v), 4), "max": round(max(v), 4), "n": len(v)}


def set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, n))


def run_job(script: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """``script --worker SPEC`` as a subprocess (its output to ``<dir>.log``); the result it wrote in
    ``<dir>/job_result.json`` (``ok`` false, the error and the log's tail, when it failed)."""
    d = Path(spec["dir"])
    d.mkdir(parents=True, exist_ok=True)
    spec_path, log_path = d / "job.json", d.with_suffix(".log")
    spec["result"] = str(d / "job_result.json")
    spec_path.write_text(json.dumps(spec, indent=2))
    threads = str(spec.get("threads", 1))
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads}
    t0 = time.perf_counter()
    with open(log_path, "w") as f:
        try:
            rc = subprocess.run([sys.executable, script, "--worker", str(spec_path)], stdout=f, stderr=f, env=env,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = -9
    res = json.loads(Path(spec["result"]).read_text()) if Path(spec["result"]).is_file() else {}
    if not res.get("ok"):
        tail = log_path.read_text(errors="replace")[-1500:] if log_path.is_file() else ""
        res = {"ok": False, "error": res.get("error") or f"worker exit {rc}", "log_tail": tail}
    res["job_minutes"] = round((time.perf_counter() - t0) / 60, 2)
    return res


def run_all(script: str, specs: list[dict[str, Any]], workers: int, timeout: float,
            describe: Callable[[dict[str, Any]], str], log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every spec through :func:`run_job`, ``workers`` at a time; results in the order of ``specs``."""
    with cf.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futs = {pool.submit(run_job, script, s, timeout): s for s in specs}
        for fut in cf.as_completed(futs):
            r = fut.result()
            log(f"{describe(futs[fut])}: {'ok' if r.get('ok') else 'FAILED ' + str(r.get('error'))} "
                f"({r['job_minutes']} min)")
    return [f.result() for f in futs]


def worker_entry(spec_path: str, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """A worker subprocess: run ``fn(spec)`` and write its result (or the error) where the parent looks."""
    import traceback

    spec = json.loads(Path(spec_path).read_text())
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    set_threads(spec.get("threads", 1))
    try:
        res = fn(spec)
        res["ok"] = True
    except Exception as e:  # noqa: BLE001 - reported to the parent, which goes on with the other jobs
        traceback.print_exc()
        res = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
    Path(spec["result"]).write_text(json.dumps(res, indent=2))
    return 0 if res["ok"] else 1


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"host_cpus": os.cpu_count(), "platform": platform.platform(),
                            "python": platform.python_version()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001
        pass
    return info
