from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

_SCENE_KEYS = {"light": {"on", "brightness", "color_temp_k"}, "lock": {"locked"}, "thermostat": {"mode", "target_c"}}


def _device(state, device_id, kind=None):
    if device_id not in state["devices"]:
        raise ToolFailure("device_not_found", f"no device {device_id}; see list_home_devices")
    d = state["devices"][device_id]
    if kind is not None and d["type"] != kind:
        raise ToolFailure("wrong_device_type", f"{device_id} is a {d['type']}, not a {kind}")
    return d


def _online(device_id, d):
    if not d["online"]:
        raise ToolFailure("device_offline", f"{d['name']} ({device_id}) is offline; ask the user to check its power or Wi-Fi")


def _log(state, device_id, action):
    state["activity"].append({"seq": len(state["activity"]) + 1, "device_id": device_id, "action": action})


def _thermostat_range(mode, target):
    if mode == "cool" and target < 18:
        raise ToolFailure("target_out_of_range", "cooling below 18 °C is not allowed")
    if mode == "heat" and target > 26:
        raise ToolFailure("target_out_of_range", "heating above 26 °C is not allowed")


def _scene_action_problem(state, action):
    if not isinstance(action, dict) or set(action) != {"device_id", "settings"} or not isinstance(action["settings"], dict):
        return "each action must be {\"device_id\": ..., \"settings\": {...}}"
    if action["device_id"] not in state["devices"]:
        return None  # reported as device_not_found by the caller
    d = state["devices"][action["device_id"]]
    s = action["settings"]
    if not s or not set(s) <= _SCENE_KEYS[d["type"]]:
        return f"{action['device_id']} is a {d['type']}; allowed settings: {sorted(_SCENE_KEYS[d['type']])}"
    if d["type"] == "lock" and s.get("locked") is not True:
        return "scenes can lock doors but never unlock them"
    if "on" in s and not isinstance(s["on"], bool):
        return "light 'on' must be true or false"
    if "brightness" in s and (not isinstance(s["brightness"], int) or not 1 <= s["brightness"] <= 100):
        return "brightness must be an integer 1-100"
    if "color_temp_k" in s and (not isinstance(s["color_temp_k"], int) or not 2200 <= s["color_temp_k"] <= 6500):
        return "color_temp_k must be an integer 2200-6500"
    if "mode" in s and s["mode"] not in ("heat", "cool", "auto", "off"):
        return "thermostat mode must be heat, cool, auto or off"
    if "target_c" in s and (not isinstance(s["target_c"], (int, float)) or not 10 <= s["target_c"] <= 30):
        return "target_c must be a number 10-30"
    return None


@tool()
def list_home_devices(state, room: str | None = None, device_type: Literal["light", "lock", "thermostat"] | None = None) -> dict:
    """List the home's devices with their current state, optionally filtered by room or type.

    Args:
        room: only devices in this room, e.g. "kitchen"; omit for all rooms.
        device_type: only devices of this type; omit for all.
    """
    out = [{"device_id": did, **d} for did, d in sorted(state["devices"].items())
           if (room is None or d["room"] == room.strip().lower()) and device_type in (None, d["type"])]
    return {"devices": out}


@tool(errors={"device_not_found": "unknown device id"})
def get_home_device_status(state, device_id: str) -> dict:
    """Show one device's current state and its last few recorded actions.

    Args:
        device_id: the device id, e.g. "LT-2", "LK-1" or "TH-1".
    """
    d = _device(state, device_id)
    recent = [a for a in state["activity"] if a["device_id"] == device_id][-5:]
    return {"device_id": device_id, **d, "recent_activity": recent}


@tool(effect="write", errors={"device_not_found": "unknown device id", "wrong_device_type": "not a light",
                              "device_offline": "the light is offline"})
def set_home_light(state, device_id: str, on: bool, brightness: Annotated[int | None, {"minimum": 1, "maximum": 100}] = None,
                   color_temp_k: Annotated[int | None, {"minimum": 2200, "maximum": 6500}] = None) -> dict:
    """Switch a light on or off, optionally setting brightness and colour temperature.

    Args:
        device_id: the light, e.g. "LT-1".
        on: true to switch on, false to switch off.
        brightness: percent 1-100; omit to keep the current brightness.
        color_temp_k: colour temperature in kelvin, 2200 (warm) to 6500 (cool); omit to keep it.
    """
    d = _device(state, device_id, "light")
    _online(device_id, d)
    d["on"] = on
    if brightness is not None:
        d["brightness"] = brightness
    if color_temp_k is not None:
        d["color_temp_k"] = color_temp_k
    _log(state, device_id, f"on={on} brightness={d['brightness']} color_temp_k={d['color_temp_k']}")
    return {"device_id": device_id, "on": d["on"], "brightness": d["brightness"], "color_temp_k": d["color_temp_k"]}


@tool(effect="write", errors={"device_not_found": "unknown device id", "wrong_device_type": "not a lock",
                              "device_offline": "the lock is offline", "pin_required": "unlocking needs the PIN",
                              "wrong_pin": "the PIN is wrong", "lock_jammed": "the lock is jammed"})
def set_door_lock(state, device_id: str, locked: bool, pin: Annotated[str | None, {"pattern": "^[0-9]{4}$"}] = None) -> dict:
    """Lock or unlock a door. Unlocking requires the 4-digit household PIN given by the user.

    Args:
        device_id: the lock, e.g. "LK-1".
        locked: true to lock, false to unlock.
        pin: the household PIN, 4 digits; required to unlock.
    """
    d = _device(state, device_id, "lock")
    _online(device_id, d)
    if not locked:
        if pin is None:
            raise ToolFailure("pin_required", "unlocking needs the household PIN; ask the user for it")
        if pin != state["household_pin"]:
            raise ToolFailure("wrong_pin", "that PIN is not correct; ask the user to repeat it, do not guess")
    if d["jammed"]:
        raise ToolFailure("lock_jammed", f"{d['name']} is jammed; the user must check the door physically")
    d["locked"] = locked
    _log(state, device_id, "locked" if locked else "unlocked")
    return {"device_id": device_id, "locked": locked, "battery_pct": d["battery_pct"]}


@tool(effect="write", errors={"device_not_found": "unknown device id", "wrong_device_type": "not a thermostat",
                              "device_offline": "the thermostat is offline",
                              "target_out_of_range": "cool below 18 °C or heat above 26 °C"})
def set_home_thermostat(state, device_id: str, mode: Literal["heat", "cool", "auto", "off"],
                        target_c: Annotated[float | None, {"minimum": 10, "maximum": 30}] = None) -> dict:
    """Set the thermostat's mode and, optionally, its target temperature.

    Args:
        device_id: the thermostat, e.g. "TH-1".
        mode: heat, cool, auto or off.
        target_c: target temperature in °C (10-30); omit to keep the current target.
    """
    d = _device(state, device_id, "thermostat")
    _online(device_id, d)
    target = d["target_c"] if target_c is None else float(target_c)
    _thermostat_range(mode, target)
    d["mode"], d["target_c"] = mode, target
    _log(state, device_id, f"mode={mode} target_c={target}")
    return {"device_id": device_id, "mode": mode, "target_c": target, "current_c": d["current_c"]}


@tool()
def list_home_scenes(state) -> dict:
    """List the saved scenes and the device settings each one applies."""
    return {"scenes": [{"scene_id": sid, **s} for sid, s in sorted(state["scenes"].items())]}


@tool(effect="write", errors={"scene_not_found": "unknown scene id",
                              "scene_device_unavailable": "a device in the scene is offline or jammed; nothing was changed"})
def activate_home_scene(state, scene_id: str) -> dict:
    """Apply every setting of a saved scene. All-or-nothing: if any device is offline or jammed, nothing changes.

    Args:
        scene_id: the scene, e.g. "SC-1".
    """
    if scene_id not in state["scenes"]:
        raise ToolFailure("scene_not_found", f"no scene {scene_id}; see list_home_scenes")
    scene = state["scenes"][scene_id]
    for a in scene["actions"]:
        d = state["devices"][a["device_id"]]
        if not d["online"] or d.get("jammed"):
            why = "offline" if not d["online"] else "jammed"
            raise ToolFailure("scene_device_unavailable", f"{d['name']} ({a['device_id']}) is {why}; the scene was not applied")
    for a in scene["actions"]:
        state["devices"][a["device_id"]].update(a["settings"])
        _log(state, a["device_id"], f"scene {scene_id}")
    return {"scene_id": scene_id, "applied": len(scene["actions"])}


@tool(effect="write", errors={"duplicate_scene_name": "a scene with this name exists",
                              "device_not_found": "an action names an unknown device",
                              "invalid_scene_action": "an action's settings are not valid for its device"})
def create_home_scene(state, name: Annotated[str, {"minLength": 1, "maxLength": 40}], actions: Annotated[list[dict], {"minItems": 1}]) -> dict:
    """Save a new scene: a named list of device settings applied together.

    Args:
        name: the scene's name, e.g. "Reading".
        actions: one per device, like {"device_id": "LT-3", "settings": {"on": true, "brightness": 60}}.
            Lights take on/brightness/color_temp_k, locks only {"locked": true}, the thermostat mode/target_c.
    """
    if any(s["name"].lower() == name.strip().lower() for s in state["scenes"].values()):
        raise ToolFailure("duplicate_scene_name", f"a scene called {name!r} already exists; pick another name")
    seen = set()
    for a in actions:
        problem = _scene_action_problem(state, a)
        if problem:
            raise ToolFailure("invalid_scene_action", problem)
        if a["device_id"] not in state["devices"]:
            raise ToolFailure("device_not_found", f"no device {a['device_id']}")
        if a["device_id"] in seen:
            raise ToolFailure("invalid_scene_action", f"{a['device_id']} appears twice; merge its settings")
        seen.add(a["device_id"])
        if "target_c" in a["settings"]:
            d = state["devices"][a["device_id"]]
            mode = a["settings"].get("mode", d["mode"])
            try:
                _thermostat_range(mode, a["settings"]["target_c"])
            except ToolFailure as e:
                raise ToolFailure("invalid_scene_action", e.message) from None
    sid = f"SC-{state['next_scene_no']}"
    state["next_scene_no"] += 1
    state["scenes"][sid] = {"name": name.strip(), "actions": [{"device_id": a["device_id"], "settings": dict(a["settings"])} for a in actions]}
    return {"scene_id": sid, "name": name.strip(), "actions": len(actions)}


@tool(effect="write", errors={"scene_not_found": "unknown scene id"})
def delete_home_scene(state, scene_id: str) -> dict:
    """Delete a saved scene (devices are not changed).

    Args:
        scene_id: the scene to delete.
    """
    if scene_id not in state["scenes"]:
        raise ToolFailure("scene_not_found", f"no scene {scene_id}; see list_home_scenes")
    del state["scenes"][scene_id]
    return {"deleted": scene_id}
