"""Offline tool evolution in the spirit of ToolACE: grow the seed zoo with derived tools that still run.

Every operator makes a NEW ToolSpec (provenance "evolved", `parents`, `operator`)
whose `implementation` is stdlib-only Python defining a new function that calls
its parent tool's function(s) by name, in the same bundle namespace:

    add_parameter          limit/offset paging, sort_by, fields projection, dry_run for writes,
                           currency or unit conversion of the output
    add_constraint         tighter schema: enum subset, id pattern, length/range/item bounds
                           (enforced by the DSL validator before the function runs)
    change_representation  cents <-> decimal strings, lists <-> comma-separated strings,
                           ISO dates <-> day offsets; converted both ways in the wrapper
    specialise             an enum/boolean argument fixed to a constant (list_pending_customer_orders)
    compose                A's output field feeds B's input -> one tool returning {"first", "then"}

Operators chain up to MAX_DEPTH. An evolved implementation is self-contained: it
carries the source of its evolved ancestors (and the small runtime helpers it
uses), so `bundle(domain, tools=[any subset])` always runs.

Generation is pluggable: a `ToolGenerator` proposes candidates from a zoo;
`OfflineGenerator` is the rule-based one here, an LLM-backed one plugs in later.
`synthesize()` drives generate -> dedup -> validate (in sandboxes) -> accept
until n tools pass; everything is deterministic for a given seed.

Where it lives: the offline generator and its operators in toolzoo/evolve_offline.py, the
sandbox-side helpers they copy in toolzoo/evolve_helpers.py; this module holds the generator
protocol, dedup and the generate -> dedup -> validate loop, and re-exports those modules' names.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from toolzoo.evolve_helpers import (
    HELPERS,
    _evo_h_cents_to_decimal,
    _evo_h_convert_cents,
    _evo_h_dates_to_days,
    _evo_h_days_to_date,
    _evo_h_decimal_to_cents,
    _evo_h_imperial,
)
from toolzoo.evolve_offline import (
    DECIMAL_PATTERN,
    DEFAULT_REF_DATE,
    ID_LIKE,
    MAX_DEPTH,
    OPERATORS,
    RATES,
    UNITS,
    Lineage,
    OfflineGenerator,
    Recipe,
    functools_partial,
)
from toolzoo.spec import ToolSpec, Zoo
from toolzoo.validate import ValidationReport, Validator

__all__ = [  # with the names of the part modules, so `from toolzoo.evolve import X` keeps working
    "DECIMAL_PATTERN", "DEFAULT_REF_DATE", "HELPERS", "ID_LIKE", "MAX_DEPTH", "OPERATORS", "RATES", "UNITS",
    "Deduper", "Lineage", "OfflineGenerator", "Recipe", "Rejection", "SynthResult", "SynthStats", "ToolGenerator",
    "_evo_h_cents_to_decimal", "_evo_h_convert_cents", "_evo_h_dates_to_days", "_evo_h_days_to_date",
    "_evo_h_decimal_to_cents", "_evo_h_imperial", "dedup_key", "evolve", "functools_partial",
    "normalise_description", "synthesize",
]


@runtime_checkable
class ToolGenerator(Protocol):
    """Proposes candidate tools derived from a zoo. `observe` feeds back what validation saw.

    `propose` may be called again after the zoo grew; it should continue where
    it left off (new parents included) and stop when it has nothing new.
    """

    def propose(self, zoo: Zoo, rng: random.Random) -> Iterable[ToolSpec]: ...

    def observe(self, report: ValidationReport) -> None: ...


_STOP = frozenset("a an the of to for and or in on by with from is are be its it this that as at".split())


def normalise_description(text: str) -> str:
    """Case, punctuation, numbers, stop words and word order do not make a tool new."""
    words = re.findall(r"[a-z#]+", re.sub(r"\d+(\.\d+)?", "#", text.lower()))
    return " ".join(sorted(w for w in words if w not in _STOP))


def dedup_key(spec: ToolSpec) -> str:
    return spec.signature_key() + "|" + normalise_description(spec.description)


class Deduper:
    """Rejects a tool whose normalised signature and description equal an earlier one's."""

    def __init__(self, tools: Iterable[ToolSpec] = ()):
        self.keys: dict[str, str] = {}
        for t in tools:
            self.add(t)

    def duplicate_of(self, spec: ToolSpec) -> str | None:
        return self.keys.get(dedup_key(spec))

    def add(self, spec: ToolSpec) -> None:
        self.keys.setdefault(dedup_key(spec), spec.name)


class Rejection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    domain: str
    operator: str | None = None
    parents: list[str] = Field(default_factory=list)
    stage: Literal["duplicate", "validation"]
    reason: str
    tool: dict[str, Any] | None = None


class SynthStats(BaseModel):
    target: int
    passing: int = 0
    seed_tools: int = 0
    evolved: int = 0
    proposed: int = 0
    duplicates: int = 0
    failed_validation: int = 0
    generate_s: float = 0.0
    validate_s: float = 0.0
    validated: int = 0
    exhausted: bool = False
    by_operator: dict[str, int] = Field(default_factory=dict)


@dataclass
class SynthResult:
    zoo: Zoo
    rejected: list[Rejection]
    stats: SynthStats


async def synthesize(
    n: int,
    *,
    validator: Validator,
    seed: int = 0,
    zoo: Zoo | None = None,
    generator: ToolGenerator | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_batch: int = 400,
) -> SynthResult:
    """Evolve `zoo` (default: the seed zoo) until n distinct tools pass validation (or ideas run out)."""
    from toolzoo.domains import seed_zoo

    rng = random.Random(seed)
    work = (zoo or seed_zoo()).model_copy(deep=True)
    gen = generator or OfflineGenerator()
    stats = SynthStats(target=n)
    rejected: list[Rejection] = []

    def reject(t: ToolSpec, stage: str, reason: str, full: bool) -> None:
        rejected.append(Rejection(name=t.name, domain=t.domain, operator=t.operator, parents=t.parents,
                                  stage=stage, reason=reason, tool=t.model_dump(mode="json") if full else None))  # type: ignore[arg-type]

    # The seed tools are validated like the rest: a failing one is not exported.
    t0 = time.perf_counter()
    report = await validator.validate(work.tools, work)
    stats.validate_s += time.perf_counter() - t0
    stats.validated += len(report.results)
    failed = {r.name: r.reason or "failed" for r in report.failures()}
    for d in work.domains:
        for t in d.tools:
            if t.name in failed:
                reject(t, "validation", failed[t.name], True)
        d.tools = [t for t in d.tools if t.name not in failed]
    work.external = [t for t in work.external if t.name not in failed]
    gen.observe(report)
    dedup = Deduper()
    for t in work.tools:
        dedup.add(t)
    stats.seed_tools = stats.passing = len(work.tools)
    if progress:
        progress(stats.passing, n)
    domains = {d.name: d for d in work.domains}

    while stats.passing < n:
        t0 = time.perf_counter()
        want = min(max_batch, int((n - stats.passing) * 1.15) + 8)
        batch: list[ToolSpec] = []
        for spec in gen.propose(work, rng):
            stats.proposed += 1
            dup = dedup.duplicate_of(spec)
            if dup is not None:
                stats.duplicates += 1
                reject(spec, "duplicate", f"duplicate of {dup} (same normalised signature and description)", False)
                continue
            dedup.add(spec)
            batch.append(spec)
            if len(batch) >= want:
                break
        stats.generate_s += time.perf_counter() - t0
        if not batch:
            stats.exhausted = True
            break
        t0 = time.perf_counter()
        report = await validator.validate(batch, work)
        stats.validate_s += time.perf_counter() - t0
        stats.validated += len(batch)
        gen.observe(report)
        verdict = {r.name: r for r in report.results}
        for spec in batch:
            r = verdict.get(spec.name)
            if r is None or not r.ok:
                stats.failed_validation += 1
                reject(spec, "validation", r.reason if r and r.reason else "not validated", True)
                continue
            if stats.passing >= n:
                break
            domains[spec.domain].tools.append(spec)
            stats.passing += 1
            stats.evolved += 1
            stats.by_operator[spec.operator or "?"] = stats.by_operator.get(spec.operator or "?", 0) + 1
            if progress:
                progress(stats.passing, n)
    work.check_names()
    return SynthResult(zoo=work, rejected=rejected, stats=stats)


def evolve(n: int, *, seed: int = 0, backend: str = "auto", zoo: Zoo | None = None, sandboxes: int = 4,
           progress: Callable[[int, int], None] | None = None) -> SynthResult:
    """Blocking `synthesize` with its own sandbox pool."""
    import anyio

    async def run() -> SynthResult:
        async with Validator(backend=backend, sandboxes=sandboxes, seed=seed) as v:
            return await synthesize(n, validator=v, seed=seed, zoo=zoo, progress=progress)

    return anyio.run(run)
