"""Priming study: the same RL budget from each cognitive-behaviour priming condition, over seeds.

    python bench/priming_study.py [--quick] [--seeds 0,1,2] [--conditions all,none,incorrect] [--controls]
                                  [--workers N] [--out DIR] [--set KEY=VALUE ...] [--gpu]

The claim under test, in miniature (Gandhi et al. 2025, "Cognitive Behaviors that Enable
Self-Improving Reasoners"): priming on behaviour-rich traces, even ones with WRONG answers
(``incorrect``), beats the no-behaviour control (``none``) after RL. Each (condition, seed) is the
`dojo demo` pipeline (rl/demo.py, via bench/_stages.py) with the demo's config plus ``--set``
overrides: priming traces of the condition -> SFT -> Dr. GRPO -> held-out evaluation. What does
not depend on the condition is built once per seed and shared: the tiny base model (``tiny.seed``
= the seed), the tasks and their train / held-out split, and the base policy's held-out
evaluation (the baseline, measured in the same run). SFT and GRPO seeds are the seed too, so the
conditions of one seed differ only in their priming traces.

Jobs run as subprocesses, ``--workers`` at a time (torch threads split between them): first one
``prepare`` job per seed, then one job per (condition, seed). Progress goes to stderr and the
rich table to stdout; the LAST stdout line is one JSON object: per condition the mean, std
(population), min and max over seeds of held-out success (sampled and greedy) after SFT and after
GRPO, the per-seed values, the GRPO reward curve ends, the minutes; the base policy per seed; the
settings (every override) and the machine. ``--controls`` adds ``empty`` and ``length_matched``.
``--gpu`` adds the GPU machine's overrides (transformers generation, local sandboxes).
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
RESULTS = ROOT / "bench" / "results"
DEFAULT_CONDITIONS = ["all", "none", "incorrect"]
CONTROLS = ["empty", "length_matched"]
# Tiny settings for --quick (a few minutes on 2 CPU cores): every stage runs, on little.
QUICK = ["multistep={}", "tasks=24", "held_out=6", "sft.epochs=1", "eval_samples=1", "train.grpo.max_steps=2",
         "train.grpo.per_device_train_batch_size=8", "train.grpo.num_generations=4",
         "train.grpo.max_completion_length=64", "train.rollout.use_vllm=false"]
METRICS = ("sft_success", "sft_greedy_success", "grpo_success", "grpo_greedy_success")


def log(msg: str) -> None:
    print(f"[priming_study] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ workers (one subprocess per job)

def worker_prepare(spec: dict[str, Any]) -> dict[str, Any]:
    """The seed's base model, tasks and base-policy evaluation, in ``work/seed-S``."""
    out = Path(spec["dir"])
    cfg = _stages.demo_config([*spec["overrides"], f"out_dir={out}"])
    backend = _stages.backend_of(cfg, out)
    t0 = time.perf_counter()
    base = _stages.build_base(cfg, out)
    train_tasks, held = _stages.make_tasks(cfg, out, backend)
    t1 = time.perf_counter()
    ev = _stages.evaluate(cfg, base, held, out / "eval" / "base", backend)
    return {"seed": cfg.seed, "base_dir": str(base), "train_tasks": len(train_tasks), "held_out_tasks": len(held),
            "base_success": ev["success"], "base_greedy_success": ev["greedy_success"], "backend": backend,
            "engine": _stages.engine_of(cfg, out),
            "minutes": {"model_and_tasks": round((t1 - t0) / 60, 2),
                        "eval_base": round((time.perf_counter() - t1) / 60, 2)}}


def worker_condition(spec: dict[str, Any]) -> dict[str, Any]:
    """Priming traces -> SFT -> GRPO -> held-out evaluation of the SFT and GRPO policies, in
    ``work/seed-S/COND``, from the seed's shared base model and tasks."""
    seed_dir, out = Path(spec["seed_dir"]), Path(spec["dir"])
    cfg = _stages.demo_config([*spec["overrides"], f"condition={spec['condition']}", f"out_dir={out}"])
    backend = _stages.backend_of(cfg, out)
    train_tasks, held = _stages.load_split(seed_dir / "tasks")
    minutes: dict[str, float] = {}
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        minutes[name] = round((now - t) / 60, 2)
        t = now

    res: dict[str, Any] = {"condition": cfg.condition, "seed": cfg.seed}
    res.update(_stages.prime_condition(cfg, seed_dir / "base", train_tasks, out, backend))
    lap("prime_and_sft")
    res.update(_stages.run_grpo(cfg, seed_dir / "tasks", Path(res["sft_dir"]), out / "grpo"))
    lap("grpo")
    from rl.run import read_metrics_jsonl

    hist = [h for h in read_metrics_jsonl(out / "grpo" / "metrics.jsonl") if "frac_reward_zero_std" in h]
    # the learning signal: a group whose rewards are all equal has zero advantage
    res["frac_reward_zero_std"] = _stages.stats([h["frac_reward_zero_std"] for h in hist])["mean"]
    res["steps_with_gradient"] = sum(1 for h in hist if _stages.finite(h.get("grad_norm")) and h["grad_norm"] > 0)
    for name, model in (("sft", Path(res["sft_dir"])), ("grpo", Path(res["final_dir"]))):
        ev = _stages.evaluate(cfg, model, held, out / "eval" / name, backend)
        res[f"{name}_success"], res[f"{name}_greedy_success"] = ev["success"], ev["greedy_success"]
        res[f"{name}_policy_tokens"] = round(ev["mean_sampled_tokens"], 1)
    lap("eval")
    res["minutes"] = minutes
    return res


def describe(s: dict[str, Any]) -> str:
    return f"{s['kind']} seed={s['seed']}" + (f" {s['condition']}" if s["kind"] == "condition" else "")


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    return (worker_prepare if spec["kind"] == "prepare" else worker_condition)(spec)


# ------------------------------------------------------------------ report

def summarize(conditions: list[str], seeds: list[int], prepared: dict[int, dict[str, Any]],
              runs: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for c in conditions:
        ok = {s: runs[(c, s)] for s in seeds if runs.get((c, s), {}).get("ok")}
        row: dict[str, Any] = {m: _stages.stats([ok[s].get(m) for s in ok]) for m in METRICS}
        row["grpo_gain"] = _stages.stats([ok[s]["grpo_success"] - ok[s]["sft_success"] for s in ok])
        row["per_seed"] = {str(s): {k: r.get(k) for k in (*METRICS, "first_reward", "final_reward", "grpo_steps",
                                                          "traces", "sft_final_loss", "sft_policy_tokens",
                                                          "frac_reward_zero_std", "steps_with_gradient",
                                                          "grpo_policy_tokens", "minutes")}
                           for s, r in ok.items()}
        row["minutes_per_seed"] = _stages.stats([r.get("job_minutes") for r in ok.values()])
        row["seeds_ok"] = len(ok)
        per[c] = row
    base = {str(s): {k: p.get(k) for k in ("base_success", "base_greedy_success", "train_tasks", "held_out_tasks")}
            for s, p in prepared.items() if p.get("ok")}
    base_stats = {k: _stages.stats([b[k] for b in base.values()]) for k in ("base_success", "base_greedy_success")}
    return {"conditions": per, "base": {"per_seed": base, **base_stats}}


def verdict(per: dict[str, Any]) -> dict[str, Any]:
    """The paper's claim in miniature: mean GRPO success of ``all`` and of ``incorrect`` above ``none``."""
    def mean(c: str, m: str) -> float | None:
        return (per.get(c) or {}).get(m, {}).get("mean")

    out: dict[str, Any] = {}
    for m in ("grpo_success", "grpo_greedy_success"):
        none = mean("none", m)
        for c in ("all", "incorrect"):
            x = mean(c, m)
            out[f"{c}_minus_none_{m}"] = None if x is None or none is None else round(x - none, 4)
    a, b = out.get("all_minus_none_grpo_success"), out.get("incorrect_minus_none_grpo_success")
    out["claim_holds_sampled"] = None if a is None or b is None else bool(a > 0 and b > 0)
    return out


def print_table(result: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    def fmt(s: dict[str, Any]) -> str:
        if s.get("mean") is None:
            return "-"
        return f"{s['mean']:.1%} ± {s['std']:.1%} [{s['min']:.0%}, {s['max']:.0%}]"

    t = Table(title=f"held-out success after priming + RL (mean ± std [min, max] over {len(result['seeds'])} seeds)")
    t.add_column("condition")
    for m in (*METRICS, "grpo_gain"):
        t.add_column(m.replace("_success", "").replace("_", " "), justify="right")
    t.add_column("per-seed grpo (sampled)", justify="right")
    t.add_column("min/seed", justify="right")
    b = result["base"]
    t.add_row("base (no SFT)", fmt(b["base_success"]), fmt(b["base_greedy_success"]), "", "", "",
              " ".join(f"{v['base_success']:.0%}" for v in b["per_seed"].values()), "")
    for c, row in result["conditions"].items():
        seeds = " ".join(f"{v['grpo_success']:.0%}" for v in row["per_seed"].values())
        t.add_row(c, *(fmt(row[m]) for m in (*METRICS, "grpo_gain")), seeds,
                  "-" if row["minutes_per_seed"]["mean"] is None else f"{row['minutes_per_seed']['mean']:.1f}")
    console.print(t)


# ------------------------------------------------------------------ main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny settings (see QUICK), seed 0, all and none")
    ap.add_argument("--seeds", default=None, help="comma-separated (default 0,1,2; quick 0)")
    ap.add_argument("--conditions", default=None, help=f"comma-separated (default {','.join(DEFAULT_CONDITIONS)}; "
                                                       "quick all,none)")
    ap.add_argument("--controls", action="store_true", help=f"add {' and '.join(CONTROLS)}")
    _stages.add_run_options(ap, workers_help="jobs at a time (default: cpus // 2, at least 1)",
                            save_help="also write the JSON here (e.g. bench/results/priming_study.json)")
    args = ap.parse_args()
    if args.worker:
        return _stages.worker_entry(args.worker, worker)

    from rich.console import Console

    console = Console(width=max(160, Console().width))
    seeds = [int(s) for s in (args.seeds or ("0" if args.quick else "0,1,2")).split(",")]
    conditions = (args.conditions or ("all,none" if args.quick else ",".join(DEFAULT_CONDITIONS))).split(",")
    conditions += [c for c in CONTROLS if args.controls and c not in conditions]
    overrides = _stages.run_overrides(args, QUICK)
    cpus = os.cpu_count() or 1
    workers = args.workers or max(1, cpus // 2)
    threads = args.threads or max(1, cpus // min(workers, len(seeds) * len(conditions)))
    _stages.demo_config(overrides)  # a bad override fails here, before anything runs
    tmp = args.out is None
    work = Path(args.out or tempfile.mkdtemp(prefix="priming_study-"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result: dict[str, Any] = {"quick": args.quick, "seeds": seeds, "condition_list": conditions, "errors": {}}
    log(f"work folder {work}; {len(seeds)} seeds x {len(conditions)} conditions, {workers} workers x {threads} threads")
    try:
        prep_specs = [{"kind": "prepare", "seed": s, "dir": str(work / f"seed-{s}"), "threads": threads,
                       "overrides": [*overrides, *_stages.seed_overrides(s)]} for s in seeds]
        prepared = dict(zip(seeds, _stages.run_all(__file__, prep_specs, workers, args.job_timeout, describe, log), strict=True))
        for s, p in prepared.items():
            if not p.get("ok"):
                result["errors"][f"prepare/seed-{s}"] = p.get("error")
        cond_specs = [{"kind": "condition", "seed": s, "condition": c, "seed_dir": str(work / f"seed-{s}"),
                       "dir": str(work / f"seed-{s}" / c), "threads": threads,
                       "overrides": [*overrides, *_stages.seed_overrides(s)]}
                      for s in seeds if prepared[s].get("ok") for c in conditions]
        done = _stages.run_all(__file__, cond_specs, workers, args.job_timeout, describe, log)
        runs = {(sp["condition"], sp["seed"]): r for sp, r in zip(cond_specs, done, strict=True)}
        _stages.record_failures(result, runs, log)
        result.update(summarize(conditions, seeds, prepared, runs))
        result["verdict"] = verdict(result["conditions"])
        first = next((p for p in prepared.values() if p.get("ok")), {})
        result["settings"] = _stages.study_settings(
            overrides, work, workers, threads, first,
            per_seed="seed, tiny.seed and sft.seed = the seed; eval seed = seed + 1")
        result["machine"] = _stages.machine()
        result["minutes"] = round((time.perf_counter() - start) / 60, 2)
        print_table(result, console)
        v = result["verdict"]
        console.print(f"all - none (GRPO, sampled): {v['all_minus_none_grpo_success']}; "
                      f"incorrect - none: {v['incorrect_minus_none_grpo_success']}; "
                      f"claim holds (both > 0): {v['claim_holds_sampled']}")
    finally:
        if tmp and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    _stages.report(result, args.save, head=("quick", "seeds", "condition_list", "minutes"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
