"""What the LLM tool evolution (synth/evolve_llm.py) asks: the JSON schemas of its answers, the
system prompt, worked examples and rules, and how a domain is shown to the model."""

from __future__ import annotations

import json
from typing import Any


STATE_EXCERPT_CHARS = 1500
DEFAULT_TOKENS = {"domains": 900, "seed": 1800, "outline": 900, "tool": 1800}


DOMAINS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"domains": {"type": "array", "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "state": {"type": "string"}},
        "required": ["name", "description", "state"]}}},
    "required": ["domains"],
}
SEED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string"}, "policy": {"type": "string"}},
    "required": ["code", "policy"],
}
OUTLINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tools": {"type": "array", "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                       "effect": {"type": "string", "enum": ["read", "write"]}},
        "required": ["name", "description", "effect"]}}},
    "required": ["tools"],
}
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "effect": {"type": "string", "enum": ["read", "write"]},
        "parameters": {"type": "object"},
        "errors": {"type": "object", "additionalProperties": {"type": "string"}},
        "code": {"type": "string"},
    },
    "required": ["name", "description", "effect", "parameters", "errors", "code"],
}

SYSTEM = ("You design tools for simulated, stateful environments in which an AI assistant serves users "
          "(like tau-bench). Answer with exactly one JSON object that matches the requested shape: "
          "no prose, no markdown fences.")

SEED_EXAMPLE = '''import random

PRODUCTS = [("P-100", "desk lamp", 2999), ("P-101", "office chair", 15900), ("P-102", "usb hub", 1999)]


def seed(rng):
    customers, orders = {}, {}
    for i in range(5):
        customers[f"C-{100 + i}"] = {"name": rng.choice(["Ana Silva", "Ben Lee", "Chen Kim"]),
                                     "email": f"user{100 + i}@example.com"}
    for j in range(10):
        sku, name, price = rng.choice(PRODUCTS)
        orders[f"O-{1000 + j}"] = {"customer_id": f"C-{100 + rng.randrange(5)}",
                                   "status": rng.choice(["pending", "shipped", "delivered"]),
                                   "items": [{"sku": sku, "name": name, "unit_price_cents": price, "qty": 1}]}
    return {"customers": customers, "orders": orders, "today": "2025-03-01"}
'''

TOOL_EXAMPLE = {
    "name": "cancel_order",
    "description": "Cancel a pending order and refund it in full.",
    "effect": "write",
    "parameters": {"type": "object", "properties": {
        "order_id": {"type": "string", "description": "the order to cancel, like \"O-1001\""},
        "reason": {"type": "string", "enum": ["changed_mind", "ordered_by_mistake"]}},
        "required": ["order_id", "reason"], "additionalProperties": False},
    "errors": {"order_not_found": "unknown order id", "not_cancellable": "only pending orders can be cancelled"},
    "code": ("def cancel_order(state, order_id, reason):\n"
             "    order = state[\"orders\"].get(order_id)\n"
             "    if order is None:\n"
             "        raise ToolFailure(\"order_not_found\", f\"no order {order_id}\")\n"
             "    if order[\"status\"] != \"pending\":\n"
             "        raise ToolFailure(\"not_cancellable\", f\"order {order_id} is {order['status']}\")\n"
             "    order[\"status\"] = \"cancelled\"\n"
             "    order[\"cancel_reason\"] = reason\n"
             "    return {\"order_id\": order_id, \"status\": \"cancelled\"}\n"),
}

TOOL_RULES = """Rules:
- "code" defines `def {name}(state, ...)` with one keyword argument per parameter (optional ones get defaults).
  `state` is the domain's JSON dict shown above: read it, and for a write tool change it in place.
  Return a small JSON-serialisable dict.
- Standard library only. `ToolFailure(code, message)` is predefined (do not import it): raise it for expected
  problems (unknown id, wrong status, not enough stock, ...) and declare every code you raise in "errors".
- "parameters" is a JSON Schema: {{"type": "object", "properties": {{...}}, "required": [...],
  "additionalProperties": false}}. Put example ids in descriptions in double quotes, like "O-1001".
- A "read" tool must not change the state; a "write" tool changes it."""


def task_line(kind: str) -> str:
    return f"### task: {kind}\n"


def _excerpt(obj: Any, limit: int = STATE_EXCERPT_CHARS) -> str:
    """A short JSON view of a state: each table cut to its first two rows."""

    def cut(v: Any, depth: int) -> Any:
        if isinstance(v, dict):
            items = list(v.items())
            keep = items if depth == 0 else items[:2]
            out = {str(k): cut(x, depth + 1) for k, x in keep}
            if len(items) > len(keep):
                out["..."] = f"{len(items) - len(keep)} more"
            return out
        if isinstance(v, list):
            return [cut(x, depth + 1) for x in v[:2]] + ([f"... {len(v) - 2} more"] if len(v) > 2 else [])
        return v

    text = json.dumps(cut(obj, 0), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def domain_header(name: str, category: str, description: str, state: Any, policy: str = "") -> str:
    out = f"Domain: {name} (category {category}): {description}\n"
    if state is not None:
        out += f"State excerpt (JSON): {_excerpt(state)}\n"
    if policy:
        out += f"Policy: {policy[:600]}\n"
    return out
