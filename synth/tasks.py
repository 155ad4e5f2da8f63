"""Verifiable tool-use tasks, APIGen-MT style: blueprint = instruction + gold actions + expected outputs.

    result = synthesize_tasks(200, seed=0, backend="auto")     # sandboxed, replay-validated
    export_tasks(result, "tasks_out")                         # tasks.jsonl, hf/, tasks.parquet, summary.json
    tasks = load_tasks("tasks_out")

How a task is made (everything deterministic in `seed` and the task's index):

1. Per (domain, domain seed) a *context*: the seeded state, a harvest of its values
   (toolzoo.validate.harvest), and a tool dependency graph. The graph is learned by
   calling every tool in a sandbox on the seeded state with sampled arguments: an
   output field of tool A feeds an input parameter of tool B when their names match
   (`customer_id` -> `customer_id`, `from_customer_id`, `customer_ids`) or when A's
   values for that field are values B's parameter takes in the seeded state.
2. A tool subset of the domain is sampled (the agent's tools: gold tools + distractors);
   a backward walk over the graph inside the subset gives a plan of 1-5 tools ending
   (usually) in a write, sometimes with a second write goal.
3. The plan runs in a sandbox at the seeded state. Arguments that an earlier action's
   output can supply are taken from that output (the dependency is real); the rest are
   drawn from the seeded state. A failing call is redrawn; a write that changes nothing
   is redrawn; a plan that cannot run is resampled.
4. Expected outputs (strings the agent must tell the user, tau-bench style) come from
   the results: a new id, an amount, a new status, or the answer of a final read.
5. Instruction, persona and the user-simulator scenario come from templates. The
   instruction names every fact the agent needs, except that `needs_user_info` tasks
   hold some facts back in `user_scenario.known_info` only. A value picked out of a
   list is described by a field that singles out its row ("the order whose status is
   pending"), so the agent has to look it up. An optional LLM can rewrite the
   instruction and persona; any error falls back to the template.
6. Gold replay: each task runs twice more, each time in a fresh sandbox freshly loaded at
   the seeded state; every action must succeed, both final-state hashes must agree with
   each other and with the generation run, and every expected output must appear in the
   gold results. The hash is `final_state_hash`. Tasks that fail are dropped, with a reason.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field

from sandboxes.models import state_digest
from toolzoo.spec import Domain, ToolSpec
from toolzoo.validate import ArgSampler, Harvest, harvest, is_valid, singular

Difficulty = Literal["easy", "medium", "hard"]
TIERS: tuple[Difficulty, ...] = ("easy", "medium", "hard")
LENGTH_WEIGHTS = {1: 0.15, 2: 0.25, 3: 0.25, 4: 0.2, 5: 0.15}
DOMAIN_SEEDS = 4
MAX_ATTEMPTS = 40          # per task index, across domains
ATTEMPTS_PER_DOMAIN = 12   # then the index moves on to another domain
CALL_TRIES = 6             # argument redraws per action
CALL_TIMEOUT = 5.0


# ================================================================= contracts
class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Rubric(BaseModel):
    model_config = ConfigDict(extra="forbid")

    success_criteria: list[str] = Field(default_factory=list)
    expected_tool_pattern: list[str] = Field(default_factory=list)
    checkpoints: list[str] = Field(default_factory=list)


class UserScenario(BaseModel):
    """What the user simulator knows (tau2's StructuredUserInstructions)."""

    model_config = ConfigDict(extra="forbid")

    persona: str
    reason_for_call: str
    known_info: dict[str, str] = Field(default_factory=dict)
    unknown_info: list[str] = Field(default_factory=list)
    task_instructions: str


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    domain: str
    seed: int = Field(description="the domain seed: the state is seed(random.Random(seed))")
    instruction: str
    persona: str
    user_scenario: UserScenario
    gold_actions: list[Action]
    expected_outputs: list[str] = Field(default_factory=list)
    rubric: Rubric
    tools: list[str] = Field(description="tools offered to the agent: the gold tools plus distractors")
    difficulty: Difficulty
    needs_user_info: bool = False
    final_state_hash: str = ""
    provenance: Literal["template", "llm"] = "template"


class DroppedTask(BaseModel):
    id: str
    domain: str
    stage: Literal["generate", "replay"]
    reason: str


class TaskStats(BaseModel):
    requested: int = 0
    kept: int = 0
    attempts: int = 0
    generation_failures: dict[str, int] = Field(default_factory=dict)
    replayed: int = 0
    replay_failures: dict[str, int] = Field(default_factory=dict)
    llm_rewrites: int = 0
    llm_errors: int = 0
    per_domain: dict[str, int] = Field(default_factory=dict)
    per_difficulty: dict[str, int] = Field(default_factory=dict)
    per_length: dict[str, int] = Field(default_factory=dict)
    needs_user_info: int = 0
    backend: str | None = None
    seconds: float = 0.0

    @property
    def replay_pass_rate(self) -> float:
        return (self.replayed - sum(self.replay_failures.values())) / self.replayed if self.replayed else 0.0

    @property
    def tasks_per_min(self) -> float:
        return 60.0 * self.kept / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {**self.model_dump(), "replay_pass_rate": round(self.replay_pass_rate, 4),
                "tasks_per_min": round(self.tasks_per_min, 1)}


class TaskSynthesis(BaseModel):
    tasks: list[Task] = Field(default_factory=list)
    dropped: list[DroppedTask] = Field(default_factory=list)
    stats: TaskStats = Field(default_factory=TaskStats)


class JsonLLM(Protocol):
    """What task writing needs of an LLM: synth.llm.LLMClient has this method."""

    async def json(self, messages: list[dict[str, Any]], schema: dict[str, Any]) -> Any: ...


# ================================================================== helpers
_ID_SUFFIXES = ("_id", "_ids", "sku", "_key", "_code", "_number")


def _norm(s: str) -> str:
    return singular(s.lower())


def names_match(key: str, param: str) -> bool:
    """Does an output field named `key` look like the value of parameter `param`?"""
    k, p = _norm(key), _norm(param)
    if k == p:
        return True
    if p.endswith("_ids") and _norm(p[:-1]) == k:
        return True
    short, long_ = (k, p) if len(k) < len(p) else (p, k)
    return len(short) >= 3 and short != "id" and long_.endswith("_" + short)


def id_like(key: str, value: Any) -> bool:
    if not isinstance(value, str) or not value or len(value) > 80:
        return False
    return key.lower().endswith(_ID_SUFFIXES) or key.lower() in ("id", "sku", "path", "name") or (
        any(c.isdigit() for c in value) and " " not in value)


def humanize(name: str) -> str:
    words = name.replace("_", " ").strip()
    for unit in ("cents", "kg", "kb", "kw", "kwh", "pct", "minutes", "hours", "weeks", "days"):
        if words.endswith(" " + unit) and words != unit:
            label = {"pct": "percent", "kb": "KB", "kg": "kg", "kw": "kW", "kwh": "kWh"}.get(unit, unit)
            head = words[: -len(unit) - 1]
            if " " not in head and head.endswith("ed"):
                head += " amount"
            return f"{head} (in {label})"
    return words


def fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool)) or v is None


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


def goal_phrase(tool: ToolSpec) -> str:
    """The first sentence of the description, as a verb phrase: 'cancel a pending order and refund it in full'."""
    first = re.split(r"(?<=[.!?])\s", tool.description.strip(), maxsplit=1)[0]
    first = re.sub(r"\s*\([^)]*\)", "", first).strip().rstrip(".!?:;")
    first = re.sub(r"\s*[;:]\s.*$", "", first)
    if not first:
        return humanize(tool.name)
    first = first[0].lower() + first[1:]
    if first.split()[0].rstrip(",") not in _VERBS:
        first = "get " + first
    return first


_VERBS = set("""list show move cancel create find add search record set assign book put send remove change place withdraw
identify open estimate save delete hold release pay return apply reserve switch check have get deposit invite enrol
enroll drop post log plan load disarm arm launch land bring swap write mark transfer refund read copy permanently take
lock unlock schedule lend renew archive restore install uninstall upgrade buy void file refill hand submit drive charge
update edit reply forward compose join pick reroute request respond reschedule retag complete issue activate empty make
borrow clear track view lookup look""".split())


# ===================================================== argument drawing
_TEXT = {
    "title": ["Quarterly planning", "Team offsite", "Budget review", "Kickoff meeting", "Follow-up call"],
    "subject": ["Quick question", "Follow-up on our call", "Invoice for March", "Schedule change"],
    "body": ["Thanks for the update, see you then.", "Please find the details below.",
             "Can we move this to next week?", "Confirming what we agreed on the phone."],
    "note": ["customer called about this", "handled by phone", "follow up next week"],
    "comment": ["Looks good to me.", "Needs another pass.", "Fixed in the latest build."],
    "description": ["Leaking tap in the kitchen", "Door handle is loose", "Heating does not turn on",
                    "Crash when saving a file"],
    "reason": ["customer request", "changed plans", "scheduling conflict"],
    "content": ["meeting notes: ship on Friday", "todo: renew passport", "draft v2"],
    "label": ["Home", "Office", "Savings", "Mom"],
    "message": ["Running late, start without me.", "Thanks!"],
    "name": ["Alex Morgan", "Priya Shah", "Sam Lee", "Jordan Diaz"],
}


class TaskArgSampler(ArgSampler):
    """ArgSampler with readable free text for titles, notes and the like."""

    def _string(self, pname: str, schema: dict, rng: random.Random, real: bool) -> str:
        low = pname.lower()
        for word, options in _TEXT.items():
            if word in low and "pattern" not in schema:
                v = rng.choice(options)
                if is_valid(schema, v):
                    return v
        return super()._string(pname, schema, rng, real)


# ========================================================== domain context
@dataclass
class DomainContext:
    domain: Domain
    seed: int
    state: Any
    digest: str
    harvest: Harvest
    sampler: TaskArgSampler
    out_values: dict[str, dict[str, list[Any]]]              # tool -> output field -> sample values
    producers: dict[str, dict[str, list[tuple[str, int]]]]   # tool -> param -> [(tool, weight)]

    def tool(self, name: str) -> ToolSpec:
        return self.domain.tool(name)


def _leaves(obj: Any, key: str | None = None, depth: int = 0, out: dict[str, list[Any]] | None = None) -> dict[str, list[Any]]:
    out = {} if out is None else out
    if depth > 8:
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            _leaves(v, str(k), depth + 1, out)
    elif isinstance(obj, list):
        for v in obj[:50]:
            _leaves(v, singular(key) if key and not isinstance(v, (dict, list)) else key, depth + 1, out)
    elif key is not None and obj is not None and not isinstance(obj, bool):
        bucket = out.setdefault(key, [])
        if obj not in bucket and len(bucket) < 32:
            bucket.append(obj)
    return out


def build_graph(domain: Domain, out_values: dict[str, dict[str, list[Any]]], sampler: ArgSampler) -> dict[str, dict[str, list[tuple[str, int]]]]:
    """producers[B][p] = [(A, weight)]: an output field of A can feed parameter p of B."""
    graph: dict[str, dict[str, list[tuple[str, int]]]] = {}
    for b in domain.tools:
        props = b.parameters.get("properties") or {}
        for p, schema in props.items():
            cands = {_dumps(c) for c in sampler.candidates(p, schema if isinstance(schema, dict) else {})}
            for a in domain.tools:
                if a.name == b.name:
                    continue
                echo_params = set((a.parameters.get("properties") or {}))
                best = 0
                for k, vals in out_values.get(a.name, {}).items():
                    by_name = names_match(k, p)
                    by_value = (not by_name and any(id_like(k, v) and _dumps(v) in cands for v in vals))
                    if by_name or by_value:
                        w = 1 if k in echo_params else 3
                        best = max(best, w if by_name else max(1, w - 1))
                if best:
                    graph.setdefault(b.name, {}).setdefault(p, []).append((a.name, best))
    return graph


async def build_context(sb: Any, domain: Domain, seed: int) -> DomainContext:
    """Load the domain at `seed`, harvest the state, learn what each tool outputs, build the graph."""
    from toolzoo.runtime import bundle

    await sb.load_domain(bundle(domain, seed=seed))  # loading sets the seeded state: no reset needed
    snap = await sb.snapshot()
    h = harvest(snap.state)
    sampler = TaskArgSampler(h)
    out_values: dict[str, dict[str, list[Any]]] = {}
    for t in domain.tools:
        rng = random.Random(f"probe:{domain.name}:{seed}:{t.name}")
        acc: dict[str, list[Any]] = {}
        for args in sampler.valid_calls(t.parameters, rng, 6):
            r = await sb.call_tool(t.name, args, timeout=CALL_TIMEOUT)
            if r.ok:
                _leaves(r.output, out=acc)
            if t.effect == "write":
                await sb.reset()
        out_values[t.name] = acc
    return DomainContext(domain=domain, seed=seed, state=snap.state, digest=snap.digest, harvest=h, sampler=sampler,
                         out_values=out_values, producers=build_graph(domain, out_values, sampler))


# ================================================================ planning
def _weighted(rng: random.Random, options: list[tuple[Any, int]]) -> Any:
    total = sum(w for _, w in options)
    x = rng.uniform(0, total)
    for item, w in options:
        x -= w
        if x <= 0:
            return item
    return options[-1][0]


def plan_tools(ctx: DomainContext, subset: Sequence[str], rng: random.Random, length: int) -> list[str]:
    """A backward walk over the dependency graph, inside `subset`: tool names in call order."""
    writes = [n for n in subset if ctx.tool(n).effect == "write"]
    reads = [n for n in subset if ctx.tool(n).effect == "read" and ctx.out_values.get(n)]
    if writes and (rng.random() < 0.85 or not reads):
        chain = [rng.choice(writes)]
    elif reads:
        chain = [rng.choice(reads)]
    else:
        return []
    while len(chain) < length:
        options: list[tuple[str, int]] = []
        for b in chain:
            for _p, prods in ctx.producers.get(b, {}).items():
                for a, w in prods:
                    if a in subset and a not in chain and (ctx.out_values.get(a)):
                        options.append((a, w))
        if options:
            chain.insert(0, _weighted(rng, options))
            continue
        others = [w for w in writes if w not in chain]
        if others and len(chain) + 1 <= length and rng.random() < 0.6:
            chain.insert(0, rng.choice(others))
            continue
        break
    return chain


# =============================================================== execution
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


# ======================================================= expected outputs
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


# ================================================================= writing
FIRST_NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena",
               "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yara"]
ROLES = ["a small-business owner", "a graduate student", "a retired engineer", "a busy parent of two",
         "an operations manager", "a freelance designer", "a nurse on night shifts", "a high-school teacher",
         "a software developer", "a sales representative who travels a lot", "a first-time user of the service",
         "an office administrator"]
STYLES = ["writes short, direct messages", "is polite and a little chatty", "is in a hurry and slightly impatient",
          "double-checks every detail", "is not very technical and wants clear explanations",
          "is friendly but gets confused by jargon", "prefers to give information only when asked",
          "is precise and expects precise answers"]
OPENERS = ["Hi.", "Hello!", "Hey there.", "Good morning.", "Good afternoon.", "Hi there!", ""]
INTROS = ["This is {name}.", "My name is {name}.", "{name} here.", ""]
FRAMES = ["I'd like to {goal}", "Please {goal}", "I need to {goal}", "Could you {goal}?", "Can you help me {goal}?",
          "I want to {goal}"]
THEN = ["Then", "After that,", "Also,", "Once that's done,"]
ASK = ["When you're done, please tell me the {fields}.", "Please let me know the {fields} afterwards.",
       "Could you also tell me the {fields}?", "And tell me the {fields}, please."]
IDENTITY_WORDS = ("email", "name", "_id", "phone", "birth", "dob", "account", "member", "passenger", "customer",
                  "user", "patient", "student", "card", "tracking")


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!" else text + "."


@dataclass
class Draft:
    instruction: str
    persona: str
    scenario: UserScenario
    mentioned: list[str]       # values the instruction must keep (an LLM rewrite is checked against them)
    withheld: list[str]        # values the instruction must not contain (needs_user_info)
    body: str = ""             # the instruction without the request to report the outputs


_SELF = ("customer", "user", "patient", "member", "account", "applicant", "student", "passenger", "owner",
         "tenant", "holder", "email", "instructor", "reporter", "actor", "author")


def _entity(p: str) -> str:
    h = humanize(p)
    for suffix in (" ids", " id"):
        if h.endswith(suffix) and len(h) > len(suffix):
            return h[: -len(suffix)]
    return h


def reference(p: str, bs: list[Binding], steps: list[Step]) -> tuple[str | None, bool]:
    """How the user refers to a derived value: (phrase or None, whether to say the value itself)."""
    if any(not names_match(b.key, p) and b.kind == "output" for b in bs):
        return None, True
    ent = _entity(p)
    if all(b.kind == "root" for b in bs):
        return f"the same {ent}", False
    if any(b.rows and len(b.rows) > 1 for b in bs):
        descs = [describe(b) for b in bs if b.kind == "output"]
        if not descs or not all(descs):
            return None, True
        phrases = []
        for entity, f, v in descs:  # type: ignore[misc]
            same = _norm(p).startswith(_norm(entity).replace(" ", "_")) or names_match(p, entity.replace(" ", "_") + "_id")
            phrases.append(f"the {entity} whose {f} is {v}" if same else f"{humanize(p)} as in the {entity} whose {f} is {v}")
        return ("for " if phrases[0].startswith("the ") else "") + " and ".join(phrases), False
    if any(steps[b.step].tool.effect == "write" for b in bs if b.kind == "output"):
        return f"the new {ent}", False
    if not p.endswith(("_id", "_ids")):
        return None, True
    if any(w in p for w in _SELF):
        return None, False
    return f"my {ent}", False


def write_task(steps: list[Step], outputs: list[tuple[str, str, int]], rng: random.Random,
               needs_user_info: bool, quote_values: bool = False) -> Draft:
    name = f"{rng.choice(FIRST_NAMES)}"
    persona = f"{name}, {rng.choice(ROLES)}, {rng.choice(STYLES)}."
    # The facts the user knows: every root argument.
    facts: list[tuple[int, str, Any]] = [(i, p, v) for i, st in enumerate(steps) for p, v in st.root.items()]
    withheld_keys: set[tuple[int, str]] = set()
    if needs_user_info:
        pool = [(i, p) for i, p, v in facts if isinstance(v, str) and len(v) >= 2]
        pool.sort(key=lambda ip: (0 if any(w in ip[1] for w in IDENTITY_WORDS) else 1, ip[0]))
        k = 1 if len(pool) < 3 or rng.random() < 0.6 else 2
        withheld_keys = set(pool[:k])
    withheld_vals = [fmt(steps[i].root[p]) for i, p in withheld_keys]

    mentioned: list[str] = []
    parts: list[str] = []
    opener = rng.choice(OPENERS)
    intro = rng.choice(INTROS).format(name=name)
    if opener:
        parts.append(opener)
    if intro:
        parts.append(intro)

    def clause(p: str, v: Any) -> str:
        mentioned.append(fmt(v))
        # Quoted, a string value is split into the same tokens as inside the call's JSON arguments
        # (Qwen2's pre-tokenizer glues a leading space to a word: ' LT' here, 'LT' after '"' there).
        return f'{humanize(p)}: "{v}"' if quote_values and isinstance(v, str) else f"{humanize(p)}: {fmt(v)}"

    # Facts needed by reads (identity first), then one goal sentence per write (and a final read).
    final = len(steps) - 1
    for i, st in enumerate(steps):
        if st.tool.effect == "write" or i == final:
            continue
        for p, bs in st.derived.items():
            phrase, say = reference(p, bs, steps)
            if say:
                parts.append(_sentence(f"the {humanize(p)} is {fmt(st.args[p])}"))
                mentioned.append(fmt(st.args[p]))
            elif phrase and " whose " in phrase:
                parts.append(_sentence(f"it's about {phrase.removeprefix('for ')}"))
        for p, v in st.root.items():
            if (i, p) in withheld_keys:
                continue
            mentioned.append(fmt(v))
            if any(w in p for w in IDENTITY_WORDS):
                parts.append(_sentence(rng.choice(["my {p} is {v}", "my {p}: {v}", "you can find me under {p} {v}"])
                                       .format(p=humanize(p), v=fmt(v))))
            else:
                parts.append(_sentence(f"use {humanize(p)} {fmt(v)} when you look it up"))
    goals = [i for i, st in enumerate(steps) if st.tool.effect == "write" or i == final]
    reasons: list[str] = []
    for n, i in enumerate(goals):
        st = steps[i]
        goal = goal_phrase(st.tool)
        reasons.append(goal)
        details = [clause(p, v) for p, v in st.root.items() if (i, p) not in withheld_keys]
        for p, bs in st.derived.items():
            phrase, say = reference(p, bs, steps)
            if say:
                details.append(clause(p, st.args[p]))
            elif phrase and phrase not in details:
                details.append(phrase)
        frame = rng.choice(FRAMES).format(goal=goal)
        q = frame.endswith("?")
        body = frame.rstrip("?")
        if details:
            body += " (" + "; ".join(details) + ")"
        body += "?" if q else "."
        if n > 0:
            keep_case = body.startswith(("I ", "I'"))
            body = f"{rng.choice(THEN)} {body if keep_case else body[0].lower() + body[1:]}"
        parts.append(_sentence(body))
    body = " ".join(p for p in parts if p)
    if outputs:
        fields = " and the ".join(dict.fromkeys(humanize(k) for k, _v, _j in outputs))
        parts.append(rng.choice(ASK).format(fields=fields))
    instruction = " ".join(p for p in parts if p)

    known: dict[str, str] = {}
    for _i, p, v in facts:
        key, n = humanize(p), 2
        while key in known and known[key] != fmt(v):
            key, n = f"{humanize(p)} ({n})", n + 1
        known[key] = fmt(v)
    unknown = sorted({f"the {humanize(p)}" for st in steps for p in st.derived})
    reason = "You want to " + "; then ".join(reasons) + "."
    hold = ", ".join(humanize(p) for _i, p in sorted(withheld_keys))
    how = ("Open with your first message as written. Answer the agent's questions with the facts you know; "
           "never invent other facts. ")
    if hold:
        how += f"You did not mention your {hold} at first: give it only when the agent asks for it. "
    if unknown:
        how += f"You do not know {', '.join(unknown)}; the agent has to look that up. "
    how += "Confirm when the agent asks before making a change. When the task is done, end with ###STOP###."
    scenario = UserScenario(persona=persona, reason_for_call=reason, known_info=known, unknown_info=unknown,
                            task_instructions=how)
    return Draft(instruction, persona, scenario, [m for m in dict.fromkeys(mentioned) if m], withheld_vals, body)


def make_rubric(steps: list[Step], outputs: list[tuple[str, str, int]], withheld: list[str]) -> Rubric:
    success = [f"{st.tool.name} is called with {_dumps(st.args)}" for st in steps if st.tool.effect == "write"]
    success.append("the final state equals the state after replaying the gold actions")
    success += [f"the agent tells the user the {humanize(k)}: {v}" for k, v, _j in outputs]
    checkpoints: list[str] = []
    for st in steps:
        for p, bs in st.derived.items():
            src = sorted({steps[b.step].tool.name for b in bs if b.kind == "output"})
            if not src:
                continue
            checkpoints.append(f"looks up {humanize(p)} with {', '.join(src)} before calling {st.tool.name}")
        if st.tool.effect == "write":
            checkpoints.append(f"confirms the change with the user before calling {st.tool.name}")
    for v in withheld:
        checkpoints.append(f"asks the user for the missing detail ({v}) instead of guessing it")
    return Rubric(success_criteria=success, expected_tool_pattern=[st.tool.name for st in steps],
                  checkpoints=checkpoints)


def has_write_or_output(steps: list[Step], outputs: list[tuple[str, str, int]]) -> bool:
    return any(st.tool.effect == "write" for st in steps) or bool(outputs)


def difficulty_of(n_actions: int, needs_user_info: bool) -> Difficulty:
    tier = 0 if n_actions <= 1 else 1 if n_actions <= 3 else 2
    return TIERS[min(2, tier + (1 if needs_user_info else 0))]


async def llm_rewrite(llm: JsonLLM, draft: Draft, domain: Domain) -> tuple[str, str]:
    """Rewrite instruction and persona; raises ValueError if the result drops or leaks a fact."""
    schema = {"type": "object", "properties": {"instruction": {"type": "string"}, "persona": {"type": "string"}},
              "required": ["instruction", "persona"], "additionalProperties": False}
    messages = [
        {"role": "system", "content": (
            "You rewrite the opening message a customer sends to a support agent, and a one-line persona of that "
            "customer, so they read naturally and vary in tone. Keep every fact: each string in must_keep must "
            "appear verbatim in the new instruction. Never add facts, and never mention any string in must_not_say. "
            "Answer with JSON {\"instruction\": ..., \"persona\": ...}.")},
        {"role": "user", "content": json.dumps({
            "domain": domain.description, "instruction": draft.instruction, "persona": draft.persona,
            "must_keep": draft.mentioned, "must_not_say": draft.withheld}, ensure_ascii=False)},
    ]
    out = await llm.json(messages, schema)
    if not isinstance(out, dict):
        raise ValueError("the LLM did not answer with an object")
    instruction, persona = out.get("instruction"), out.get("persona")
    if not isinstance(instruction, str) or not isinstance(persona, str) or not instruction.strip() or not persona.strip():
        raise ValueError("the LLM left instruction or persona empty")
    missing = [m for m in draft.mentioned if m not in instruction]
    if missing:
        raise ValueError(f"the rewrite dropped {missing[:3]}")
    if any(w in instruction for w in draft.withheld):
        raise ValueError("the rewrite leaks withheld information")
    return instruction.strip(), persona.strip()


# =============================================================== synthesis
def check_domains(domains: Sequence[str] | None) -> list[str]:
    from toolzoo.domains import domain_names

    known = domain_names()
    names = list(dict.fromkeys(domains)) if domains else known
    bad = [d for d in names if d not in known]
    if bad:
        raise ValueError(f"unknown domain(s) {', '.join(bad)}; known: {', '.join(known)}")
    if not names:
        raise ValueError("no domains to make tasks in")
    return names


def _task_rng(seed: int, index: int) -> random.Random:
    return random.Random(f"tooldojo-tasks:{seed}:{index}")


class TaskSynthesizer:
    """Makes and validates tasks on a SandboxPool; reuse one across calls.

        async with SandboxPool(SandboxConfig(), size=4) as pool:
            result = await TaskSynthesizer(pool, seed=0).run(100)
    """

    def __init__(self, pool: Any, *, seed: int = 0, domains: Sequence[str] | None = None,
                 domain_seeds: int = DOMAIN_SEEDS, llm: JsonLLM | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 lengths: dict[int, float] | None = None, user_info_rate: float = 0.35,
                 quote_values: bool = False):
        from toolzoo.domains import load_domain

        lengths = dict(LENGTH_WEIGHTS if lengths is None else lengths)
        if not lengths or any(k < 1 for k in lengths) or any(w < 0 for w in lengths.values()) \
                or not sum(lengths.values()):
            raise ValueError(f"lengths must weigh plan lengths >= 1 with non-negative weights, got {lengths}")
        if not 0.0 <= user_info_rate <= 1.0:
            raise ValueError(f"user_info_rate must be in [0, 1], got {user_info_rate}")
        self.lengths = lengths
        self.user_info_rate = user_info_rate
        self.quote_values = quote_values

        names = check_domains(domains)
        self.pool = pool
        self.seed = seed
        self.domains = {n: load_domain(n) for n in names}
        self.names = names
        self.domain_seeds = max(1, domain_seeds)
        self.llm = llm
        self.progress = progress
        self.stats = TaskStats()
        self._contexts: dict[tuple[str, int], DomainContext] = {}
        self._locks: dict[tuple[str, int], anyio.Lock] = {}
        self._gen_fail: Counter[str] = Counter()

    async def context(self, name: str, seed: int) -> DomainContext:
        key = (name, seed)
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            if key not in self._contexts:
                async with self.pool.sandbox() as sb:
                    self._contexts[key] = await build_context(sb, self.domains[name], seed)
        return self._contexts[key]

    # ------------------------------------------------------------ one task
    async def make(self, index: int) -> Task | DroppedTask:
        from toolzoo.runtime import bundle

        rng = _task_rng(self.seed, index)
        reason = "no attempt"
        # Domains in turn (a seeded order per round), so every domain gets its share.
        order = list(self.names)
        random.Random(f"tooldojo-domains:{self.seed}:{index // len(order)}").shuffle(order)
        name = order[index % len(order)]
        for attempt in range(MAX_ATTEMPTS):
            if attempt and attempt % ATTEMPTS_PER_DOMAIN == 0:
                name = rng.choice(self.names)
            dseed = rng.randrange(self.domain_seeds)
            ctx = await self.context(name, dseed)
            self.stats.attempts += 1
            tools = [t.name for t in ctx.domain.tools]
            k = rng.randint(min(len(tools), 4), len(tools))
            subset = sorted(rng.sample(tools, k), key=tools.index)
            length = _weighted(rng, list(self.lengths.items()))
            plan = plan_tools(ctx, subset, rng, length)
            if not plan:
                reason = "no plan in the tool subset"
                self._gen_fail[reason] += 1
                continue
            try:
                async with self.pool.sandbox() as sb:
                    await sb.load_domain(bundle(ctx.domain, seed=dseed))
                    steps = await run_plan(sb, ctx, plan, rng)
                    final_digest = (await sb.snapshot()).digest
            except PlanFailed as e:
                reason = f"action failed: {str(e).split(': ', 1)[-1]}"
                self._gen_fail[reason] += 1
                continue
            while True:
                steps = prune_steps(steps)
                outputs = pick_outputs(steps, ctx, rng)
                if steps[-1].tool.effect == "read" and not any(j == len(steps) - 1 for _k, _v, j in outputs):
                    steps = steps[:-1]  # a final read with nothing to report adds nothing
                    if steps:
                        continue
                break
            if not steps:
                reason = "read-only task with nothing to report"
                self._gen_fail[reason] += 1
                continue
            can_hold = any(isinstance(v, str) and len(v) >= 2 for st in steps for v in st.root.values())
            needs = can_hold and rng.random() < self.user_info_rate
            state = rng.getstate()
            draft = write_task(steps, outputs, rng, needs, self.quote_values)
            if needs and (not draft.withheld or any(w in draft.instruction for w in draft.withheld)):
                needs = False  # what would be held back shows anyway (e.g. "WEB" in "WEB-1")
                rng.setstate(state)
                draft = write_task(steps, outputs, rng, needs, self.quote_values)
            echoed = [o for o in outputs if o[1] in draft.body]
            if echoed:  # an expected output the instruction already says (e.g. in a row description)
                outputs = [o for o in outputs if o not in echoed]
                if not has_write_or_output(steps, outputs):
                    reason = "the only output to report is in the instruction"
                    self._gen_fail[reason] += 1
                    continue
                rng.setstate(state)
                draft = write_task(steps, outputs, rng, needs, self.quote_values)
            instruction, persona, provenance = draft.instruction, draft.persona, "template"
            if self.llm is not None:
                try:
                    instruction, persona = await llm_rewrite(self.llm, draft, ctx.domain)
                    provenance = "llm"
                    self.stats.llm_rewrites += 1
                except Exception:  # noqa: BLE001 - any LLM trouble falls back to the template
                    self.stats.llm_errors += 1
            scenario = draft.scenario.model_copy(update={"persona": persona})
            gold = [st.tool.name for st in steps]
            return Task(
                id=f"t{self.seed}-{index:05d}-{name}", domain=name, seed=dseed, instruction=instruction,
                persona=persona, user_scenario=scenario,
                gold_actions=[Action(name=st.tool.name, arguments=st.args) for st in steps],
                expected_outputs=[v for _k, v, _j in outputs], rubric=make_rubric(steps, outputs, draft.withheld),
                tools=[t for t in tools if t in subset or t in gold], difficulty=difficulty_of(len(steps), needs),
                needs_user_info=needs, final_state_hash=final_digest, provenance=provenance,  # type: ignore[arg-type]
            )
        return DroppedTask(id=f"t{self.seed}-{index:05d}", domain=name, stage="generate",
                           reason=f"no valid task in {MAX_ATTEMPTS} attempts (last: {reason})")

    # -------------------------------------------------------------- batch
    async def _map(self, items: list[Any], fn: Callable[[Any], Any], phase: str) -> list[Any]:
        results: list[Any] = [None] * len(items)
        queue = list(range(len(items)))[::-1]
        done = 0
        total = len(items)

        async def worker() -> None:
            nonlocal done
            while queue:
                i = queue.pop()
                results[i] = await fn(items[i])
                done += 1
                if self.progress is not None:
                    self.progress(phase, done, total)

        async with anyio.create_task_group() as tg:
            for _ in range(max(1, min(self.pool.max_concurrency, len(items)))):
                tg.start_soon(worker)
        return results

    async def run(self, n: int, *, rounds: int = 3) -> TaskSynthesis:
        start = time.perf_counter()
        self.stats = TaskStats(requested=n, backend=getattr(self.pool, "backend", None))
        self._gen_fail = Counter()
        kept: list[Task] = []
        dropped: list[DroppedTask] = []
        replay_fail: Counter[str] = Counter()
        next_index = 0
        for _round in range(rounds):
            want = n - len(kept)
            if want <= 0:
                break
            extra = 0 if _round == 0 else max(2, math.ceil(want * 0.2))
            indices = list(range(next_index, next_index + want + extra))
            next_index += len(indices)
            made = await self._map(indices, self.make, "generate")
            fresh = [t for t in made if isinstance(t, Task)]
            dropped += [t for t in made if isinstance(t, DroppedTask)]
            checked = await self._map(fresh, lambda t: check_task(t, self.pool), "replay")
            self.stats.replayed += len(fresh)
            for task, (ok, why) in zip(fresh, checked, strict=True):
                if ok:
                    kept.append(task)
                else:
                    replay_fail[why.split(":")[0]] += 1
                    dropped.append(DroppedTask(id=task.id, domain=task.domain, stage="replay", reason=why))
        kept = sorted(kept, key=lambda t: t.id)[:n]
        s = self.stats
        s.kept = len(kept)
        s.generation_failures = dict(sorted(self._gen_fail.items(), key=lambda kv: -kv[1]))
        s.replay_failures = dict(replay_fail)
        s.per_domain = dict(sorted(Counter(t.domain for t in kept).items()))
        s.per_difficulty = {d: sum(t.difficulty == d for t in kept) for d in TIERS}
        s.per_length = dict(sorted(Counter(str(len(t.gold_actions)) for t in kept).items()))
        s.needs_user_info = sum(t.needs_user_info for t in kept)
        s.seconds = time.perf_counter() - start
        return TaskSynthesis(tasks=kept, dropped=dropped, stats=s)


# ================================================================== replay
class ReplayResult(BaseModel):
    ok: bool
    final_state_hash: str = ""
    outputs: list[Any] = Field(default_factory=list)
    reason: str | None = None


async def replay_task(task: Task, pool: Any) -> ReplayResult:
    """Run the gold actions in a fresh sandbox loaded at the task's seeded state."""
    from toolzoo.domains import load_domain
    from toolzoo.runtime import bundle

    domain = load_domain(task.domain)
    async with pool.sandbox() as sb:
        await sb.load_domain(bundle(domain, seed=task.seed))  # a pooled sandbox, reset on release
        outputs = []
        for i, a in enumerate(task.gold_actions):
            r = await sb.call_tool(a.name, a.arguments, timeout=CALL_TIMEOUT)
            if not r.ok:
                return ReplayResult(ok=False, outputs=outputs, reason=(
                    f"action failed: #{i + 1} {a.name} -> {r.kind}{' ' + r.code if r.code else ''}: {r.message[:160]}"))
            outputs.append(r.output)
        snap = await sb.snapshot()
    return ReplayResult(ok=True, final_state_hash=state_digest(snap.state), outputs=outputs)


async def check_task(task: Task, pool: Any) -> tuple[bool, str]:
    """Gold replay twice (fresh sandboxes): (ok, reason). Sets nothing; the task's hash must be reproduced."""
    runs = [await replay_task(task, pool) for _ in range(2)]
    for r in runs:
        if not r.ok:
            return False, r.reason or "replay failed"
    if runs[0].final_state_hash != runs[1].final_state_hash:
        return False, "nondeterministic: two replays end in different states"
    if task.final_state_hash and runs[0].final_state_hash != task.final_state_hash:
        return False, "state mismatch: the replay does not reach the recorded final state"
    blob = _dumps(runs[0].outputs)
    for v in task.expected_outputs:
        if v not in blob:
            return False, f"output missing: expected output {v!r} is not in the gold results"
    return True, "ok"


async def validate_tasks(tasks: Sequence[Task], pool: Any) -> tuple[list[Task], list[DroppedTask]]:
    kept: list[Task] = []
    dropped: list[DroppedTask] = []
    results: list[tuple[bool, str]] = [(False, "")] * len(tasks)

    async def one(i: int) -> None:
        results[i] = await check_task(tasks[i], pool)

    async with anyio.create_task_group() as tg:
        for i in range(len(tasks)):
            tg.start_soon(one, i)
    for t, (ok, why) in zip(tasks, results, strict=True):
        if ok:
            kept.append(t)
        else:
            dropped.append(DroppedTask(id=t.id, domain=t.domain, stage="replay", reason=why))
    return kept, dropped


# ===================================================================== API
def synthesize_tasks(n: int, *, seed: int = 0, domains: Sequence[str] | None = None, backend: str = "auto",
                     sandboxes: int = 4, domain_seeds: int = DOMAIN_SEEDS, llm: JsonLLM | None = None,
                     progress: Callable[[str, int, int], None] | None = None,
                     lengths: dict[int, float] | None = None, user_info_rate: float = 0.35,
                     quote_values: bool = False) -> TaskSynthesis:
    """Make n replay-validated tasks (fewer only if generation keeps failing; see result.dropped).

    ``lengths`` weighs how many gold actions a task plans (default ``LENGTH_WEIGHTS``; pruning can
    make it shorter); ``user_info_rate`` is the share of tasks that hold details back for the user;
    ``quote_values`` writes the request's string values in double quotes (``device id: "LT-3"``)."""
    from sandboxes import SandboxConfig, SandboxPool

    if n < 1:
        raise ValueError("n must be at least 1")
    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")
    check_domains(domains)

    async def go() -> TaskSynthesis:
        async with SandboxPool(SandboxConfig(backend=backend), size=sandboxes) as pool:  # type: ignore[arg-type]
            synth = TaskSynthesizer(pool, seed=seed, domains=domains, domain_seeds=domain_seeds, llm=llm,
                                    progress=progress, lengths=lengths, user_info_rate=user_info_rate,
                                    quote_values=quote_values)
            return await synth.run(n)

    return anyio.run(go)


def replay_tasks(tasks: Sequence[Task], *, backend: str = "auto", sandboxes: int = 4) -> list[ReplayResult]:
    from sandboxes import SandboxConfig, SandboxPool

    async def go() -> list[ReplayResult]:
        out: list[ReplayResult] = [ReplayResult(ok=False)] * len(tasks)
        async with SandboxPool(SandboxConfig(backend=backend), size=sandboxes) as pool:  # type: ignore[arg-type]
            limiter = anyio.CapacityLimiter(sandboxes)

            async def one(i: int) -> None:
                async with limiter:
                    out[i] = await replay_task(tasks[i], pool)

            async with anyio.create_task_group() as tg:
                for i in range(len(tasks)):
                    tg.start_soon(one, i)
        return out

    return anyio.run(go)


# ================================================================== export
def system_prompt(domain: Domain) -> str:
    return domain.policy


def task_row(task: Task) -> dict[str, Any]:
    from toolzoo.domains import load_domain

    domain = load_domain(task.domain)
    tools = [domain.tool(n).to_openai() for n in task.tools]
    return {
        "id": task.id, "domain": task.domain, "seed": task.seed,
        "prompt": [{"role": "system", "content": system_prompt(domain)}, {"role": "user", "content": task.instruction}],
        "tools": json.dumps(tools, ensure_ascii=False),
        "instruction": task.instruction, "persona": task.persona,
        "user_scenario": task.user_scenario.model_dump_json(),
        "gold_actions": json.dumps([a.model_dump() for a in task.gold_actions], ensure_ascii=False),
        "expected_outputs": json.dumps(task.expected_outputs, ensure_ascii=False),
        "rubric": task.rubric.model_dump_json(),
        "tool_names": json.dumps(task.tools),
        "difficulty": task.difficulty, "needs_user_info": task.needs_user_info,
        "final_state_hash": task.final_state_hash, "provenance": task.provenance,
    }


def _features() -> Any:
    from datasets import Features, List, Value

    s = Value("string")
    return Features({
        "id": s, "domain": s, "seed": Value("int64"),
        "prompt": List({"role": s, "content": s}), "tools": s, "instruction": s, "persona": s,
        "user_scenario": s, "gold_actions": s, "expected_outputs": s, "rubric": s, "tool_names": s,
        "difficulty": s, "needs_user_info": Value("bool"), "final_state_hash": s, "provenance": s,
    })


def export_tasks(result: TaskSynthesis | Sequence[Task], out_dir: str | Path) -> Path:
    """tasks.jsonl, hf/ (save_to_disk), tasks.parquet, dropped.jsonl and summary.json under out_dir."""
    import datasets

    tasks = result.tasks if isinstance(result, TaskSynthesis) else list(result)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "tasks.jsonl", "w") as f:
        for t in tasks:
            f.write(t.model_dump_json() + "\n")
    rows = [task_row(t) for t in tasks]
    was = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        ds = datasets.Dataset.from_list(rows, features=_features())
        ds.save_to_disk(str(out / "hf"))
        ds.to_parquet(str(out / "tasks.parquet"))
    finally:
        if was:
            datasets.enable_progress_bars()
    if isinstance(result, TaskSynthesis):
        with open(out / "dropped.jsonl", "w") as f:
            for d in result.dropped:
                f.write(d.model_dump_json() + "\n")
        (out / "summary.json").write_text(json.dumps(result.stats.summary(), indent=1))
    return out


def load_tasks(path: str | Path) -> list[Task]:
    """Tasks from a tasks.jsonl file or a directory holding one."""
    p = Path(path)
    f = p / "tasks.jsonl" if p.is_dir() else p
    if not f.exists():
        raise FileNotFoundError(f"no tasks at {path}: expected {f} (written by `dojo synth tasks`)")
    return [Task.model_validate_json(line) for line in f.read_text().splitlines() if line.strip()]
