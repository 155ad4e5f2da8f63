"""flight_booking: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("flight_booking") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _flight(h, status="scheduled"):
    return next(fid for fid, f in sorted(h.state()["flights"].items()) if f["status"] == status)


def _sold_out(h):
    for fid, f in sorted(h.state()["flights"].items()):
        if f["status"] == "scheduled" and not h.ok("get_flight_seat_map", {"flight_id": fid, "cabin": "business"})["free_seats"]:
            return fid
    raise AssertionError("no sold-out business cabin in the seed")


def _booking(h, fare_type=None, departed=False):
    st = h.state()
    return next(bid for bid, b in sorted(st["bookings"].items())
                if b["status"] == "confirmed" and (fare_type is None or b["fare_type"] == fare_type)
                and (st["flights"][b["flight_id"]]["status"] == "departed") == departed)


def _book(h, fare_type="standard", seat=None, cabin="economy"):
    args = {"flight_id": _flight(h), "passenger_name": "Jo Park", "passenger_email": "jo@example.com",
            "cabin": cabin, "fare_type": fare_type}
    if seat:
        args["seat"] = seat
    return h.ok("book_flight", args)


def test_search_available_flights(h):
    st = h.state()
    fid = _flight(h)
    f = st["flights"][fid]
    r = h.ok("search_available_flights", {"origin": f["origin"].lower(), "destination": f["destination"], "date": f["date"]})
    hit = next(x for x in r["flights"] if x["flight_id"] == fid)
    assert hit["prices_cents"]["standard"] == f["cabins"]["economy"]["price_cents"]
    assert hit["seats_left"] == 36 - len([s for s in f["occupied"] if int(s[:-1]) >= 10])
    dep = st["flights"][_flight(h, "departed")]
    r = h.ok("search_available_flights", {"origin": dep["origin"], "destination": dep["destination"], "date": dep["date"]})
    assert _flight(h, "departed") not in {x["flight_id"] for x in r["flights"]}
    h.err("search_available_flights", {"origin": "XXX", "destination": "MAD", "date": "2025-07-14"}, code="unknown_airport")
    h.err("search_available_flights", {"origin": "LIS", "destination": "MAD", "date": "14/07/2025"}, kind="invalid_arguments")


def test_get_flight_seat_map(h):
    fid = _flight(h)
    r = h.ok("get_flight_seat_map", {"flight_id": fid, "cabin": "business"})
    assert r["total_seats"] == 8 and not set(r["free_seats"]) & set(h.state()["flights"][fid]["occupied"])
    h.err("get_flight_seat_map", {"flight_id": "FL-99"}, code="flight_not_found")


def test_book_flight(h):
    fid = _flight(h)
    seat = h.ok("get_flight_seat_map", {"flight_id": fid})["free_seats"][-1]
    r = _book(h, "flex", seat)
    st = h.state()
    b = st["bookings"][r["booking_id"]]
    assert b["seat"] == seat and b["fare_type"] == "flex" and b["checked_bags"] == 2
    assert seat in st["flights"][fid]["occupied"]
    assert b["fare_paid_cents"] == int(st["flights"][fid]["cabins"]["economy"]["price_cents"] * 1.4)
    basic = _book(h, "basic")
    assert basic["seat"] in h.state()["flights"][fid]["occupied"] and basic["checked_bags"] == 0


def test_book_flight_errors(h):
    fid = _flight(h)
    taken = next(s for s in h.state()["flights"][fid]["occupied"] if int(s[:-1]) >= 10)  # an economy seat
    base = {"flight_id": fid, "passenger_name": "Jo Park", "passenger_email": "jo@example.com", "cabin": "economy",
            "fare_type": "standard"}
    before = h.state()
    h.err("book_flight", {**base, "flight_id": "FL-99"}, code="flight_not_found")
    h.err("book_flight", {**base, "flight_id": _flight(h, "departed")}, code="flight_not_bookable")
    h.err("book_flight", {**base, "flight_id": _sold_out(h), "cabin": "business"}, code="sold_out")
    h.err("book_flight", {**base, "fare_type": "basic", "seat": "12A"}, code="seat_selection_not_allowed")
    h.err("book_flight", {**base, "seat": "1A"}, code="invalid_seat")
    h.err("book_flight", {**base, "seat": taken}, code="seat_unavailable")
    h.err("book_flight", {**base, "fare_type": "premium"}, kind="invalid_arguments")
    assert h.state() == before


def test_find_flight_bookings(h):
    bid, b = next(iter(sorted(h.state()["bookings"].items())))
    r = h.ok("find_flight_bookings", {"passenger_email": b["passenger_email"].upper()})
    assert bid in {x["booking_id"] for x in r["bookings"]}
    h.err("find_flight_bookings", {"passenger_email": "nobody@example.com"}, code="no_bookings")


def test_get_flight_booking(h):
    bid = _booking(h, "standard")
    r = h.ok("get_flight_booking", {"booking_id": bid})
    assert r["refund_if_cancelled_cents"] == max(0, r["fare_paid_cents"] - 7500)
    h.err("get_flight_booking", {"booking_id": "BK-1"}, code="booking_not_found")


def test_change_flight_seat(h):
    r = _book(h, "standard")
    bid, old = r["booking_id"], r["seat"]
    fid = h.state()["bookings"][bid]["flight_id"]
    new = h.ok("get_flight_seat_map", {"flight_id": fid})["free_seats"][-1]
    h.ok("change_flight_seat", {"booking_id": bid, "seat": new.lower()})
    st = h.state()
    assert st["bookings"][bid]["seat"] == new
    assert new in st["flights"][fid]["occupied"] and old not in st["flights"][fid]["occupied"]
    h.err("change_flight_seat", {"booking_id": bid, "seat": new}, code="seat_unavailable")
    h.err("change_flight_seat", {"booking_id": bid, "seat": "2A"}, code="invalid_seat")
    h.err("change_flight_seat", {"booking_id": _book(h, "basic")["booking_id"], "seat": "15A"}, code="seat_selection_not_allowed")
    h.err("change_flight_seat", {"booking_id": _booking(h, departed=True), "seat": "15A"}, code="flight_departed")
    h.err("change_flight_seat", {"booking_id": "BK-1", "seat": "15A"}, code="booking_not_found")
    h.ok("cancel_flight_booking", {"booking_id": bid})
    h.err("change_flight_seat", {"booking_id": bid, "seat": "15A"}, code="booking_cancelled")


def test_add_checked_bags(h):
    bid = _book(h, "standard")["booking_id"]
    r = h.ok("add_checked_bags", {"booking_id": bid, "count": 1})
    assert r["fee_cents"] == 3500 and r["checked_bags"] == 2
    b = h.state()["bookings"][bid]
    assert b["checked_bags"] == 2 and b["bag_fees_cents"] == 3500
    h.err("add_checked_bags", {"booking_id": bid, "count": 2}, code="bag_limit_exceeded")
    h.err("add_checked_bags", {"booking_id": bid, "count": 4}, kind="invalid_arguments")
    h.err("add_checked_bags", {"booking_id": _booking(h, departed=True), "count": 1}, code="flight_departed")
    h.err("add_checked_bags", {"booking_id": "BK-1", "count": 1}, code="booking_not_found")
    h.ok("cancel_flight_booking", {"booking_id": bid})
    h.err("add_checked_bags", {"booking_id": bid, "count": 1}, code="booking_cancelled")


def test_cancel_flight_booking(h):
    std = _book(h, "standard")
    h.ok("add_checked_bags", {"booking_id": std["booking_id"], "count": 1})
    r = h.ok("cancel_flight_booking", {"booking_id": std["booking_id"]})
    assert r["refund_cents"] == max(0, std["fare_paid_cents"] - 7500) + 3500
    st = h.state()
    b = st["bookings"][std["booking_id"]]
    assert b["status"] == "cancelled" and b["refund_cents"] == r["refund_cents"]
    assert std["seat"] not in st["flights"][b["flight_id"]]["occupied"]
    flex = _book(h, "flex")
    assert h.ok("cancel_flight_booking", {"booking_id": flex["booking_id"]})["refund_cents"] == flex["fare_paid_cents"]
    basic = _book(h, "basic")
    assert h.ok("cancel_flight_booking", {"booking_id": basic["booking_id"]})["refund_cents"] == 0
    h.err("cancel_flight_booking", {"booking_id": std["booking_id"]}, code="booking_cancelled")
    h.err("cancel_flight_booking", {"booking_id": _booking(h, departed=True)}, code="flight_departed")
    h.err("cancel_flight_booking", {"booking_id": "BK-1"}, code="booking_not_found")
