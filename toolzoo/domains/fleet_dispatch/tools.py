from typing import Literal

from toolzoo.dsl import ToolFailure, tool

_TRANSITIONS = {"unassigned": {"cancelled"}, "assigned": {"en_route", "cancelled"}, "en_route": {"delivered", "failed"}}


def _vehicle(state, vehicle_id):
    if vehicle_id not in state["vehicles"]:
        raise ToolFailure("vehicle_not_found", f"no vehicle {vehicle_id}; see list_fleet_vehicles")
    return state["vehicles"][vehicle_id]


def _driver(state, driver_id):
    if driver_id not in state["drivers"]:
        raise ToolFailure("driver_not_found", f"no driver {driver_id}; see list_fleet_drivers")
    return state["drivers"][driver_id]


def _job(state, job_id):
    if job_id not in state["jobs"]:
        raise ToolFailure("job_not_found", f"no job {job_id}; see list_dispatch_jobs")
    return state["jobs"][job_id]


@tool()
def list_fleet_vehicles(state, status: Literal["available", "on_job", "maintenance", "any"] = "any",
                        vehicle_type: Literal["van", "truck", "any"] = "any") -> dict:
    """List fleet vehicles with capacity, refrigeration, licence class, status and service due mileage.

    Args:
        status: only vehicles with this status; "any" for all.
        vehicle_type: only vans or trucks; "any" for both.
    """
    out = []
    for vid, v in sorted(state["vehicles"].items()):
        if status in ("any", v["status"]) and vehicle_type in ("any", v["type"]):
            out.append({"vehicle_id": vid, **v, "service_overdue": v["odometer_km"] >= v["next_service_km"]})
    return {"vehicles": out}


@tool()
def list_fleet_drivers(state, status: Literal["on_duty", "off_duty", "any"] = "any") -> dict:
    """List drivers with licence class, duty status, hours driven today and current job.

    Args:
        status: only drivers with this duty status; "any" for all.
    """
    limit = state["max_driver_hours"]
    return {"drivers": [{"driver_id": did, **d, "hours_left": limit - d["hours_today"]}
                        for did, d in sorted(state["drivers"].items()) if status in ("any", d["status"])],
            "max_driver_hours": limit}


@tool()
def list_dispatch_jobs(state, status: Literal["unassigned", "assigned", "en_route", "delivered", "failed", "cancelled", "any"] = "any") -> dict:
    """List delivery jobs with load, route and assignment.

    Args:
        status: only jobs with this status; "any" for all.
    """
    return {"jobs": [{"job_id": jid, **{k: v for k, v in j.items() if k != "history"}}
                     for jid, j in sorted(state["jobs"].items()) if status in ("any", j["status"])]}


@tool(errors={"job_not_found": "unknown job id"})
def get_dispatch_job(state, job_id: str) -> dict:
    """Show one job in full, with its status history.

    Args:
        job_id: the job, e.g. "J-701".
    """
    return {"job_id": job_id, **_job(state, job_id)}


@tool(effect="write", errors={
    "job_not_found": "unknown job id", "vehicle_not_found": "unknown vehicle id", "driver_not_found": "unknown driver id",
    "job_not_assignable": "the job is not unassigned",
    "vehicle_unavailable": "the vehicle is on a job or on maintenance hold",
    "service_overdue": "the vehicle is past its service mileage",
    "driver_unavailable": "the driver is off duty or already on a job",
    "licence_mismatch": "the driver's licence does not cover the vehicle",
    "over_capacity": "the load exceeds the vehicle's capacity",
    "refrigeration_required": "the load needs a refrigerated vehicle",
    "hours_limit_exceeded": "the job would take the driver past the daily hours limit",
})
def assign_dispatch_job(state, job_id: str, vehicle_id: str, driver_id: str) -> dict:
    """Assign an unassigned job to a vehicle and a driver, checking capacity, refrigeration, licence, service and hours rules.

    Args:
        job_id: the job, e.g. "J-701".
        vehicle_id: the vehicle, e.g. "V-4".
        driver_id: the driver, e.g. "D-2".
    """
    j = _job(state, job_id)
    v = _vehicle(state, vehicle_id)
    d = _driver(state, driver_id)
    if j["status"] != "unassigned":
        raise ToolFailure("job_not_assignable", f"{job_id} is {j['status']}; only unassigned jobs can be assigned")
    if v["status"] != "available":
        raise ToolFailure("vehicle_unavailable", f"{vehicle_id} is {v['status']}; pick an available vehicle")
    if v["odometer_km"] >= v["next_service_km"]:
        raise ToolFailure("service_overdue", f"{vehicle_id} is past its service at {v['next_service_km']} km; put it on a scheduled_service hold")
    if d["status"] != "on_duty" or d["current_job"] is not None:
        why = "off duty" if d["status"] != "on_duty" else f"on job {d['current_job']}"
        raise ToolFailure("driver_unavailable", f"{d['name']} is {why}; pick another driver")
    if v["required_licence"] == "C" and d["licence"] != "C":
        raise ToolFailure("licence_mismatch", f"{vehicle_id} is a {v['type']} and needs a class C licence; {d['name']} has class {d['licence']}")
    if j["weight_kg"] > v["capacity_kg"]:
        raise ToolFailure("over_capacity", f"{job_id} weighs {j['weight_kg']} kg; {vehicle_id} carries at most {v['capacity_kg']} kg")
    if j["refrigerated"] and not v["refrigerated"]:
        raise ToolFailure("refrigeration_required", f"{job_id} is a chilled load; use a refrigerated vehicle")
    if d["hours_today"] + j["est_hours"] > state["max_driver_hours"]:
        raise ToolFailure("hours_limit_exceeded", f"{d['name']} has {state['max_driver_hours'] - d['hours_today']} hours left today; {job_id} needs {j['est_hours']}")
    j.update(status="assigned", vehicle_id=vehicle_id, driver_id=driver_id)
    j["history"].append({"status": "assigned", "note": ""})
    v["status"] = "on_job"
    d["current_job"] = job_id
    return {"job_id": job_id, "status": "assigned", "vehicle_id": vehicle_id, "driver_id": driver_id}


@tool(effect="write", errors={"job_not_found": "unknown job id",
                              "invalid_status_transition": "the job cannot move to this status from its current one",
                              "note_required": "failed deliveries need a note"})
def update_dispatch_job_status(state, job_id: str, status: Literal["en_route", "delivered", "failed", "cancelled"],
                               note: str = "") -> dict:
    """Move a job forward: assigned -> en_route -> delivered/failed, or cancel an unassigned/assigned job.
    Finishing or cancelling frees the vehicle and driver; finishing logs the distance and hours.

    Args:
        job_id: the job.
        status: the new status.
        note: what happened; required when the delivery failed.
    """
    j = _job(state, job_id)
    if status not in _TRANSITIONS.get(j["status"], set()):
        allowed = sorted(_TRANSITIONS.get(j["status"], set())) or ["none"]
        raise ToolFailure("invalid_status_transition", f"{job_id} is {j['status']}; it can move to: {', '.join(allowed)}")
    if status == "failed" and not note.strip():
        raise ToolFailure("note_required", "say why the delivery failed in `note`")
    if status in ("delivered", "failed", "cancelled") and j["vehicle_id"]:
        v, d = state["vehicles"][j["vehicle_id"]], state["drivers"][j["driver_id"]]
        if status != "cancelled":
            v["odometer_km"] += j["distance_km"]
            d["hours_today"] += j["est_hours"]
        v["status"] = "available"
        d["current_job"] = None
    j["status"] = status
    j["history"].append({"status": status, "note": note.strip()})
    return {"job_id": job_id, "status": status}


@tool(effect="write", errors={"vehicle_not_found": "unknown vehicle id", "vehicle_on_job": "the vehicle is on a job",
                              "hold_already_active": "the vehicle is already on hold"})
def place_vehicle_maintenance_hold(state, vehicle_id: str, reason: Literal["scheduled_service", "breakdown", "inspection", "accident"],
                                   note: str = "") -> dict:
    """Take a vehicle out of service for maintenance; it cannot be dispatched until released.

    Args:
        vehicle_id: the vehicle.
        reason: why it is held.
        note: details for the workshop.
    """
    v = _vehicle(state, vehicle_id)
    if v["status"] == "maintenance":
        raise ToolFailure("hold_already_active", f"{vehicle_id} is already on hold ({v['hold']['reason']})")
    if v["status"] == "on_job":
        job = next((jid for jid, j in state["jobs"].items() if j["vehicle_id"] == vehicle_id and j["status"] in ("assigned", "en_route")), None)
        raise ToolFailure("vehicle_on_job", f"{vehicle_id} is on job {job}; finish or cancel it first")
    v["status"] = "maintenance"
    v["hold"] = {"reason": reason, "note": note}
    state["maintenance_log"].append({"vehicle_id": vehicle_id, "event": "hold", "reason": reason, "odometer_km": v["odometer_km"]})
    return {"vehicle_id": vehicle_id, "status": "maintenance", "hold": v["hold"]}


@tool(effect="write", errors={"vehicle_not_found": "unknown vehicle id", "no_active_hold": "the vehicle is not on hold"})
def release_vehicle_maintenance_hold(state, vehicle_id: str, service_completed: bool) -> dict:
    """Return a held vehicle to service. If a full service was done, the next service is due one interval later.

    Args:
        vehicle_id: the vehicle.
        service_completed: true if the workshop completed a full service.
    """
    v = _vehicle(state, vehicle_id)
    if v["status"] != "maintenance":
        raise ToolFailure("no_active_hold", f"{vehicle_id} is {v['status']}, not on hold")
    if service_completed:
        v["next_service_km"] = v["odometer_km"] + state["service_interval_km"]
    v["status"] = "available"
    v["hold"] = None
    state["maintenance_log"].append({"vehicle_id": vehicle_id, "event": "release", "service_completed": service_completed,
                                     "odometer_km": v["odometer_km"]})
    return {"vehicle_id": vehicle_id, "status": "available", "next_service_km": v["next_service_km"],
            "service_overdue": v["odometer_km"] >= v["next_service_km"]}
