"""An MCP server with foreign habits, written with the low-level SDK, for tests.

    python foreign_server.py [--banner] [--http PORT [--modern-only]]

Its tool names use dots and dashes (`kv.set`, `inv.add-items`, `get-weather`),
collide once made valid (`kv.set` vs `kv_set`), run past 64 characters, and one
tool (`broken`) has an invalid input schema. `kv.set`/`kv.get` keep state in
the process, so a restarted server has lost it. `garble` writes a byte that is
not UTF-8 to stdout, as a buggy server might. `--banner` prints a line of text
to stdout before the handshake, as many servers do. `--modern-only` refuses the
initialize handshake over HTTP, as a server speaking only the sessionless
2026-07-28 protocol would.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

KV = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "string"}}, "required": ["key"]}
LONG = "reports." + "quarterly-" * 7 + "summary"  # 85 characters

TOOLS: list[dict[str, Any]] = [
    {"name": "kv.set", "description": "Set key to value.", "inputSchema": KV},
    {"name": "kv.get", "description": "The value of key.", "inputSchema": KV, "annotations": {"readOnlyHint": True}},
    {"name": "kv_set", "description": "Set key to value (legacy name).", "inputSchema": KV},
    {"name": "inv.add-items", "description": "Add items.", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    {"name": "get-weather", "description": "The weather.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": LONG, "description": "A long-named tool.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "broken", "description": "Its schema is not JSON Schema.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}},
    {"name": "garble", "description": "Writes a non-UTF-8 byte to stdout.", "inputSchema": {"type": "object", "properties": {}}},
]

STORE: dict[str, str] = {}
WIRE = os.dup(1)  # the protocol stream: the SDK diverts fd 1 to stderr while serving, this copy bypasses that


def _text(obj: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(obj))])


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in TOOLS])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    a = params.arguments or {}
    if params.name in ("kv.set", "kv_set"):
        STORE[a["key"]] = a.get("value", "")
        return _text({"ok": True, "tool": params.name})
    if params.name == "kv.get":
        if a["key"] not in STORE:
            return types.CallToolResult(content=[types.TextContent(text=f"no key {a['key']}")], is_error=True)
        return _text({"value": STORE[a["key"]]})
    if params.name == "garble":
        os.write(WIRE, b"\xff\n")
        return _text({"ok": True})
    if params.name in {t["name"] for t in TOOLS}:
        return _text({"tool": params.name, "args": a})
    return types.CallToolResult(content=[types.TextContent(text=f"unknown tool {params.name}")], is_error=True)


class RefuseInitialize:
    """ASGI middleware: `initialize` is an unknown method (JSON-RPC -32601 at HTTP 400); the rest goes through."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "initialize":
            out = json.dumps({"jsonrpc": "2.0", "id": request.get("id"),
                              "error": {"code": -32601, "message": "Method not found: initialize"}}).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
            await send({"type": "http.response.body", "body": out})
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


server = Server("Foreign Test", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    if "--http" in sys.argv:
        import uvicorn

        port = int(sys.argv[sys.argv.index("--http") + 1])
        app: Any = server.streamable_http_app(host="127.0.0.1")
        if "--modern-only" in sys.argv:
            app = RefuseInitialize(app)
        cfg = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        await uvicorn.Server(cfg).serve()
        return
    from mcp.server.stdio import stdio_server

    if "--banner" in sys.argv:
        os.write(1, b"Foreign Test MCP server v1.0 starting...\n")
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
