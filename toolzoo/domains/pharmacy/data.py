import random

RX_FIRST = ["Aaliyah", "Bernard", "Camila", "Dmitri", "Esther", "Felix", "Gloria", "Hassan", "Imani", "Jakob"]
RX_LAST = ["Achebe", "Bianchi", "Carvalho", "Dvorak", "Ekström", "Fitzgerald", "Gupta", "Halvorsen", "Ibrahim"]
RX_DRUGS = {
    "amoxicillin-500": ("Amoxicillin 500 mg capsule", "penicillin", False),
    "lisinopril-10": ("Lisinopril 10 mg tablet", "ace_inhibitor", False),
    "atorvastatin-20": ("Atorvastatin 20 mg tablet", "statin", False),
    "simvastatin-40": ("Simvastatin 40 mg tablet", "statin", False),
    "warfarin-5": ("Warfarin 5 mg tablet", "anticoagulant", False),
    "ibuprofen-400": ("Ibuprofen 400 mg tablet", "nsaid", False),
    "metformin-500": ("Metformin 500 mg tablet", "biguanide", False),
    "sertraline-50": ("Sertraline 50 mg tablet", "ssri", False),
    "tramadol-50": ("Tramadol 50 mg capsule", "opioid", True),
    "clarithromycin-500": ("Clarithromycin 500 mg tablet", "macrolide", False),
}
RX_INTERACTIONS = [
    (["ibuprofen-400", "warfarin-5"], "major", "raised bleeding risk; avoid, suggest paracetamol and call the prescriber"),
    (["sertraline-50", "tramadol-50"], "major", "risk of serotonin syndrome; call the prescriber before dispensing"),
    (["clarithromycin-500", "simvastatin-40"], "major", "risk of muscle damage; statin must be paused"),
    (["ibuprofen-400", "lisinopril-10"], "moderate", "may reduce blood-pressure control; short courses only"),
    (["atorvastatin-20", "clarithromycin-500"], "moderate", "monitor for muscle pain"),
]
RX_PRESCRIBERS = ["Dr. Osei", "Dr. Lindqvist", "Dr. Ramos", "Dr. Chen"]
# rx: (patient, drug, quantity, days_supply, refills_remaining, status, last_filled_on)
RX_SCENARIO = [
    ("PX-100", "lisinopril-10", 30, 30, 2, "active", "2025-02-05"),
    ("PX-100", "atorvastatin-20", 30, 30, 0, "active", "2025-02-01"),
    ("PX-101", "warfarin-5", 30, 30, 3, "active", "2025-03-05"),
    ("PX-102", "metformin-500", 60, 30, 4, "expired", "2024-12-20"),
    ("PX-103", "tramadol-50", 20, 10, 1, "active", "2025-03-08"),
    ("PX-104", "sertraline-50", 30, 30, 5, "active", "2025-03-09"),
    ("PX-105", "simvastatin-40", 30, 30, 2, "active", "2025-01-20"),
    ("PX-101", "metformin-500", 60, 30, 1, "active", "2025-02-01"),
]


def seed(rng: random.Random) -> dict:
    names = rng.sample([f"{f} {s}" for f in RX_FIRST for s in RX_LAST], 8)
    patients = {}
    for i, name in enumerate(names):
        allergies = ["penicillin"] if i == 2 else rng.sample(["sulfonamide", "latex", "macrolide"], rng.randint(0, 1))
        patients[f"PX-{100 + i}"] = {"name": name, "dob": f"{rng.randint(1940, 2004)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                                     "allergies": allergies}
    drugs = {}
    for did, (name, cls, controlled) in RX_DRUGS.items():
        drugs[did] = {"name": name, "class": cls, "controlled": controlled,
                      "stock": 10 if did == "simvastatin-40" else rng.randint(80, 400),
                      "unit_price_cents": rng.choice([8, 12, 15, 25, 40])}
    prescriptions, fills = {}, {}
    for j, (pid, did, qty, days, refills, status, last) in enumerate(RX_SCENARIO):
        rid = f"RX-{3001 + j}"
        prescriptions[rid] = {"patient_id": pid, "drug_id": did, "prescriber": rng.choice(RX_PRESCRIBERS),
                              "quantity": qty, "days_supply": days, "refills_remaining": refills, "status": status,
                              "expires_on": "2025-01-31" if status == "expired" else "2025-12-31",
                              "last_filled_on": last}
        ready = rid in ("RX-3005", "RX-3006")  # filled, waiting for pickup
        fills[f"F-{9001 + j}"] = {"rx_id": rid, "quantity": qty, "filled_on": last,
                                  "status": "ready" if ready else "picked_up",
                                  "picked_up_on": None if ready else last,
                                  "price_cents": qty * drugs[did]["unit_price_cents"]}
    return {"today": "2025-03-10", "patients": patients, "drugs": drugs,
            "interactions": [{"drugs": d, "severity": s, "advice": a} for d, s, a in RX_INTERACTIONS],
            "prescriptions": prescriptions, "fills": fills}
