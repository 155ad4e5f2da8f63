import random

FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun"]
LAST = ["Silva", "Okafor", "Lee", "Novak", "Haddad", "Kim", "Rossi", "Sato"]
CITIES = ["Porto", "Leeds", "Austin"]
STREETS = ["Rua das Flores", "Park Row", "Congress Ave", "Canal St", "Mill Lane", "Oak Terrace"]
SLOTS = ["2025-06-10 10:00", "2025-06-10 14:00", "2025-06-11 10:00", "2025-06-11 17:30", "2025-06-12 12:00",
         "2025-06-13 09:30", "2025-06-14 11:00"]


def seed(rng: random.Random) -> dict:
    landlords = {f"LL-{i + 1}": {"name": f"{rng.choice(FIRST)} {rng.choice(LAST)}"} for i in range(4)}
    listings = {}
    for i in range(10):
        beds = rng.randint(0, 3)
        listings[f"L-{500 + i}"] = {
            "address": f"{rng.randint(1, 200)} {rng.choice(STREETS)}", "city": rng.choice(CITIES), "bedrooms": beds,
            "rent_cents": (700 + 350 * beds + rng.randint(0, 8) * 50) * 100, "pets_allowed": rng.random() < 0.4,
            "landlord_id": rng.choice(sorted(landlords)), "status": "available", "income_multiple": rng.choice([2.5, 3.0]),
            "viewing_slots": sorted(rng.sample(SLOTS, 3)),
        }
    listings[f"L-{500 + rng.randrange(10)}"]["status"] = "leased"
    applicants = {}
    for i in range(6):
        applicants[f"AP-{i + 1}"] = {"name": f"{rng.choice(FIRST)} {rng.choice(LAST)}", "email": f"renter{i + 1}@example.com",
                                     "monthly_income_cents": rng.randint(20, 90) * 10000, "has_pets": rng.random() < 0.35,
                                     "credit_score": rng.randint(560, 820)}
    available = [lid for lid, lst in sorted(listings.items()) if lst["status"] == "available"]
    viewings, applications = {}, {}
    for i in range(5):
        lid = rng.choice(available)
        apid = f"AP-{rng.randint(1, 6)}"
        status = "completed" if i < 3 else "scheduled"
        viewings[f"VW-{i + 1}"] = {"listing_id": lid, "applicant_id": apid, "slot": listings[lid]["viewing_slots"][i % 3],
                                   "status": status}
    vw = viewings["VW-1"]
    applications["APP-1"] = {"listing_id": vw["listing_id"], "applicant_id": vw["applicant_id"], "status": "submitted",
                             "decision_reason": None, "move_in_date": "2025-07-01"}
    return {"landlords": landlords, "listings": listings, "applicants": applicants, "viewings": viewings,
            "applications": applications, "next_viewing_no": 6, "next_application_no": 2}
