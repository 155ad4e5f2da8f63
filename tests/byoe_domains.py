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
