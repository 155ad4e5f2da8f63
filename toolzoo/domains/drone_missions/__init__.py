"""Drone operations: a fleet of delivery/survey drones, no-fly zones, waypoint missions, arming, launch and landing."""

CATEGORY = "robot_control"
DESCRIPTION = "Ground control for a drone fleet: plan waypoint missions around no-fly zones, load payloads, arm, launch and land within battery limits."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["launch_drone", "arm_drone"], "message": "no telemetry acknowledgement; the command was not executed, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_drone_fleet", "list_no_fly_zones"]},
]
