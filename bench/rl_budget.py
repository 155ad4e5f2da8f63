"""RL-budget sweep: how far Dr. GRPO moves one primed checkpoint, per batch size, learning rate and steps.

    python bench/rl_budget.py [--quick] [--seeds 0,1] [--variant NAME:KEY=VALUE;KEY=VALUE ...]
                              [--workers N] [--out DIR] [--set KEY=VALUE ...] [--gpu] [--train-eval K]

The question: what RL budget would `dojo demo` need for its target (held-out success after Dr. GRPO
15 points above the primed policy), and does a larger step (learning rate) or a larger batch buy it?
Per seed, one ``prepare`` job builds what every variant shares, with the demo's own stages
(bench/_stages.py): the tiny base model, the tasks and their held-out split, the priming traces,
SFT, and the primed policy's held-out evaluation (the baseline, measured in the same run). Then one
job per (variant, seed) trains Dr. GRPO from that one checkpoint with the variant's overrides of
the demo config and evaluates the result on the same held-out tasks, with the same seeds.

``--variant`` replaces the default variants (repeatable; overrides separated by ``;``). ``from=OTHER`` among a
variant's overrides trains on from the policy variant OTHER trained for the same seed (kept in the ``--out`` folder,
e.g. by an earlier call on a warm machine), so a longer run can span calls; its gain is still over the primed policy,
and ``episodes``/``grpo_steps`` count its own part only. ``eval=false`` trains a variant and skips its held-out
evaluation (a link in such a chain: the evaluation is three of a call's ten minutes); the same variant named again
without it evaluates the policy already trained, it does not train again. The LAST
stdout line is one JSON object: per variant the mean, std (population), min and max over seeds of
held-out success after GRPO (sampled and greedy) and of the gain over the primed policy, the
episodes trained on, and from the training log the solved fraction, entropy, mean completion
length and fraction of flat groups (no gradient) over the first and last quarter of the steps;
the primed policy per seed; the settings and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench import _stages  # noqa: E402

# The demo's settings, then larger steps and larger batches (40 steps each: episodes = 40 x batch).
DEFAULT_VARIANTS: dict[str, list[str]] = {
    "demo": [],
    "lr3e-4": ["train.grpo.learning_rate=3e-4"],
    "lr1e-3": ["train.grpo.learning_rate=1e-3"],
    "b64_lr3e-4": ["train.grpo.per_device_train_batch_size=64", "train.grpo.learning_rate=3e-4"],
    "b128_lr1e-3": ["train.grpo.per_device_train_batch_size=128", "train.grpo.learning_rate=1e-3"],
    "b256_lr3e-4": ["train.grpo.per_device_train_batch_size=256", "train.grpo.learning_rate=3e-4"],
}
QUICK = ["multistep={}", "tasks=24", "held_out=6", "sft.epochs=1", "eval_samples=1", "train.grpo.max_steps=2",
         "train.grpo.per_device_train_batch_size=8", "train.grpo.num_generations=4",
         "train.grpo.max_completion_length=64", "train.rollout.use_vllm=false"]
QUICK_VARIANTS = {"demo": [], "lr3e-4": ["train.grpo.learning_rate=3e-4"]}
CURVES = ("episode/solved", "entropy", "completions/mean_length", "frac_reward_zero_std")
# where a step's seconds go (means over the steps): what a longer run within a device call can buy back
TIMES = {"step": "step_time", "rollout": "rollout/rollout_s", "generate": "rollout/generate_s"}


def log(msg: str) -> None:
    print(f"[rl_budget] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ workers (one subprocess per job)

def worker_prepare(spec: dict[str, Any]) -> dict[str, Any]:
    """The seed's base model, tasks, priming traces, SFT and the primed policy's evaluation."""
    out = Path(spec["dir"])
    done = out / "prepared.json"
    if done.is_file():  # a --keep'd work folder from an earlier --prepare-only call (one device call each)
        return json.loads(done.read_text())
    cfg = _stages.demo_config([*spec["overrides"], f"out_dir={out}"])
    backend = _stages.backend_of(cfg, out)
    t0 = time.perf_counter()
    base = _stages.build_base(cfg, out)
    train_tasks, held = _stages.make_tasks(cfg, out, backend)
    res: dict[str, Any] = {"seed": cfg.seed, "train_tasks": len(train_tasks), "held_out_tasks": len(held),
                           "backend": backend, "engine": _stages.engine_of(cfg, out)}
    res.update(_stages.prime_condition(cfg, base, train_tasks, out, backend))
    t1 = time.perf_counter()
    ev = _stages.evaluate(cfg, Path(res["sft_dir"]), held, out / "eval" / "sft", backend)
    res.update(sft_success=ev["success"], sft_greedy_success=ev["greedy_success"], by_tool=ev["by_tool"],
               sft_pass_at_k=ev["pass_at_k"], sft_multistep_success=ev["multistep_success"],
               sft_multistep_greedy_success=ev["multistep_greedy_success"],
               sft_multistep_pass_at_k=ev["multistep_pass_at_k"],
               minutes={"prime_and_sft": round((t1 - t0) / 60, 2), "eval": round((time.perf_counter() - t1) / 60, 2)})
    done.write_text(json.dumps(res))
    return res


def quarters(hist: list[dict[str, Any]], key: str) -> dict[str, float | None]:
    """The mean of ``key`` over the first and the last quarter of the logged steps."""
    vals = [h[key] for h in hist if _stages.finite(h.get(key))]
    if not vals:
        return {"first": None, "last": None}
    q = max(1, len(vals) // 4)
    return {"first": round(sum(vals[:q]) / q, 4), "last": round(sum(vals[-q:]) / q, 4)}


def step_seconds(hist: list[dict[str, Any]]) -> dict[str, float | None]:
    """Seconds a step takes (``step``), and of them in the rollout and in its generation, each a mean over steps."""
    return {name: _stages.stats([h.get(key) for h in hist])["mean"] for name, key in TIMES.items()}


def start_of(sets: list[str]) -> tuple[list[str], str | None]:
    """A variant's demo overrides (without ``from=``/``eval=``), and the variant it trains on from (``from=OTHER``;
    None: the primed policy)."""
    starts = [kv.split("=", 1)[1].strip() for kv in sets if kv.startswith("from=")]
    if len(starts) > 1 or any(not x or "/" in x for x in starts):
        raise SystemExit(f"rl_budget: from={','.join(starts)}: name one variant of this run's folder")
    return [kv for kv in sets if not kv.startswith(("from=", "eval="))], (starts[0] if starts else None)


def evaluates(sets: list[str]) -> bool:
    """Whether a variant's policy is evaluated on the held-out tasks (``eval=false``: trained only)."""
    flags = {kv.split("=", 1)[1].strip().lower() for kv in sets if kv.startswith("eval=")}
    if len(flags) > 1 or not flags <= {"true", "false"}:
        raise SystemExit(f"rl_budget: eval={','.join(sorted(flags))}: give eval=false once (or leave it out)")
    return flags != {"false"}


def start_dir(seed_dir: Path, start: str | None) -> Path:
    """Where a variant's Dr. GRPO starts: the seed's primed policy, or the policy variant ``start`` trained."""
    if start is None:
        return seed_dir / "sft"
    final = seed_dir / start / "grpo" / "final"
    if not final.is_dir():
        raise FileNotFoundError(f"from={start}: {final} is missing; train variant {start} first (same --out)")
    return final


def waves(variants: dict[str, list[str]]) -> list[list[str]]:
    """The variants in the order they can train: one that trains on from another of this run waits for it."""
    depth: dict[str, int] = {}

    def d(name: str, seen: tuple[str, ...] = ()) -> int:
        start = start_of(variants[name])[1]
        if name in seen:
            raise SystemExit(f"rl_budget: variant {name}: its from= chain loops")
        if name not in depth:
            depth[name] = 0 if start not in variants else d(start, (*seen, name)) + 1
        return depth[name]

    for n in variants:
        d(n)
    return [[n for n in variants if depth[n] == k] for k in range(max(depth.values(), default=-1) + 1)]


def worker_variant(spec: dict[str, Any]) -> dict[str, Any]:
    """Dr. GRPO from the seed's primed checkpoint (or a variant's, ``from=``) with the variant's overrides, then
    held-out evaluation."""
    from rl.metrics import rollout_totals
    from rl.run import read_metrics_jsonl

    seed_dir, out = Path(spec["seed_dir"]), Path(spec["dir"])
    sets, start = start_of(spec["variant"])
    model_dir = start_dir(seed_dir, start)
    cfg = _stages.demo_config([*spec["overrides"], *sets, f"out_dir={out}"])
    backend = _stages.backend_of(cfg, out)
    train, held = _stages.load_split(seed_dir / "tasks")
    t0 = time.perf_counter()
    res: dict[str, Any] = {"variant": spec["name"], "seed": cfg.seed, "from": start, "start_dir": str(model_dir)}
    res.update(_stages.run_grpo(cfg, seed_dir / "tasks", model_dir, out / "grpo"))
    t1 = time.perf_counter()
    hist = [h for h in read_metrics_jsonl(out / "grpo" / "metrics.jsonl") if "frac_reward_zero_std" in h]
    g = _stages.grpo_config(cfg, seed_dir / "tasks", model_dir, out / "grpo").grpo
    res["episodes"] = res["grpo_steps"] * g.per_device_train_batch_size * g.gradient_accumulation_steps
    res["curves"] = {k: quarters(hist, k) for k in CURVES}
    res["step_seconds"] = step_seconds(hist)
    res["rollout_totals"] = rollout_totals(hist)  # what the difficulty filter / extra generations did
    if not evaluates(spec["variant"]):
        return {**res, "minutes": {"grpo": round((t1 - t0) / 60, 2)}}
    ev = _stages.evaluate(cfg, Path(res["final_dir"]), held, out / "eval", backend)
    minutes = {"grpo": round((t1 - t0) / 60, 2), "eval": round((time.perf_counter() - t1) / 60, 2)}
    if spec.get("train_eval"):
        t2 = time.perf_counter()
        sample = _stages.train_sample(train, held, spec["train_eval"], cfg.seed)
        res["train_eval"] = train_eval(cfg, seed_dir, Path(res["final_dir"]), sample, out, backend, spec["train_eval"])
        minutes["train_eval"] = round((time.perf_counter() - t2) / 60, 2)
    res.update(grpo_success=ev["success"], grpo_greedy_success=ev["greedy_success"], by_tool=ev["by_tool"],
               grpo_multistep_success=ev["multistep_success"],
               grpo_multistep_greedy_success=ev["multistep_greedy_success"],
               grpo_pass_at_k=ev["pass_at_k"], grpo_multistep_pass_at_k=ev["multistep_pass_at_k"], minutes=minutes)
    return res


def train_eval(cfg: Any, seed_dir: Path, trained: Path, sample: list[Any], out: Path, backend: str,
               per_family: int) -> dict[str, Any]:
    """The primed and the trained policy on a sample of their own training tasks (_stages.train_sample), with
    the held-out evaluation's settings: held-out flat with training tasks up is a fitted policy, both flat one
    that never learnt. The primed figure is the seed's, kept in its folder for every variant."""

    def figures(ev: dict[str, Any]) -> dict[str, Any]:
        return {k: ev[k] for k in ("success", "greedy_success", "multistep_success", "multistep_greedy_success",
                                   "pass_at_k", "by_tool")}

    primed_file = seed_dir / "train_eval" / f"primed_{per_family}.json"
    if primed_file.is_file():
        primed = json.loads(primed_file.read_text())
    else:
        primed = figures(_stages.evaluate(cfg, seed_dir / "sft", sample, primed_file.parent / f"primed_{per_family}",
                                          backend))
        tmp = primed_file.with_suffix(f".{os.getpid()}.tmp")  # variants of one seed may run side by side
        tmp.write_text(json.dumps(primed))
        tmp.replace(primed_file)
    return {"tasks": len(sample), "primed": primed,
            "trained": figures(_stages.evaluate(cfg, trained, sample, out / "train_eval", backend))}


def describe(s: dict[str, Any]) -> str:
    return f"{s['kind']} seed={s['seed']}" + (f" {s['name']}" if s["kind"] == "variant" else "")


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    return (worker_prepare if spec["kind"] == "prepare" else worker_variant)(spec)


# ------------------------------------------------------------------ report

def gain(runs: dict[int, dict[str, Any]], prepared: dict[int, dict[str, Any]], after: str, before: str) -> dict[str, Any]:
    """Stats over seeds of a trained policy's figure minus its primed one (an ``eval=false`` run has none)."""
    return _stages.stats([r[after] - prepared[s][before] for s, r in runs.items()
                          if _stages.finite(r.get(after)) and _stages.finite(prepared[s].get(before))])


def summarize(variants: dict[str, list[str]], prepared: dict[int, dict[str, Any]],
              runs: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, sets in variants.items():
        ok = {s: r for (n, s), r in runs.items() if n == name and r.get("ok")}
        row: dict[str, Any] = {"overrides": sets, "from": start_of(sets)[1], "evaluated": evaluates(sets),
                               "seeds_ok": len(ok)}

        for m in ("grpo_success", "grpo_greedy_success"):
            row[m] = _stages.stats([r.get(m) for r in ok.values()])
        row["gain"] = gain(ok, prepared, "grpo_success", "sft_success")
        row["greedy_gain"] = gain(ok, prepared, "grpo_greedy_success", "sft_greedy_success")
        # the multi-step families pooled (issue 23's target: +15 sampled, each seed +10)
        row["grpo_multistep_success"] = _stages.stats([r.get("grpo_multistep_success") for r in ok.values()])
        row["multistep_gain"] = gain(ok, prepared, "grpo_multistep_success", "sft_multistep_success")
        row["per_seed"] = {str(s): {k: r.get(k) for k in ("grpo_success", "grpo_greedy_success", "grpo_multistep_success",
                                                          "grpo_multistep_greedy_success", "grpo_pass_at_k",
                                                          "grpo_multistep_pass_at_k", "episodes",
                                                          "grpo_steps", "first_reward", "final_reward", "curves",
                                                          "step_seconds",
                                                          "by_tool", "rollout_totals", "minutes", "train_eval",
                                                          "start_dir")}
                           for s, r in ok.items()}
        # on the seeds' own training tasks (--train-eval): what Dr. GRPO fitted, beside what carried to held-out
        te = {s: r["train_eval"] for s, r in ok.items() if r.get("train_eval")}
        if te:
            for key, m in (("train_gain", "success"), ("train_multistep_gain", "multistep_success")):
                row[key] = _stages.stats([e["trained"][m] - e["primed"][m] for e in te.values()
                                          if _stages.finite(e["trained"][m]) and _stages.finite(e["primed"][m])])
        out[name] = row
    return out


def print_table(result: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    def fmt(s: dict[str, Any], signed: bool = False) -> str:
        if s.get("mean") is None:
            return "-"
        return f"{s['mean']:+.1%} ± {s['std']:.1%}" if signed else f"{s['mean']:.1%} ± {s['std']:.1%}"

    t = Table(title=f"held-out success after Dr. GRPO from one primed checkpoint per seed "
                    f"(mean ± std over {len(result['seeds'])} seeds)")
    for c in ("variant", "episodes", "sampled", "gain", "greedy", "greedy gain", "multi-step", "multi-step gain",
              "solved (train) first -> last", "entropy first -> last"):
        t.add_column(c, justify="left" if c == "variant" else "right")
    p = result["primed"]
    t.add_row("primed (SFT, the baseline)", "", fmt(p["sft_success"]), "", fmt(p["sft_greedy_success"]), "",
              fmt(p.get("sft_multistep_success") or {}), "", "", "")

    def curve(row: dict[str, Any], key: str) -> str:
        seeds = list(row["per_seed"].values())
        f = [s["curves"][key]["first"] for s in seeds if s["curves"][key]["first"] is not None]
        last = [s["curves"][key]["last"] for s in seeds if s["curves"][key]["last"] is not None]
        return f"{sum(f) / len(f):.2f} -> {sum(last) / len(last):.2f}" if f and last else "-"

    for name, row in result["variants"].items():
        eps = {v["episodes"] for v in row["per_seed"].values()}
        if not row.get("evaluated", True):  # eval=false: a link of a chain, its policy evaluated by a later call
            name = f"{name} (not evaluated)"
        t.add_row(name, ",".join(map(str, sorted(eps))), fmt(row["grpo_success"]), fmt(row["gain"], True),
                  fmt(row["grpo_greedy_success"]), fmt(row["greedy_gain"], True),
                  fmt(row.get("grpo_multistep_success") or {}), fmt(row.get("multistep_gain") or {}, True),
                  curve(row, "episode/solved"),
                  curve(row, "entropy"))
    console.print(t)


# ------------------------------------------------------------------ main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny settings (see QUICK), seed 0, two variants")
    ap.add_argument("--seeds", default=None, help="comma-separated (default 0,1; quick 0)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE;...",
                    help="a GRPO variant (repeatable; replaces the defaults: " + ", ".join(DEFAULT_VARIANTS) + ")")
    ap.add_argument("--train-eval", type=int, default=0, metavar="K",
                    help="also evaluate the primed and each trained policy on up to K training tasks per held-out "
                         "family (fitted vs carried over; default 0: off)")
    ap.add_argument("--prepare-only", action="store_true",
                    help="prime and evaluate each seed, train nothing; with --out, a later run reuses the seeds "
                         "prepared there (a prepare and its Dr. GRPO jobs need not fit one 10-minute device call)")
    _stages.add_run_options(ap, workers_help="jobs at a time (default: cpus // 2, at least 1)",
                            save_help="also write the JSON here (e.g. bench/results/rl_budget.json)")
    args = ap.parse_args()
    if args.train_eval < 0:
        raise SystemExit(f"rl_budget: --train-eval {args.train_eval}: give a count of tasks per family, 0 for none")
    if args.worker:
        return _stages.worker_entry(args.worker, worker)

    from rich.console import Console

    console = Console(width=max(160, Console().width))
    seeds = [int(s) for s in (args.seeds or ("0" if args.quick else "0,1")).split(",")]
    variants = (dict(_stages.parse_variant(v) for v in args.variant) if args.variant
                else QUICK_VARIANTS if args.quick else DEFAULT_VARIANTS)
    overrides = _stages.run_overrides(args, QUICK)
    from rl.config import ConfigError

    waves(variants)  # a from= loop fails here too
    for name, sets in variants.items():  # a bad override fails here, before anything runs
        try:
            evaluates(sets)
            _stages.demo_config([*overrides, *start_of(sets)[0]])
        except ConfigError as e:
            raise SystemExit(f"rl_budget: variant {name}: {e}") from None
    cpus = os.cpu_count() or 1
    workers = args.workers or max(1, cpus // 2)
    threads = args.threads or max(1, cpus // min(workers, len(seeds) * len(variants)))
    tmp = args.out is None
    work = Path(args.out or tempfile.mkdtemp(prefix="rl_budget-"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result: dict[str, Any] = {"quick": args.quick, "seeds": seeds, "variant_list": list(variants), "errors": {}}
    log(f"work folder {work}; {len(seeds)} seeds x {len(variants)} variants, {workers} workers x {threads} threads")
    try:
        prep_specs = [{"kind": "prepare", "seed": s, "dir": str(work / f"seed-{s}"), "threads": threads,
                       "overrides": [*overrides, *_stages.seed_overrides(s)]} for s in seeds]
        prepared = dict(zip(seeds, _stages.run_all(__file__, prep_specs, workers, args.job_timeout, describe, log),
                            strict=True))
        for s, p in prepared.items():
            if not p.get("ok"):
                result["errors"][f"prepare/seed-{s}"] = p.get("error")
        if args.prepare_only:
            variants = {}
        runs: dict[tuple[str, int], dict[str, Any]] = {}
        for wave in waves(variants):  # a from= variant after the one it trains on from
            specs = [{"kind": "variant", "seed": s, "name": n, "variant": variants[n], "seed_dir": str(work / f"seed-{s}"),
                      "dir": str(work / f"seed-{s}" / n), "threads": threads,
                      "overrides": [*overrides, *_stages.seed_overrides(s)], "train_eval": args.train_eval}
                     for s in seeds if prepared[s].get("ok") for n in wave]
            done = _stages.run_all(__file__, specs, workers, args.job_timeout, describe, log)
            runs.update({(sp["name"], sp["seed"]): r for sp, r in zip(specs, done, strict=True)})
        _stages.record_failures(result, runs, log)
        ok_prep = {s: p for s, p in prepared.items() if p.get("ok")}
        result["primed"] = {
            "per_seed": {str(s): {k: p.get(k) for k in ("sft_success", "sft_greedy_success", "sft_pass_at_k", "sft_final_loss",
                                                         "sft_multistep_success", "sft_multistep_greedy_success",
                                                         "sft_multistep_pass_at_k",
                                                         "train_tasks", "held_out_tasks", "by_tool", "minutes")}
                         for s, p in ok_prep.items()},
            **{k: _stages.stats([p.get(k) for p in ok_prep.values()])
               for k in ("sft_success", "sft_greedy_success", "sft_pass_at_k", "sft_multistep_success",
                         "sft_multistep_pass_at_k")}}
        result["variants"] = summarize(variants, ok_prep, runs)
        result["settings"] = _stages.study_settings(
            overrides, work, workers, threads, next(iter(ok_prep.values()), {}),
            per_seed="seed, tiny.seed and sft.seed = the seed; every variant of a seed starts from its one checkpoint",
            condition=_stages.demo_config(overrides).condition)
        result["machine"] = _stages.machine()
        result["minutes"] = round((time.perf_counter() - start) / 60, 2)
        print_table(result, console)
    finally:
        if tmp and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    _stages.report(result, args.save, head=("quick", "seeds", "variant_list", "minutes"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
