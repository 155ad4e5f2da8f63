import random

WH_ITEMS = [("bolts box", 2), ("paint can", 5), ("cable drum", 18), ("tile pack", 12), ("drill", 3),
            ("cement bag", 25), ("lamp", 1), ("door handle set", 2), ("pipe bundle", 15), ("glue tubes", 1)]


def seed(rng: random.Random) -> dict:
    width, height = 8, 6
    racks = rng.sample([1, 2, 3, 4, 5, 6], 2)
    shelves = [[x, y] for x in sorted(racks) for y in (1, 2, 3)]
    chargers = [[0, 0], [7, 0]]
    blocked = {(x, y) for x, y in shelves}
    free = [[x, y] for y in range(height) for x in range(width) if (x, y) not in blocked]
    starts = rng.sample([c for c in free if c not in chargers], 4)
    robots = {}
    for i, (x, y) in enumerate(starts):
        robots[f"R-{i + 1}"] = {"x": x, "y": y, "battery": rng.choice([18, 35, 60, 80, 95]),
                                "max_payload_kg": rng.choice([10, 20, 30]), "task_id": None, "carrying": False}
    pick_cells = sorted({(x + dx, y) for x, y in blocked for dx in (-1, 1)
                         if 0 <= x + dx < width and (x + dx, y) not in blocked})
    tasks = {}
    for j, (item, kg) in enumerate(rng.sample(WH_ITEMS, 6)):
        px, py = rng.choice(pick_cells)
        tasks[f"T-{100 + j}"] = {"item": item, "weight_kg": kg, "pick_cell": [px, py],
                                 "drop_cell": [rng.randint(1, 6), 5], "priority": rng.choice(["normal", "normal", "urgent"]),
                                 "status": "open", "robot_id": None}
    return {"grid": {"width": width, "height": height, "shelves": shelves, "chargers": chargers},
            "rules": {"battery_per_step": 1, "battery_per_step_loaded": 2, "min_battery_to_assign": 30,
                      "battery_reserve": 5, "max_reserved_cells": 8},
            "robots": robots, "tasks": tasks, "reservations": {}}
