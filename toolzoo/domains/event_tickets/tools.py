import datetime
from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool


def _tix_customer(state, customer_id):
    if customer_id not in state["customers"]:
        raise ToolFailure("customer_not_found", f"no customer {customer_id}; ask for the customer id (like K-101)")
    return state["customers"][customer_id]


def _tix_event(state, event_id):
    if event_id not in state["events"]:
        raise ToolFailure("event_not_found", f"no event {event_id}; see list_ticketed_events")
    return state["events"][event_id]


def _tix_hold(state, hold_id):
    if hold_id not in state["holds"]:
        raise ToolFailure("hold_not_found", f"no hold {hold_id}")
    h = state["holds"][hold_id]
    if h["status"] != "active":
        raise ToolFailure("hold_not_active", f"hold {hold_id} is already {h['status']}")
    return h


def _tix_ticket(state, ticket_id, customer_id):
    if ticket_id not in state["tickets"]:
        raise ToolFailure("ticket_not_found", f"no ticket {ticket_id}; see list_customer_tickets")
    t = state["tickets"][ticket_id]
    if t["owner"] != customer_id:
        raise ToolFailure("not_ticket_owner", f"{ticket_id} does not belong to {customer_id}; only its owner can do this")
    if t["status"] != "valid":
        raise ToolFailure("ticket_not_valid", f"{ticket_id} is {t['status']}")
    return t


def _tix_count(state, customer_id, event_id):
    """Tickets owned plus seats on active holds for one event."""
    owned = sum(1 for t in state["tickets"].values()
                if t["owner"] == customer_id and t["event_id"] == event_id and t["status"] == "valid")
    held = sum(len(h["seats"]) for h in state["holds"].values()
               if h["customer_id"] == customer_id and h["event_id"] == event_id and h["status"] == "active")
    return owned + held


@tool()
def list_ticketed_events(state, status: Literal["on_sale", "cancelled", "any"] = "on_sale") -> dict:
    """List events with venue, date, per-customer ticket limit, refund/transfer rules, price range and seats left.

    Args:
        status: only events with this status; "any" for all.
    """
    out = []
    for eid, e in sorted(state["events"].items()):
        if status not in ("any", e["status"]):
            continue
        prices = sorted({s["price_cents"] for s in e["seats"].values()})
        out.append({"event_id": eid, **{k: v for k, v in e.items() if k != "seats"},
                    "price_range_cents": [prices[0], prices[-1]],
                    "seats_available": sum(1 for s in e["seats"].values() if s["status"] == "available")})
    return {"events": out, "today": state["today"]}


@tool(errors={"event_not_found": "unknown event id", "section_not_found": "the event has no such section"})
def get_event_seat_map(state, event_id: str, section: str | None = None, available_only: bool = False) -> dict:
    """Show an event's seats with section, price and status (available, held or sold).

    Args:
        event_id: the event, e.g. "E-2".
        section: only this section, e.g. "front"; null for all.
        available_only: hide held and sold seats.
    """
    e = _tix_event(state, event_id)
    sections = sorted({s["section"] for s in e["seats"].values()})
    if section is not None and section not in sections:
        raise ToolFailure("section_not_found", f"{event_id} has sections {sections}")
    seats = [{"seat": sid, "section": s["section"], "price_cents": s["price_cents"], "status": s["status"]}
             for sid, s in sorted(e["seats"].items())
             if section in (None, s["section"]) and (s["status"] == "available" or not available_only)]
    return {"event_id": event_id, "sections": sections, "seats": seats}


@tool(effect="write", errors={
    "customer_not_found": "unknown customer id", "event_not_found": "unknown event id",
    "event_not_on_sale": "the event is not on sale", "seat_not_found": "no such seat",
    "seat_unavailable": "a seat is held or sold", "active_hold_exists": "the customer already holds seats for this event",
    "ticket_limit_exceeded": "the customer would exceed the event's per-customer limit"})
def hold_event_seats(state, customer_id: str, event_id: str,
                     seats: Annotated[list[str], {"minItems": 1, "maxItems": 6, "uniqueItems": True}]) -> dict:
    """Hold seats for a customer so they can pay for them; all or nothing. One active hold per customer and event.

    Args:
        customer_id: the customer, e.g. "K-101".
        event_id: the event.
        seats: the seat ids, e.g. ["A1", "A2"].
    """
    _tix_customer(state, customer_id)
    e = _tix_event(state, event_id)
    if e["status"] != "on_sale":
        raise ToolFailure("event_not_on_sale", f"{event_id} is {e['status']}; no tickets can be sold")
    for sid in seats:
        if sid not in e["seats"]:
            raise ToolFailure("seat_not_found", f"{event_id} has no seat {sid}; see get_event_seat_map")
        if e["seats"][sid]["status"] != "available":
            raise ToolFailure("seat_unavailable", f"seat {sid} is {e['seats'][sid]['status']}; offer another seat")
    if any(h["customer_id"] == customer_id and h["event_id"] == event_id and h["status"] == "active"
           for h in state["holds"].values()):
        raise ToolFailure("active_hold_exists", f"{customer_id} already holds seats for {event_id}; purchase or release that hold first")
    have = _tix_count(state, customer_id, event_id)
    if have + len(seats) > e["per_customer_limit"]:
        raise ToolFailure("ticket_limit_exceeded", f"{event_id} allows {e['per_customer_limit']} tickets per customer; "
                          f"{customer_id} already has {have}")
    hold_id = f"H-{state['next_hold']}"
    state["next_hold"] += 1
    for sid in seats:
        e["seats"][sid]["status"] = "held"
    total = sum(e["seats"][sid]["price_cents"] for sid in seats)
    state["holds"][hold_id] = {"event_id": event_id, "customer_id": customer_id, "seats": list(seats),
                               "total_cents": total, "status": "active"}
    return {"hold_id": hold_id, "seats": list(seats), "total_cents": total}


@tool(effect="write", errors={"hold_not_found": "unknown hold id", "hold_not_active": "the hold was purchased or released"})
def release_seat_hold(state, hold_id: str) -> dict:
    """Release a hold: its seats become available again.

    Args:
        hold_id: the hold, e.g. "H-3".
    """
    h = _tix_hold(state, hold_id)
    for sid in h["seats"]:
        state["events"][h["event_id"]]["seats"][sid]["status"] = "available"
    h["status"] = "released"
    return {"hold_id": hold_id, "status": "released", "seats": h["seats"]}


@tool(effect="write", errors={"hold_not_found": "unknown hold id", "hold_not_active": "the hold was purchased or released",
                              "insufficient_wallet_balance": "the wallet cannot cover the total"})
def purchase_held_seats(state, hold_id: str, payment_method: Literal["card", "wallet"]) -> dict:
    """Pay for a hold and issue one ticket per seat to the customer.

    Args:
        hold_id: the active hold.
        payment_method: "card" (card on file) or "wallet" (the customer's stored balance).
    """
    h = _tix_hold(state, hold_id)
    cust = state["customers"][h["customer_id"]]
    if payment_method == "wallet" and cust["wallet_cents"] < h["total_cents"]:
        raise ToolFailure("insufficient_wallet_balance", f"the wallet has {cust['wallet_cents']} cents; the total is "
                          f"{h['total_cents']}. Use the card or release seats")
    if payment_method == "wallet":
        cust["wallet_cents"] -= h["total_cents"]
    e = state["events"][h["event_id"]]
    issued = []
    for sid in h["seats"]:
        tid = f"TK-{state['next_ticket']}"
        state["next_ticket"] += 1
        state["tickets"][tid] = {"event_id": h["event_id"], "seat": sid, "owner": h["customer_id"],
                                 "purchaser": h["customer_id"], "price_cents": e["seats"][sid]["price_cents"],
                                 "payment_method": payment_method, "status": "valid", "transfers": 0}
        e["seats"][sid].update(status="sold", ticket_id=tid)
        issued.append(tid)
    h["status"] = "purchased"
    return {"hold_id": hold_id, "tickets": issued, "charged_cents": h["total_cents"], "payment_method": payment_method}


@tool(errors={"customer_not_found": "unknown customer id"})
def list_customer_tickets(state, customer_id: str) -> dict:
    """List the tickets a customer owns (any status) and their active holds.

    Args:
        customer_id: the customer.
    """
    cust = _tix_customer(state, customer_id)
    tickets = [{"ticket_id": tid, **t, "event_name": state["events"][t["event_id"]]["name"]}
               for tid, t in sorted(state["tickets"].items()) if t["owner"] == customer_id]
    holds = [{"hold_id": hid, **h} for hid, h in sorted(state["holds"].items())
             if h["customer_id"] == customer_id and h["status"] == "active"]
    return {"customer_id": customer_id, "wallet_cents": cust["wallet_cents"], "tickets": tickets, "holds": holds}


@tool(effect="write", errors={
    "ticket_not_found": "unknown ticket id", "not_ticket_owner": "the sender does not own the ticket",
    "ticket_not_valid": "the ticket was refunded", "customer_not_found": "unknown recipient",
    "same_customer": "sender and recipient are the same", "transfer_not_allowed": "the event forbids transfers",
    "transfer_limit_reached": "the ticket was already transferred the maximum number of times",
    "ticket_limit_exceeded": "the recipient would exceed the per-customer limit"})
def transfer_event_ticket(state, ticket_id: str, from_customer_id: str, to_customer_id: str) -> dict:
    """Transfer a ticket to another customer.

    Args:
        ticket_id: the ticket, e.g. "TK-4".
        from_customer_id: the current owner.
        to_customer_id: the recipient.
    """
    t = _tix_ticket(state, ticket_id, from_customer_id)
    _tix_customer(state, to_customer_id)
    if to_customer_id == from_customer_id:
        raise ToolFailure("same_customer", "the recipient already owns the ticket")
    e = state["events"][t["event_id"]]
    if not e["transferable"]:
        raise ToolFailure("transfer_not_allowed", f"tickets for {t['event_id']} cannot be transferred")
    if t["transfers"] >= state["rules"]["max_transfers"]:
        raise ToolFailure("transfer_limit_reached", f"{ticket_id} was already transferred {t['transfers']} time(s), the maximum")
    if _tix_count(state, to_customer_id, t["event_id"]) + 1 > e["per_customer_limit"]:
        raise ToolFailure("ticket_limit_exceeded", f"{to_customer_id} already has {e['per_customer_limit']} tickets "
                          f"(or holds) for {t['event_id']}")
    t["owner"] = to_customer_id
    t["transfers"] += 1
    return {"ticket_id": ticket_id, "owner": to_customer_id, "transfers": t["transfers"]}


@tool(effect="write", errors={
    "ticket_not_found": "unknown ticket id", "not_ticket_owner": "the customer does not own the ticket",
    "ticket_not_valid": "the ticket was already refunded", "transferred_ticket": "only the original purchaser can get a refund",
    "not_refundable": "the event's tickets are non-refundable", "refund_window_closed": "too close to the event date"})
def refund_event_ticket(state, ticket_id: str, customer_id: str) -> dict:
    """Refund a ticket to its original payment method and put the seat back on sale. Cancelled events are always refunded.

    Args:
        ticket_id: the ticket.
        customer_id: the customer asking (must own it and have bought it).
    """
    t = _tix_ticket(state, ticket_id, customer_id)
    if t["purchaser"] != customer_id:
        raise ToolFailure("transferred_ticket", f"{ticket_id} was transferred to {customer_id}; transferred tickets cannot be refunded")
    e = state["events"][t["event_id"]]
    if e["status"] != "cancelled":
        if not e["refundable"]:
            raise ToolFailure("not_refundable", f"tickets for {t['event_id']} are non-refundable; offer a transfer instead")
        days = (datetime.date.fromisoformat(e["date"]) - datetime.date.fromisoformat(state["today"])).days
        if days < state["rules"]["refund_cutoff_days"]:
            raise ToolFailure("refund_window_closed", f"the event is in {days} days; refunds close "
                              f"{state['rules']['refund_cutoff_days']} days before")
    t["status"] = "refunded"
    if t["payment_method"] == "wallet":
        state["customers"][customer_id]["wallet_cents"] += t["price_cents"]
    e["seats"][t["seat"]].update(status="available", ticket_id=None)
    return {"ticket_id": ticket_id, "refunded_cents": t["price_cents"], "to": t["payment_method"]}
