"""event_tickets: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("event_tickets") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _arrange(h, change=None):
    """E-1 in 30 days (limit 2, refundable, transferable); E-2 in 3 days (not transferable); E-3 cancelled (non-refundable).
    No tickets sold; K-100 has 100000 cents in the wallet, K-101 none."""
    s = h.state()
    s["tickets"], s["holds"] = {}, {}
    for e in s["events"].values():
        for seat in e["seats"].values():
            seat.update(status="available", ticket_id=None)
        e.update(per_customer_limit=2, refundable=True, transferable=True, status="on_sale")
    s["events"]["E-1"]["date"] = "2024-07-31"
    s["events"]["E-2"].update(date="2024-07-04", transferable=False)
    s["events"]["E-3"].update(status="cancelled", refundable=False)
    s["customers"]["K-100"]["wallet_cents"] = 100000
    s["customers"]["K-101"]["wallet_cents"] = 0
    if change:
        change(s)
    h.sandbox.reset(s)
    return s


def _buy(h, customer, event, seats, method="card"):
    hold = h.ok("hold_event_seats", {"customer_id": customer, "event_id": event, "seats": seats})["hold_id"]
    return h.ok("purchase_held_seats", {"hold_id": hold, "payment_method": method})["tickets"]


def test_list_ticketed_events(h):
    s = _arrange(h)
    out = h.ok("list_ticketed_events", {})
    assert [e["event_id"] for e in out["events"]] == ["E-1", "E-2"] and out["today"] == "2024-07-01"
    assert out["events"][0]["seats_available"] == len(s["events"]["E-1"]["seats"])
    assert "seats" not in out["events"][0]
    assert [e["event_id"] for e in h.ok("list_ticketed_events", {"status": "cancelled"})["events"]] == ["E-3"]
    assert len(h.ok("list_ticketed_events", {"status": "any"})["events"]) == 3
    h.err("list_ticketed_events", {"status": "past"}, kind="invalid_arguments")


def test_get_event_seat_map(h):
    s = h.state()
    m = h.ok("get_event_seat_map", {"event_id": "E-1"})
    assert m["sections"] == ["back", "front"] and len(m["seats"]) == 12
    sold = {sid for sid, x in s["events"]["E-1"]["seats"].items() if x["status"] == "sold"}
    free = h.ok("get_event_seat_map", {"event_id": "E-1", "available_only": True})["seats"]
    assert {x["seat"] for x in free} == set(s["events"]["E-1"]["seats"]) - sold
    front = h.ok("get_event_seat_map", {"event_id": "E-1", "section": "front"})["seats"]
    assert {x["seat"][0] for x in front} == {"A", "B"}
    h.err("get_event_seat_map", {"event_id": "E-1", "section": "balcony"}, code="section_not_found")
    h.err("get_event_seat_map", {"event_id": "E-9"}, code="event_not_found")


def test_hold_event_seats(h):
    s = _arrange(h)
    r = h.ok("hold_event_seats", {"customer_id": "K-100", "event_id": "E-1", "seats": ["A1", "A2"]})
    assert r["total_cents"] == 2 * s["events"]["E-1"]["seats"]["A1"]["price_cents"]
    st = h.state()
    assert st["holds"][r["hold_id"]]["status"] == "active" and st["events"]["E-1"]["seats"]["A1"]["status"] == "held"
    h.err("hold_event_seats", {"customer_id": "K-101", "event_id": "E-1", "seats": ["A2", "A3"]}, code="seat_unavailable")
    assert h.state()["events"]["E-1"]["seats"]["A3"]["status"] == "available"  # all or nothing
    h.err("hold_event_seats", {"customer_id": "K-100", "event_id": "E-1", "seats": ["B1"]}, code="active_hold_exists")
    h.err("hold_event_seats", {"customer_id": "K-101", "event_id": "E-1", "seats": ["B1", "B2", "B3"]}, code="ticket_limit_exceeded")
    h.err("hold_event_seats", {"customer_id": "K-101", "event_id": "E-1", "seats": ["Z9"]}, code="seat_not_found")
    h.err("hold_event_seats", {"customer_id": "K-101", "event_id": "E-3", "seats": ["A1"]}, code="event_not_on_sale")
    h.err("hold_event_seats", {"customer_id": "K-101", "event_id": "E-9", "seats": ["A1"]}, code="event_not_found")
    h.err("hold_event_seats", {"customer_id": "K-999", "event_id": "E-1", "seats": ["A3"]}, code="customer_not_found")
    h.err("hold_event_seats", {"customer_id": "K-101", "event_id": "E-1", "seats": ["A3", "A3"]}, kind="invalid_arguments")
    h.err("hold_event_seats", {"customer_id": "K-101", "event_id": "E-1", "seats": []}, kind="invalid_arguments")


def test_release_seat_hold(h):
    _arrange(h)
    hold = h.ok("hold_event_seats", {"customer_id": "K-100", "event_id": "E-1", "seats": ["A1"]})["hold_id"]
    assert h.ok("release_seat_hold", {"hold_id": hold})["status"] == "released"
    s = h.state()
    assert s["holds"][hold]["status"] == "released" and s["events"]["E-1"]["seats"]["A1"]["status"] == "available"
    h.err("release_seat_hold", {"hold_id": hold}, code="hold_not_active")
    h.err("release_seat_hold", {"hold_id": "H-999"}, code="hold_not_found")
    # releasing frees the limit and allows a new hold
    h.ok("hold_event_seats", {"customer_id": "K-100", "event_id": "E-1", "seats": ["B1", "B2"]})


def test_purchase_held_seats(h):
    s = _arrange(h)
    price = s["events"]["E-1"]["seats"]["A1"]["price_cents"]
    hold = h.ok("hold_event_seats", {"customer_id": "K-100", "event_id": "E-1", "seats": ["A1"]})["hold_id"]
    r = h.ok("purchase_held_seats", {"hold_id": hold, "payment_method": "wallet"})
    assert r["charged_cents"] == price and len(r["tickets"]) == 1
    st = h.state()
    t = st["tickets"][r["tickets"][0]]
    assert t["owner"] == "K-100" and t["seat"] == "A1" and t["status"] == "valid"
    assert st["events"]["E-1"]["seats"]["A1"] == {**st["events"]["E-1"]["seats"]["A1"], "status": "sold", "ticket_id": r["tickets"][0]}
    assert st["customers"]["K-100"]["wallet_cents"] == 100000 - price and st["holds"][hold]["status"] == "purchased"
    h.err("purchase_held_seats", {"hold_id": hold, "payment_method": "card"}, code="hold_not_active")
    h.err("purchase_held_seats", {"hold_id": "H-999", "payment_method": "card"}, code="hold_not_found")
    h.err("purchase_held_seats", {"hold_id": hold, "payment_method": "cash"}, kind="invalid_arguments")
    hold2 = h.ok("hold_event_seats", {"customer_id": "K-101", "event_id": "E-1", "seats": ["A2"]})["hold_id"]
    h.err("purchase_held_seats", {"hold_id": hold2, "payment_method": "wallet"}, code="insufficient_wallet_balance")
    h.ok("purchase_held_seats", {"hold_id": hold2, "payment_method": "card"})
    # the limit counts owned tickets too
    h.err("hold_event_seats", {"customer_id": "K-100", "event_id": "E-1", "seats": ["B1", "B2"]}, code="ticket_limit_exceeded")


def test_list_customer_tickets(h):
    _arrange(h)
    tid = _buy(h, "K-100", "E-1", ["A1"])[0]
    hold = h.ok("hold_event_seats", {"customer_id": "K-100", "event_id": "E-2", "seats": ["C1"]})["hold_id"]
    out = h.ok("list_customer_tickets", {"customer_id": "K-100"})
    assert [t["ticket_id"] for t in out["tickets"]] == [tid] and [x["hold_id"] for x in out["holds"]] == [hold]
    assert out["tickets"][0]["event_name"] == h.state()["events"]["E-1"]["name"]
    assert h.ok("list_customer_tickets", {"customer_id": "K-101"})["tickets"] == []
    h.err("list_customer_tickets", {"customer_id": "K-999"}, code="customer_not_found")


def test_transfer_event_ticket(h):
    _arrange(h)
    t1, t2 = _buy(h, "K-100", "E-1", ["A1", "A2"])
    r = h.ok("transfer_event_ticket", {"ticket_id": t1, "from_customer_id": "K-100", "to_customer_id": "K-101"})
    assert r["owner"] == "K-101" and r["transfers"] == 1
    assert h.state()["tickets"][t1]["owner"] == "K-101"
    h.err("transfer_event_ticket", {"ticket_id": t1, "from_customer_id": "K-101", "to_customer_id": "K-102"},
          code="transfer_limit_reached")
    h.err("transfer_event_ticket", {"ticket_id": t2, "from_customer_id": "K-101", "to_customer_id": "K-102"},
          code="not_ticket_owner")
    h.err("transfer_event_ticket", {"ticket_id": t2, "from_customer_id": "K-100", "to_customer_id": "K-100"},
          code="same_customer")
    h.err("transfer_event_ticket", {"ticket_id": t2, "from_customer_id": "K-100", "to_customer_id": "K-999"},
          code="customer_not_found")
    h.err("transfer_event_ticket", {"ticket_id": "TK-999", "from_customer_id": "K-100", "to_customer_id": "K-101"},
          code="ticket_not_found")
    _buy(h, "K-102", "E-1", ["B1", "B2"])
    h.err("transfer_event_ticket", {"ticket_id": t2, "from_customer_id": "K-100", "to_customer_id": "K-102"},
          code="ticket_limit_exceeded")
    t3 = _buy(h, "K-100", "E-2", ["C1"])[0]
    h.err("transfer_event_ticket", {"ticket_id": t3, "from_customer_id": "K-100", "to_customer_id": "K-101"},
          code="transfer_not_allowed")
    h.ok("refund_event_ticket", {"ticket_id": t2, "customer_id": "K-100"})
    h.err("transfer_event_ticket", {"ticket_id": t2, "from_customer_id": "K-100", "to_customer_id": "K-103"},
          code="ticket_not_valid")


def test_refund_event_ticket(h):
    s = _arrange(h)
    price = s["events"]["E-1"]["seats"]["A1"]["price_cents"]
    t1, t2 = _buy(h, "K-100", "E-1", ["A1", "A2"], method="wallet")
    r = h.ok("refund_event_ticket", {"ticket_id": t1, "customer_id": "K-100"})
    assert r == {"ticket_id": t1, "refunded_cents": price, "to": "wallet"}
    st = h.state()
    assert st["tickets"][t1]["status"] == "refunded" and st["customers"]["K-100"]["wallet_cents"] == 100000 - price
    assert st["events"]["E-1"]["seats"]["A1"]["status"] == "available"
    h.err("refund_event_ticket", {"ticket_id": t1, "customer_id": "K-100"}, code="ticket_not_valid")
    h.err("refund_event_ticket", {"ticket_id": t2, "customer_id": "K-101"}, code="not_ticket_owner")
    h.err("refund_event_ticket", {"ticket_id": "TK-999", "customer_id": "K-100"}, code="ticket_not_found")
    h.ok("transfer_event_ticket", {"ticket_id": t2, "from_customer_id": "K-100", "to_customer_id": "K-101"})
    h.err("refund_event_ticket", {"ticket_id": t2, "customer_id": "K-101"}, code="transferred_ticket")
    t3 = _buy(h, "K-100", "E-2", ["C1"])[0]
    h.err("refund_event_ticket", {"ticket_id": t3, "customer_id": "K-100"}, code="refund_window_closed")
    s = h.state()
    s["events"]["E-2"].update(refundable=False, date="2024-09-01")
    h.sandbox.reset(s)
    h.err("refund_event_ticket", {"ticket_id": t3, "customer_id": "K-100"}, code="not_refundable")
    s["events"]["E-2"]["status"] = "cancelled"  # cancelled events are always refunded
    h.sandbox.reset(s)
    assert h.ok("refund_event_ticket", {"ticket_id": t3, "customer_id": "K-100"})["to"] == "card"
