"""fleet_dispatch: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("fleet_dispatch") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _van(h, overdue=False):
    return next(vid for vid, v in sorted(h.state()["vehicles"].items())
                if v["type"] == "van" and v["status"] == "available" and not v["refrigerated"]
                and (v["odometer_km"] >= v["next_service_km"]) == overdue)


def _vehicle(h, status):
    return next(vid for vid, v in sorted(h.state()["vehicles"].items()) if v["status"] == status)


def _driver(h, licence="B", max_hours=6.0):
    return next(did for did, d in sorted(h.state()["drivers"].items())
                if d["licence"] == licence and d["status"] == "on_duty" and d["current_job"] is None and d["hours_today"] <= max_hours)


def _job(h, status="unassigned", heavy=None, refrigerated=None):
    return next(jid for jid, j in sorted(h.state()["jobs"].items())
                if j["status"] == status and (heavy is None or (j["weight_kg"] > 1200) == heavy)
                and (refrigerated is None or j["refrigerated"] == refrigerated))


def test_list_fleet_vehicles(h):
    vs = h.ok("list_fleet_vehicles")["vehicles"]
    assert {v["vehicle_id"] for v in vs} == set(h.state()["vehicles"])
    trucks = h.ok("list_fleet_vehicles", {"vehicle_type": "truck", "status": "any"})["vehicles"]
    assert trucks and all(v["type"] == "truck" for v in trucks)
    assert any(v["service_overdue"] for v in h.ok("list_fleet_vehicles", {"status": "available"})["vehicles"])
    h.err("list_fleet_vehicles", {"vehicle_type": "bike"}, kind="invalid_arguments")


def test_list_fleet_drivers(h):
    ds = h.ok("list_fleet_drivers", {"status": "off_duty"})["drivers"]
    assert ds and all(d["status"] == "off_duty" for d in ds)
    assert len(h.ok("list_fleet_drivers")["drivers"]) == len(h.state()["drivers"])


def test_list_dispatch_jobs(h):
    jobs = h.ok("list_dispatch_jobs", {"status": "unassigned"})["jobs"]
    assert {j["job_id"] for j in jobs} == {k for k, j in h.state()["jobs"].items() if j["status"] == "unassigned"}


def test_get_dispatch_job(h):
    r = h.ok("get_dispatch_job", {"job_id": "J-707"})
    assert r["status"] == "en_route" and r["history"]
    h.err("get_dispatch_job", {"job_id": "J-1"}, code="job_not_found")


def test_assign_dispatch_job(h):
    jid, vid, did = _job(h, heavy=False, refrigerated=False), _van(h), _driver(h)
    h.ok("assign_dispatch_job", {"job_id": jid, "vehicle_id": vid, "driver_id": did})
    st = h.state()
    assert (st["jobs"][jid]["status"], st["jobs"][jid]["vehicle_id"], st["jobs"][jid]["driver_id"]) == ("assigned", vid, did)
    assert st["vehicles"][vid]["status"] == "on_job" and st["drivers"][did]["current_job"] == jid


def test_assign_chilled_job_to_reefer_truck(h):
    jid = _job(h, refrigerated=True)
    truck = next(vid for vid, v in sorted(h.state()["vehicles"].items()) if v["refrigerated"] and v["type"] == "truck")
    h.ok("assign_dispatch_job", {"job_id": jid, "vehicle_id": truck, "driver_id": _driver(h, "C")})
    assert h.state()["jobs"][jid]["vehicle_id"] == truck


def test_assign_dispatch_job_errors(h):
    jid, vid, did = _job(h, heavy=False, refrigerated=False), _van(h), _driver(h)
    st = h.state()
    tired = next(d for d, x in sorted(st["drivers"].items()) if x["hours_today"] >= 9)
    off = next(d for d, x in sorted(st["drivers"].items()) if x["status"] == "off_duty")
    busy = next(d for d, x in sorted(st["drivers"].items()) if x["current_job"])
    truck = next(v for v, x in sorted(st["vehicles"].items()) if x["type"] == "truck" and x["status"] == "available")
    ok = {"job_id": jid, "vehicle_id": vid, "driver_id": did}
    h.err("assign_dispatch_job", {**ok, "job_id": "J-1"}, code="job_not_found")
    h.err("assign_dispatch_job", {**ok, "vehicle_id": "V-99"}, code="vehicle_not_found")
    h.err("assign_dispatch_job", {**ok, "driver_id": "D-99"}, code="driver_not_found")
    h.err("assign_dispatch_job", {**ok, "job_id": _job(h, "assigned")}, code="job_not_assignable")
    h.err("assign_dispatch_job", {**ok, "vehicle_id": _vehicle(h, "on_job")}, code="vehicle_unavailable")
    h.err("assign_dispatch_job", {**ok, "vehicle_id": _vehicle(h, "maintenance")}, code="vehicle_unavailable")
    h.err("assign_dispatch_job", {**ok, "vehicle_id": _van(h, overdue=True)}, code="service_overdue")
    h.err("assign_dispatch_job", {**ok, "driver_id": off}, code="driver_unavailable")
    h.err("assign_dispatch_job", {**ok, "driver_id": busy}, code="driver_unavailable")
    h.err("assign_dispatch_job", {**ok, "vehicle_id": truck}, code="licence_mismatch")
    h.err("assign_dispatch_job", {**ok, "job_id": _job(h, heavy=True)}, code="over_capacity")
    h.err("assign_dispatch_job", {**ok, "job_id": _job(h, heavy=False, refrigerated=True)}, code="refrigeration_required")
    h.err("assign_dispatch_job", {**ok, "driver_id": tired}, code="hours_limit_exceeded")
    h.err("assign_dispatch_job", {"job_id": jid, "vehicle_id": vid}, kind="invalid_arguments")
    assert h.state() == st


def test_update_dispatch_job_status(h):
    before = h.state()
    j = before["jobs"]["J-707"]
    h.ok("update_dispatch_job_status", {"job_id": "J-707", "status": "delivered", "note": "left at dock"})
    st = h.state()
    assert st["jobs"]["J-707"]["status"] == "delivered" and st["jobs"]["J-707"]["history"][-1]["note"] == "left at dock"
    assert st["vehicles"][j["vehicle_id"]]["status"] == "available"
    assert st["vehicles"][j["vehicle_id"]]["odometer_km"] == before["vehicles"][j["vehicle_id"]]["odometer_km"] + j["distance_km"]
    assert st["drivers"][j["driver_id"]]["current_job"] is None
    assert st["drivers"][j["driver_id"]]["hours_today"] == before["drivers"][j["driver_id"]]["hours_today"] + j["est_hours"]
    h.err("update_dispatch_job_status", {"job_id": "J-707", "status": "en_route"}, code="invalid_status_transition")
    h.ok("update_dispatch_job_status", {"job_id": "J-706", "status": "en_route"})
    h.err("update_dispatch_job_status", {"job_id": "J-706", "status": "failed"}, code="note_required")
    h.ok("update_dispatch_job_status", {"job_id": "J-706", "status": "failed", "note": "customer closed"})
    assert h.state()["jobs"]["J-706"]["status"] == "failed"
    h.err("update_dispatch_job_status", {"job_id": "J-1", "status": "en_route"}, code="job_not_found")
    h.err("update_dispatch_job_status", {"job_id": "J-706", "status": "lost"}, kind="invalid_arguments")


def test_cancel_assigned_job_frees_vehicle(h):
    j = h.state()["jobs"]["J-706"]
    h.ok("update_dispatch_job_status", {"job_id": "J-706", "status": "cancelled"})
    st = h.state()
    assert st["vehicles"][j["vehicle_id"]]["status"] == "available" and st["drivers"][j["driver_id"]]["current_job"] is None


def test_place_vehicle_maintenance_hold(h):
    vid = _van(h, overdue=True)
    h.ok("place_vehicle_maintenance_hold", {"vehicle_id": vid, "reason": "scheduled_service", "note": "15k service"})
    st = h.state()
    assert st["vehicles"][vid]["status"] == "maintenance" and st["vehicles"][vid]["hold"]["reason"] == "scheduled_service"
    assert st["maintenance_log"][-1]["vehicle_id"] == vid
    h.err("place_vehicle_maintenance_hold", {"vehicle_id": vid, "reason": "inspection"}, code="hold_already_active")
    h.err("place_vehicle_maintenance_hold", {"vehicle_id": _vehicle(h, "on_job"), "reason": "inspection"}, code="vehicle_on_job")
    h.err("place_vehicle_maintenance_hold", {"vehicle_id": "V-99", "reason": "inspection"}, code="vehicle_not_found")
    h.err("place_vehicle_maintenance_hold", {"vehicle_id": vid, "reason": "boredom"}, kind="invalid_arguments")


def test_release_vehicle_maintenance_hold(h):
    vid = _van(h, overdue=True)
    h.ok("place_vehicle_maintenance_hold", {"vehicle_id": vid, "reason": "scheduled_service"})
    r = h.ok("release_vehicle_maintenance_hold", {"vehicle_id": vid, "service_completed": True})
    st = h.state()
    v = st["vehicles"][vid]
    assert v["status"] == "available" and v["hold"] is None and not r["service_overdue"]
    assert v["next_service_km"] == v["odometer_km"] + st["service_interval_km"]
    held = _vehicle(h, "maintenance")
    h.ok("release_vehicle_maintenance_hold", {"vehicle_id": held, "service_completed": False})
    assert h.state()["vehicles"][held]["status"] == "available"
    h.err("release_vehicle_maintenance_hold", {"vehicle_id": vid, "service_completed": True}, code="no_active_hold")
    h.err("release_vehicle_maintenance_hold", {"vehicle_id": "V-99", "service_completed": True}, code="vehicle_not_found")
