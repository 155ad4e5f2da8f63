"""drone_missions: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("drone_missions") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


SQUARE = [{"x": 500, "y": 500, "alt_m": 60}]  # round trip of 1414 m: 15% battery unloaded
THROUGH_ZONE = [{"x": 2000, "y": 0, "alt_m": 60}]


def _arrange(h, change=None):
    """All drones home at (0, 0), full and grounded; NFZ-1 active around (1000, 0); NFZ-2 inactive around (0, 2000)."""
    s = h.state()
    for d in s["drones"].values():
        d.update(status="grounded", battery=100, payload_kg=0.0, x=0, y=0, home=[0, 0], mission_id=None)
    s["drones"]["D-3"]["max_payload_kg"] = 8.0
    s["no_fly_zones"] = {"NFZ-1": {"name": "Stadium", "center": [1000, 0], "radius_m": 300, "active": True},
                         "NFZ-2": {"name": "Prison", "center": [0, 2000], "radius_m": 500, "active": False}}
    s["weather"]["wind_ms"] = 5
    s["missions"], s["next_mission"] = {}, 1
    if change:
        change(s)
    h.sandbox.reset(s)
    return s


def _ready(h, drone="D-1"):
    mid = h.ok("plan_drone_mission", {"drone_id": drone, "waypoints": SQUARE})["mission_id"]
    h.ok("arm_drone", {"drone_id": drone})
    return mid


def test_list_drone_fleet(h):
    s = h.state()
    out = h.ok("list_drone_fleet", {})
    assert [d["drone_id"] for d in out["drones"]] == sorted(s["drones"]) and out["wind_ms"] == s["weather"]["wind_ms"]


def test_list_no_fly_zones(h):
    _arrange(h)
    assert [z["zone_id"] for z in h.ok("list_no_fly_zones", {})["zones"]] == ["NFZ-1"]
    assert len(h.ok("list_no_fly_zones", {"active_only": False})["zones"]) == 2
    h.err("list_no_fly_zones", {"active_only": 1}, kind="invalid_arguments")


def test_plan_drone_mission(h):
    _arrange(h)
    r = h.ok("plan_drone_mission", {"drone_id": "D-1", "waypoints": SQUARE})
    assert r["distance_m"] == 1414 and r["battery_needed"] == 15
    s = h.state()
    assert s["missions"][r["mission_id"]]["status"] == "planned" and s["drones"]["D-1"]["mission_id"] == r["mission_id"]
    h.err("plan_drone_mission", {"drone_id": "D-1", "waypoints": SQUARE}, code="drone_has_mission")
    h.err("plan_drone_mission", {"drone_id": "D-2", "waypoints": THROUGH_ZONE}, code="no_fly_zone_violation")
    around = [{"x": 1000, "y": 600, "alt_m": 80}, {"x": 2000, "y": 0, "alt_m": 80}, {"x": 1000, "y": -600, "alt_m": 80}]
    h.ok("plan_drone_mission", {"drone_id": "D-2", "waypoints": around})
    h.ok("plan_drone_mission", {"drone_id": "D-3", "waypoints": [{"x": 0, "y": 2000, "alt_m": 50}]})  # zone inactive
    h.err("plan_drone_mission", {"drone_id": "D-4", "waypoints": [{"x": 4000, "y": 4000, "alt_m": 100}]}, code="route_too_long")
    h.err("plan_drone_mission", {"drone_id": "D-9", "waypoints": SQUARE}, code="drone_not_found")
    h.err("plan_drone_mission", {"drone_id": "D-4", "waypoints": [{"x": 10, "y": 10, "alt_m": 150}]}, kind="invalid_arguments")
    h.err("plan_drone_mission", {"drone_id": "D-4", "waypoints": [{"x": 10, "y": 10}]}, kind="invalid_arguments")
    h.err("plan_drone_mission", {"drone_id": "D-4", "waypoints": []}, kind="invalid_arguments")


def test_get_drone_mission(h):
    _arrange(h)
    mid = h.ok("plan_drone_mission", {"drone_id": "D-3", "waypoints": SQUARE})["mission_id"]
    m = h.ok("get_drone_mission", {"mission_id": mid})
    assert m["drone_id"] == "D-3" and m["battery_needed"] == 15 and m["waypoints"] == SQUARE
    h.ok("set_drone_payload", {"drone_id": "D-3", "weight_kg": 8})
    assert h.ok("get_drone_mission", {"mission_id": mid})["battery_needed"] == 22  # full payload: x1.5
    h.err("get_drone_mission", {"mission_id": "MS-999"}, code="mission_not_found")


def test_cancel_drone_mission(h):
    _arrange(h)
    mid = _ready(h)
    assert h.ok("cancel_drone_mission", {"mission_id": mid})["status"] == "cancelled"
    s = h.state()
    assert s["missions"][mid]["status"] == "cancelled"
    assert s["drones"]["D-1"]["mission_id"] is None and s["drones"]["D-1"]["status"] == "grounded"
    h.err("cancel_drone_mission", {"mission_id": mid}, code="mission_not_cancellable")
    mid2 = _ready(h)
    h.ok("launch_drone", {"drone_id": "D-1"})
    h.err("cancel_drone_mission", {"mission_id": mid2}, code="mission_not_cancellable")
    h.err("cancel_drone_mission", {"mission_id": "MS-999"}, code="mission_not_found")


def test_set_drone_payload(h):
    _arrange(h)
    h.ok("set_drone_payload", {"drone_id": "D-3", "weight_kg": 6.5})
    assert h.state()["drones"]["D-3"]["payload_kg"] == 6.5
    h.err("set_drone_payload", {"drone_id": "D-3", "weight_kg": 9}, code="payload_too_heavy")
    h.err("set_drone_payload", {"drone_id": "D-9", "weight_kg": 1}, code="drone_not_found")
    h.err("set_drone_payload", {"drone_id": "D-3", "weight_kg": -1}, kind="invalid_arguments")
    _ready(h, "D-3")
    h.err("set_drone_payload", {"drone_id": "D-3", "weight_kg": 1}, code="drone_not_grounded")


def test_arm_drone(h):
    _arrange(h, lambda s: s["drones"]["D-2"].update(battery=30))
    h.err("arm_drone", {"drone_id": "D-1"}, code="no_mission_planned")
    h.ok("plan_drone_mission", {"drone_id": "D-1", "waypoints": SQUARE})
    assert h.ok("arm_drone", {"drone_id": "D-1"})["status"] == "armed"
    assert h.state()["drones"]["D-1"]["status"] == "armed"
    h.err("arm_drone", {"drone_id": "D-1"}, code="drone_not_grounded")
    h.ok("plan_drone_mission", {"drone_id": "D-2", "waypoints": SQUARE})
    h.err("arm_drone", {"drone_id": "D-2"}, code="insufficient_battery")  # below the 40% launch minimum
    _arrange(h, lambda s: s["drones"]["D-2"].update(battery=45))
    h.ok("plan_drone_mission", {"drone_id": "D-2", "waypoints": [{"x": 1200, "y": 1200, "alt_m": 60}]})  # 34% + 20%
    h.err("arm_drone", {"drone_id": "D-2"}, code="insufficient_battery")
    h.err("arm_drone", {"drone_id": "D-9"}, code="drone_not_found")
    _arrange(h, lambda s: s["weather"].update(wind_ms=12))
    h.ok("plan_drone_mission", {"drone_id": "D-1", "waypoints": SQUARE})
    h.err("arm_drone", {"drone_id": "D-1"}, code="wind_too_high")


def test_disarm_drone(h):
    _arrange(h)
    mid = _ready(h)
    h.ok("disarm_drone", {"drone_id": "D-1"})
    s = h.state()
    assert s["drones"]["D-1"]["status"] == "grounded" and s["missions"][mid]["status"] == "planned"
    h.err("disarm_drone", {"drone_id": "D-1"}, code="drone_not_armed")
    h.err("disarm_drone", {"drone_id": "D-9"}, code="drone_not_found")


def test_launch_drone(h):
    _arrange(h)
    h.err("launch_drone", {"drone_id": "D-1"}, code="drone_not_armed")
    mid = _ready(h)
    assert h.ok("launch_drone", {"drone_id": "D-1"})["status"] == "flying"
    s = h.state()
    assert s["drones"]["D-1"]["status"] == "flying" and s["missions"][mid]["status"] == "active"
    h.err("launch_drone", {"drone_id": "D-9"}, code="drone_not_found")
    # a zone that became active after planning blocks the launch
    h.ok("plan_drone_mission", {"drone_id": "D-2", "waypoints": [{"x": 0, "y": 2000, "alt_m": 50}]})
    h.ok("arm_drone", {"drone_id": "D-2"})
    s = h.state()
    s["no_fly_zones"]["NFZ-2"]["active"] = True
    h.sandbox.reset(s)
    h.err("launch_drone", {"drone_id": "D-2"}, code="no_fly_zone_violation")
    assert h.state()["drones"]["D-2"]["status"] == "armed"


def test_land_drone(h):
    _arrange(h)
    h.err("land_drone", {"drone_id": "D-3"}, code="drone_not_flying")
    h.ok("set_drone_payload", {"drone_id": "D-3", "weight_kg": 8})
    mid = _ready(h, "D-3")
    h.ok("launch_drone", {"drone_id": "D-3"})
    r = h.ok("land_drone", {"drone_id": "D-3"})
    assert r == {"drone_id": "D-3", "mission_status": "completed", "battery": 78}
    s = h.state()
    assert s["drones"]["D-3"]["payload_kg"] == 0.0 and s["drones"]["D-3"]["status"] == "grounded"
    assert s["missions"][mid]["status"] == "completed" and s["drones"]["D-3"]["mission_id"] is None
    mid = _ready(h, "D-1")
    h.ok("launch_drone", {"drone_id": "D-1"})
    assert h.ok("land_drone", {"drone_id": "D-1", "outcome": "abort"})["battery"] == 93
    assert h.state()["missions"][mid]["status"] == "aborted"
    h.err("land_drone", {"drone_id": "D-1", "outcome": "crash"}, kind="invalid_arguments")
    h.err("land_drone", {"drone_id": "D-9"}, code="drone_not_found")


def test_swap_drone_battery(h):
    _arrange(h, lambda s: s["drones"]["D-2"].update(battery=30))
    assert h.ok("swap_drone_battery", {"drone_id": "D-2"})["battery"] == 100
    assert h.state()["drones"]["D-2"]["battery"] == 100
    h.err("swap_drone_battery", {"drone_id": "D-2"}, code="battery_full")
    _arrange(h, lambda s: s["drones"]["D-1"].update(battery=90))
    _ready(h)
    h.err("swap_drone_battery", {"drone_id": "D-1"}, code="drone_not_grounded")
    h.err("swap_drone_battery", {"drone_id": "D-9"}, code="drone_not_found")
