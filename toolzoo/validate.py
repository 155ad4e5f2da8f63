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

Long because: bug fixes to it were in flight during the module split; split it (spec checks / call
generation / sandboxed runs) once they land.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import random
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import jsonschema
from pydantic import BaseModel, Field

from toolzoo.spec import Domain, SpecError, ToolSpec, Zoo, check_json_schema

Stage = Literal["spec", "load", "call"]
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
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


# ========================================================== state harvesting
def singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 3:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 1:
        return word[:-1]
    return word


@dataclass
class Harvest:
    """Values found in a seeded state, by the key they sit under: where real ids come from."""

    by_key: dict[str, list[Any]] = field(default_factory=dict)
    strings: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)

    def add(self, key: str | None, value: Any) -> None:
        if key is None or isinstance(value, (dict, list)):
            return
        for k in dict.fromkeys((key, singular(key))):
            bucket = self.by_key.setdefault(k, [])
            if value not in bucket and len(bucket) < 64:
                bucket.append(value)
        if isinstance(value, str):
            if len(self.strings) < 2000 and value not in self.strings:
                self.strings.append(value)
            if ISO_DATE.match(value) and value not in self.dates:
                self.dates.append(value)


def _is_table(d: dict) -> bool:
    if not d or not all(isinstance(v, dict) for v in d.values()):
        return False
    keys = list(d)
    return all(any(c.isdigit() for c in str(k)) for k in keys) or (
        len(keys) >= 3 and all(v.keys() == d[keys[0]].keys() for v in d.values()))


def harvest(state: Any) -> Harvest:
    h = Harvest()

    def walk(obj: Any, key: str | None, depth: int) -> None:
        if depth > 12:
            return
        if isinstance(obj, dict):
            if key is not None and _is_table(obj):
                for k in obj:
                    h.add(f"{singular(key)}_id", k)
                    h.add(key, k)
                    h.add("id", k)
            for k, v in obj.items():
                walk(v, str(k), depth + 1)
        elif isinstance(obj, list):
            for v in obj[:200]:
                walk(v, key, depth + 1)
        else:
            h.add(key, obj)

    walk(state, None, 0)
    return h


# ============================================================ argument draws
@functools.lru_cache(maxsize=8192)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_json))


def is_valid(schema: Any, value: Any) -> bool:
    if not isinstance(schema, dict):
        return True
    return _validator(json.dumps(schema, sort_keys=True)).is_valid(value)


_QUOTED = re.compile(r"\"([^\"]{1,80})\"|'([^']{1,80})'")
_FALLBACK_STRINGS = [
    ("email", "someone@example.com"), ("date", "2025-01-15"), ("address", "12 Harbour Rd, Lisbon"),
    ("phone", "+1-555-0100"), ("url", "https://example.com/x"), ("name", "Alex Doe"), ("code", "ABC123"),
    ("currency", "USD"), ("city", "Lisbon"), ("country", "PT"), ("reason", "customer request"),
    ("note", "as discussed with the customer"), ("message", "hello"), ("query", "lamp"), ("time", "10:00"),
]


def _types(schema: dict) -> list[str]:
    t = schema.get("type")
    if t is None:
        if "enum" in schema:
            return sorted({_json_type(v) for v in schema["enum"]})
        if "properties" in schema:
            return ["object"]
        if "items" in schema:
            return ["array"]
        return []
    return t if isinstance(t, list) else [t]


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


class ArgSampler:
    """Draws arguments for a tool from its schema and the domain's seeded state (deterministic in rng)."""

    def __init__(self, h: Harvest | None = None):
        self.h = h or Harvest()

    # ------------------------------------------------------------ candidates
    def candidates(self, pname: str, schema: dict) -> list[Any]:
        h = self.h
        out: list[Any] = list(schema.get("examples") or [])
        for m in _QUOTED.finditer(str(schema.get("description", ""))):
            out.append(m.group(1) or m.group(2))
        names = [pname, singular(pname)]
        if pname.endswith("_ids"):
            names.append(pname[:-1])
        for n in names:
            out += h.by_key.get(n, [])
        if len(out) < 2:
            for key in sorted(h.by_key):
                if key != pname and (key.endswith("_" + pname) or pname.endswith("_" + key)):
                    out += h.by_key[key][:16]
        if any(w in pname for w in ("date", "day")) or schema.get("format") == "date":
            out += h.dates[:16]
        uniq: dict[str, Any] = {}
        for v in out:
            uniq.setdefault(json.dumps(v, sort_keys=True), v)
        return list(uniq.values())

    # ---------------------------------------------------------------- values
    def value(self, pname: str, schema: dict, rng: random.Random, *, real: bool = True, depth: int = 0) -> Any:
        """A value valid under `schema`, or raise LookupError."""
        if not isinstance(schema, dict) or depth > 6:
            return "x"
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            opts = [v for v in schema["enum"] if is_valid({k: v2 for k, v2 in schema.items() if k != "enum"}, v)]
            if not opts:
                raise LookupError(f"{pname}: no enum value fits the schema")
            return rng.choice(opts)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [o for o in schema[key] if isinstance(o, dict) and o.get("type") != "null"] or schema[key]
                return self.value(pname, rng.choice(options), rng, real=real, depth=depth + 1)
        types = [t for t in _types(schema) if t != "null"] or (["null"] if _types(schema) else ["string"])
        typ = types[0] if len(types) == 1 else rng.choice(types)
        cands = [c for c in self.candidates(pname, schema) if is_valid(schema, c)] if real else []
        if typ == "boolean":
            return rng.random() < 0.5
        if typ == "null":
            return None
        if typ in ("integer", "number"):
            nums = [c for c in cands if isinstance(c, (int, float)) and not isinstance(c, bool)]
            if nums and rng.random() < 0.8:
                return rng.choice(nums)
            return self._number(pname, schema, rng, typ)
        if typ == "string":
            strs = [c for c in cands if isinstance(c, str)]
            if strs:
                return rng.choice(strs)
            return self._string(pname, schema, rng, real)
        if typ == "array":
            items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
            lo = schema.get("minItems", 1)
            hi = min(schema.get("maxItems", max(lo, 2)), max(lo, 2))
            k = rng.randint(lo, hi) if hi >= lo else lo
            vals: list[Any] = []
            for _ in range(k * 4):
                if len(vals) >= k:
                    break
                v = self.value(singular(pname), items, rng, real=real, depth=depth + 1)
                if schema.get("uniqueItems") and v in vals:
                    continue
                vals.append(v)
            return vals
        if typ == "object":
            props = schema.get("properties") or {}
            return {k: self.value(k, s, rng, real=real, depth=depth + 1)
                    for k, s in props.items() if k in schema.get("required", [])}
        return "x"

    def _number(self, pname: str, schema: dict, rng: random.Random, typ: str) -> Any:
        lo = schema.get("minimum", schema.get("exclusiveMinimum", None))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", None))
        if lo is None:
            lo = 0 if any(w in pname for w in ("offset", "skip", "page")) else 1
            lo = min(lo, hi) if hi is not None else lo
        if hi is None:
            hi = lo + 10
        if "exclusiveMinimum" in schema:
            lo = lo + (1 if typ == "integer" else 0.01)
        if "exclusiveMaximum" in schema:
            hi = hi - (1 if typ == "integer" else 0.01)
        if typ == "integer":
            lo, hi = math.ceil(lo), math.floor(hi)
            if hi < lo:
                raise LookupError(f"{pname}: empty integer range")
            return rng.randint(lo, min(hi, lo + 20))
        return round(rng.uniform(lo, min(hi, lo + 20)), 2)

    def _string(self, pname: str, schema: dict, rng: random.Random, real: bool) -> str:
        if "pattern" in schema:
            pool = [s for s in self.h.strings if is_valid(schema, s)]
            if pool:
                return rng.choice(pool)
        base = next((v for w, v in _FALLBACK_STRINGS if w in pname.lower()), None)
        if base is None or not real:
            base = f"zz-{pname[:12]}-{rng.randint(100, 999)}"
        lo, hi = schema.get("minLength", 0), schema.get("maxLength", None)
        if len(base) < lo:
            base = base + "x" * (lo - len(base))
        if hi is not None and len(base) > hi:
            base = base[:hi]
        if not is_valid(schema, base):
            raise LookupError(f"{pname}: cannot draw a string for {json.dumps(schema)[:80]}")
        return base

    # ----------------------------------------------------------------- calls
    def valid_calls(self, params: dict, rng: random.Random, n: int = 6) -> list[dict]:
        """Up to n schema-valid argument sets: required only, everything, random subsets, one unknown-id."""
        props = params.get("properties") or {}
        required = [p for p in params.get("required", []) if p in props]
        optional = [p for p in props if p not in required]
        plans: list[tuple[list[str], bool]] = [(required, True), (required + optional, True)]
        for _ in range(max(0, n - 3)):
            plans.append((required + [p for p in optional if rng.random() < 0.5], True))
        plans.append((required + [p for p in optional if rng.random() < 0.5], False))
        out, seen = [], set()
        for names, real in plans[:n]:
            for _attempt in range(3):
                try:
                    args = {p: self.value(p, props[p], rng, real=real or props[p].get("type") != "string")
                            for p in names}
                except LookupError:
                    continue
                if is_valid(params, args):
                    key = json.dumps(args, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        out.append(args)
                    break
        return out

    def invalid_calls(self, params: dict, rng: random.Random, base: dict | None) -> list[tuple[str, dict]]:
        """(what is wrong, arguments) pairs that the tool's validator must refuse."""
        props = params.get("properties") or {}
        required = [p for p in params.get("required", []) if p in props]
        if base is None:
            return []
        out: list[tuple[str, dict]] = []

        def add(what: str, args: dict) -> None:
            if not is_valid(params, args) and all(json.dumps(args, sort_keys=True) != json.dumps(a, sort_keys=True)
                                                  for _, a in out):
                out.append((what, args))

        if required:
            p = rng.choice(required)
            add(f"missing required {p!r}", {k: v for k, v in base.items() if k != p})
        typed = [p for p in props if _types(props[p])]
        if typed:
            p = rng.choice(typed)
            allowed = set(_types(props[p]))
            for wrong in (12345, "zz-wrong-type", True, ["zz"], {"zz": 1}, 1.5):
                t = _json_type(wrong)
                if t in allowed or (t == "integer" and "number" in allowed):
                    continue
                add(f"wrong type for {p!r}", {**base, p: wrong})
                break
        enums = [p for p in props if "enum" in props[p]]
        if enums:
            p = rng.choice(enums)
            wrong = "zz_not_an_option" if all(isinstance(v, str) for v in props[p]["enum"]) else 987654321
            add(f"{p!r} outside its enum", {**base, p: wrong})
        constrained = []
        for p, s in props.items():
            if not isinstance(s, dict):
                continue
            if "pattern" in s:
                constrained.append((p, "!! zz !!", "pattern"))
            if "maxLength" in s:
                constrained.append((p, "z" * (s["maxLength"] + 1), "maxLength"))
            if s.get("minLength", 0) > 0:
                constrained.append((p, "", "minLength"))
            for kw, delta in (("minimum", -1), ("exclusiveMinimum", 0), ("maximum", 1), ("exclusiveMaximum", 0)):
                if isinstance(s.get(kw), (int, float)):
                    constrained.append((p, s[kw] + delta, kw))
            if "maxItems" in s and p in base and isinstance(base[p], list) and base[p]:
                constrained.append((p, (base[p] * (s["maxItems"] + 1))[: s["maxItems"] + 1], "maxItems"))
            if s.get("minItems", 0) > 0:
                constrained.append((p, [], "minItems"))
        if constrained:
            p, v, kw = rng.choice(constrained)
            add(f"{p!r} violates {kw}", {**base, p: v})
        if params.get("additionalProperties") is False:
            add("unknown argument 'zz_unknown'", {**base, "zz_unknown": 1})
        return out


# ================================================================ spec checks
def _top_level_defs(source: str) -> dict[str, str]:
    tree = ast.parse(source)
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = ast.get_source_segment(source, node) or node.name
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = ast.get_source_segment(source, node) or t.id
    return out


@functools.lru_cache(maxsize=256)
def _domain_defs(source: str) -> frozenset[str]:
    try:
        return frozenset(_top_level_defs(source))
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
                    err = next(iter(_validator(json.dumps(t.returns, sort_keys=True)).iter_errors(r.output)))
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
    """Validate a saved zoo (`seed` for the built-in one); unparseable tools count as failures."""
    if str(where) == "seed":
        from toolzoo.domains import seed_zoo

        zoo, bad = seed_zoo(), []
    else:
        zoo, bad = load_zoo_lenient(where)
    report = validate_tools(zoo, backend=backend, sandboxes=sandboxes, progress=progress)
    report.results = bad + report.results
    return report
