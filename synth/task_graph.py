"""A domain's tool dependency graph and the plans walked over it (steps 1-2 of synth/tasks.py).

`build_context` calls every tool in a sandbox at the seeded state with sampled arguments and
records what each outputs; an output field of tool A feeds parameter p of tool B when the names
match or A's values are values p takes. `plan_tools` walks that graph backwards from a write (or
a read) inside the agent's tool subset."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from synth.task_models import CALL_TIMEOUT
from synth.task_values import _dumps, id_like, names_match
from toolzoo.spec import Domain, ToolSpec
from toolzoo.arguments import ArgSampler, Harvest, harvest, is_valid, singular


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
