"""retail_orders: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("retail_orders") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _order_with(h, status):
    return next(oid for oid, o in sorted(h.state()["orders"].items()) if o["status"] == status)


def test_find_customer_by_email(h):
    assert h.ok("find_customer_by_email", {"email": "USER101@example.com"})["customer_id"] == "C-101"
    h.err("find_customer_by_email", {"email": "nobody@example.com"}, code="customer_not_found")


def test_list_customer_orders(h):
    state = h.state()
    cid = state["orders"]["O-1000"]["customer_id"]
    listed = h.ok("list_customer_orders", {"customer_id": cid})["orders"]
    assert {o["order_id"] for o in listed} == {oid for oid, o in state["orders"].items() if o["customer_id"] == cid}
    pending = h.ok("list_customer_orders", {"customer_id": cid, "status": "pending"})["orders"]
    assert all(o["status"] == "pending" for o in pending)
    h.err("list_customer_orders", {"customer_id": "C-999"}, code="customer_not_found")
    h.err("list_customer_orders", {"customer_id": cid, "status": "lost"}, kind="invalid_arguments")


def test_get_order(h):
    o = h.ok("get_order", {"order_id": "O-1000"})
    assert o["total_cents"] == sum(i["unit_price_cents"] * i["qty"] for i in o["items"])
    h.err("get_order", {"order_id": "O-1"}, code="order_not_found")
    h.err("get_order", {}, kind="invalid_arguments")


def test_cancel_order(h):
    oid = _order_with(h, "pending")
    r = h.ok("cancel_order", {"order_id": oid, "reason": "changed_mind"})
    assert r["status"] == "cancelled" and r["refunded_cents"] > 0
    assert h.state()["orders"][oid]["status"] == "cancelled"
    h.err("cancel_order", {"order_id": oid, "reason": "changed_mind"}, code="not_cancellable")
    h.err("cancel_order", {"order_id": _order_with(h, "delivered"), "reason": "changed_mind"}, code="not_cancellable")
    h.err("cancel_order", {"order_id": "O-1", "reason": "changed_mind"}, code="order_not_found")


def test_return_items(h):
    oid = _order_with(h, "delivered")
    sku = h.state()["orders"][oid]["items"][0]["sku"]
    r = h.ok("return_items", {"order_id": oid, "skus": [sku]})
    assert r["refunded_cents"] > 0
    h.err("return_items", {"order_id": oid, "skus": [sku]}, code="item_not_in_order")  # already returned
    h.err("return_items", {"order_id": _order_with(h, "pending"), "skus": [sku]}, code="not_returnable")
    before = h.state()
    h.err("return_items", {"order_id": oid, "skus": ["P-999"]}, code="item_not_in_order")
    assert h.state() == before  # a failed write changes nothing


def test_update_address(h):
    h.ok("update_address", {"customer_id": "C-100", "address": "5 Harbour Rd, Lisbon"})
    assert h.state()["customers"]["C-100"]["address"] == "5 Harbour Rd, Lisbon"
    h.err("update_address", {"customer_id": "C-100", "address": "nowhere"}, code="invalid_address")
    h.err("update_address", {"customer_id": "C-999", "address": "5 Harbour Rd, Lisbon"}, code="customer_not_found")
