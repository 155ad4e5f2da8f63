import random

NAMES = ["Ana Silva", "Ben Okafor", "Chen Lee", "Dara Novak", "Eli Haddad", "Fatima Kim", "Goran Rossi", "Hana Sato"]
COMPANIES = ["Bright Candles Co", "Northwind Parts", "Pixel Prints", "Green Leaf Teas"]
STREETS = ["Oak Ave", "Main St", "River Rd", "Elm St", "Harbor Way", "Hill Ln"]
ZIP_ZONES = {"10001": 1, "10452": 1, "19104": 2, "30301": 3, "60601": 3, "73301": 4, "80202": 4, "94105": 5, "98101": 5}
STAGES = ["label_created", "in_transit", "out_for_delivery", "delivered"]


def seed(rng: random.Random) -> dict:
    services = {
        "ground": {"base_cents": 800, "per_kg_cents": 120, "per_zone_cents": 150, "transit_days": 5, "max_kg": 70},
        "express": {"base_cents": 1600, "per_kg_cents": 220, "per_zone_cents": 300, "transit_days": 2, "max_kg": 30},
        "overnight": {"base_cents": 3200, "per_kg_cents": 380, "per_zone_cents": 450, "transit_days": 1, "max_kg": 15},
    }
    accounts = {}
    for i, company in enumerate(COMPANIES):
        accounts[f"SA-{300 + i}"] = {"company": company, "email": f"shipping{300 + i}@example.com",
                                     "home_postal_code": rng.choice(sorted(ZIP_ZONES)), "credit_cents": rng.randint(20, 400) * 100}
    shipments = {}
    zips = sorted(ZIP_ZONES)
    for j in range(10):
        tn = f"PX{rng.randint(10, 99)}{1000 + j}"
        acct = f"SA-{300 + rng.randrange(len(COMPANIES))}"
        service = rng.choice(sorted(services))
        weight = round(rng.uniform(0.5, min(14.0, services[service]["max_kg"])), 1)
        stage = STAGES.index(rng.choice(STAGES))
        events = [{"day": d, "status": STAGES[d], "location": rng.choice(["origin hub", "regional hub", "local depot", "doorstep"])}
                  for d in range(stage + 1)]
        shipments[tn] = {
            "account_id": acct, "service": service, "from_postal_code": accounts[acct]["home_postal_code"],
            "to_postal_code": rng.choice(zips), "recipient_name": rng.choice(NAMES),
            "to_address": f"{rng.randint(1, 400)} {rng.choice(STREETS)}", "weight_kg": weight,
            "declared_value_cents": rng.choice([0, 5000, 10000, 25000]), "cost_cents": rng.randint(900, 6000),
            "status": STAGES[stage], "days_in_transit": stage + (rng.randint(0, 6) if STAGES[stage] == "in_transit" else 0),
            "reroutes": 0, "events": events,
        }
    # Every seed has an account almost out of credit with a fresh label, and an overdue (lost) parcel.
    low = f"SA-{300 + len(COMPANIES) - 1}"
    accounts[low]["credit_cents"] = rng.randint(1, 6) * 100
    tns = sorted(shipments)
    shipments[tns[-1]].update(account_id=low, from_postal_code=accounts[low]["home_postal_code"], status="label_created",
                              days_in_transit=0, events=[{"day": 0, "status": "label_created", "location": "origin hub"}])
    shipments[tns[0]].update(status="in_transit", days_in_transit=12, declared_value_cents=20000)
    shipments[tns[0]]["events"] = [{"day": 0, "status": "label_created", "location": "origin hub"},
                                   {"day": 1, "status": "in_transit", "location": "regional hub"}]
    return {"services": services, "zones": dict(ZIP_ZONES), "accounts": accounts, "shipments": shipments,
            "claims": {}, "reroute_fee_cents": 700, "lost_after_extra_days": 5}
