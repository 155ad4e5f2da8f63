"""An outpatient clinic's front desk: patients, doctors' schedules, booking, rescheduling and cancelling appointments, visit notes."""

CATEGORY = "healthcare_medical"
DESCRIPTION = ("Front desk of a multi-specialty outpatient clinic: identify patients, browse doctors and their "
               "open 30-minute slots, book, reschedule and cancel appointments, and record visit notes.")
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["book_clinic_appointment", "reschedule_clinic_appointment"],
     "message": "the scheduling system timed out; no appointment was changed, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["get_doctor_open_slots", "list_patient_appointments"]},
]
