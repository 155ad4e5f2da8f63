"""LLM-driven hierarchical tool evolution, after Kimi K2 (category -> application domains -> tools).

    async with LLMClient(LLMConfig(base_url=..., model=...)) as client, Validator() as v:
        zoo, rejected = await evolve_with_llm(seed_zoo(), client, categories=["smart_home"],
                                              domains_per_category=2, tools_per_domain=5, validator=v)

Stage 1  for each category the LLM proposes new application domains (name, description, state shape);
         `extend=[...]` names existing zoo domains to grow instead of (or besides) new ones.
Stage 2  for a new domain it writes `seed(rng) -> dict` (stdlib only) and a policy; the seed is loaded in a
         sandbox through toolzoo's validator (a probe tool checks it returns a deterministic JSON dict).
         Then, per domain, an outline of tools (name, description, effect) and, per tool, the full spec:
         parameters JSON Schema, declared errors and the Python implementation `name(state, **args)`.
Repair   every failure - garbage JSON, a spec the ToolSpec model refuses, code that does not compile or
         imports non-stdlib modules, or the validator's verdict after sample calls in a sandbox (a hanging
         tool is stopped by the validator's call timeout) - goes back to the LLM with the reason, for at
         most `repairs` rounds. Still failing: a `LLMRejection` with the reason; never exported.
Dedup    `toolzoo.evolve.dedup_key` against the zoo and every accepted tool, and tool names against the
         whole zoo (also against the names a domain's own source defines).

Everything the LLM writes runs only inside sandboxes: on the host it is parsed and compiled, never executed.
Each tool's code is wrapped in a factory function (`_llm_make_<name>`) so that its helpers stay private and
tools bundled together cannot overwrite each other's (or the domain's) helpers.

`LLMGenerator` is the same tool stage behind toolzoo.evolve's `ToolGenerator` protocol (it extends the
domains of the zoo it is given; `synthesize` validates what it proposes).
Where it lives: the prompts and answer schemas in synth/evolve_llm_prompts.py, the host-side checks
in synth/evolve_llm_checks.py, the evolver (stages, repair, dedup) in synth/evolve_llm_stages.py;
this module holds the ToolGenerator adapter and the CLI entry, and re-exports the public names.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio

from sandboxes.cli_options import split_names
from toolzoo.categories import CATEGORIES
from toolzoo.evolve import dedup_key
from toolzoo.spec import Domain, ToolSpec, Zoo
from toolzoo.validate import ValidationReport, Validator


from synth.evolve_llm_checks import (DOMAIN_NAME_RE, FACTORY_PREFIX, MAX_STATE_BYTES, PROBE_PREFIX, build_tool,
                                     check_seed_code, probe_tool, wrap_implementation)
from synth.evolve_llm_prompts import (DEFAULT_TOKENS, DOMAINS_SCHEMA, OUTLINE_SCHEMA, SEED_EXAMPLE, SEED_SCHEMA,
                                      STATE_EXCERPT_CHARS, SYSTEM, TOOL_EXAMPLE, TOOL_RULES, TOOL_SCHEMA)
from synth.evolve_llm_stages import (Candidate, DomainWork, LLMEvolver, LLMEvolveStats, LLMRejection, RejectStage,
                                     evolve_with_llm)

if TYPE_CHECKING:  # synth.llm is imported lazily: nothing here needs it at import time
    from synth.llm import LLMConfig

__all__ = [  # with the names of the part modules, so `from synth.evolve_llm import X` keeps working
    "DEFAULT_TOKENS", "DOMAIN_NAME_RE", "DOMAINS_SCHEMA", "FACTORY_PREFIX", "MAX_STATE_BYTES", "OUTLINE_SCHEMA",
    "PROBE_PREFIX", "SEED_EXAMPLE", "SEED_SCHEMA", "STATE_EXCERPT_CHARS", "SYSTEM", "TOOL_EXAMPLE", "TOOL_RULES",
    "TOOL_SCHEMA", "LLMEvolver", "LLMEvolveStats", "LLMGenerator", "LLMRejection", "RejectStage", "build_tool",
    "check_seed_code", "evolve_with_llm", "probe_tool", "run_cli", "wrap_implementation",
]


class LLMGenerator:
    """toolzoo.evolve's ToolGenerator backed by an LLM: new tools for the zoo's existing domains.

    `propose` is synchronous (the protocol's), so it runs the LLM calls on its own event loop in a helper
    thread with a client of its own. Candidates pass the host-side checks (JSON, spec, compile, stdlib
    imports, names; up to `repairs` repair rounds for those); `synthesize` validates them in sandboxes, and
    `observe` queues the ones that failed there for a repair (with the validator's reason) in the next
    `propose`. `rejected` lists what was given up on here.

    Caveat: `toolzoo.evolve.synthesize` registers a candidate with its deduper before validating it, so a
    repaired tool whose signature and description did not change is dropped there as a duplicate.
    """

    name = "llm"

    def __init__(self, config: LLMConfig, *, tools_per_domain: int = 3, domains_per_round: int = 2,
                 repairs: int = 2, max_tokens: int | None = None, temperature: float | None = None):
        self.config = config
        self.tools_per_domain = tools_per_domain
        self.domains_per_round = domains_per_round
        self.repairs = repairs
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.rejected: list[LLMRejection] = []
        self.states: dict[str, Any] = {}
        self._done: set[str] = set()
        self._issued: dict[str, Candidate] = {}
        self._repair: list[Candidate] = []

    def observe(self, report: ValidationReport) -> None:
        self.states.update(report.states)
        for r in report.results:
            c = self._issued.pop(r.name, None)
            if c is None or r.ok:
                continue
            c.reason, c.stage = r.reason or "failed validation", "validation"
            if c.rounds <= self.repairs:
                c.messages = LLMEvolver._followup(c.messages, c.raw, c.reason)
                self._repair.append(c)
            else:
                self.rejected.append(LLMRejection(name=c.name, domain=c.domain, category=c.category,
                                                  stage="validation", reason=c.reason, rounds=c.rounds))

    def propose(self, zoo: Zoo, rng: random.Random) -> Iterable[ToolSpec]:
        todo = [d for d in zoo.domains if d.name not in self._done]
        rng.shuffle(todo)
        todo = todo[: self.domains_per_round]
        repairs, self._repair = self._repair, []
        if not todo and not repairs:
            return []
        box: dict[str, Any] = {}

        def worker() -> None:
            try:
                box["out"] = anyio.run(self._propose_async, zoo, todo, repairs)
            except BaseException as e:  # noqa: BLE001 - reported below
                box["error"] = e

        t = threading.Thread(target=worker, name="llm-generator", daemon=True)
        t.start()
        t.join()
        if "error" in box:
            raise box["error"]
        return box["out"]

    async def _propose_async(self, zoo: Zoo, todo: list[Domain], repairs: list[Candidate]) -> list[ToolSpec]:
        from synth.llm import LLMClient

        out: list[ToolSpec] = []
        async with LLMClient(self.config) as client:
            ev = LLMEvolver(client, _NoValidator(), repairs=self.repairs, max_tokens=self.max_tokens,  # type: ignore[arg-type]
                            temperature=self.temperature)
            ev._names = {t.name: t.domain for t in zoo.tools}
            ev._names.update({n: c.domain for n, c in self._issued.items()})
            ev._keys = {dedup_key(t): t.name for t in zoo.tools}
            domains = {d.name: d for d in zoo.domains}

            async def host_checked(c: Candidate, work: DomainWork) -> None:
                while True:
                    await ev._generate(c, work)
                    if c.spec is not None or c.rounds > self.repairs:
                        break
                    c.messages = ev._followup(c.messages, c.raw, c.reason or "failed")
                if c.spec is None:
                    ev._reject(name=c.name, domain=c.domain, category=c.category, stage=c.stage,
                               reason=c.reason or "failed", rounds=c.rounds, tool=c.raw)
                else:
                    self._issued[c.name] = c
                    out.append(c.spec)

            cands: list[tuple[Candidate, DomainWork]] = []
            for c in repairs:
                if c.domain in domains:
                    cands.append((c, DomainWork(domain=domains[c.domain], state=self.states.get(c.domain), new=False)))
            for d in todo:
                self._done.add(d.name)
                work = DomainWork(domain=d, state=self.states.get(d.name), new=False)
                for item in await ev.outline(work, self.tools_per_domain):
                    cands.append((Candidate(name=item["name"], domain=d.name, category=d.category,
                                             messages=ev._tool_messages(work, item)), work))
            async with anyio.create_task_group() as tg:
                for c, work in cands:
                    tg.start_soon(host_checked, c, work)
            self.rejected += ev.rejected
        return sorted(out, key=lambda t: (t.domain, t.name))


class LLMUnreachable(ValueError):
    """`dojo synth tools`: every LLM call failed, so nothing was generated (and nothing is written)."""


class _NoValidator:
    """LLMGenerator leaves validation to `synthesize`."""


def run_cli(*, base_url: str, model: str, api_key_env: str, out: str, seed: int, backend: str, sandboxes: int,
            categories: str | None, domains_per_category: int, tools_per_domain: int, repairs: int,
            extend: str | None, max_tokens: int | None, concurrency: int) -> int:
    """`dojo synth tools --base-url ... --model ...`: grow the seed zoo with an LLM; write zoo.json,
    rejected.jsonl and synth_stats.json into `out`. Returns the exit code."""
    from rich.console import Console

    from synth.llm import LLMClient, LLMConfig
    from toolzoo.domains import seed_zoo

    console, err = Console(), Console(stderr=True)
    if not model:
        raise ValueError("--base-url needs --model (the model name the endpoint serves)")
    cats = split_names(categories, "--categories")
    ext = split_names(extend, "--extend") or []
    known = [c.name for c in CATEGORIES]
    for c in cats or []:
        if c not in known:
            raise ValueError(f"--categories {c!r}: unknown category (known: {', '.join(known)})")
    zoo = seed_zoo()
    for d in ext:
        zoo.domain(d)  # unknown names fail here, with the known ones listed
    config = LLMConfig(base_url=base_url, model=model, api_key_env=api_key_env, max_concurrency=concurrency)
    stats = LLMEvolveStats()

    async def go() -> tuple[Zoo, list[LLMRejection]]:
        async with LLMClient(config) as client, Validator(backend=backend, sandboxes=sandboxes, seed=seed) as v:
            return await evolve_with_llm(zoo, client, categories=cats, domains_per_category=domains_per_category,
                                         tools_per_domain=tools_per_domain, repairs=repairs, validator=v,
                                         extend=ext, seed=seed, max_tokens=max_tokens, stats=stats,
                                         progress=lambda m: err.print(m, highlight=False, markup=False))

    grown, rejected = anyio.run(go)
    if stats.llm_calls and stats.llm_errors == stats.llm_calls:  # nothing was generated: write nothing
        first = next((r.reason for r in rejected), "").splitlines()[0] if rejected else ""
        raise LLMUnreachable(f"no LLM call got an answer (is {base_url} serving {model}?); nothing written to "
                             f"{out}: {first[:300]}")
    path = grown.save(out)
    with open(path / "rejected.jsonl", "w") as f:
        for r in rejected:
            f.write(r.model_dump_json(exclude_none=True) + "\n")
    (path / "synth_stats.json").write_text(json.dumps(stats.model_dump(), indent=1))
    console.print(f"{stats.tools_accepted} new tools pass ({stats.accepted_after_repair} after repair) in "
                  f"{stats.domains_accepted} new and {stats.domains_extended} extended domains; rejected "
                  + (", ".join(f"{v} {k}" for k, v in sorted(stats.rejected.items())) or "none")
                  + f"; {stats.llm_calls} LLM calls ({stats.llm_failures} failed) in {stats.seconds:.0f}s",
                  highlight=False)
    console.print(f"{len(grown.tools)} tools in the zoo; wrote {path / 'zoo.json'} and {path / 'rejected.jsonl'}",
                  highlight=False)
    return 0
