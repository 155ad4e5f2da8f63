"""A public library's circulation desk: catalogue search, loans with limits, returns with late fees, holds and renewals."""

CATEGORY = "education_elearning"
DESCRIPTION = "Circulation desk of a library: search the catalogue, lend and take back items, late fees, holds queues and renewals."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["borrow_library_item", "return_library_item"],
     "message": "the circulation system timed out; nothing changed, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["search_library_catalogue"]},
]
