import math
from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

_DRONE_WAYPOINT = {
    "type": "object", "additionalProperties": False, "required": ["x", "y", "alt_m"],
    "properties": {"x": {"type": "number", "minimum": -5000, "maximum": 5000},
                   "y": {"type": "number", "minimum": -5000, "maximum": 5000},
                   "alt_m": {"type": "number", "minimum": 10, "maximum": 120}},
}


def _drone(state, drone_id):
    if drone_id not in state["drones"]:
        raise ToolFailure("drone_not_found", f"no drone {drone_id}; see list_drone_fleet")
    return state["drones"][drone_id]


def _drone_mission(state, mission_id):
    if mission_id not in state["missions"]:
        raise ToolFailure("mission_not_found", f"no mission {mission_id}")
    return state["missions"][mission_id]


def _drone_route(drone, waypoints):
    """The closed route: home, each waypoint, back home; as a list of [x, y]."""
    return [drone["home"]] + [[w["x"], w["y"]] for w in waypoints] + [drone["home"]]


def _drone_distance(route):
    return sum(math.hypot(b[0] - a[0], b[1] - a[1]) for a, b in zip(route, route[1:]))


def _drone_seg_dist(p, a, b):
    ax, ay, bx, by, px, py = a[0], a[1], b[0], b[1], p[0], p[1]
    dx, dy = bx - ax, by - ay
    t = 0.0 if dx == dy == 0 else max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return math.hypot(ax + t * dx - px, ay + t * dy - py)


def _drone_check_zones(state, route):
    for zid, z in sorted(state["no_fly_zones"].items()):
        if not z["active"]:
            continue
        for a, b in zip(route, route[1:]):
            if _drone_seg_dist(z["center"], a, b) <= z["radius_m"]:
                raise ToolFailure("no_fly_zone_violation", f"the leg {a} -> {b} crosses {zid} ({z['name']}, radius "
                                  f"{z['radius_m']} m around {z['center']}); add waypoints that route around it")


def _drone_battery_needed(state, drone, distance_m):
    r = state["rules"]
    load = 1 + r["payload_battery_factor"] * drone["payload_kg"] / drone["max_payload_kg"]
    return math.ceil(distance_m / 1000 * r["battery_per_km"] * load)


@tool()
def list_drone_fleet(state) -> dict:
    """List every drone: model, status (grounded/armed/flying), battery %, payload and its limit, position, home and mission."""
    return {"drones": [{"drone_id": d, **v} for d, v in sorted(state["drones"].items())], "wind_ms": state["weather"]["wind_ms"]}


@tool()
def list_no_fly_zones(state, active_only: bool = True) -> dict:
    """List no-fly zones (circles: center [x, y] in metres and radius); routes may not cross an active zone.

    Args:
        active_only: hide zones that are not currently in force.
    """
    return {"zones": [{"zone_id": z, **v} for z, v in sorted(state["no_fly_zones"].items()) if v["active"] or not active_only]}


@tool(effect="write", errors={
    "drone_not_found": "unknown drone id", "drone_has_mission": "the drone already has a planned or active mission",
    "no_fly_zone_violation": "a leg crosses an active no-fly zone",
    "route_too_long": "even a full battery cannot fly the route with the landing reserve"})
def plan_drone_mission(state, drone_id: str,
                       waypoints: Annotated[list[dict], {"minItems": 1, "maxItems": 8, "items": _DRONE_WAYPOINT}]) -> dict:
    """Plan a round-trip mission: from the drone's home through the waypoints in order and back home. Checks the route
    against active no-fly zones and the battery needed at the drone's current payload.

    Args:
        drone_id: the drone, e.g. "D-2".
        waypoints: up to 8 points {"x": metres east, "y": metres north, "alt_m": 10-120 metres}.
    """
    d = _drone(state, drone_id)
    if d["mission_id"]:
        raise ToolFailure("drone_has_mission", f"{drone_id} already has mission {d['mission_id']}; cancel or fly it first")
    route = _drone_route(d, waypoints)
    _drone_check_zones(state, route)
    dist = _drone_distance(route)
    need = _drone_battery_needed(state, d, dist)
    if need + state["rules"]["landing_reserve"] > 100:
        raise ToolFailure("route_too_long", f"the route is {round(dist)} m and needs {need}% battery plus the "
                          f"{state['rules']['landing_reserve']}% reserve; split it into shorter missions")
    mid = f"MS-{state['next_mission']}"
    state["next_mission"] += 1
    state["missions"][mid] = {"drone_id": drone_id, "waypoints": waypoints, "status": "planned", "distance_m": round(dist)}
    d["mission_id"] = mid
    return {"mission_id": mid, "distance_m": round(dist), "battery_needed": need}


@tool(errors={"mission_not_found": "unknown mission id"})
def get_drone_mission(state, mission_id: str) -> dict:
    """Show a mission: drone, waypoints, status, route length and the battery it needs with the drone's current payload.

    Args:
        mission_id: the mission, e.g. "MS-3".
    """
    m = _drone_mission(state, mission_id)
    d = state["drones"][m["drone_id"]]
    return {"mission_id": mission_id, **m, "battery_needed": _drone_battery_needed(state, d, m["distance_m"]),
            "landing_reserve": state["rules"]["landing_reserve"]}


@tool(effect="write", errors={"mission_not_found": "unknown mission id",
                              "mission_not_cancellable": "only planned missions can be cancelled"})
def cancel_drone_mission(state, mission_id: str) -> dict:
    """Cancel a planned mission (disarms the drone if it was armed for it).

    Args:
        mission_id: the mission to cancel.
    """
    m = _drone_mission(state, mission_id)
    if m["status"] != "planned":
        raise ToolFailure("mission_not_cancellable", f"mission {mission_id} is {m['status']}; "
                          + ("land the drone (land_drone with outcome abort) instead" if m["status"] == "active" else "nothing to cancel"))
    m["status"] = "cancelled"
    d = state["drones"][m["drone_id"]]
    d["mission_id"] = None
    d["status"] = "grounded"
    return {"mission_id": mission_id, "status": "cancelled"}


@tool(effect="write", errors={"drone_not_found": "unknown drone id", "drone_not_grounded": "payload changes need a grounded drone",
                              "payload_too_heavy": "over the drone's payload limit"})
def set_drone_payload(state, drone_id: str, weight_kg: Annotated[float, {"minimum": 0, "maximum": 25}]) -> dict:
    """Load (or unload, with 0) the drone's payload; heavier payloads use more battery per km.

    Args:
        drone_id: the drone.
        weight_kg: the payload weight in kg.
    """
    d = _drone(state, drone_id)
    if d["status"] != "grounded":
        raise ToolFailure("drone_not_grounded", f"{drone_id} is {d['status']}; disarm or land it first")
    if weight_kg > d["max_payload_kg"]:
        raise ToolFailure("payload_too_heavy", f"{drone_id} ({d['model']}) carries at most {d['max_payload_kg']} kg")
    d["payload_kg"] = float(weight_kg)
    return {"drone_id": drone_id, "payload_kg": d["payload_kg"]}


@tool(effect="write", errors={
    "drone_not_found": "unknown drone id", "drone_not_grounded": "the drone is already armed or flying",
    "no_mission_planned": "the drone has no planned mission", "wind_too_high": "wind above the limit",
    "insufficient_battery": "not enough battery for the mission plus reserve, or below the launch minimum"})
def arm_drone(state, drone_id: str) -> dict:
    """Pre-flight check and arm a grounded drone for its planned mission.

    Args:
        drone_id: the drone.
    """
    d = _drone(state, drone_id)
    if d["status"] != "grounded":
        raise ToolFailure("drone_not_grounded", f"{drone_id} is already {d['status']}")
    if not d["mission_id"]:
        raise ToolFailure("no_mission_planned", f"{drone_id} has no mission; plan_drone_mission first")
    r = state["rules"]
    if state["weather"]["wind_ms"] > r["max_wind_ms"]:
        raise ToolFailure("wind_too_high", f"wind is {state['weather']['wind_ms']} m/s; flights need at most {r['max_wind_ms']} m/s. Wait.")
    need = _drone_battery_needed(state, d, state["missions"][d["mission_id"]]["distance_m"])
    required = max(r["min_launch_battery"], need + r["landing_reserve"])
    if d["battery"] < required:
        raise ToolFailure("insufficient_battery", f"{drone_id} has {d['battery']}%; this mission needs {required}% "
                          "(swap_drone_battery, lighten the payload or plan a shorter mission)")
    d["status"] = "armed"
    return {"drone_id": drone_id, "status": "armed", "mission_id": d["mission_id"]}


@tool(effect="write", errors={"drone_not_found": "unknown drone id", "drone_not_armed": "the drone is not armed"})
def disarm_drone(state, drone_id: str) -> dict:
    """Disarm an armed drone that has not launched (the mission stays planned).

    Args:
        drone_id: the drone.
    """
    d = _drone(state, drone_id)
    if d["status"] != "armed":
        raise ToolFailure("drone_not_armed", f"{drone_id} is {d['status']}, not armed")
    d["status"] = "grounded"
    return {"drone_id": drone_id, "status": "grounded"}


@tool(effect="write", errors={"drone_not_found": "unknown drone id", "drone_not_armed": "arm the drone first",
                              "no_fly_zone_violation": "a zone became active on the route since planning"})
def launch_drone(state, drone_id: str) -> dict:
    """Launch an armed drone on its mission (re-checks the route against the no-fly zones in force now).

    Args:
        drone_id: the drone.
    """
    d = _drone(state, drone_id)
    if d["status"] != "armed":
        raise ToolFailure("drone_not_armed", f"{drone_id} is {d['status']}; arm_drone first")
    m = state["missions"][d["mission_id"]]
    _drone_check_zones(state, _drone_route(d, m["waypoints"]))
    d["status"], m["status"] = "flying", "active"
    return {"drone_id": drone_id, "status": "flying", "mission_id": d["mission_id"]}


@tool(effect="write", errors={"drone_not_found": "unknown drone id", "drone_not_flying": "the drone is not in the air"})
def land_drone(state, drone_id: str, outcome: Literal["complete", "abort"] = "complete") -> dict:
    """Bring a flying drone home. "complete" flies the whole mission and delivers the payload; "abort" turns back
    at once (about half the battery use, payload kept).

    Args:
        drone_id: the drone.
        outcome: finish the mission, or abort it and return home.
    """
    d = _drone(state, drone_id)
    if d["status"] != "flying":
        raise ToolFailure("drone_not_flying", f"{drone_id} is {d['status']}")
    m = state["missions"][d["mission_id"]]
    used = _drone_battery_needed(state, d, m["distance_m"])
    if outcome == "abort":
        used = used // 2
    else:
        d["payload_kg"] = 0.0
    d["battery"] = max(0, d["battery"] - used)
    d["x"], d["y"] = d["home"]
    d["status"], d["mission_id"] = "grounded", None
    m["status"] = "completed" if outcome == "complete" else "aborted"
    return {"drone_id": drone_id, "mission_status": m["status"], "battery": d["battery"]}


@tool(effect="write", errors={"drone_not_found": "unknown drone id", "drone_not_grounded": "only grounded drones",
                              "battery_full": "the battery is already full"})
def swap_drone_battery(state, drone_id: str) -> dict:
    """Swap in a fully charged battery on a grounded drone.

    Args:
        drone_id: the drone.
    """
    d = _drone(state, drone_id)
    if d["status"] != "grounded":
        raise ToolFailure("drone_not_grounded", f"{drone_id} is {d['status']}; batteries are swapped on the ground, disarmed")
    if d["battery"] >= 100:
        raise ToolFailure("battery_full", f"{drone_id} is at 100% already")
    d["battery"] = 100
    return {"drone_id": drone_id, "battery": 100}
