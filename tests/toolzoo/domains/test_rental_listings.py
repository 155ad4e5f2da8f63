"""rental_listings: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("rental_listings") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _pair(h, *, income_ok=True, pets_ok=True, viewed=False):
    """An available listing and an applicant with no application for it, matching the conditions."""
    st = h.state()
    for lid, lst in sorted(st["listings"].items()):
        if lst["status"] != "available":
            continue
        for apid, a in sorted(st["applicants"].items()):
            if any(x["listing_id"] == lid and x["applicant_id"] == apid for x in st["applications"].values()):
                continue
            has_view = any(v["listing_id"] == lid and v["applicant_id"] == apid and v["status"] in ("scheduled", "completed")
                           for v in st["viewings"].values())
            if ((a["monthly_income_cents"] >= lst["rent_cents"] * lst["income_multiple"]) == income_ok
                    and (not a["has_pets"] or lst["pets_allowed"]) == pets_ok and has_view == viewed):
                return lid, apid
    raise AssertionError("no such listing/applicant pair in the seed")


def _view(h, lid, apid):
    slot = h.ok("get_rental_listing", {"listing_id": lid})["free_viewing_slots"][0]
    return h.ok("schedule_rental_viewing", {"listing_id": lid, "applicant_id": apid, "slot": slot})["viewing_id"]


def _leased(h):
    return next(lid for lid, lst in sorted(h.state()["listings"].items()) if lst["status"] == "leased")


def test_search_rental_listings(h):
    st = h.state()
    all_ = h.ok("search_rental_listings")["listings"]
    assert {x["listing_id"] for x in all_} == {k for k, lst in st["listings"].items() if lst["status"] == "available"}
    r = h.ok("search_rental_listings", {"city": "porto", "max_rent_cents": 200000, "min_bedrooms": 1, "pets": True})["listings"]
    assert all(x["city"] == "Porto" and x["rent_cents"] <= 200000 and x["bedrooms"] >= 1 and x["pets_allowed"] for x in r)
    h.err("search_rental_listings", {"min_bedrooms": -1}, kind="invalid_arguments")


def test_get_rental_listing(h):
    r = h.ok("get_rental_listing", {"listing_id": "L-500"})
    lst = h.state()["listings"]["L-500"]
    assert r["rent_cents"] == lst["rent_cents"] and r["min_monthly_income_cents"] == int(lst["rent_cents"] * lst["income_multiple"])
    assert set(r["free_viewing_slots"]) <= set(lst["viewing_slots"])
    h.err("get_rental_listing", {"listing_id": "L-1"}, code="listing_not_found")


def test_find_rental_applicant(h):
    r = h.ok("find_rental_applicant", {"email": "RENTER4@example.com"})
    assert r["applicant_id"] == "AP-4"
    assert {v["viewing_id"] for v in r["viewings"]} == {k for k, v in h.state()["viewings"].items() if v["applicant_id"] == "AP-4"}
    h.err("find_rental_applicant", {"email": "nobody@example.com"}, code="applicant_not_found")


def test_schedule_rental_viewing(h):
    lid, apid = _pair(h)
    slot = h.ok("get_rental_listing", {"listing_id": lid})["free_viewing_slots"][0]
    r = h.ok("schedule_rental_viewing", {"listing_id": lid, "applicant_id": apid, "slot": slot})
    assert h.state()["viewings"][r["viewing_id"]] == {"listing_id": lid, "applicant_id": apid, "slot": slot, "status": "scheduled"}
    assert slot not in h.ok("get_rental_listing", {"listing_id": lid})["free_viewing_slots"]
    h.err("schedule_rental_viewing", {"listing_id": lid, "applicant_id": apid, "slot": slot}, code="viewing_already_scheduled")
    other = next(a for a in sorted(h.state()["applicants"]) if a != apid)
    h.err("schedule_rental_viewing", {"listing_id": lid, "applicant_id": other, "slot": slot}, code="slot_unavailable")
    h.err("schedule_rental_viewing", {"listing_id": lid, "applicant_id": other, "slot": "2031-01-01 09:00"}, code="slot_unavailable")
    h.err("schedule_rental_viewing", {"listing_id": _leased(h), "applicant_id": apid, "slot": slot}, code="listing_not_available")
    h.err("schedule_rental_viewing", {"listing_id": "L-1", "applicant_id": apid, "slot": slot}, code="listing_not_found")
    h.err("schedule_rental_viewing", {"listing_id": lid, "applicant_id": "AP-99", "slot": slot}, code="applicant_not_found")


def test_cancel_rental_viewing(h):
    vid = next(k for k, v in sorted(h.state()["viewings"].items()) if v["status"] == "scheduled")
    h.ok("cancel_rental_viewing", {"viewing_id": vid})
    assert h.state()["viewings"][vid]["status"] == "cancelled"
    h.err("cancel_rental_viewing", {"viewing_id": vid}, code="viewing_not_scheduled")
    h.err("cancel_rental_viewing", {"viewing_id": "VW-99"}, code="viewing_not_found")


def test_submit_rental_application(h):
    lid, apid = _pair(h)
    h.err("submit_rental_application", {"listing_id": lid, "applicant_id": apid, "move_in_date": "2025-08-01"},
          code="viewing_required")
    _view(h, lid, apid)
    r = h.ok("submit_rental_application", {"listing_id": lid, "applicant_id": apid, "move_in_date": "2025-08-01"})
    x = h.state()["applications"][r["application_id"]]
    assert (x["listing_id"], x["applicant_id"], x["status"]) == (lid, apid, "submitted")
    h.err("submit_rental_application", {"listing_id": lid, "applicant_id": apid, "move_in_date": "2025-08-01"},
          code="duplicate_application")
    h.err("submit_rental_application", {"listing_id": lid, "applicant_id": apid, "move_in_date": "next week"},
          kind="invalid_arguments")


def test_submit_rental_application_rules(h):
    base = {"move_in_date": "2025-08-01"}
    lid, apid = _pair(h, income_ok=False)
    _view(h, lid, apid)
    h.err("submit_rental_application", {**base, "listing_id": lid, "applicant_id": apid}, code="income_too_low")
    lid, apid = _pair(h, pets_ok=False)
    _view(h, lid, apid)
    h.err("submit_rental_application", {**base, "listing_id": lid, "applicant_id": apid}, code="pets_not_allowed")
    h.err("submit_rental_application", {**base, "listing_id": _leased(h), "applicant_id": apid}, code="listing_not_available")
    h.err("submit_rental_application", {**base, "listing_id": "L-1", "applicant_id": apid}, code="listing_not_found")
    h.err("submit_rental_application", {**base, "listing_id": lid, "applicant_id": "AP-99"}, code="applicant_not_found")


def test_withdraw_rental_application(h):
    h.ok("withdraw_rental_application", {"application_id": "APP-1"})
    assert h.state()["applications"]["APP-1"]["status"] == "withdrawn"
    h.err("withdraw_rental_application", {"application_id": "APP-1"}, code="application_not_pending")
    h.err("withdraw_rental_application", {"application_id": "APP-99"}, code="application_not_found")


def test_list_rental_applications(h):
    app = h.state()["applications"]["APP-1"]
    r = h.ok("list_rental_applications", {"listing_id": app["listing_id"]})["applications"]
    assert [x["application_id"] for x in r] == ["APP-1"]
    assert h.ok("list_rental_applications", {"status": "approved"})["applications"] == []
    h.err("list_rental_applications", {"listing_id": "L-1"}, code="listing_not_found")
    h.err("list_rental_applications", {"applicant_id": "AP-99"}, code="applicant_not_found")
    h.err("list_rental_applications", {"status": "pending"}, kind="invalid_arguments")


def test_record_landlord_decision_approve(h):
    lid = h.state()["applications"]["APP-1"]["listing_id"]
    # a second pending application and a scheduled viewing on the same listing
    st = h.state()
    other = next(a for a, x in sorted(st["applicants"].items())
                 if a != st["applications"]["APP-1"]["applicant_id"]
                 and x["monthly_income_cents"] >= st["listings"][lid]["rent_cents"] * st["listings"][lid]["income_multiple"]
                 and (not x["has_pets"] or st["listings"][lid]["pets_allowed"]))
    vid = _view(h, lid, other)
    second = h.ok("submit_rental_application", {"listing_id": lid, "applicant_id": other, "move_in_date": "2025-07-15"})["application_id"]
    r = h.ok("record_landlord_decision", {"application_id": "APP-1", "decision": "approve"})
    assert r["auto_rejected"] == [second] and vid in r["viewings_cancelled"]
    st = h.state()
    assert st["listings"][lid]["status"] == "leased" and st["applications"]["APP-1"]["status"] == "approved"
    assert st["applications"][second]["status"] == "rejected" and st["viewings"][vid]["status"] == "cancelled"
    h.err("record_landlord_decision", {"application_id": "APP-1", "decision": "reject", "reason": "x"}, code="application_not_pending")
    h.err("record_landlord_decision", {"application_id": "APP-99", "decision": "approve"}, code="application_not_found")
    h.err("record_landlord_decision", {"application_id": "APP-1", "decision": "maybe"}, kind="invalid_arguments")


def test_record_landlord_decision_reject(h):
    h.err("record_landlord_decision", {"application_id": "APP-1", "decision": "reject"}, code="reason_required")
    h.ok("record_landlord_decision", {"application_id": "APP-1", "decision": "reject", "reason": "references incomplete"})
    x = h.state()["applications"]["APP-1"]
    assert x["status"] == "rejected" and x["decision_reason"] == "references incomplete"

