"""warehouse_robots: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("warehouse_robots") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _robot(x, y, battery, payload):
    return {"x": x, "y": y, "battery": battery, "max_payload_kg": payload, "task_id": None, "carrying": False}


def _task(kg, pick, drop, status="open"):
    return {"item": "box", "weight_kg": kg, "pick_cell": pick, "drop_cell": drop, "priority": "normal",
            "status": status, "robot_id": None}


def _arrange(h, change=None):
    """Shelf column at x=3 (y 1-3); chargers at (0,0) and (7,0); four robots; three tasks."""
    s = h.state()
    s["grid"]["shelves"] = [[3, 1], [3, 2], [3, 3]]
    s["robots"] = {"R-1": _robot(1, 0, 50, 20), "R-2": _robot(5, 0, 20, 10), "R-3": _robot(0, 5, 80, 30),
                   "R-4": _robot(7, 5, 100, 30)}
    s["tasks"] = {"T-100": _task(5, [2, 1], [2, 0]), "T-101": _task(25, [4, 2], [4, 5]),
                  "T-102": _task(1, [2, 2], [2, 5], status="done")}
    s["reservations"] = {}
    if change:
        change(s)
    h.sandbox.reset(s)
    return s


def test_get_warehouse_map(h):
    s = h.state()
    m = h.ok("get_warehouse_map", {})
    assert m["width"] == 8 and m["height"] == 6 and m["shelves"] == s["grid"]["shelves"]
    assert m["robots"] == {rid: [r["x"], r["y"]] for rid, r in s["robots"].items()}
    _arrange(h)
    h.ok("reserve_warehouse_cells", {"robot_id": "R-1", "cells": [[1, 1]]})
    assert h.ok("get_warehouse_map", {})["reservations"] == {"1,1": "R-1"}


def test_list_warehouse_robots(h):
    _arrange(h)
    assert [r["robot_id"] for r in h.ok("list_warehouse_robots", {})["robots"]] == ["R-1", "R-2", "R-3", "R-4"]
    assert [r["robot_id"] for r in h.ok("list_warehouse_robots", {"min_battery": 60})["robots"]] == ["R-3", "R-4"]
    h.err("list_warehouse_robots", {"min_battery": 101}, kind="invalid_arguments")


def test_list_pick_tasks(h):
    _arrange(h)
    assert [t["task_id"] for t in h.ok("list_pick_tasks", {})["tasks"]] == ["T-100", "T-101"]
    assert [t["task_id"] for t in h.ok("list_pick_tasks", {"status": "done"})["tasks"]] == ["T-102"]
    assert len(h.ok("list_pick_tasks", {"status": "any"})["tasks"]) == 3
    h.err("list_pick_tasks", {"status": "lost"}, kind="invalid_arguments")


def test_assign_pick_task(h):
    _arrange(h)
    r = h.ok("assign_pick_task", {"task_id": "T-100", "robot_id": "R-1"})
    assert r["pick_cell"] == [2, 1]
    s = h.state()
    assert s["tasks"]["T-100"]["status"] == "assigned" and s["tasks"]["T-100"]["robot_id"] == "R-1"
    assert s["robots"]["R-1"]["task_id"] == "T-100"
    h.err("assign_pick_task", {"task_id": "T-100", "robot_id": "R-3"}, code="task_not_open")
    h.err("assign_pick_task", {"task_id": "T-101", "robot_id": "R-1"}, code="robot_busy")
    h.err("assign_pick_task", {"task_id": "T-101", "robot_id": "R-2"}, code="payload_too_heavy")
    _arrange(h, lambda s: s["tasks"].update({"T-103": _task(2, [2, 3], [2, 5])}))
    h.err("assign_pick_task", {"task_id": "T-103", "robot_id": "R-2"}, code="low_battery")
    h.err("assign_pick_task", {"task_id": "T-999", "robot_id": "R-2"}, code="task_not_found")
    h.err("assign_pick_task", {"task_id": "T-103", "robot_id": "R-9"}, code="robot_not_found")


def test_reserve_warehouse_cells(h):
    _arrange(h)
    r = h.ok("reserve_warehouse_cells", {"robot_id": "R-1", "cells": [[1, 1], [2, 1]]})
    assert r["reserved"] == ["1,1", "2,1"]
    assert h.state()["reservations"] == {"1,1": "R-1", "2,1": "R-1"}
    h.err("reserve_warehouse_cells", {"robot_id": "R-3", "cells": [[0, 4], [2, 1]]}, code="cell_reserved")
    assert "0,4" not in h.state()["reservations"]  # all or nothing
    h.err("reserve_warehouse_cells", {"robot_id": "R-3", "cells": [[3, 2]]}, code="cell_blocked")
    h.err("reserve_warehouse_cells", {"robot_id": "R-3", "cells": [[5, 0]]}, code="cell_occupied")
    h.err("reserve_warehouse_cells", {"robot_id": "R-3", "cells": [[8, 0]]}, code="out_of_bounds")
    h.err("reserve_warehouse_cells", {"robot_id": "R-9", "cells": [[1, 2]]}, code="robot_not_found")
    h.err("reserve_warehouse_cells", {"robot_id": "R-3", "cells": [[1, 2, 3]]}, kind="invalid_arguments")
    h.err("reserve_warehouse_cells", {"robot_id": "R-3", "cells": []}, kind="invalid_arguments")
    row = [[x, 4] for x in range(8)]
    h.ok("reserve_warehouse_cells", {"robot_id": "R-3", "cells": row})
    h.err("reserve_warehouse_cells", {"robot_id": "R-3", "cells": [[0, 3]]}, code="reservation_limit")


def test_release_warehouse_cells(h):
    _arrange(h)
    h.ok("reserve_warehouse_cells", {"robot_id": "R-1", "cells": [[1, 1], [2, 1]]})
    h.ok("reserve_warehouse_cells", {"robot_id": "R-3", "cells": [[0, 4]]})
    assert h.ok("release_warehouse_cells", {"robot_id": "R-1"})["released"] == ["1,1", "2,1"]
    assert h.state()["reservations"] == {"0,4": "R-3"}
    h.err("release_warehouse_cells", {"robot_id": "R-9"}, code="robot_not_found")


def test_move_warehouse_robot(h):
    _arrange(h)
    h.err("move_warehouse_robot", {"robot_id": "R-1", "path": [[1, 1]]}, code="cells_not_reserved")
    h.ok("reserve_warehouse_cells", {"robot_id": "R-1", "cells": [[1, 1], [2, 1], [2, 2]]})
    h.err("move_warehouse_robot", {"robot_id": "R-1", "path": [[2, 1]]}, code="invalid_path")
    r = h.ok("move_warehouse_robot", {"robot_id": "R-1", "path": [[1, 1], [2, 1]]})
    assert r["position"] == [2, 1] and r["battery"] == 48
    s = h.state()
    assert [s["robots"]["R-1"]["x"], s["robots"]["R-1"]["y"]] == [2, 1] and s["reservations"] == {"2,2": "R-1"}
    h.err("move_warehouse_robot", {"robot_id": "R-1", "path": [[3, 1]]}, code="cell_blocked")
    h.err("move_warehouse_robot", {"robot_id": "R-9", "path": [[3, 1]]}, code="robot_not_found")
    h.err("move_warehouse_robot", {"robot_id": "R-2", "path": [[5, -1]]}, kind="invalid_arguments")
    _arrange(h, lambda s: s["reservations"].update({"6,0": "R-1", "4,0": "R-2"}))
    h.err("move_warehouse_robot", {"robot_id": "R-2", "path": [[6, 0]]}, code="cell_reserved")
    h.err("move_warehouse_robot", {"robot_id": "R-4", "path": [[8, 5]]}, code="out_of_bounds")
    _arrange(h, lambda s: (s["robots"]["R-1"].update(x=4, y=0), s["robots"]["R-2"].update(battery=6),
                           s["reservations"].update({"4,0": "R-2", "6,0": "R-2", "7,0": "R-2"})))
    h.err("move_warehouse_robot", {"robot_id": "R-2", "path": [[4, 0]]}, code="cell_occupied")
    h.err("move_warehouse_robot", {"robot_id": "R-2", "path": [[6, 0], [7, 0]]}, code="insufficient_battery")
    h.ok("move_warehouse_robot", {"robot_id": "R-2", "path": [[6, 0]]})
    assert h.state()["robots"]["R-2"]["battery"] == 5


def test_pick_and_drop_warehouse_item(h):
    _arrange(h)
    h.err("pick_warehouse_item", {"robot_id": "R-1"}, code="no_task_assigned")
    h.ok("assign_pick_task", {"task_id": "T-100", "robot_id": "R-1"})
    h.err("pick_warehouse_item", {"robot_id": "R-1"}, code="wrong_location")
    h.err("drop_warehouse_item", {"robot_id": "R-1"}, code="not_carrying")
    h.ok("reserve_warehouse_cells", {"robot_id": "R-1", "cells": [[2, 0], [2, 1]]})
    h.ok("move_warehouse_robot", {"robot_id": "R-1", "path": [[2, 0], [2, 1]]})
    r = h.ok("pick_warehouse_item", {"robot_id": "R-1"})
    assert r["status"] == "picked" and h.state()["tasks"]["T-100"]["status"] == "picked"
    assert h.state()["robots"]["R-1"]["carrying"] is True
    h.err("pick_warehouse_item", {"robot_id": "R-1"}, code="already_carrying")
    h.err("drop_warehouse_item", {"robot_id": "R-1"}, code="wrong_location")
    h.ok("reserve_warehouse_cells", {"robot_id": "R-1", "cells": [[2, 0]]})
    assert h.ok("move_warehouse_robot", {"robot_id": "R-1", "path": [[2, 0]]})["battery"] == 46  # loaded: 2 per step
    assert h.ok("drop_warehouse_item", {"robot_id": "R-1"})["status"] == "done"
    s = h.state()
    assert s["tasks"]["T-100"]["status"] == "done" and s["robots"]["R-1"]["task_id"] is None
    assert s["robots"]["R-1"]["carrying"] is False
    h.err("pick_warehouse_item", {"robot_id": "R-9"}, code="robot_not_found")
    h.err("drop_warehouse_item", {"robot_id": "R-9"}, code="robot_not_found")


def test_charge_warehouse_robot(h):
    _arrange(h)
    h.err("charge_warehouse_robot", {"robot_id": "R-2"}, code="not_at_charger")
    h.ok("reserve_warehouse_cells", {"robot_id": "R-2", "cells": [[6, 0], [7, 0]]})
    h.ok("move_warehouse_robot", {"robot_id": "R-2", "path": [[6, 0], [7, 0]]})
    assert h.ok("charge_warehouse_robot", {"robot_id": "R-2"})["battery"] == 100
    assert h.state()["robots"]["R-2"]["battery"] == 100
    h.err("charge_warehouse_robot", {"robot_id": "R-2"}, code="battery_full")
    h.err("charge_warehouse_robot", {"robot_id": "R-9"}, code="robot_not_found")
