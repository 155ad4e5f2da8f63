"""Gold-action search (steps 3-4 of synth/tasks.py): run a plan in a sandbox at the seeded state,
drawing each action's arguments from earlier outputs where they can come from there (the
dependency is real) and from the seeded state otherwise, redrawing failed calls and writes that
change nothing; then prune reads that feed nothing and pick the expected outputs the agent must
report."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from synth.task_graph import DomainContext
from synth.task_models import CALL_TIMEOUT
from synth.task_values import _dumps, _scalar, fmt, humanize, id_like, names_match
from toolzoo.spec import ToolSpec
from toolzoo.arguments import is_valid, singular


CALL_TRIES = 6             # argument redraws per action


@dataclass
class Binding:
    """A value seen in an action's output, with the row it sits in (to describe it)."""

    key: str
    value: Any
    step: int
    row: dict | None = None
    rows: list | None = None
    list_key: str | None = None
    kind: Literal["output", "root"] = "output"   # root: an echo of a value the user gave


def origin(b: Binding, steps: list[Step]) -> Binding:
    """Where a value first came from: a value echoed by a tool is traced back to the step that chose it."""
    for j in range(min(b.step, len(steps) - 1) + 1):
        st = steps[j]
        for q, v in st.root.items():
            if v == b.value or (isinstance(v, list) and b.value in v):
                return Binding(q, b.value, j, kind="root")
        for bs in st.derived.values():
            for ob in bs:
                if ob.value == b.value:
                    return ob
    return b


def bindings_of(output: Any, step: int) -> list[Binding]:
    out: list[Binding] = []

    def walk(obj: Any, row: dict | None, rows: list | None, list_key: str | None, depth: int) -> None:
        if depth > 6 or not isinstance(obj, dict):
            return
        for k, v in obj.items():
            if _scalar(v):
                if v is not None and not isinstance(v, bool):
                    out.append(Binding(k, v, step, row if row is not None else obj, rows, list_key))
            elif isinstance(v, list):
                dict_rows = [x for x in v if isinstance(x, dict)]
                if dict_rows:
                    for item in dict_rows[:100]:
                        walk(item, item, dict_rows, k, depth + 1)
                else:
                    scalars = [x for x in v if _scalar(x) and x is not None and not isinstance(x, bool)]
                    for x in scalars[:100]:
                        out.append(Binding(singular(k), x, step, None, scalars if len(scalars) > 1 else None, k))
            elif isinstance(v, dict):
                walk(v, row, rows, list_key, depth + 1)

    if isinstance(output, list):
        output = {"items": output}
    walk(output, None, None, None, 0)
    return out


def describe(b: Binding) -> tuple[str, str, str] | None:
    """(entity, field, value): 'the order whose status is pending' singles out the row the value came from."""
    if not b.rows or len(b.rows) <= 1 or b.row is None:
        return None
    entity = humanize(singular(b.list_key or "item"))
    fields = sorted(b.row.items(), key=lambda kv: (
        0 if any(w in kv[0] for w in ("name", "title", "label", "subject")) else
        1 if isinstance(kv[1], str) and not id_like(kv[0], kv[1]) else 2 if isinstance(kv[1], str) else 3))
    for f, v in fields:
        if f == b.key or not _scalar(v) or v is None or isinstance(v, bool):
            continue
        if sum(1 for r in b.rows if isinstance(r, dict) and r.get(f) == v) == 1:
            return entity, humanize(f), fmt(v)
    return None


@dataclass
class Step:
    tool: ToolSpec
    args: dict[str, Any]
    output: Any
    root: dict[str, Any] = field(default_factory=dict)           # drawn from the state: the user must say them
    derived: dict[str, list[Binding]] = field(default_factory=dict)  # taken from earlier outputs


class PlanFailed(Exception):
    """A plan could not be executed; the message is the reason counted in the stats."""


def _param_items_schema(schema: dict) -> dict | None:
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "array" in types:
        items = schema.get("items")
        return items if isinstance(items, dict) else {}
    return None


def _derivable(ctx: DomainContext, tool: ToolSpec, p: str, schema: dict, steps: list[Step]) -> list[Binding]:
    """Values earlier outputs offer for parameter p: from the most recent step that has any."""
    items = _param_items_schema(schema)
    target = items if items is not None else schema
    for i in range(len(steps) - 1, -1, -1):
        st = steps[i]
        found = []
        for b in bindings_of(st.output, i):
            if not is_valid(target, b.value) or not (id_like(p, b.value) or id_like(b.key, b.value)):
                continue
            if names_match(b.key, p):
                found.append(b)
        uniq: dict[str, Binding] = {}
        for b in found:
            uniq.setdefault(_dumps(b.value), b)
        if uniq:
            return list(uniq.values())
    return []


def draw_args(ctx: DomainContext, tool: ToolSpec, steps: list[Step], rng: random.Random) -> tuple[dict, dict, dict]:
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    args: dict[str, Any] = {}
    root: dict[str, Any] = {}
    derived: dict[str, list[Binding]] = {}
    for p, schema in props.items():
        schema = schema if isinstance(schema, dict) else {}
        offered = _derivable(ctx, tool, p, schema, steps)
        if p not in required:
            if not (offered and rng.random() < 0.5) and rng.random() >= (0.25 if tool.effect == "write" else 0.2):
                continue
        if offered:
            if _param_items_schema(schema) is not None:
                k = 2 if len(offered) > 1 and rng.random() < 0.25 else 1
                picked = rng.sample(offered, k)
                value = [b.value for b in picked]
            else:
                picked = [rng.choice(offered)]
                value = picked[0].value
            picked = [origin(b, steps) for b in picked]
            if is_valid(schema, value):
                args[p], derived[p] = value, picked
                continue
        try:
            value = ctx.sampler.value(p, schema, rng)
        except LookupError:
            if p in required:
                raise PlanFailed(f"cannot draw {p}") from None
            continue
        args[p], root[p] = value, value
    if not is_valid(tool.parameters, args):
        raise PlanFailed("drawn arguments do not fit the schema")
    return args, root, derived


async def run_plan(sb: Any, ctx: DomainContext, plan: list[str], rng: random.Random) -> list[Step]:
    steps: list[Step] = []
    digest = ctx.digest
    for name in plan:
        tool = ctx.tool(name)
        last = "no attempt"
        for _ in range(CALL_TRIES):
            try:
                args, root, derived = draw_args(ctx, tool, steps, rng)
            except PlanFailed as e:
                last = str(e)
                continue
            r = await sb.call_tool(name, args, timeout=CALL_TIMEOUT)
            if not r.ok:
                last = f"{r.kind}" + (f" {r.code}" if r.code else "")
                continue
            if tool.effect == "write":
                new = (await sb.snapshot()).digest
                if new == digest:
                    last = "write changed nothing"
                    continue
                digest = new
            steps.append(Step(tool, args, r.output, root, derived))
            break
        else:
            raise PlanFailed(f"{name}: {last}")
    return steps


def prune_steps(steps: list[Step]) -> list[Step]:
    """Drop reads that feed nothing later and are not the final answer (reads change no state).

    A value that a dropped read only echoed becomes a plain (user-given) argument of its consumer.
    """
    while True:
        used = {b.step for st in steps for bs in st.derived.values() for b in bs if b.kind == "output"}
        keep = [i for i, st in enumerate(steps) if st.tool.effect == "write" or i in used or i == len(steps) - 1]
        if len(keep) == len(steps):
            return steps
        remap = {old: new for new, old in enumerate(keep)}
        kept = [steps[i] for i in keep]
        seen: set[int] = set()
        for st in kept:
            for p in list(st.derived):
                bs = st.derived[p]
                if any(b.step not in remap for b in bs):
                    st.root[p] = st.args[p]
                    del st.derived[p]
                    continue
                for b in bs:
                    if id(b) not in seen:
                        seen.add(id(b))
                        b.step = remap[b.step]
        steps = kept


_MONEY = ("cents", "total", "amount", "balance", "fee", "cost", "price", "refund", "charge", "due", "credit")
_STATUS = ("status", "state", "stage", "decision", "outcome")
_COUNT = ("count", "remaining", "left", "available", "free", "used", "quota", "position", "version")


def _score(key: str, value: Any, known: set[str]) -> int:
    k = key.lower()
    s = fmt(value)
    if isinstance(value, bool) or value is None or len(s) < 2 or len(s) > 60:
        return 0
    if (k.endswith("_id") or k == "id" or k.endswith(("_number", "_key"))) and s not in known:
        return 5
    if any(w in k for w in _MONEY) and isinstance(value, (int, float)):
        return 4
    if any(w in k for w in _STATUS) and isinstance(value, str):
        return 3
    if any(w in k for w in _COUNT) or k in ("due_date", "date", "new_due", "due", "start", "time", "seat"):
        return 2
    if isinstance(value, str) and not value.startswith("zz-"):
        return 1
    return 0


def pick_outputs(steps: list[Step], ctx: DomainContext, rng: random.Random) -> list[tuple[str, str, int]]:
    """(field, value, step) the agent must tell the user: from write results and a final read's answer."""
    mentioned = {fmt(v) for st in steps for v in st.args.values()} | {
        fmt(x) for st in steps for v in st.args.values() if isinstance(v, list) for x in v}
    known = set(ctx.harvest.strings)
    scored: list[tuple[int, float, str, str, int]] = []
    final_read = steps[-1].tool.effect == "read"
    for i, st in enumerate(steps):
        if st.tool.effect != "write" and not (final_read and i == len(steps) - 1):
            continue
        weight = 2 if i == len(steps) - 1 else 1
        out = st.output if isinstance(st.output, dict) else {"result": st.output}
        for k, v in out.items():
            if _scalar(v):
                s = _score(k, v, known)
                if s and fmt(v) not in mentioned:
                    scored.append((s * weight, rng.random(), k, fmt(v), i))
        if final_read and i == len(steps) - 1 and not scored:
            # A list answer: the ids of its rows ("which orders do I have?")
            for b in bindings_of(st.output, i):
                if b.rows and id_like(b.key, b.value) and b.row is not None and next(iter(b.row)) == b.key:
                    if len(b.rows) <= 4 and fmt(b.value) not in mentioned:
                        scored.append((1, -len(scored), b.key, fmt(b.value), i))
            if scored:
                return [(k, v, j) for _s, _r, k, v, j in scored]
    scored.sort(key=lambda t: (-t[0], t[1]))
    out: list[tuple[str, str, int]] = []
    for _s, _r, k, v, j in scored:
        if v not in {x for _, x, _ in out}:
            out.append((k, v, j))
        if len(out) == 2:
            break
    return out
