"""A grid warehouse run by mobile robots: battery, pick tasks, moves over reserved cells, charging."""

CATEGORY = "robot_control"
DESCRIPTION = "Fleet control for warehouse robots on a grid: assign pick tasks, reserve cells for collision-free moves, pick, drop and charge."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["move_warehouse_robot"], "message": "the robot did not acknowledge the move; it did not move, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_pick_tasks", "list_warehouse_robots"]},
]
