import datetime
from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

ClDate = Annotated[str, {"pattern": r"^\d{4}-\d{2}-\d{2}$"}]
ClTime = Annotated[str, {"pattern": r"^([01]\d|2[0-3]):[0-5]\d$"}]


def _cl_min(hhmm):
    return int(hhmm[:2]) * 60 + int(hhmm[3:])


def _cl_patient(state, patient_id):
    if patient_id not in state["patients"]:
        raise ToolFailure("patient_not_found", f"no patient {patient_id}; identify the patient with find_clinic_patient")
    return state["patients"][patient_id]


def _cl_doctor(state, doctor_id):
    if doctor_id not in state["doctors"]:
        raise ToolFailure("doctor_not_found", f"no doctor {doctor_id}; use list_clinic_doctors")
    return state["doctors"][doctor_id]


def _cl_appt(state, appointment_id):
    if appointment_id not in state["appointments"]:
        raise ToolFailure("appointment_not_found", f"no appointment {appointment_id}; use list_patient_appointments")
    return state["appointments"][appointment_id]


def _cl_date(date):
    try:
        return datetime.date.fromisoformat(date)
    except ValueError:
        raise ToolFailure("invalid_date", f"{date} is not a real date; use YYYY-MM-DD") from None


def _cl_age(state, patient):
    today, dob = datetime.date.fromisoformat(state["today"]), datetime.date.fromisoformat(patient["dob"])
    return today.year - dob.year - ((today.month, today.day) < (dob.month, dob.day))


def _cl_slots(state, doctor_id, date):
    d = state["doctors"][doctor_id]
    start, end = _cl_min(d["hours"]["start"]), _cl_min(d["hours"]["end"])
    step = state["slot_minutes"]
    return [f"{m // 60:02d}:{m % 60:02d}" for m in range(start, end - step + 1, step)]


def _cl_taken(state, doctor_id, date, skip=None):
    return {a["time"] for aid, a in state["appointments"].items()
            if aid != skip and a["doctor_id"] == doctor_id and a["date"] == date and a["status"] == "booked"}


def _cl_check_slot(state, patient_id, doctor_id, date, time, skip=None):
    """Raise the right ToolFailure unless `patient_id` may take doctor_id/date/time."""
    _cl_date(date)
    if date <= state["today"]:
        raise ToolFailure("date_in_past", f"appointments can be booked from the day after {state['today']}")
    d = state["doctors"][doctor_id]
    if date not in d["working_days"]:
        raise ToolFailure("doctor_not_working", f"{doctor_id} does not work on {date}; working days: {d['working_days']}")
    if time not in _cl_slots(state, doctor_id, date) or time in _cl_taken(state, doctor_id, date, skip):
        raise ToolFailure("slot_unavailable", f"{time} on {date} is not an open slot of {doctor_id}; use get_doctor_open_slots")
    for aid, a in sorted(state["appointments"].items()):
        if aid == skip or a["patient_id"] != patient_id or a["status"] != "booked" or a["date"] != date:
            continue
        if a["time"] == time or a["doctor_id"] == doctor_id:
            raise ToolFailure("patient_double_booked",
                              f"{patient_id} already has {aid} on {date} at {a['time']} with {a['doctor_id']}")


@tool(errors={"patient_not_found": "no patient with this name and date of birth"})
def find_clinic_patient(state, full_name: str, date_of_birth: ClDate) -> dict:
    """Identify a patient by full name (case-insensitive) and date of birth.

    Args:
        full_name: the patient's first and last name, e.g. "Abena Asante".
        date_of_birth: YYYY-MM-DD.
    """
    for pid, p in sorted(state["patients"].items()):
        if p["name"].lower() == " ".join(full_name.split()).lower() and p["dob"] == date_of_birth:
            return {"patient_id": pid, "name": p["name"], "age": _cl_age(state, p), "phone": p["phone"]}
    raise ToolFailure("patient_not_found", "no patient matches that name and date of birth; ask the patient to check both")


@tool()
def list_clinic_doctors(state, specialty: Literal["general", "cardiology", "dermatology", "pediatrics", "any"] = "any") -> dict:
    """List the clinic's doctors with specialty, consulting hours and working days.

    Args:
        specialty: only doctors of this specialty; "any" for all.
    """
    out = [{"doctor_id": did, **d} for did, d in sorted(state["doctors"].items()) if specialty in ("any", d["specialty"])]
    return {"doctors": out}


@tool(errors={"doctor_not_found": "unknown doctor id", "doctor_not_working": "the doctor does not work that day",
              "invalid_date": "the date is not real", "date_in_past": "the date is today or earlier"})
def get_doctor_open_slots(state, doctor_id: str, date: ClDate) -> dict:
    """List a doctor's open 30-minute slots on a day (from tomorrow onwards).

    Args:
        doctor_id: the doctor, e.g. "D-10".
        date: the day, YYYY-MM-DD.
    """
    d = _cl_doctor(state, doctor_id)
    _cl_date(date)
    if date <= state["today"]:
        raise ToolFailure("date_in_past", f"only days after {state['today']} can be booked")
    if date not in d["working_days"]:
        raise ToolFailure("doctor_not_working", f"{doctor_id} does not work on {date}; working days: {d['working_days']}")
    taken = _cl_taken(state, doctor_id, date)
    return {"doctor_id": doctor_id, "date": date, "open_slots": [t for t in _cl_slots(state, doctor_id, date) if t not in taken]}


@tool(effect="write", errors={
    "patient_not_found": "unknown patient id",
    "doctor_not_found": "unknown doctor id",
    "invalid_date": "the date is not real",
    "date_in_past": "the date is today or earlier",
    "doctor_not_working": "the doctor does not work that day",
    "slot_unavailable": "the time is not an open slot of the doctor",
    "patient_double_booked": "the patient already has an appointment at that time or with that doctor that day",
    "age_restriction": "children must see pediatrics and adults must not",
})
def book_clinic_appointment(state, patient_id: str, doctor_id: str, date: ClDate, time: ClTime,
                            reason: Annotated[str, {"minLength": 3, "maxLength": 200}]) -> dict:
    """Book an appointment in one of a doctor's open slots.

    Args:
        patient_id: the identified patient, e.g. "P-100".
        doctor_id: the doctor, e.g. "D-10".
        date: the day, YYYY-MM-DD, after today.
        time: the slot start, HH:MM, one of get_doctor_open_slots.
        reason: the reason for the visit.
    """
    p = _cl_patient(state, patient_id)
    d = _cl_doctor(state, doctor_id)
    child = _cl_age(state, p) < 18
    if child != (d["specialty"] == "pediatrics"):
        raise ToolFailure("age_restriction", "patients under 18 see pediatrics only, and adults cannot book pediatrics")
    _cl_check_slot(state, patient_id, doctor_id, date, time)
    aid = f"A-{max(int(k[2:]) for k in state['appointments']) + 1}"
    state["appointments"][aid] = {"patient_id": patient_id, "doctor_id": doctor_id, "date": date, "time": time,
                                  "reason": reason.strip(), "status": "booked", "visit_note": None, "cancel_reason": None}
    return {"appointment_id": aid, "doctor_id": doctor_id, "date": date, "time": time, "status": "booked"}


@tool(errors={"patient_not_found": "unknown patient id"})
def list_patient_appointments(state, patient_id: str,
                              status: Literal["booked", "completed", "cancelled", "any"] = "any") -> dict:
    """List a patient's appointments in date order.

    Args:
        patient_id: the patient.
        status: only appointments with this status; "any" for all.
    """
    _cl_patient(state, patient_id)
    rows = [{"appointment_id": aid, "doctor_id": a["doctor_id"], "date": a["date"], "time": a["time"],
             "reason": a["reason"], "status": a["status"]}
            for aid, a in state["appointments"].items()
            if a["patient_id"] == patient_id and status in ("any", a["status"])]
    rows.sort(key=lambda r: (r["date"], r["time"]))
    return {"patient_id": patient_id, "appointments": rows}


@tool(effect="write", errors={
    "appointment_not_found": "unknown appointment id",
    "not_booked": "only booked appointments can be moved",
    "late_change": "the appointment is today or earlier",
    "invalid_date": "the date is not real",
    "date_in_past": "the new date is today or earlier",
    "doctor_not_working": "the doctor does not work on the new day",
    "slot_unavailable": "the new time is not an open slot",
    "patient_double_booked": "the patient already has an appointment then or with that doctor that day",
})
def reschedule_clinic_appointment(state, appointment_id: str, date: ClDate, time: ClTime) -> dict:
    """Move a booked appointment to another open slot of the same doctor.

    Args:
        appointment_id: the appointment to move, e.g. "A-501".
        date: the new day, YYYY-MM-DD.
        time: the new slot start, HH:MM.
    """
    a = _cl_appt(state, appointment_id)
    if a["status"] != "booked":
        raise ToolFailure("not_booked", f"{appointment_id} is {a['status']}; book a new appointment instead")
    if a["date"] <= state["today"]:
        raise ToolFailure("late_change", f"{appointment_id} is on {a['date']}; same-day changes go through the doctor's office")
    _cl_check_slot(state, a["patient_id"], a["doctor_id"], date, time, skip=appointment_id)
    old = {"date": a["date"], "time": a["time"]}
    a.update(date=date, time=time)
    return {"appointment_id": appointment_id, "previous": old, "date": date, "time": time}


@tool(effect="write", errors={
    "appointment_not_found": "unknown appointment id",
    "not_booked": "only booked appointments can be cancelled",
    "late_cancellation": "the appointment is today or earlier (less than 24 hours' notice)",
})
def cancel_clinic_appointment(state, appointment_id: str,
                              reason: Literal["patient_request", "feeling_better", "scheduling_conflict", "doctor_unavailable"]) -> dict:
    """Cancel a booked appointment at least a day ahead; the slot becomes free.

    Args:
        appointment_id: the appointment.
        reason: why it is cancelled.
    """
    a = _cl_appt(state, appointment_id)
    if a["status"] != "booked":
        raise ToolFailure("not_booked", f"{appointment_id} is already {a['status']}")
    if a["date"] <= state["today"]:
        raise ToolFailure("late_cancellation", f"{appointment_id} is on {a['date']}; same-day cancellations go through the doctor's office")
    a.update(status="cancelled", cancel_reason=reason)
    return {"appointment_id": appointment_id, "status": "cancelled"}


@tool(effect="write", errors={
    "appointment_not_found": "unknown appointment id",
    "not_booked": "the appointment is cancelled or already has a note",
    "visit_not_started": "the appointment is in the future",
})
def record_clinic_visit_note(state, appointment_id: str, note: Annotated[str, {"minLength": 5, "maxLength": 2000}],
                             diagnosis_code: Annotated[str, {"pattern": r"^[A-Z]\d{2}(\.\d{1,2})?$"}],
                             follow_up_weeks: Annotated[int | None, {"minimum": 1, "maximum": 52}] = None) -> dict:
    """Record the doctor's visit note for today's or a past booked appointment; the visit becomes completed.

    Args:
        appointment_id: the appointment that took place.
        note: the clinical note.
        diagnosis_code: an ICD-10 code like "J06.9".
        follow_up_weeks: weeks until a follow-up visit, or null if none is needed.
    """
    a = _cl_appt(state, appointment_id)
    if a["status"] != "booked":
        raise ToolFailure("not_booked", f"{appointment_id} is {a['status']}; notes go on booked visits only")
    if a["date"] > state["today"]:
        raise ToolFailure("visit_not_started", f"{appointment_id} is on {a['date']}; record the note after the visit")
    a["status"] = "completed"
    a["visit_note"] = {"note": note.strip(), "diagnosis": diagnosis_code, "follow_up_weeks": follow_up_weeks}
    return {"appointment_id": appointment_id, "status": "completed"}


@tool(errors={"patient_not_found": "unknown patient id"})
def get_patient_visit_notes(state, patient_id: str) -> dict:
    """List a patient's completed visits with their notes, newest first.

    Args:
        patient_id: the patient.
    """
    _cl_patient(state, patient_id)
    rows = [{"appointment_id": aid, "date": a["date"], "doctor_id": a["doctor_id"], **a["visit_note"]}
            for aid, a in state["appointments"].items()
            if a["patient_id"] == patient_id and a["status"] == "completed" and a["visit_note"]]
    rows.sort(key=lambda r: r["date"], reverse=True)
    return {"patient_id": patient_id, "visits": rows}
