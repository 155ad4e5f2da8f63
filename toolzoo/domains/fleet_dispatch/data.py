import random

DRIVERS = ["Ana Silva", "Ben Okafor", "Chen Lee", "Dara Novak", "Eli Haddad", "Fatima Kim", "Goran Rossi", "Hana Sato"]
SITES = ["North depot", "Harbor warehouse", "Airport cargo", "City market", "Mill Road plant", "Westfield mall",
         "General hospital", "Lakeside farm"]


def seed(rng: random.Random) -> dict:
    specs = [("van", 1200, False, "B"), ("van", 1200, False, "B"), ("van", 1000, False, "B"), ("van", 1200, True, "B"),
             ("truck", 8000, False, "C"), ("truck", 6000, True, "C")]
    vehicles = {}
    for i, (kind, cap, reefer, lic) in enumerate(specs):
        odo = rng.randint(20000, 140000)
        vehicles[f"V-{i + 1}"] = {"plate": f"{rng.choice('ABCDEFGH')}{rng.choice('JKLMNP')}-{rng.randint(100, 999)}",
                                  "type": kind, "capacity_kg": cap, "refrigerated": reefer, "required_licence": lic,
                                  "status": "available", "odometer_km": odo, "next_service_km": odo + rng.randint(500, 9000),
                                  "hold": None}
    overdue, held = rng.sample(["V-1", "V-2", "V-3"], 2)
    vehicles[overdue]["next_service_km"] = vehicles[overdue]["odometer_km"] - rng.randint(10, 800)
    vehicles[held].update(status="maintenance", hold={"reason": "breakdown", "note": "brake warning light"})
    names = rng.sample(DRIVERS, 6)
    drivers = {}
    for i, name in enumerate(names):
        drivers[f"D-{i + 1}"] = {"name": name, "licence": "C" if i < 2 else "B", "status": "on_duty",
                                 "hours_today": float(rng.randint(0, 5)), "current_job": None}
    drivers["D-6"]["status"] = "off_duty"
    drivers["D-5"]["hours_today"] = 9.5
    jobs = {}
    for j in range(8):
        pickup, dropoff = rng.sample(SITES, 2)
        reefer = j in (1, 5)
        dist = rng.randint(15, 180)
        jobs[f"J-{700 + j}"] = {"pickup": pickup, "dropoff": dropoff, "weight_kg": rng.randint(80, 900) if j % 3 else rng.randint(1500, 5000),
                                "refrigerated": reefer, "distance_km": dist, "est_hours": round(dist / 55 + rng.choice([0.5, 1.0, 1.5]), 1),
                                "status": "unassigned", "vehicle_id": None, "driver_id": None, "history": []}
    # one job already assigned, one en route, one delivered
    free = [v for v in ("V-4", "V-5", "V-6") if vehicles[v]["status"] == "available"]
    for jid, status, vid, did in [("J-706", "assigned", free[0], "D-3"), ("J-707", "en_route", free[1], "D-1")]:
        jobs[jid].update(status=status, vehicle_id=vid, driver_id=did, weight_kg=min(jobs[jid]["weight_kg"], 900),
                         refrigerated=False, history=[{"status": "assigned", "note": ""}])
        vehicles[vid]["status"] = "on_job"
        drivers[did]["current_job"] = jid
    jobs["J-707"]["history"].append({"status": "en_route", "note": "left depot"})
    jobs["J-704"].update(status="delivered", vehicle_id="V-3", driver_id="D-4", history=[{"status": "delivered", "note": "signed by reception"}])
    return {"vehicles": vehicles, "drivers": drivers, "jobs": jobs, "max_driver_hours": 10.0,
            "service_interval_km": 15000, "maintenance_log": []}
