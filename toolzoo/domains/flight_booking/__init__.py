"""An airline reservations desk: flight search, booking, seat changes, checked bags and cancellations under fare rules."""

CATEGORY = "transportation_logistics"
DESCRIPTION = "Airline reservations agent: search flights, book with basic/standard/flex fares, change seats, add checked bags, cancel with fare-rule refunds."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["book_flight", "cancel_flight_booking"],
     "message": "the reservation system timed out; nothing was booked or cancelled, check find_flight_bookings before retrying"},
    {"kind": "rate_limit", "tools": ["search_available_flights", "get_flight_seat_map"]},
    {"kind": "partial", "tools": ["search_available_flights"]},
]
