"""A small, stateful MCP server written with the low-level SDK, for tests.

    python inventory_server.py            # stdio
    python inventory_server.py --http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp

Its tool schemas (TOOLS) are hand-written JSON Schema with enums, nested
objects, arrays and $defs, so tests can check an importer keeps them exactly.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

ITEM = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "pattern": "^SKU-[0-9]{3}$"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 1000},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["fragile", "cold", "bulky"]}, "uniqueItems": True},
    },
    "required": ["sku", "qty"],
    "additionalProperties": False,
}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "add_stock",
        "description": "Add stock to a warehouse.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "warehouse": {"type": "string", "enum": ["north", "south"], "description": "which warehouse"},
                "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1},
                "note": {"anyOf": [{"type": "string", "maxLength": 80}, {"type": "null"}], "default": None},
            },
            "required": ["warehouse", "items"],
            "additionalProperties": False,
            "$defs": {"item": ITEM},
        },
        "annotations": {"readOnlyHint": False},
    },
    {
        "name": "get_stock",
        "description": "Show the stock of a warehouse, optionally filtered.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "warehouse": {"type": "string", "enum": ["north", "south"]},
                "filter": {
                    "type": "object",
                    "properties": {
                        "sku_prefix": {"type": "string"},
                        "min_qty": {"type": "integer", "minimum": 0, "default": 0},
                    },
                    "additionalProperties": False,
                },
            },
            "required": ["warehouse"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {"warehouse": {"type": "string"}, "stock": {"type": "object", "additionalProperties": {"type": "integer"}}},
            "required": ["warehouse", "stock"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "remove_stock",
        "description": "Remove stock; fails if there is not enough.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "warehouse": {"type": "string", "enum": ["north", "south"]},
                "sku": {"type": "string"},
                "qty": {"type": "integer", "minimum": 1},
            },
            "required": ["warehouse", "sku", "qty"],
        },
    },
]

STOCK: dict[str, dict[str, int]] = {"north": {"SKU-001": 5}, "south": {}}


def _text(obj: Any) -> list[types.TextContent]:
    return [types.TextContent(text=json.dumps(obj))]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in TOOLS])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    a = params.arguments or {}
    if params.name == "add_stock":
        wh = STOCK[a["warehouse"]]
        for it in a["items"]:
            wh[it["sku"]] = wh.get(it["sku"], 0) + it["qty"]
        return types.CallToolResult(content=_text({"ok": True, "stock": wh}))
    if params.name == "get_stock":
        f = a.get("filter") or {}
        stock = {k: v for k, v in STOCK[a["warehouse"]].items()
                 if k.startswith(f.get("sku_prefix", "")) and v >= f.get("min_qty", 0)}
        out = {"warehouse": a["warehouse"], "stock": stock}
        return types.CallToolResult(content=_text(out), structured_content=out)
    if params.name == "remove_stock":
        wh = STOCK[a["warehouse"]]
        have = wh.get(a["sku"], 0)
        if have < a["qty"]:
            return types.CallToolResult(content=[types.TextContent(text=f"only {have} of {a['sku']} in {a['warehouse']}")],
                                        is_error=True)
        wh[a["sku"]] = have - a["qty"]
        return types.CallToolResult(content=_text({"ok": True, "left": wh[a["sku"]]}))
    if params.name == "crash_server":  # unlisted: lets tests kill the server mid-session
        os._exit(3)
    return types.CallToolResult(content=[types.TextContent(text=f"unknown tool {params.name}")], is_error=True)


server = Server("Inventory Test", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "--http":
        import uvicorn

        app = server.streamable_http_app(host="127.0.0.1")
        cfg = uvicorn.Config(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
        await uvicorn.Server(cfg).serve()
    else:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
