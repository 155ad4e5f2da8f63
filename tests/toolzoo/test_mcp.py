"""MCP both ways, against real MCP servers (SDK-built, spawned as processes), on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
            assert isinstance(r, ToolResult) and r.output[0]["stock"]["SKU-002"] == 2  # one text block, no structuredContent
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
                assert r.ok and r.output == [{"ok": True, "left": 3}]
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


# ------------------------------------------------------------------ (f) issue 18: a new user's defects
TODO = SERVERS / "todo_server.py"   # built with the SDK's high-level MCPServer


async def test_list_outputs_keep_one_shape_for_any_length():
    """#5: without structuredContent a result is one item per block, for 0, 1 or 2 todos alike."""
    specs = {s.name: s for s in await list_mcp_tools(McpSource(command=[sys.executable, str(TODO)]))}
    async with McpClient() as client:
        with anyio.fail_after(60):
            plain, typed = [], []
            for i in range(3):
                plain.append(await client.call(specs["list_todos"], {}))
                typed.append(await client.call(specs["list_todos_typed"], {}))
                added = await client.call(specs["add_todo"], {"title": f"todo {i}"})
                assert added.ok and added.output == [{"id": i + 1, "title": f"todo {i}", "priority": 1}]
    todos = [{"id": i + 1, "title": f"todo {i}", "priority": 1} for i in range(3)]
    assert [r.output for r in plain] == [[], todos[:1], todos[:2]]
    # structuredContent, when the server sends it, is the output as sent (its outputSchema is `returns`)
    assert [r.output for r in typed] == [{"result": []}, {"result": todos[:1]}, {"result": todos[:2]}]
    assert specs["list_todos_typed"].returns["required"] == ["result"]


async def test_mcp_arguments_are_checked_against_the_imported_schema():
    """#6: arguments the inputSchema refuses come back as invalid_arguments, before the server sees them."""
    specs = {s.name: s for s in await list_mcp_tools(McpSource(command=[sys.executable, str(TODO)]))}
    inv = {s.name: s for s in await list_mcp_tools(McpSource(command=[sys.executable, str(INVENTORY)]))}
    async with McpClient() as client:
        with anyio.fail_after(60):
            err = await client.call(specs["add_todo"], {"title": 5})
            assert err == ToolError(name="add_todo", kind="invalid_arguments",
                                    message="add_todo: arguments.title: 5 is not of type 'string'")
            err = await client.call(specs["add_todo"], {"priority": 2})
            assert err.kind == "invalid_arguments" and "'title' is a required property" in err.message
            err = await client.call(inv["add_stock"], {"warehouse": "north", "items": [{"sku": "bad", "qty": 1}]})
            assert err.kind == "invalid_arguments" and "arguments.items[0].sku" in err.message, err.message
            err = await client.call(inv["get_stock"], {"warehouse": "east"})
            assert err.kind == "invalid_arguments" and "'east' is not one of" in err.message
            err = await client.call(inv["add_stock"], {"warehouse": "north", "items": [{"sku": "SKU-001", "qty": 1}],
                                                       "colour": "red"})
            assert err.kind == "invalid_arguments" and "'colour' was unexpected" in err.message
            # nothing reached the server: the todo list is still empty, the stock unchanged
            assert (await client.call(specs["list_todos"], {})).output == []
            assert (await client.call(inv["get_stock"], {"warehouse": "north"})).output["stock"] == {"SKU-001": 5}
            ok = await client.call(specs["add_todo"], {"title": "real", "priority": 3})
            assert ok.ok


class _Refuses401(BaseHTTPRequestHandler):
    """A real HTTP endpoint that refuses every request as unauthorized, like a server behind a token."""

    def _refuse(self) -> None:
        body = b'{"error": "unauthorized"}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("www-authenticate", 'Bearer realm="test"')
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _refuse

    def log_message(self, *args) -> None:
        pass


@contextmanager
def refusing_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses401)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_cli_import_mcp_says_401_means_a_token(tmp_path):
    """#7: a 401 is reported as unauthorized, with --token as the fix (or the token to check)."""
    with refusing_server() as url:
        r = subprocess.run([*DOJO, "zoo", "import-mcp", "--url", url, "--out", str(tmp_path), "--timeout", "20"],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 1, r.stderr
        err = r.stderr.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
        assert "unauthorized (HTTP 401)" in err and "--token" in err and url in err, err
        r = subprocess.run([*DOJO, "zoo", "import-mcp", "--url", url, "--out", str(tmp_path), "--token", "wrong-tok3n"],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 1 and "unauthorized (HTTP 401)" in r.stderr and "check the token" in r.stderr, r.stderr
        assert "wrong-tok3n" not in r.stderr
    assert not (tmp_path / "zoo.json").exists()


SECRET = "sk-test-6f1d2c9e-never-in-a-file"


async def test_stdio_source_env_reaches_the_server_and_is_never_written(tmp_path, monkeypatch, caplog):
    """#8: a stdio source's env reaches its server; `${NAME}` keeps the value out of reprs, logs and zoo.json."""
    import logging

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("MY_TODO_KEY", SECRET)
    source = McpSource(command=[sys.executable, str(TODO)], env={"TODO_API_KEY": "${MY_TODO_KEY}"})
    with anyio.fail_after(60):
        specs = {s.name: s for s in await list_mcp_tools(source)}
        async with McpClient() as client:
            r = await client.call(specs["api_key"], {})
            assert r.ok and r.output == {"result": SECRET}
            r = await client.call(specs["api_key"], {})
        # without env the caller's variables do not reach the server
        async with McpClient() as client:
            monkeypatch.setenv("TODO_API_KEY", SECRET)
            bare = await list_mcp_tools(McpSource(command=[sys.executable, str(TODO)]))
            r = await client.call(next(s for s in bare if s.name == "api_key"), {})
            assert r.output == {"result": "unset"}
    assert specs["api_key"].mcp.env == {"TODO_API_KEY": "${MY_TODO_KEY}"}
    Zoo(external=list(specs.values())).save(tmp_path)
    saved = (tmp_path / "zoo.json").read_text()
    assert SECRET not in saved and '"${MY_TODO_KEY}"' in saved
    assert Zoo.load(tmp_path).external[0].mcp.env == {"TODO_API_KEY": "${MY_TODO_KEY}"}
    for shown in (repr(source), str(source), repr(specs["api_key"]), caplog.text):
        assert SECRET not in shown and "MY_TODO_KEY" not in repr(source)

    monkeypatch.delenv("MY_TODO_KEY")
    with anyio.fail_after(30), pytest.raises(McpConnectionError, match=r"\$\{MY_TODO_KEY\}, but MY_TODO_KEY is not set"):
        await list_mcp_tools(source)
    with pytest.raises(ValueError, match="env is for stdio servers"):
        McpSource(url="http://127.0.0.1:1/mcp", env={"A": "b"})


def test_cli_import_mcp_env_passes_a_reference_never_the_value(tmp_path):
    out = tmp_path / "zoo"
    env = {**os.environ, "TODO_API_KEY": SECRET}
    r = subprocess.run([*DOJO, "zoo", "import-mcp", "--command", f"{sys.executable} {TODO}", "--env", "TODO_API_KEY",
                        "--env", "TODO_MODE=test", "--out", str(out)], capture_output=True, text=True, timeout=90, env=env)
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr and "api_key" in r.stdout
    saved = (out / "zoo.json").read_text()
    assert SECRET not in saved
    zoo = Zoo.load(out)
    assert {t.mcp.env["TODO_API_KEY"] for t in zoo.external} == {"${TODO_API_KEY}"}
    assert zoo.external[0].mcp.env["TODO_MODE"] == "test"

    async def call_api_key() -> object:
        async with McpClient() as client:
            return await client.call(next(t for t in zoo.external if t.name == "api_key"), {})

    os.environ["TODO_API_KEY"] = SECRET   # the loaded zoo's server gets the caller's value at start
    try:
        assert anyio.run(call_api_key).output == {"result": SECRET}
    finally:
        del os.environ["TODO_API_KEY"]
    no_env = {k: v for k, v in os.environ.items() if k != "TODO_API_KEY"}
    r = subprocess.run([*DOJO, "zoo", "import-mcp", "--command", f"{sys.executable} {TODO}", "--env", "TODO_API_KEY",
                        "--out", str(tmp_path / "z2")], capture_output=True, text=True, timeout=90, env=no_env)
    assert r.returncode == 1 and "TODO_API_KEY is not set" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([*DOJO, "zoo", "import-mcp", "--url", "http://127.0.0.1:1/mcp", "--env", "X", "--out",
                        str(tmp_path / "z3")], capture_output=True, text=True, timeout=90)
    assert r.returncode == 1 and "--env is for a --command" in r.stderr


async def test_serve_a_domain_folder_by_path_over_stdio(tmp_path):
    """Issue 24: `dojo zoo serve-mcp PATH` serves an out-of-tree folder (JSON seed data, an argument named
    `state`) like a built-in domain."""
    from tests.byoe_domains import write_domain

    require_sandbox()
    folder = write_domain(tmp_path / "mine", "served_desk")
    params = StdioServerParameters(command=DOJO[0], args=[*DOJO[1:], "zoo", "serve-mcp", str(folder), "--stdio"],
                                   env=dict(os.environ), cwd=str(HERE.parent.parent))
    with anyio.fail_after(90):
        async with Client(params) as client:
            assert client.server_info is not None and client.server_info.name == "served_desk"
            names = sorted(t.name for t in (await client.list_tools()).tools)
            assert names == ["get_user", "modify_user_address"]
            r = await client.call_tool("modify_user_address", {"user_id": "u3", "city": "Reno", "state": "NV"})
            assert not r.is_error, r
            r = await client.call_tool("get_user", {"user_id": "u3"})
            assert r.structured_content["address"]["state"] == "NV"


def test_import_timeout_bounds_the_whole_import(monkeypatch):
    """--timeout is the whole import's deadline: a server that connects and then stalls while its tools
    are being listed (each step within its own bound before) is a McpConnectionError naming --timeout."""
    import anyio

    from toolzoo import mcp as mcp_mod
    from toolzoo.spec import McpSource

    async def stalls(self, source):
        await anyio.sleep_forever()  # a server that never finishes the import

    monkeypatch.setattr(mcp_mod.McpClient, "import_tools", stalls)

    async def go():
        with anyio.fail_after(60):  # a guard against a hang, not the bound under test
            await mcp_mod.import_mcp_tools(McpSource(url="http://127.0.0.1:9/mcp"), timeout=0.05)

    with pytest.raises(mcp_mod.McpConnectionError, match=r"within 0.05s \(--timeout bounds the whole import\)"):
        anyio.run(go)
