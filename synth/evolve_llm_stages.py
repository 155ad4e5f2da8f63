"""The LLM evolver itself (synth/evolve_llm.py): stage 1 (domains per category), stage 2 (seed,
outline, tools per domain), repair rounds and dedup, over a zoo; `evolve_with_llm` runs it."""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolzoo.categories import CATEGORIES
from toolzoo.evolve import dedup_key
from toolzoo.spec import NAME_RE, Category, Domain, ToolSpec, Zoo
from toolzoo.validate import ValidationReport, Validator

from synth.evolve_llm_checks import DOMAIN_NAME_RE, build_tool, check_seed_code, probe_tool, snake_name, source_defs
from synth.evolve_llm_prompts import (
    DEFAULT_TOKENS,
    DOMAINS_SCHEMA,
    OUTLINE_SCHEMA,
    SEED_EXAMPLE,
    SEED_SCHEMA,
    SYSTEM,
    TOOL_EXAMPLE,
    TOOL_RULES,
    TOOL_SCHEMA,
    domain_header,
    task_line,
)

if TYPE_CHECKING:  # synth.llm is imported lazily: nothing here needs it at import time
    from synth.llm import LLMClient

RejectStage = Literal["domain", "generation", "spec", "validation", "duplicate"]


class LLMRejection(BaseModel):
    """A domain or tool the LLM made that is not exported, and why."""

    model_config = ConfigDict(extra="forbid")

    name: str
    domain: str
    category: str
    stage: RejectStage
    reason: str
    rounds: int = Field(0, description="LLM answers tried (the first one plus repairs)")
    kind: Literal["domain", "tool"] = "tool"
    tool: dict[str, Any] | None = Field(None, description="the last candidate, as the LLM gave it")


class LLMEvolveStats(BaseModel):
    categories: int = 0
    domains_proposed: int = 0
    domains_accepted: int = 0
    domains_extended: int = 0
    tools_proposed: int = 0
    tools_accepted: int = 0
    accepted_after_repair: int = 0
    rejected: dict[str, int] = Field(default_factory=dict, description="rejections by stage")
    llm_calls: int = 0
    llm_failures: int = Field(0, description="calls without a usable answer (bad JSON or an error)")
    llm_errors: int = Field(0, description="of those, calls the endpoint did not answer (not a bad answer)")
    seconds: float = 0.0


@dataclass
class Candidate:
    name: str
    domain: str
    category: str
    messages: list[dict[str, Any]]
    rounds: int = 0
    spec: ToolSpec | None = None
    raw: Any = None
    reason: str | None = None
    stage: RejectStage = "generation"


@dataclass
class DomainWork:
    domain: Domain
    state: Any
    new: bool
    accepted: list[ToolSpec] = field(default_factory=list)


class LLMEvolver:
    """One LLM evolution run over a zoo; `run()` returns the grown zoo, `rejected` and `stats` say the rest."""

    def __init__(self, client: LLMClient, validator: Validator, *, repairs: int = 2, seed: int = 0,
                 max_tokens: int | None = None, temperature: float | None = None,
                 progress: Callable[[str], None] | None = None):
        self.client = client
        self.validator = validator
        self.repairs = max(0, repairs)
        self.seed = seed
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.progress = progress
        self.rejected: list[LLMRejection] = []
        self.stats = LLMEvolveStats()
        self._names: dict[str, str] = {}  # tool name -> domain, over the zoo and everything in flight
        self._keys: dict[str, str] = {}  # dedup_key -> tool name
        self._domains: set[str] = set()

    # --------------------------------------------------------------- plumbing
    def _say(self, msg: str) -> None:
        if self.progress is not None:
            self.progress(msg)

    def _reject(self, *, name: str, domain: str, category: str, stage: RejectStage, reason: str, rounds: int = 0,
                kind: Literal["domain", "tool"] = "tool", tool: Any = None) -> None:
        if isinstance(tool, ToolSpec):
            tool = tool.model_dump(mode="json", exclude_none=True)
        elif tool is not None and not isinstance(tool, dict):
            tool = {"raw": str(tool)[:2000]}
        self.rejected.append(LLMRejection(name=str(name)[:80], domain=domain, category=category, stage=stage,
                                          reason=str(reason)[:1000], rounds=rounds, kind=kind, tool=tool))
        self.stats.rejected[stage] = self.stats.rejected.get(stage, 0) + 1
        self._say(f"rejected {kind} {name} ({stage}): {str(reason)[:160]}")

    async def _ask(self, messages: list[dict[str, Any]], schema: dict[str, Any], kind: str) -> tuple[Any, str | None]:
        """(parsed answer, None) or (None, why not). Never raises for anything the LLM or its server does."""
        tokens = DEFAULT_TOKENS[kind] if self.max_tokens is None else min(self.max_tokens, DEFAULT_TOKENS[kind])
        kw: dict[str, Any] = {"max_tokens": tokens, "seed": self.seed}
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        self.stats.llm_calls += 1
        try:
            return await self.client.json(messages, schema, **kw), None
        except Exception as e:  # LLMBadResponse, LLMError subclasses, anything a weak server provokes
            self.stats.llm_failures += 1
            if type(e).__name__ != "LLMBadResponse":
                self.stats.llm_errors += 1
            msg = str(e).strip() or type(e).__name__
            return None, f"{type(e).__name__}: {msg}"[:600]

    @staticmethod
    def _followup(messages: list[dict[str, Any]], answer: Any, reason: str) -> list[dict[str, Any]]:
        prev = json.dumps(answer)[:6000] if answer is not None else "(no usable JSON answer)"
        return messages + [
            {"role": "assistant", "content": prev},
            {"role": "user", "content": task_line("repair") + f"That answer was rejected: {reason}\n"
                                        "Fix the problem and answer again with the complete JSON object "
                                        "in the same shape."},
        ]

    def _reserve_name(self, name: str, domain: str) -> str | None:
        """None if `name` is free (and now taken), else why not."""
        if name in self._names:
            return f"name clash: {name!r} is already a tool in {self._names[name]}"
        self._names[name] = domain
        return None

    # ---------------------------------------------------------------- stage 1
    async def propose_domains(self, category: Category, n: int) -> list[dict[str, str]]:
        taken = sorted(self._domains)
        prompt = (task_line("propose_domains") + f"Category: {category.name}: {category.description}\n"
                  f"Propose {n} new application domains in this category. Each is a small stateful backend "
                  "(a JSON state of records keyed by id) that an assistant operates through tools for a user.\n"
                  f"Existing domains (do not repeat them): {', '.join(taken) or '(none)'}\n"
                  'Answer: {"domains": [{"name": "<snake_case, 3-48 chars>", "description": "<one sentence>", '
                  '"state": "<the state\'s tables and fields in one or two sentences>"}]}')
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        out: list[dict[str, str]] = []
        answer, why = None, None
        for attempt in range(self.repairs + 1):
            answer, why = await self._ask(messages, DOMAINS_SCHEMA, "domains")
            if why is None:
                items = answer.get("domains") if isinstance(answer, dict) else None
                if isinstance(items, list) and items:
                    break
                why = 'the answer needs a non-empty list "domains"'
            if attempt < self.repairs:
                messages = self._followup(messages, answer, why)
        else:
            self._reject(name=f"{category.name}/*", domain="", category=category.name, stage="domain",
                         reason=f"no domains proposed: {why}", rounds=self.repairs + 1, kind="domain", tool=answer)
            return out
        for item in items:
            self.stats.domains_proposed += 1
            if not isinstance(item, dict):
                self._reject(name="?", domain="", category=category.name, stage="domain", kind="domain",
                             reason=f"a domain must be an object, got {type(item).__name__}", tool=item)
                continue
            name = snake_name(item.get("name", ""))
            desc, state = item.get("description"), item.get("state", "")
            if not DOMAIN_NAME_RE.match(name):
                why = f"domain name {item.get('name')!r} is not a snake_case identifier of 3-48 characters"
            elif name in self._domains:
                why = f"domain {name!r} already exists"
            elif not isinstance(desc, str) or not desc.strip():
                why = "a domain needs a description"
            else:
                why = None
            if why is not None:
                self._reject(name=str(item.get("name"))[:80], domain=name, category=category.name, stage="domain",
                             kind="domain", reason=why, tool=item)
                continue
            self._domains.add(name)
            out.append({"name": name, "description": desc.strip(),
                        "state": state if isinstance(state, str) else json.dumps(state)})
            if len(out) >= n:
                break
        return out

    # ------------------------------------------------------------- stage 2: seed
    async def build_domain(self, plan: Mapping[str, str], category: str) -> DomainWork | None:
        name = plan["name"]
        prompt = (task_line("seed_data") + domain_header(name, category, plan["description"], None)
                  + f"State shape: {plan['state']}\n"
                  "Write Python (standard library only) defining `seed(rng)`: it returns the domain's initial "
                  "state as a JSON-serialisable dict of tables (dicts keyed by string ids containing digits, like "
                  '"O-1001"), 5-12 records each. Use only `rng` (a random.Random) for randomness. '
                  "Give module-level constants and helpers names that start with an underscore.\n"
                  "Also write the domain's policy: 3-6 short rules (markdown bullets) the assistant must follow.\n"
                  f"Example of seed code (another domain):\n{SEED_EXAMPLE}\n"
                  'Answer: {"code": "<python source>", "policy": "- rule\\n- rule"}')
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        answer: Any = None
        why: str | None = None
        rounds = 0
        for attempt in range(self.repairs + 1):
            rounds += 1
            answer, why = await self._ask(messages, SEED_SCHEMA, "seed")
            if why is None:
                why, work = await self._try_seed(answer, plan, category)
                if why is None:
                    return work
            if attempt < self.repairs:
                messages = self._followup(messages, answer, why)
        self._reject(name=name, domain=name, category=category, stage="domain", kind="domain", rounds=rounds,
                     reason=f"seed data failed: {why}", tool=answer)
        return None

    async def _try_seed(self, answer: Any, plan: Mapping[str, str], category: str) -> tuple[str | None, Any]:
        if not isinstance(answer, dict):
            return f"the answer must be a JSON object, got {type(answer).__name__}", None
        problem, src = check_seed_code(answer.get("code"))
        if problem is not None:
            return problem, None
        policy = answer.get("policy")
        if not isinstance(policy, str) or not policy.strip():
            policy = "- Confirm every change with the user before making it."
        probe = probe_tool(plan["name"], category)
        try:
            domain = Domain(name=plan["name"], category=category, description=plan["description"],
                            policy=policy.strip(), source=src, tools=[])
        except ValidationError as e:
            return f"invalid domain: {e.errors()[0]['msg']}", None
        report = await self.validator.validate([probe], None, domains={domain.name: domain})
        r = report.results[0] if report.results else None
        if r is None or not r.ok:
            return (r.reason if r is not None and r.reason else "the seed did not load"), None
        state = report.states.get(domain.name)
        if not isinstance(state, dict) or not state:
            return "seed(rng) must return a non-empty dict of tables", None
        from toolzoo.domains import infer_schema

        domain.state_schema = infer_schema(state)
        return None, DomainWork(domain=domain, state=state, new=True)

    # ------------------------------------------------------------ stage 2: tools
    def _existing_tools_text(self, work: DomainWork) -> str:
        tools = list(work.domain.tools) + work.accepted
        if not tools:
            return "(none yet)"
        return "; ".join(f"{t.name} ({t.effect}): {t.description.strip().splitlines()[0][:100]}" for t in tools)

    async def outline(self, work: DomainWork, n: int) -> list[dict[str, str]]:
        d = work.domain
        prompt = (task_line("tool_outline") + domain_header(d.name, d.category, d.description, work.state, d.policy)
                  + f"Existing tools (do not repeat them): {self._existing_tools_text(work)}\n"
                  f"Propose {n} new tools an assistant needs in this domain, reading and changing the state "
                  "above: a mix of read and write tools, each doing one clear thing.\n"
                  'Answer: {"tools": [{"name": "<snake_case verb_noun>", "description": "<what it does, one '
                  'sentence>", "effect": "read" or "write"}]}')
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        answer, why = None, None
        for attempt in range(self.repairs + 1):
            answer, why = await self._ask(messages, OUTLINE_SCHEMA, "outline")
            if why is None:
                items = answer.get("tools") if isinstance(answer, dict) else None
                if isinstance(items, list) and items:
                    break
                why = 'the answer needs a non-empty list "tools"'
            if attempt < self.repairs:
                messages = self._followup(messages, answer, why)
        else:
            self._reject(name=f"{d.name}/*", domain=d.name, category=d.category, stage="generation", kind="domain",
                         reason=f"no tool outline: {why}", rounds=self.repairs + 1, tool=answer)
            return []
        out, reserved = [], source_defs(d.source)
        for item in items:
            self.stats.tools_proposed += 1
            if not isinstance(item, dict):
                self._reject(name="?", domain=d.name, category=d.category, stage="generation",
                             reason=f"an outline entry must be an object, got {type(item).__name__}", tool=item)
                continue
            name = snake_name(item.get("name", ""))
            if not NAME_RE.match(name or "-") or not name or name[0].isdigit():
                self._reject(name=str(item.get("name"))[:80], domain=d.name, category=d.category, stage="generation",
                             reason=f"tool name {item.get('name')!r} is not an identifier", tool=item)
                continue
            if name in reserved:
                self._reject(name=name, domain=d.name, category=d.category, stage="duplicate", tool=item,
                             reason=f"name clash: {name!r} is already defined in {d.name}'s source")
                continue
            clash = self._reserve_name(name, d.name)
            if clash is not None:
                self._reject(name=name, domain=d.name, category=d.category, stage="duplicate", reason=clash, tool=item)
                continue
            desc = item.get("description") if isinstance(item.get("description"), str) else ""
            effect = item.get("effect") if item.get("effect") in ("read", "write") else "read"
            out.append({"name": name, "description": desc, "effect": effect})
            if len(out) >= n:
                break
        return out

    def _tool_messages(self, work: DomainWork, item: Mapping[str, str]) -> list[dict[str, Any]]:
        d = work.domain
        helpers = _source_functions(d.source)
        prompt = (task_line("tool_code") + domain_header(d.name, d.category, d.description, work.state, d.policy)
                  + (f"Functions of the domain's source you may call: {', '.join(helpers)}\n" if helpers else "")
                  + f"Other tools of the domain: {self._existing_tools_text(work)}\n"
                  + f"Implement the tool `{item['name']}` ({item['effect']}): {item['description']}\n"
                  + TOOL_RULES.format(name=item["name"]) + "\n"
                  + f"Example answer (another domain): {json.dumps(TOOL_EXAMPLE)}\n"
                  'Answer: {"name", "description", "effect", "parameters", "errors", "code"} as above.')
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]

    async def _generate(self, c: Candidate, work: DomainWork) -> None:
        """One LLM answer for `c` (first try or repair); sets c.spec, or c.reason and c.stage."""
        c.rounds += 1
        c.spec = None
        answer, why = await self._ask(c.messages, TOOL_SCHEMA, "tool")
        c.raw = answer
        if why is not None:
            c.reason, c.stage = why, "generation"
            return
        try:
            spec = build_tool(answer, domain=c.domain, category=c.category, expect_name=c.name,
                              reserved=source_defs(work.domain.source))
        except Exception as e:  # whatever a strange answer provokes in the spec checks
            spec = f"the tool spec could not be checked: {type(e).__name__}: {e}"[:400]
        if isinstance(spec, str):
            c.reason, c.stage = spec, "spec"
            return
        c.spec, c.reason = spec, None

    def _duplicate_of(self, spec: ToolSpec) -> str | None:
        other = self._keys.get(dedup_key(spec))
        return other if other is not None and other != spec.name else None

    async def grow_domain(self, work: DomainWork, n: int) -> None:
        """Outline n tools for a domain, implement, validate and repair them; accepted ones go in work.accepted."""
        d = work.domain
        items = await self.outline(work, n)
        cands = [Candidate(name=i["name"], domain=d.name, category=d.category, messages=self._tool_messages(work, i))
                 for i in items]
        pending = list(cands)
        for round_ in range(self.repairs + 1):
            if not pending:
                break
            async with anyio.create_task_group() as tg:
                for c in pending:
                    tg.start_soon(self._generate, c, work)
            ready: list[Candidate] = []
            for c in pending:
                if c.spec is None:
                    continue
                dup = self._duplicate_of(c.spec)
                if dup is not None:
                    c.reason, c.stage = f"duplicate of {dup} (same normalised signature and description)", "duplicate"
                    c.spec = None
                    continue
                ready.append(c)
            if ready:
                report = await self._validate([c.spec for c in ready if c.spec is not None], work)
                for c in ready:
                    r = next((x for x in report.results if x.name == c.name), None)
                    if r is not None and r.ok and c.spec is not None:
                        self._accept(c, work)
                    else:
                        c.reason = r.reason if r is not None and r.reason else "not validated"
                        c.stage = "validation"
            nxt = []
            for c in pending:
                if c.spec is not None and c.reason is None:
                    continue  # accepted
                if c.stage == "duplicate" or round_ == self.repairs:
                    self._reject(name=c.name, domain=c.domain, category=c.category, stage=c.stage,
                                 reason=c.reason or "failed", rounds=c.rounds, tool=c.spec or c.raw)
                    continue
                c.messages = self._followup(c.messages, c.raw, c.reason or "failed")
                nxt.append(c)
            pending = nxt

    async def _validate(self, specs: Sequence[ToolSpec], work: DomainWork) -> ValidationReport:
        try:
            return await self.validator.validate(list(specs), None, domains={work.domain.name: work.domain})
        except Exception as e:  # a validator/sandbox problem: nothing it could not check is accepted
            from toolzoo.validate import ToolCheck

            return ValidationReport(results=[ToolCheck(name=s.name, domain=s.domain, ok=False, stage="load",
                                                       reason=f"validation failed: {type(e).__name__}: {e}"[:500])
                                             for s in specs])

    def _accept(self, c: Candidate, work: DomainWork) -> None:
        assert c.spec is not None
        work.accepted.append(c.spec)
        self._keys[dedup_key(c.spec)] = c.spec.name
        self.stats.tools_accepted += 1
        if c.rounds > 1:
            self.stats.accepted_after_repair += 1
        self._say(f"accepted {c.domain}.{c.name}" + (f" after {c.rounds - 1} repair(s)" if c.rounds > 1 else ""))

    # ------------------------------------------------------------- final check
    async def _final_check(self, work: DomainWork) -> None:
        """All accepted tools of a domain together in one bundle: what is exported must pass as a whole."""
        if not work.accepted:
            return
        report = await self._validate(work.accepted, work)
        bad = {r.name: r.reason or "failed" for r in report.failures()}
        missing = {t.name for t in work.accepted} - {r.name for r in report.results}
        for t in list(work.accepted):
            if t.name in bad or t.name in missing:
                work.accepted.remove(t)
                self.stats.tools_accepted -= 1
                self._keys.pop(dedup_key(t), None)
                self._reject(name=t.name, domain=t.domain, category=t.category, stage="validation", tool=t,
                             reason=f"failed next to the domain's other new tools: {bad.get(t.name, 'not validated')}")

    # ------------------------------------------------------------------- run
    async def run(self, zoo: Zoo, *, categories: Sequence[str | Category] | None = None,
                  domains_per_category: int = 1, tools_per_domain: int = 4,
                  extend: Sequence[str] = ()) -> Zoo:
        start = time.perf_counter()
        work_zoo = zoo.model_copy(deep=True)
        self._names = {t.name: t.domain for t in work_zoo.tools}
        self._keys = {}
        for t in work_zoo.tools:
            self._keys.setdefault(dedup_key(t), t.name)
        self._domains = {d.name for d in work_zoo.domains}
        known = {c.name: c for c in (work_zoo.categories or CATEGORIES)} | {c.name: c for c in CATEGORIES}
        cats: list[Category] = []
        if categories is None:
            cats = list(work_zoo.categories or CATEGORIES) if domains_per_category > 0 else []
        else:
            for c in categories:
                cats.append(c if isinstance(c, Category) else known.get(c, Category(name=snake_name(c) or "unknown")))
        self.stats.categories = len(cats)
        results: list[DomainWork] = []

        async def new_domains(cat: Category) -> None:
            try:
                plans = await self.propose_domains(cat, domains_per_category)
            except Exception as e:  # a bug or an unexpected failure: recorded, never a crash
                self._reject(name=f"{cat.name}/*", domain="", category=cat.name, stage="domain", kind="domain",
                             reason=f"internal error: {type(e).__name__}: {e}")
                return
            async with anyio.create_task_group() as tg:
                for plan in plans:
                    tg.start_soon(one_domain, plan, cat.name)

        async def one_domain(plan: Mapping[str, str], cat: str) -> None:
            try:
                work = await self.build_domain(plan, cat)
                if work is None:
                    return
                self._say(f"domain {plan['name']} seeded")
                await self.grow_domain(work, tools_per_domain)
                await self._final_check(work)
                results.append(work)
            except Exception as e:
                self._reject(name=plan["name"], domain=plan["name"], category=cat, stage="domain", kind="domain",
                             reason=f"internal error: {type(e).__name__}: {e}")

        async def old_domain(name: str) -> None:
            try:
                d = work_zoo.domain(name)
            except KeyError as e:
                self._reject(name=name, domain=name, category="", stage="domain", kind="domain", reason=str(e))
                return
            try:
                report = await self.validator.validate(list(d.tools[:1]), work_zoo)
                state = report.states.get(name)
                if state is None:
                    # the domain did not load: nothing to extend
                    why = report.results[0].reason if report.results else "the domain has no tools to load it with"
                    self._reject(name=name, domain=name, category=d.category, stage="domain", kind="domain",
                                 reason=f"cannot extend {name}: {why}")
                    return
                work = DomainWork(domain=d, state=state, new=False)
                await self.grow_domain(work, tools_per_domain)
                await self._final_check(work)
                results.append(work)
            except Exception as e:
                self._reject(name=name, domain=name, category=d.category, stage="domain", kind="domain",
                             reason=f"internal error: {type(e).__name__}: {e}")

        async with anyio.create_task_group() as tg:
            for cat in cats:
                tg.start_soon(new_domains, cat)
            for name in dict.fromkeys(extend):
                tg.start_soon(old_domain, name)

        for work in sorted(results, key=lambda w: w.domain.name):
            if work.new:
                if not work.accepted:
                    continue
                d = work.domain.model_copy(update={"tools": list(work.accepted)})
                work_zoo.domains.append(d)
                if work.domain.category not in {c.name for c in work_zoo.categories}:
                    work_zoo.categories.append(known.get(work.domain.category, Category(name=work.domain.category)))
                self.stats.domains_accepted += 1
            elif work.accepted:
                work_zoo.domain(work.domain.name).tools.extend(work.accepted)
                self.stats.domains_extended += 1
        work_zoo.check_names()
        self.rejected.sort(key=lambda r: (r.category, r.domain, r.kind, r.name))
        self.stats.seconds = time.perf_counter() - start
        return work_zoo


def _source_functions(source: str) -> list[str]:
    """`name(args)` of the functions in a domain's source that tools may call (not seed, not tools)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name != "seed" and not n.decorator_list:
            out.append(f"{n.name}({', '.join(a.arg for a in n.args.args)})")
    return out[:20]


async def evolve_with_llm(
    zoo: Zoo,
    client: LLMClient,
    *,
    categories: Sequence[str | Category] | None = None,
    domains_per_category: int = 1,
    tools_per_domain: int = 4,
    repairs: int = 2,
    validator: Validator,
    extend: Sequence[str] = (),
    seed: int = 0,
    max_tokens: int | None = None,
    temperature: float | None = None,
    progress: Callable[[str], None] | None = None,
    stats: LLMEvolveStats | None = None,
) -> tuple[Zoo, list[LLMRejection]]:
    """Grow `zoo` with LLM-made domains (per category) and tools (per domain, also for `extend`ed ones).

    Returns the new zoo (the input plus everything that passed validation) and the rejections.
    Pass `stats` to have it filled in.
    """
    ev = LLMEvolver(client, validator, repairs=repairs, seed=seed, max_tokens=max_tokens,
                    temperature=temperature, progress=progress)
    out = await ev.run(zoo, categories=categories, domains_per_category=domains_per_category,
                       tools_per_domain=tools_per_domain, extend=extend)
    if stats is not None:
        for k, v in ev.stats.model_dump().items():
            setattr(stats, k, v)
    return out, ev.rejected
