import math
from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

Service = Literal["ground", "express", "overnight"]
Weight = Annotated[float, {"exclusiveMinimum": 0, "maximum": 70}]


def _account(state, account_id):
    if account_id not in state["accounts"]:
        raise ToolFailure("account_not_found", f"no shipping account {account_id}")
    return state["accounts"][account_id]


def _shipment(state, tracking_number):
    tn = tracking_number.strip().upper()
    if tn not in state["shipments"]:
        raise ToolFailure("shipment_not_found", f"no shipment with tracking number {tracking_number}; check it with the customer")
    return tn, state["shipments"][tn]


def _zone(state, postal_code):
    if postal_code not in state["zones"]:
        raise ToolFailure("unserviceable_postal_code", f"we do not deliver to or from {postal_code}; serviced codes: {', '.join(sorted(state['zones']))}")
    return state["zones"][postal_code]


def _price(state, from_postal, to_postal, weight_kg, service):
    zones = abs(_zone(state, from_postal) - _zone(state, to_postal))
    s = state["services"][service]
    if weight_kg > s["max_kg"]:
        raise ToolFailure("overweight_for_service", f"{service} takes parcels up to {s['max_kg']} kg; choose ground or split the parcel")
    return s["base_cents"] + s["per_kg_cents"] * math.ceil(weight_kg) + s["per_zone_cents"] * zones


@tool(errors={"unserviceable_postal_code": "a postal code is outside the service area",
              "overweight_for_service": "too heavy for the chosen service"})
def get_parcel_quote(state, from_postal_code: str, to_postal_code: str, weight_kg: Weight, service: Service) -> dict:
    """Price and transit time for shipping one parcel.

    Args:
        from_postal_code: the sender's postal code, e.g. "10001".
        to_postal_code: the recipient's postal code.
        weight_kg: parcel weight in kg (billed per started kg).
        service: ground, express or overnight.
    """
    price = _price(state, from_postal_code, to_postal_code, weight_kg, service)
    return {"service": service, "price_cents": price, "transit_days": state["services"][service]["transit_days"]}


@tool(effect="write", errors={"account_not_found": "unknown account id",
                              "unserviceable_postal_code": "a postal code is outside the service area",
                              "overweight_for_service": "too heavy for the chosen service",
                              "insufficient_credit": "the account's prepaid credit does not cover the price"})
def create_parcel_shipment(state, account_id: str, from_postal_code: str, to_postal_code: str,
                           recipient_name: Annotated[str, {"minLength": 2}], to_address: Annotated[str, {"minLength": 5}],
                           weight_kg: Weight, service: Service,
                           declared_value_cents: Annotated[int, {"minimum": 0, "maximum": 500000}] = 0) -> dict:
    """Buy a shipping label: creates the shipment, charges its price to the account's prepaid credit.

    Args:
        account_id: the shipping account, e.g. "SA-301".
        from_postal_code: the sender's postal code.
        to_postal_code: the recipient's postal code.
        recipient_name: who receives the parcel.
        to_address: street address of the recipient.
        weight_kg: parcel weight in kg.
        service: ground, express or overnight.
        declared_value_cents: the insured value in cents (0 = none); claims are capped at it.
    """
    a = _account(state, account_id)
    price = _price(state, from_postal_code, to_postal_code, weight_kg, service)
    if price > a["credit_cents"]:
        raise ToolFailure("insufficient_credit", f"the label costs {price} cents but the account has {a['credit_cents']} cents of credit; top up first")
    n = 2000 + len(state["shipments"])
    tn = f"PX{n}"
    while tn in state["shipments"]:
        n += 1
        tn = f"PX{n}"
    a["credit_cents"] -= price
    state["shipments"][tn] = {
        "account_id": account_id, "service": service, "from_postal_code": from_postal_code, "to_postal_code": to_postal_code,
        "recipient_name": recipient_name, "to_address": to_address, "weight_kg": weight_kg,
        "declared_value_cents": declared_value_cents, "cost_cents": price, "status": "label_created", "days_in_transit": 0,
        "reroutes": 0, "events": [{"day": 0, "status": "label_created", "location": "origin hub"}],
    }
    return {"tracking_number": tn, "cost_cents": price, "credit_left_cents": a["credit_cents"]}


@tool(errors={"shipment_not_found": "unknown tracking number"})
def track_parcel(state, tracking_number: str) -> dict:
    """Current status, destination and scan history of a parcel.

    Args:
        tracking_number: the tracking number, e.g. "PX421003".
    """
    tn, s = _shipment(state, tracking_number)
    return {"tracking_number": tn, "status": s["status"], "service": s["service"], "to_postal_code": s["to_postal_code"],
            "days_in_transit": s["days_in_transit"], "expected_days": state["services"][s["service"]]["transit_days"],
            "reroutes": s["reroutes"], "events": s["events"]}


@tool(errors={"account_not_found": "unknown account id"})
def get_shipping_account(state, account_id: str) -> dict:
    """A shipping account's company, contact email, home postal code and prepaid credit.

    Args:
        account_id: the account id.
    """
    return {"account_id": account_id, **_account(state, account_id)}


@tool(errors={"account_not_found": "unknown account id"})
def list_parcel_shipments(state, account_id: str,
                          status: Literal["label_created", "in_transit", "out_for_delivery", "delivered", "cancelled", "any"] = "any") -> dict:
    """List an account's shipments, optionally only those with one status.

    Args:
        account_id: the account id.
        status: only shipments with this status; "any" for all.
    """
    _account(state, account_id)
    out = [{"tracking_number": tn, "status": s["status"], "service": s["service"], "recipient_name": s["recipient_name"],
            "to_postal_code": s["to_postal_code"], "cost_cents": s["cost_cents"]}
           for tn, s in sorted(state["shipments"].items()) if s["account_id"] == account_id and status in ("any", s["status"])]
    return {"shipments": out}


@tool(effect="write", errors={"shipment_not_found": "unknown tracking number",
                              "reroute_not_allowed": "the parcel is out for delivery, delivered or cancelled",
                              "reroute_limit_reached": "the parcel was already rerouted once",
                              "unserviceable_postal_code": "the new postal code is outside the service area",
                              "insufficient_credit": "the account cannot pay the reroute fee"})
def reroute_parcel(state, tracking_number: str, new_postal_code: str, new_address: Annotated[str, {"minLength": 5}]) -> dict:
    """Send a parcel that has not gone out for delivery to a new address; charges the reroute fee to the account.

    Args:
        tracking_number: the parcel.
        new_postal_code: the new destination postal code.
        new_address: the new street address.
    """
    tn, s = _shipment(state, tracking_number)
    if s["status"] not in ("label_created", "in_transit"):
        raise ToolFailure("reroute_not_allowed", f"{tn} is {s['status']}; only parcels not yet out for delivery can be rerouted")
    if s["reroutes"] >= 1:
        raise ToolFailure("reroute_limit_reached", f"{tn} was already rerouted once; it cannot be rerouted again")
    _zone(state, new_postal_code)
    a = state["accounts"][s["account_id"]]
    fee = state["reroute_fee_cents"]
    if fee > a["credit_cents"]:
        raise ToolFailure("insufficient_credit", f"the reroute fee is {fee} cents but the account has {a['credit_cents']} cents")
    a["credit_cents"] -= fee
    s.update(to_postal_code=new_postal_code, to_address=new_address, reroutes=s["reroutes"] + 1)
    s["events"].append({"day": s["days_in_transit"], "status": s["status"], "location": f"rerouted to {new_postal_code}"})
    return {"tracking_number": tn, "to_postal_code": new_postal_code, "fee_cents": fee, "credit_left_cents": a["credit_cents"]}


@tool(effect="write", errors={"shipment_not_found": "unknown tracking number",
                              "label_not_cancellable": "the parcel has already been scanned or cancelled"})
def cancel_shipping_label(state, tracking_number: str) -> dict:
    """Void an unused label (status label_created) and refund its cost to the account credit.

    Args:
        tracking_number: the parcel whose label to void.
    """
    tn, s = _shipment(state, tracking_number)
    if s["status"] != "label_created":
        raise ToolFailure("label_not_cancellable", f"{tn} is {s['status']}; only unscanned labels can be cancelled (consider reroute_parcel)")
    a = state["accounts"][s["account_id"]]
    a["credit_cents"] += s["cost_cents"]
    s["status"] = "cancelled"
    s["events"].append({"day": s["days_in_transit"], "status": "cancelled", "location": "label voided"})
    return {"tracking_number": tn, "status": "cancelled", "refunded_cents": s["cost_cents"], "credit_cents": a["credit_cents"]}


@tool(effect="write", errors={"shipment_not_found": "unknown tracking number",
                              "claim_not_allowed": "the parcel's status does not allow this claim type",
                              "claim_exceeds_declared_value": "amount above the declared value",
                              "claim_already_filed": "this parcel already has a claim"})
def file_parcel_claim(state, tracking_number: str, claim_type: Literal["lost", "damaged"],
                      amount_cents: Annotated[int, {"minimum": 1}], description: Annotated[str, {"minLength": 5}]) -> dict:
    """File a compensation claim for a lost or damaged parcel.

    Args:
        tracking_number: the parcel.
        claim_type: "damaged" (delivered parcels) or "lost" (in-transit parcels overdue past the grace period).
        amount_cents: the compensation asked for, at most the declared value.
        description: what happened, in the customer's words.
    """
    tn, s = _shipment(state, tracking_number)
    if any(c["tracking_number"] == tn for c in state["claims"].values()):
        raise ToolFailure("claim_already_filed", f"{tn} already has a claim; only one claim per parcel")
    if claim_type == "damaged" and s["status"] != "delivered":
        raise ToolFailure("claim_not_allowed", f"{tn} is {s['status']}; damage claims are for delivered parcels")
    if claim_type == "lost":
        overdue_after = state["services"][s["service"]]["transit_days"] + state["lost_after_extra_days"]
        if s["status"] != "in_transit" or s["days_in_transit"] <= overdue_after:
            raise ToolFailure("claim_not_allowed", f"{tn} can only be claimed lost when in transit for more than {overdue_after} days; it is {s['status']} after {s['days_in_transit']} days")
    if amount_cents > s["declared_value_cents"]:
        raise ToolFailure("claim_exceeds_declared_value", f"the declared value of {tn} is {s['declared_value_cents']} cents; claim at most that")
    cid = f"CL-{len(state['claims']) + 1}"
    state["claims"][cid] = {"tracking_number": tn, "claim_type": claim_type, "amount_cents": amount_cents,
                            "description": description, "status": "submitted"}
    return {"claim_id": cid, "status": "submitted"}
