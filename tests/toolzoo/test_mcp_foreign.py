"""Issue 22: foreign MCP servers (names with dots and dashes, stray stdout bytes, banners, restarts) and
`dojo zoo call`, against a real SDK-built server (mcp_servers/foreign_server.py) over stdio and HTTP."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from sandboxes import ToolError
from toolzoo.domains import load_domain
from toolzoo.mcp import McpClient, McpConnectionError, McpSessionLost, import_mcp_tools
from toolzoo.mcp_names import model_names
from toolzoo.runtime import ToolRuntime
from toolzoo.spec import MODEL_NAME_RE, McpSource, Zoo

HERE = Path(__file__).parent
FOREIGN = HERE / "mcp_servers" / "foreign_server.py"
DOJO = [sys.executable, "-c", "from tooldojo.cli import main; main()"]
LONG = "reports." + "quarterly-" * 7 + "summary"

pytestmark = pytest.mark.timeout(120)


def foreign(*flags: str) -> McpSource:
    return McpSource(command=[sys.executable, str(FOREIGN), *flags])


def dojo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DOJO, *args], capture_output=True, text=True, timeout=90)


# ------------------------------------------------------------------ item 1: names


def test_model_names_are_valid_stable_and_collision_free():
    names = ["kv.set", "kv_set", "kv.get", "get-weather", "inv.add-items", LONG, "a b", "a?b", "", "dup", "dup"]
    out, skipped = model_names(names)
    assert skipped == {"": "the server gave it no name", "dup": "the server lists this name more than once"}
    assert out["get-weather"] == "get-weather" and out["kv_set"] == "kv_set"  # valid names are never changed
    assert out["kv.get"] == "kv_get" and out["inv.add-items"] == "inv_add-items"
    assert out["kv.set"].startswith("kv_set_") and len(out["kv.set"]) == len("kv_set_") + 8
    assert len(out[LONG]) == 64 and out[LONG].startswith("reports_quarterly-")
    assert out["a b"] != out["a?b"] and {out["a b"][:4], out["a?b"][:4]} == {"a_b_"}
    assert all(MODEL_NAME_RE.match(m) for m in out.values()) and len(set(out.values())) == len(out)
    assert model_names(list(reversed(names)))[0] == out  # order does not matter: a re-import gives the same names


async def test_foreign_names_import_every_tool_and_call_by_the_servers_name(sb):
    with anyio.fail_after(60):
        imported = await import_mcp_tools(foreign())
    assert [(s.name, s.reason.split(":")[0]) for s in imported.skipped] == [("broken", "tool broken parameters")]
    assert "invalid JSON Schema" in imported.skipped[0].reason and "\n" not in imported.skipped[0].reason
    by_server = {t.mcp_name: t for t in imported.tools}
    assert set(by_server) == {"kv.set", "kv.get", "kv_set", "inv.add-items", "get-weather", LONG, "garble"}
    assert by_server["get-weather"].name == "get-weather" and by_server["kv_set"].name == "kv_set"
    assert by_server["kv.set"].name == model_names(["kv.set", "kv_set"])[0]["kv.set"] != "kv_set"
    assert by_server["inv.add-items"].name == "inv_add-items" and len(by_server[LONG].name) == 64
    assert by_server["kv.get"].effect == "read" and by_server["kv.set"].effect == "write"

    # the model's names drive the runtime; each call reaches the server under the server's own name
    async with McpClient() as client:
        rt = ToolRuntime(sb, load_domain("retail_orders"), external=imported.tools, mcp_call=client.call)
        with anyio.fail_after(60):
            r = await rt.call(by_server["kv.set"].name, {"key": "k", "value": "dotted"})
            assert r.ok and r.output == [{"ok": True, "tool": "kv.set"}]
            r = await rt.call("kv_set", {"key": "j", "value": "plain"})
            assert r.ok and r.output == [{"ok": True, "tool": "kv_set"}]
            r = await rt.call("kv_get", {"key": "k"})
            assert r.ok and r.output == [{"value": "dotted"}]
            r = await rt.call(by_server[LONG].name, {})
            assert r.ok and r.output[0]["tool"] == LONG
            err = await rt.call("inv_add-items", {"n": "many"})
            assert isinstance(err, ToolError) and err.name == "inv_add-items" and err.kind == "invalid_arguments"
    assert {t["function"]["name"] for t in rt.openai_tools()} >= {"kv_get", "inv_add-items", "get-weather"}


def test_cli_import_mcp_keeps_both_names_and_skips_one_bad_tool(tmp_path):
    out = tmp_path / "zoo"
    r = dojo("zoo", "import-mcp", "--command", f"{sys.executable} {FOREIGN}", "--out", str(out))
    assert r.returncode == 0, r.stderr
    skipped = [line for line in r.stderr.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 1 and skipped[0].startswith("skipped MCP tool 'broken': ") and "invalid JSON Schema" in skipped[0]
    assert "Traceback" not in r.stderr and "inv_add-items" in r.stdout
    zoo = Zoo.load(out)
    assert len(zoo.external) == 7
    saved = json.loads((out / "zoo.json").read_text())["external"]
    assert {(t["name"], t["mcp_name"]) for t in saved} >= {("kv_get", "kv.get"), ("get-weather", "get-weather"),
                                                            ("inv_add-items", "inv.add-items")}
    assert all(MODEL_NAME_RE.match(t.name) for t in zoo.external)
    zoo.check_names()


# ------------------------------------------------------------------ item 2: stray stdout bytes, banners


async def test_a_stray_stdout_byte_fails_fast_and_names_the_server(caplog):
    caplog.set_level(logging.WARNING)
    with anyio.fail_after(60):
        tools = {t.mcp_name: t for t in (await import_mcp_tools(foreign())).tools}
    # a call timeout far beyond the test's own limit: waiting it out would fail the test, not pass it
    async with McpClient(call_timeout=600) as client:
        with anyio.fail_after(60):
            assert (await client.call(tools["get-weather"], {})).ok
            with pytest.raises(McpConnectionError, match=r"foreign_server\.py.* not MCP to stdout") as first:
                await client.call(tools["garble"], {})
            assert "\\ufffd" in str(first.value)
            with pytest.raises(McpConnectionError, match=r"foreign_server\.py"):  # and every later call
                await client.call(tools["get-weather"], {})
    logged = [r for r in caplog.records if r.name == "toolzoo.mcp" and r.levelno == logging.ERROR]
    assert len(logged) == 1 and "foreign_server.py" in logged[0].getMessage()
    assert "not MCP to stdout" in logged[0].getMessage()


def test_a_banner_before_the_handshake_is_one_line_not_a_traceback(tmp_path):
    r = dojo("zoo", "import-mcp", "--command", f"{sys.executable} {FOREIGN} --banner", "--out", str(tmp_path / "z"))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "Failed to parse JSONRPC" not in r.stderr, r.stderr
    banner = [line for line in r.stderr.splitlines() if "before the handshake" in line]
    assert len(banner) == 1 and "Foreign Test MCP server v1.0 starting..." in banner[0], r.stderr
    assert len(Zoo.load(tmp_path / "z").external) == 7


# ------------------------------------------------------------------ item 9: an HTTP server restarted between calls


async def test_an_http_server_restart_is_a_typed_error_not_a_new_world(caplog):
    from test_mcp import free_port, running

    caplog.set_level(logging.WARNING)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [sys.executable, str(FOREIGN), "--http", str(port)]
    async with McpClient(call_timeout=30) as client:
        with running(argv, port):
            with anyio.fail_after(60):
                tools = {t.mcp_name: t for t in await client.list_tools(McpSource(url=url))}
                assert (await client.call(tools["kv.set"], {"key": "k", "value": "v"})).ok
                assert (await client.call(tools["kv.get"], {"key": "k"})).output == [{"value": "v"}]
        with running(argv, port):  # the same server, restarted: its store is empty
            with anyio.fail_after(60):
                with pytest.raises(McpSessionLost, match="no longer knows this client's session") as lost:
                    await client.call(tools["kv.get"], {"key": "k"})
                assert url in str(lost.value) and isinstance(lost.value, McpConnectionError)
                with pytest.raises(McpSessionLost):  # no silent fresh session on the next call either
                    await client.call(tools["kv.set"], {"key": "k", "value": "again"})
                async with McpClient(call_timeout=30) as fresh:  # a new client (a new episode) sees the new world
                    err = await fresh.call(tools["kv.get"], {"key": "k"})
                    assert err == ToolError(name="kv_get", kind="tool_failure", message="no key k")
    logged = [r.getMessage() for r in caplog.records if r.name == "toolzoo.mcp" and r.levelno == logging.ERROR]
    assert len(logged) == 1 and url in logged[0] and "no longer knows this client's session" in logged[0]


async def test_a_server_that_refuses_the_handshake_still_works_and_says_restarts_go_unseen(caplog):
    """A server speaking only the sessionless protocol refuses `initialize`: it is spoken to that way, with a warning."""
    from test_mcp import free_port, running

    caplog.set_level(logging.WARNING)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with running([sys.executable, str(FOREIGN), "--http", str(port), "--modern-only"], port):
        async with McpClient(call_timeout=30) as client:
            with anyio.fail_after(60):
                tools = {t.mcp_name: t for t in await client.list_tools(McpSource(url=url))}
                assert (await client.call(tools["kv.set"], {"key": "k", "value": "v"})).ok
                assert (await client.call(tools["kv.get"], {"key": "k"})).output == [{"value": "v"}]
    warned = [r.getMessage() for r in caplog.records if "refuses the initialize handshake" in r.getMessage()]
    assert len(warned) == 1 and url in warned[0] and "restarted server cannot be noticed" in warned[0]


# ------------------------------------------------------------------ item 17: dojo zoo call


def test_cli_zoo_call_runs_an_mcp_tool_on_its_server(tmp_path):
    out = tmp_path / "zoo"
    assert dojo("zoo", "import-mcp", "--command", f"{sys.executable} {FOREIGN}", "--out", str(out)).returncode == 0
    r = dojo("zoo", "call", str(out), "inv_add-items", "--args", '{"n": 3}')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"tool": "inv.add-items", "args": {"n": 3}}]
    r = dojo("zoo", "call", str(out), "kv.set", "--args", '{"key": "a", "value": "b"}')  # the server's name works too
    assert r.returncode == 0 and json.loads(r.stdout) == [{"ok": True, "tool": "kv.set"}], r.stderr
    r = dojo("zoo", "call", str(out), "kv_get", "--args", '{"key": "a"}')  # one call per process: a fresh server
    assert r.returncode == 1 and r.stderr.strip() == "kv_get: tool_failure: no key a", r.stderr
    r = dojo("zoo", "call", str(out), "inv_add-items", "--args", '{"n": "x"}')
    assert r.returncode == 1 and "invalid_arguments" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    for bad, says in (("[1]", "must be a JSON object"), ("{", "--args is not JSON")):
        r = dojo("zoo", "call", str(out), "kv_get", "--args", bad)
        assert r.returncode == 1 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = dojo("zoo", "call", str(out), "kv_gett")
    assert r.returncode == 1 and "no tool 'kv_gett'; did you mean kv_get" in r.stderr and "Traceback" not in r.stderr


def test_cli_zoo_call_runs_a_zoo_tool_in_a_sandbox():
    from test_mcp import require_sandbox

    require_sandbox()
    r = dojo("zoo", "call", "seed", "cancel_order", "--args", '{"order_id": "O-1003", "reason": "changed_mind"}')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "cancelled"
    r = dojo("zoo", "call", "seed", "get_order", "--args", '{"order_id": "O-9999"}')
    assert r.returncode == 1 and r.stderr.strip() == "get_order: tool_failure, order_not_found: no order O-9999"
    r = dojo("zoo", "call", "seed", "cancel_order", "--args", '{"order_id": "O-1003", "reason": "bogus"}')
    assert r.returncode == 1 and r.stderr.startswith("cancel_order: invalid_arguments"), r.stderr


@pytest.mark.slow
def test_bench_mcp_client_quick_prints_one_json_line_last():
    root = HERE.parent.parent
    r = subprocess.run([sys.executable, str(root / "bench" / "mcp_client.py"), "--quick", "--calls", "5", "--connects", "1",
                        "--timeout", "3"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["errors"] == {} and result["http_calls"] == result["baseline_http_calls"] == 5
    assert result["http_call_p50_ms"] > 0 and result["baseline_http_call_p50_ms"] > 0
    assert result["stray_byte_error_s"] is not None and result["baseline_stray_byte_outcome"] == "timeout"
