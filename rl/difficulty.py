"""Task-level difficulty filtering before rollout: a group whose task the policy has lately always
or never solved is swapped for another task before any episode of it runs.

    flt = DifficultyFilter(task_ids, window=2, readmit=0.1, seed=0)
    chosen = flt.select(step_group_tasks, step)   # the step's groups, all ranks', in batch order
    ... roll out chosen.tasks ...
    flt.record([(task_id, flat), ...])            # every group rolled out this step, all ranks'

Why: a group whose rewards are all equal has no advantage, so Dr. GRPO gets no gradient from it,
and on the demo's multi-step families most groups are such (bench/results/multistep_h100.md).
DAPO's dynamic sampling (``rollout.dynamic_sampling``) finds them after they ran and re-rolls
other tasks, paying for both. Filtering by a task's recent pass rate before rolling it out is what
online difficulty filtering does (Bae et al. 2025, arXiv 2504.03380: keep prompts whose pass rate
is in a band), what GRESO does before rollout (Zheng et al. 2025, arXiv 2506.02177: a prompt that
gave no signal in earlier epochs is likely to give none again, so it is skipped with a probability
that leaves room to explore it), and what Polaris / Kimi-style curricula do by dropping tasks the
policy always or never solves. Our pass-rate estimate is the task's own last ``window`` groups in this run: a task
is *marked* when each of them was flat (all rewards equal). A marked task is replaced by a task
that is not marked (unseen tasks are not), except that with probability ``readmit`` (seeded per
seed and step) it is kept, so a task the policy has since learned to solve sometimes, or
forgotten, comes back and its record is refreshed. Dynamic sampling still runs after rollout and
catches what the record could not predict.

Where: inside ``MultiTurnRollout.run`` (TRL's ``rollout_func``), on the task ids of the step's
prompts. TRL's sampler and dataset are built once from a fixed, seeded order that makes resumed runs
sample the same rows; changing them would mean owning TRL's ``RepeatSampler`` and its epoch
arithmetic. The rollout already swaps tasks for dynamic sampling (the prompt TRL holds is only
logged; the prompt ids, completions and rewards are the rollout's), so this is the least invasive
place, and the one where the outcomes are known.

Ranks: each rank's prompts are its slice of the step's batch, and a group can span ranks. The
rollout gathers the step's task ids from every rank (:func:`rl.distributed.gather_rows`), every rank
calls :meth:`select` on that same list and takes its own slice, and every rank records the same
gathered outcomes; so the record and the choices are identical on every rank by construction (a
pure function of seed, step and the gathered outcomes). Replacements are drawn from tasks not in
the step's batch and never twice in one step.

Not kept across a resume: the record starts empty in a resumed run, so its first steps filter
nothing (the uninterrupted run would have); rollouts stay seeded per (seed, step, episode).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rl.balance import weighted_sample

__all__ = ["DifficultyFilter", "Selection"]


@dataclass(frozen=True)
class Selection:
    """The step's groups after filtering: one task id per group, in the order given."""

    tasks: list[str]
    filtered: int  # groups whose marked task was replaced
    readmitted: int  # groups of a marked task kept by the re-admit draw
    marked: int  # tasks marked when the step began (of all training tasks)


class DifficultyFilter:
    """A per-task record of the group outcomes seen in this run, and the choice of the step's tasks."""

    def __init__(self, task_ids: Iterable[str], *, window: int = 1, readmit: float = 0.1, seed: int | None = 0,
                 weights: Mapping[str, float] | None = None):
        self.task_ids = sorted(set(task_ids))
        self.weights = weights  # replacements drawn in proportion to them (rl.balance); None: uniformly
        if not self.task_ids:
            raise ValueError("no tasks to filter")
        if window < 1:
            raise ValueError(f"window must be >= 1, not {window}")
        if not 0.0 <= readmit <= 1.0:
            raise ValueError(f"readmit must be in [0, 1], not {readmit}")
        self.window, self.readmit, self.seed = window, readmit, seed
        self.history: dict[str, deque[bool]] = {t: deque(maxlen=window) for t in self.task_ids}

    def record(self, outcomes: Iterable[tuple[str, bool]]) -> None:
        """``(task id, flat)`` of each group rolled out, in one agreed order (a task seen several
        times in a step gets each outcome, in that order). Unknown task ids are an error."""
        for tid, flat in outcomes:
            if tid not in self.history:
                raise KeyError(f"task {tid!r} is not a training task")
            self.history[tid].append(bool(flat))

    def marked(self, tid: str) -> bool:
        """Whether ``tid``'s last ``window`` groups were all flat."""
        h = self.history[tid]
        return len(h) == self.window and all(h)

    def select(self, groups: Sequence[str], step: int) -> Selection:
        """The step's task per group: a marked task is replaced by a task that is neither marked nor in
        the step's batch (nor already picked), unless the re-admit draw keeps it or none is left."""
        marked_now = sum(self.marked(t) for t in self.task_ids)
        rng = random.Random(f"difficulty/{self.seed}/{step}")
        out, filtered, readmitted = list(groups), 0, 0
        drop: list[int] = []
        for k, tid in enumerate(groups):
            if not self.marked(tid):
                continue
            if rng.random() < self.readmit:
                readmitted += 1
            else:
                drop.append(k)
        if drop:
            busy = set(groups)
            pool = [t for t in self.task_ids if t not in busy and not self.marked(t)]
            picks = weighted_sample(pool, self.weights, len(drop), rng)
            for k, tid in zip(drop, picks, strict=False):
                out[k] = tid
                filtered += 1
        return Selection(tasks=out, filtered=filtered, readmitted=readmitted, marked=marked_now)
