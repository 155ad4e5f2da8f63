"""Balanced task draws: every kind of training task (of at least MIN_KIND tasks) gets the same share of the RL groups.

    w = kind_weights(tasks)                      # task id -> 1 / max(tasks of its kind, MIN_KIND)
    rows = weighted_rows(tasks, w, rng)          # one round of len(tasks) draws, the kinds alike
    picks = weighted_sample(pool, w, k, rng)     # k distinct tasks, rarer kinds first in expectation

Why: synthesis makes kinds in the proportions the worlds happen to hold. In the demo's home worlds one
seed's read_report training tasks read 106 lights, 22 locks and 12 thermostats, and its held-out split
(disjoint by entity) holds out a thermostat and a lock; uniform draws give the kinds it is tested on a
tenth of the groups, and Dr. GRPO fits the lights (bench/results/reader_gpu.md, sections 23 and 25).

A task's kind is its family (synth.task_families.family_of) and the shapes of the entities its gold
calls name, an id with its digits masked (``TH-2`` -> ``TH-#``), so the kind says which sort of record
the task reads or writes without naming the record; a task that names no entity is kinded by its gold
tools instead. Nothing domain-specific: any domain whose ids carry a kind prefix balances by it.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from synth.task_families import entities, family_of
from synth.task_models import Task

__all__ = ["MIN_KIND", "draw_weights", "kind_weights", "task_kind", "weighted_rows", "weighted_sample"]

_DIGITS = re.compile(r"\d+")
# A kind of a few tasks gets less than a full share: drawn as often as a large one, its handful of tasks
# would fill a tenth of the groups and be fitted by rote (a PIN code read as an id made a kind of one task).
MIN_KIND = 10


def task_kind(task: Task) -> tuple[str, ...]:
    shapes = sorted({_DIGITS.sub("#", e) for e in entities(task)})
    return (family_of(task), *(shapes or [a.name for a in task.gold_actions]))


def kind_weights(tasks: Sequence[Task]) -> dict[str, float]:
    """Each task's draw weight, ``1 / max(tasks of its kind, MIN_KIND)``: every kind of at least ``MIN_KIND``
    tasks then weighs 1, a smaller one in proportion to its size."""
    kinds = {t.id: task_kind(t) for t in tasks}
    count = Counter(kinds.values())
    return {tid: 1.0 / max(count[k], MIN_KIND) for tid, k in kinds.items()}


def draw_weights(tasks: Sequence[Task], balance: str) -> dict[str, float] | None:
    """The weights ``balance`` asks for: ``"kind"``, :func:`kind_weights`; ``"none"``, None (uniform)."""
    if balance not in ("none", "kind"):
        raise ValueError(f"balance must be none or kind, not {balance!r}")
    return kind_weights(tasks) if balance == "kind" else None


def weighted_rows(tasks: Sequence[Task], weights: Mapping[str, float], rng: random.Random) -> list[Task]:
    """One round of the dataset: ``len(tasks)`` draws with replacement, in proportion to the weights."""
    return rng.choices(list(tasks), weights=[weights[t.id] for t in tasks], k=len(tasks))


def weighted_sample(pool: Sequence[str], weights: Mapping[str, float] | None, k: int,
                    rng: random.Random) -> list[str]:
    """``min(k, len(pool))`` distinct ids of ``pool``: uniformly (``rng.sample``) without weights, else
    without replacement in proportion to them (Efraimidis and Spirakis 2006: the largest ``u ** (1 / w)``)."""
    if weights is None:
        return rng.sample(list(pool), min(k, len(pool)))
    keyed = sorted(pool, key=lambda tid: rng.random() ** (1.0 / weights[tid]), reverse=True)
    return keyed[: min(k, len(keyed))]
