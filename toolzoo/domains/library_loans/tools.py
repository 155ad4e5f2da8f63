import datetime
from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool


def _lib_member(state, member_id):
    if member_id not in state["members"]:
        raise ToolFailure("member_not_found", f"no member {member_id}; ask the patron for their card number (like M-101)")
    return state["members"][member_id]


def _lib_item(state, item_id):
    if item_id not in state["items"]:
        raise ToolFailure("item_not_found", f"no item {item_id}; use search_library_catalogue to find the item id")
    return state["items"][item_id]


def _lib_loan(state, loan_id):
    if loan_id not in state["loans"]:
        raise ToolFailure("loan_not_found", f"no loan {loan_id}; use get_library_member to list the member's loans")
    loan = state["loans"][loan_id]
    if loan["returned"] is not None:
        raise ToolFailure("already_returned", f"loan {loan_id} was already returned on {loan['returned']}")
    return loan


def _lib_active(state, **match):
    return {lid: ln for lid, ln in sorted(state["loans"].items())
            if ln["returned"] is None and all(ln[k] == v for k, v in match.items())}


def _lib_available(state, item_id):
    return state["items"][item_id]["copies"] - len(_lib_active(state, item_id=item_id))


def _lib_days_late(state, loan):
    today = datetime.date.fromisoformat(state["today"])
    return max(0, (today - datetime.date.fromisoformat(loan["due"])).days)


@tool(errors={"query_too_short": "the query needs at least 2 characters"})
def search_library_catalogue(state, query: str, format: Literal["book", "audiobook", "dvd", "any"] = "any") -> dict:
    """Search the catalogue by title, author or subject; shows copies available now and the holds queue length.

    Args:
        query: words to look for in the title, author or subject, e.g. "python" or "Okafor".
        format: only items of this format; "any" for all.
    """
    q = query.strip().lower()
    if len(q) < 2:
        raise ToolFailure("query_too_short", "give at least 2 characters to search for")
    out = []
    for iid, it in sorted(state["items"].items()):
        text = f"{it['title']} {it['author']} {it['subject']}".lower()
        if q in text and format in ("any", it["format"]):
            out.append({"item_id": iid, "title": it["title"], "author": it["author"], "format": it["format"],
                        "available": _lib_available(state, iid), "holds": len(it["holds"])})
    return {"items": out}


@tool(errors={"member_not_found": "unknown member id"})
def get_library_member(state, member_id: str) -> dict:
    """Show a member: type, loan limit, outstanding fees, active loans (with due dates and days late) and holds.

    Args:
        member_id: the library card number, e.g. "M-101".
    """
    m = _lib_member(state, member_id)
    loans = [{"loan_id": lid, "item_id": ln["item_id"], "title": state["items"][ln["item_id"]]["title"],
              "due": ln["due"], "renewals": ln["renewals"], "days_late": _lib_days_late(state, ln)}
             for lid, ln in _lib_active(state, member_id=member_id).items()]
    holds = [{"item_id": iid, "position": it["holds"].index(member_id) + 1}
             for iid, it in sorted(state["items"].items()) if member_id in it["holds"]]
    return {"member_id": member_id, **m, "max_loans": state["rules"]["max_loans"][m["type"]],
            "loans": loans, "holds": holds}


@tool(effect="write", errors={
    "member_not_found": "unknown member id", "item_not_found": "unknown item id",
    "fees_outstanding": "the member owes at least the blocking amount of fees",
    "loan_limit_reached": "the member already has as many loans as their type allows",
    "already_borrowed": "the member already has a copy of this item",
    "no_copy_available": "every copy is on loan or reserved for members ahead in the holds queue"})
def borrow_library_item(state, member_id: str, item_id: str) -> dict:
    """Lend a copy of an item to a member. The due date depends on the format (see rules).

    Args:
        member_id: the borrowing member, e.g. "M-101".
        item_id: the catalogue item, e.g. "B-203".
    """
    m = _lib_member(state, member_id)
    it = _lib_item(state, item_id)
    rules = state["rules"]
    if m["fees_cents"] >= rules["fee_block_cents"]:
        raise ToolFailure("fees_outstanding", f"{member_id} owes {m['fees_cents']} cents; fees of "
                          f"{rules['fee_block_cents']} cents or more block borrowing until paid (pay_library_fees)")
    if len(_lib_active(state, member_id=member_id)) >= rules["max_loans"][m["type"]]:
        raise ToolFailure("loan_limit_reached", f"{member_id} ({m['type']}) already has "
                          f"{rules['max_loans'][m['type']]} loans; an item must be returned first")
    if _lib_active(state, member_id=member_id, item_id=item_id):
        raise ToolFailure("already_borrowed", f"{member_id} already has {item_id} on loan; renew it instead")
    ahead = it["holds"].index(member_id) if member_id in it["holds"] else len(it["holds"])
    if _lib_available(state, item_id) <= ahead:
        raise ToolFailure("no_copy_available", f"no copy of {item_id} is free for {member_id} "
                          f"({len(it['holds'])} holds queued); offer place_library_hold")
    if member_id in it["holds"]:
        it["holds"].remove(member_id)
    today = datetime.date.fromisoformat(state["today"])
    due = today + datetime.timedelta(days=rules["loan_days"][it["format"]])
    loan_id = f"L-{state['next_loan']}"
    state["next_loan"] += 1
    state["loans"][loan_id] = {"item_id": item_id, "member_id": member_id, "borrowed": today.isoformat(),
                               "due": due.isoformat(), "renewals": 0, "returned": None, "fee_cents": 0}
    return {"loan_id": loan_id, "item_id": item_id, "member_id": member_id, "due": due.isoformat()}


@tool(effect="write", errors={"loan_not_found": "unknown loan id", "already_returned": "the loan is already closed"})
def return_library_item(state, loan_id: str) -> dict:
    """Check an item back in. A late return adds a late fee (per day, capped) to the member's account.

    Args:
        loan_id: the loan to close, e.g. "L-3002".
    """
    loan = _lib_loan(state, loan_id)
    rules = state["rules"]
    late = _lib_days_late(state, loan)
    fee = min(late * rules["late_fee_cents_per_day"], rules["max_late_fee_cents"])
    loan["returned"] = state["today"]
    loan["fee_cents"] = fee
    member = state["members"][loan["member_id"]]
    member["fees_cents"] += fee
    holds = state["items"][loan["item_id"]]["holds"]
    return {"loan_id": loan_id, "days_late": late, "late_fee_cents": fee, "member_fees_cents": member["fees_cents"],
            "next_in_holds_queue": holds[0] if holds else None}


@tool(effect="write", errors={
    "loan_not_found": "unknown loan id", "already_returned": "the loan is already closed",
    "loan_overdue": "overdue loans cannot be renewed", "renewal_limit_reached": "renewed the maximum number of times",
    "item_has_holds": "other members are waiting for this item"})
def renew_library_loan(state, loan_id: str) -> dict:
    """Renew an active loan: the new due date is today plus the format's loan period.

    Args:
        loan_id: the loan to renew, e.g. "L-3002".
    """
    loan = _lib_loan(state, loan_id)
    rules = state["rules"]
    if _lib_days_late(state, loan) > 0:
        raise ToolFailure("loan_overdue", f"{loan_id} was due {loan['due']}; overdue items must be returned, not renewed")
    if loan["renewals"] >= rules["max_renewals"]:
        raise ToolFailure("renewal_limit_reached", f"{loan_id} was renewed {loan['renewals']} times already (the maximum)")
    item = state["items"][loan["item_id"]]
    if item["holds"]:
        raise ToolFailure("item_has_holds", f"{len(item['holds'])} member(s) wait for {loan['item_id']}; it cannot be renewed")
    today = datetime.date.fromisoformat(state["today"])
    loan["due"] = (today + datetime.timedelta(days=rules["loan_days"][item["format"]])).isoformat()
    loan["renewals"] += 1
    return {"loan_id": loan_id, "due": loan["due"], "renewals": loan["renewals"]}


@tool(effect="write", errors={
    "member_not_found": "unknown member id", "item_not_found": "unknown item id",
    "copy_available": "a copy is free now: borrow it instead", "already_borrowed": "the member has this item on loan",
    "duplicate_hold": "the member is already in this item's queue"})
def place_library_hold(state, member_id: str, item_id: str) -> dict:
    """Put a member at the end of an item's holds queue (only when no copy is free for them).

    Args:
        member_id: the member who wants the item.
        item_id: the catalogue item.
    """
    _lib_member(state, member_id)
    it = _lib_item(state, item_id)
    if member_id in it["holds"]:
        raise ToolFailure("duplicate_hold", f"{member_id} is already number {it['holds'].index(member_id) + 1} in the queue")
    if _lib_active(state, member_id=member_id, item_id=item_id):
        raise ToolFailure("already_borrowed", f"{member_id} already has {item_id} on loan")
    if _lib_available(state, item_id) > len(it["holds"]):
        raise ToolFailure("copy_available", f"a copy of {item_id} is available now; use borrow_library_item")
    it["holds"].append(member_id)
    return {"item_id": item_id, "member_id": member_id, "position": len(it["holds"])}


@tool(effect="write", errors={"item_not_found": "unknown item id", "hold_not_found": "the member has no hold on this item"})
def cancel_library_hold(state, member_id: str, item_id: str) -> dict:
    """Remove a member from an item's holds queue.

    Args:
        member_id: the member whose hold to cancel.
        item_id: the catalogue item.
    """
    it = _lib_item(state, item_id)
    if member_id not in it["holds"]:
        raise ToolFailure("hold_not_found", f"{member_id} has no hold on {item_id}; see get_library_member")
    it["holds"].remove(member_id)
    return {"item_id": item_id, "member_id": member_id, "cancelled": True, "queue_length": len(it["holds"])}


@tool(effect="write", errors={"member_not_found": "unknown member id", "overpayment": "more than the member owes"})
def pay_library_fees(state, member_id: str, amount_cents: Annotated[int, {"minimum": 1}]) -> dict:
    """Record a payment against a member's outstanding fees.

    Args:
        member_id: the paying member.
        amount_cents: how much they pay, in cents; at most what they owe.
    """
    m = _lib_member(state, member_id)
    if amount_cents > m["fees_cents"]:
        raise ToolFailure("overpayment", f"{member_id} owes only {m['fees_cents']} cents; take at most that")
    m["fees_cents"] -= amount_cents
    return {"member_id": member_id, "paid_cents": amount_cents, "fees_cents": m["fees_cents"]}
