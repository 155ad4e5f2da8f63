import random

NOTES_SEED = {
    "Work": [
        ("Q2 roadmap", "Ship the billing revamp and the mobile onboarding before June.", ["planning", "q2"]),
        ("Standup notes", "Blocked on the staging database migration; ping the infra team.", ["meetings"]),
        ("Hiring plan", "Two backend engineers and one designer; budget approved in March.", ["planning", "hiring"]),
        ("Vendor contacts", "Printer vendor: Acme Office, account 4471. Cloud rep: Dana.", ["contacts"]),
    ],
    "Personal": [
        ("Groceries", "Oat milk, lentils, basil, lemons, coffee beans.", ["shopping"]),
        ("Gift ideas", "Mum: pottery class. Leo: a good headlamp for hiking.", ["family", "shopping"]),
        ("Reading list", "The Dispossessed; Braiding Sweetgrass; Piranesi.", ["books"]),
    ],
    "Recipes": [
        ("Lentil soup", "Red lentils, carrot, cumin, lemon at the end. 30 minutes.", ["dinner", "vegan"]),
        ("Banana bread", "Three ripe bananas, 250 g flour, walnuts, 50 minutes at 180C.", ["baking"]),
        ("Pesto", "Basil, pine nuts, parmesan, garlic, olive oil; blitz briefly.", ["dinner"]),
    ],
    "Travel": [
        ("Lisbon trip", "Book the tram 28 early; try pasteis in Belem; pack light layers.", ["trips"]),
        ("Packing list", "Passport, adapters, headlamp, rain jacket, chargers.", ["trips", "checklist"]),
    ],
}


def seed(rng: random.Random) -> dict:
    notebooks, notes = {}, {}
    n = 100
    for i, (nb_name, rows) in enumerate(NOTES_SEED.items()):
        nbid = f"NB-{i + 1}"
        notebooks[nbid] = {"name": nb_name, "created_on": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"}
        for title, body, tags in rows:
            n += 1
            notes[f"N-{n}"] = {
                "notebook_id": nbid, "title": title, "body": body, "tags": list(tags),
                "pinned": rng.random() < 0.25, "status": "active",
                "updated_on": f"2025-0{rng.randint(1, 3)}-{rng.randint(1, 9):02d}",
            }
    # fixed scenario: one archived note (its title also exists as an active note elsewhere)
    notes["N-101"]["pinned"] = True
    notes[f"N-{n + 1}"] = {"notebook_id": "NB-2", "title": "Old gym plan",
                           "body": rng.choice(["Mon/Wed/Fri strength.", "Run 5k three times a week."]),
                           "tags": ["health"], "pinned": False, "status": "archived", "updated_on": "2024-11-02"}
    notes[f"N-{n + 2}"] = {"notebook_id": "NB-1", "title": "Groceries", "body": "Office snacks: fruit and tea.",
                           "tags": ["shopping"], "pinned": False, "status": "archived", "updated_on": "2024-12-12"}
    return {"today": "2025-03-10", "max_tags_per_note": 5, "notebooks": notebooks, "notes": notes}
