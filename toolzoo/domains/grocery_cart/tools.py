from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool


def _gc_customer(state, customer_id):
    if customer_id not in state["customers"]:
        raise ToolFailure("customer_not_found", f"no customer {customer_id}; ask for the customer id (like G-101)")
    return state["customers"][customer_id]


def _gc_product(state, sku):
    if sku not in state["products"]:
        raise ToolFailure("product_not_found", f"no product {sku}; use search_grocery_products to find the sku")
    return state["products"][sku]


def _gc_line(cust, sku):
    for line in cust["cart"]:
        if line["sku"] == sku:
            return line
    raise ToolFailure("not_in_cart", f"{sku} is not in the cart; see view_grocery_cart")


def _gc_check_qty(prod, sku, qty):
    if qty > prod["max_per_order"]:
        raise ToolFailure("per_order_limit", f"at most {prod['max_per_order']} of {sku} per order")
    if qty > prod["stock"]:
        raise ToolFailure("insufficient_stock", f"only {prod['stock']} of {sku} in stock; offer a smaller quantity")


def _gc_coupon_problem(state, cust, code, subtotal):
    """Why `code` cannot apply to this cart now (code, message), or None."""
    c = state["coupons"][code]
    if c["expired"]:
        return "coupon_expired", f"coupon {code} has expired"
    if c["members_only"] and not cust["member"]:
        return "members_only", f"coupon {code} is for loyalty members only"
    if subtotal < c["min_subtotal_cents"]:
        return "min_subtotal_not_met", f"coupon {code} needs a subtotal of {c['min_subtotal_cents']} cents; the cart has {subtotal}"
    if c["category"] and not any(state["products"][ln["sku"]]["category"] == c["category"] for ln in cust["cart"]):
        return "no_eligible_items", f"coupon {code} only applies to {c['category']} items and the cart has none"
    return None


def _gc_totals(state, cust):
    lines, subtotal = [], 0
    for ln in cust["cart"]:
        p = state["products"][ln["sku"]]
        amount = p["price_cents"] * ln["qty"]
        subtotal += amount
        lines.append({"sku": ln["sku"], "name": p["name"], "qty": ln["qty"], "unit_price_cents": p["price_cents"],
                      "line_cents": amount})
    discount, coupon_note = 0, None
    code = cust["coupon"]
    if code:
        problem = _gc_coupon_problem(state, cust, code, subtotal)
        if problem:
            coupon_note = problem[1]
        else:
            c = state["coupons"][code]
            if c["kind"] == "fixed":
                discount = min(c["value"], subtotal)
            else:
                base = sum(x["line_cents"] for x in lines
                           if not c["category"] or state["products"][x["sku"]]["category"] == c["category"])
                discount = base * c["value"] // 100
    delivery = 0
    if cust["slot_id"]:
        delivery = state["slots"][cust["slot_id"]]["fee_cents"]
        if subtotal - discount >= state["rules"]["free_delivery_over_cents"]:
            delivery = 0
    return {"items": lines, "subtotal_cents": subtotal, "coupon": code, "coupon_problem": coupon_note,
            "discount_cents": discount, "slot_id": cust["slot_id"], "delivery_fee_cents": delivery,
            "total_cents": subtotal - discount + delivery}


@tool()
def search_grocery_products(state, query: str = "",
                            category: Literal["dairy", "bakery", "produce", "pantry", "alcohol", "meat", "fish", "any"] = "any",
                            in_stock_only: bool = False) -> dict:
    """Search grocery products by name and category; shows price, stock and the per-order limit.

    Args:
        query: words in the product name, e.g. "milk"; empty for all products.
        category: only this aisle; "any" for all.
        in_stock_only: hide products with no stock.
    """
    q = query.strip().lower()
    out = [{"sku": sku, **p} for sku, p in sorted(state["products"].items())
           if q in p["name"].lower() and category in ("any", p["category"]) and (p["stock"] > 0 or not in_stock_only)]
    return {"products": out}


@tool(errors={"customer_not_found": "unknown customer id"})
def view_grocery_cart(state, customer_id: str) -> dict:
    """Show a customer's cart: lines, subtotal, coupon discount (or why the coupon does not apply), delivery fee and total.

    Args:
        customer_id: the customer, e.g. "G-101".
    """
    cust = _gc_customer(state, customer_id)
    return {"customer_id": customer_id, "member": cust["member"], **_gc_totals(state, cust)}


@tool(effect="write", errors={
    "customer_not_found": "unknown customer id", "product_not_found": "unknown sku",
    "insufficient_stock": "not that many in stock", "per_order_limit": "more than the product's per-order limit"})
def add_to_grocery_cart(state, customer_id: str, sku: str, qty: Annotated[int, {"minimum": 1, "maximum": 20}] = 1) -> dict:
    """Add a product to the cart (adds to the quantity if it is already there).

    Args:
        customer_id: the customer.
        sku: the product, e.g. "SKU-105".
        qty: how many to add.
    """
    cust = _gc_customer(state, customer_id)
    prod = _gc_product(state, sku)
    line = next((ln for ln in cust["cart"] if ln["sku"] == sku), None)
    new_qty = qty + (line["qty"] if line else 0)
    _gc_check_qty(prod, sku, new_qty)
    if line:
        line["qty"] = new_qty
    else:
        cust["cart"].append({"sku": sku, "qty": new_qty})
    return {"customer_id": customer_id, "sku": sku, "qty": new_qty, "cart_lines": len(cust["cart"])}


@tool(effect="write", errors={
    "customer_not_found": "unknown customer id", "not_in_cart": "the sku is not in the cart",
    "insufficient_stock": "not that many in stock", "per_order_limit": "more than the product's per-order limit"})
def update_grocery_cart_quantity(state, customer_id: str, sku: str, qty: Annotated[int, {"minimum": 0, "maximum": 20}]) -> dict:
    """Set the quantity of a product already in the cart; 0 removes the line.

    Args:
        customer_id: the customer.
        sku: a product in the cart.
        qty: the new quantity.
    """
    cust = _gc_customer(state, customer_id)
    line = _gc_line(cust, sku)
    if qty == 0:
        cust["cart"].remove(line)
    else:
        _gc_check_qty(state["products"][sku], sku, qty)
        line["qty"] = qty
    return {"customer_id": customer_id, "sku": sku, "qty": qty, "cart_lines": len(cust["cart"])}


@tool(effect="write", errors={"customer_not_found": "unknown customer id", "not_in_cart": "the sku is not in the cart"})
def remove_from_grocery_cart(state, customer_id: str, sku: str) -> dict:
    """Remove a product line from the cart.

    Args:
        customer_id: the customer.
        sku: the product to remove.
    """
    cust = _gc_customer(state, customer_id)
    cust["cart"].remove(_gc_line(cust, sku))
    return {"customer_id": customer_id, "removed": sku, "cart_lines": len(cust["cart"])}


@tool(effect="write", errors={
    "customer_not_found": "unknown customer id", "coupon_not_found": "no such coupon code",
    "coupon_expired": "the coupon has expired", "members_only": "the coupon is for loyalty members",
    "min_subtotal_not_met": "the cart subtotal is below the coupon's minimum",
    "no_eligible_items": "the coupon's category is not in the cart"})
def apply_grocery_coupon(state, customer_id: str, code: str | None) -> dict:
    """Apply a coupon to the cart (replacing any previous one), or remove the coupon with code null. One coupon per order.

    Args:
        customer_id: the customer.
        code: the coupon code, e.g. "WELCOME5"; null removes the current coupon.
    """
    cust = _gc_customer(state, customer_id)
    if code is None:
        cust["coupon"] = None
        return {"customer_id": customer_id, "coupon": None}
    code = code.strip().upper()
    if code not in state["coupons"]:
        raise ToolFailure("coupon_not_found", f"no coupon {code}; check the spelling with the customer")
    problem = _gc_coupon_problem(state, cust, code, _gc_totals(state, cust)["subtotal_cents"])
    if problem:
        raise ToolFailure(*problem)
    cust["coupon"] = code
    t = _gc_totals(state, cust)
    return {"customer_id": customer_id, "coupon": code, "discount_cents": t["discount_cents"], "total_cents": t["total_cents"]}


@tool()
def list_grocery_delivery_slots(state, day: str | None = None, only_free: bool = True) -> dict:
    """List delivery slots with their fee and remaining capacity.

    Args:
        day: only slots on this date, like "2024-06-11"; null for all days.
        only_free: hide slots that are fully booked.
    """
    out = [{"slot_id": sid, **s, "remaining": s["capacity"] - s["booked"]} for sid, s in sorted(state["slots"].items())
           if (day is None or s["day"] == day) and (s["booked"] < s["capacity"] or not only_free)]
    return {"slots": out}


@tool(effect="write", errors={"customer_not_found": "unknown customer id", "slot_not_found": "unknown slot id",
                              "slot_full": "the slot has no capacity left"})
def book_grocery_delivery_slot(state, customer_id: str, slot_id: str) -> dict:
    """Reserve a delivery slot for the customer's next order (releases a slot they had reserved before).

    Args:
        customer_id: the customer.
        slot_id: the slot, e.g. "S-12".
    """
    cust = _gc_customer(state, customer_id)
    if slot_id not in state["slots"]:
        raise ToolFailure("slot_not_found", f"no slot {slot_id}; see list_grocery_delivery_slots")
    if cust["slot_id"] == slot_id:
        return {"customer_id": customer_id, "slot_id": slot_id, "unchanged": True}
    slot = state["slots"][slot_id]
    if slot["booked"] >= slot["capacity"]:
        raise ToolFailure("slot_full", f"slot {slot_id} is fully booked; offer another slot")
    if cust["slot_id"]:
        state["slots"][cust["slot_id"]]["booked"] -= 1
    slot["booked"] += 1
    cust["slot_id"] = slot_id
    return {"customer_id": customer_id, "slot_id": slot_id, "day": slot["day"], "window": slot["window"]}


@tool(effect="write", errors={
    "customer_not_found": "unknown customer id", "cart_empty": "nothing to order",
    "no_delivery_slot": "no delivery slot reserved", "below_minimum_order": "the order is below the minimum value",
    "coupon_no_longer_valid": "the applied coupon does not apply to the cart any more",
    "insufficient_stock": "an item sold out since it was added",
    "age_verification_required": "the cart has age-restricted items"})
def checkout_grocery_cart(state, customer_id: str, age_verified: bool = False) -> dict:
    """Place the order: charges the total, takes the items from stock and empties the cart.

    Args:
        customer_id: the customer.
        age_verified: true only once the customer confirmed they are 18+; needed for alcohol.
    """
    cust = _gc_customer(state, customer_id)
    if not cust["cart"]:
        raise ToolFailure("cart_empty", "the cart is empty; add products first")
    for ln in cust["cart"]:
        p = state["products"][ln["sku"]]
        if ln["qty"] > p["stock"]:
            raise ToolFailure("insufficient_stock", f"only {p['stock']} of {ln['sku']} left; update the quantity or remove it")
    if any(state["products"][ln["sku"]]["age_restricted"] for ln in cust["cart"]) and not age_verified:
        raise ToolFailure("age_verification_required", "the cart has alcohol; confirm the customer is 18+ and pass age_verified")
    if not cust["slot_id"]:
        raise ToolFailure("no_delivery_slot", "book a delivery slot first (book_grocery_delivery_slot)")
    t = _gc_totals(state, cust)
    if t["coupon_problem"]:
        raise ToolFailure("coupon_no_longer_valid", t["coupon_problem"] + "; change the cart or remove the coupon")
    if t["subtotal_cents"] - t["discount_cents"] < state["rules"]["min_order_cents"]:
        raise ToolFailure("below_minimum_order", f"orders must be at least {state['rules']['min_order_cents']} cents "
                          f"after discounts; this one is {t['subtotal_cents'] - t['discount_cents']}")
    for ln in cust["cart"]:
        state["products"][ln["sku"]]["stock"] -= ln["qty"]
    order_id = f"GO-{state['next_order']}"
    state["next_order"] += 1
    state["orders"][order_id] = {"customer_id": customer_id, "items": t["items"], "coupon": t["coupon"],
                                 "discount_cents": t["discount_cents"], "delivery_fee_cents": t["delivery_fee_cents"],
                                 "total_cents": t["total_cents"], "slot_id": cust["slot_id"], "status": "placed"}
    cust["cart"], cust["coupon"], cust["slot_id"] = [], None, None
    return {"order_id": order_id, "total_cents": t["total_cents"], "slot_id": state["orders"][order_id]["slot_id"]}
