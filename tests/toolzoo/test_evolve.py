"""Offline evolution: every operator makes a tool that validates and behaves; determinism; dedup; the CLI."""

from __future__ import annotations

import json
import random
import time

import pytest
from typer.testing import CliRunner

from toolzoo.domains import load_domain
from toolzoo.evolve import (
    OPERATORS,
    Deduper,
    OfflineGenerator,
    ToolGenerator,
    _evo_h_cents_to_decimal,
    _evo_h_decimal_to_cents,
    dedup_key,
    evolve,
    normalise_description,
)
from toolzoo.runtime import bundle
from toolzoo.spec import ToolSpec, Zoo
from toolzoo.testing import DomainHarness
from toolzoo.validate import validate_tools


def retail_zoo() -> Zoo:
    return Zoo(domains=[load_domain("retail_orders")]).model_copy(deep=True)


@pytest.fixture(scope="module")
def cands() -> dict[str, ToolSpec]:
    """Every first-generation candidate the offline generator makes for retail_orders."""
    zoo = retail_zoo()
    gen = OfflineGenerator()
    gen.observe(validate_tools(zoo))
    return {c.name: c for c in gen.propose(zoo, random.Random(0))}


@pytest.fixture(scope="module")
def h(cands):
    with DomainHarness("retail_orders", tools=load_domain("retail_orders").tools + list(cands.values())) as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(request):
    if "h" in request.fixturenames:
        request.getfixturevalue("h").reset()


def _status(h, status):
    return next(oid for oid, o in sorted(h.state()["orders"].items()) if o["status"] == status)


def test_generator_protocol_and_every_operator(cands):
    assert isinstance(OfflineGenerator(), ToolGenerator)
    assert {c.operator for c in cands.values()} == set(OPERATORS)
    for c in cands.values():
        assert c.provenance == "evolved" and c.parents and c.implementation and c.function.startswith("_evo_")
        assert c.function in c.implementation
        for p in c.parents:  # calls its parents' functions by name
            assert load_domain("retail_orders").tool(p).function in c.implementation


def test_every_candidate_passes_validation(cands):
    report = validate_tools(list(cands.values()), zoo=retail_zoo())
    assert report.ok, [(r.name, r.reason) for r in report.failures()]
    assert len(report.results) == len(cands) >= 40


def test_dry_run_leaves_state_unchanged(h):
    oid = _status(h, "pending")
    before = h.state()
    preview = h.ok("cancel_order_with_dry_run", {"order_id": oid, "reason": "changed_mind", "dry_run": True})
    assert preview["dry_run"] is True and preview["would_return"]["status"] == "cancelled"
    assert h.state() == before
    h.err("cancel_order_with_dry_run", {"order_id": _status(h, "shipped"), "reason": "changed_mind", "dry_run": True},
          code="not_cancellable")
    assert h.state() == before
    assert h.ok("cancel_order_with_dry_run", {"order_id": oid, "reason": "changed_mind"})["status"] == "cancelled"
    assert h.state()["orders"][oid]["status"] == "cancelled"


def test_paging_and_projection(h):
    cid = h.state()["orders"]["O-1000"]["customer_id"]
    full = h.ok("list_customer_orders", {"customer_id": cid})["orders"]
    page = h.ok("list_customer_orders_paged", {"customer_id": cid, "limit": 1, "offset": 1})
    assert page["orders"] == full[1:2] and page["total_count"] == len(full)
    assert h.ok("list_customer_orders_top", {"customer_id": cid, "limit": 1})["orders"] == full[:1]
    got = h.ok("get_order_fields", {"order_id": "O-1000", "fields": ["status", "total_cents"]})
    assert set(got) == {"status", "total_cents"}
    h.err("get_order_fields", {"order_id": "O-1000", "fields": ["nope"]}, kind="invalid_arguments")
    srt = h.ok("list_customer_orders_sorted", {"customer_id": cid, "sort_by": "total_cents", "descending": True})
    assert [o["total_cents"] for o in srt["orders"]] == sorted((o["total_cents"] for o in full), reverse=True)


def test_representation_round_trips(h):
    for v in (-5, 0, 7, 99, 100, 1999, 123456):
        assert _evo_h_decimal_to_cents(_evo_h_cents_to_decimal({"x_cents": v})["x"]) == v
    parent = h.ok("get_order", {"order_id": "O-1001"})
    child = h.ok("get_order_decimal", {"order_id": "O-1001"})
    assert _evo_h_decimal_to_cents(child["total"]) == parent["total_cents"]
    assert [_evo_h_decimal_to_cents(i["unit_price"]) for i in child["items"]] == [i["unit_price_cents"] for i in parent["items"]]
    eur = h.ok("get_order_in_currency", {"order_id": "O-1001", "currency": "EUR"})
    assert eur["currency"] == "EUR" and eur["total_amount"] == round(parent["total_cents"] * 0.92 / 100, 2)
    # list <-> comma-separated string: the same call, the same effect
    oid = _status(h, "delivered")
    skus = [i["sku"] for i in h.state()["orders"][oid]["items"]]
    via_list = h.ok("return_items", {"order_id": oid, "skus": skus})
    after_list = h.state()
    h.reset()
    assert h.ok("return_items_csv", {"order_id": oid, "skus": ",".join(skus)}) == via_list
    assert h.state() == after_list


def test_specialise_and_constraints(h):
    cid = h.state()["orders"]["O-1000"]["customer_id"]
    assert (h.ok("list_pending_customer_orders", {"customer_id": cid})
            == h.ok("list_customer_orders", {"customer_id": cid, "status": "pending"}))
    h.err("list_pending_customer_orders", {"customer_id": cid, "status": "shipped"}, kind="invalid_arguments")
    h.err("get_order_order_id_format", {"order_id": "1000"}, kind="invalid_arguments")
    h.err("get_order", {"order_id": "1000"}, code="order_not_found")  # the parent only finds out later
    assert h.ok("get_order_order_id_format", {"order_id": "O-1000"}) == h.ok("get_order", {"order_id": "O-1000"})
    h.err("list_customer_orders_shipped_or_delivered", {"customer_id": cid, "status": "pending"}, kind="invalid_arguments")


def test_compose_equals_calling_both(h):
    email = "user101@example.com"
    got = h.ok("find_customer_by_email_then_list_customer_orders", {"email": email, "status": "any"})
    first = h.ok("find_customer_by_email", {"email": email})
    assert got == {"first": first, "then": h.ok("list_customer_orders", {"customer_id": first["customer_id"]})}
    h.err("find_customer_by_email_then_list_customer_orders", {"email": "nobody@example.com"}, code="customer_not_found")


def _synth(n: int, seed: int):
    return evolve(n, seed=seed, zoo=retail_zoo(), sandboxes=2)


def test_chains_are_self_contained_and_deterministic():
    a = _synth(140, 0)
    assert a.stats.passing == 140 and not a.stats.exhausted
    tools = {t.name: t for t in a.zoo.tools}
    gen = OfflineGenerator()
    depth = {t.name: gen.lineage(t, a.zoo).depth for t in a.zoo.tools}
    assert max(depth.values()) <= 3 and max(depth.values()) >= 2
    deepest = max(tools.values(), key=lambda t: (depth[t.name], t.name))
    assert all(p in tools for t in tools.values() for p in t.parents)
    with DomainHarness("retail_orders", tools=[deepest]) as h:  # runs without its ancestors in the bundle
        assert h.tool_names == [deepest.name]
    keys = [dedup_key(t) for t in a.zoo.tools]
    assert len(set(keys)) == len(keys) == len(tools)
    b = _synth(140, 0)
    assert a.zoo.model_dump_json() == b.zoo.model_dump_json()
    c = _synth(140, 1)
    assert c.zoo.model_dump_json() != a.zoo.model_dump_json()


def test_dedup_rejects_duplicates(cands):
    t = cands["list_pending_customer_orders"]
    d = Deduper([t])
    renamed = t.model_copy(update={"name": "pending_orders_of_customer"})
    assert d.duplicate_of(renamed) == t.name
    noisy = t.model_copy(update={"name": "x2", "description": "  " + t.description.upper().replace(".", " !\n")})
    assert d.duplicate_of(noisy) == t.name
    assert normalise_description("Keep at most 10 items.") == normalise_description("keep at most 25 ITEMS")
    assert d.duplicate_of(cands["list_shipped_customer_orders"]) is None
    assert d.duplicate_of(cands["list_customer_orders_paged"]) is None


# ------------------------------------------------------------------ CLI
def test_cli_synth_then_validate(tmp_path):
    from tooldojo.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["synth", "tools", "--n", "10", "--out", str(tmp_path / "nope")])
    assert r.exit_code == 1 and "LLM endpoint" in r.output and "--base-url" in r.output
    out = tmp_path / "zoo"
    r = runner.invoke(app, ["synth", "tools", "--offline", "--n", "300", "--out", str(out), "--seed", "0"])
    assert r.exit_code == 0, r.output
    zoo = Zoo.load(out)
    count = len(zoo.tools)  # 300, unless the seed zoo alone is larger
    assert count >= 300 and len({t.name for t in zoo.tools}) == count
    assert any(t.provenance == "evolved" for t in zoo.tools)
    assert (out / "rejected.jsonl").exists()
    r = runner.invoke(app, ["zoo", "validate", str(out), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert len(report["results"]) == count and all(x["ok"] for x in report["results"])

    raw = json.loads((out / "zoo.json").read_text())
    dom = next(d for d in raw["domains"] if d["name"] == "retail_orders")
    dom["tools"].append({
        "name": "get_order_broken", "description": "Show an order, badly.", "domain": "retail_orders",
        "category": dom["category"], "provenance": "evolved", "parents": ["get_order"], "operator": "add_parameter",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"],
                       "additionalProperties": False},
        "function": "_evo_get_order_broken",
        "implementation": "def _evo_get_order_broken(state, **args):\n    return 1 / 0\n",
    })
    (out / "zoo.json").write_text(json.dumps(raw))
    r = runner.invoke(app, ["zoo", "validate", str(out)])
    assert r.exit_code == 1
    assert "get_order_broken" in r.output and "internal_error" in r.output and "ZeroDivisionError" in r.output
    assert f"{count}/{count + 1} tools pass" in r.output


@pytest.mark.slow
def test_full_2000_run(tmp_path):
    t0 = time.perf_counter()
    result = evolve(2000, seed=0)
    took = time.perf_counter() - t0
    s = result.stats
    assert s.passing == 2000 and len(result.zoo.tools) == 2000, s
    assert len({dedup_key(t) for t in result.zoo.tools}) == 2000
    assert set(s.by_operator) == set(OPERATORS)
    t1 = time.perf_counter()
    report = validate_tools(result.zoo)
    assert report.ok and len(report.results) == 2000, [(r.name, r.reason) for r in report.failures()[:5]]
    print(f"\nsynth 2000: {took:.1f}s (generate {s.proposed / s.generate_s:.0f} tools/s over {s.generate_s:.1f}s, "
          f"validate {s.validated / s.validate_s:.0f} tools/s over {s.validate_s:.1f}s); "
          f"re-validate 2000: {time.perf_counter() - t1:.1f}s")
    for d in result.zoo.domains:  # every bundle of a whole domain still loads
        bundle(d, tools=d.tools)
