"""Held-out success of a policy checkpoint: the training rollout, run without training.

    ev = evaluate_policy("runs/x/final", held_out, reward=cfg.reward, samples=4, out_dir="runs/x/eval/grpo")
    ev.success        # mean over tasks x samples of `rl.rollout.solved`
    ev.greedy_success # the same tasks decoded greedily (one sample each)

The episodes are exactly the ones training sees (the same ``MultiTurnRollout``: token agent,
sandboxes, scripted user, reward composite), so a success here is a success there. Generation is
transformers' batched ``generate`` in process (:func:`hf_generators`), or a vLLM engine that is
already running (:func:`engine_generators`): :class:`HeldOutEval` scores checkpoints at the end of a
Dr. GRPO run on the run's own colocated engine, loading each policy's weights into it in turn: on the
demo's held-out tasks, 32 episodes at once, 3.25x faster than ``generate`` with no engine start of its
own (bench/heldout_eval.py).

Two figures, because they answer different questions: ``success`` samples at the training
temperature (what the policy does, and what RL optimises); ``greedy_success`` decodes the most
likely tokens (what a deployment would usually run).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from transformers import TrainerCallback

from synth.episode import EpisodeLimits
from synth.tasks import Task

__all__ = ["EvalSettings", "HeldOutEval", "PolicyEval", "TaskOutcome", "evaluate_policy"]

log = logging.getLogger(__name__)


class TaskOutcome(BaseModel):
    task_id: str
    samples: int
    solved: int
    greedy_solved: bool | None = None
    mean_reward: float | None = None


class PolicyEval(BaseModel):
    model: str
    tasks: int
    samples: int = Field(description="sampled episodes per task")
    temperature: float
    success: float = Field(description="solved fraction of the sampled episodes")
    greedy_success: float | None = Field(None, description="solved fraction of the greedy episodes, one per task")
    mean_reward: float | None
    mean_sampled_tokens: float
    seconds: float
    engine: str = Field("transformers", description="what generated: transformers (generate) or vllm")
    per_task: list[TaskOutcome]


def _run(rollout: Any, tasks: list[Task], generator: Any, step: int) -> list[Any]:
    rollout.run(tasks, generator, step=step)
    return list(rollout.last)


def hf_generators(model: Any, tokenizer: Any) -> Callable[[float], Any]:
    """A generator per temperature on ``model`` with transformers' batched ``generate``."""
    from rl.rollout import HFGenerator, Sampling

    eos = model.generation_config.eos_token_id if model.generation_config else tokenizer.eos_token_id
    eos = list(eos) if isinstance(eos, (list, tuple)) else [eos]
    limit = int(getattr(model.config, "max_position_embeddings", 0) or tokenizer.model_max_length)
    return lambda temp: HFGenerator(lambda: model, tokenizer, Sampling(temperature=temp), eos_ids=eos,
                                    context_limit=limit)


def engine_generators(llm: Any) -> Callable[[float], Any]:
    """A generator per temperature on a running ``vllm.LLM`` (whatever weights it holds now)."""
    from rl.generators import VLLMGenerator
    from rl.rollout import Sampling

    return lambda temp: VLLMGenerator(llm, Sampling(temperature=temp))


Progress = Callable[[int, int], None]  # (episodes done, episodes in all)


def run_episodes(rollout: Any, tasks: list[Task], generator: Callable[[float], Any], *, samples: int,
                 temperature: float, greedy: bool = True, step: int = 0,
                 progress: Progress | None = None) -> tuple[list[Any], list[Any]]:
    """``samples`` sampled episodes per task (and one greedy with ``greedy``) in an entered
    :class:`rl.rollout.MultiTurnRollout` over ``tasks``, generating with ``generator(temperature)``
    (:func:`hf_generators`, :func:`engine_generators`); episode seeds follow ``step``. ``progress``
    hears (done, total) at the start and as each episode ends."""
    total, done = len(tasks) * (samples + int(greedy)), 0

    def ended() -> None:
        nonlocal done
        done += 1
        progress(done, total)  # type: ignore[misc]

    before = getattr(rollout, "on_episode", None)
    if progress is not None:
        progress(0, total)
        rollout.on_episode = ended
    try:
        sampled: list[Any] = []
        for k in range(samples):
            sampled += _run(rollout, tasks, generator(temperature), step=step + k)
        greedy_eps = _run(rollout, tasks, generator(0.0), step=step + samples) if greedy else []
    finally:
        if progress is not None:
            rollout.on_episode = before
    return sampled, greedy_eps


def outcomes(tasks: Sequence[Task], sampled: list[Any], greedy_eps: list[Any]) -> list[TaskOutcome]:
    """Per task: sampled episodes solved (``rl.rollout.solved``), the greedy one, the mean reward."""
    from rl.rollout import solved

    per_task = []
    for t in tasks:
        mine = [e for e in sampled if e.task_id == t.id]
        rewards = [e.reward for e in mine if e.reward is not None]
        g = [e for e in greedy_eps if e.task_id == t.id]
        per_task.append(TaskOutcome(task_id=t.id, samples=len(mine), solved=sum(solved(e.components) for e in mine),
                                    greedy_solved=solved(g[0].components) if g else None,
                                    mean_reward=sum(rewards) / len(rewards) if rewards else None))
    return per_task


def evaluate_policy(
    model_path: str | os.PathLike[str],
    tasks: Sequence[Task],
    *,
    reward: Any = None,
    samples: int = 4,
    temperature: float = 1.0,
    greedy: bool = True,
    max_completion_length: int = 256,
    limits: EpisodeLimits | None = None,
    system_prompt: str = "policy",
    backend: str = "auto",
    sandboxes: int = 8,
    seed: int = 0,
    out_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> PolicyEval:
    """Run every task ``samples`` times at ``temperature`` (and once greedily with ``greedy``),
    score each episode with ``reward`` and report the solved fractions. With ``out_dir`` the
    episodes go to ``trajectories.jsonl`` there (sampled, then greedy) and the summary to
    ``summary.json``; ``progress`` hears (episodes done, total) as they end."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tasks = list(tasks)
    if not tasks:
        raise ValueError("no tasks to evaluate on")
    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(model_path))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32).to(device).eval()
    settings = EvalSettings(reward=reward, samples=samples, temperature=temperature, greedy=greedy,
                            max_completion_length=max_completion_length, limits=limits, system_prompt=system_prompt,
                            backend=backend, sandboxes=sandboxes, seed=seed)
    with settings.rollout(tasks, tok) as rollout:
        return settings.run(str(model_path), tasks, rollout, hf_generators(model, tok), start=start,
                            out_dir=Path(out_dir) if out_dir is not None else None, progress=progress)


class EvalSettings(BaseModel):
    """How held-out episodes are run and scored (the arguments of :func:`evaluate_policy`)."""

    model_config = {"arbitrary_types_allowed": True}
    reward: Any = None
    samples: int = 4
    temperature: float = 1.0
    greedy: bool = True
    max_completion_length: int = 256
    limits: EpisodeLimits | None = None
    system_prompt: str = "policy"
    backend: str = "auto"
    sandboxes: int = 8
    seed: int = 0

    def rollout(self, tasks: list[Task], tokenizer: Any) -> Any:
        """The training rollout over ``tasks`` with these settings (enter it before :meth:`run`). Its
        ``sandboxes`` bound how many episodes run at once, hence the generation batch."""
        from rl.rollout import MultiTurnRollout
        from sandboxes import SandboxConfig

        return MultiTurnRollout(tasks, tokenizer=tokenizer, reward=self.reward,
                                limits=self.limits or EpisodeLimits(max_tokens=10**9),
                                max_completion_length=self.max_completion_length,
                                sandbox_config=SandboxConfig(backend=self.backend), pool_size=self.sandboxes,
                                seed=self.seed, system_prompt=self.system_prompt)

    def run(self, name: str, tasks: list[Task], rollout: Any, generator: Callable[[float], Any], *,
            start: float, out_dir: Path | None, engine: str = "transformers",
            progress: Progress | None = None) -> PolicyEval:
        """The episodes of one policy (``generator``) over ``tasks`` in an entered ``rollout``
        (:meth:`rollout`; episode seeds depend only on the settings, so policies sharing one see the
        same seeds), summarised."""
        from rl.rollout import MultiTurnRollout

        sampled, greedy_eps = run_episodes(rollout, tasks, generator, samples=self.samples,
                                           temperature=self.temperature, greedy=self.greedy, progress=progress)
        per_task = outcomes(tasks, sampled, greedy_eps)
        rewards = [e.reward for e in sampled if e.reward is not None]
        result = PolicyEval(
            model=name, tasks=len(tasks), samples=self.samples, temperature=self.temperature,
            success=sum(o.solved for o in per_task) / max(1, sum(o.samples for o in per_task)),
            greedy_success=(sum(bool(o.greedy_solved) for o in per_task) / len(per_task)) if greedy_eps else None,
            mean_reward=sum(rewards) / len(rewards) if rewards else None,
            mean_sampled_tokens=sum(sum(e.env_mask) for e in sampled) / max(1, len(sampled)),
            seconds=time.perf_counter() - start, engine=engine, per_task=per_task)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            MultiTurnRollout.save_episodes(sampled + greedy_eps, out_dir / "trajectories.jsonl")
            (out_dir / "summary.json").write_text(json.dumps(result.model_dump(exclude={"per_task"}), indent=2))
        return result


def colocated_engine(trainer: Any) -> Any | None:
    """The ``vllm.LLM`` a TRL trainer generates with in colocate mode, else None."""
    vg = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
    return vg.llm if vg is not None and getattr(vg, "mode", "colocate") == "colocate" else None


class HeldOutEval(TrainerCallback):
    """Held-out success at the end of a Dr. GRPO run, on the run's own colocated vLLM engine: the
    trained policy, then each checkpoint of ``checkpoints`` (name -> folder, e.g. the base and the
    primed policy), each policy's weights loaded into the engine in turn (rl.vllm_sync).

    The same episodes as :func:`evaluate_policy` (the same settings, a fresh rollout and seeds per
    policy); only the generator differs. Where the run has no engine (transformers generation), or a
    checkpoint's weights do not fit the engine's model, that policy is left out of ``results`` and
    the caller evaluates it with :func:`evaluate_policy`. ``trainer.train`` must be bound first
    (``bind``; rl.trainer.train does it for every callback that has it). ``progress`` hears
    (policy, episodes done, episodes of that policy) as episodes end."""

    def __init__(self, tasks: Sequence[Task], settings: EvalSettings, *, trained: str,
                 checkpoints: dict[str, str | os.PathLike[str]], tokenizer_path: str | os.PathLike[str],
                 out_dir: str | os.PathLike[str] | None = None, on_start: Callable[[], Any] | None = None,
                 settings_for: dict[str, EvalSettings] | None = None,
                 progress: Callable[[str, int, int], None] | None = None):
        self.tasks, self.settings, self.trained = list(tasks), settings, trained
        # a policy's own settings where it needs fewer episodes (the demo's base: it scores ~0% either way)
        self.settings_for = dict(settings_for or {})
        self.checkpoints = {k: Path(v) for k, v in checkpoints.items()}
        self.tokenizer_path, self.on_start = str(tokenizer_path), on_start
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.trainer: Any = None
        self.results: dict[str, PolicyEval] = {}
        self.progress = progress

    def bind(self, trainer: Any) -> None:
        self.trainer = trainer

    def on_train_end(self, args, state, control, model=None, **kw):  # noqa: ANN001 - TrainerCallback's API
        llm = colocated_engine(self.trainer)
        if llm is None or model is None or not self.tasks:
            return
        if self.on_start is not None:
            self.on_start()
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from rl.vllm_sync import VLLMSyncError, sync_weights

        tok = AutoTokenizer.from_pretrained(self.tokenizer_path)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        policies: list[tuple[str, Any]] = [(self.trained, getattr(model, "module", model))]
        policies += [(name, path) for name, path in self.checkpoints.items()]
        with self.settings.rollout(self.tasks, tok) as rollout:  # one sandbox pool for every policy
            for name, policy in policies:
                start = time.perf_counter()
                label = str(policy) if isinstance(policy, Path) else str(Path(args.output_dir) / "final")
                try:
                    if isinstance(policy, Path):
                        policy = AutoModelForCausalLM.from_pretrained(str(policy), dtype=torch.float32)
                    sync_weights(llm, policy)
                except (VLLMSyncError, OSError, ValueError) as e:
                    log.warning("held-out evaluation of %s on the run's engine failed (%s): evaluate it apart",
                                name, e)
                    continue
                out = self.out_dir / name if self.out_dir is not None else None
                st = self.settings_for.get(name, self.settings)
                tell = None if self.progress is None else (lambda d, t, n=name: self.progress(n, d, t))
                self.results[name] = st.run(label, self.tasks, rollout, engine_generators(llm),
                                            start=start, out_dir=out, engine="vllm", progress=tell)


def by_family(tasks: list[Task], per_task: list[TaskOutcome]) -> dict[str, dict[str, Any]]:
    """Held-out success per task family (synth.task_families.family_of: a multi-step shape, else the
    task's first gold tool): where a policy's successes are, and how many tasks it never solves (no
    sampled nor greedy success: nothing for RL to reinforce)."""
    from synth.task_families import family_of

    family = {t.id: family_of(t) for t in tasks}
    out: dict[str, dict[str, Any]] = {}
    for o in per_task:
        row = out.setdefault(family[o.task_id], {"tasks": 0, "solved": 0, "samples": 0, "never_solved": 0,
                                                 "pass_at_k": 0})
        row["tasks"] += 1
        row["pass_at_k"] += int(o.solved > 0)
        row["solved"] += o.solved
        row["samples"] += o.samples
        row["never_solved"] += int(o.solved == 0 and not o.greedy_solved)
    for row in out.values():
        row["success"] = round(row.pop("solved") / max(1, row.pop("samples")), 4)
        row["pass_at_k"] = round(row["pass_at_k"] / row["tasks"], 4)
    return dict(sorted(out.items()))


def pooled_success(per_task: list[TaskOutcome], task_ids: set[str]) -> float | None:
    """Solved fraction of the sampled episodes of the tasks in ``task_ids`` (None when there are none)."""
    mine = [o for o in per_task if o.task_id in task_ids]
    samples = sum(o.samples for o in mine)
    return sum(o.solved for o in mine) / samples if samples else None


def pass_at_k(per_task: list[TaskOutcome]) -> float | None:
    """Share of tasks solved in at least one of their sampled episodes (k = the samples per task)."""
    return sum(o.solved > 0 for o in per_task) / len(per_task) if per_task else None
