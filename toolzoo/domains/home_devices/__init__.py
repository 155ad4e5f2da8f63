"""A connected home hub: lights, door locks, a thermostat and scenes that set many devices at once."""

CATEGORY = "smart_home"
DESCRIPTION = "A smart-home assistant controlling lights, door locks, the thermostat and saved scenes."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["set_door_lock", "activate_home_scene"],
     "message": "the hub did not answer in time; the device state is unknown, read it with get_home_device_status before retrying"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_home_devices"]},
]
