"""A university registrar's enrolment desk: course catalogue with capacity and prerequisites, enrol/drop, waitlists and grades."""

CATEGORY = "education_elearning"
DESCRIPTION = ("Term registration at a university: browse courses, check prerequisites and credit limits, enrol and "
               "drop, join waitlists with automatic promotion, read transcripts and post final grades.")
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["enroll_student_in_course", "drop_course_enrollment"],
     "message": "the registrar system timed out; the enrolment did not change, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["search_course_catalog"]},
]
