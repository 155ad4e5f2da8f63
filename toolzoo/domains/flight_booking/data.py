import random

AIRPORTS = ["LIS", "MAD", "CDG", "AMS", "FCO"]
NAMES = ["Ana Silva", "Ben Okafor", "Chen Lee", "Dara Novak", "Eli Haddad", "Fatima Kim", "Goran Rossi", "Hana Sato"]
CABINS = {"business": {"rows": [1, 2], "letters": "ACDF"}, "economy": {"rows": [10, 15], "letters": "ABCDEF"}}
FARE_RULES = {
    "basic": {"price_factor": 0.8, "cancel_refund": "none", "cancel_fee_cents": None, "free_bags": 0, "seat_selection": False},
    "standard": {"price_factor": 1.0, "cancel_refund": "fare minus fee", "cancel_fee_cents": 7500, "free_bags": 1, "seat_selection": True},
    "flex": {"price_factor": 1.4, "cancel_refund": "full", "cancel_fee_cents": 0, "free_bags": 2, "seat_selection": True},
}


def _seats(cabin):
    c = CABINS[cabin]
    return [f"{r}{x}" for r in range(c["rows"][0], c["rows"][1] + 1) for x in c["letters"]]


def seed(rng: random.Random) -> dict:
    flights = {}
    days = ["2025-07-14", "2025-07-15", "2025-07-16"]
    pairs = [("LIS", "MAD"), ("MAD", "LIS"), ("LIS", "CDG"), ("CDG", "AMS"), ("AMS", "FCO"), ("LIS", "AMS")]
    n = 0
    for origin, dest in pairs:
        for day in rng.sample(days, 2):
            n += 1
            dep = rng.randint(6, 20)
            dur = rng.randint(1, 3)
            eco = rng.randint(60, 220) * 100
            occupied = rng.sample(_seats("economy"), rng.randint(5, 30)) + rng.sample(_seats("business"), rng.randint(0, 6))
            flights[f"FL-{n:02d}"] = {
                "flight_no": f"TD{rng.randint(100, 999)}", "origin": origin, "destination": dest, "date": day,
                "depart": f"{dep:02d}:{rng.choice(['00', '15', '30', '45'])}", "arrive": f"{(dep + dur) % 24:02d}:{rng.choice(['05', '20', '40'])}",
                "status": "scheduled",
                "cabins": {"economy": {"price_cents": eco, **CABINS["economy"]},
                           "business": {"price_cents": eco * 3, **CABINS["business"]}},
                "occupied": sorted(occupied),
            }
    ids = sorted(flights)
    full, departed = rng.sample(ids, 2)
    flights[full]["occupied"] = sorted(set(flights[full]["occupied"]) | set(_seats("business")))
    flights[departed]["status"] = "departed"
    bookings = {}
    for i in range(8):
        fid = rng.choice(ids) if i else departed
        f = flights[fid]
        cabin = "economy" if i % 3 else "business"
        fare = rng.choice(sorted(FARE_RULES))
        free = [s for s in _seats(cabin) if s not in f["occupied"]]
        if not free:
            cabin, free = "economy", [s for s in _seats("economy") if s not in f["occupied"]]
        seat = rng.choice(free)
        f["occupied"] = sorted(f["occupied"] + [seat])
        name = rng.choice(NAMES)
        bookings[f"BK-{4000 + i}"] = {
            "flight_id": fid, "passenger_name": name, "passenger_email": name.split()[0].lower() + f"{i}@example.com",
            "cabin": cabin, "fare_type": fare, "seat": seat, "checked_bags": FARE_RULES[fare]["free_bags"],
            "fare_paid_cents": int(f["cabins"][cabin]["price_cents"] * FARE_RULES[fare]["price_factor"]),
            "bag_fees_cents": 0, "status": "confirmed", "refund_cents": 0,
        }
    return {"airports": list(AIRPORTS), "flights": flights, "bookings": bookings, "fare_rules": FARE_RULES,
            "extra_bag_cents": 3500, "max_checked_bags": 3, "next_booking_no": 4008}
