"""A shared calendar app: users' calendars, events, invitations and RSVPs, free-slot search, rescheduling and conflicts."""

CATEGORY = "software_apps"
DESCRIPTION = ("A team calendar app: each user has work and personal calendars; create events, invite people, "
               "RSVP, find free slots, reschedule, cancel and detect double-bookings.")
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["create_calendar_event", "reschedule_calendar_event"],
     "message": "the calendar server timed out; the event was not saved, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_calendar_events", "find_free_calendar_slots"]},
]
