"""Validate zoo tools: spec checks on the host, then sample calls in sandboxes.

    report = validate_tools(zoo, backend="auto")
    for r in report.failures():
        print(r.name, r.reason)

A tool passes when
  * its spec is sound: parameters/returns are valid JSON Schema, the name is
    unique, the description is not empty, the implementation compiles, imports
    the standard library only and defines the function the spec names;
  * schema-valid calls (arguments drawn from the schema; id-like strings drawn
    from the domain's seeded state) return a result that matches `returns`, or
    a tool_failure whose code is declared (by the tool or, for evolved tools, by
    an ancestor) - never internal_error, timeout or unknown_tool;
  * schema-invalid calls (a required argument missing, a wrong type, a value
    outside the enum, a violated constraint, an unknown argument) come back as
    ToolError kind "invalid_arguments".

Tools run in a SandboxPool: each domain's tools are loaded in batches (one
bundle per batch, so a sandbox load serves many tools) on a few sandboxes in
parallel, and the sandbox is reset before each tool.

Argument harvesting and sampling live in toolzoo.arguments.
"""

from __future__ import annotations

import ast
import functools
import json
import random
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

# Argument sampling lived here before toolzoo.arguments: its names stay importable from this module.
from toolzoo.arguments import ISO_DATE, ArgSampler, Harvest, harvest, is_valid, schema_validator, singular  # noqa: F401
from toolzoo.spec import Domain, SpecError, ToolSpec, Zoo, check_json_schema

Stage = Literal["spec", "load", "call"]
DSL_KEYWORDS_ENFORCED = ("type", "enum", "const", "required", "additionalProperties", "minimum", "maximum",
                         "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
                         "minItems", "maxItems", "uniqueItems", "items", "properties")


# ===================================================================== report
class ToolCheck(BaseModel):
    """The verdict on one tool."""

    name: str
    domain: str
    ok: bool
    reason: str | None = None
    stage: Stage | None = None
    calls: int = 0
    successes: int = 0
    samples: list[Any] = Field(default_factory=list, exclude=True, description="a few successful outputs")


class ValidationReport(BaseModel):
    results: list[ToolCheck] = Field(default_factory=list)
    backend: str | None = None
    seconds: float = 0.0
    states: dict[str, Any] = Field(default_factory=dict, exclude=True, description="seeded state per domain")

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def passed(self) -> list[ToolCheck]:
        return [r for r in self.results if r.ok]

    def failures(self) -> list[ToolCheck]:
        return [r for r in self.results if not r.ok]

    def result(self, name: str) -> ToolCheck:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no result for tool {name!r}")

    def summary(self) -> str:
        return f"{len(self.passed())}/{len(self.results)} tools pass, {len(self.failures())} fail ({self.seconds:.1f}s)"


# ================================================================ spec checks
def _top_level_nodes(tree: ast.Module) -> list[tuple[str, ast.stmt]]:
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((node.name, node))
        elif isinstance(node, ast.Assign):
            out += [(t.id, node) for t in node.targets if isinstance(t, ast.Name)]
    return out


def _top_level_defs(source: str) -> dict[str, str]:
    """Each top-level name -> the source of its definition, in one pass over the source.

    (ast.get_source_segment splits the whole source again on every call: quadratic on a big domain.)
    """
    data = source.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):  # the line ends ast counts; offsets are UTF-8 bytes
        starts.append(starts[-1] + len(line))
    out: dict[str, str] = {}
    for name, node in _top_level_nodes(ast.parse(source)):
        if node.end_lineno is None or node.end_col_offset is None:
            out[name] = name
            continue
        a = starts[node.lineno - 1] + node.col_offset
        b = starts[node.end_lineno - 1] + node.end_col_offset
        out[name] = data[a:b].decode() or name
    return out


@functools.lru_cache(maxsize=256)
def _domain_defs(source: str) -> frozenset[str]:
    try:
        return frozenset(name for name, _ in _top_level_nodes(ast.parse(source)))
    except SyntaxError:
        return frozenset()


def _non_stdlib_imports(source: str) -> list[str]:
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""] if node.level == 0 else ["."]
        else:
            continue
        for m in mods:
            if m.split(".")[0] not in sys.stdlib_module_names:
                bad.append(m)
    return bad


def spec_problem(tool: ToolSpec, domains: Mapping[str, Domain]) -> str | None:
    """Why `tool` cannot even be loaded, or None."""
    if not tool.description or not tool.description.strip():
        return "empty description"
    try:
        if tool.parameters.get("type") != "object":
            return "parameters must be a JSON Schema with type 'object'"
        check_json_schema(tool.parameters, f"tool {tool.name} parameters")
        if tool.returns is not None:
            check_json_schema(tool.returns, f"tool {tool.name} returns")
    except SpecError as e:
        return str(e)
    if tool.provenance == "mcp":
        return None
    if tool.domain not in domains:
        return f"unknown domain {tool.domain!r}"
    if not tool.function:
        return "no implementing function named"
    defined = set(_domain_defs(domains[tool.domain].source))
    if tool.implementation:
        try:
            compile(tool.implementation, f"<tool {tool.name}>", "exec")
            defs = _top_level_defs(tool.implementation)
        except SyntaxError as e:
            return f"implementation does not compile: {e.msg} (line {e.lineno})"
        bad = _non_stdlib_imports(tool.implementation)
        if bad:
            return f"implementation imports non-stdlib modules: {', '.join(bad)}"
        defined |= set(defs)
    if tool.function not in defined:
        return f"function {tool.function!r} is not defined in the domain source or the implementation"
    return None


def _ancestor_errors(tool: ToolSpec, by_name: Mapping[str, ToolSpec]) -> set[str]:
    codes, stack, seen = set(tool.errors), list(tool.parents), set()
    while stack:
        p = stack.pop()
        if p in seen or p not in by_name:
            continue
        seen.add(p)
        codes |= set(by_name[p].errors)
        stack += by_name[p].parents
    return codes


# ================================================================= validator
def _batches(tools: list[ToolSpec], domain: Domain, size: int) -> list[list[ToolSpec]]:
    """Group tools whose implementations can share one bundle; a tool that redefines a name alone."""
    dom = _domain_defs(domain.source)
    solo, shared = [], []
    seen_defs: dict[str, str] = {}
    for t in tools:
        defs = _top_level_defs(t.implementation) if t.implementation else {}
        clash = any(n in dom for n in defs) or any(n in seen_defs and seen_defs[n] != src for n, src in defs.items())
        if clash:
            solo.append([t])
        else:
            seen_defs.update(defs)
            shared.append(t)
    return [shared[i: i + size] for i in range(0, len(shared), size)] + solo


class Validator:
    """A pool of sandboxes that validates tools; reuse one across many `validate` calls.

        async with Validator(backend="auto") as v:
            report = await v.validate(tools, zoo)
    """

    def __init__(self, *, backend: str = "auto", sandboxes: int = 4, seed: int = 0, calls: int = 6,
                 batch: int = 60, call_timeout: float = 5.0):
        self.backend = backend
        self.sandboxes = max(1, sandboxes)
        self.seed = seed
        self.calls = calls
        self.batch = batch
        self.call_timeout = call_timeout
        self._pool: Any = None
        self._states: dict[str, Any] = {}
        self._harvests: dict[str, Harvest] = {}

    async def __aenter__(self) -> Validator:
        from sandboxes import SandboxConfig, SandboxPool

        self._pool = SandboxPool(SandboxConfig(backend=self.backend), size=self.sandboxes)  # type: ignore[arg-type]
        await self._pool.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None

    @property
    def backend_used(self) -> str | None:
        return self._pool.backend if self._pool is not None else None

    def harvest(self, domain: str) -> Harvest | None:
        return self._harvests.get(domain)

    async def validate(self, tools: Sequence[ToolSpec], zoo: Zoo | None = None, *,
                       domains: Mapping[str, Domain] | None = None,
                       progress: Callable[[ToolCheck], None] | None = None) -> ValidationReport:
        """Validate `tools`; `zoo` (or `domains`) supplies domains and ancestors (for inherited error codes)."""
        start = time.perf_counter()
        doms: dict[str, Domain] = dict(domains or {})
        known: dict[str, ToolSpec] = {}
        if zoo is not None:
            doms.update({d.name: d for d in zoo.domains})
            known.update({t.name: t for t in zoo.tools})
        for t in tools:
            if t.domain not in doms and t.provenance != "mcp":
                try:
                    from toolzoo.domains import load_domain

                    doms[t.domain] = load_domain(t.domain)
                except SpecError:
                    pass
        results: dict[str, ToolCheck] = {}
        order = [t.name for t in tools]
        seen: dict[str, str] = {}
        runnable: dict[str, list[ToolSpec]] = {}
        dup_ids: set[int] = set()

        def done(r: ToolCheck, key: str | None = None) -> None:
            results[key or r.name] = r
            if progress is not None:
                progress(r)

        for i, t in enumerate(tools):
            if t.name in seen:
                dup_ids.add(i)
                order[i] = f"{t.name}#{i}"
                done(ToolCheck(name=t.name, domain=t.domain, ok=False, stage="spec",
                               reason=f"name clash: {t.name!r} is already used by a tool in {seen[t.name]}"), order[i])
                continue
            seen[t.name] = t.domain
            problem = spec_problem(t, doms)
            if problem is not None:
                done(ToolCheck(name=t.name, domain=t.domain, ok=False, stage="spec", reason=problem))
            elif t.provenance == "mcp":
                done(ToolCheck(name=t.name, domain=t.domain, ok=True, reason="MCP tool: spec checked, not executed"))
            else:
                runnable.setdefault(t.domain, []).append(t)
        for t in tools:
            known.setdefault(t.name, t)

        if runnable:
            if self._pool is None:
                raise RuntimeError("use `async with Validator(...) as v:` before validate()")
            jobs = [(doms[d], b) for d in sorted(runnable) for b in _batches(runnable[d], doms[d], self.batch)]
            # Longest first: better packing over the sandboxes.
            jobs.sort(key=lambda j: -len(j[1]))
            queue = list(reversed(jobs))

            async def worker() -> None:
                while queue:
                    domain, batch = queue.pop()
                    await self._run_batch(domain, batch, known, done)

            async with anyio.create_task_group() as tg:
                for _ in range(min(self.sandboxes, len(jobs))):
                    tg.start_soon(worker)
        report = ValidationReport(results=[results[k] for k in order if k in results],
                                  backend=self.backend_used, seconds=time.perf_counter() - start,
                                  states={d: self._states[d] for d in runnable if d in self._states})
        return report

    # ------------------------------------------------------------- sandboxes
    async def _run_batch(self, domain: Domain, batch: list[ToolSpec], known: Mapping[str, ToolSpec],
                         done: Callable[..., None]) -> None:
        from sandboxes import RequestFailed, SandboxError
        from toolzoo.runtime import bundle

        pending = list(batch)
        bisect = False
        async with self._pool.sandbox() as sb:
            try:
                await sb.load_domain(bundle(domain, seed=0, tools=batch))
            except RequestFailed as e:
                if len(batch) == 1:
                    done(ToolCheck(name=batch[0].name, domain=domain.name, ok=False, stage="load",
                                   reason=f"bundle does not load: {e.message[-300:]}"))
                    return
                bisect = True
            except SandboxError as e:
                for t in batch:
                    done(ToolCheck(name=t.name, domain=domain.name, ok=False, stage="load",
                                   reason=f"sandbox failed while loading: {e}"))
                return
            if not bisect:
                if domain.name not in self._harvests:
                    state = (await sb.snapshot()).state
                    self._states[domain.name] = state
                    self._harvests[domain.name] = harvest(state)
                while pending:
                    t = pending.pop(0)
                    try:
                        await sb.reset()
                        result = await self._check_tool(sb, t, known, self._harvests[domain.name])
                    except SandboxError as e:
                        done(ToolCheck(name=t.name, domain=domain.name, ok=False, stage="call",
                                       reason=f"the sandbox died running it: {e}"))
                        break
                    done(result)
        if bisect:  # one tool breaks the shared bundle: find it by bisection
            half = len(batch) // 2
            await self._run_batch(domain, batch[:half], known, done)
            await self._run_batch(domain, batch[half:], known, done)
        elif pending:  # the sandbox died: go on with a fresh one
            await self._run_batch(domain, pending, known, done)

    async def _check_tool(self, sb: Any, t: ToolSpec, known: Mapping[str, ToolSpec], h: Harvest) -> ToolCheck:
        rng = random.Random(f"{self.seed}:{t.name}")
        sampler = ArgSampler(h)
        allowed = set(t.errors)
        if t.provenance in ("evolved", "llm"):
            allowed |= _ancestor_errors(t, known)
        check = ToolCheck(name=t.name, domain=t.domain, ok=True, stage="call")

        def fail(reason: str) -> ToolCheck:
            check.ok, check.reason = False, reason
            return check

        valid = sampler.valid_calls(t.parameters, rng, self.calls)
        if not valid:
            return fail("could not draw any schema-valid arguments")
        refused: list[str] = []
        for args in valid:
            before = (await sb.snapshot()).digest if t.effect == "read" else None
            r = await sb.call_tool(t.name, args, timeout=self.call_timeout)
            check.calls += 1
            if before is not None and (await sb.snapshot()).digest != before:
                return fail(f"declared effect 'read' but {_short(args)} changed the state")
            if r.ok:
                check.successes += 1
                if t.returns is not None and not is_valid(t.returns, r.output):
                    err = next(iter(schema_validator(json.dumps(t.returns, sort_keys=True)).iter_errors(r.output)))
                    return fail(f"output of {_short(args)} does not match returns: {err.message[:160]}")
                if len(check.samples) < 3:
                    check.samples.append(r.output)
            elif r.kind == "tool_failure":
                if r.code not in allowed:
                    return fail(f"undeclared error code {r.code!r} for {_short(args)}: {r.message[:160]}")
            elif r.kind == "invalid_arguments":
                refused.append(r.message)
            else:
                return fail(f"{r.kind} on valid arguments {_short(args)}: {r.message[-300:]}")
        if len(refused) == len(valid):
            return fail(f"every schema-valid call was refused as invalid_arguments: {refused[0][:200]}")
        for what, args in sampler.invalid_calls(t.parameters, rng, valid[0]):
            r = await sb.call_tool(t.name, args, timeout=self.call_timeout)
            check.calls += 1
            if r.ok or r.kind != "invalid_arguments":
                got = "a result" if r.ok else f"{r.kind} {r.code or ''}".strip()
                return fail(f"invalid arguments ({what}) were not refused as invalid_arguments: got {got}")
        return check


def _short(args: Any) -> str:
    s = json.dumps(args, sort_keys=True)
    return s if len(s) <= 120 else s[:117] + "..."


# ======================================================================= API
def validate_tools(
    zoo_or_tools: Zoo | Iterable[ToolSpec],
    *,
    backend: str = "auto",
    progress: Callable[[ToolCheck], None] | None = None,
    zoo: Zoo | None = None,
    sandboxes: int = 4,
    seed: int = 0,
    call_timeout: float = 5.0,
) -> ValidationReport:
    """Validate every tool of a zoo (or the given tools, with `zoo` for domains/ancestors)."""
    if isinstance(zoo_or_tools, Zoo):
        zoo, tools = zoo_or_tools, zoo_or_tools.tools
    else:
        tools = list(zoo_or_tools)

    async def run() -> ValidationReport:
        async with Validator(backend=backend, sandboxes=sandboxes, seed=seed, call_timeout=call_timeout) as v:
            return await v.validate(tools, zoo, progress=progress)

    return anyio.run(run)


def zoo_file(path: Any) -> Any:
    """The zoo.json a path names: the file itself, or zoo.json inside the folder (existing or not)."""
    from pathlib import Path

    p = Path(path)
    return p if p.suffix == ".json" and not p.is_dir() else p / "zoo.json"


_ZOO_SHAPE = 'a zoo is a JSON object {"categories": [...], "domains": [{..., "tools": [...]}], "external": [...]}'


def _spec_error(e: Any) -> str:
    """One line from a pydantic ValidationError that names the key at fault."""
    first = e.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in first["loc"])
    if first["type"] == "extra_forbidden":
        return f"unknown key {str(first['loc'][-1])!r}" + (f" at {loc}" if len(first["loc"]) > 1 else "")
    msg = first["msg"].removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def _raw_zoo(f: Any) -> dict[str, Any]:
    """zoo.json parsed, with the shape every later step relies on checked (errors name the file)."""
    try:
        raw = json.loads(f.read_text())
    except UnicodeDecodeError as e:
        raise SpecError(f"{f} is not a zoo: not UTF-8 text ({e.reason})") from None
    except ValueError as e:
        raise SpecError(f"{f} is not valid JSON: {e}") from None

    def kind(v: Any) -> str:
        return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(v), f"a number ({v})" if isinstance(v, (int, float)) else type(v).__name__)

    if not isinstance(raw, dict):
        raise SpecError(f"{f}: {_ZOO_SHAPE}; got {kind(raw)}")
    for key in ("categories", "domains", "external"):
        if key in raw and not isinstance(raw[key], list):
            raise SpecError(f"{f}: {key!r} must be a list; got {kind(raw[key])} ({_ZOO_SHAPE})")
    for i, d in enumerate(raw.get("domains", [])):
        if not isinstance(d, dict):
            raise SpecError(f"{f}: domains[{i}] must be a domain object; got {kind(d)} ({_ZOO_SHAPE})")
        if "tools" in d and not isinstance(d["tools"], list):
            raise SpecError(f"{f}: domains[{i}].tools must be a list; got {kind(d['tools'])}")
    return raw


def load_zoo_lenient(path: Any) -> tuple[Zoo, list[ToolCheck]]:
    """Load a saved zoo, keeping tools whose spec does not parse out (reported as spec failures).

    A file that is not a zoo at all (not JSON, the wrong shape, a domain that does not parse)
    raises SpecError naming the file.
    """
    from pydantic import ValidationError

    f = zoo_file(path)
    if not f.is_file():
        raise SpecError(f"no zoo at {path}: expected {f} (written by `dojo synth tools` or Zoo.save)")
    raw = _raw_zoo(f)
    bad: list[ToolCheck] = []

    def keep(t: Any, domain: str) -> dict | None:
        if not isinstance(t, dict):
            bad.append(ToolCheck(name="?", domain=domain, ok=False, stage="spec",
                                 reason=f"invalid spec: a tool must be a JSON object, got {json.dumps(t)[:60]}"))
            return None
        try:
            ToolSpec.model_validate(t)
            return t
        except ValidationError as e:
            bad.append(ToolCheck(name=str(t.get("name", "?")), domain=domain, ok=False, stage="spec",
                                 reason=f"invalid spec: {_spec_error(e)}"))
            return None

    clash: list[ToolSpec] = []
    for d in raw.get("domains", []):
        kept, names = [], set()
        for t in d.get("tools", []):
            if keep(t, str(d.get("name", "?"))) is None:
                continue
            if t["name"] in names:  # a Domain refuses duplicate names; validate them as a clash
                clash.append(ToolSpec.model_validate(t))
                continue
            names.add(t["name"])
            kept.append(t)
        d["tools"] = kept
    raw["external"] = [t for t in raw.get("external", []) if keep(t, "external") is not None]
    try:
        zoo = Zoo.model_validate(raw)
    except ValidationError as e:
        raise SpecError(f"{f}: {_spec_error(e)}") from None
    if clash:
        for c in clash:
            bad.append(ToolCheck(name=c.name, domain=c.domain, ok=False, stage="spec",
                                 reason=f"name clash: {c.name!r} is used twice in domain {c.domain}"))
    return zoo, bad


def validate_zoo_at(where: Any, *, backend: str = "auto", sandboxes: int = 4,
                    progress: Callable[[ToolCheck], None] | None = None) -> ValidationReport:
    """Validate a saved zoo (`seed` for the built-in one), a domain folder (or a folder of them) or a
    registered domain's name; unparseable tools count as failures."""
    from toolzoo.domains import domains_at

    folders = domains_at(where) if str(where) != "seed" else None
    if folders is not None:
        from toolzoo.categories import CATEGORIES

        zoo, bad = Zoo(categories=list(CATEGORIES), domains=folders), []
    elif str(where) == "seed":
        from toolzoo.domains import seed_zoo

        zoo, bad = seed_zoo(), []
    else:
        zoo, bad = load_zoo_lenient(where)
    report = validate_tools(zoo, backend=backend, sandboxes=sandboxes, progress=progress)
    report.results = bad + report.results
    return report
