"""A home energy manager: solar, battery and meter readings, appliance run schedules and electricity tariffs."""

CATEGORY = "smart_home"
DESCRIPTION = "A home energy assistant: today's solar/battery/grid readings, battery modes, scheduling flexible appliances, and comparing or switching tariffs."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["get_energy_readings"], "message": "the meter gateway timed out; retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["get_energy_readings", "list_home_appliances"]},
]
