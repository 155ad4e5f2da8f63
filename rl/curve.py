"""The held-out learning curve of a Dr. GRPO run: every ``every`` steps (and before the first), the
policy being trained plays a fixed slice of held-out tasks, sampled at the training temperature, and
its success per task family is recorded; the picture puts it beside the training reward.

    curve = HeldOutCurve(slice_tasks, every=10, samples=2, tokenizer_path=sft_dir, reward=cfg.reward,
                         path=out / "curve.json")
    train(cfg, run_dir=..., callbacks=[curve])
    plot_learning_curve(curve.points, history, out / "learning_curve.png")

Why a curve and not only the reward: the reward is the batch mean of a few training tasks per step,
which moves with which tasks were drawn; success on the same held-out tasks at every point is what a
newcomer can read as "it learns". The episodes are the evaluation's (rl.evaluate.run_episodes: the
training rollout; the run's vLLM engine loaded with the model in training, or transformers generation
where the run has no engine), so a point costs ``len(tasks) x samples`` episodes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from transformers import TrainerCallback

from synth.episode import EpisodeLimits
from synth.tasks import Task

__all__ = ["CurvePoint", "HeldOutCurve", "curve_family", "curve_slice", "plot_learning_curve"]


class CurvePoint(BaseModel):
    step: int
    success: float = Field(description="solved fraction of the slice's sampled episodes")
    multistep_success: float | None = Field(None, description="the same over the multi-step families' tasks")
    families: dict[str, float] = Field(default_factory=dict, description="sampled success per task family")
    seconds: float
    engine: str = Field("transformers", description="what generated: the run's vllm engine, or transformers")


SINGLE = "single-action"


def curve_family(task: Task) -> str:
    """A multi-step family (synth.task_families), else ``single-action``: the curve's lines."""
    from synth.task_families import family_of, is_multistep

    f = family_of(task)
    return f if is_multistep(f) else SINGLE


def curve_slice(tasks: Sequence[Task], per_family: int) -> list[Task]:
    """The first ``per_family`` tasks (by id) of each multi-step family and as many single-action ones:
    the same tasks at every point."""
    by: dict[str, list[Task]] = {}
    for t in sorted(tasks, key=lambda t: t.id):
        by.setdefault(curve_family(t), []).append(t)
    return [t for fam in sorted(by) for t in by[fam][:per_family]]


class HeldOutCurve(TrainerCallback):
    """A TrainerCallback measuring held-out success at step 0, every ``every`` steps and at the end;
    ``progress`` hears (step, episodes done, episodes of the point) as a point's episodes end."""

    def __init__(self, tasks: Sequence[Task], *, every: int, samples: int, tokenizer_path: str | Path,
                 reward: Any = None, temperature: float = 1.0, max_completion_length: int = 256,
                 limits: EpisodeLimits | None = None, system_prompt: str = "policy", backend: str = "auto",
                 sandboxes: int = 8, seed: int = 0, path: str | Path | None = None,
                 progress: Callable[[int, int, int], None] | None = None):
        if every < 1 or samples < 1 or not tasks:
            raise ValueError("a learning curve needs every >= 1, samples >= 1 and some tasks")
        self.tasks, self.every, self.samples = list(tasks), every, samples
        self.tokenizer_path, self.reward, self.temperature = str(tokenizer_path), reward, temperature
        self.max_completion_length, self.limits = max_completion_length, limits or EpisodeLimits(max_tokens=10**9)
        self.system_prompt, self.backend, self.sandboxes, self.seed = system_prompt, backend, sandboxes, seed
        self.path = Path(path) if path else None
        self.progress = progress  # (step, episodes done, episodes of the point) as a point's episodes end
        self.points: list[CurvePoint] = []
        self._stack: ExitStack | None = None
        self._rollout: Any = None
        self._tok: Any = None
        self.trainer: Any = None  # bound by rl.trainer.train: its vLLM engine, where it has one, generates

    def on_train_begin(self, args, state, control, model=None, **kw):  # noqa: ANN001 - TrainerCallback's API
        from transformers import AutoTokenizer

        from rl.rollout import MultiTurnRollout
        from sandboxes import SandboxConfig

        self._tok = AutoTokenizer.from_pretrained(self.tokenizer_path)
        if self._tok.pad_token is None:
            self._tok.pad_token = self._tok.eos_token
        self._stack = ExitStack()
        self._rollout = self._stack.enter_context(MultiTurnRollout(
            self.tasks, tokenizer=self._tok, reward=self.reward, limits=self.limits,
            max_completion_length=self.max_completion_length, sandbox_config=SandboxConfig(backend=self.backend),
            pool_size=self.sandboxes, seed=self.seed, system_prompt=self.system_prompt))
        if model is not None and not self.points:
            self.measure(model, state.global_step)

    def on_step_end(self, args, state, control, model=None, **kw):  # noqa: ANN001
        if model is not None and state.global_step % self.every == 0:
            self.measure(model, state.global_step)

    def on_train_end(self, args, state, control, model=None, **kw):  # noqa: ANN001
        try:
            if model is not None and (not self.points or self.points[-1].step != state.global_step):
                self.measure(model, state.global_step)
        finally:
            if self._stack is not None:
                self._stack.close()
                self._stack = None

    def bind(self, trainer: Any) -> None:
        self.trainer = trainer

    def _generators(self, model: Any) -> tuple[Any, str]:
        """The run's colocated vLLM engine, holding ``model``'s weights from now until TRL's next sync
        (it syncs before every step's generation); transformers' ``generate`` on ``model`` without one."""
        from rl.evaluate import colocated_engine, engine_generators, hf_generators

        llm = colocated_engine(self.trainer)
        if llm is None:
            return hf_generators(model, self._tok), "transformers"
        from rl.vllm_sync import sync_weights

        sync_weights(llm, model)
        return engine_generators(llm), "vllm"

    def measure(self, model: Any, step: int) -> CurvePoint:
        from rl.evaluate import outcomes, pooled_success, run_episodes

        start = time.perf_counter()
        model = getattr(model, "module", model)  # a DDP wrapper's model
        # seeds per point differ (step), so the points are independent draws on the same tasks
        generators, engine = self._generators(model)
        sampled, _ = run_episodes(self._rollout, self.tasks, generators, samples=self.samples,
                                  temperature=self.temperature, greedy=False, step=1000 + step * self.samples,
                                  progress=None if self.progress is None else
                                  (lambda d, t: self.progress(step, d, t)))  # type: ignore[misc]
        per_task = outcomes(self.tasks, sampled, [])
        groups: dict[str, set[str]] = {}
        for t in self.tasks:
            groups.setdefault(curve_family(t), set()).add(t.id)
        multi = {i for f, ids in groups.items() if f != SINGLE for i in ids}
        point = CurvePoint(step=step, success=pooled_success(per_task, {t.id for t in self.tasks}) or 0.0,
                           multistep_success=pooled_success(per_task, multi),
                           families={f: round(pooled_success(per_task, ids) or 0.0, 4) for f, ids in sorted(groups.items())},
                           seconds=round(time.perf_counter() - start, 2), engine=engine)
        self.points.append(point)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps([p.model_dump() for p in self.points], indent=1))
        return point


def plot_learning_curve(points: Sequence[CurvePoint], log_history: Iterable[Mapping[str, Any]], path: str | Path,
                        *, title: str = "Dr. GRPO: held-out success and training reward") -> Path | None:
    """Two panels: held-out success of the fixed slice per family (multi-step families pooled, bold)
    by step, and the training reward per step with its rolling mean. None without curve points."""
    if not points:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from rl.metrics import _rolling_mean, reward_points

    fig = Figure(figsize=(11, 4.2), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    steps = [p.step for p in points]
    families = sorted({f for p in points for f in p.families})
    for f in families:
        ys = [p.families.get(f) for p in points]
        multi = f != SINGLE
        left.plot(steps, [float("nan") if y is None else y for y in ys], "o-" if multi else ".--",
                  linewidth=1.6 if multi else 0.8, alpha=0.9 if multi else 0.45, markersize=4, label=f)
    if any(p.multistep_success is not None for p in points):
        left.plot(steps, [float("nan") if p.multistep_success is None else p.multistep_success for p in points],
                  "s-", color="black", linewidth=2.6, label="multi-step (pooled)")
    left.plot(steps, [p.success for p in points], "-", color="grey", linewidth=2, alpha=0.7, label="all (slice)")
    left.set_ylim(-0.02, 1.02)
    left.set_xlabel("Dr. GRPO step")
    left.set_ylabel("held-out success (sampled)")
    left.set_title("held-out success on a fixed slice")
    left.grid(alpha=0.3)
    left.legend(loc="best", fontsize="x-small")
    rp = reward_points(list(log_history))
    if rp:
        rs, rv = [s for s, _, _ in rp], [r for _, r, _ in rp]
        right.plot(rs, rv, "o-" if len(rp) < 50 else "-", color="tab:blue", alpha=0.45, markersize=3, linewidth=1,
                   label="reward (batch mean per step)")
        window = max(1, min(10, len(rp) // 4))
        if window > 1:
            right.plot(rs, _rolling_mean(rv, window), color="tab:red", linewidth=2, label=f"rolling mean ({window})")
        right.legend(loc="best", fontsize="x-small")
    right.set_xlabel("Dr. GRPO step")
    right.set_ylabel("training reward")
    right.set_title("training reward")
    right.grid(alpha=0.3)
    fig.suptitle(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
