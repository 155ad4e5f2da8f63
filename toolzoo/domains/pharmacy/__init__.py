"""A community pharmacy counter: prescriptions, refills against remaining-refill counts, stock, interaction checks and pickup."""

CATEGORY = "healthcare_medical"
DESCRIPTION = ("Pharmacy counter of a community drugstore: identify patients, review prescriptions, check drug "
               "interactions and allergies, refill within the rules, manage stock, and hand out filled prescriptions.")
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["request_prescription_refill"],
     "message": "the dispensing system timed out; no refill was created, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_pharmacy_prescriptions"]},
]
