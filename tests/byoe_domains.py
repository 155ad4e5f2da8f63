"""Out-of-tree domains written by tests (bring your own environment): nothing here ships."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

# Arguments named like the runtime's own parameters: `state`, `self`, `args`, `kwargs`.
SHIPPING_TOOLS = '''
from toolzoo.dsl import ToolFailure, tool


@tool(errors={"user_not_found": "no such user"})
def get_user(db, user_id: str) -> dict:
    """Show a user's name and address.

    Args:
        user_id: the user's id, e.g. "u1".
    """
    if user_id not in db["users"]:
        raise ToolFailure("user_not_found", f"no user {user_id}")
    return {"user_id": user_id, **db["users"][user_id]}


@tool(effect="write", errors={"user_not_found": "no such user"})
def modify_user_address(db, user_id: str, city: str, state: str, self: str = "", args: str = "",
                        kwargs: str = "") -> dict:
    """Change a user's address.

    Args:
        user_id: the user's id, e.g. "u1".
        city: the new city.
        state: the new US state, e.g. "TX".
        self: a note about the address itself.
        args: extra address line.
        kwargs: delivery instructions.
    """
    if user_id not in db["users"]:
        raise ToolFailure("user_not_found", f"no user {user_id}")
    db["users"][user_id]["address"] = {"city": city, "state": state, "note": self, "line2": args,
                                       "instructions": kwargs}
    return {"user_id": user_id, "address": db["users"][user_id]["address"]}
'''

SHIPPING_POLICY = "Change an address only for the user who asks; confirm the new city and state."


def write_domain(root: Path, name: str = "shipping_desk", *, jsonl: bool = False, users: int = 3) -> Path:
    """A domain folder with JSON (or JSONL) seed data, tools with colliding argument names, a policy."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "tools.py").write_text(textwrap.dedent(SHIPPING_TOOLS))
    (folder / "policy.md").write_text(SHIPPING_POLICY)
    (folder / "__init__.py").write_text('"""A shipping help desk."""\nCATEGORY = "ecommerce"\n'
                                        'DESCRIPTION = "Look up users and change their address."\n')
    rows = {f"u{i}": {"name": f"User {i}", "address": {"city": "Austin", "state": "TX"}} for i in range(1, users + 1)}
    if jsonl:
        (folder / "data.jsonl").write_text("".join(json.dumps({"table": "users", "id": k, **v}) + "\n"
                                                   for k, v in rows.items()))
    else:
        (folder / "data.json").write_text(json.dumps({"users": rows}))
    return folder


# An environment in the OpenAI-function shape (tau-bench's): tool classes with get_info() and
# invoke(data, **kwargs), tables as JSON files, tasks as Python Task(...)/Action(...) calls.
_ENV_TOOL = '''
import json
from typing import Any, Dict

from myenv.tool import Tool


class {cls}(Tool):
    @staticmethod
    def invoke(data: Dict[str, Any], {params}) -> str:
{body}

    @staticmethod
    def get_info() -> Dict[str, Any]:
        return {{
            "type": "function",
            "function": {{
                "name": "{name}",
                "description": "{doc}",
                "parameters": {{"type": "object", "properties": {props}, "required": {required}}},
            }},
        }}
'''

_ENV_TOOLS = [
    ("GetUserDetails", "get_user_details", "user_id: str", "Get a user's details.",
     '''        users = data["users"]
        if user_id not in users:
            return "Error: user not found"
        return json.dumps(users[user_id])''', {"user_id": {"type": "string"}}, ["user_id"]),
    ("ModifyUserAddress", "modify_user_address", "user_id: str, city: str, state: str, zip: str",
     "Modify a user's address.",
     '''        users = data["users"]
        if user_id not in users:
            return "Error: user not found"
        users[user_id]["address"] = {"city": city, "state": state, "zip": zip}
        return json.dumps(users[user_id])''',
     {"user_id": {"type": "string"}, "city": {"type": "string"}, "state": {"type": "string"},
      "zip": {"type": "string"}}, ["user_id", "city", "state", "zip"]),
]

ENV_TASKS = '''
from myenv.types import Action, Task

TASKS = [
    Task(annotator="0", user_id="ana_1", instruction="You are Ana (ana_1). Move to Reno, NV 89501.",
         actions=[Action(name="modify_user_address",
                         kwargs={"user_id": "ana_1", "city": "Reno", "state": "NV", "zip": "89501"})],
         outputs=[]),
    Task(annotator="0", user_id="bo_2", instruction="You are Bo (bo_2). Ask for your zip code.",
         actions=[Action(name="get_user_details", kwargs={"user_id": "bo_2"})], outputs=["73301"]),
    Task(annotator="0", user_id="zed_9", instruction="You are Zed. Move to Austin.",
         actions=[Action(name="modify_user_address",
                         kwargs={"user_id": "zed_9", "city": "Austin", "state": "TX", "zip": "73301"})],
         outputs=[]),
    Task(annotator="0", user_id="ana_1", instruction="You are Ana (ana_1). Move to Reno.",
         actions=[Action(name="modify_user_address", kwargs={"user_id": "ana_1", "city": "Reno"})],
         outputs=[]),
]
'''


def write_openai_env(root: Path) -> Path:
    """A small environment checkout in the OpenAI-function shape; returns its folder."""
    env = root / "myenv"
    (env / "tools").mkdir(parents=True)
    (env / "data").mkdir()
    (env / "tool.py").write_text("class Tool:\n    pass\n")
    for cls, name, params, doc, body, props, required in _ENV_TOOLS:
        (env / "tools" / f"{name}.py").write_text(_ENV_TOOL.format(
            cls=cls, name=name, params=params, doc=doc, body=body, props=json.dumps(props),
            required=json.dumps(required)))
    (env / "data" / "users.json").write_text(json.dumps({
        "ana_1": {"name": "Ana", "address": {"city": "Austin", "state": "TX", "zip": "73301"}},
        "bo_2": {"name": "Bo", "address": {"city": "Austin", "state": "TX", "zip": "73301"}}}))
    (env / "wiki.md").write_text("Authenticate the user by id before any change.")
    (env / "tasks_test.py").write_text(ENV_TASKS)
    return env


# An MCP server of the test's own, with its world state behind two hook tools.
MCP_SERVER = '''
import copy
import json

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("Shipping MCP")
START = {"users": {f"u{i}": {"name": f"User {i}", "address": {"city": "Austin", "state": "TX"}} for i in (1, 2, 3)}}
DB = copy.deepcopy(START)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def get_user(user_id: str) -> dict:
    """Show a user's name and address."""
    if user_id not in DB["users"]:
        raise ValueError(f"no user {user_id}")
    return {"user_id": user_id, **DB["users"][user_id]}


@server.tool(annotations=ToolAnnotations(destructiveHint=False))
def modify_user_address(user_id: str, city: str, state: str) -> dict:
    """Change a user's address (city and US state)."""
    if user_id not in DB["users"]:
        raise ValueError(f"no user {user_id}")
    DB["users"][user_id]["address"] = {"city": city, "state": state}
    return {"user_id": user_id, "address": DB["users"][user_id]["address"]}


@server.tool()
def get_state() -> dict:
    """The whole database (the state hook)."""
    return DB


@server.tool()
def reset_state() -> str:
    """Back to the start (the reset hook)."""
    DB.clear()
    DB.update(copy.deepcopy(START))
    return "ok"


if __name__ == "__main__":
    server.run("stdio")
'''


# Hooks that go wrong (issue 30): a text answer, a dotted server name.
MCP_HOOK_EXTRAS = """

@server.tool()
def describe_state() -> str:
    \"\"\"The state in words (not JSON).\"\"\"
    return "three users, all in Austin"


@server.tool(name="db.dump")
def db_dump() -> dict:
    \"\"\"The whole database, under a dotted name.\"\"\"
    return DB

"""


def write_mcp_server(root: Path, *, hook_extras: bool = False) -> Path:
    path = root / "shipping_mcp_server.py"
    head, main = MCP_SERVER.split("\nif __name__")
    path.write_text(head + (MCP_HOOK_EXTRAS if hook_extras else "") + "\nif __name__" + main)
    return path


# Code that must never run on the host (issue 30): each file writes a marker holding a secret from
# the environment into `marker_dir`. Inside a sandbox that folder does not exist, so the attempt
# fails quietly there and the domain still works.
_PLANT = '''
import os as _plant_os
try:
    with open({path!r}, "w") as _plant_f:
        _plant_f.write(_plant_os.environ.get("TOOLDOJO_TEST_SECRET", "no secret"))
except OSError:
    pass
'''

_PLANTED_DATA = '''

def seed(rng):
    return {{"users": {{f"u{{i}}": {{"name": f"User {{i}}", "address": {{"city": "Austin", "state": "TX"}}}}
                      for i in range(1, {users} + 1)}}}}
'''


def write_planted_domain(root: Path, marker_dir: Path, name: str = "planted_desk", *, users: int = 4) -> Path:
    """The shipping desk with data.py, where __init__.py, tools.py and data.py each try to leave a marker."""
    folder = root / name
    folder.mkdir(parents=True)
    plant = {f: _PLANT.format(path=str(marker_dir / f)) for f in ("__init__.py", "tools.py", "data.py")}
    (folder / "__init__.py").write_text('"""A shipping help desk."""\nCATEGORY = "ecommerce"\n' + plant["__init__.py"])
    (folder / "tools.py").write_text(plant["tools.py"] + textwrap.dedent(SHIPPING_TOOLS))
    (folder / "data.py").write_text(plant["data.py"] + _PLANTED_DATA.format(users=users))
    (folder / "policy.md").write_text(SHIPPING_POLICY)
    return folder
