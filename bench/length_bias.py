"""Length bias: GRPO against Dr. GRPO from the same primed checkpoint, everything else equal.

    python bench/length_bias.py [--quick] [--from DEMO_DIR] [--seeds 0,1] [--steps N] [--condition all]
                                [--workers N] [--out DIR] [--set KEY=VALUE ...] [--gpu] [--plot PNG] [--save JSON]

The claim under test (Liu et al. 2025, "Understanding R1-Zero-Like Training", Dr. GRPO): GRPO's
per-response 1/|o| normaliser penalises long wrong answers less than short ones, so incorrect
responses grow longer under GRPO, and not under Dr. GRPO (constant normaliser, no std scaling).

Two methods, the only difference between their runs:
  grpo      train.grpo.loss_type=grpo     train.grpo.scale_rewards=group
  dr_grpo   train.grpo.loss_type=dr_grpo  train.grpo.scale_rewards=none
Each trains (rl.trainer.train, the demo's GRPO config plus ``--set``) from one primed checkpoint on
the same train tasks, for the same steps, with the same seeds. The checkpoint is DEMO_DIR/sft
trained on DEMO_DIR/tasks/train (``--from``, a finished `dojo demo` out_dir), or else is built
here by the demo's early stages (bench/_stages.py: tiny model, tasks, priming traces of
``--condition``, SFT). Per step, from each run's metrics.jsonl: ``episode/len_unsolved`` (mean
policy-sampled tokens of the step's unsolved episodes), ``episode/len_solved``,
``episode/solved`` and ``reward``.

Progress goes to stderr and a rich table to stdout; a PNG (both curves, seed means bold, seeds
thin) goes to --plot; the LAST stdout line is one JSON object: per method the per-step series (seed
mean and per seed), the mean of the first k and the last k steps (k = --k, default a quarter of
the steps), last - first, and the least-squares slope in tokens per step (of the seed-mean series
and per seed); the same figures for solved episodes and the solved fraction; the settings.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)

from bench import _stages  # noqa: E402

ROOT = _common.ROOT
METHODS: dict[str, list[str]] = {
    "grpo": ["train.grpo.loss_type=grpo", "train.grpo.scale_rewards=group"],
    "dr_grpo": ["train.grpo.loss_type=dr_grpo", "train.grpo.scale_rewards=none"],
}
SERIES = {"len_unsolved": "episode/len_unsolved", "len_solved": "episode/len_solved", "solved": "episode/solved",
          "reward": "reward", "mean_length": "completions/mean_length",
          # the learning signal: groups whose rewards are all equal have zero advantage under both methods
          "frac_reward_zero_std": "frac_reward_zero_std", "grad_norm": "grad_norm"}
QUICK = ["multistep={}", "tasks=24", "held_out=4", "sft.epochs=1", "train.grpo.per_device_train_batch_size=8",
         "train.grpo.num_generations=4", "train.grpo.max_completion_length=64", "train.rollout.use_vllm=false"]


def log(msg: str) -> None:
    print(f"[length_bias] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ workers

def worker_prime(spec: dict[str, Any]) -> dict[str, Any]:
    """The demo's stages 1-4: tiny model, tasks, priming traces, SFT, in ``dir``."""
    out = Path(spec["dir"])
    cfg = _stages.demo_config([*spec["overrides"], f"out_dir={out}"])
    backend = _stages.backend_of(cfg, out)
    base = _stages.build_base(cfg, out)
    train_tasks, held = _stages.make_tasks(cfg, out, backend)
    res = _stages.prime_condition(cfg, base, train_tasks, out, backend)
    return {**res, "train_tasks": len(train_tasks), "backend": backend, "engine": _stages.engine_of(cfg, out)}


def worker_train(spec: dict[str, Any]) -> dict[str, Any]:
    out = Path(spec["dir"])
    cfg = _stages.demo_config([*spec["overrides"], f"out_dir={out}"])
    res = _stages.run_grpo(cfg, Path(spec["tasks_dir"]), Path(spec["sft_dir"]), out / "grpo")
    from rl.run import read_metrics_jsonl

    res["history"] = read_metrics_jsonl(out / "grpo" / "metrics.jsonl")
    return res


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    return (worker_prime if spec["kind"] == "prime" else worker_train)(spec)


# ------------------------------------------------------------------ analysis

def per_step(history: list[dict[str, Any]], key: str, steps: int) -> list[float | None]:
    """The value of ``key`` logged at steps 1..steps (None where the step logged none)."""
    by: dict[int, float] = {}
    for h in history:
        if _stages.finite(h.get(key)) and isinstance(h.get("step"), int):
            by[h["step"]] = float(h[key])
    return [by.get(s) for s in range(1, steps + 1)]


def mean_of(xs: list[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return sum(v) / len(v) if v else None


def slope(ys: list[float | None]) -> float | None:
    """Least-squares slope per step over the steps that have a value."""
    pts = [(i + 1, y) for i, y in enumerate(ys) if y is not None]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


def rnd(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def describe_series(per_seed: dict[str, list[float | None]], k: int) -> dict[str, Any]:
    n = max((len(v) for v in per_seed.values()), default=0)
    mean = [rnd(mean_of([v[i] for v in per_seed.values() if i < len(v)])) for i in range(n)]
    first, last = mean_of(mean[:k]), mean_of(mean[-k:])
    return {"mean": mean, "per_seed": {s: [rnd(x) for x in v] for s, v in per_seed.items()},
            "first_k": rnd(first), "last_k": rnd(last),
            "last_minus_first": rnd(None if first is None or last is None else last - first),
            "slope_per_step": rnd(slope(mean), 4),
            "slope_per_step_per_seed": {s: rnd(slope(v), 4) for s, v in per_seed.items()},
            "steps_with_value": sum(x is not None for x in mean)}


def plot(result: dict[str, Any], path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2)
    colors = {"grpo": "tab:red", "dr_grpo": "tab:blue"}
    for ax, key, title in ((axes[0], "len_unsolved", "incorrect (unsolved) episodes: mean policy tokens"),
                           (axes[1], "solved", "solved fraction")):
        for m, res in result["methods"].items():
            s = res[key]
            for v in s["per_seed"].values():
                xs = [i + 1 for i, y in enumerate(v) if y is not None]
                ax.plot(xs, [y for y in v if y is not None], color=colors.get(m), alpha=0.25, lw=0.8)
            xs = [i + 1 for i, y in enumerate(s["mean"]) if y is not None]
            label = m if key != "len_unsolved" else f"{m} (slope {s['slope_per_step']} tok/step)"
            ax.plot(xs, [y for y in s["mean"] if y is not None], color=colors.get(m), lw=2, label=label)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"GRPO vs Dr. GRPO from one primed checkpoint ({len(result['seeds'])} seeds, "
                 f"{result['steps']} steps)", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def print_table(result: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    t = Table(title="mean policy tokens of incorrect (unsolved) episodes per step (seed mean)")
    t.add_column("step", justify="right")
    for m in result["methods"]:
        t.add_column(f"{m} len_unsolved", justify="right")
        t.add_column(f"{m} solved", justify="right")
    for i in range(result["steps"]):
        cells = []
        for res in result["methods"].values():
            lu, so = res["len_unsolved"]["mean"], res["solved"]["mean"]
            cells += ["-" if i >= len(lu) or lu[i] is None else f"{lu[i]:.1f}",
                      "-" if i >= len(so) or so[i] is None else f"{so[i]:.0%}"]
        t.add_row(str(i + 1), *cells)
    console.print(t)
    s = Table(title=f"first {result['k']} vs last {result['k']} steps")
    for c in ("method", "series", "first k", "last k", "last - first", "slope / step"):
        s.add_column(c, justify="right")
    for m, res in result["methods"].items():
        for key in ("len_unsolved", "len_solved", "solved"):
            d = res[key]
            s.add_row(m, key, *(str(d[x]) for x in ("first_k", "last_k", "last_minus_first", "slope_per_step")))
    console.print(s)


# ------------------------------------------------------------------ main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny settings (see QUICK), 3 steps, seed 0")
    ap.add_argument("--from", dest="from_dir", default=None, help="a finished `dojo demo` out_dir (its sft, tasks)")
    ap.add_argument("--condition", default="all", help="priming condition when the checkpoint is built here")
    ap.add_argument("--seeds", default=None, help="comma-separated training seeds (default 0,1; quick 0)")
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps per run (default: the demo's; quick 3)")
    ap.add_argument("--k", type=int, default=None, help="steps in the first-k / last-k means (default steps // 4)")
    ap.add_argument("--plot", default=None, help="PNG path (default: <work>/length_bias.png; not kept in a temp dir)")
    _stages.add_run_options(ap, workers_help="runs at a time (default: all of them, at most cpus)",
                            save_help="also write the JSON here")
    args = ap.parse_args()
    if args.worker:
        return _stages.worker_entry(args.worker, worker)

    from rich.console import Console

    console = Console(width=max(120, Console().width))
    seeds = [int(s) for s in (args.seeds or ("0" if args.quick else "0,1")).split(",")]
    overrides = [*_stages.run_overrides(args, QUICK), f"condition={args.condition}"]
    if args.steps or args.quick:
        overrides.append(f"train.grpo.max_steps={args.steps or 3}")
    cfg = _stages.demo_config(overrides)  # a bad override fails here, before anything runs
    steps = _stages.grpo_config(cfg, ROOT, ROOT, ROOT / "grpo").grpo.max_steps
    k = args.k or max(1, steps // 4)
    cpus = os.cpu_count() or 1
    runs = len(seeds) * len(METHODS)
    workers = min(args.workers or runs, cpus)
    threads = args.threads or max(1, cpus // workers)
    tmp = args.out is None
    work = Path(args.out or tempfile.mkdtemp(prefix="length_bias-"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result: dict[str, Any] = {"quick": args.quick, "seeds": seeds, "steps": steps, "k": k, "errors": {}}
    try:
        if args.from_dir:
            src = Path(args.from_dir)
            sft_dir, tasks_dir = src / "sft", src / "tasks"
            if not (sft_dir / "config.json").is_file() or not (tasks_dir / "train" / "tasks.jsonl").is_file():
                raise SystemExit(f"{src} is no finished demo out_dir (needs sft/config.json, tasks/train/tasks.jsonl)")
            primed = {"ok": True, "sft_dir": str(sft_dir), "source": str(src)}
        else:
            log(f"building the primed checkpoint ({args.condition}) in {work / 'primed'}")
            spec = {"kind": "prime", "seed": cfg.seed, "dir": str(work / "primed"), "threads": args.threads or cpus,
                    "overrides": overrides}
            primed = _stages.run_job(__file__, spec, args.job_timeout)
            if not primed.get("ok"):
                log(f"priming failed: {primed.get('error')}\n{primed.get('log_tail', '')}")
                result["errors"]["prime"] = primed.get("error")
            sft_dir, tasks_dir = work / "primed" / "sft", work / "primed" / "tasks"
        result["checkpoint"] = {k2: primed.get(k2) for k2 in ("source", "sft_dir", "traces", "train_tasks",
                                                               "sft_final_loss", "sft_token_accuracy", "job_minutes")}
        specs = [{"kind": "train", "method": m, "seed": s, "dir": str(work / f"{m}-seed-{s}"), "threads": threads,
                  "sft_dir": str(sft_dir), "tasks_dir": str(tasks_dir),
                  "overrides": [*overrides, *mo, f"seed={s}"]}
                 for s in seeds for m, mo in METHODS.items()] if primed.get("ok") else []
        log(f"{len(specs)} runs, {workers} at a time x {threads} threads; {steps} steps each")
        done = _stages.run_all(__file__, specs, workers, args.job_timeout,
                               lambda sp: f"{sp['method']} seed={sp['seed']}", log)
        result["methods"] = {}
        for m in METHODS:
            hist = {}
            for sp, r in zip(specs, done, strict=True):
                if sp["method"] != m:
                    continue
                if r.get("ok"):
                    hist[str(sp["seed"])] = r["history"]
                else:
                    result["errors"][f"{m}/seed-{sp['seed']}"] = r.get("error")
                    log(f"{m} seed {sp['seed']} failed:\n{r.get('log_tail', '')}")
            res = {name: describe_series({s: per_step(h, key, steps) for s, h in hist.items()}, k)
                   for name, key in SERIES.items()}
            res["overrides"] = METHODS[m]
            res["minutes_per_run"] = _stages.stats([r.get("job_minutes") for sp, r in zip(specs, done, strict=True)
                                                    if sp["method"] == m])
            result["methods"][m] = res
        g, d = result["methods"]["grpo"]["len_unsolved"], result["methods"]["dr_grpo"]["len_unsolved"]
        result["verdict"] = {
            "grpo_len_unsolved_slope": g["slope_per_step"], "dr_grpo_len_unsolved_slope": d["slope_per_step"],
            "grpo_len_unsolved_growth": g["last_minus_first"], "dr_grpo_len_unsolved_growth": d["last_minus_first"],
            "claim_holds": None if g["last_minus_first"] is None or d["last_minus_first"] is None else bool(
                g["last_minus_first"] > 0 and g["last_minus_first"] > d["last_minus_first"])}
        tcfg = _stages.grpo_config(cfg, work, work, work / "grpo")
        result["settings"] = {"overrides": overrides, "methods": METHODS, "condition": args.condition,
                              "grpo": tcfg.grpo.model_dump(), "rollout": tcfg.rollout.model_dump(),
                              "tasks": cfg.tasks, "workers": workers, "threads_per_worker": threads,
                              "sandbox_backend": primed.get("backend"), "rollout_engine": primed.get("engine")}
        result["machine"] = _stages.machine()
        result["minutes"] = round((time.perf_counter() - start) / 60, 2)
        png = Path(args.plot) if args.plot else work / "length_bias.png"
        try:
            result["plot"] = str(plot(result, png))
        except Exception as e:  # noqa: BLE001 - the numbers still count
            result["errors"]["plot"] = f"{type(e).__name__}: {e}"
        print_table(result, console)
        v = result["verdict"]
        console.print(f"len_unsolved last-k minus first-k: grpo {v['grpo_len_unsolved_growth']}, dr_grpo "
                      f"{v['dr_grpo_len_unsolved_growth']}; claim (grpo grows, more than dr_grpo): {v['claim_holds']}")
    finally:
        if tmp and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    _stages.report(result, args.save, head=("quick", "seeds", "steps", "k", "minutes"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
