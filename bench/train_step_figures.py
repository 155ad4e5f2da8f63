"""The figures of bench/train_step.py: per-side step times, tokens per second and generate costs
from a trainer's log history and recorded calls, and the machine it ran on."""

from __future__ import annotations

import os
import platform
import statistics
from pathlib import Path
from typing import Any



def step_rows(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [h for h in history if "step_time" in h]


def mean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def summarize(res: dict[str, Any], batch: int, *, skip: int = 1) -> dict[str, Any]:
    """Figures of one side from its trainer's log history, step clock and generate calls (the first
    `skip` steps are warm-up). step_s is wall clock from one step's end to the next's (everything:
    generation, rollout, loss, backward, optimizer, logging callbacks); trl_step_time_s is TRL's
    step_time (training_step only: no optimizer step, no callbacks)."""
    rows = step_rows(res["log_history"])
    if len(rows) <= skip:
        raise RuntimeError(f"only {len(rows)} logged steps; need more than the {skip} warm-up step(s)")
    tokens = [h["num_tokens"] for h in rows]
    deltas = [tokens[0]] + [b - a for a, b in zip(tokens, tokens[1:], strict=False)]
    timed, dt = rows[skip:], deltas[skip:]
    stamps = {int(k): v for k, v in (res.get("stamps") or {}).items()}
    steps = sorted(stamps)
    if res.get("paired"):  # the others' steps run between ours: a step is its own begin -> end
        walls = [stamps[k][-1] - stamps[k][0] for k in steps if len(stamps[k]) == 2][skip:]
    else:  # one step's end to the next's: logging callbacks included
        ends = [stamps[k][-1] for k in steps]
        walls = [b - a for a, b in zip(ends, ends[1:], strict=False)][skip - 1:] if len(ends) > skip else []
    trl_times = [h["step_time"] for h in timed]
    if len(walls) != len(timed):  # no clock (should not happen): fall back on TRL's step_time
        walls = trl_times
    gen = [h["completions/mean_length"] * batch for h in timed]
    out: dict[str, Any] = {
        "steps_timed": len(timed),
        "step_s": r(mean(walls)),
        "step_s_median": r(statistics.median(walls)),
        "step_s_all": [r(h["step_time"]) for h in rows[:skip]] + [r(w) for w in walls],
        "trl_step_time_s": r(mean(trl_times)),
        "tokens_per_s": r(sum(dt) / sum(walls), 1),
        "train_tokens_per_step": r(mean(dt), 1),
        "generated_tokens_per_step": r(mean(gen), 1),
        "s_per_1k_generated_tokens": r(1000 * sum(walls) / sum(gen), 4),
        # robust to a step slowed by other work on the machine: median over steps of wall / generated tokens
        "s_per_1k_generated_tokens_median": r(statistics.median(1000 * w / g for w, g in zip(walls, gen, strict=True)), 4),
        "s_per_1k_generated_tokens_by_step": [r(1000 * w / g, 4) for w, g in zip(walls, gen, strict=True)],
        "clipped_ratio": r(mean([h.get("completions/clipped_ratio") for h in timed])),
        "peak_mem_gb": res.get("peak_mem_gb"),
        "wall_s": res.get("wall_s"),
        "loadavg": res.get("loadavg"),
        "paired": bool(res.get("paired")),
    }
    timed_steps = {h["step"] for h in timed if "step" in h} or set(range(skip + 1, len(rows) + 1))
    calls = [c for c in res.get("gen_calls") or [] if c["step"] in timed_steps]
    if calls:
        n = len(timed_steps)
        gen_s = sum(c["s"] for c in calls) / n
        positions = sum(c["decoded"] or 0 for c in calls) / n
        out.update(generate_s=r(gen_s), generate_calls_per_step=r(len(calls) / n, 2),
                   generate_batch_mean=r(mean([c["n"] for c in calls]), 2),
                   decode_positions_per_step=r(positions, 1),
                   ms_per_decode_position=r(1000 * gen_s / positions, 2) if positions else None,
                   generate_calls=[{k: (r(v) if isinstance(v, float) else v) for k, v in c.items()} for c in calls])
        out["non_generate_s"] = r(out["step_s"] - gen_s)
    if any("rollout/rollout_s" in h for h in timed):
        out["rollout_s"] = r(mean([h.get("rollout/rollout_s") for h in timed]))
        if "generate_s" not in out:
            out["generate_s"] = r(mean([h.get("rollout/generate_s") for h in timed]))
        out["rollout_outside_generate_s"] = r(out["rollout_s"] - mean([h.get("rollout/generate_s") for h in timed]))
        out["outside_rollout_s"] = r(out["step_s"] - out["rollout_s"])
        if any("rollout/vllm_sync_ms" in h for h in timed):
            out["vllm_sync_ms"] = r(mean([h.get("rollout/vllm_sync_ms") for h in timed]), 1)
    roll = res.get("calls")
    if roll:
        c = roll[skip:]
        out["prompt_tokens_per_step"] = r(mean([x["prompt_tokens"] for x in c]), 1)
        out["env_tokens_per_step"] = r(mean([x["completion_tokens"] - x["sampled_tokens"] for x in c]), 1)
        out["agent_turns_per_episode"] = r(mean([x["agent_turns"] / batch for x in c]), 2)
        out["terminations"] = sorted({t for x in c for t in x["terminations"]})
    if res.get("prompt_tokens"):
        out["prompt_tokens_per_step"] = r(mean(res["prompt_tokens"][skip:]), 1)
    if res.get("max_turns") is not None:
        out["max_turns"] = res["max_turns"]
    return out


def machine() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
                            "kernel": platform.release()}
    for pkg in ("transformers", "trl", "vllm"):
        try:
            info[pkg] = __import__(pkg).__version__
        except Exception:  # noqa: BLE001
            info[pkg] = None
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_mem_gb"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    else:
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
    return info
