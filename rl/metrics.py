"""Training metrics as data and as a picture: strict-JSON values, metrics.jsonl, and the reward curve
a run leaves in its directory (rl.run writes them; the demo and the studies read them)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def jsonable(v: Any) -> Any:
    """``v`` as strict-JSON data: non-finite floats become None, numpy / torch scalars plain numbers."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Mapping):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    item = getattr(v, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            return jsonable(item())
        except (TypeError, ValueError, RuntimeError):
            pass
    if isinstance(v, Path):
        return str(v)
    return repr(v)


def json_line(entry: Mapping[str, Any]) -> str:
    return json.dumps(jsonable(dict(entry)), allow_nan=False)


def write_metrics_jsonl(log_history: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """One JSON line per log entry (the file is replaced). Non-finite floats become null."""
    path = Path(path)
    path.write_text("".join(json_line(e) + "\n" for e in log_history), encoding="utf-8")
    return path


def read_metrics_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a metrics.jsonl (unreadable lines skipped); [] when there is no file."""
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out


def as_number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def reward_points(log_history: Iterable[Mapping[str, Any]]) -> list[tuple[int, float, float | None]]:
    """``(step, reward, reward_std)`` of every log entry with a finite ``reward`` (TRL's key), by
    step; a step logged twice keeps its last value."""
    by_step: dict[int, tuple[float, float | None]] = {}
    for i, e in enumerate(log_history):
        r = as_number(e.get("reward"))
        if r is None:
            continue
        step = e.get("step")
        step = int(step) if as_number(step) is not None else i
        by_step[step] = (r, as_number(e.get("reward_std")))
    return [(s, r, sd) for s, (r, sd) in sorted(by_step.items())]


def _rolling_mean(values: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


# What the opt-in group knobs did per step (rl.rollout logs them as rollout/<key> when on): the
# difficulty filter (rl.difficulty), the extra generations for hard groups (rl.hard_groups), dynamic sampling.
GROUP_COUNTS = ("filtered_tasks", "readmitted_tasks", "hard_groups", "rescued_groups", "extra_episodes",
                "refilled_groups")


def rollout_totals(log_history: Iterable[Mapping[str, Any]], keys: Iterable[str] = GROUP_COUNTS) -> dict[str, float]:
    """The run's total of each ``rollout/<key>`` count over its logged steps (0 where never logged)."""
    history = list(log_history)
    return {k: sum(v for e in history if (v := as_number(e.get(f"rollout/{k}"))) is not None) for k in keys}


# The second panel: what says whether a step could teach anything (TRL's keys, per logged step).
DIAGNOSTICS = {"frac_reward_zero_std": "share of groups with reward variance", "entropy": "entropy (nats/token)",
               "completions/mean_length": "episode length (tokens)"}


def diagnostic_points(log_history: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """Per step: the share of groups whose rewards differ (1 - TRL's ``frac_reward_zero_std``: the groups
    that give Dr. GRPO a gradient), the policy's entropy and the mean episode length, where logged."""
    out: dict[str, dict[int, float]] = {}
    for i, e in enumerate(log_history):
        step = e.get("step")
        step = int(step) if as_number(step) is not None else i
        for key, label in DIAGNOSTICS.items():
            v = as_number(e.get(key))
            if v is not None:
                out.setdefault(label, {})[step] = 1.0 - v if key == "frac_reward_zero_std" else v
    return {k: sorted(v.items()) for k, v in out.items()}


def plot_reward_curve(log_history: Iterable[Mapping[str, Any]], path: str | Path, *,
                      title: str | None = None) -> Path | None:
    """A PNG of the mean reward per step: the points, a +-``reward_std`` band, a rolling mean; and,
    when TRL logged them, a second panel with what the reward alone does not show: the share of
    groups with reward variance, the entropy and the episode length (:func:`diagnostic_points`).
    None (and no file) when there is no reward point. Uses matplotlib's Agg canvas directly (no
    pyplot, no global backend switch)."""
    history = list(log_history)
    points = reward_points(history)
    if not points:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    diagnostics = diagnostic_points(history)
    path = Path(path)
    panels = 2 if diagnostics else 1
    fig = Figure(figsize=(8, 3.6 * panels), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(panels, 1, sharex=True, squeeze=False)[:, 0]
    steps = [s for s, _, _ in points]
    rewards = [r for _, r, _ in points]
    ax = axes[0]
    if any(sd is not None for _, _, sd in points):
        sds = [sd or 0.0 for _, _, sd in points]
        ax.fill_between(steps, [r - s for r, s in zip(rewards, sds, strict=True)],
                        [r + s for r, s in zip(rewards, sds, strict=True)],
                        alpha=0.2, color="tab:blue", linewidth=0, label="± std")
    ax.plot(steps, rewards, "o-" if len(points) < 50 else "-", color="tab:blue", alpha=0.55, markersize=3,
            linewidth=1, label="reward (mean per step)")
    window = max(1, min(25, len(points) // 5))
    if window > 1:
        ax.plot(steps, _rolling_mean(rewards, window), color="tab:red", linewidth=2, label=f"rolling mean ({window})")
    ax.set_ylabel("reward")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    ax.set_title(title or path.parent.name or "reward")
    if diagnostics:
        cax = axes[1]
        length_label = DIAGNOSTICS["completions/mean_length"]
        for name, pts in diagnostics.items():
            if name != length_label:
                cax.plot([s for s, _ in pts], [v for _, v in pts], "o-" if len(pts) < 50 else "-", markersize=3,
                         linewidth=1.5, label=name)
        cax.set_ylabel("share / entropy")
        cax.grid(alpha=0.3)
        handles, labels = cax.get_legend_handles_labels()
        if length_label in diagnostics:  # tokens: its own axis
            lax = cax.twinx()
            pts = diagnostics[length_label]
            lax.plot([s for s, _ in pts], [v for _, v in pts], "-", color="tab:grey", linewidth=1.2, label=length_label)
            lax.set_ylabel("tokens")
            h2, l2 = lax.get_legend_handles_labels()
            handles, labels = handles + h2, labels + l2
        cax.legend(handles, labels, loc="best", fontsize="small")
    axes[-1].set_xlabel("step")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
