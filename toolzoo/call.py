"""Call one tool of a zoo outside an episode (`dojo zoo call`), through the runtime an episode uses:
a zoo tool in a sandbox loaded with its domain, an imported MCP tool through McpClient."""

from __future__ import annotations

import difflib
from typing import Any

from sandboxes import SandboxConfig, ToolError, ToolResult, open_sandbox
from toolzoo.spec import ToolSpec, Zoo


def find_tool(zoo: Zoo, name: str) -> ToolSpec:
    """The tool the model knows as `name` (or, for an MCP tool, its server's name); ValueError names close ones."""
    for t in zoo.tools:
        if t.name == name:
            return t
    by_server = [t for t in zoo.external if t.mcp_name == name]
    if len(by_server) == 1:
        return by_server[0]
    names = [t.name for t in zoo.tools]
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f" (it has {len(names)} tools)"
    raise ValueError(f"the zoo has no tool {name!r}{hint}")


async def call_tool(zoo: Zoo, spec: ToolSpec, args: dict[str, Any], *, backend: str = "auto", seed: int = 0,
                    headers: dict[str, str] | None = None, timeout: float = 30.0) -> ToolResult | ToolError:
    """Run one call of `spec` (a tool of `zoo`); raises SandboxError (McpConnectionError) when it cannot run."""
    from toolzoo.runtime import ToolRuntime

    if spec.provenance == "mcp":
        from toolzoo.mcp import McpClient

        async with McpClient(headers=headers, connect_timeout=timeout, call_timeout=timeout) as client:
            return await client.call(spec, args)
    domain = zoo.domain(spec.domain)
    sandbox = await open_sandbox(SandboxConfig(backend=backend))  # type: ignore[arg-type]
    try:
        return await ToolRuntime(sandbox, domain, seed=seed).call(spec.name, args, timeout=timeout)
    finally:
        await sandbox.close()
