"""A ticket box office: events with seat maps; hold, buy, transfer and refund tickets under per-customer limits."""

CATEGORY = "gaming_entertainment"
DESCRIPTION = "Box-office agent for concerts and shows: browse events and seat maps, hold and purchase seats, transfer and refund tickets."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["purchase_held_seats"], "message": "the payment gateway timed out; nothing was charged, retry"},
    {"kind": "rate_limit", "tools": ["hold_event_seats", "get_event_seat_map"]},
    {"kind": "partial", "tools": ["get_event_seat_map", "list_ticketed_events"]},
]
