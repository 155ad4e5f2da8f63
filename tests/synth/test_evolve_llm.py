"""LLM-driven hierarchical tool evolution (synth.evolve_llm).

(a) Against `FakeLLMProvider`, a scripted TEST DOUBLE of an OpenAI-compatible LLM provider (a small HTTP
    server on 127.0.0.1 in a thread): canned answers per request type, deterministic.
(b) Against the real local vLLM server with a random-init tiny model (`vllm_server` fixture, when present):
    nothing crashes, and nothing invalid is exported.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from synth.evolve_llm import LLMEvolveStats, LLMGenerator, build_tool, check_seed_code, evolve_with_llm
from toolzoo.categories import CATEGORIES
from toolzoo.domains import load_domain
from toolzoo.evolve import ToolGenerator
from toolzoo.spec import Zoo
from toolzoo.validate import Validator, validate_tools

# ============================================================ the test double's script
GARDEN_SEED = '''
def seed(rng):
    zones = {}
    for i in range(4):
        zones[f"Z-{10 + i}"] = {"name": rng.choice(["lawn", "roses", "herbs", "hedge"]),
                               "watering": False, "minutes_today": 0}
    return {"zones": zones, "today": "2025-06-01"}
'''

ZONE_ID = {"type": "string", "description": 'the zone, like "Z-10"'}


def _tool(name: str, desc: str, effect: str, props: dict, required: list, errors: dict, code: str) -> dict:
    return {"name": name, "description": desc, "effect": effect,
            "parameters": {"type": "object", "properties": props, "required": required,
                           "additionalProperties": False},
            "errors": errors, "code": code}


LIST_ZONES = _tool("list_zones", "List the irrigation zones with their watering status.", "read", {}, [], {},
                   "def list_zones(state):\n"
                   "    return {'zones': [{'zone_id': k, **v} for k, v in sorted(state['zones'].items())]}\n")

START_OK_CODE = '''import json

def _zone(state, zone_id):
    zone = state["zones"].get(zone_id)
    if zone is None:
        raise ToolFailure("zone_not_found", f"no zone {zone_id}")
    return zone

def start_watering(state, zone_id, minutes):
    zone = _zone(state, zone_id)
    if zone["watering"]:
        raise ToolFailure("already_watering", f"zone {zone_id} is already watering")
    zone["watering"] = True
    zone["minutes_today"] += minutes
    return {"zone_id": zone_id, "watering": True, "minutes_today": zone["minutes_today"]}
'''
START_ARGS = ({"zone_id": ZONE_ID, "minutes": {"type": "integer", "minimum": 1, "maximum": 60}},
              ["zone_id", "minutes"], {"zone_not_found": "unknown zone", "already_watering": "the zone is on"})
START_OK = _tool("start_watering", "Start watering a zone for some minutes.", "write", *START_ARGS, START_OK_CODE)
START_BROKEN = _tool("start_watering", "Start watering a zone for some minutes.", "write", *START_ARGS,
                     START_OK_CODE.replace("zone = _zone(state, zone_id)", "zone = _lookup_zone(state, zone_id)"))
SET_SCHEDULE = _tool("set_schedule", "Set the daily start time of a zone.", "write",
                     {"zone_id": ZONE_ID, "time": {"type": "string", "description": 'like "06:30"'}},
                     ["zone_id", "time"], {},
                     "def set_schedule(state, zone_id, time):\n"
                     "    raise ToolFailure('bad_time', 'the controller refuses ' + time)\n")

SHOW_ORDER = {  # get_order of the seed zoo under another name: a duplicate
    "name": "show_order", "description": "Show an order: status, items, total and refunds.", "effect": "read",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    "errors": {"order_not_found": "unknown order id"},
    "code": "def show_order(state, order_id):\n    return get_order(state, order_id=order_id)\n",
}
ORDER_TOTAL = _tool("order_total_cents", "The total of an order in cents, computed from its items.", "read",
                    {"order_id": {"type": "string", "description": 'like "O-1003"'}}, ["order_id"],
                    {"order_not_found": "unknown order id"},
                    "def order_total_cents(state, order_id):\n"
                    "    order = _order(state, order_id)\n"
                    "    return {'order_id': order_id, 'total_cents': _total(order)}\n")
SHIP_EXPRESS = _tool("ship_express", "Upgrade a pending order to express shipping.", "write",
                     {"order_id": {"type": "string"}}, ["order_id"], {},
                     "import numpy\n\ndef ship_express(state, order_id):\n    return {'ok': True}\n")
WAIT_FOREVER = _tool("wait_for_warehouse", "Wait until the warehouse confirms an order.", "read",
                     {"order_id": {"type": "string"}}, ["order_id"], {},
                     "def wait_for_warehouse(state, order_id):\n    while True:\n        pass\n")

TOOLS = {t["name"]: t for t in (LIST_ZONES, START_OK, SET_SCHEDULE, SHOW_ORDER, ORDER_TOTAL, SHIP_EXPRESS,
                                WAIT_FOREVER)}
OUTLINES = {
    "garden_irrigation": ["list_zones", "start_watering", "set_schedule", "garbage_tool"],
    "retail_orders": ["get_order", "show_order", "order_total_cents", "ship_express", "wait_for_warehouse"],
}
BROKEN_ERROR = "name '_lookup_zone' is not defined"  # what the validator reports for START_BROKEN


class FakeLLMProvider:
    """TEST DOUBLE of an OpenAI-compatible LLM provider: POST /v1/chat/completions -> canned JSON.

    The request type is read from the prompt ("### task: ..."); `log` records (task, subject, repair?).
    """

    def __init__(self) -> None:
        self.log: list[tuple[str, str, bool]] = []
        self.repair_prompts: dict[str, list[str]] = {}
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                content = double.answer(body.get("messages") or [])
                out = json.dumps({
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body.get("model", "x"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeLLMProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, messages: list[dict]) -> str:
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        first, last = users[0], users[-1]
        repair = "### task: repair" in last
        task = re.search(r"### task: (\w+)", first)
        kind = task.group(1) if task else "?"
        if kind == "propose_domains":
            cat = re.search(r"Category: (\w+)", first).group(1)
            self.log.append((kind, cat, repair))
            if cat != "smart_home":
                return "Sure! Here are some great domains: a robot arm, a drone fleet..."  # garbage, not JSON
            return json.dumps({"domains": [{"name": "garden_irrigation",
                                            "description": "Irrigation zones of a smart garden.",
                                            "state": "zones: id -> {name, watering, minutes_today}; today"}]})
        domain = re.search(r"Domain: (\w+)", first).group(1)
        if kind == "seed_data":
            self.log.append((kind, domain, repair))
            return json.dumps({"code": GARDEN_SEED, "policy": "- Confirm before starting to water."})
        if kind == "tool_outline":
            self.log.append((kind, domain, repair))
            return json.dumps({"tools": [{"name": n, "description": TOOLS.get(n, {}).get("description", n),
                                          "effect": TOOLS.get(n, {}).get("effect", "read")}
                                         for n in OUTLINES[domain]]})
        if kind == "tool_code":
            name = re.search(r"Implement the tool `(\w+)`", first).group(1)
            self.log.append((kind, name, repair))
            if repair:
                self.repair_prompts.setdefault(name, []).append(last)
            if name == "garbage_tool":
                return "def garbage_tool(state): return 1  # (the model forgot the JSON)"
            if name == "start_watering":
                fixed = repair and BROKEN_ERROR in json.dumps(messages)
                return json.dumps(START_OK if fixed else START_BROKEN)
            return json.dumps(TOOLS[name])
        return "?"


# ============================================================ host-side checks (no LLM, no sandbox)
def test_build_tool_refuses_bad_answers_with_reasons():
    kw = dict(domain="d", category="c")
    assert "JSON object" in build_tool("not an object", **kw)
    assert "compile" in build_tool({**LIST_ZONES, "code": "def list_zones(state:\n"}, **kw)
    assert "non-stdlib" in build_tool({**SHIP_EXPRESS}, **kw)
    assert "named 'list_zones'" in build_tool({**LIST_ZONES, "code": "def other(state):\n    return {}\n"}, **kw)
    assert "effect" in build_tool({**LIST_ZONES, "effect": "sometimes"}, **kw)
    assert "parameters" in build_tool({**LIST_ZONES, "parameters": 7}, **kw)
    assert "invalid" in build_tool({**LIST_ZONES, "parameters": {"type": "object", "properties": 3}}, **kw)
    ok = build_tool({**LIST_ZONES, "parameters": json.dumps(LIST_ZONES["parameters"]),
                     "code": "```python\nfrom toolzoo.dsl import ToolFailure\n" + LIST_ZONES["code"] + "```"}, **kw)
    assert ok.provenance == "llm" and ok.function == "list_zones" and "toolzoo" not in ok.implementation
    assert ok.implementation.startswith("def _llm_make_list_zones():")
    assert check_seed_code("import pandas\ndef seed(rng):\n    return {}\n")[0].startswith("the seed code imports")
    assert "seed(rng)" in check_seed_code("def make(rng):\n    return {}\n")[0]
    assert check_seed_code(GARDEN_SEED)[0] is None


# ============================================================ (a) the test double
def _base_zoo() -> Zoo:
    return Zoo(categories=list(CATEGORIES), domains=[load_domain("retail_orders")]).model_copy(deep=True)


@pytest.fixture
def llm_double(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeLLMProvider() as double:
        yield double


def _run(double: FakeLLMProvider, **kw: Any):
    from synth.llm import LLMClient, LLMConfig

    stats = LLMEvolveStats()

    async def go():
        async with LLMClient(LLMConfig(base_url=double.base_url, model="scripted", max_retries=0)) as client, \
                Validator(backend="auto", sandboxes=2, call_timeout=1.0) as v:
            return await evolve_with_llm(_base_zoo(), client, validator=v, stats=stats, **kw)

    zoo, rejected = anyio.run(go)
    return zoo, rejected, stats


def test_evolution_with_the_scripted_llm_double(llm_double):
    zoo, rejected, stats = _run(llm_double, categories=["smart_home", "robot_control"], domains_per_category=1,
                                tools_per_domain=5, repairs=1, extend=["retail_orders"])
    why = {r.name: r for r in rejected}
    print("accepted:", stats.tools_accepted, "rejected:", {k: v for k, v in sorted(stats.rejected.items())})

    # a good domain with good tools is accepted and validated
    garden = zoo.domain("garden_irrigation")
    assert garden.category == "smart_home" and "seed(rng)" not in garden.policy
    assert sorted(t.name for t in garden.tools) == ["list_zones", "start_watering"]
    assert all(t.provenance == "llm" and t.function == t.name and t.implementation for t in garden.tools)
    assert garden.state_schema.get("properties", {}).get("zones")
    # a broken tool is repaired on the second round, after the validator's error went back to the LLM
    assert ("tool_code", "start_watering", True) in llm_double.log
    assert any(BROKEN_ERROR in p for p in llm_double.repair_prompts["start_watering"])
    assert stats.accepted_after_repair >= 1
    # a tool that never gets fixed is rejected with the validator's reason
    assert why["set_schedule"].stage == "validation" and "undeclared error code 'bad_time'" in why["set_schedule"].reason
    assert why["set_schedule"].rounds == 2 and why["set_schedule"].tool["name"] == "set_schedule"
    # garbage answers: rejected with a reason, no crash
    assert why["garbage_tool"].stage == "generation" and why["garbage_tool"].reason
    assert why["robot_control/*"].kind == "domain" and why["robot_control/*"].stage == "domain"
    # duplicates of seed tools: a name clash, and a same-signature same-description copy
    assert why["get_order"].stage == "duplicate" and "name clash" in why["get_order"].reason
    assert why["show_order"].stage == "duplicate" and "get_order" in why["show_order"].reason
    # stdlib only; a hanging tool is stopped by the validator's call timeout
    assert why["ship_express"].stage == "spec" and "numpy" in why["ship_express"].reason
    assert why["wait_for_warehouse"].stage == "validation" and "timeout" in why["wait_for_warehouse"].reason
    # an existing domain extended with a tool that uses the domain's own helpers
    retail = zoo.domain("retail_orders")
    assert "order_total_cents" in [t.name for t in retail.tools]
    assert len(retail.tools) == len(load_domain("retail_orders").tools) + 1
    assert stats.tools_accepted == 3 and sum(stats.rejected.values()) == len(rejected) == 7
    # nothing invalid is exported, and the rejected never are
    report = validate_tools(zoo)
    assert report.ok, [(r.name, r.reason) for r in report.failures()]
    assert not {r.name for r in rejected} & {t.name for t in zoo.tools if t.provenance == "llm"}


def test_llm_generator_follows_the_protocol(llm_double):
    from synth.llm import LLMConfig

    import random

    gen = LLMGenerator(LLMConfig(base_url=llm_double.base_url, model="scripted", max_retries=0),
                       tools_per_domain=5, repairs=0)
    assert isinstance(gen, ToolGenerator)
    zoo = _base_zoo()
    cands = list(gen.propose(zoo, random.Random(0)))
    names = sorted(c.name for c in cands)
    # host-side checks drop the name clash, the non-stdlib import; the rest go to synthesize's validator
    assert names == ["order_total_cents", "show_order", "wait_for_warehouse"]
    assert {r.name for r in gen.rejected} >= {"get_order", "ship_express"}
    assert list(gen.propose(zoo, random.Random(0))) == []


def test_cli_llm_path_with_the_double(llm_double, tmp_path):
    from tooldojo.cli import app

    out = tmp_path / "zoo"
    r = CliRunner().invoke(app, ["synth", "tools", "--base-url", llm_double.base_url, "--model", "scripted",
                                 "--categories", "smart_home", "--domains-per-category", "1",
                                 "--tools-per-domain", "4", "--repairs", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    zoo = Zoo.load(out)
    assert sorted(t.name for t in zoo.domain("garden_irrigation").tools) == ["list_zones", "start_watering"]
    rejected = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    assert {x["name"] for x in rejected} == {"set_schedule", "garbage_tool"}
    assert all(x["reason"] for x in rejected)
    assert "2 new tools pass" in r.output


def test_cli_without_offline_or_endpoint_says_what_to_pass(tmp_path):
    from tooldojo.cli import app

    r = CliRunner().invoke(app, ["synth", "tools", "--out", str(tmp_path / "z")])
    assert r.exit_code != 0
    assert "--base-url" in r.output and "--offline" in r.output


# ============================================================ (b) the real tiny vLLM model
@pytest.fixture
def vllm(vllm_server):  # a parameter, not getfixturevalue: tests/conftest.py groups its users by it
    return vllm_server


def test_tiny_vllm_model_nothing_crashes_nothing_invalid_exported(vllm):
    from synth.llm import LLMClient, LLMConfig

    stats = LLMEvolveStats()

    async def go():
        async with LLMClient(LLMConfig(base_url=vllm.base_url, model=vllm.model, max_tokens=48,
                                       timeout_s=60, max_retries=1)) as client, \
                Validator(backend="auto", sandboxes=2, call_timeout=1.0) as v:
            return await evolve_with_llm(_base_zoo(), client, categories=["smart_home"], domains_per_category=1,
                                         tools_per_domain=2, repairs=1, validator=v, max_tokens=48, stats=stats)

    zoo, rejected = anyio.run(go)
    print(f"tiny model: accepted {stats.tools_accepted} tools / {stats.domains_accepted} domains, "
          f"rejected {len(rejected)}: {stats.rejected}; llm calls {stats.llm_calls}, failures {stats.llm_failures}")
    assert all(r.reason for r in rejected)
    assert rejected or stats.tools_accepted  # something happened
    new = [t for t in zoo.tools if t.provenance == "llm"]
    assert len(new) == stats.tools_accepted
    report = validate_tools(zoo)
    assert report.ok, [(r.name, r.reason) for r in report.failures()]


def test_cli_unknown_category_is_refused_naming_the_known_ones(tmp_path):
    from tooldojo.cli import app

    out = tmp_path / "zoo"
    r = CliRunner().invoke(app, ["synth", "tools", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                                 "--categories", "smart_home,nosuchcat", "--out", str(out)])
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "--categories 'nosuchcat'" in lines[0] and "smart_home" in lines[0], r.output
    assert not out.exists()


def test_cli_all_llm_calls_failing_writes_nothing(tmp_path, monkeypatch):
    """An endpoint that refuses every request (400: not retried): one line, exit 1, no zoo.json."""
    from tooldojo.cli import app

    class Refuse(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({"error": {"message": "model 'm' does not exist"}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "zoo"
        r = CliRunner().invoke(app, ["synth", "tools", "--base-url",
                                     f"http://127.0.0.1:{server.server_address[1]}/v1", "--model", "m",
                                     "--categories", "smart_home", "--domains-per-category", "1",
                                     "--repairs", "0", "--out", str(out)])
    finally:
        server.shutdown()
        server.server_close()
    assert r.exit_code == 1, r.output
    errors = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no LLM call got an answer" in errors[0] and "nothing written" in errors[0], r.output
    assert not (out / "zoo.json").exists()
