"""parcel_shipping: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("parcel_shipping") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _rich_account(h):
    return max(h.state()["accounts"].items(), key=lambda kv: kv[1]["credit_cents"])[0]


def _poor_account(h):
    return min(h.state()["accounts"].items(), key=lambda kv: kv[1]["credit_cents"])[0]


def _shipment(h, status, account_id=None):
    return next(tn for tn, s in sorted(h.state()["shipments"].items())
                if s["status"] == status and account_id in (None, s["account_id"]))


def _new_label(h):
    aid = _rich_account(h)
    home = h.state()["accounts"][aid]["home_postal_code"]
    return h.ok("create_parcel_shipment", {"account_id": aid, "from_postal_code": home, "to_postal_code": "10001",
                                           "recipient_name": "Jo Park", "to_address": "12 Pine St", "weight_kg": 2.5,
                                           "service": "ground", "declared_value_cents": 8000})["tracking_number"]


def test_get_parcel_quote(h):
    st = h.state()
    svc, zones = st["services"]["express"], st["zones"]
    q = h.ok("get_parcel_quote", {"from_postal_code": "10001", "to_postal_code": "94105", "weight_kg": 2.2, "service": "express"})
    assert q["price_cents"] == svc["base_cents"] + 3 * svc["per_kg_cents"] + abs(zones["10001"] - zones["94105"]) * svc["per_zone_cents"]
    assert q["transit_days"] == svc["transit_days"]
    h.err("get_parcel_quote", {"from_postal_code": "10001", "to_postal_code": "00000", "weight_kg": 1, "service": "ground"},
          code="unserviceable_postal_code")
    h.err("get_parcel_quote", {"from_postal_code": "10001", "to_postal_code": "94105", "weight_kg": 20, "service": "overnight"},
          code="overweight_for_service")
    h.err("get_parcel_quote", {"from_postal_code": "10001", "to_postal_code": "94105", "weight_kg": 80, "service": "ground"},
          kind="invalid_arguments")
    h.err("get_parcel_quote", {"from_postal_code": "10001", "to_postal_code": "94105", "weight_kg": 1, "service": "drone"},
          kind="invalid_arguments")


def test_create_parcel_shipment(h):
    aid = _rich_account(h)
    credit = h.state()["accounts"][aid]["credit_cents"]
    tn = _new_label(h)
    st = h.state()
    s = st["shipments"][tn]
    assert s["status"] == "label_created" and s["account_id"] == aid
    assert st["accounts"][aid]["credit_cents"] == credit - s["cost_cents"]
    base = {"account_id": aid, "from_postal_code": "10001", "to_postal_code": "19104", "recipient_name": "Jo Park",
            "to_address": "12 Pine St", "weight_kg": 1.0, "service": "ground"}
    h.err("create_parcel_shipment", {**base, "account_id": "SA-1"}, code="account_not_found")
    h.err("create_parcel_shipment", {**base, "to_postal_code": "99999"}, code="unserviceable_postal_code")
    h.err("create_parcel_shipment", {**base, "weight_kg": 35.0, "service": "express"}, code="overweight_for_service")
    h.err("create_parcel_shipment", {**base, "account_id": _poor_account(h)}, code="insufficient_credit")
    h.err("create_parcel_shipment", {**base, "recipient_name": "J"}, kind="invalid_arguments")


def test_track_parcel(h):
    tn = _shipment(h, "delivered")
    r = h.ok("track_parcel", {"tracking_number": tn.lower()})
    assert r["tracking_number"] == tn and r["status"] == "delivered" and r["events"][-1]["status"] == "delivered"
    h.err("track_parcel", {"tracking_number": "PX0"}, code="shipment_not_found")


def test_get_shipping_account(h):
    r = h.ok("get_shipping_account", {"account_id": "SA-300"})
    assert r["credit_cents"] == h.state()["accounts"]["SA-300"]["credit_cents"]
    h.err("get_shipping_account", {"account_id": "SA-1"}, code="account_not_found")


def test_list_parcel_shipments(h):
    st = h.state()
    listed = h.ok("list_parcel_shipments", {"account_id": "SA-302"})["shipments"]
    assert {s["tracking_number"] for s in listed} == {tn for tn, s in st["shipments"].items() if s["account_id"] == "SA-302"}
    delivered = h.ok("list_parcel_shipments", {"account_id": "SA-302", "status": "delivered"})["shipments"]
    assert all(s["status"] == "delivered" for s in delivered)
    h.err("list_parcel_shipments", {"account_id": "SA-1"}, code="account_not_found")
    h.err("list_parcel_shipments", {"account_id": "SA-302", "status": "lost"}, kind="invalid_arguments")


def test_reroute_parcel(h):
    tn = _shipment(h, "in_transit")
    before = h.state()
    aid = before["shipments"][tn]["account_id"]
    r = h.ok("reroute_parcel", {"tracking_number": tn, "new_postal_code": "60601", "new_address": "8 Lake Shore Dr"})
    st = h.state()
    assert st["shipments"][tn]["to_postal_code"] == "60601" and st["shipments"][tn]["reroutes"] == 1
    assert st["accounts"][aid]["credit_cents"] == before["accounts"][aid]["credit_cents"] - r["fee_cents"]
    h.err("reroute_parcel", {"tracking_number": tn, "new_postal_code": "10001", "new_address": "1 Broadway"},
          code="reroute_limit_reached")
    h.err("reroute_parcel", {"tracking_number": _shipment(h, "out_for_delivery"), "new_postal_code": "10001",
                             "new_address": "1 Broadway"}, code="reroute_not_allowed")
    h.err("reroute_parcel", {"tracking_number": _new_label(h), "new_postal_code": "00000", "new_address": "1 Broadway"},
          code="unserviceable_postal_code")
    poor = _shipment(h, "label_created", _poor_account(h))
    h.err("reroute_parcel", {"tracking_number": poor, "new_postal_code": "10001", "new_address": "1 Broadway"},
          code="insufficient_credit")
    h.err("reroute_parcel", {"tracking_number": "PX0", "new_postal_code": "10001", "new_address": "1 Broadway"},
          code="shipment_not_found")


def test_cancel_shipping_label(h):
    tn = _new_label(h)
    aid = h.state()["shipments"][tn]["account_id"]
    credit = h.state()["accounts"][aid]["credit_cents"]
    r = h.ok("cancel_shipping_label", {"tracking_number": tn})
    st = h.state()
    assert st["shipments"][tn]["status"] == "cancelled"
    assert st["accounts"][aid]["credit_cents"] == credit + r["refunded_cents"]
    h.err("cancel_shipping_label", {"tracking_number": tn}, code="label_not_cancellable")
    h.err("cancel_shipping_label", {"tracking_number": _shipment(h, "in_transit")}, code="label_not_cancellable")
    h.err("cancel_shipping_label", {"tracking_number": "PX0"}, code="shipment_not_found")


def test_file_parcel_claim(h):
    st = h.state()
    delivered = next(tn for tn, s in sorted(st["shipments"].items()) if s["status"] == "delivered" and s["declared_value_cents"] > 0)
    value = st["shipments"][delivered]["declared_value_cents"]
    h.err("file_parcel_claim", {"tracking_number": delivered, "claim_type": "damaged", "amount_cents": value + 1,
                                "description": "box crushed"}, code="claim_exceeds_declared_value")
    r = h.ok("file_parcel_claim", {"tracking_number": delivered, "claim_type": "damaged", "amount_cents": value,
                                   "description": "box crushed"})
    assert h.state()["claims"][r["claim_id"]]["tracking_number"] == delivered
    h.err("file_parcel_claim", {"tracking_number": delivered, "claim_type": "damaged", "amount_cents": 1,
                                "description": "again"}, code="claim_already_filed")
    h.err("file_parcel_claim", {"tracking_number": delivered, "claim_type": "lost", "amount_cents": 1,
                                "description": "never came"}, code="claim_already_filed")
    lost = max(st["shipments"].items(), key=lambda kv: kv[1]["days_in_transit"])[0]
    h.ok("file_parcel_claim", {"tracking_number": lost, "claim_type": "lost", "amount_cents": 100, "description": "never arrived"})
    h.err("file_parcel_claim", {"tracking_number": _shipment(h, "out_for_delivery"), "claim_type": "damaged", "amount_cents": 1,
                                "description": "dented"}, code="claim_not_allowed")
    h.err("file_parcel_claim", {"tracking_number": _shipment(h, "label_created"), "claim_type": "lost", "amount_cents": 1,
                                "description": "it is gone"}, code="claim_not_allowed")
    h.err("file_parcel_claim", {"tracking_number": "PX0", "claim_type": "lost", "amount_cents": 1, "description": "gone!"},
          code="shipment_not_found")
    h.err("file_parcel_claim", {"tracking_number": lost, "claim_type": "stolen", "amount_cents": 1, "description": "gone!"},
          kind="invalid_arguments")
