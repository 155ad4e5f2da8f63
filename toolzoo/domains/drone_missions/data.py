import random

DRONE_MODELS = [("Kestrel S", 2.0), ("Kestrel S", 2.0), ("Heron Cargo", 8.0), ("Swift Survey", 1.0)]
NFZ_NAMES = ["City Hospital helipad", "Stadium", "Airport approach", "Prison", "Power plant"]


def seed(rng: random.Random) -> dict:
    drones = {}
    for i, (model, payload) in enumerate(DRONE_MODELS):
        home = rng.choice([[0, 0], [0, 0], [500, -300]])
        drones[f"D-{i + 1}"] = {"model": model, "status": "grounded", "battery": rng.choice([25, 55, 80, 100]),
                                "max_payload_kg": payload, "payload_kg": 0.0, "x": home[0], "y": home[1],
                                "home": home, "mission_id": None}
    homes = [d["home"] for d in drones.values()]
    zones = {}
    for j, name in enumerate(rng.sample(NFZ_NAMES, 3)):
        radius = rng.choice([300, 500, 800])
        while True:  # keep every home base clear of the zone
            center = [rng.randint(-30, 30) * 100, rng.randint(-30, 30) * 100]
            if all((center[0] - x) ** 2 + (center[1] - y) ** 2 > (radius + 300) ** 2 for x, y in homes):
                break
        zones[f"NFZ-{j + 1}"] = {"name": name, "center": center, "radius_m": radius, "active": j != 2}
    return {"rules": {"min_altitude_m": 10, "max_altitude_m": 120, "min_launch_battery": 40, "battery_per_km": 10,
                      "payload_battery_factor": 0.5, "landing_reserve": 20, "max_wind_ms": 10},
            "weather": {"wind_ms": rng.choice([3, 5, 7, 12])},
            "drones": drones, "no_fly_zones": zones, "missions": {}, "next_mission": 1 + rng.randint(0, 9) * 10}
