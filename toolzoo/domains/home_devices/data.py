import random

ROOMS = ["living room", "kitchen", "bedroom", "office", "hallway", "porch"]


def seed(rng: random.Random) -> dict:
    devices = {}
    offline = rng.randrange(6)
    # Which light is in which room, and which lock is which door, vary with the seed: an agent must read a
    # device's name from the tools, not recall it from the id (a tiny policy primed on one fixed world said
    # the names it had memorised for other ids; bench/results/reader_gpu.md, section 12)
    rooms = rng.sample(ROOMS, len(ROOMS))
    doors = rng.sample([("hallway", "Front door"), ("kitchen", "Back door"), ("garage", "Garage door")], 3)
    for i, room in enumerate(rooms):
        on = rng.random() < 0.5
        devices[f"LT-{i + 1}"] = {
            "type": "light", "name": f"{room.title()} light", "room": room, "online": i != offline,
            "on": on, "brightness": rng.randint(10, 100), "color_temp_k": rng.choice([2700, 3000, 4000, 5000]),
        }
    jammed, lock_offline = rng.sample(range(3), 2)
    for i, (room, name) in enumerate(doors):
        devices[f"LK-{i + 1}"] = {"type": "lock", "name": name, "room": room, "online": i != lock_offline,
                                  "locked": rng.random() < 0.7, "jammed": i == jammed, "battery_pct": rng.randint(15, 100)}
    devices["TH-1"] = {"type": "thermostat", "name": "Main thermostat", "room": "hallway", "online": True,
                       "mode": rng.choice(["heat", "auto", "off"]), "target_c": float(rng.randint(18, 23)),
                       "current_c": round(rng.uniform(16.0, 24.0), 1)}
    devices["TH-2"] = {"type": "thermostat", "name": "Guest annex thermostat", "room": "annex", "online": False,
                       "mode": "off", "target_c": float(rng.randint(16, 20)), "current_c": round(rng.uniform(12.0, 20.0), 1)}
    scenes = {
        "SC-1": {"name": "Good night", "actions": [
            *[{"device_id": f"LT-{i + 1}", "settings": {"on": False}} for i in range(6) if i != offline],
            {"device_id": "TH-1", "settings": {"mode": "heat", "target_c": float(rng.randint(16, 19))}},
        ]},
        "SC-2": {"name": "Movie time", "actions": [
            {"device_id": "LT-1", "settings": {"on": True, "brightness": rng.randint(10, 30), "color_temp_k": 2700}},
            {"device_id": "LT-2", "settings": {"on": False}},
        ]},
    }
    pin = f"{rng.randint(0, 9999):04d}"
    # Which scene id is which scene, and which thermostat id is the main one, vary with the seed too (drawn
    # last, so every other value of a world stays as it was): with them fixed, 69-88% of the demo's training
    # look-ups named a record whose id the name alone gives ("Good night" was SC-1 in every world), so priming
    # taught look-ups that never read the listing (bench/results/reader_gpu.md, section 19)
    if rng.random() < 0.5:
        scenes = {"SC-1": scenes["SC-2"], "SC-2": scenes["SC-1"]}
    if rng.random() < 0.5:
        devices["TH-1"], devices["TH-2"] = devices["TH-2"], devices["TH-1"]
        for scene in scenes.values():
            for action in scene["actions"]:
                if action["device_id"] == "TH-1":
                    action["device_id"] = "TH-2"
    return {"household_pin": pin, "devices": devices, "scenes": scenes, "activity": [], "next_scene_no": 3}
