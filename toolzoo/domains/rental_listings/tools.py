from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool


def _listing(state, listing_id):
    if listing_id not in state["listings"]:
        raise ToolFailure("listing_not_found", f"no listing {listing_id}; search with search_rental_listings")
    return state["listings"][listing_id]


def _applicant(state, applicant_id):
    if applicant_id not in state["applicants"]:
        raise ToolFailure("applicant_not_found", f"no applicant {applicant_id}; look them up with find_rental_applicant")
    return state["applicants"][applicant_id]


def _application(state, application_id):
    if application_id not in state["applications"]:
        raise ToolFailure("application_not_found", f"no application {application_id}; see list_rental_applications")
    return state["applications"][application_id]


def _available(listing_id, listing):
    if listing["status"] != "available":
        raise ToolFailure("listing_not_available", f"{listing_id} is {listing['status']}; suggest other listings")


def _free_slots(state, listing_id):
    booked = {v["slot"] for v in state["viewings"].values() if v["listing_id"] == listing_id and v["status"] == "scheduled"}
    return [s for s in state["listings"][listing_id]["viewing_slots"] if s not in booked]


@tool()
def search_rental_listings(state, city: str | None = None, max_rent_cents: Annotated[int | None, {"minimum": 0}] = None,
                           min_bedrooms: Annotated[int, {"minimum": 0, "maximum": 5}] = 0, pets: bool = False) -> dict:
    """Search available rental listings.

    Args:
        city: only listings in this city, e.g. "Porto"; omit for all cities.
        max_rent_cents: highest monthly rent in cents; omit for no limit.
        min_bedrooms: at least this many bedrooms (0 = studio).
        pets: true to show only listings that allow pets.
    """
    out = []
    for lid, lst in sorted(state["listings"].items()):
        if lst["status"] != "available" or lst["bedrooms"] < min_bedrooms or (pets and not lst["pets_allowed"]):
            continue
        if city is not None and lst["city"].lower() != city.strip().lower():
            continue
        if max_rent_cents is not None and lst["rent_cents"] > max_rent_cents:
            continue
        out.append({"listing_id": lid, "address": lst["address"], "city": lst["city"], "bedrooms": lst["bedrooms"],
                    "rent_cents": lst["rent_cents"], "pets_allowed": lst["pets_allowed"]})
    return {"listings": out}


@tool(errors={"listing_not_found": "unknown listing id"})
def get_rental_listing(state, listing_id: str) -> dict:
    """Show a listing in full: rent, rules, landlord, status and free viewing slots.

    Args:
        listing_id: the listing, e.g. "L-503".
    """
    lst = _listing(state, listing_id)
    return {"listing_id": listing_id, **{k: v for k, v in lst.items() if k != "viewing_slots"},
            "landlord_name": state["landlords"][lst["landlord_id"]]["name"],
            "min_monthly_income_cents": int(lst["rent_cents"] * lst["income_multiple"]),
            "free_viewing_slots": _free_slots(state, listing_id) if lst["status"] == "available" else []}


@tool(errors={"applicant_not_found": "no applicant has this email"})
def find_rental_applicant(state, email: str) -> dict:
    """Find a registered applicant by email, with their viewings and applications.

    Args:
        email: the applicant's email, e.g. "renter2@example.com".
    """
    for apid, a in sorted(state["applicants"].items()):
        if a["email"].lower() == email.strip().lower():
            return {"applicant_id": apid, **a,
                    "viewings": [{"viewing_id": vid, **v} for vid, v in sorted(state["viewings"].items()) if v["applicant_id"] == apid],
                    "applications": [{"application_id": k, **x} for k, x in sorted(state["applications"].items()) if x["applicant_id"] == apid]}
    raise ToolFailure("applicant_not_found", f"no applicant registered with {email}")


@tool(effect="write", errors={"listing_not_found": "unknown listing id", "applicant_not_found": "unknown applicant id",
                              "listing_not_available": "the listing is not available",
                              "slot_unavailable": "the slot is not offered or already booked",
                              "viewing_already_scheduled": "the applicant already has a viewing of this listing"})
def schedule_rental_viewing(state, listing_id: str, applicant_id: str, slot: str) -> dict:
    """Book a viewing of a listing for an applicant in one of its free slots.

    Args:
        listing_id: the listing.
        applicant_id: the applicant, e.g. "AP-2".
        slot: a free slot from get_rental_listing, e.g. "2025-06-11 10:00".
    """
    lst = _listing(state, listing_id)
    _applicant(state, applicant_id)
    _available(listing_id, lst)
    if any(v["listing_id"] == listing_id and v["applicant_id"] == applicant_id and v["status"] == "scheduled"
           for v in state["viewings"].values()):
        raise ToolFailure("viewing_already_scheduled", f"{applicant_id} already has a viewing of {listing_id}; cancel it first to move it")
    if slot not in _free_slots(state, listing_id):
        raise ToolFailure("slot_unavailable", f"{slot!r} is not free; free slots: {', '.join(_free_slots(state, listing_id)) or 'none'}")
    vid = f"VW-{state['next_viewing_no']}"
    state["next_viewing_no"] += 1
    state["viewings"][vid] = {"listing_id": listing_id, "applicant_id": applicant_id, "slot": slot, "status": "scheduled"}
    return {"viewing_id": vid, "listing_id": listing_id, "slot": slot, "status": "scheduled"}


@tool(effect="write", errors={"viewing_not_found": "unknown viewing id", "viewing_not_scheduled": "only scheduled viewings can be cancelled"})
def cancel_rental_viewing(state, viewing_id: str) -> dict:
    """Cancel a scheduled viewing; its slot becomes free again.

    Args:
        viewing_id: the viewing, e.g. "VW-4".
    """
    if viewing_id not in state["viewings"]:
        raise ToolFailure("viewing_not_found", f"no viewing {viewing_id}")
    v = state["viewings"][viewing_id]
    if v["status"] != "scheduled":
        raise ToolFailure("viewing_not_scheduled", f"{viewing_id} is {v['status']}; only scheduled viewings can be cancelled")
    v["status"] = "cancelled"
    return {"viewing_id": viewing_id, "status": "cancelled"}


@tool(effect="write", errors={
    "listing_not_found": "unknown listing id", "applicant_not_found": "unknown applicant id",
    "listing_not_available": "the listing is not available", "viewing_required": "the applicant has not viewed the listing",
    "income_too_low": "income below the listing's requirement", "pets_not_allowed": "the listing does not allow pets",
    "duplicate_application": "the applicant already applied for this listing",
})
def submit_rental_application(state, listing_id: str, applicant_id: str, move_in_date: Annotated[str, {"pattern": "^\\d{4}-\\d{2}-\\d{2}$"}]) -> dict:
    """Submit an applicant's tenancy application for a listing to its landlord.

    Args:
        listing_id: the listing.
        applicant_id: the applicant.
        move_in_date: the desired move-in date, YYYY-MM-DD.
    """
    lst = _listing(state, listing_id)
    a = _applicant(state, applicant_id)
    _available(listing_id, lst)
    if any(x["listing_id"] == listing_id and x["applicant_id"] == applicant_id and x["status"] in ("submitted", "approved")
           for x in state["applications"].values()):
        raise ToolFailure("duplicate_application", f"{applicant_id} already has an active application for {listing_id}")
    if not any(v["listing_id"] == listing_id and v["applicant_id"] == applicant_id and v["status"] in ("scheduled", "completed")
               for v in state["viewings"].values()):
        raise ToolFailure("viewing_required", f"{applicant_id} must view {listing_id} before applying; book one with schedule_rental_viewing")
    if a["has_pets"] and not lst["pets_allowed"]:
        raise ToolFailure("pets_not_allowed", f"{listing_id} does not allow pets")
    need = int(lst["rent_cents"] * lst["income_multiple"])
    if a["monthly_income_cents"] < need:
        raise ToolFailure("income_too_low", f"{listing_id} needs a monthly income of at least {need} cents ({lst['income_multiple']}x rent)")
    app_id = f"APP-{state['next_application_no']}"
    state["next_application_no"] += 1
    state["applications"][app_id] = {"listing_id": listing_id, "applicant_id": applicant_id, "status": "submitted",
                                     "decision_reason": None, "move_in_date": move_in_date}
    return {"application_id": app_id, "status": "submitted"}


@tool(effect="write", errors={"application_not_found": "unknown application id", "application_not_pending": "the application was already decided or withdrawn"})
def withdraw_rental_application(state, application_id: str) -> dict:
    """Withdraw a pending (submitted) application at the applicant's request.

    Args:
        application_id: the application, e.g. "APP-1".
    """
    x = _application(state, application_id)
    if x["status"] != "submitted":
        raise ToolFailure("application_not_pending", f"{application_id} is {x['status']}; only submitted applications can be withdrawn")
    x["status"] = "withdrawn"
    return {"application_id": application_id, "status": "withdrawn"}


@tool(errors={"listing_not_found": "unknown listing id", "applicant_not_found": "unknown applicant id"})
def list_rental_applications(state, listing_id: str | None = None, applicant_id: str | None = None,
                             status: Literal["submitted", "approved", "rejected", "withdrawn", "any"] = "any") -> dict:
    """List applications, filtered by listing, applicant and/or status.

    Args:
        listing_id: only applications for this listing; omit for all.
        applicant_id: only applications by this applicant; omit for all.
        status: only this status; "any" for all.
    """
    if listing_id is not None:
        _listing(state, listing_id)
    if applicant_id is not None:
        _applicant(state, applicant_id)
    return {"applications": [{"application_id": k, **x} for k, x in sorted(state["applications"].items())
                             if listing_id in (None, x["listing_id"]) and applicant_id in (None, x["applicant_id"])
                             and status in ("any", x["status"])]}


@tool(effect="write", errors={"application_not_found": "unknown application id",
                              "application_not_pending": "the application was already decided or withdrawn",
                              "reason_required": "rejections need a reason"})
def record_landlord_decision(state, application_id: str, decision: Literal["approve", "reject"], reason: str = "") -> dict:
    """Record the landlord's decision on a submitted application. Approving leases the listing, rejects the other
    pending applications for it and cancels its scheduled viewings.

    Args:
        application_id: the application.
        decision: approve or reject.
        reason: the landlord's reason; required for rejections.
    """
    x = _application(state, application_id)
    if x["status"] != "submitted":
        raise ToolFailure("application_not_pending", f"{application_id} is {x['status']}; only submitted applications can be decided")
    if decision == "reject":
        if not reason.strip():
            raise ToolFailure("reason_required", "give the landlord's reason for the rejection")
        x["status"], x["decision_reason"] = "rejected", reason.strip()
        return {"application_id": application_id, "status": "rejected"}
    lst = state["listings"][x["listing_id"]]  # still available: leasing it rejected every other pending application
    x["status"], x["decision_reason"] = "approved", reason.strip() or None
    lst["status"] = "leased"
    rejected = []
    for k, other in sorted(state["applications"].items()):
        if k != application_id and other["listing_id"] == x["listing_id"] and other["status"] == "submitted":
            other["status"], other["decision_reason"] = "rejected", "listing leased to another applicant"
            rejected.append(k)
    cancelled = []
    for vid, v in sorted(state["viewings"].items()):
        if v["listing_id"] == x["listing_id"] and v["status"] == "scheduled":
            v["status"] = "cancelled"
            cancelled.append(vid)
    return {"application_id": application_id, "status": "approved", "listing_status": "leased",
            "auto_rejected": rejected, "viewings_cancelled": cancelled}
