from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

_WH_CELL = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2}


def _wh_robot(state, robot_id):
    if robot_id not in state["robots"]:
        raise ToolFailure("robot_not_found", f"no robot {robot_id}; see list_warehouse_robots")
    return state["robots"][robot_id]


def _wh_key(cell):
    return f"{cell[0]},{cell[1]}"


def _wh_check_cell(state, robot_id, cell):
    """Raise unless `robot_id` may occupy `cell` (bounds, shelves, other robots, others' reservations)."""
    g = state["grid"]
    x, y = cell
    if not (0 <= x < g["width"] and 0 <= y < g["height"]):
        raise ToolFailure("out_of_bounds", f"cell {cell} is outside the {g['width']}x{g['height']} grid")
    if [x, y] in g["shelves"]:
        raise ToolFailure("cell_blocked", f"cell {cell} is a shelf; route around it")
    for rid, r in sorted(state["robots"].items()):
        if rid != robot_id and [r["x"], r["y"]] == [x, y]:
            raise ToolFailure("cell_occupied", f"robot {rid} stands on {cell}; wait for it to move or route around")
    holder = state["reservations"].get(_wh_key(cell))
    if holder not in (None, robot_id):
        raise ToolFailure("cell_reserved", f"cell {cell} is reserved by {holder}; route around it or wait")


@tool()
def get_warehouse_map(state) -> dict:
    """The warehouse grid: size, shelf cells (impassable), charger cells, where each robot is, and current cell reservations."""
    g = state["grid"]
    return {**g, "robots": {rid: [r["x"], r["y"]] for rid, r in sorted(state["robots"].items())},
            "reservations": dict(sorted(state["reservations"].items()))}


@tool()
def list_warehouse_robots(state, min_battery: Annotated[int, {"minimum": 0, "maximum": 100}] = 0) -> dict:
    """List robots with position, battery %, payload limit, assigned task and whether they carry an item.

    Args:
        min_battery: only robots with at least this battery percentage.
    """
    return {"robots": [{"robot_id": rid, **r} for rid, r in sorted(state["robots"].items()) if r["battery"] >= min_battery]}


@tool()
def list_pick_tasks(state, status: Literal["open", "assigned", "picked", "done", "any"] = "open") -> dict:
    """List pick tasks: item, weight, pick cell (next to the shelf), drop cell (packing station), priority and status.

    Args:
        status: only tasks in this status; "any" for all.
    """
    return {"tasks": [{"task_id": tid, **t} for tid, t in sorted(state["tasks"].items()) if status in ("any", t["status"])]}


@tool(effect="write", errors={
    "task_not_found": "unknown task id", "robot_not_found": "unknown robot id", "task_not_open": "the task is already taken or done",
    "robot_busy": "the robot already has a task", "payload_too_heavy": "the item is heavier than the robot can carry",
    "low_battery": "the robot's battery is below the minimum for new tasks"})
def assign_pick_task(state, task_id: str, robot_id: str) -> dict:
    """Assign an open pick task to an idle robot.

    Args:
        task_id: the task, e.g. "T-101".
        robot_id: the robot, e.g. "R-2".
    """
    if task_id not in state["tasks"]:
        raise ToolFailure("task_not_found", f"no task {task_id}; see list_pick_tasks")
    t = state["tasks"][task_id]
    r = _wh_robot(state, robot_id)
    if t["status"] != "open":
        raise ToolFailure("task_not_open", f"task {task_id} is {t['status']}")
    if r["task_id"]:
        raise ToolFailure("robot_busy", f"{robot_id} is working on {r['task_id']}; pick another robot")
    if t["weight_kg"] > r["max_payload_kg"]:
        raise ToolFailure("payload_too_heavy", f"{t['item']} weighs {t['weight_kg']} kg; {robot_id} carries at most {r['max_payload_kg']} kg")
    if r["battery"] < state["rules"]["min_battery_to_assign"]:
        raise ToolFailure("low_battery", f"{robot_id} is at {r['battery']}%; charge it to at least "
                          f"{state['rules']['min_battery_to_assign']}% first")
    t["status"], t["robot_id"] = "assigned", robot_id
    r["task_id"] = task_id
    return {"task_id": task_id, "robot_id": robot_id, "pick_cell": t["pick_cell"], "drop_cell": t["drop_cell"]}


@tool(effect="write", errors={
    "robot_not_found": "unknown robot id", "out_of_bounds": "a cell is outside the grid", "cell_blocked": "a cell is a shelf",
    "cell_occupied": "another robot stands on a cell", "cell_reserved": "another robot reserved a cell",
    "reservation_limit": "the robot would hold too many reserved cells"})
def reserve_warehouse_cells(state, robot_id: str,
                            cells: Annotated[list[list[int]], {"minItems": 1, "maxItems": 8, "items": _WH_CELL}]) -> dict:
    """Reserve grid cells for a robot so no other robot enters them; a robot may only move through cells it reserved. All or nothing.

    Args:
        robot_id: the robot.
        cells: the cells to reserve, as [x, y] pairs, e.g. [[1, 0], [2, 0]].
    """
    _wh_robot(state, robot_id)
    for c in cells:
        _wh_check_cell(state, robot_id, c)
    for c in cells:
        state["reservations"][_wh_key(c)] = robot_id
    held = sorted(k for k, v in state["reservations"].items() if v == robot_id)
    if len(held) > state["rules"]["max_reserved_cells"]:
        raise ToolFailure("reservation_limit", f"{robot_id} would hold {len(held)} cells; at most "
                          f"{state['rules']['max_reserved_cells']}: release or move first")
    return {"robot_id": robot_id, "reserved": held}


@tool(effect="write", errors={"robot_not_found": "unknown robot id"})
def release_warehouse_cells(state, robot_id: str) -> dict:
    """Release every cell reservation a robot holds.

    Args:
        robot_id: the robot.
    """
    _wh_robot(state, robot_id)
    mine = [k for k, v in state["reservations"].items() if v == robot_id]
    for k in mine:
        del state["reservations"][k]
    return {"robot_id": robot_id, "released": sorted(mine)}


@tool(effect="write", errors={
    "robot_not_found": "unknown robot id", "invalid_path": "steps are not between neighbouring cells",
    "out_of_bounds": "a cell is outside the grid", "cell_blocked": "a cell is a shelf",
    "cell_occupied": "another robot stands on a cell", "cell_reserved": "another robot reserved a cell",
    "cells_not_reserved": "the robot has not reserved every cell of the path",
    "insufficient_battery": "the move would drain the battery below the reserve"})
def move_warehouse_robot(state, robot_id: str,
                         path: Annotated[list[list[int]], {"minItems": 1, "maxItems": 8, "items": _WH_CELL}]) -> dict:
    """Drive a robot along a path of neighbouring cells (up/down/left/right, one cell per step); every cell must be reserved
    by this robot first. Costs battery per step (double when carrying); the reservations of the path are released.

    Args:
        robot_id: the robot.
        path: the cells to visit in order, starting next to the robot, e.g. [[1, 0], [2, 0], [2, 1]].
    """
    r = _wh_robot(state, robot_id)
    cur = [r["x"], r["y"]]
    for c in path:
        if abs(c[0] - cur[0]) + abs(c[1] - cur[1]) != 1:
            raise ToolFailure("invalid_path", f"step {cur} -> {c} is not to a neighbouring cell; move one cell at a time")
        _wh_check_cell(state, robot_id, c)
        if state["reservations"].get(_wh_key(c)) != robot_id:
            raise ToolFailure("cells_not_reserved", f"{robot_id} has not reserved {c}; call reserve_warehouse_cells first")
        cur = c
    rules = state["rules"]
    cost = len(path) * (rules["battery_per_step_loaded"] if r["carrying"] else rules["battery_per_step"])
    if r["battery"] - cost < rules["battery_reserve"]:
        raise ToolFailure("insufficient_battery", f"the move costs {cost}% but {robot_id} has {r['battery']}% "
                          f"(reserve {rules['battery_reserve']}%); send it to a charger by a shorter path")
    for c in path:
        state["reservations"].pop(_wh_key(c), None)
    r["x"], r["y"] = cur
    r["battery"] -= cost
    return {"robot_id": robot_id, "position": cur, "battery": r["battery"]}


@tool(effect="write", errors={
    "robot_not_found": "unknown robot id", "no_task_assigned": "the robot has no task",
    "already_carrying": "the robot already picked its item", "wrong_location": "the robot is not at the task's pick cell"})
def pick_warehouse_item(state, robot_id: str) -> dict:
    """Have a robot pick up its assigned task's item; it must stand on the task's pick cell.

    Args:
        robot_id: the robot.
    """
    r = _wh_robot(state, robot_id)
    if not r["task_id"]:
        raise ToolFailure("no_task_assigned", f"{robot_id} has no task; use assign_pick_task")
    if r["carrying"]:
        raise ToolFailure("already_carrying", f"{robot_id} already carries the item of {r['task_id']}; drop it first")
    t = state["tasks"][r["task_id"]]
    if [r["x"], r["y"]] != t["pick_cell"]:
        raise ToolFailure("wrong_location", f"{robot_id} is at {[r['x'], r['y']]}; the pick cell is {t['pick_cell']}")
    r["carrying"], t["status"] = True, "picked"
    return {"robot_id": robot_id, "task_id": r["task_id"], "status": "picked", "drop_cell": t["drop_cell"]}


@tool(effect="write", errors={
    "robot_not_found": "unknown robot id", "not_carrying": "the robot carries nothing",
    "wrong_location": "the robot is not at the task's drop cell"})
def drop_warehouse_item(state, robot_id: str) -> dict:
    """Have a robot drop its item at the task's drop cell; completes the task and frees the robot.

    Args:
        robot_id: the robot.
    """
    r = _wh_robot(state, robot_id)
    if not r["carrying"]:
        raise ToolFailure("not_carrying", f"{robot_id} carries nothing; pick the item first")
    t = state["tasks"][r["task_id"]]
    if [r["x"], r["y"]] != t["drop_cell"]:
        raise ToolFailure("wrong_location", f"{robot_id} is at {[r['x'], r['y']]}; the drop cell is {t['drop_cell']}")
    task_id = r["task_id"]
    t["status"] = "done"
    r["carrying"], r["task_id"] = False, None
    return {"robot_id": robot_id, "task_id": task_id, "status": "done"}


@tool(effect="write", errors={"robot_not_found": "unknown robot id", "not_at_charger": "the robot is not on a charger cell",
                              "battery_full": "the battery is already full"})
def charge_warehouse_robot(state, robot_id: str) -> dict:
    """Charge a robot standing on a charger cell to 100%.

    Args:
        robot_id: the robot.
    """
    r = _wh_robot(state, robot_id)
    if [r["x"], r["y"]] not in state["grid"]["chargers"]:
        raise ToolFailure("not_at_charger", f"{robot_id} is at {[r['x'], r['y']]}; chargers are at {state['grid']['chargers']}")
    if r["battery"] >= 100:
        raise ToolFailure("battery_full", f"{robot_id} is already at 100%")
    r["battery"] = 100
    return {"robot_id": robot_id, "battery": 100}
