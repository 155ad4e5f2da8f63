"""pharmacy: every tool, its success path, resulting state and declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("pharmacy") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _dob(h, pid):
    return h.state()["patients"][pid]["dob"]


def test_find_pharmacy_patient(h):
    p = h.state()["patients"]["PX-102"]
    r = h.ok("find_pharmacy_patient", {"full_name": p["name"].lower(), "date_of_birth": p["dob"]})
    assert r["patient_id"] == "PX-102" and r["allergies"] == ["penicillin"]
    h.err("find_pharmacy_patient", {"full_name": p["name"], "date_of_birth": "1899-01-01"}, code="patient_not_found")
    h.err("find_pharmacy_patient", {"full_name": p["name"]}, kind="invalid_arguments")


def test_list_pharmacy_prescriptions(h):
    r = h.ok("list_pharmacy_prescriptions", {"patient_id": "PX-101"})
    assert [x["rx_id"] for x in r["prescriptions"]] == ["RX-3003", "RX-3008"]
    assert [x["rx_id"] for x in h.ok("list_pharmacy_prescriptions", {"patient_id": "PX-102", "status": "expired"})["prescriptions"]] == ["RX-3004"]
    assert h.ok("list_pharmacy_prescriptions", {"patient_id": "PX-102", "status": "active"})["prescriptions"] == []
    h.err("list_pharmacy_prescriptions", {"patient_id": "PX-999"}, code="patient_not_found")
    h.err("list_pharmacy_prescriptions", {"patient_id": "PX-100", "status": "old"}, kind="invalid_arguments")


def test_get_prescription_details(h):
    r = h.ok("get_prescription_details", {"rx_id": "RX-3003"})
    assert r["drug_id"] == "warfarin-5" and r["next_refill_on"] == "2025-03-27" and r["fills"][0]["fill_id"] == "F-9003"
    assert h.ok("get_prescription_details", {"rx_id": "RX-3005"})["controlled"] is True
    h.err("get_prescription_details", {"rx_id": "RX-1"}, code="prescription_not_found")


def test_check_drug_interactions(h):
    r = h.ok("check_drug_interactions", {"patient_id": "PX-101", "drug_id": "ibuprofen-400"})
    assert r["safe"] is False and r["interactions"][0]["with_drug_id"] == "warfarin-5"
    assert r["interactions"][0]["severity"] == "major"
    r = h.ok("check_drug_interactions", {"patient_id": "PX-100", "drug_id": "clarithromycin-500"})
    assert [i["with_drug_id"] for i in r["interactions"]] == ["atorvastatin-20"]
    assert r["interactions"][0]["severity"] == "moderate"
    r = h.ok("check_drug_interactions", {"patient_id": "PX-102", "drug_id": "amoxicillin-500"})
    assert r["allergy_conflict"] is True and r["safe"] is False
    # an expired prescription does not count: PX-102's metformin is expired
    assert h.ok("check_drug_interactions", {"patient_id": "PX-102", "drug_id": "lisinopril-10"})["interactions"] == []
    h.err("check_drug_interactions", {"patient_id": "PX-9", "drug_id": "ibuprofen-400"}, code="patient_not_found")
    h.err("check_drug_interactions", {"patient_id": "PX-101", "drug_id": "aspirin"}, code="drug_not_found")


def test_check_pharmacy_stock(h):
    r = h.ok("check_pharmacy_stock", {"drug_id": "simvastatin-40"})
    assert r["stock"] == 10 and r["controlled"] is False
    assert h.ok("check_pharmacy_stock", {"drug_id": "tramadol-50"})["controlled"] is True
    h.err("check_pharmacy_stock", {"drug_id": "unobtainium"}, code="drug_not_found")


def test_request_prescription_refill(h):
    stock = h.state()["drugs"]["lisinopril-10"]["stock"]
    r = h.ok("request_prescription_refill", {"rx_id": "RX-3001"})
    assert r["status"] == "ready" and r["refills_remaining"] == 1
    s = h.state()
    assert s["drugs"]["lisinopril-10"]["stock"] == stock - 30
    assert s["prescriptions"]["RX-3001"]["last_filled_on"] == "2025-03-10"
    assert s["fills"][r["fill_id"]]["status"] == "ready"
    h.err("request_prescription_refill", {"rx_id": "RX-3001"}, code="fill_pending")
    h.err("request_prescription_refill", {"rx_id": "RX-3002"}, code="no_refills_left")
    h.err("request_prescription_refill", {"rx_id": "RX-3003"}, code="refill_too_soon")
    h.err("request_prescription_refill", {"rx_id": "RX-3004"}, code="prescription_inactive")
    h.err("request_prescription_refill", {"rx_id": "RX-3006"}, code="fill_pending")
    before = h.state()
    h.err("request_prescription_refill", {"rx_id": "RX-3007"}, code="out_of_stock")
    assert h.state() == before
    h.err("request_prescription_refill", {"rx_id": "RX-0"}, code="prescription_not_found")


def test_record_prescription_pickup(h):
    r = h.ok("record_prescription_pickup", {"fill_id": "F-9006", "patient_dob": _dob(h, "PX-104")})
    assert r["status"] == "picked_up"
    f = h.state()["fills"]["F-9006"]
    assert f["status"] == "picked_up" and f["picked_up_on"] == "2025-03-10"
    h.err("record_prescription_pickup", {"fill_id": "F-9006", "patient_dob": _dob(h, "PX-104")}, code="not_ready")
    h.err("record_prescription_pickup", {"fill_id": "F-9005", "patient_dob": "1900-01-01", "id_checked": True},
          code="identity_mismatch")
    h.err("record_prescription_pickup", {"fill_id": "F-9005", "patient_dob": _dob(h, "PX-103")}, code="id_required")
    h.ok("record_prescription_pickup", {"fill_id": "F-9005", "patient_dob": _dob(h, "PX-103"), "id_checked": True})
    assert h.state()["fills"]["F-9005"]["status"] == "picked_up"
    h.err("record_prescription_pickup", {"fill_id": "F-1", "patient_dob": "2000-01-01"}, code="fill_not_found")
    h.err("record_prescription_pickup", {"fill_id": "F-9005", "patient_dob": "yesterday"}, kind="invalid_arguments")


def test_cancel_prescription_fill(h):
    new = h.ok("request_prescription_refill", {"rx_id": "RX-3008"})["fill_id"]
    stock_after_fill = h.state()["drugs"]["metformin-500"]["stock"]
    r = h.ok("cancel_prescription_fill", {"fill_id": new})
    assert r["refills_remaining"] == 1
    s = h.state()
    assert s["fills"][new]["status"] == "cancelled"
    assert s["drugs"]["metformin-500"]["stock"] == stock_after_fill + 60
    assert s["prescriptions"]["RX-3008"]["last_filled_on"] == "2025-02-01"
    h.ok("request_prescription_refill", {"rx_id": "RX-3008"})  # refill is usable again
    h.err("cancel_prescription_fill", {"fill_id": new}, code="not_ready")
    h.err("cancel_prescription_fill", {"fill_id": "F-9001"}, code="not_ready")
    h.err("cancel_prescription_fill", {"fill_id": "F-42"}, code="fill_not_found")


def test_restock_pharmacy_drug(h):
    r = h.ok("restock_pharmacy_drug", {"drug_id": "simvastatin-40", "quantity": 100})
    assert r["stock"] == 110 and h.state()["drugs"]["simvastatin-40"]["stock"] == 110
    h.ok("request_prescription_refill", {"rx_id": "RX-3007"})
    assert h.state()["drugs"]["simvastatin-40"]["stock"] == 80
    h.err("restock_pharmacy_drug", {"drug_id": "nope", "quantity": 5}, code="drug_not_found")
    h.err("restock_pharmacy_drug", {"drug_id": "simvastatin-40", "quantity": 0}, kind="invalid_arguments")
