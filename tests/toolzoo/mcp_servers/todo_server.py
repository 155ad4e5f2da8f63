"""A stateful todo service written with the SDK's high-level `MCPServer`, for tests.

    python todo_server.py    # stdio

Its tools are typed Python functions (the SDK derives the schemas and checks
arguments itself). `list_todos` has no return annotation, so the SDK sends one
text block per todo and no structuredContent; `list_todos_typed` is annotated,
so the SDK also sends structuredContent ({"result": [...]}). `api_key` reports
TODO_API_KEY from the server's own environment.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("Todo Test")
TODOS: list[dict] = []


@server.tool()
def add_todo(title: str, priority: int = 1) -> dict:
    """Add a todo; priority 1 (low) to 3 (high)."""
    todo = {"id": len(TODOS) + 1, "title": title, "priority": priority}
    TODOS.append(todo)
    return todo


@server.tool(structured_output=False)
def list_todos(prefix: str = ""):
    """The todos whose title starts with prefix."""
    return [t for t in TODOS if t["title"].startswith(prefix)]


@server.tool()
def list_todos_typed(prefix: str = "") -> list[dict]:
    """The todos whose title starts with prefix (typed)."""
    return [t for t in TODOS if t["title"].startswith(prefix)]


@server.tool()
def api_key() -> str:
    """The API key this server was started with (TODO_API_KEY), or "unset"."""
    return os.environ.get("TODO_API_KEY", "unset")


if __name__ == "__main__":
    server.run("stdio")
