"""Multi-step task families: which shape a task has, tasks of a chosen shape, and a held-out split
that is disjoint from training by entity.

    made = synthesize_family_tasks({"lookup_act": 150, "read_report": 150, "ask_user": 150},
                                   seed=0, domains=["home_devices"])
    train, held = split_by_entity(made, held_per_family=27, seed=0)
    family_of(task)         # "lookup_act" | "read_report" | "ask_user" | the gold tool of a single action

The three multi-step families, each a shape that needs more than one copied call:

- ``lookup_act`` (look up, then act): a write's argument is in no message of the user; only an
  earlier call's output holds it ("the device whose name is Garage door" -> list_home_devices ->
  set_door_lock(LK-3)).
- ``read_report`` (read and report): nothing is written; the answer the user wants is a value of a
  tool's output, checked by the expected-outputs reward (communication).
- ``ask_user`` (ask the user): the instruction lacks a detail (redacted in the scripted user's
  opening, ``synth.usersim.user_only_info``); the user simulator gives it only when the agent asks
  for it, and the gold calls need it, so the task fails without asking.

The tasks are the task synthesiser's own (synth.tasks: gold replay, expected outputs, scenario),
made with a plan length and withholding rate that favour the shape, then classified by
:func:`family_of` and kept only if they have it. Every task stays replay-valid.

Held-out tasks of a multi-step family touch only entities (ids in the gold arguments) that no
training task of that family touches: a policy cannot pass them by recalling a training task's id
for a name; it has to copy what the tool or the user says.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from synth.task_models import Task
from synth.task_values import fmt, id_like

__all__ = ["MULTISTEP", "RECIPES", "entities", "family_of", "is_multistep", "split_by_entity",
           "synthesize_family_tasks"]

MULTISTEP: tuple[str, ...] = ("lookup_act", "read_report", "ask_user")

# The synthesiser settings that make each shape common (plan lengths, share withholding a detail).
RECIPES: dict[str, dict[str, Any]] = {
    "lookup_act": {"lengths": {2: 1.0}, "user_info_rate": 0.0},
    "read_report": {"lengths": {1: 0.5, 2: 0.5}, "user_info_rate": 0.0},
    "ask_user": {"lengths": {1: 1.0}, "user_info_rate": 1.0},
}
MAX_READ_OUTPUTS = 2  # more values to report (a whole listing) is a different skill than copying one


def _effects(task: Task) -> list[str]:
    from toolzoo.domains import load_domain

    domain = load_domain(task.domain)
    return [domain.tool(a.name).effect for a in task.gold_actions]


def family_of(task: Task) -> str:
    """The task's family: a multi-step shape (module docstring) or, for a task of none of them, its
    first gold tool (the single-action families the demo reported before)."""
    from synth.usersim import user_only_info

    gold = task.gold_actions[0].name if task.gold_actions else "none"
    if task.needs_user_info and user_only_info(task):
        return "ask_user"
    effects = _effects(task)
    if "write" not in effects:
        if task.expected_outputs and len(task.expected_outputs) <= MAX_READ_OUTPUTS:
            return "read_report"
        return gold
    said = task.instruction
    for i, (a, effect) in enumerate(zip(task.gold_actions, effects, strict=True)):
        if i and effect == "write" and any(isinstance(v, str) and fmt(v) not in said for v in a.arguments.values()):
            return "lookup_act"
    return gold


def is_multistep(family: str) -> bool:
    return family in MULTISTEP


def entities(task: Task) -> set[str]:
    """The ids a task's gold calls name (device LK-3, scene SC-2): what "disjoint by entity" compares."""
    return {v for a in task.gold_actions for k, v in a.arguments.items() if id_like(k, v)}


def signature(task: Task) -> tuple[Any, ...]:
    """What makes two tasks the same: domain, world seed and gold calls."""
    import json

    return task.domain, task.seed, json.dumps([a.model_dump() for a in task.gold_actions], sort_keys=True)


def synthesize_family_tasks(counts: dict[str, int], *, seed: int = 0, domains: Sequence[str] | None = None,
                            backend: str = "auto", sandboxes: int = 4, rounds: int = 8,
                            progress: Callable[[str, int, int], None] | None = None, quote_values: bool = False,
                            quote_fields: bool = False, domain_seeds: int | None = None) -> dict[str, list[Task]]:
    """Up to ``counts[family]`` replay-valid tasks of each multi-step family, no two with the same gold
    calls at the same domain seed; fewer only when ``rounds`` batches of the recipe found no more.
    ``progress`` hears (``"FAMILY PHASE"``, done, total) of each batch (synth.tasks.TaskSynthesizer);
    ``quote_values``, ``quote_fields`` and ``domain_seeds`` (how many worlds of each domain; None: synth.tasks'
    DOMAIN_SEEDS) act as in synth.tasks.synthesize_tasks."""
    import anyio

    from sandboxes import SandboxConfig, SandboxPool
    from synth.tasks import DOMAIN_SEEDS, TaskSynthesizer, check_domains

    unknown = sorted(set(counts) - set(MULTISTEP))
    if unknown:
        raise ValueError(f"unknown task families {unknown}; known: {', '.join(MULTISTEP)}")
    check_domains(domains)

    async def go() -> dict[str, list[Task]]:
        out: dict[str, list[Task]] = {}
        async with SandboxPool(SandboxConfig(backend=backend), size=sandboxes) as pool:  # type: ignore[arg-type]
            for family, want in counts.items():
                kept: list[Task] = []
                seen: set[tuple[Any, ...]] = set()
                for r in range(rounds):
                    if len(kept) >= want:
                        break
                    fseed = seed * 1000 + 100 * (MULTISTEP.index(family) + 1) + r
                    tell = None if progress is None else (
                        lambda phase, done, total, f=family: progress(f"{f} {phase}", done, total))
                    synth = TaskSynthesizer(pool, seed=fseed, domains=domains, progress=tell, quote_values=quote_values,
                                            quote_fields=quote_fields, domain_seeds=domain_seeds or DOMAIN_SEEDS,
                                            **RECIPES[family])
                    made = await synth.run(max(16, 4 * (want - len(kept))))
                    for t in made.tasks:
                        sig = signature(t)
                        if family_of(t) == family and sig not in seen and len(kept) < want:
                            seen.add(sig)
                            kept.append(t.model_copy(update={"id": f"{family}-{t.id}"}))
                out[family] = kept
        return out

    return anyio.run(go)


def split_by_entity(by_family: dict[str, list[Task]], held_per_family: int,
                    seed: int = 0) -> tuple[list[Task], list[Task]]:
    """(train, held-out): per family, entities are drawn (seeded) into a held-out set until the tasks
    naming only those entities reach ``held_per_family``; those tasks (up to that many) are held out,
    the tasks naming none of them train, and a task naming both kinds is dropped."""
    rng = random.Random(f"tooldojo-families:{seed}")
    train: list[Task] = []
    held: list[Task] = []
    for tasks in by_family.values():
        pool = sorted({e for t in tasks for e in entities(t)})
        rng.shuffle(pool)
        chosen: set[str] = set()
        inside: list[Task] = []
        for e in pool:
            if len(inside) >= held_per_family:
                break
            chosen.add(e)
            inside = [t for t in tasks if entities(t) and entities(t) <= chosen]
            if 5 * len(chosen) >= 3 * len(pool) and inside:
                break  # keep at least 40% of the entities for training
        held += inside[:held_per_family]
        train += [t for t in tasks if not entities(t) & chosen]
    return train, held
