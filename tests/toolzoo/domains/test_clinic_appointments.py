"""clinic_appointments: every tool, its success path, resulting state and declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("clinic_appointments") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _off_day(h, doctor_id):
    days = h.state()["doctors"][doctor_id]["working_days"]
    return next(d for d in ["2025-03-17", "2025-03-18", "2025-03-19", "2025-03-20", "2025-03-21", "2025-03-14"]
                if d not in days)


def test_find_clinic_patient(h):
    p = h.state()["patients"]["P-103"]
    r = h.ok("find_clinic_patient", {"full_name": "  " + p["name"].upper(), "date_of_birth": p["dob"]})
    assert r["patient_id"] == "P-103" and r["age"] >= 18
    assert h.ok("find_clinic_patient", {"full_name": h.state()["patients"]["P-109"]["name"],
                                        "date_of_birth": h.state()["patients"]["P-109"]["dob"]})["age"] < 18
    h.err("find_clinic_patient", {"full_name": p["name"], "date_of_birth": "1900-01-01"}, code="patient_not_found")
    h.err("find_clinic_patient", {"full_name": p["name"], "date_of_birth": "01/02/1990"}, kind="invalid_arguments")


def test_list_clinic_doctors(h):
    assert len(h.ok("list_clinic_doctors", {})["doctors"]) == 5
    r = h.ok("list_clinic_doctors", {"specialty": "general"})
    assert [d["doctor_id"] for d in r["doctors"]] == ["D-10", "D-11"]
    h.err("list_clinic_doctors", {"specialty": "surgery"}, kind="invalid_arguments")


def test_get_doctor_open_slots(h):
    r = h.ok("get_doctor_open_slots", {"doctor_id": "D-10", "date": "2025-03-11"})
    assert r["open_slots"] == ["09:30", "10:00", "10:30", "11:00", "11:30"]  # 09:00 is A-501
    # a cancelled appointment frees its slot
    assert "09:30" in h.ok("get_doctor_open_slots", {"doctor_id": "D-10", "date": "2025-03-12"})["open_slots"]
    h.err("get_doctor_open_slots", {"doctor_id": "D-12", "date": _off_day(h, "D-12")}, code="doctor_not_working")
    h.err("get_doctor_open_slots", {"doctor_id": "D-10", "date": "2025-03-10"}, code="date_in_past")
    h.err("get_doctor_open_slots", {"doctor_id": "D-10", "date": "2025-02-31"}, code="invalid_date")
    h.err("get_doctor_open_slots", {"doctor_id": "D-99", "date": "2025-03-11"}, code="doctor_not_found")


def test_book_clinic_appointment(h):
    args = {"patient_id": "P-104", "doctor_id": "D-10", "date": "2025-03-11", "time": "10:00", "reason": "sore throat"}
    r = h.ok("book_clinic_appointment", args)
    a = h.state()["appointments"][r["appointment_id"]]
    assert a["status"] == "booked" and (a["patient_id"], a["date"], a["time"]) == ("P-104", "2025-03-11", "10:00")
    assert "10:00" not in h.ok("get_doctor_open_slots", {"doctor_id": "D-10", "date": "2025-03-11"})["open_slots"]
    h.err("book_clinic_appointment", {**args, "patient_id": "P-105"}, code="slot_unavailable")  # now taken
    h.err("book_clinic_appointment", {**args, "patient_id": "P-105", "time": "10:15"}, code="slot_unavailable")
    h.err("book_clinic_appointment", {**args, "patient_id": "P-105", "time": "12:00"}, code="slot_unavailable")
    h.err("book_clinic_appointment", {**args, "patient_id": "P-100", "time": "10:30"}, code="patient_double_booked")
    h.err("book_clinic_appointment", {**args, "patient_id": "P-100", "date": "2025-03-12", "time": "10:30"},
          code="patient_double_booked")  # A-504 with D-12 at the same time
    h.err("book_clinic_appointment", {**args, "date": "2025-03-10"}, code="date_in_past")
    h.err("book_clinic_appointment", {**args, "date": "2025-04-31"}, code="invalid_date")
    h.err("book_clinic_appointment", {**args, "doctor_id": "D-12", "date": _off_day(h, "D-12")}, code="doctor_not_working")
    h.err("book_clinic_appointment", {**args, "patient_id": "P-109"}, code="age_restriction")
    h.err("book_clinic_appointment", {**args, "doctor_id": "D-14", "date": "2025-03-13"}, code="age_restriction")
    h.err("book_clinic_appointment", {**args, "patient_id": "P-999"}, code="patient_not_found")
    h.err("book_clinic_appointment", {**args, "doctor_id": "D-99"}, code="doctor_not_found")
    h.err("book_clinic_appointment", {**args, "time": "9am"}, kind="invalid_arguments")


def test_list_patient_appointments(h):
    r = h.ok("list_patient_appointments", {"patient_id": "P-100"})
    assert [a["appointment_id"] for a in r["appointments"]] == ["A-501", "A-504"]
    assert h.ok("list_patient_appointments", {"patient_id": "P-102", "status": "completed"})["appointments"][0]["appointment_id"] == "A-503"
    assert h.ok("list_patient_appointments", {"patient_id": "P-102", "status": "booked"})["appointments"] == []
    h.err("list_patient_appointments", {"patient_id": "P-1"}, code="patient_not_found")


def test_reschedule_clinic_appointment(h):
    r = h.ok("reschedule_clinic_appointment", {"appointment_id": "A-501", "date": "2025-03-14", "time": "11:30"})
    assert r["previous"] == {"date": "2025-03-11", "time": "09:00"}
    a = h.state()["appointments"]["A-501"]
    assert (a["date"], a["time"], a["status"]) == ("2025-03-14", "11:30", "booked")
    assert "09:00" in h.ok("get_doctor_open_slots", {"doctor_id": "D-10", "date": "2025-03-11"})["open_slots"]
    # moving within the same day to its own slot's neighbour is fine (it does not clash with itself)
    h.ok("reschedule_clinic_appointment", {"appointment_id": "A-501", "date": "2025-03-14", "time": "11:00"})
    h.ok("book_clinic_appointment", {"patient_id": "P-105", "doctor_id": "D-10", "date": "2025-03-17", "time": "09:00",
                                     "reason": "check-up"})
    move = {"appointment_id": "A-501", "date": "2025-03-17", "time": "09:00"}
    h.err("reschedule_clinic_appointment", move, code="slot_unavailable")
    h.err("reschedule_clinic_appointment", {**move, "date": "2025-03-12", "time": "10:30"}, code="patient_double_booked")
    h.err("reschedule_clinic_appointment", {**move, "date": "2025-03-09"}, code="date_in_past")
    h.err("reschedule_clinic_appointment", {**move, "date": "2025/03/20"}, kind="invalid_arguments")
    h.err("reschedule_clinic_appointment", {**move, "date": "2025-02-29"}, code="invalid_date")
    h.err("reschedule_clinic_appointment", {**move, "appointment_id": "A-504", "date": _off_day(h, "D-12"), "time": "10:00"},
          code="doctor_not_working")
    h.err("reschedule_clinic_appointment", {**move, "appointment_id": "A-502"}, code="late_change")
    h.err("reschedule_clinic_appointment", {**move, "appointment_id": "A-505"}, code="not_booked")
    h.err("reschedule_clinic_appointment", {**move, "appointment_id": "A-999"}, code="appointment_not_found")


def test_cancel_clinic_appointment(h):
    h.ok("cancel_clinic_appointment", {"appointment_id": "A-504", "reason": "feeling_better"})
    a = h.state()["appointments"]["A-504"]
    assert a["status"] == "cancelled" and a["cancel_reason"] == "feeling_better"
    h.err("cancel_clinic_appointment", {"appointment_id": "A-504", "reason": "patient_request"}, code="not_booked")
    h.err("cancel_clinic_appointment", {"appointment_id": "A-502", "reason": "patient_request"}, code="late_cancellation")
    h.err("cancel_clinic_appointment", {"appointment_id": "A-0", "reason": "patient_request"}, code="appointment_not_found")
    h.err("cancel_clinic_appointment", {"appointment_id": "A-501", "reason": "whatever"}, kind="invalid_arguments")


def test_record_clinic_visit_note(h):
    r = h.ok("record_clinic_visit_note", {"appointment_id": "A-502", "note": "BP 150/95; start lifestyle changes.",
                                          "diagnosis_code": "I10", "follow_up_weeks": 4})
    assert r["status"] == "completed"
    a = h.state()["appointments"]["A-502"]
    assert a["status"] == "completed" and a["visit_note"]["follow_up_weeks"] == 4 and a["visit_note"]["diagnosis"] == "I10"
    h.err("record_clinic_visit_note", {"appointment_id": "A-502", "note": "again", "diagnosis_code": "I10"}, code="not_booked")
    h.err("record_clinic_visit_note", {"appointment_id": "A-501", "note": "early", "diagnosis_code": "I10"},
          code="visit_not_started")
    h.err("record_clinic_visit_note", {"appointment_id": "A-999", "note": "nobody", "diagnosis_code": "I10"},
          code="appointment_not_found")
    h.err("record_clinic_visit_note", {"appointment_id": "A-502", "note": "fine", "diagnosis_code": "hypertension"},
          kind="invalid_arguments")
    h.err("record_clinic_visit_note", {"appointment_id": "A-502", "note": "fine note", "diagnosis_code": "I10",
                                       "follow_up_weeks": 0}, kind="invalid_arguments")


def test_get_patient_visit_notes(h):
    r = h.ok("get_patient_visit_notes", {"patient_id": "P-102"})
    assert [v["appointment_id"] for v in r["visits"]] == ["A-503"] and r["visits"][0]["diagnosis"] == "J06.9"
    assert h.ok("get_patient_visit_notes", {"patient_id": "P-101"})["visits"] == []
    h.ok("record_clinic_visit_note", {"appointment_id": "A-502", "note": "Routine check, all normal.", "diagnosis_code": "Z00.0"})
    assert h.ok("get_patient_visit_notes", {"patient_id": "P-101"})["visits"][0]["note"] == "Routine check, all normal."
    h.err("get_patient_visit_notes", {"patient_id": "P-404"}, code="patient_not_found")
