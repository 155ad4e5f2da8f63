import random

APPLIANCES = [("Dishwasher", 1.8, True), ("Washing machine", 2.0, True), ("Tumble dryer", 3.0, True),
              ("EV charger", 7.2, True), ("Pool pump", 1.1, True), ("Water heater", 3.0, True),
              ("Fridge", 0.15, False), ("Heat pump", 2.5, False)]


def seed(rng: random.Random) -> dict:
    now_hour = rng.randint(12, 18)
    solar_kw = rng.choice([4.0, 5.5, 6.6, 8.0])
    battery_kwh = rng.choice([10.0, 13.5])
    soc = rng.randint(20, 60)
    readings = []
    stored = battery_kwh * soc / 100
    for hour in range(now_hour):
        sun = max(0.0, 1 - abs(hour - 13) / 6)
        solar = round(solar_kw * sun * rng.uniform(0.6, 0.95), 2)
        load = round(rng.uniform(0.3, 1.2) + (1.5 if hour in (7, 8, 18, 19) else 0), 2)
        surplus = solar - load
        if surplus >= 0:
            charge = min(surplus, 3.0, battery_kwh - stored)
        else:
            charge = -min(-surplus, 3.0, max(0.0, stored - battery_kwh * 0.2))
        stored += charge
        grid = load - solar + charge
        readings.append({"hour": hour, "solar_kwh": solar, "load_kwh": load, "battery_kwh": round(charge, 2),
                         "grid_import_kwh": round(grid, 2) if grid > 0 else 0.0,
                         "grid_export_kwh": round(-grid, 2) if grid < 0 else 0.0,
                         "battery_soc_pct": round(100 * stored / battery_kwh, 1)})
    soc = round(100 * stored / battery_kwh, 1)
    appliances = {}
    for i, (name, kw, flexible) in enumerate(APPLIANCES):
        appliances[f"AP-{i + 1}"] = {"name": name, "power_kw": kw, "flexible": flexible, "schedule": None}
    appliances["AP-4"]["schedule"] = {"start_hour": rng.choice([0, 1, 2]), "duration_hours": rng.randint(3, 5)}
    appliances["AP-1"]["schedule"] = {"start_hour": rng.choice([21, 22]), "duration_hours": 2}
    tariffs = {
        "TF-FLAT": {"name": "Simple Flat", "periods": [{"start_hour": 0, "end_hour": 24, "import_cents_per_kwh": rng.randint(26, 32)}],
                    "export_cents_per_kwh": rng.randint(4, 8), "monthly_fee_cents": 1200},
        "TF-TOU": {"name": "Time of Use", "periods": [
            {"start_hour": 0, "end_hour": 7, "import_cents_per_kwh": rng.randint(12, 16)},
            {"start_hour": 7, "end_hour": 16, "import_cents_per_kwh": rng.randint(24, 28)},
            {"start_hour": 16, "end_hour": 21, "import_cents_per_kwh": rng.randint(40, 48)},
            {"start_hour": 21, "end_hour": 24, "import_cents_per_kwh": rng.randint(24, 28)}],
            "export_cents_per_kwh": rng.randint(6, 12), "monthly_fee_cents": 1500},
        "TF-EV": {"name": "EV Night Saver", "periods": [
            {"start_hour": 0, "end_hour": 5, "import_cents_per_kwh": rng.randint(7, 10)},
            {"start_hour": 5, "end_hour": 24, "import_cents_per_kwh": rng.randint(33, 38)}],
            "export_cents_per_kwh": rng.randint(3, 6), "monthly_fee_cents": 1800},
    }
    return {
        "now_hour": now_hour,
        "site": {"solar_capacity_kw": solar_kw, "max_scheduled_load_kw": rng.choice([9.0, 10.0]),
                 "battery": {"capacity_kwh": battery_kwh, "soc_pct": soc, "mode": "self_consumption", "reserve_pct": 20}},
        "readings": readings,
        "appliances": appliances,
        "tariffs": tariffs,
        "current_tariff_id": rng.choice(["TF-FLAT", "TF-TOU"]),
        "tariff_switches_this_year": 0,
        "max_tariff_switches_per_year": 1,
    }
