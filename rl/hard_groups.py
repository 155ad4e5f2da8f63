"""More generations for hard groups: which G of a task's pooled samples a group keeps.

A group is *hard* when its rewards are all equal and no episode solved the task (rl.rollout.solved):
the task is beyond the policy at its current pass rate, and Dr. GRPO gets no gradient from it. With
``rollout.extra_generations: R`` the rollout draws up to R more rounds of G episodes of the SAME task
(stopping at the first round after which the pool's rewards differ), so a rare success, the one
outcome that can teach the task, gives a gradient. The trainer's group size stays G: :func:`keep`
picks G of the pooled ``G * (1 + rounds)`` samples.

The choice: every sample whose reward differs from the flat group's common value (the rare
outcomes; with a 0/1 reward, the successes), at most G - 1 of them drawn at random, and the rest of
the G drawn at random from the others (the failures), all with a seeded generator.

Its bias, for a 0/1 reward with per-task pass rate p: the kept successes are independent draws from
the policy's success-conditional distribution, the kept failures from its failure-conditional one,
and how many of each are kept depends only on the counts. Since p E[grad log pi | success] =
grad p = -(1 - p) E[grad log pi | failure], the group's Dr. GRPO gradient,
(1 - m) sum_succ grad log pi - m sum_fail grad log pi with m the kept success share, has an
expectation that is a positive multiple of grad p for any such counts: the direction per task is
unbiased; its size is not. The kept group over-represents successes (m is about k / G, not
k / (G (1 + rounds))), so a hard task's step is larger than its pass rate alone would give, and
hard tasks weigh more against others than in plain GRPO (the same kind of prompt re-weighting
DAPO's dynamic sampling makes when it keeps only varying groups). The logged reward of such a group
over-states the task's pass rate. With graded rewards (partial credit) the direction is a
re-weighting of the reward levels, no longer exactly grad E[r]. A uniformly random G of the pool
would be unbiased but would mostly drop the rare success, which is the point of drawing more.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["keep"]


def keep(rewards: Sequence[float | None], g: int, rng: random.Random) -> list[int] | None:
    """Indices (ascending) of the ``g`` samples to keep from a pool whose first ``g`` are the original
    flat group, or None when the whole pool is flat too (then the original group stays)."""
    if g < 2 or len(rewards) < g:
        raise ValueError(f"a pool of {len(rewards)} rewards cannot give a group of {g}")
    base = {r for r in rewards[:g] if r is not None}
    if len(base) > 1:
        raise ValueError("the original group is not flat")
    if not base:  # every original episode abstained: the first scored reward is the common value
        base = {next((r for r in rewards if r is not None), None)}
    rare = [i for i, r in enumerate(rewards) if r is not None and r not in base]
    if not rare:
        return None
    chosen = rng.sample(rare, min(len(rare), g - 1))
    rest = [i for i, r in enumerate(rewards) if i not in set(rare)]
    scored = [i for i in rest if rewards[i] is not None]
    fill = rng.sample(scored, min(len(scored), g - len(chosen)))
    if len(chosen) + len(fill) < g:  # too few scored failures: abstaining episodes fill the group
        fill += rng.sample([i for i in rest if rewards[i] is None], g - len(chosen) - len(fill))
    return sorted(chosen + fill)
