import datetime
from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

DateStr = Annotated[str, {"pattern": r"^\d{4}-\d{2}-\d{2}$"}]
TimeStr = Annotated[str, {"pattern": r"^([01]\d|2[0-3]):[0-5]\d$"}]


def _cal_minutes(hhmm):
    return int(hhmm[:2]) * 60 + int(hhmm[3:])


def _cal_hhmm(minutes):
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _cal_check_date(state, date, allow_past=True):
    try:
        datetime.date.fromisoformat(date)
    except ValueError:
        raise ToolFailure("invalid_date", f"{date} is not a real calendar date; use YYYY-MM-DD") from None
    if not allow_past and date < state["today"]:
        raise ToolFailure("date_in_past", f"{date} is before today ({state['today']}); pick a future date")


def _cal_user(state, user_id):
    if user_id not in state["users"]:
        raise ToolFailure("user_not_found", f"no user {user_id}; user ids look like USR-1")
    return state["users"][user_id]


def _cal_event(state, event_id):
    if event_id not in state["events"]:
        raise ToolFailure("event_not_found", f"no event {event_id}")
    return state["events"][event_id]


def _cal_busy(state, user_id, date, skip=None):
    """Confirmed events on `date` that block `user_id`: organised, accepted or tentative."""
    out = []
    for eid, e in sorted(state["events"].items()):
        if eid == skip or e["status"] != "confirmed" or e["date"] != date:
            continue
        if e["organizer"] == user_id or e["attendees"].get(user_id) in ("accepted", "tentative"):
            out.append((eid, _cal_minutes(e["start"]), _cal_minutes(e["end"])))
    return out


def _cal_clash(state, user_id, date, start, end, skip=None):
    s, t = _cal_minutes(start), _cal_minutes(end)
    return [eid for eid, a, b in _cal_busy(state, user_id, date, skip) if a < t and s < b]


def _cal_summary(eid, e):
    return {"event_id": eid, "title": e["title"], "date": e["date"], "start": e["start"], "end": e["end"],
            "status": e["status"], "calendar_id": e["calendar_id"]}


@tool(errors={"user_not_found": "unknown user id"})
def list_user_calendars(state, user_id: str) -> dict:
    """List the calendars a user owns.

    Args:
        user_id: the user, e.g. "USR-1".
    """
    u = _cal_user(state, user_id)
    cals = [{"calendar_id": cid, "name": c["name"], "color": c["color"]}
            for cid, c in sorted(state["calendars"].items()) if c["owner"] == user_id]
    return {"user_id": user_id, "name": u["name"], "calendars": cals}


@tool(errors={"calendar_not_found": "unknown calendar id", "invalid_date": "a date is not real or the range is reversed"})
def list_calendar_events(state, calendar_id: str, date_from: DateStr, date_to: DateStr,
                         include_cancelled: bool = False) -> dict:
    """List the events of one calendar between two dates (inclusive), in time order.

    Args:
        calendar_id: the calendar, e.g. "CAL-11".
        date_from: first day, YYYY-MM-DD.
        date_to: last day, YYYY-MM-DD (not before date_from).
        include_cancelled: also list cancelled events.
    """
    if calendar_id not in state["calendars"]:
        raise ToolFailure("calendar_not_found", f"no calendar {calendar_id}; use list_user_calendars")
    _cal_check_date(state, date_from)
    _cal_check_date(state, date_to)
    if date_to < date_from:
        raise ToolFailure("invalid_date", "date_to is before date_from")
    evs = [_cal_summary(eid, e) for eid, e in state["events"].items()
           if e["calendar_id"] == calendar_id and date_from <= e["date"] <= date_to
           and (include_cancelled or e["status"] == "confirmed")]
    evs.sort(key=lambda e: (e["date"], e["start"], e["event_id"]))
    return {"calendar_id": calendar_id, "events": evs}


@tool(errors={"event_not_found": "unknown event id"})
def get_calendar_event(state, event_id: str) -> dict:
    """Show an event with its organizer, location and each attendee's RSVP.

    Args:
        event_id: the event, e.g. "EV-101".
    """
    return {"event_id": event_id, **_cal_event(state, event_id)}


@tool(effect="write", errors={
    "calendar_not_found": "unknown calendar id",
    "user_not_found": "an attendee id is unknown",
    "invalid_date": "the date is not a real date",
    "date_in_past": "the date is before today",
    "invalid_time_range": "the end is not after the start",
    "scheduling_conflict": "the organizer is already busy then (pass allow_conflict to double-book)",
})
def create_calendar_event(state, calendar_id: str, title: Annotated[str, {"minLength": 1, "maxLength": 120}],
                          date: DateStr, start: TimeStr, end: TimeStr, attendee_ids: list[str] | None = None,
                          location: str = "", allow_conflict: bool = False) -> dict:
    """Create an event on a calendar; invited attendees start with RSVP "pending". The calendar owner organizes it.

    Args:
        calendar_id: the calendar to put it on, e.g. "CAL-11".
        title: the event title.
        date: the day, YYYY-MM-DD.
        start: start time, HH:MM (24h).
        end: end time, HH:MM, after start.
        attendee_ids: users to invite, e.g. ["USR-2"]; the organizer is never an attendee.
        location: a room or "Video call".
        allow_conflict: true only if the user explicitly accepts overlapping an existing event.
    """
    if calendar_id not in state["calendars"]:
        raise ToolFailure("calendar_not_found", f"no calendar {calendar_id}; use list_user_calendars")
    organizer = state["calendars"][calendar_id]["owner"]
    attendees = {}
    for uid in attendee_ids or []:
        _cal_user(state, uid)
        if uid != organizer:
            attendees[uid] = "pending"
    _cal_check_date(state, date, allow_past=False)
    if _cal_minutes(end) <= _cal_minutes(start):
        raise ToolFailure("invalid_time_range", f"end {end} must be after start {start}")
    clash = _cal_clash(state, organizer, date, start, end)
    if clash and not allow_conflict:
        raise ToolFailure("scheduling_conflict",
                          f"{organizer} is busy then ({', '.join(clash)}); pick another time or confirm the double-booking")
    eid = f"EV-{max(int(k[3:]) for k in state['events']) + 1}"
    state["events"][eid] = {"calendar_id": calendar_id, "organizer": organizer, "title": title.strip(), "date": date,
                            "start": start, "end": end, "location": location.strip(), "attendees": attendees,
                            "status": "confirmed"}
    return {"event_id": eid, "organizer": organizer, "conflicts_with": clash}


@tool(effect="write", errors={
    "event_not_found": "unknown event id",
    "event_cancelled": "the event is cancelled",
    "user_not_found": "an invitee id is unknown",
    "already_invited": "an invitee is already on the event or is its organizer",
})
def invite_to_calendar_event(state, event_id: str, user_ids: Annotated[list[str], {"minItems": 1}]) -> dict:
    """Invite more people to an event; each new invitee's RSVP starts as "pending".

    Args:
        event_id: the event.
        user_ids: the users to invite, e.g. ["USR-4", "USR-5"].
    """
    e = _cal_event(state, event_id)
    if e["status"] != "confirmed":
        raise ToolFailure("event_cancelled", f"{event_id} is cancelled; create a new event instead")
    for uid in user_ids:
        _cal_user(state, uid)
        if uid in e["attendees"] or uid == e["organizer"]:
            raise ToolFailure("already_invited", f"{uid} is already on {event_id}; leave them out")
    for uid in user_ids:
        e["attendees"][uid] = "pending"
    return {"event_id": event_id, "attendees": e["attendees"]}


@tool(effect="write", errors={
    "event_not_found": "unknown event id",
    "event_cancelled": "the event is cancelled",
    "not_invited": "the user is not an attendee of the event",
})
def respond_to_calendar_invite(state, event_id: str, user_id: str,
                               response: Literal["accepted", "declined", "tentative"]) -> dict:
    """Record a user's RSVP to an event they are invited to.

    Args:
        event_id: the event.
        user_id: the invited user answering, e.g. "USR-3".
        response: the answer.
    """
    e = _cal_event(state, event_id)
    if e["status"] != "confirmed":
        raise ToolFailure("event_cancelled", f"{event_id} is cancelled; there is nothing to answer")
    if user_id not in e["attendees"]:
        raise ToolFailure("not_invited", f"{user_id} is not invited to {event_id}")
    e["attendees"][user_id] = response
    return {"event_id": event_id, "user_id": user_id, "response": response}


@tool(errors={"user_not_found": "unknown user id", "invalid_date": "the date is not real",
              "date_in_past": "the date is before today"})
def find_free_calendar_slots(state, user_ids: Annotated[list[str], {"minItems": 1, "maxItems": 8}], date: DateStr,
                             duration_minutes: Annotated[int, {"minimum": 15, "maximum": 480}] = 30) -> dict:
    """Find start times (every 30 minutes, within working hours) when all the given users are free.

    A user is busy during confirmed events they organize or have accepted or tentatively accepted.

    Args:
        user_ids: the people who must all attend, e.g. ["USR-1", "USR-2"].
        date: the day, YYYY-MM-DD.
        duration_minutes: how long the meeting lasts (15 to 480).
    """
    for uid in user_ids:
        _cal_user(state, uid)
    _cal_check_date(state, date, allow_past=False)
    busy = [iv for uid in user_ids for iv in _cal_busy(state, uid, date)]
    day_start, day_end = _cal_minutes(state["working_hours"]["start"]), _cal_minutes(state["working_hours"]["end"])
    slots = []
    t = day_start
    while t + duration_minutes <= day_end:
        if not any(a < t + duration_minutes and t < b for _, a, b in busy):
            slots.append({"start": _cal_hhmm(t), "end": _cal_hhmm(t + duration_minutes)})
        t += 30
    return {"date": date, "duration_minutes": duration_minutes, "slots": slots}


@tool(effect="write", errors={
    "event_not_found": "unknown event id",
    "event_cancelled": "the event is cancelled",
    "invalid_date": "the date is not real",
    "date_in_past": "the event is in the past or the new date is before today",
    "invalid_time_range": "the end is not after the start",
    "scheduling_conflict": "the organizer is already busy at the new time (pass allow_conflict to double-book)",
})
def reschedule_calendar_event(state, event_id: str, date: DateStr, start: TimeStr, end: TimeStr,
                              allow_conflict: bool = False) -> dict:
    """Move an event to a new date and time; every attendee's RSVP is reset to "pending".

    Args:
        event_id: the event to move.
        date: the new day, YYYY-MM-DD.
        start: the new start, HH:MM.
        end: the new end, HH:MM, after start.
        allow_conflict: true only if the user explicitly accepts overlapping an existing event.
    """
    e = _cal_event(state, event_id)
    if e["status"] != "confirmed":
        raise ToolFailure("event_cancelled", f"{event_id} is cancelled and cannot be moved")
    if e["date"] < state["today"]:
        raise ToolFailure("date_in_past", f"{event_id} already took place on {e['date']}")
    _cal_check_date(state, date, allow_past=False)
    if _cal_minutes(end) <= _cal_minutes(start):
        raise ToolFailure("invalid_time_range", f"end {end} must be after start {start}")
    clash = _cal_clash(state, e["organizer"], date, start, end, skip=event_id)
    if clash and not allow_conflict:
        raise ToolFailure("scheduling_conflict",
                          f"{e['organizer']} is busy then ({', '.join(clash)}); pick another time or confirm the double-booking")
    e.update(date=date, start=start, end=end)
    for uid in e["attendees"]:
        e["attendees"][uid] = "pending"
    return {"event_id": event_id, "date": date, "start": start, "end": end, "attendees_reset": sorted(e["attendees"])}


@tool(effect="write", errors={
    "event_not_found": "unknown event id",
    "event_cancelled": "the event is already cancelled",
    "date_in_past": "the event already took place",
})
def cancel_calendar_event(state, event_id: str) -> dict:
    """Cancel an upcoming event for everyone; it stays visible as cancelled.

    Args:
        event_id: the event to cancel.
    """
    e = _cal_event(state, event_id)
    if e["status"] != "confirmed":
        raise ToolFailure("event_cancelled", f"{event_id} is already cancelled")
    if e["date"] < state["today"]:
        raise ToolFailure("date_in_past", f"{event_id} already took place on {e['date']}")
    e["status"] = "cancelled"
    return {"event_id": event_id, "status": "cancelled", "notified": sorted(e["attendees"])}


@tool(errors={"user_not_found": "unknown user id", "invalid_date": "the date is not real"})
def check_calendar_conflicts(state, user_id: str, date: DateStr) -> dict:
    """List pairs of a user's events that overlap on a day (double-bookings).

    Args:
        user_id: the user, e.g. "USR-1".
        date: the day, YYYY-MM-DD.
    """
    _cal_user(state, user_id)
    _cal_check_date(state, date)
    busy = _cal_busy(state, user_id, date)
    pairs = []
    for i, (e1, a1, b1) in enumerate(busy):
        for e2, a2, b2 in busy[i + 1:]:
            if a1 < b2 and a2 < b1:
                pairs.append({"event_ids": [e1, e2], "overlap_start": _cal_hhmm(max(a1, a2)),
                              "overlap_end": _cal_hhmm(min(b1, b2))})
    return {"user_id": user_id, "date": date, "conflicts": pairs}
