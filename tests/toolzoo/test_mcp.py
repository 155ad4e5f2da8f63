"""MCP both ways, against real MCP servers (SDK-built, spawned as processes), on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from sandboxes import ToolError, ToolResult
from toolzoo.domains import load_domain
from toolzoo.mcp import McpClient, McpConnectionError, list_mcp_tools
from toolzoo.spec import McpSource, ToolSpec, Zoo

HERE = Path(__file__).parent
SERVERS = HERE / "mcp_servers"
INVENTORY = SERVERS / "inventory_server.py"
DOJO = [sys.executable, "-c", "from tooldojo.cli import main; main()"]

pytestmark = pytest.mark.timeout(120)


def inventory_tools() -> list[dict]:
    """The inventory server's tool definitions, read from its source (no import side effects)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("inventory_server_for_tests", INVENTORY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # defines the server; serves only under __main__
    return mod.TOOLS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@contextmanager
def running(argv: list[str], port: int):
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_port(port, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def require_sandbox() -> None:
    from conftest import backend_status, require

    if not any(backend_status(b)[0] for b in ("docker", "local")):
        require("docker")  # skips, or fails where TOOLDOJO_REQUIRE_BACKENDS says it must work


# ------------------------------------------------------------------ (a) stdio import


async def test_import_stdio_preserves_schemas_and_proxies_calls():
    source = McpSource(command=[sys.executable, str(INVENTORY)])
    with anyio.fail_after(60):
        specs = await list_mcp_tools(source)
    expected = inventory_tools()
    assert [s.name for s in specs] == [t["name"] for t in expected]
    for spec, tool in zip(specs, expected, strict=True):
        assert spec.parameters == tool["inputSchema"]
        assert json.dumps(spec.parameters) == json.dumps(tool["inputSchema"])  # key order too
        assert spec.returns == tool.get("outputSchema")
        assert spec.description == tool["description"]
        assert spec.provenance == "mcp" and spec.category == "mcp"
        assert spec.domain == "inventory_test" and spec.mcp is not None
        assert spec.mcp.command == source.command and spec.mcp.server_name == "inventory_test"
        assert spec.to_mcp()["inputSchema"] == tool["inputSchema"]
    by = {s.name: s for s in specs}
    assert by["get_stock"].effect == "read" and by["add_stock"].effect == "write"

    async with McpClient() as client:
        with anyio.fail_after(60):
            r = await client.call(by["get_stock"], {"warehouse": "north"})
            assert r == ToolResult(name="get_stock", output={"warehouse": "north", "stock": {"SKU-001": 5}})
            r = await client.call(by["add_stock"], {"warehouse": "north", "items": [{"sku": "SKU-002", "qty": 2, "tags": ["cold"]}]})
            assert isinstance(r, ToolResult) and r.output["stock"]["SKU-002"] == 2
            # state persists within the session
            r = await client.call(by["get_stock"], {"warehouse": "north", "filter": {"sku_prefix": "SKU-002"}})
            assert r.output == {"warehouse": "north", "stock": {"SKU-002": 2}}
            err = await client.call(by["remove_stock"], {"warehouse": "north", "sku": "SKU-002", "qty": 3})
            assert isinstance(err, ToolError)
            assert err.kind == "tool_failure" and "only 2 of SKU-002" in err.message


async def test_proxied_calls_through_tool_runtime(sb):
    """ToolRuntime routes external tools to McpClient.call and zoo tools to the sandbox."""
    from toolzoo.runtime import ToolRuntime

    specs = await list_mcp_tools(McpSource(command=[sys.executable, str(INVENTORY)]))
    async with McpClient() as client:
        rt = ToolRuntime(sb, load_domain("retail_orders"), external=specs, mcp_call=client.call)
        with anyio.fail_after(60):
            r = await rt.call("get_stock", {"warehouse": "south"})
            assert r.ok and r.output == {"warehouse": "south", "stock": {}}
            r = await rt.call("get_order", {"order_id": "O-1003"})
            assert r.ok and r.output["order_id"] == "O-1003"
        names = {t["function"]["name"] for t in rt.openai_tools()}
        assert {"get_stock", "get_order"} <= names


async def test_concurrent_calls_and_a_dying_server():
    source = McpSource(command=[sys.executable, str(INVENTORY)])
    specs = {s.name: s for s in await list_mcp_tools(source)}
    crash = ToolSpec(name="crash_server", description="kills the server", provenance="mcp", mcp=source)
    async with McpClient(call_timeout=20) as client:
        results: list = []

        async def add(i: int) -> None:
            results.append(await client.call(specs["add_stock"], {"warehouse": "south", "items": [{"sku": "SKU-100", "qty": 1}]}))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:  # calls from many tasks share one session
                for i in range(10):
                    tg.start_soon(add, i)
            assert len(results) == 10 and all(r.ok for r in results)
            r = await client.call(specs["get_stock"], {"warehouse": "south"})
            assert r.output["stock"] == {"SKU-100": 10}
            with pytest.raises(McpConnectionError, match="closed the connection"):
                await client.call(crash, {})
            with pytest.raises(McpConnectionError):
                await client.call(specs["get_stock"], {"warehouse": "south"})


async def test_connection_failures_raise_a_sandbox_error():
    with anyio.fail_after(30):
        with pytest.raises(McpConnectionError, match="nonexistent"):
            await list_mcp_tools(McpSource(command=["/nonexistent/mcp-server"]))
        with pytest.raises(McpConnectionError, match="127.0.0.1"):
            await list_mcp_tools(McpSource(url=f"http://127.0.0.1:{free_port()}/mcp"), timeout=10)


# ------------------------------------------------------------------ (b) streamable HTTP import


async def test_import_streamable_http():
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with running([sys.executable, str(INVENTORY), "--http", str(port)], port):
        with anyio.fail_after(60):
            specs = await list_mcp_tools(McpSource(url=url))
            expected = inventory_tools()
            assert [s.parameters for s in specs] == [t["inputSchema"] for t in expected]
            assert all(s.mcp.url == url and s.domain == "inventory_test" for s in specs)
            by = {s.name: s for s in specs}
            async with McpClient() as client:
                r = await client.call(by["add_stock"], {"warehouse": "south", "items": [{"sku": "SKU-009", "qty": 4}]})
                assert r.ok
                r = await client.call(by["remove_stock"], {"warehouse": "south", "sku": "SKU-009", "qty": 1})
                assert r.ok and r.output == {"ok": True, "left": 3}
                err = await client.call(by["remove_stock"], {"warehouse": "south", "sku": "SKU-009", "qty": 99})
                assert isinstance(err, ToolError) and err.kind == "tool_failure"


# ------------------------------------------------------------------ (c) serve a domain over stdio


async def test_serve_domain_over_stdio():
    require_sandbox()
    domain = load_domain("retail_orders")
    params = StdioServerParameters(command=DOJO[0], args=[*DOJO[1:], "zoo", "serve-mcp", "retail_orders", "--stdio"],
                                   env=dict(os.environ), cwd=str(HERE.parent.parent))
    with anyio.fail_after(90):
        async with Client(params) as client:
            assert client.server_info is not None and client.server_info.name == "retail_orders"
            listed = (await client.list_tools()).tools
            wire = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed]
            want = [t.to_mcp() for t in domain.tools]
            assert [w["name"] for w in wire] == [w["name"] for w in want]
            assert [w["inputSchema"] for w in wire] == [w["inputSchema"] for w in want]
            assert [w.get("outputSchema") for w in wire] == [w.get("outputSchema") for w in want]

            r = await client.call_tool("get_order", {"order_id": "O-1003"})
            assert not r.is_error
            order = r.structured_content
            assert order["order_id"] == "O-1003" and json.loads(r.content[0].text) == order
            assert order["status"] == "pending"

            r = await client.call_tool("cancel_order", {"order_id": "O-1003", "reason": "changed_mind"})
            assert not r.is_error and r.structured_content["status"] == "cancelled"
            r = await client.call_tool("get_order", {"order_id": "O-1003"})
            assert r.structured_content["status"] == "cancelled"  # the state change persisted

            r = await client.call_tool("get_order", {"order_id": "O-9999"})
            assert r.is_error and "no order O-9999" in r.content[0].text
            assert r.structured_content["error"]["code"] == "order_not_found"
            r = await client.call_tool("cancel_order", {"order_id": "O-1003", "reason": "bogus"})
            assert r.is_error and r.structured_content["error"]["kind"] == "invalid_arguments"


# ------------------------------------------------------------------ (d) serve over HTTP with a token


def _post(url: str, headers: dict[str, str]) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


async def test_serve_domain_over_http_requires_the_token():
    require_sandbox()
    port = free_port()
    token = "s3cret-token-for-tests"
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [*DOJO, "zoo", "serve-mcp", "retail_orders", "--http", "--port", str(port), "--token", token]
    with running(argv, port) as proc:
        assert _post(url, {}) == 401
        assert _post(url, {"Authorization": "Bearer wrong"}) == 401
        assert _post(url, {"Authorization": token}) == 401
        with anyio.fail_after(30):
            with pytest.raises(McpConnectionError):
                await list_mcp_tools(McpSource(url=url), timeout=10)
            specs = await list_mcp_tools(McpSource(url=url), headers={"Authorization": f"Bearer {token}"})
            assert [s.name for s in specs] == [t.name for t in load_domain("retail_orders").tools]
            assert [s.parameters for s in specs] == [t.parameters for t in load_domain("retail_orders").tools]
            async with McpClient(headers={"Authorization": f"Bearer {token}"}) as client:
                by = {s.name: s for s in specs}
                r = await client.call(by["get_order"], {"order_id": "O-1003"})
                assert r.ok and r.output["order_id"] == "O-1003"
                err = await client.call(by["get_order"], {"order_id": "O-0"})
                assert err == ToolError(name="get_order", kind="tool_failure", message="no order O-0", code="order_not_found")
    assert token not in (proc.stderr.read() if proc.stderr else "")


def test_public_bind_without_token_is_refused():
    env = {k: v for k, v in os.environ.items() if k != "TOOLDOJO_MCP_TOKEN"}
    r = subprocess.run([*DOJO, "zoo", "serve-mcp", "retail_orders", "--http", "--host", "0.0.0.0", "--port", str(free_port())],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode != 0
    err = r.stderr.strip()
    assert err.startswith("error:") and "--token" in err and len(err.splitlines()) == 1
    assert "Traceback" not in r.stderr


# ------------------------------------------------------------------ (e) dojo zoo import-mcp


def test_cli_import_mcp_writes_a_loadable_zoo(tmp_path):
    out = tmp_path / "zoo"
    cmd = f"{sys.executable} {INVENTORY}"
    r = subprocess.run([*DOJO, "zoo", "import-mcp", "--command", cmd, "--out", str(out)],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    assert "add_stock" in r.stdout and "get_stock" in r.stdout
    zoo = Zoo.load(out)
    assert zoo.domains == []
    assert [t.name for t in zoo.external] == [t["name"] for t in inventory_tools()]
    assert [t.parameters for t in zoo.external] == [t["inputSchema"] for t in inventory_tools()]
    assert all(t.provenance == "mcp" and t.mcp.command == [sys.executable, str(INVENTORY)] for t in zoo.external)


def test_cli_import_mcp_one_line_error(tmp_path):
    r = subprocess.run([*DOJO, "zoo", "import-mcp", "--command", "/nonexistent/srv --flag", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.startswith("error:") and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "zoo.json").exists()
