from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

Cabin = Literal["economy", "business"]


def _flight(state, flight_id):
    if flight_id not in state["flights"]:
        raise ToolFailure("flight_not_found", f"no flight {flight_id}; search with search_available_flights")
    return state["flights"][flight_id]


def _booking(state, booking_id):
    if booking_id not in state["bookings"]:
        raise ToolFailure("booking_not_found", f"no booking {booking_id}; look it up with find_flight_bookings")
    b = state["bookings"][booking_id]
    return b


def _cabin_seats(flight, cabin):
    c = flight["cabins"][cabin]
    return [f"{r}{x}" for r in range(c["rows"][0], c["rows"][1] + 1) for x in c["letters"]]


def _free_seats(flight, cabin):
    return [s for s in _cabin_seats(flight, cabin) if s not in flight["occupied"]]


def _check_seat(flight, cabin, seat):
    if seat not in _cabin_seats(flight, cabin):
        raise ToolFailure("invalid_seat", f"{seat} is not a {cabin} seat on this flight; see get_flight_seat_map")
    if seat in flight["occupied"]:
        raise ToolFailure("seat_unavailable", f"seat {seat} is taken; pick a free one from get_flight_seat_map")


def _live(state, b, booking_id):
    if b["status"] == "cancelled":
        raise ToolFailure("booking_cancelled", f"booking {booking_id} is cancelled")
    if state["flights"][b["flight_id"]]["status"] != "scheduled":
        raise ToolFailure("flight_departed", f"the flight of {booking_id} has already departed; it can no longer be changed")


def _refund(state, b):
    rule = state["fare_rules"][b["fare_type"]]
    if rule["cancel_fee_cents"] is None:
        fare = 0
    else:
        fare = max(0, b["fare_paid_cents"] - rule["cancel_fee_cents"])
    return fare + b["bag_fees_cents"]


@tool(errors={"unknown_airport": "an airport code is not served"})
def search_available_flights(state, origin: str, destination: str, date: Annotated[str, {"pattern": "^\\d{4}-\\d{2}-\\d{2}$"}],
                             cabin: Cabin = "economy") -> dict:
    """Find scheduled flights between two airports on a date, with free seats and prices per fare type.

    Args:
        origin: departure airport code, e.g. "LIS".
        destination: arrival airport code, e.g. "MAD".
        date: travel date, YYYY-MM-DD.
        cabin: cabin to price and count seats for.
    """
    o, d = origin.strip().upper(), destination.strip().upper()
    for code in (o, d):
        if code not in state["airports"]:
            raise ToolFailure("unknown_airport", f"we do not fly to or from {code}; served: {', '.join(state['airports'])}")
    out = []
    for fid, f in sorted(state["flights"].items()):
        if f["origin"] == o and f["destination"] == d and f["date"] == date and f["status"] == "scheduled":
            base = f["cabins"][cabin]["price_cents"]
            out.append({"flight_id": fid, "flight_no": f["flight_no"], "depart": f["depart"], "arrive": f["arrive"],
                        "cabin": cabin, "seats_left": len(_free_seats(f, cabin)),
                        "prices_cents": {ft: int(base * r["price_factor"]) for ft, r in state["fare_rules"].items()}})
    return {"flights": out, "fare_rules": state["fare_rules"]}


@tool(errors={"flight_not_found": "unknown flight id"})
def get_flight_seat_map(state, flight_id: str, cabin: Cabin = "economy") -> dict:
    """List the free seats of a cabin on a flight.

    Args:
        flight_id: the flight, e.g. "FL-03".
        cabin: which cabin.
    """
    f = _flight(state, flight_id)
    return {"flight_id": flight_id, "cabin": cabin, "free_seats": _free_seats(f, cabin), "total_seats": len(_cabin_seats(f, cabin))}


@tool(effect="write", errors={
    "flight_not_found": "unknown flight id", "flight_not_bookable": "the flight has departed",
    "sold_out": "no free seat left in the cabin", "seat_selection_not_allowed": "basic fares cannot choose a seat",
    "invalid_seat": "the seat is not in this cabin", "seat_unavailable": "the seat is taken",
})
def book_flight(state, flight_id: str, passenger_name: Annotated[str, {"minLength": 2}], passenger_email: str,
                cabin: Cabin, fare_type: Literal["basic", "standard", "flex"], seat: str | None = None) -> dict:
    """Book one passenger on a flight. Basic fares get an automatically assigned seat; other fares may choose one.

    Args:
        flight_id: the flight, e.g. "FL-03".
        passenger_name: the passenger's full name as on their passport.
        passenger_email: the passenger's email for the booking.
        cabin: economy or business.
        fare_type: basic, standard or flex (see fare_rules from search_available_flights).
        seat: a free seat like "12C" (standard and flex only); omit to have one assigned.
    """
    f = _flight(state, flight_id)
    if f["status"] != "scheduled":
        raise ToolFailure("flight_not_bookable", f"flight {flight_id} has {f['status']}; it can no longer be booked")
    free = _free_seats(f, cabin)
    if not free:
        raise ToolFailure("sold_out", f"{cabin} on {flight_id} is sold out; offer the other cabin or another flight")
    rule = state["fare_rules"][fare_type]
    if seat is not None:
        if not rule["seat_selection"]:
            raise ToolFailure("seat_selection_not_allowed", "basic fares cannot choose a seat; omit seat or pick a standard/flex fare")
        seat = seat.strip().upper()
        _check_seat(f, cabin, seat)
    else:
        seat = free[0]
    bid = f"BK-{state['next_booking_no']}"
    state["next_booking_no"] += 1
    f["occupied"] = sorted(f["occupied"] + [seat])
    price = int(f["cabins"][cabin]["price_cents"] * rule["price_factor"])
    state["bookings"][bid] = {"flight_id": flight_id, "passenger_name": passenger_name, "passenger_email": passenger_email.strip().lower(),
                              "cabin": cabin, "fare_type": fare_type, "seat": seat, "checked_bags": rule["free_bags"],
                              "fare_paid_cents": price, "bag_fees_cents": 0, "status": "confirmed", "refund_cents": 0}
    return {"booking_id": bid, "seat": seat, "fare_paid_cents": price, "checked_bags": rule["free_bags"]}


@tool(errors={"no_bookings": "no booking has this email"})
def find_flight_bookings(state, passenger_email: str) -> dict:
    """List the bookings made with an email address.

    Args:
        passenger_email: the email on the booking.
    """
    found = [{"booking_id": bid, "flight_id": b["flight_id"], "status": b["status"], "passenger_name": b["passenger_name"]}
             for bid, b in sorted(state["bookings"].items()) if b["passenger_email"] == passenger_email.strip().lower()]
    if not found:
        raise ToolFailure("no_bookings", f"no bookings for {passenger_email}; ask for the booking id instead")
    return {"bookings": found}


@tool(errors={"booking_not_found": "unknown booking id"})
def get_flight_booking(state, booking_id: str) -> dict:
    """Show a booking with its flight, seat, bags, payments, fare rules and what cancelling now would refund.

    Args:
        booking_id: the booking, e.g. "BK-4002".
    """
    b = _booking(state, booking_id)
    f = state["flights"][b["flight_id"]]
    out = {"booking_id": booking_id, **b, "flight": {k: f[k] for k in ("flight_no", "origin", "destination", "date", "depart", "status")},
           "fare_rules": state["fare_rules"][b["fare_type"]]}
    if b["status"] == "confirmed":
        out["refund_if_cancelled_cents"] = _refund(state, b)
    return out


@tool(effect="write", errors={"booking_not_found": "unknown booking id", "booking_cancelled": "the booking is cancelled",
                              "flight_departed": "the flight has departed",
                              "seat_selection_not_allowed": "basic fares cannot change seats",
                              "invalid_seat": "the seat is not in the booked cabin", "seat_unavailable": "the seat is taken"})
def change_flight_seat(state, booking_id: str, seat: str) -> dict:
    """Move a standard or flex booking to another free seat in the same cabin.

    Args:
        booking_id: the booking.
        seat: the new seat, e.g. "14A".
    """
    b = _booking(state, booking_id)
    _live(state, b, booking_id)
    if not state["fare_rules"][b["fare_type"]]["seat_selection"]:
        raise ToolFailure("seat_selection_not_allowed", "basic fares cannot change seats")
    f = state["flights"][b["flight_id"]]
    seat = seat.strip().upper()
    _check_seat(f, b["cabin"], seat)
    f["occupied"] = sorted([s for s in f["occupied"] if s != b["seat"]] + [seat])
    old, b["seat"] = b["seat"], seat
    return {"booking_id": booking_id, "old_seat": old, "seat": seat}


@tool(effect="write", errors={"booking_not_found": "unknown booking id", "booking_cancelled": "the booking is cancelled",
                              "flight_departed": "the flight has departed",
                              "bag_limit_exceeded": "more than the maximum checked bags"})
def add_checked_bags(state, booking_id: str, count: Annotated[int, {"minimum": 1, "maximum": 3}]) -> dict:
    """Add checked bags to a booking. Bags within the fare's allowance are free; extra ones are charged.

    Args:
        booking_id: the booking.
        count: how many bags to add (1-3).
    """
    b = _booking(state, booking_id)
    _live(state, b, booking_id)
    total = b["checked_bags"] + count
    if total > state["max_checked_bags"]:
        raise ToolFailure("bag_limit_exceeded", f"the booking has {b['checked_bags']} bags; at most {state['max_checked_bags']} are allowed")
    allowance = state["fare_rules"][b["fare_type"]]["free_bags"]
    chargeable = max(0, total - max(allowance, b["checked_bags"]))
    fee = chargeable * state["extra_bag_cents"]
    b["checked_bags"] = total
    b["bag_fees_cents"] += fee
    return {"booking_id": booking_id, "checked_bags": total, "fee_cents": fee}


@tool(effect="write", errors={"booking_not_found": "unknown booking id", "booking_cancelled": "already cancelled",
                              "flight_departed": "the flight has departed"})
def cancel_flight_booking(state, booking_id: str) -> dict:
    """Cancel a booking and refund per the fare rules (basic: bag fees only; standard: fare minus fee; flex: all).

    Args:
        booking_id: the booking to cancel.
    """
    b = _booking(state, booking_id)
    _live(state, b, booking_id)
    refund = _refund(state, b)
    f = state["flights"][b["flight_id"]]
    f["occupied"] = [s for s in f["occupied"] if s != b["seat"]]
    b["status"], b["refund_cents"] = "cancelled", refund
    return {"booking_id": booking_id, "status": "cancelled", "refund_cents": refund}
