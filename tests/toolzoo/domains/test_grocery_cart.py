"""grocery_cart: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("grocery_cart") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _arrange(h, change=None):
    """A predictable shop: every product 10 in stock (max 6 per order), empty carts, two slots."""
    s = h.state()
    for p in s["products"].values():
        p["stock"], p["max_per_order"] = 10, 6
    for c in s["customers"].values():
        c.update(cart=[], coupon=None, slot_id=None, member=False)
    s["customers"]["G-100"]["member"] = True
    s["products"]["SKU-100"]["price_cents"] = 1000  # milk, dairy
    s["products"]["SKU-106"]["price_cents"] = 500   # apples, produce
    s["products"]["SKU-112"]["price_cents"] = 1000  # red wine, alcohol
    for slot in s["slots"].values():
        slot.update(capacity=2, booked=0, fee_cents=300)
    s["slots"]["S-12"]["booked"] = 2
    if change:
        change(s)
    h.sandbox.reset(s)
    return s


def _cart(h, cid="G-100"):
    return h.state()["customers"][cid]["cart"]


def test_search_grocery_products(h):
    out = h.ok("search_grocery_products", {"query": "MILK"})["products"]
    assert [p["sku"] for p in out] == ["SKU-100"]
    produce = h.ok("search_grocery_products", {"category": "produce"})["products"]
    assert produce and all(p["category"] == "produce" for p in produce)
    in_stock = h.ok("search_grocery_products", {"in_stock_only": True})["products"]
    assert all(p["stock"] > 0 for p in in_stock)
    assert len(h.ok("search_grocery_products", {})["products"]) == len(h.state()["products"])
    h.err("search_grocery_products", {"category": "toys"}, kind="invalid_arguments")


def test_add_to_grocery_cart(h):
    _arrange(h)
    h.ok("add_to_grocery_cart", {"customer_id": "G-100", "sku": "SKU-100", "qty": 2})
    r = h.ok("add_to_grocery_cart", {"customer_id": "G-100", "sku": "SKU-100", "qty": 3})
    assert r["qty"] == 5 and _cart(h) == [{"sku": "SKU-100", "qty": 5}]
    h.err("add_to_grocery_cart", {"customer_id": "G-100", "sku": "SKU-100", "qty": 2}, code="per_order_limit")
    h.err("add_to_grocery_cart", {"customer_id": "G-999", "sku": "SKU-100"}, code="customer_not_found")
    h.err("add_to_grocery_cart", {"customer_id": "G-100", "sku": "SKU-999"}, code="product_not_found")
    h.err("add_to_grocery_cart", {"customer_id": "G-100", "sku": "SKU-101", "qty": 0}, kind="invalid_arguments")
    _arrange(h, lambda s: s["products"]["SKU-101"].update(stock=1))
    h.err("add_to_grocery_cart", {"customer_id": "G-100", "sku": "SKU-101", "qty": 2}, code="insufficient_stock")
    assert _cart(h) == []


def test_view_grocery_cart(h):
    _arrange(h, lambda s: s["customers"]["G-100"].update(cart=[{"sku": "SKU-100", "qty": 2}, {"sku": "SKU-106", "qty": 1}]))
    v = h.ok("view_grocery_cart", {"customer_id": "G-100"})
    assert v["subtotal_cents"] == 2500 and v["total_cents"] == 2500 and v["discount_cents"] == 0
    assert [i["line_cents"] for i in v["items"]] == [2000, 500]
    h.err("view_grocery_cart", {"customer_id": "G-999"}, code="customer_not_found")


def test_update_grocery_cart_quantity(h):
    _arrange(h, lambda s: s["customers"]["G-100"].update(cart=[{"sku": "SKU-100", "qty": 2}, {"sku": "SKU-106", "qty": 1}]))
    h.ok("update_grocery_cart_quantity", {"customer_id": "G-100", "sku": "SKU-100", "qty": 4})
    assert _cart(h)[0] == {"sku": "SKU-100", "qty": 4}
    h.ok("update_grocery_cart_quantity", {"customer_id": "G-100", "sku": "SKU-106", "qty": 0})
    assert _cart(h) == [{"sku": "SKU-100", "qty": 4}]
    h.err("update_grocery_cart_quantity", {"customer_id": "G-100", "sku": "SKU-106", "qty": 1}, code="not_in_cart")
    h.err("update_grocery_cart_quantity", {"customer_id": "G-100", "sku": "SKU-100", "qty": 7}, code="per_order_limit")
    h.err("update_grocery_cart_quantity", {"customer_id": "G-999", "sku": "SKU-100", "qty": 1}, code="customer_not_found")
    _arrange(h, lambda s: (s["customers"]["G-100"].update(cart=[{"sku": "SKU-100", "qty": 1}]),
                           s["products"]["SKU-100"].update(stock=3)))
    h.err("update_grocery_cart_quantity", {"customer_id": "G-100", "sku": "SKU-100", "qty": 4}, code="insufficient_stock")


def test_remove_from_grocery_cart(h):
    _arrange(h, lambda s: s["customers"]["G-100"].update(cart=[{"sku": "SKU-100", "qty": 2}]))
    h.ok("remove_from_grocery_cart", {"customer_id": "G-100", "sku": "SKU-100"})
    assert _cart(h) == []
    h.err("remove_from_grocery_cart", {"customer_id": "G-100", "sku": "SKU-100"}, code="not_in_cart")
    h.err("remove_from_grocery_cart", {"customer_id": "G-999", "sku": "SKU-100"}, code="customer_not_found")


def test_apply_grocery_coupon(h):
    _arrange(h, lambda s: s["customers"]["G-100"].update(cart=[{"sku": "SKU-100", "qty": 2}]))
    h.err("apply_grocery_coupon", {"customer_id": "G-100", "code": "WELCOME5"}, code="min_subtotal_not_met")
    h.err("apply_grocery_coupon", {"customer_id": "G-100", "code": "FRESH10"}, code="no_eligible_items")
    h.err("apply_grocery_coupon", {"customer_id": "G-100", "code": "SPRING20"}, code="coupon_expired")
    h.err("apply_grocery_coupon", {"customer_id": "G-100", "code": "NOPE"}, code="coupon_not_found")
    h.err("apply_grocery_coupon", {"customer_id": "G-999", "code": "WELCOME5"}, code="customer_not_found")
    r = h.ok("apply_grocery_coupon", {"customer_id": "G-100", "code": "member15"})
    assert r["coupon"] == "MEMBER15" and r["discount_cents"] == 300 and r["total_cents"] == 1700
    assert h.state()["customers"]["G-100"]["coupon"] == "MEMBER15"
    h.ok("add_to_grocery_cart", {"customer_id": "G-100", "sku": "SKU-106", "qty": 2})
    r = h.ok("apply_grocery_coupon", {"customer_id": "G-100", "code": "FRESH10"})
    assert r["discount_cents"] == 100  # 10% of the produce only
    h.ok("apply_grocery_coupon", {"customer_id": "G-100", "code": None})
    assert h.state()["customers"]["G-100"]["coupon"] is None
    _arrange(h, lambda s: s["customers"]["G-101"].update(cart=[{"sku": "SKU-100", "qty": 3}]))
    h.err("apply_grocery_coupon", {"customer_id": "G-101", "code": "MEMBER15"}, code="members_only")


def test_list_grocery_delivery_slots(h):
    _arrange(h)
    free = h.ok("list_grocery_delivery_slots", {})["slots"]
    assert "S-12" not in {s["slot_id"] for s in free} and all(s["remaining"] > 0 for s in free)
    day = h.ok("list_grocery_delivery_slots", {"day": "2024-06-12", "only_free": False})["slots"]
    assert len(day) == 3 and all(s["day"] == "2024-06-12" for s in day)
    h.err("list_grocery_delivery_slots", {"day": 12}, kind="invalid_arguments")


def test_book_grocery_delivery_slot(h):
    _arrange(h)
    h.ok("book_grocery_delivery_slot", {"customer_id": "G-100", "slot_id": "S-11"})
    s = h.state()
    assert s["customers"]["G-100"]["slot_id"] == "S-11" and s["slots"]["S-11"]["booked"] == 1
    h.ok("book_grocery_delivery_slot", {"customer_id": "G-100", "slot_id": "S-13"})
    s = h.state()
    assert s["slots"]["S-11"]["booked"] == 0 and s["slots"]["S-13"]["booked"] == 1
    h.err("book_grocery_delivery_slot", {"customer_id": "G-100", "slot_id": "S-12"}, code="slot_full")
    h.err("book_grocery_delivery_slot", {"customer_id": "G-100", "slot_id": "S-99"}, code="slot_not_found")
    h.err("book_grocery_delivery_slot", {"customer_id": "G-999", "slot_id": "S-11"}, code="customer_not_found")


def test_checkout_grocery_cart(h):
    _arrange(h, lambda s: s["customers"]["G-100"].update(cart=[{"sku": "SKU-100", "qty": 2}, {"sku": "SKU-112", "qty": 1}]))
    h.err("checkout_grocery_cart", {"customer_id": "G-101"}, code="cart_empty")
    h.err("checkout_grocery_cart", {"customer_id": "G-100"}, code="age_verification_required")
    h.err("checkout_grocery_cart", {"customer_id": "G-100", "age_verified": True}, code="no_delivery_slot")
    h.ok("book_grocery_delivery_slot", {"customer_id": "G-100", "slot_id": "S-11"})
    h.ok("apply_grocery_coupon", {"customer_id": "G-100", "code": "WELCOME5"})
    h.ok("update_grocery_cart_quantity", {"customer_id": "G-100", "sku": "SKU-112", "qty": 0})
    h.err("checkout_grocery_cart", {"customer_id": "G-100"}, code="coupon_no_longer_valid")
    h.ok("apply_grocery_coupon", {"customer_id": "G-100", "code": None})
    r = h.ok("checkout_grocery_cart", {"customer_id": "G-100"})
    assert r["total_cents"] == 2000 + 300
    s = h.state()
    assert s["orders"][r["order_id"]]["total_cents"] == 2300 and s["orders"][r["order_id"]]["slot_id"] == "S-11"
    assert s["products"]["SKU-100"]["stock"] == 8
    assert s["customers"]["G-100"] == {**s["customers"]["G-100"], "cart": [], "coupon": None, "slot_id": None}
    h.err("checkout_grocery_cart", {"customer_id": "G-999"}, code="customer_not_found")


def test_checkout_minimum_and_stock(h):
    def change(s):
        s["customers"]["G-100"].update(cart=[{"sku": "SKU-106", "qty": 2}], slot_id="S-11")
        s["customers"]["G-101"].update(cart=[{"sku": "SKU-100", "qty": 5}], slot_id="S-11")
        s["products"]["SKU-100"]["stock"] = 4

    _arrange(h, change)
    h.err("checkout_grocery_cart", {"customer_id": "G-100"}, code="below_minimum_order")
    h.err("checkout_grocery_cart", {"customer_id": "G-101"}, code="insufficient_stock")
    # free delivery above the threshold
    _arrange(h, lambda s: s["customers"]["G-100"].update(cart=[{"sku": "SKU-100", "qty": 6}, {"sku": "SKU-106", "qty": 1}],
                                                        slot_id="S-11"))
    assert h.ok("checkout_grocery_cart", {"customer_id": "G-100"})["total_cents"] == 6500
