"""Contracts, schema derivation, the in-sandbox validator, failure injection, bundles."""

from __future__ import annotations

import random
from typing import Annotated, Literal

import jsonschema
import pytest
from pydantic import ValidationError

from sandboxes import SandboxConfig
from toolzoo import dsl
from toolzoo.domains import load_domain
from toolzoo.introspect import parse_docstring, spec_from_function, type_schema
from toolzoo.runtime import FailureConfig, ToolRuntime, bundle
from toolzoo.spec import McpSource, SpecError, ToolSpec, Zoo
from toolzoo.testing import DomainHarness


# ------------------------------------------------------------- validator
def _random_schema(rng: random.Random, depth: int = 0) -> dict:
    kind = rng.choice(["string", "integer", "number", "boolean", "array", "object", "enum"] if depth < 2 else
                      ["string", "integer", "number", "boolean", "enum"])
    if kind == "string":
        s = {"type": "string"}
        if rng.random() < 0.4:
            s["minLength"] = rng.randint(0, 3)
        if rng.random() < 0.3:
            s["pattern"] = "^[A-Z]-\\d+$"
        return s
    if kind in ("integer", "number"):
        s = {"type": kind}
        if rng.random() < 0.5:
            s["minimum"] = rng.randint(-5, 5)
        if rng.random() < 0.5:
            s["maximum"] = rng.randint(5, 20)
        return s
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "enum":
        return {"type": "string", "enum": ["a", "b", "c"]}
    if kind == "array":
        s = {"type": "array", "items": _random_schema(rng, depth + 1)}
        if rng.random() < 0.3:
            s["maxItems"] = 2
        return s
    props = {f"p{i}": _random_schema(rng, depth + 1) for i in range(rng.randint(1, 3))}
    return {"type": "object", "properties": props, "required": [k for k in props if rng.random() < 0.5],
            "additionalProperties": rng.random() < 0.5}


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.choice(["s", "i", "f", "b", "n", "l", "d"] if depth < 2 else ["s", "i", "f", "b", "n"])
    return {
        "s": lambda: rng.choice(["", "a", "b", "X-12", "hello", "Z-9"]),
        "i": lambda: rng.randint(-10, 25),
        "f": lambda: rng.uniform(-10, 25),
        "b": lambda: rng.random() < 0.5,
        "n": lambda: None,
        "l": lambda: [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))],
        "d": lambda: {f"p{i}": _random_value(rng, depth + 1) for i in range(rng.randint(0, 3))},
    }[kind]()


def test_validator_agrees_with_jsonschema():
    rng = random.Random(0)
    checked = disagreements = 0
    for _ in range(3000):
        schema = _random_schema(rng)
        value = _random_value(rng)
        expected = jsonschema.Draft202012Validator(schema).is_valid(value)
        try:
            dsl.validate(schema, value)
            got = True
        except dsl.InvalidArguments:
            got = False
        checked += 1
        disagreements += got != expected
        assert got == expected, f"schema={schema} value={value!r}: ours={got} jsonschema={expected}"
    assert checked == 3000 and disagreements == 0


def test_validator_messages_name_the_path():
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    with pytest.raises(dsl.InvalidArguments, match=r"arguments\.items\[1\]: expected integer"):
        dsl.validate(schema, {"items": [1, "two"]})


# ---------------------------------------------------------- introspection
def test_type_schema_and_docstrings():
    assert type_schema(list[str], "x") == {"type": "array", "items": {"type": "string"}}
    assert type_schema(Literal["a", "b"], "x") == {"enum": ["a", "b"], "type": "string"}
    assert type_schema(int | None, "x") == {"type": ["integer", "null"]}
    assert type_schema(Annotated[int, {"minimum": 1}], "x") == {"type": "integer", "minimum": 1}
    with pytest.raises(SpecError, match="unsupported annotation"):
        type_schema(set[int], "x")
    desc, args = parse_docstring("Do a thing.\n\nArgs:\n    a: first\n        continued\n    b: second\n")
    assert desc == "Do a thing." and args == {"a": "first continued", "b": "second"}


def test_spec_from_function_requires_docs_and_types():
    @dsl.tool()
    def undocumented(state, x: int):
        """Does x.

        Args:
            y: wrong name
        """

    with pytest.raises(SpecError, match="not described"):
        spec_from_function(undocumented, domain="d", category="c")

    @dsl.tool(effect="write", errors={"e": "why"})
    def good(state, n: Annotated[int, {"minimum": 0}], mode: Literal["x", "y"] = "x") -> dict:
        """Do good.

        Args:
            n: how many
            mode: which way
        """

    spec = spec_from_function(good, domain="d", category="c")
    assert spec.effect == "write" and spec.errors == {"e": "why"}
    assert spec.parameters["required"] == ["n"] and spec.parameters["properties"]["mode"]["default"] == "x"


# ------------------------------------------------------------------ specs
def test_spec_conversions_round_trip():
    d = load_domain("retail_orders")
    for t in d.tools:
        back = ToolSpec.from_openai(t.to_openai(), function=t.function, domain=t.domain, category=t.category, effect=t.effect)
        assert back.parameters == t.parameters and back.name == t.name
        src = McpSource(command=["server"])
        via_mcp = ToolSpec.from_mcp(t.to_mcp(), src, domain=t.domain, category=t.category)
        assert via_mcp.parameters == t.parameters and via_mcp.effect == t.effect


def test_bad_specs_are_typed_errors():
    with pytest.raises((ValidationError, SpecError), match="invalid JSON Schema"):
        ToolSpec(name="t", description="d", function="t", parameters={"type": "object", "properties": {"a": {"type": "strin"}}})
    with pytest.raises(ValidationError, match="must match"):
        ToolSpec(name="bad name!", description="d", function="f")
    with pytest.raises(ValidationError, match="description"):
        ToolSpec(name="t", description="  ", function="t")
    with pytest.raises(ValidationError, match="mcp source"):
        ToolSpec(name="t", description="d", provenance="mcp")
    d = load_domain("retail_orders")
    clash = Zoo(domains=[d], external=[d.tools[0].model_copy(update={"domain": "elsewhere"})])
    with pytest.raises(SpecError, match="name clash"):
        clash.check_names()
    with pytest.raises(SpecError, match="no zoo at"):
        Zoo.load("/nonexistent")


# ------------------------------------------------------- sandbox runtime
def test_implementation_that_raises_is_internal_error_and_state_is_kept():
    d = load_domain("retail_orders")
    broken = ToolSpec(name="explode", description="always fails", function="explode", domain=d.name, category=d.category,
                      provenance="evolved", implementation="def explode(state):\n    state['orders'].clear()\n    raise KeyError('boom')\n")
    with DomainHarness(d, tools=[*d.tools, broken]) as h:
        before = h.state()
        r = h.err("explode", {}, kind="internal_error")
        assert "KeyError" in r.message
        assert h.state() == before


def test_seeded_failure_injection_is_reproducible():
    d = load_domain("retail_orders")

    def run(seed):
        kinds = []
        with DomainHarness(d, failures=FailureConfig(rate=0.5, seed=seed)) as h:
            for _ in range(30):
                r = h.call("get_order", {"order_id": "O-1000"})
                kinds.append("ok" if r.ok else r.code)
        return kinds

    a, b, c = run(1), run(1), run(2)
    assert a == b and a != c
    assert "rate_limited" in a and "ok" in a
    assert "timeout" not in a  # timeouts are declared for write tools only


def test_partial_failures_truncate_lists():
    d = load_domain("retail_orders")
    with DomainHarness(d, failures=FailureConfig(rate=1.0, seed=0)) as h:
        seen = set()
        orders = h.state()["orders"].values()
        busiest = max({o["customer_id"] for o in orders}, key=lambda c: sum(o["customer_id"] == c for o in orders))
        for _ in range(20):
            r = h.call("list_customer_orders", {"customer_id": busiest})
            seen.add("partial" if r.ok and r.output.get("partial") else (r.code if not r.ok else "ok"))
        assert "partial" in seen and "ok" not in seen


def test_seed_changes_the_world():
    d = load_domain("retail_orders")
    with DomainHarness(d, seed=1) as a, DomainHarness(d, seed=2) as b, DomainHarness(d, seed=1) as c:
        assert a.state() == c.state() != b.state()


async def test_tool_runtime_routes_and_exposes_openai_tools():
    from sandboxes import open_sandbox

    d = load_domain("retail_orders")
    async with await open_sandbox(SandboxConfig()) as sb:
        rt = ToolRuntime(sb, d, seed=3)
        assert {t["function"]["name"] for t in rt.openai_tools()} == {t.name for t in d.tools}
        r = await rt.call("get_order", {"order_id": "O-1000"})
        assert r.ok and r.output["order_id"] == "O-1000"
        ext = ToolSpec(name="remote_tool", description="elsewhere", provenance="mcp", mcp=McpSource(url="http://127.0.0.1:1/mcp"))
        rt2 = ToolRuntime(sb, d, external=[ext])
        r = await rt2.call("remote_tool", {})
        assert not r.ok and "no MCP client" in r.message


def test_bundle_is_stdlib_only():
    src = bundle(load_domain("retail_orders")).source
    imports = {line.split()[1].split(".")[0] for line in src.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"json", "random", "re", "typing", "__future__", "math", "datetime", "copy", "collections",
                       "itertools", "string", "hashlib", "fnmatch", "posixpath", "decimal", "statistics", "functools"}
