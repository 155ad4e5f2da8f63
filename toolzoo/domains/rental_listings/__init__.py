"""A letting agency's rental desk: listing search, viewings, applications and landlord decisions."""

CATEGORY = "real_estate_property"
DESCRIPTION = "Letting agent assistant: search rental listings, book and cancel viewings, submit and withdraw tenancy applications, and record landlords' decisions."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["submit_rental_application", "record_landlord_decision"],
     "message": "the lettings system timed out; nothing was saved, check list_rental_applications before retrying"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["search_rental_listings"]},
]
