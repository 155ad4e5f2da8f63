"""Look-up tasks whose listing read is narrowed by what the user said: priming traces that search, then pick.

A ``lookup_act`` task (synth.task_families) lists records, then writes with the id of the one the user named
("the device whose name is Hallway light" -> list_home_devices -> set_home_light(LT-6)). In a record the id
stands *before* the name it is matched by, so picking it from a whole listing (~10 records) is a backward
copy that a small policy does not learn from priming (bench/results/reader_gpu.md section 39: at chance).

A careful agent narrows the search first. :func:`anarrow_lookups` rewrites the listing read of each look-up
task with the read's optional filters whose values the user's words already say (``room`` "Hallway",
``device_type`` "light"): the value is the target record's own field, spelled as the user wrote it. The
narrowed read is run in a real sandbox and kept only if its output still holds the id and holds fewer records
than the gold read's. Reads change no state, so every task stays replay-valid with the same final state.

    narrowed, why = await anarrow_lookups(tasks, pool)   # why: {"narrowed": 26, "no_filter_said": 92, ...}
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from synth.task_families import family_of
from synth.task_models import Action, Task
from synth.task_values import fmt, id_like, names_match

__all__ = ["anarrow_lookups", "narrowing_filters", "records_of"]


def records_of(output: Any) -> list[dict[str, Any]]:
    """The records of a listing: the dicts of the first list found in the output (or the output's own list)."""
    if isinstance(output, list):
        return [r for r in output if isinstance(r, dict)]
    if isinstance(output, dict):
        for v in output.values():
            if isinstance(v, list) and any(isinstance(r, dict) for r in v):
                return [r for r in v if isinstance(r, dict)]
    return []


def _target(task: Task) -> tuple[int, str] | None:
    """(index of the listing call, the id it must show): the call just before the first later call that names an
    id the user never said (the caller checks that it is a read)."""
    said = task.instruction
    for i, a in enumerate(task.gold_actions):
        for k, v in a.arguments.items():
            if i and id_like(k, v) and fmt(v) not in said:
                return i - 1, v
    return None


def _spoken(value: str, text: str) -> str | None:
    """The user's spelling of ``value`` when it stands in ``text`` as whole words (any case), else None."""
    m = re.search(r"(?<![\w-])" + re.escape(value) + r"(?![\w-])", text, flags=re.IGNORECASE)
    return m.group(0) if m else None


def narrowing_filters(spec_parameters: dict[str, Any], gold_args: dict[str, Any], record: dict[str, Any],
                      instruction: str) -> dict[str, str]:
    """The read's optional parameters the gold call leaves out whose value is one of ``record``'s own string
    fields (a field of the same name, or one the parameter ends with: ``device_type`` <- ``type``) that the
    instruction says; each value spelled as the user wrote it, and within the parameter's enum if it has one."""
    props = spec_parameters.get("properties") or {}
    required = set(spec_parameters.get("required") or [])
    out: dict[str, str] = {}
    for p, schema in props.items():
        if p in required or p in gold_args:
            continue
        for k, v in record.items():
            if not (isinstance(v, str) and v and (k == p or names_match(k, p))):
                continue
            enum = (schema or {}).get("enum")
            spoken = _spoken(v, instruction)
            if spoken is None:
                continue
            value = v if enum else spoken
            if enum and value not in enum:
                continue
            out[p] = value
            break
    return out


async def _narrow_one(task: Task, pool: Any) -> tuple[Task, str]:
    from toolzoo.domains import load_domain
    from toolzoo.runtime import ToolRuntime

    target = _target(task)
    if target is None:
        return task, "no_target"
    i, want = target
    read = task.gold_actions[i]
    domain = load_domain(task.domain)
    spec = domain.tool(read.name)
    if spec.effect != "read":
        return task, "not_a_read"
    sb = await pool.acquire()
    try:
        rt = ToolRuntime(sb, domain, tools=[spec], seed=task.seed)
        await rt.load()
        gold = await rt.call(read.name, read.arguments)
        if not gold.ok:
            return task, "gold_read_failed"
        records = records_of(gold.output)
        record = next((r for r in records if want in r.values()), None)
        if record is None:
            return task, "id_not_in_a_record"
        extra = narrowing_filters(spec.parameters, read.arguments, record, task.instruction)
        if not extra:
            return task, "no_filter_said"
        args = {**read.arguments, **extra}
        narrowed = await rt.call(read.name, args)
        if not narrowed.ok:
            return task, "narrowed_read_failed"
        kept = records_of(narrowed.output)
        if not any(want in r.values() for r in kept) or len(kept) >= len(records):
            return task, "no_narrower"
    finally:
        await pool.release(sb)
    actions = [*task.gold_actions[:i], Action(name=read.name, arguments=args), *task.gold_actions[i + 1:]]
    return task.model_copy(update={"gold_actions": actions}), "narrowed"


async def anarrow_lookups(tasks: Sequence[Task], pool: Any) -> tuple[list[Task], dict[str, int]]:
    """``tasks`` with each look-up task's listing read narrowed (module docstring), in order; and how many were
    narrowed or why not (``narrowed``, ``no_filter_said``, ...; ``other_family`` for the rest)."""
    import anyio

    out = list(tasks)
    why: Counter[str] = Counter()

    async def one(j: int) -> None:
        out[j], reason = await _narrow_one(out[j], pool)
        why[reason] += 1

    async with anyio.create_task_group() as tg:
        for j, t in enumerate(out):
            if family_of(t) == "lookup_act":
                tg.start_soon(one, j)
            else:
                why["other_family"] += 1
    return out, dict(sorted(why.items()))
