"""property_maintenance: every tool, its success path, resulting state and declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("property_maintenance") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _wo_with(h, status):
    return next(wid for wid, w in sorted(h.state()["work_orders"].items()) if w["status"] == status)


def test_lookup_maintenance_tenant(h):
    t = h.state()["tenants"]["T-203"]
    r = h.ok("lookup_maintenance_tenant", {"email": t["email"].upper()})
    assert r["tenant_id"] == "T-203" and r["unit_id"] == t["unit_id"]
    h.err("lookup_maintenance_tenant", {"email": "ghost@nowhere.example"}, code="tenant_not_found")
    h.err("lookup_maintenance_tenant", {}, kind="invalid_arguments")


def test_get_rental_unit(h):
    r = h.ok("get_rental_unit", {"unit_id": "U-101"})
    assert r["tenant_id"] == "T-201" and r["open_work_orders"] == ["WO-5001"]
    assert h.ok("get_rental_unit", {"unit_id": "U-110"})["tenant_id"] is None
    h.err("get_rental_unit", {"unit_id": "U-999"}, code="unit_not_found")


def test_list_unit_work_orders(h):
    r = h.ok("list_unit_work_orders", {"unit_id": "U-104"})
    assert [w["work_order_id"] for w in r["work_orders"]] == ["WO-5004"]
    assert h.ok("list_unit_work_orders", {"unit_id": "U-104", "status": "open"})["work_orders"] == []
    h.err("list_unit_work_orders", {"unit_id": "U-999"}, code="unit_not_found")
    h.err("list_unit_work_orders", {"unit_id": "U-101", "status": "pending"}, kind="invalid_arguments")


def test_get_maintenance_work_order(h):
    r = h.ok("get_maintenance_work_order", {"work_order_id": "WO-5004"})
    assert r["status"] == "completed" and r["invoice_id"] == "INV-7001"
    h.err("get_maintenance_work_order", {"work_order_id": "WO-1"}, code="work_order_not_found")


def test_create_maintenance_work_order(h):
    args = {"tenant_id": "T-201", "unit_id": "U-101", "category": "electrical",
            "description": "bathroom fan makes a grinding noise", "priority": "low"}
    r = h.ok("create_maintenance_work_order", args)
    assert r["status"] == "open"
    w = h.state()["work_orders"][r["work_order_id"]]
    assert w["unit_id"] == "U-101" and w["category"] == "electrical" and w["created_on"] == "2025-03-10"
    h.err("create_maintenance_work_order", args, code="duplicate_open_request")
    h.err("create_maintenance_work_order", {**args, "category": "plumbing"}, code="duplicate_open_request")  # WO-5001
    h.err("create_maintenance_work_order", {**args, "tenant_id": "T-999"}, code="tenant_not_found")
    h.err("create_maintenance_work_order", {**args, "unit_id": "U-999"}, code="unit_not_found")
    h.err("create_maintenance_work_order", {**args, "unit_id": "U-102"}, code="tenant_not_in_unit")
    h.err("create_maintenance_work_order", {**args, "description": "broken"}, kind="invalid_arguments")
    h.err("create_maintenance_work_order", {**args, "category": "roofing"}, kind="invalid_arguments")


def test_find_contractors_for_trade(h):
    avail = h.ok("find_contractors_for_trade", {"trade": "plumbing"})["contractors"]
    assert [k["contractor_id"] for k in avail] == ["K-301"]
    everyone = h.ok("find_contractors_for_trade", {"trade": "plumbing", "only_available": False})["contractors"]
    assert {k["contractor_id"] for k in everyone} == {"K-301", "K-306"}
    h.err("find_contractors_for_trade", {"trade": "magic"}, kind="invalid_arguments")


def test_assign_maintenance_contractor(h):
    r = h.ok("assign_maintenance_contractor", {"work_order_id": "WO-5001", "contractor_id": "K-301"})
    assert r["status"] == "assigned"
    w = h.state()["work_orders"]["WO-5001"]
    assert w["status"] == "assigned" and w["contractor_id"] == "K-301"
    # K-301 now has two active jobs: at the limit
    assert h.ok("find_contractors_for_trade", {"trade": "plumbing"})["contractors"] == []
    h.err("assign_maintenance_contractor", {"work_order_id": "WO-5001", "contractor_id": "K-301"}, code="invalid_status")
    h.err("assign_maintenance_contractor", {"work_order_id": "WO-5002", "contractor_id": "K-301"}, code="trade_mismatch")
    h.err("assign_maintenance_contractor", {"work_order_id": "WO-5002", "contractor_id": "K-999"}, code="contractor_not_found")
    h.err("assign_maintenance_contractor", {"work_order_id": "WO-9", "contractor_id": "K-302"}, code="work_order_not_found")
    h.reset()
    h.err("assign_maintenance_contractor", {"work_order_id": "WO-5001", "contractor_id": "K-306"}, code="contractor_unavailable")
    assert h.state()["work_orders"]["WO-5001"]["status"] == "open"


def test_complete_maintenance_work_order(h):
    r = h.ok("complete_maintenance_work_order", {"work_order_id": "WO-5003", "hours": 2.5, "materials_cents": 3000,
                                                 "tenant_damage": True, "notes": "replaced thermostat"})
    assert r["status"] == "completed"
    w = h.state()["work_orders"]["WO-5003"]
    assert w["hours"] == 2.5 and w["materials_cents"] == 3000 and w["tenant_damage"] is True
    h.err("complete_maintenance_work_order", {"work_order_id": "WO-5003", "hours": 1}, code="invalid_status")
    h.err("complete_maintenance_work_order", {"work_order_id": "WO-5001", "hours": 1}, code="invalid_status")
    h.err("complete_maintenance_work_order", {"work_order_id": "WO-0", "hours": 1}, code="work_order_not_found")
    h.err("complete_maintenance_work_order", {"work_order_id": "WO-5006", "hours": 0}, kind="invalid_arguments")
    h.err("complete_maintenance_work_order", {"work_order_id": "WO-5006", "hours": 1, "materials_cents": -5},
          kind="invalid_arguments")


def test_cancel_maintenance_work_order(h):
    r = h.ok("cancel_maintenance_work_order", {"work_order_id": "WO-5006", "reason": "resolved_by_tenant"})
    assert r["released_contractor_id"] == "K-301"
    w = h.state()["work_orders"]["WO-5006"]
    assert w["status"] == "cancelled" and w["contractor_id"] is None and w["cancel_reason"] == "resolved_by_tenant"
    h.err("cancel_maintenance_work_order", {"work_order_id": "WO-5006", "reason": "duplicate"}, code="invalid_status")
    h.err("cancel_maintenance_work_order", {"work_order_id": "WO-5004", "reason": "duplicate"}, code="invalid_status")
    h.err("cancel_maintenance_work_order", {"work_order_id": "WO-1", "reason": "duplicate"}, code="work_order_not_found")
    h.err("cancel_maintenance_work_order", {"work_order_id": "WO-5001", "reason": "bored"}, kind="invalid_arguments")


def test_issue_maintenance_invoice(h):
    s = h.state()
    w = s["work_orders"]["WO-5005"]
    expected = int(round(w["hours"] * s["contractors"]["K-305"]["hourly_rate_cents"])) + w["materials_cents"]
    r = h.ok("issue_maintenance_invoice", {"work_order_id": "WO-5005"})
    assert r["amount_cents"] == expected and r["bill_to"] == "tenant"  # WO-5005 recorded tenant damage
    s = h.state()
    assert s["work_orders"]["WO-5005"]["invoice_id"] == r["invoice_id"]
    assert s["invoices"][r["invoice_id"]]["status"] == "unpaid"
    h.err("issue_maintenance_invoice", {"work_order_id": "WO-5005"}, code="already_invoiced")
    h.err("issue_maintenance_invoice", {"work_order_id": "WO-5001"}, code="not_completed")
    h.err("issue_maintenance_invoice", {"work_order_id": "WO-77"}, code="work_order_not_found")


def test_pay_maintenance_invoice(h):
    amount = h.state()["invoices"]["INV-7001"]["amount_cents"]
    h.err("pay_maintenance_invoice", {"invoice_id": "INV-7001", "amount_cents": amount - 1}, code="amount_mismatch")
    r = h.ok("pay_maintenance_invoice", {"invoice_id": "INV-7001", "amount_cents": amount})
    assert r["status"] == "paid"
    assert h.state()["invoices"]["INV-7001"]["paid_cents"] == amount
    h.err("pay_maintenance_invoice", {"invoice_id": "INV-7001", "amount_cents": amount}, code="already_paid")
    h.err("pay_maintenance_invoice", {"invoice_id": "INV-1", "amount_cents": 100}, code="invoice_not_found")
    h.err("pay_maintenance_invoice", {"invoice_id": "INV-7001", "amount_cents": 0}, kind="invalid_arguments")
