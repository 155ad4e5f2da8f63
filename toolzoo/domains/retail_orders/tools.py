from typing import Literal

from toolzoo.dsl import ToolFailure, tool


def _order(state, order_id):
    if order_id not in state["orders"]:
        raise ToolFailure("order_not_found", f"no order {order_id}")
    return state["orders"][order_id]


def _total(order):
    return sum(i["unit_price_cents"] * i["qty"] for i in order["items"])


@tool(errors={"customer_not_found": "no customer has this email"})
def find_customer_by_email(state, email: str) -> dict:
    """Find a customer's id and name from their email address.

    Args:
        email: the customer's email, e.g. "user101@example.com".
    """
    for cid, c in state["customers"].items():
        if c["email"].lower() == email.strip().lower():
            return {"customer_id": cid, "name": c["name"]}
    raise ToolFailure("customer_not_found", f"no customer with email {email}")


@tool(errors={"customer_not_found": "unknown customer id"})
def list_customer_orders(state, customer_id: str, status: Literal["pending", "shipped", "delivered", "cancelled", "any"] = "any") -> dict:
    """List a customer's orders, optionally only those with a given status.

    Args:
        customer_id: the customer's id, e.g. "C-101".
        status: only orders with this status; "any" for all.
    """
    if customer_id not in state["customers"]:
        raise ToolFailure("customer_not_found", f"no customer {customer_id}")
    out = [{"order_id": oid, "status": o["status"], "total_cents": _total(o)}
           for oid, o in sorted(state["orders"].items())
           if o["customer_id"] == customer_id and status in ("any", o["status"])]
    return {"orders": out}


@tool(errors={"order_not_found": "unknown order id"})
def get_order(state, order_id: str) -> dict:
    """Show an order: status, items, total and refunds.

    Args:
        order_id: the order id, e.g. "O-1003".
    """
    o = _order(state, order_id)
    return {"order_id": order_id, **o, "total_cents": _total(o)}


@tool(effect="write", errors={"order_not_found": "unknown order id", "not_cancellable": "only pending orders can be cancelled"})
def cancel_order(state, order_id: str, reason: Literal["changed_mind", "ordered_by_mistake", "found_cheaper"]) -> dict:
    """Cancel a pending order and refund it in full.

    Args:
        order_id: the order to cancel.
        reason: why the customer cancels.
    """
    o = _order(state, order_id)
    if o["status"] != "pending":
        raise ToolFailure("not_cancellable", f"order {order_id} is {o['status']}; only pending orders can be cancelled")
    o["status"] = "cancelled"
    o["cancel_reason"] = reason
    o["refunded_cents"] = _total(o)
    return {"order_id": order_id, "status": "cancelled", "refunded_cents": o["refunded_cents"]}


@tool(effect="write", errors={"order_not_found": "unknown order id", "not_returnable": "only delivered orders can be returned",
                              "item_not_in_order": "a sku is not in the order"})
def return_items(state, order_id: str, skus: list[str]) -> dict:
    """Return delivered items of an order; refunds their price.

    Args:
        order_id: a delivered order.
        skus: the product skus to return, e.g. ["P-101"]; each must be in the order.
    """
    o = _order(state, order_id)
    if o["status"] != "delivered":
        raise ToolFailure("not_returnable", f"order {order_id} is {o['status']}; only delivered orders can be returned")
    if not skus:
        raise ToolFailure("item_not_in_order", "give at least one sku")
    refund = 0
    for sku in skus:
        match = [i for i in o["items"] if i["sku"] == sku and not i.get("returned")]
        if not match:
            raise ToolFailure("item_not_in_order", f"{sku} is not a returnable item of {order_id}")
        match[0]["returned"] = True
        refund += match[0]["unit_price_cents"] * match[0]["qty"]
    o["refunded_cents"] += refund
    return {"order_id": order_id, "refunded_cents": refund, "total_refunded_cents": o["refunded_cents"]}


@tool(effect="write", errors={"customer_not_found": "unknown customer id", "invalid_address": "address too short"})
def update_address(state, customer_id: str, address: str) -> dict:
    """Change a customer's shipping address (affects orders not yet shipped).

    Args:
        customer_id: the customer's id.
        address: the full new address, street and city.
    """
    if customer_id not in state["customers"]:
        raise ToolFailure("customer_not_found", f"no customer {customer_id}")
    if len(address.strip()) < 8 or "," not in address:
        raise ToolFailure("invalid_address", "give street and city separated by a comma")
    state["customers"][customer_id]["address"] = address.strip()
    return {"customer_id": customer_id, "address": address.strip()}
