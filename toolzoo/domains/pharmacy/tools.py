import datetime
from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool


def _rx_patient(state, patient_id):
    if patient_id not in state["patients"]:
        raise ToolFailure("patient_not_found", f"no patient {patient_id}; identify them with find_pharmacy_patient")
    return state["patients"][patient_id]


def _rx_drug(state, drug_id):
    if drug_id not in state["drugs"]:
        raise ToolFailure("drug_not_found", f"no drug {drug_id}; drug ids look like 'warfarin-5'")
    return state["drugs"][drug_id]


def _rx_rx(state, rx_id):
    if rx_id not in state["prescriptions"]:
        raise ToolFailure("prescription_not_found", f"no prescription {rx_id}; use list_pharmacy_prescriptions")
    return state["prescriptions"][rx_id]


def _rx_fill(state, fill_id):
    if fill_id not in state["fills"]:
        raise ToolFailure("fill_not_found", f"no fill {fill_id}; see get_prescription_details for its fills")
    return state["fills"][fill_id]


def _rx_status(state, rx):
    if rx["status"] == "active" and rx["expires_on"] < state["today"]:
        return "expired"
    return rx["status"]


def _rx_next_eligible(rx):
    last = datetime.date.fromisoformat(rx["last_filled_on"])
    return (last + datetime.timedelta(days=int(rx["days_supply"] * 0.75))).isoformat()


@tool(errors={"patient_not_found": "no patient with this name and date of birth"})
def find_pharmacy_patient(state, full_name: str, date_of_birth: Annotated[str, {"pattern": r"^\d{4}-\d{2}-\d{2}$"}]) -> dict:
    """Identify a pharmacy patient by full name (case-insensitive) and date of birth.

    Args:
        full_name: first and last name, e.g. "Camila Gupta".
        date_of_birth: YYYY-MM-DD.
    """
    for pid, p in sorted(state["patients"].items()):
        if p["name"].lower() == " ".join(full_name.split()).lower() and p["dob"] == date_of_birth:
            return {"patient_id": pid, "name": p["name"], "allergies": p["allergies"]}
    raise ToolFailure("patient_not_found", "no patient matches that name and date of birth; ask the patient to check both")


@tool(errors={"patient_not_found": "unknown patient id"})
def list_pharmacy_prescriptions(state, patient_id: str,
                                status: Literal["active", "expired", "cancelled", "any"] = "any") -> dict:
    """List a patient's prescriptions with drug, refills remaining and status.

    Args:
        patient_id: the patient, e.g. "PX-100".
        status: only prescriptions with this status; "any" for all.
    """
    _rx_patient(state, patient_id)
    out = []
    for rid, rx in sorted(state["prescriptions"].items()):
        st = _rx_status(state, rx)
        if rx["patient_id"] == patient_id and status in ("any", st):
            out.append({"rx_id": rid, "drug_id": rx["drug_id"], "drug_name": state["drugs"][rx["drug_id"]]["name"],
                        "quantity": rx["quantity"], "refills_remaining": rx["refills_remaining"], "status": st})
    return {"patient_id": patient_id, "prescriptions": out}


@tool(errors={"prescription_not_found": "unknown prescription id"})
def get_prescription_details(state, rx_id: str) -> dict:
    """Show a prescription in full: drug, prescriber, supply, refills, expiry, fills and the next refill date.

    Args:
        rx_id: the prescription, e.g. "RX-3001".
    """
    rx = _rx_rx(state, rx_id)
    fills = [{"fill_id": fid, **f} for fid, f in sorted(state["fills"].items()) if f["rx_id"] == rx_id]
    return {"rx_id": rx_id, **rx, "status": _rx_status(state, rx), "drug_name": state["drugs"][rx["drug_id"]]["name"],
            "controlled": state["drugs"][rx["drug_id"]]["controlled"], "next_refill_on": _rx_next_eligible(rx),
            "fills": fills}


@tool(errors={"patient_not_found": "unknown patient id", "drug_not_found": "unknown drug id"})
def check_drug_interactions(state, patient_id: str, drug_id: str) -> dict:
    """Check a drug against the patient's other active prescriptions and allergies.

    `safe` is false if there is a major interaction or an allergy conflict.

    Args:
        patient_id: the patient.
        drug_id: the drug to check, e.g. "ibuprofen-400".
    """
    p = _rx_patient(state, patient_id)
    drug = _rx_drug(state, drug_id)
    current = sorted({rx["drug_id"] for rx in state["prescriptions"].values()
                      if rx["patient_id"] == patient_id and _rx_status(state, rx) == "active" and rx["drug_id"] != drug_id})
    found = []
    for other in current:
        for it in state["interactions"]:
            if sorted(it["drugs"]) == sorted([drug_id, other]):
                found.append({"with_drug_id": other, "severity": it["severity"], "advice": it["advice"]})
    allergy = drug["class"] in p["allergies"]
    safe = not allergy and all(f["severity"] != "major" for f in found)
    return {"patient_id": patient_id, "drug_id": drug_id, "interactions": found,
            "allergy_conflict": allergy, "safe": safe}


@tool(errors={"drug_not_found": "unknown drug id"})
def check_pharmacy_stock(state, drug_id: str) -> dict:
    """Show how many units of a drug are on the shelf and their unit price.

    Args:
        drug_id: the drug, e.g. "simvastatin-40".
    """
    d = _rx_drug(state, drug_id)
    return {"drug_id": drug_id, "name": d["name"], "stock": d["stock"], "unit_price_cents": d["unit_price_cents"],
            "controlled": d["controlled"]}


@tool(effect="write", errors={
    "prescription_not_found": "unknown prescription id",
    "prescription_inactive": "the prescription is expired or cancelled",
    "no_refills_left": "no refills remain; the prescriber must issue a new prescription",
    "fill_pending": "a previous fill is still waiting for pickup",
    "refill_too_soon": "less than 75% of the previous supply has been used",
    "out_of_stock": "not enough units on the shelf",
})
def request_prescription_refill(state, rx_id: str) -> dict:
    """Refill a prescription: uses one refill and the stock, and creates a fill ready for pickup.

    Args:
        rx_id: the prescription to refill.
    """
    rx = _rx_rx(state, rx_id)
    st = _rx_status(state, rx)
    if st != "active":
        raise ToolFailure("prescription_inactive", f"{rx_id} is {st}; the patient needs a new prescription from {rx['prescriber']}")
    if rx["refills_remaining"] < 1:
        raise ToolFailure("no_refills_left", f"{rx_id} has no refills left; ask {rx['prescriber']} for a new prescription")
    for fid, f in sorted(state["fills"].items()):
        if f["rx_id"] == rx_id and f["status"] == "ready":
            raise ToolFailure("fill_pending", f"fill {fid} of {rx_id} is still waiting for pickup")
    eligible = _rx_next_eligible(rx)
    if state["today"] < eligible:
        raise ToolFailure("refill_too_soon", f"{rx_id} can be refilled from {eligible}")
    drug = state["drugs"][rx["drug_id"]]
    if drug["stock"] < rx["quantity"]:
        raise ToolFailure("out_of_stock", f"only {drug['stock']} of {rx['quantity']} units of {rx['drug_id']} in stock")
    drug["stock"] -= rx["quantity"]
    fid = f"F-{max(int(k[2:]) for k in state['fills']) + 1}"
    state["fills"][fid] = {"rx_id": rx_id, "quantity": rx["quantity"], "filled_on": state["today"], "status": "ready",
                           "picked_up_on": None, "price_cents": rx["quantity"] * drug["unit_price_cents"],
                           "previous_last_filled_on": rx["last_filled_on"]}
    rx["refills_remaining"] -= 1
    rx["last_filled_on"] = state["today"]
    return {"fill_id": fid, "rx_id": rx_id, "status": "ready", "refills_remaining": rx["refills_remaining"],
            "price_cents": state["fills"][fid]["price_cents"]}


@tool(effect="write", errors={
    "fill_not_found": "unknown fill id",
    "not_ready": "the fill is not waiting for pickup",
    "identity_mismatch": "the date of birth does not match the patient",
    "id_required": "controlled substances need a photo ID check",
})
def record_prescription_pickup(state, fill_id: str, patient_dob: Annotated[str, {"pattern": r"^\d{4}-\d{2}-\d{2}$"}],
                               id_checked: bool = False) -> dict:
    """Hand a ready fill to the patient after confirming their date of birth.

    Args:
        fill_id: the fill, e.g. "F-9005".
        patient_dob: the date of birth the person at the counter gives, YYYY-MM-DD.
        id_checked: true once a photo ID was checked; required for controlled substances.
    """
    f = _rx_fill(state, fill_id)
    if f["status"] != "ready":
        raise ToolFailure("not_ready", f"{fill_id} is {f['status']}, not ready for pickup")
    rx = state["prescriptions"][f["rx_id"]]
    if state["patients"][rx["patient_id"]]["dob"] != patient_dob:
        raise ToolFailure("identity_mismatch", "that date of birth does not match the patient; do not hand over the medicine")
    if state["drugs"][rx["drug_id"]]["controlled"] and not id_checked:
        raise ToolFailure("id_required", f"{rx['drug_id']} is controlled; check a photo ID and pass id_checked=true")
    f["status"] = "picked_up"
    f["picked_up_on"] = state["today"]
    return {"fill_id": fill_id, "status": "picked_up", "price_cents": f["price_cents"]}


@tool(effect="write", errors={"fill_not_found": "unknown fill id", "not_ready": "only fills waiting for pickup can be cancelled"})
def cancel_prescription_fill(state, fill_id: str) -> dict:
    """Cancel a fill that is waiting for pickup: the units go back to stock and the refill is restored.

    Args:
        fill_id: the ready fill.
    """
    f = _rx_fill(state, fill_id)
    if f["status"] != "ready":
        raise ToolFailure("not_ready", f"{fill_id} is {f['status']}; only ready fills can be cancelled")
    rx = state["prescriptions"][f["rx_id"]]
    state["drugs"][rx["drug_id"]]["stock"] += f["quantity"]
    rx["refills_remaining"] += 1
    if f.get("previous_last_filled_on"):
        rx["last_filled_on"] = f["previous_last_filled_on"]
    f["status"] = "cancelled"
    return {"fill_id": fill_id, "status": "cancelled", "refills_remaining": rx["refills_remaining"]}


@tool(effect="write", errors={"drug_not_found": "unknown drug id"})
def restock_pharmacy_drug(state, drug_id: str, quantity: Annotated[int, {"minimum": 1, "maximum": 5000}]) -> dict:
    """Add a delivery of units to a drug's stock.

    Args:
        drug_id: the drug delivered.
        quantity: units received (1 to 5000).
    """
    d = _rx_drug(state, drug_id)
    d["stock"] += quantity
    return {"drug_id": drug_id, "stock": d["stock"]}
