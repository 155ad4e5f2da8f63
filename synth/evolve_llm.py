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
"""

from __future__ import annotations

import ast
import json
import random
import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolzoo.categories import CATEGORIES
from toolzoo.evolve import dedup_key
from toolzoo.runtime import strip_local_imports
from toolzoo.spec import NAME_RE, Category, Domain, SpecError, ToolSpec, Zoo
from toolzoo.validate import ValidationReport, Validator

if TYPE_CHECKING:  # synth.llm is imported lazily: nothing here needs it at import time
    from synth.llm import LLMClient, LLMConfig

RejectStage = Literal["domain", "generation", "spec", "validation", "duplicate"]
DOMAIN_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{2,47}$")
PROBE_PREFIX = "_dojo_probe_"
FACTORY_PREFIX = "_llm_make_"
MAX_STATE_BYTES = 200_000
STATE_EXCERPT_CHARS = 1500
DEFAULT_TOKENS = {"domains": 900, "seed": 1800, "outline": 900, "tool": 1800}


# ====================================================================== records
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


# ====================================================================== schemas
DOMAINS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"domains": {"type": "array", "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "state": {"type": "string"}},
        "required": ["name", "description", "state"]}}},
    "required": ["domains"],
}
SEED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string"}, "policy": {"type": "string"}},
    "required": ["code", "policy"],
}
OUTLINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tools": {"type": "array", "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                       "effect": {"type": "string", "enum": ["read", "write"]}},
        "required": ["name", "description", "effect"]}}},
    "required": ["tools"],
}
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "effect": {"type": "string", "enum": ["read", "write"]},
        "parameters": {"type": "object"},
        "errors": {"type": "object", "additionalProperties": {"type": "string"}},
        "code": {"type": "string"},
    },
    "required": ["name", "description", "effect", "parameters", "errors", "code"],
}

# ====================================================================== prompts
SYSTEM = ("You design tools for simulated, stateful environments in which an AI assistant serves users "
          "(like tau-bench). Answer with exactly one JSON object that matches the requested shape: "
          "no prose, no markdown fences.")

SEED_EXAMPLE = '''import random

PRODUCTS = [("P-100", "desk lamp", 2999), ("P-101", "office chair", 15900), ("P-102", "usb hub", 1999)]


def seed(rng):
    customers, orders = {}, {}
    for i in range(5):
        customers[f"C-{100 + i}"] = {"name": rng.choice(["Ana Silva", "Ben Lee", "Chen Kim"]),
                                     "email": f"user{100 + i}@example.com"}
    for j in range(10):
        sku, name, price = rng.choice(PRODUCTS)
        orders[f"O-{1000 + j}"] = {"customer_id": f"C-{100 + rng.randrange(5)}",
                                   "status": rng.choice(["pending", "shipped", "delivered"]),
                                   "items": [{"sku": sku, "name": name, "unit_price_cents": price, "qty": 1}]}
    return {"customers": customers, "orders": orders, "today": "2025-03-01"}
'''

TOOL_EXAMPLE = {
    "name": "cancel_order",
    "description": "Cancel a pending order and refund it in full.",
    "effect": "write",
    "parameters": {"type": "object", "properties": {
        "order_id": {"type": "string", "description": "the order to cancel, like \"O-1001\""},
        "reason": {"type": "string", "enum": ["changed_mind", "ordered_by_mistake"]}},
        "required": ["order_id", "reason"], "additionalProperties": False},
    "errors": {"order_not_found": "unknown order id", "not_cancellable": "only pending orders can be cancelled"},
    "code": ("def cancel_order(state, order_id, reason):\n"
             "    order = state[\"orders\"].get(order_id)\n"
             "    if order is None:\n"
             "        raise ToolFailure(\"order_not_found\", f\"no order {order_id}\")\n"
             "    if order[\"status\"] != \"pending\":\n"
             "        raise ToolFailure(\"not_cancellable\", f\"order {order_id} is {order['status']}\")\n"
             "    order[\"status\"] = \"cancelled\"\n"
             "    order[\"cancel_reason\"] = reason\n"
             "    return {\"order_id\": order_id, \"status\": \"cancelled\"}\n"),
}

TOOL_RULES = """Rules:
- "code" defines `def {name}(state, ...)` with one keyword argument per parameter (optional ones get defaults).
  `state` is the domain's JSON dict shown above: read it, and for a write tool change it in place.
  Return a small JSON-serialisable dict.
- Standard library only. `ToolFailure(code, message)` is predefined (do not import it): raise it for expected
  problems (unknown id, wrong status, not enough stock, ...) and declare every code you raise in "errors".
- "parameters" is a JSON Schema: {{"type": "object", "properties": {{...}}, "required": [...],
  "additionalProperties": false}}. Put example ids in descriptions in double quotes, like "O-1001".
- A "read" tool must not change the state; a "write" tool changes it."""


def _task(kind: str) -> str:
    return f"### task: {kind}\n"


def _excerpt(obj: Any, limit: int = STATE_EXCERPT_CHARS) -> str:
    """A short JSON view of a state: each table cut to its first two rows."""

    def cut(v: Any, depth: int) -> Any:
        if isinstance(v, dict):
            items = list(v.items())
            keep = items if depth == 0 else items[:2]
            out = {str(k): cut(x, depth + 1) for k, x in keep}
            if len(items) > len(keep):
                out["..."] = f"{len(items) - len(keep)} more"
            return out
        if isinstance(v, list):
            return [cut(x, depth + 1) for x in v[:2]] + ([f"... {len(v) - 2} more"] if len(v) > 2 else [])
        return v

    text = json.dumps(cut(obj, 0), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _domain_header(name: str, category: str, description: str, state: Any, policy: str = "") -> str:
    out = f"Domain: {name} (category {category}): {description}\n"
    if state is not None:
        out += f"State excerpt (JSON): {_excerpt(state)}\n"
    if policy:
        out += f"Policy: {policy[:600]}\n"
    return out


# ====================================================================== checks
def _non_stdlib(tree: ast.AST) -> list[str]:
    bad: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""] if node.level == 0 else ["." * node.level]
        else:
            continue
        bad += [m for m in mods if m.split(".")[0] not in sys.stdlib_module_names]
    return bad


def _top_names(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def _source_defs(source: str) -> set[str]:
    try:
        return _top_names(ast.parse(source))
    except SyntaxError:
        return set()


def _clean_code(code: str) -> str:
    code = code.strip("\n")
    fence = re.match(r"^\s*```[a-zA-Z]*\n(.*?)\n?```\s*$", code, re.S)
    if fence:
        code = fence.group(1)
    return strip_local_imports(textwrap.dedent(code)).strip("\n") + "\n"


def check_seed_code(code: Any) -> tuple[str | None, str]:
    """(problem or None, cleaned source) of a `seed(rng)` module written by the LLM; nothing is executed."""
    if not isinstance(code, str) or not code.strip():
        return "the seed code is missing or not a string", ""
    src = _clean_code(code)
    try:
        tree = ast.parse(src)
        compile(tree, "<seed>", "exec")
    except SyntaxError as e:
        return f"the seed code does not compile: {e.msg} (line {e.lineno})", src
    bad = _non_stdlib(tree)
    if bad:
        return f"the seed code imports non-stdlib modules: {', '.join(sorted(set(bad)))}", src
    if not any(isinstance(n, ast.FunctionDef) and n.name == "seed" for n in tree.body):
        return "the seed code must define a top-level function `seed(rng)` returning the state dict", src
    return None, src


def wrap_implementation(name: str, code: str) -> str:
    """Put a tool's code in a factory so that its helpers stay private to it in a shared bundle."""
    body = textwrap.indent(code.rstrip("\n"), "    ")
    return (f"def {FACTORY_PREFIX}{name}():\n{body}\n    return {name}\n\n\n"
            f"{name} = {FACTORY_PREFIX}{name}()\n")


def _coerce_errors(v: Any) -> dict[str, str] | str:
    if v is None:
        return {}
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return '"errors" must be an object mapping error code -> meaning'
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return {x: x.replace("_", " ") for x in v}
    if isinstance(v, dict):
        return {str(k): (x if isinstance(x, str) else json.dumps(x)) for k, x in v.items()}
    return '"errors" must be an object mapping error code -> meaning'


def build_tool(raw: Any, *, domain: str, category: str, expect_name: str | None = None,
               reserved: Iterable[str] = ()) -> ToolSpec | str:
    """A ToolSpec from an LLM answer, or why not (a reason the LLM can act on). Nothing is executed."""
    if not isinstance(raw, dict):
        return f"the answer must be a JSON object with the tool's fields, got {type(raw).__name__}"
    name = raw.get("name", expect_name)
    if expect_name is not None and name != expect_name:
        name = expect_name  # the outline fixed the name; a repair may not rename the tool
    if not isinstance(name, str) or not NAME_RE.match(name) or name.startswith("_"):
        return f"tool name {name!r} must be a snake_case identifier (letters, digits, underscores)"
    if name in set(reserved):
        return f"the name {name!r} is already defined in the domain's source; pick another tool name"
    desc = raw.get("description")
    if not isinstance(desc, str) or not desc.strip():
        return '"description" must be a non-empty string'
    effect = raw.get("effect", "read")
    effect = effect.strip().lower() if isinstance(effect, str) else effect
    if effect not in ("read", "write"):
        return f'"effect" must be "read" or "write", got {effect!r}'
    params = raw.get("parameters", {"type": "object", "properties": {}})
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return '"parameters" must be a JSON Schema object, got a string that is not JSON'
    if not isinstance(params, dict):
        return f'"parameters" must be a JSON Schema object, got {type(params).__name__}'
    if "type" not in params and isinstance(params.get("properties"), dict):
        params = {"type": "object", **params}
    errors = _coerce_errors(raw.get("errors"))
    if isinstance(errors, str):
        return errors
    returns = raw.get("returns")
    if returns is not None and not isinstance(returns, dict):
        returns = None
    code = raw.get("code")
    if not isinstance(code, str) or not code.strip():
        return '"code" must be a string of Python source defining the tool function'
    src = _clean_code(code)
    try:
        tree = ast.parse(src)
        compile(tree, f"<tool {name}>", "exec")
    except SyntaxError as e:
        return f"implementation does not compile: {e.msg} (line {e.lineno})"
    bad = _non_stdlib(tree)
    if bad:
        return f"implementation imports non-stdlib modules: {', '.join(sorted(set(bad)))}"
    if name not in _top_names(tree):
        fns = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        return (f"the code must define a top-level function named {name!r} (it defines "
                f"{', '.join(fns) if fns else 'no function'})")
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if fn is not None and not (fn.args.args or fn.args.posonlyargs):
        return f"{name} must take the state as its first argument: def {name}(state, ...)"
    try:
        return ToolSpec(name=name, description=desc.strip(), parameters=params, returns=returns, errors=errors,
                        effect=effect, category=category, domain=domain, provenance="llm", function=name,
                        implementation=wrap_implementation(name, src))
    except ValidationError as e:
        first = e.errors()[0]
        return f"invalid tool spec: {first['msg']}"[:400]
    except SpecError as e:
        return str(e)[:400]


def probe_tool(domain: str, category: str) -> ToolSpec:
    """A tool that checks a new domain's seed in the sandbox: a deterministic, JSON, bounded dict."""
    name = f"{PROBE_PREFIX}{domain}"[:64]
    code = (
        f"def {name}(state):\n"
        "    import json as _j, random as _r\n"
        "    if not isinstance(state, dict):\n"
        "        raise ValueError('seed(rng) must return a dict, got %s' % type(state).__name__)\n"
        "    again = _j.dumps(seed(_r.Random(SEED)), sort_keys=True, default=str)\n"
        "    if again != _j.dumps(state, sort_keys=True, default=str):\n"
        "        raise ValueError('seed(rng) is not deterministic: use only rng for randomness')\n"
        f"    if len(again) > {MAX_STATE_BYTES}:\n"
        f"        raise ValueError('the seeded state is %d bytes; keep it under {MAX_STATE_BYTES}' % len(again))\n"
        "    return {'tables': sorted(str(k) for k in state)}\n"
    )
    return ToolSpec(name=name, description="check the seeded state", category=category, domain=domain,
                    provenance="llm", function=name, implementation=code)


def _snake(text: Any) -> str:
    s = re.sub(r"[^a-z0-9]+", "_", str(text).strip().lower()).strip("_")
    return re.sub(r"_+", "_", s)


# ====================================================================== the evolver
@dataclass
class _Candidate:
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
class _DomainWork:
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
            {"role": "user", "content": _task("repair") + f"That answer was rejected: {reason}\n"
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
        prompt = (_task("propose_domains") + f"Category: {category.name}: {category.description}\n"
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
            name = _snake(item.get("name", ""))
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
    async def build_domain(self, plan: Mapping[str, str], category: str) -> _DomainWork | None:
        name = plan["name"]
        prompt = (_task("seed_data") + _domain_header(name, category, plan["description"], None)
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
        return None, _DomainWork(domain=domain, state=state, new=True)

    # ------------------------------------------------------------ stage 2: tools
    def _existing_tools_text(self, work: _DomainWork) -> str:
        tools = list(work.domain.tools) + work.accepted
        if not tools:
            return "(none yet)"
        return "; ".join(f"{t.name} ({t.effect}): {t.description.strip().splitlines()[0][:100]}" for t in tools)

    async def outline(self, work: _DomainWork, n: int) -> list[dict[str, str]]:
        d = work.domain
        prompt = (_task("tool_outline") + _domain_header(d.name, d.category, d.description, work.state, d.policy)
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
        out, reserved = [], _source_defs(d.source)
        for item in items:
            self.stats.tools_proposed += 1
            if not isinstance(item, dict):
                self._reject(name="?", domain=d.name, category=d.category, stage="generation",
                             reason=f"an outline entry must be an object, got {type(item).__name__}", tool=item)
                continue
            name = _snake(item.get("name", ""))
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

    def _tool_messages(self, work: _DomainWork, item: Mapping[str, str]) -> list[dict[str, Any]]:
        d = work.domain
        helpers = _source_functions(d.source)
        prompt = (_task("tool_code") + _domain_header(d.name, d.category, d.description, work.state, d.policy)
                  + (f"Functions of the domain's source you may call: {', '.join(helpers)}\n" if helpers else "")
                  + f"Other tools of the domain: {self._existing_tools_text(work)}\n"
                  + f"Implement the tool `{item['name']}` ({item['effect']}): {item['description']}\n"
                  + TOOL_RULES.format(name=item["name"]) + "\n"
                  + f"Example answer (another domain): {json.dumps(TOOL_EXAMPLE)}\n"
                  'Answer: {"name", "description", "effect", "parameters", "errors", "code"} as above.')
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]

    async def _generate(self, c: _Candidate, work: _DomainWork) -> None:
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
                              reserved=_source_defs(work.domain.source))
        except Exception as e:  # whatever a strange answer provokes in the spec checks
            spec = f"the tool spec could not be checked: {type(e).__name__}: {e}"[:400]
        if isinstance(spec, str):
            c.reason, c.stage = spec, "spec"
            return
        c.spec, c.reason = spec, None

    def _duplicate_of(self, spec: ToolSpec) -> str | None:
        other = self._keys.get(dedup_key(spec))
        return other if other is not None and other != spec.name else None

    async def grow_domain(self, work: _DomainWork, n: int) -> None:
        """Outline n tools for a domain, implement, validate and repair them; accepted ones go in work.accepted."""
        d = work.domain
        items = await self.outline(work, n)
        cands = [_Candidate(name=i["name"], domain=d.name, category=d.category, messages=self._tool_messages(work, i))
                 for i in items]
        pending = list(cands)
        for round_ in range(self.repairs + 1):
            if not pending:
                break
            async with anyio.create_task_group() as tg:
                for c in pending:
                    tg.start_soon(self._generate, c, work)
            ready: list[_Candidate] = []
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

    async def _validate(self, specs: Sequence[ToolSpec], work: _DomainWork) -> ValidationReport:
        try:
            return await self.validator.validate(list(specs), None, domains={work.domain.name: work.domain})
        except Exception as e:  # a validator/sandbox problem: nothing it could not check is accepted
            from toolzoo.validate import ToolCheck

            return ValidationReport(results=[ToolCheck(name=s.name, domain=s.domain, ok=False, stage="load",
                                                       reason=f"validation failed: {type(e).__name__}: {e}"[:500])
                                             for s in specs])

    def _accept(self, c: _Candidate, work: _DomainWork) -> None:
        assert c.spec is not None
        work.accepted.append(c.spec)
        self._keys[dedup_key(c.spec)] = c.spec.name
        self.stats.tools_accepted += 1
        if c.rounds > 1:
            self.stats.accepted_after_repair += 1
        self._say(f"accepted {c.domain}.{c.name}" + (f" after {c.rounds - 1} repair(s)" if c.rounds > 1 else ""))

    # ------------------------------------------------------------- final check
    async def _final_check(self, work: _DomainWork) -> None:
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
                cats.append(c if isinstance(c, Category) else known.get(c, Category(name=_snake(c) or "unknown")))
        self.stats.categories = len(cats)
        results: list[_DomainWork] = []

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
                work = _DomainWork(domain=d, state=state, new=False)
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


# ====================================================================== ToolGenerator
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
        self._issued: dict[str, _Candidate] = {}
        self._repair: list[_Candidate] = []

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

    async def _propose_async(self, zoo: Zoo, todo: list[Domain], repairs: list[_Candidate]) -> list[ToolSpec]:
        from synth.llm import LLMClient

        out: list[ToolSpec] = []
        async with LLMClient(self.config) as client:
            ev = LLMEvolver(client, _NoValidator(), repairs=self.repairs, max_tokens=self.max_tokens,  # type: ignore[arg-type]
                            temperature=self.temperature)
            ev._names = {t.name: t.domain for t in zoo.tools}
            ev._names.update({n: c.domain for n, c in self._issued.items()})
            ev._keys = {dedup_key(t): t.name for t in zoo.tools}
            domains = {d.name: d for d in zoo.domains}

            async def host_checked(c: _Candidate, work: _DomainWork) -> None:
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

            cands: list[tuple[_Candidate, _DomainWork]] = []
            for c in repairs:
                if c.domain in domains:
                    cands.append((c, _DomainWork(domain=domains[c.domain], state=self.states.get(c.domain), new=False)))
            for d in todo:
                self._done.add(d.name)
                work = _DomainWork(domain=d, state=self.states.get(d.name), new=False)
                for item in await ev.outline(work, self.tools_per_domain):
                    cands.append((_Candidate(name=item["name"], domain=d.name, category=d.category,
                                             messages=ev._tool_messages(work, item)), work))
            async with anyio.create_task_group() as tg:
                for c, work in cands:
                    tg.start_soon(host_checked, c, work)
            self.rejected += ev.rejected
        return sorted(out, key=lambda t: (t.domain, t.name))


class _NoValidator:
    """LLMGenerator leaves validation to `synthesize`."""


# ====================================================================== CLI
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
    cats = [c.strip() for c in categories.split(",") if c.strip()] if categories else None
    ext = [d.strip() for d in extend.split(",") if d.strip()] if extend else []
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
    if stats.llm_calls and stats.llm_errors == stats.llm_calls:
        first = next((r.reason for r in rejected), "")
        err.print(f"no LLM call got an answer (is {base_url} serving {model}?): {first[:300]}",
                  style="red", highlight=False, markup=False)
        return 1
    return 0
