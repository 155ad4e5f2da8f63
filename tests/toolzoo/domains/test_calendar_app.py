"""calendar_app: every tool, its success path, resulting state and declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness

FREE_DAY = "2025-03-17"  # the seed puts no events after 2025-03-14


@pytest.fixture(scope="module")
def h():
    with DomainHarness("calendar_app") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def test_list_user_calendars(h):
    r = h.ok("list_user_calendars", {"user_id": "USR-1"})
    assert [c["calendar_id"] for c in r["calendars"]] == ["CAL-11", "CAL-12"]
    h.err("list_user_calendars", {"user_id": "USR-99"}, code="user_not_found")
    h.err("list_user_calendars", {"user_id": 1}, kind="invalid_arguments")


def test_list_calendar_events(h):
    r = h.ok("list_calendar_events", {"calendar_id": "CAL-11", "date_from": "2025-03-11", "date_to": "2025-03-11"})
    assert [e["event_id"] for e in r["events"]] == ["EV-101"]
    r = h.ok("list_calendar_events", {"calendar_id": "CAL-41", "date_from": "2025-03-01", "date_to": "2025-03-31"})
    assert "EV-105" not in [e["event_id"] for e in r["events"]]
    r = h.ok("list_calendar_events", {"calendar_id": "CAL-41", "date_from": "2025-03-01", "date_to": "2025-03-31",
                                      "include_cancelled": True})
    assert "EV-105" in [e["event_id"] for e in r["events"]]
    h.err("list_calendar_events", {"calendar_id": "CAL-99", "date_from": "2025-03-01", "date_to": "2025-03-02"},
          code="calendar_not_found")
    h.err("list_calendar_events", {"calendar_id": "CAL-11", "date_from": "2025-03-09", "date_to": "2025-03-02"},
          code="invalid_date")
    h.err("list_calendar_events", {"calendar_id": "CAL-11", "date_from": "2025-02-30", "date_to": "2025-03-02"},
          code="invalid_date")
    h.err("list_calendar_events", {"calendar_id": "CAL-11", "date_from": "March 1", "date_to": "2025-03-02"},
          kind="invalid_arguments")


def test_get_calendar_event(h):
    e = h.ok("get_calendar_event", {"event_id": "EV-101"})
    assert e["organizer"] == "USR-1" and e["attendees"] == {"USR-2": "accepted", "USR-3": "pending"}
    h.err("get_calendar_event", {"event_id": "EV-1"}, code="event_not_found")


def test_create_calendar_event(h):
    r = h.ok("create_calendar_event", {"calendar_id": "CAL-11", "title": "Roadmap", "date": FREE_DAY,
                                       "start": "09:00", "end": "10:00", "attendee_ids": ["USR-2", "USR-1"]})
    e = h.state()["events"][r["event_id"]]
    assert e["organizer"] == "USR-1" and e["attendees"] == {"USR-2": "pending"} and e["status"] == "confirmed"
    base = {"calendar_id": "CAL-11", "title": "Clash", "date": FREE_DAY, "start": "09:30", "end": "10:30"}
    h.err("create_calendar_event", base, code="scheduling_conflict")
    r2 = h.ok("create_calendar_event", {**base, "allow_conflict": True})
    assert r2["conflicts_with"] == [r["event_id"]]
    h.err("create_calendar_event", {**base, "calendar_id": "CAL-99"}, code="calendar_not_found")
    h.err("create_calendar_event", {**base, "attendee_ids": ["USR-42"]}, code="user_not_found")
    h.err("create_calendar_event", {**base, "date": "2025-03-03"}, code="date_in_past")
    h.err("create_calendar_event", {**base, "date": "2025-04-31"}, code="invalid_date")
    h.err("create_calendar_event", {**base, "start": "11:00", "end": "10:00"}, code="invalid_time_range")
    h.err("create_calendar_event", {**base, "start": "25:00"}, kind="invalid_arguments")
    h.err("create_calendar_event", {**base, "title": ""}, kind="invalid_arguments")


def test_invite_to_calendar_event(h):
    r = h.ok("invite_to_calendar_event", {"event_id": "EV-101", "user_ids": ["USR-4", "USR-5"]})
    assert r["attendees"]["USR-4"] == "pending"
    assert h.state()["events"]["EV-101"]["attendees"]["USR-5"] == "pending"
    h.err("invite_to_calendar_event", {"event_id": "EV-101", "user_ids": ["USR-2"]}, code="already_invited")
    h.err("invite_to_calendar_event", {"event_id": "EV-101", "user_ids": ["USR-1"]}, code="already_invited")
    h.err("invite_to_calendar_event", {"event_id": "EV-101", "user_ids": ["USR-77"]}, code="user_not_found")
    h.err("invite_to_calendar_event", {"event_id": "EV-105", "user_ids": ["USR-6"]}, code="event_cancelled")
    h.err("invite_to_calendar_event", {"event_id": "EV-999", "user_ids": ["USR-6"]}, code="event_not_found")
    h.err("invite_to_calendar_event", {"event_id": "EV-101", "user_ids": []}, kind="invalid_arguments")


def test_respond_to_calendar_invite(h):
    r = h.ok("respond_to_calendar_invite", {"event_id": "EV-101", "user_id": "USR-3", "response": "accepted"})
    assert r["response"] == "accepted"
    assert h.state()["events"]["EV-101"]["attendees"]["USR-3"] == "accepted"
    h.err("respond_to_calendar_invite", {"event_id": "EV-101", "user_id": "USR-6", "response": "accepted"},
          code="not_invited")
    h.err("respond_to_calendar_invite", {"event_id": "EV-105", "user_id": "USR-5", "response": "accepted"},
          code="event_cancelled")
    h.err("respond_to_calendar_invite", {"event_id": "EV-0", "user_id": "USR-5", "response": "accepted"},
          code="event_not_found")
    h.err("respond_to_calendar_invite", {"event_id": "EV-101", "user_id": "USR-3", "response": "maybe"},
          kind="invalid_arguments")


def test_find_free_calendar_slots(h):
    r = h.ok("find_free_calendar_slots", {"user_ids": ["USR-1", "USR-2"], "date": "2025-03-11", "duration_minutes": 60})
    starts = [s["start"] for s in r["slots"]]
    # USR-1 is busy 10:00-11:30 (EV-101, EV-102) and 14:00-15:00 (EV-103, tentative)
    assert "09:00" in starts and "11:30" in starts and "16:00" in starts
    assert "09:30" not in starts and "10:00" not in starts and "13:30" not in starts and "14:00" not in starts
    assert len(h.ok("find_free_calendar_slots", {"user_ids": ["USR-1"], "date": FREE_DAY,
                                                 "duration_minutes": 480})["slots"]) == 1
    h.err("find_free_calendar_slots", {"user_ids": ["USR-9"], "date": FREE_DAY}, code="user_not_found")
    h.err("find_free_calendar_slots", {"user_ids": ["USR-1"], "date": "2025-03-01"}, code="date_in_past")
    h.err("find_free_calendar_slots", {"user_ids": ["USR-1"], "date": "2025-13-01"}, code="invalid_date")
    h.err("find_free_calendar_slots", {"user_ids": ["USR-1"], "date": FREE_DAY, "duration_minutes": 5},
          kind="invalid_arguments")


def test_reschedule_calendar_event(h):
    h.ok("respond_to_calendar_invite", {"event_id": "EV-101", "user_id": "USR-3", "response": "accepted"})
    r = h.ok("reschedule_calendar_event", {"event_id": "EV-101", "date": FREE_DAY, "start": "13:00", "end": "14:00"})
    assert r["attendees_reset"] == ["USR-2", "USR-3"]
    e = h.state()["events"]["EV-101"]
    assert (e["date"], e["start"], e["end"]) == (FREE_DAY, "13:00", "14:00")
    assert set(e["attendees"].values()) == {"pending"}
    # EV-102 (USR-1) clashes with EV-101's new time
    move = {"event_id": "EV-102", "date": FREE_DAY, "start": "13:30", "end": "14:30"}
    h.err("reschedule_calendar_event", move, code="scheduling_conflict")
    h.ok("reschedule_calendar_event", {**move, "allow_conflict": True})
    # moving an event within its own slot is no conflict with itself
    h.ok("reschedule_calendar_event", {"event_id": "EV-101", "date": FREE_DAY, "start": "12:30", "end": "13:30",
                                       "allow_conflict": True})
    h.err("reschedule_calendar_event", {**move, "event_id": "EV-104"}, code="date_in_past")
    h.err("reschedule_calendar_event", {**move, "date": "2025-03-09"}, code="date_in_past")
    h.err("reschedule_calendar_event", {**move, "date": "2025-02-29"}, code="invalid_date")
    h.err("reschedule_calendar_event", {**move, "start": "15:00"}, code="invalid_time_range")
    h.err("reschedule_calendar_event", {**move, "event_id": "EV-105"}, code="event_cancelled")
    h.err("reschedule_calendar_event", {**move, "event_id": "EV-404"}, code="event_not_found")


def test_cancel_calendar_event(h):
    r = h.ok("cancel_calendar_event", {"event_id": "EV-101"})
    assert r["notified"] == ["USR-2", "USR-3"]
    assert h.state()["events"]["EV-101"]["status"] == "cancelled"
    h.err("cancel_calendar_event", {"event_id": "EV-101"}, code="event_cancelled")
    h.err("cancel_calendar_event", {"event_id": "EV-104"}, code="date_in_past")
    h.err("cancel_calendar_event", {"event_id": "EV-404"}, code="event_not_found")


def test_check_calendar_conflicts(h):
    r = h.ok("check_calendar_conflicts", {"user_id": "USR-1", "date": "2025-03-11"})
    assert r["conflicts"] == [{"event_ids": ["EV-101", "EV-102"], "overlap_start": "10:30", "overlap_end": "11:00"}]
    h.ok("cancel_calendar_event", {"event_id": "EV-102"})
    assert h.ok("check_calendar_conflicts", {"user_id": "USR-1", "date": "2025-03-11"})["conflicts"] == []
    h.err("check_calendar_conflicts", {"user_id": "USR-0", "date": "2025-03-11"}, code="user_not_found")
    h.err("check_calendar_conflicts", {"user_id": "USR-1", "date": "2025-02-30"}, code="invalid_date")
