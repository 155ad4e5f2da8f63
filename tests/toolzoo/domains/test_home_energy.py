"""home_energy: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("home_energy") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _appliance(h, flexible=True, scheduled=None, name=None):
    return next(aid for aid, a in sorted(h.state()["appliances"].items())
                if a["flexible"] == flexible and (scheduled is None or (a["schedule"] is not None) == scheduled)
                and (name is None or a["name"] == name))


def test_get_energy_readings(h):
    state = h.state()
    r = h.ok("get_energy_readings", {"from_hour": 10, "to_hour": 11})
    assert [row["hour"] for row in r["readings"]] == [10, 11]
    assert r["totals"]["solar_kwh"] == pytest.approx(sum(row["solar_kwh"] for row in state["readings"][10:12]))
    assert len(h.ok("get_energy_readings")["readings"]) == state["now_hour"]
    h.err("get_energy_readings", {"from_hour": 11, "to_hour": 10}, code="invalid_hour_range")
    h.err("get_energy_readings", {"from_hour": 23, "to_hour": 23}, code="no_readings_yet")
    h.err("get_energy_readings", {"from_hour": 24}, kind="invalid_arguments")


def test_get_home_battery_status(h):
    r = h.ok("get_home_battery_status")
    b = h.state()["site"]["battery"]
    assert r["mode"] == b["mode"] and r["stored_kwh"] == pytest.approx(b["capacity_kwh"] * b["soc_pct"] / 100, abs=0.01)


def test_set_home_battery_mode(h):
    h.ok("set_home_battery_mode", {"mode": "backup", "reserve_pct": 60})
    b = h.state()["site"]["battery"]
    assert (b["mode"], b["reserve_pct"]) == ("backup", 60)
    assert h.ok("get_home_battery_status")["reserve_pct"] == 60
    h.err("set_home_battery_mode", {"mode": "backup", "reserve_pct": 30}, code="reserve_too_low")
    h.err("set_home_battery_mode", {"mode": "turbo", "reserve_pct": 30}, kind="invalid_arguments")
    h.err("set_home_battery_mode", {"mode": "backup", "reserve_pct": 5}, kind="invalid_arguments")


def test_set_home_battery_mode_needs_tou_tariff(h):
    if h.state()["current_tariff_id"] != "TF-FLAT":
        h.ok("switch_energy_tariff", {"tariff_id": "TF-FLAT"})
    h.err("set_home_battery_mode", {"mode": "time_of_use", "reserve_pct": 20}, code="tariff_incompatible")
    assert h.state()["site"]["battery"]["mode"] == "self_consumption"


def test_list_home_appliances(h):
    r = h.ok("list_home_appliances")
    assert {a["appliance_id"] for a in r["appliances"]} == set(h.state()["appliances"])


def test_schedule_appliance_run(h):
    aid = _appliance(h, scheduled=False)
    r = h.ok("schedule_appliance_run", {"appliance_id": aid, "start_hour": 12, "duration_hours": 2})
    assert r["schedule"] == {"start_hour": 12, "duration_hours": 2}
    assert h.state()["appliances"][aid]["schedule"] == {"start_hour": 12, "duration_hours": 2}
    h.err("schedule_appliance_run", {"appliance_id": _appliance(h, flexible=False), "start_hour": 1, "duration_hours": 1},
          code="appliance_not_flexible")
    h.err("schedule_appliance_run", {"appliance_id": "AP-99", "start_hour": 1, "duration_hours": 1}, code="appliance_not_found")
    h.err("schedule_appliance_run", {"appliance_id": aid, "start_hour": 1, "duration_hours": 13}, kind="invalid_arguments")


def test_schedule_appliance_run_load_limit(h):
    state = h.state()
    ev = _appliance(h, name="EV charger")
    start = state["appliances"][ev]["schedule"]["start_hour"]
    dryer = _appliance(h, name="Tumble dryer")
    before = h.state()
    h.err("schedule_appliance_run", {"appliance_id": dryer, "start_hour": (start - 1) % 24, "duration_hours": 3},
          code="load_limit_exceeded")
    assert h.state() == before
    h.ok("clear_appliance_schedule", {"appliance_id": ev})
    h.ok("schedule_appliance_run", {"appliance_id": dryer, "start_hour": start, "duration_hours": 3})


def test_clear_appliance_schedule(h):
    aid = _appliance(h, scheduled=True)
    h.ok("clear_appliance_schedule", {"appliance_id": aid})
    assert h.state()["appliances"][aid]["schedule"] is None
    h.err("clear_appliance_schedule", {"appliance_id": aid}, code="no_schedule")
    h.err("clear_appliance_schedule", {"appliance_id": "AP-99"}, code="appliance_not_found")


def test_estimate_appliance_run_cost(h):
    state = h.state()
    ev = _appliance(h, name="EV charger")
    night = h.ok("estimate_appliance_run_cost", {"appliance_id": ev, "start_hour": 0, "duration_hours": 4, "tariff_id": "TF-EV"})
    rate = state["tariffs"]["TF-EV"]["periods"][0]["import_cents_per_kwh"]
    assert night["cost_cents"] == round(7.2 * 4 * rate) and night["energy_kwh"] == 28.8
    current = h.ok("estimate_appliance_run_cost", {"appliance_id": ev, "start_hour": 0, "duration_hours": 4})
    assert current["tariff_id"] == state["current_tariff_id"]
    h.err("estimate_appliance_run_cost", {"appliance_id": ev, "start_hour": 0, "duration_hours": 4, "tariff_id": "TF-X"},
          code="tariff_not_found")
    h.err("estimate_appliance_run_cost", {"appliance_id": "AP-99", "start_hour": 0, "duration_hours": 4}, code="appliance_not_found")


def test_list_energy_tariffs(h):
    r = h.ok("list_energy_tariffs")
    assert r["current_tariff_id"] == h.state()["current_tariff_id"] and r["switches_left_this_year"] == 1
    assert {t["tariff_id"] for t in r["tariffs"]} == {"TF-FLAT", "TF-TOU", "TF-EV"}


def test_switch_energy_tariff(h):
    current = h.state()["current_tariff_id"]
    h.err("switch_energy_tariff", {"tariff_id": current}, code="already_on_tariff")
    h.err("switch_energy_tariff", {"tariff_id": "TF-NONE"}, code="tariff_not_found")
    r = h.ok("switch_energy_tariff", {"tariff_id": "TF-EV"})
    assert r["previous_tariff_id"] == current
    state = h.state()
    assert state["current_tariff_id"] == "TF-EV" and state["tariff_switches_this_year"] == 1
    assert h.ok("list_energy_tariffs")["switches_left_this_year"] == 0
    h.err("switch_energy_tariff", {"tariff_id": current}, code="switch_limit_reached")


def test_switch_to_flat_resets_tou_battery_mode():
    import random

    from toolzoo.domains.home_energy.data import seed

    tou_seed = next(s for s in range(50) if seed(random.Random(s))["current_tariff_id"] == "TF-TOU")
    with DomainHarness("home_energy", seed=tou_seed) as other:
        other.ok("set_home_battery_mode", {"mode": "time_of_use", "reserve_pct": 20})
        assert other.state()["site"]["battery"]["mode"] == "time_of_use"
        r = other.ok("switch_energy_tariff", {"tariff_id": "TF-FLAT"})
        assert r["notes"] and other.state()["site"]["battery"]["mode"] == "self_consumption"
