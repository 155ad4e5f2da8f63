from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

Hour = Annotated[int, {"minimum": 0, "maximum": 23}]
Duration = Annotated[int, {"minimum": 1, "maximum": 12}]


def _appliance(state, appliance_id):
    if appliance_id not in state["appliances"]:
        raise ToolFailure("appliance_not_found", f"no appliance {appliance_id}; see list_home_appliances")
    return state["appliances"][appliance_id]


def _tariff(state, tariff_id):
    if tariff_id not in state["tariffs"]:
        raise ToolFailure("tariff_not_found", f"no tariff {tariff_id}; see list_energy_tariffs")
    return state["tariffs"][tariff_id]


def _hours(start, duration):
    return [(start + i) % 24 for i in range(duration)]


def _rate(tariff, hour):
    for p in tariff["periods"]:
        if p["start_hour"] <= hour < p["end_hour"]:
            return p["import_cents_per_kwh"]
    return tariff["periods"][-1]["import_cents_per_kwh"]


@tool(errors={"invalid_hour_range": "from_hour after to_hour", "no_readings_yet": "the range is in the future"})
def get_energy_readings(state, from_hour: Hour = 0, to_hour: Hour = 23) -> dict:
    """Today's hourly meter readings (solar, load, battery, grid import/export) and totals for an hour range.

    Args:
        from_hour: first hour of the day to include (0-23).
        to_hour: last hour to include (0-23); readings exist only up to the current hour.
    """
    if from_hour > to_hour:
        raise ToolFailure("invalid_hour_range", "from_hour must not be after to_hour")
    if from_hour >= state["now_hour"]:
        raise ToolFailure("no_readings_yet", f"readings exist only for hours 0-{state['now_hour'] - 1} so far today")
    rows = [r for r in state["readings"] if from_hour <= r["hour"] <= to_hour]
    totals = {k: round(sum(r[k] for r in rows), 2) for k in ("solar_kwh", "load_kwh", "grid_import_kwh", "grid_export_kwh")}
    return {"readings": rows, "totals": totals, "now_hour": state["now_hour"]}


@tool()
def get_home_battery_status(state) -> dict:
    """The home battery's capacity, state of charge, operating mode and backup reserve, and the solar capacity."""
    b = state["site"]["battery"]
    return {**b, "stored_kwh": round(b["capacity_kwh"] * b["soc_pct"] / 100, 2), "solar_capacity_kw": state["site"]["solar_capacity_kw"]}


@tool(effect="write", errors={"reserve_too_low": "backup mode needs a reserve of at least 50%",
                              "tariff_incompatible": "time_of_use mode needs a time-of-use tariff"})
def set_home_battery_mode(state, mode: Literal["self_consumption", "backup", "time_of_use"],
                          reserve_pct: Annotated[int, {"minimum": 10, "maximum": 100}]) -> dict:
    """Set the battery's operating mode and the share of charge it keeps in reserve for outages.

    Args:
        mode: self_consumption (store solar surplus), backup (hold charge for outages) or time_of_use (charge cheap, discharge at peak).
        reserve_pct: percent of capacity never discharged (10-100); backup mode needs at least 50.
    """
    if mode == "backup" and reserve_pct < 50:
        raise ToolFailure("reserve_too_low", "backup mode needs reserve_pct of at least 50")
    if mode == "time_of_use" and len(state["tariffs"][state["current_tariff_id"]]["periods"]) < 2:
        raise ToolFailure("tariff_incompatible", "the current tariff has a single flat price; time_of_use mode needs a time-of-use tariff")
    b = state["site"]["battery"]
    b["mode"], b["reserve_pct"] = mode, reserve_pct
    return {"mode": mode, "reserve_pct": reserve_pct}


@tool()
def list_home_appliances(state) -> dict:
    """List the appliances with their power draw, whether they can be scheduled, and their current schedule."""
    return {"appliances": [{"appliance_id": aid, **a} for aid, a in sorted(state["appliances"].items())],
            "max_scheduled_load_kw": state["site"]["max_scheduled_load_kw"]}


@tool(effect="write", errors={"appliance_not_found": "unknown appliance id",
                              "appliance_not_flexible": "this appliance cannot be scheduled",
                              "load_limit_exceeded": "together with other scheduled appliances the load would exceed the limit"})
def schedule_appliance_run(state, appliance_id: str, start_hour: Hour, duration_hours: Duration) -> dict:
    """Schedule a flexible appliance to run daily from start_hour for duration_hours (may run past midnight).
    Replaces its previous schedule.

    Args:
        appliance_id: the appliance, e.g. "AP-4".
        start_hour: hour of the day to start (0-23).
        duration_hours: how many hours to run (1-12).
    """
    a = _appliance(state, appliance_id)
    if not a["flexible"]:
        raise ToolFailure("appliance_not_flexible", f"{a['name']} runs continuously and cannot be scheduled")
    limit = state["site"]["max_scheduled_load_kw"]
    for hour in _hours(start_hour, duration_hours):
        load = a["power_kw"] + sum(o["power_kw"] for oid, o in state["appliances"].items()
                                   if oid != appliance_id and o["schedule"]
                                   and hour in _hours(o["schedule"]["start_hour"], o["schedule"]["duration_hours"]))
        if load > limit:
            raise ToolFailure("load_limit_exceeded", f"at {hour:02d}:00 scheduled load would be {load:.1f} kW, over the {limit} kW limit; pick another start hour")
    a["schedule"] = {"start_hour": start_hour, "duration_hours": duration_hours}
    return {"appliance_id": appliance_id, "schedule": a["schedule"]}


@tool(effect="write", errors={"appliance_not_found": "unknown appliance id", "no_schedule": "the appliance has no schedule"})
def clear_appliance_schedule(state, appliance_id: str) -> dict:
    """Remove an appliance's run schedule.

    Args:
        appliance_id: the appliance.
    """
    a = _appliance(state, appliance_id)
    if a["schedule"] is None:
        raise ToolFailure("no_schedule", f"{a['name']} has no schedule to clear")
    a["schedule"] = None
    return {"appliance_id": appliance_id, "schedule": None}


@tool(errors={"appliance_not_found": "unknown appliance id", "tariff_not_found": "unknown tariff id"})
def estimate_appliance_run_cost(state, appliance_id: str, start_hour: Hour, duration_hours: Duration,
                                tariff_id: str | None = None) -> dict:
    """Estimate the grid cost of one run of an appliance (ignoring solar) under a tariff.

    Args:
        appliance_id: the appliance.
        start_hour: hour the run starts (0-23).
        duration_hours: hours it runs (1-12).
        tariff_id: the tariff to price with; omit for the current tariff.
    """
    a = _appliance(state, appliance_id)
    tid = tariff_id or state["current_tariff_id"]
    t = _tariff(state, tid)
    cost = sum(a["power_kw"] * _rate(t, h) for h in _hours(start_hour, duration_hours))
    return {"appliance_id": appliance_id, "tariff_id": tid, "energy_kwh": round(a["power_kw"] * duration_hours, 2),
            "cost_cents": int(round(cost))}


@tool()
def list_energy_tariffs(state) -> dict:
    """List the available electricity tariffs with their price periods, and which one is current."""
    return {"current_tariff_id": state["current_tariff_id"],
            "switches_left_this_year": state["max_tariff_switches_per_year"] - state["tariff_switches_this_year"],
            "tariffs": [{"tariff_id": tid, **t} for tid, t in sorted(state["tariffs"].items())]}


@tool(effect="write", errors={"tariff_not_found": "unknown tariff id", "already_on_tariff": "this is the current tariff",
                              "switch_limit_reached": "the yearly tariff switch is used up"})
def switch_energy_tariff(state, tariff_id: str) -> dict:
    """Switch the home to another electricity tariff from tomorrow. Allowed once per year.

    Args:
        tariff_id: the tariff to switch to, e.g. "TF-TOU".
    """
    _tariff(state, tariff_id)
    if tariff_id == state["current_tariff_id"]:
        raise ToolFailure("already_on_tariff", f"the home is already on {tariff_id}")
    if state["tariff_switches_this_year"] >= state["max_tariff_switches_per_year"]:
        raise ToolFailure("switch_limit_reached", "the tariff was already switched this year; no further switch is possible until next year")
    notes = []
    b = state["site"]["battery"]
    if b["mode"] == "time_of_use" and len(state["tariffs"][tariff_id]["periods"]) < 2:
        b["mode"] = "self_consumption"
        notes.append("battery mode changed to self_consumption: the new tariff has no time-of-use periods")
    previous = state["current_tariff_id"]
    state["current_tariff_id"] = tariff_id
    state["tariff_switches_this_year"] += 1
    return {"previous_tariff_id": previous, "current_tariff_id": tariff_id, "notes": notes}
