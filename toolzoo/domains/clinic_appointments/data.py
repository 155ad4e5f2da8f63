import random

CL_FIRST = ["Abena", "Boris", "Chloe", "Dev", "Elena", "Faisal", "Gwen", "Hector", "Ilse", "Joao", "Kalani", "Lucia"]
CL_LAST = ["Asante", "Brooks", "Chowdhury", "Delgado", "Engel", "Farah", "Gallagher", "Holm", "Ivanova", "Jansen"]
CL_DOCTORS = [("D-10", "general", "09:00", "12:00"), ("D-11", "general", "13:00", "17:00"),
              ("D-12", "cardiology", "09:00", "13:00"), ("D-13", "dermatology", "14:00", "17:00"),
              ("D-14", "pediatrics", "08:30", "12:30")]
CL_DAYS = ["2025-03-05", "2025-03-06", "2025-03-07", "2025-03-10", "2025-03-11", "2025-03-12", "2025-03-13",
           "2025-03-14", "2025-03-17", "2025-03-18", "2025-03-19", "2025-03-20", "2025-03-21"]
CL_REASONS = ["annual check-up", "persistent cough", "blood pressure review", "skin rash", "follow-up on lab results",
              "knee pain", "vaccination"]
# days each doctor must work, so the fixed scenarios below are always valid
CL_FIXED_DAYS = {"D-10": CL_DAYS, "D-11": ["2025-03-05", "2025-03-18"], "D-12": ["2025-03-12"],
                 "D-13": ["2025-03-19"], "D-14": ["2025-03-13"]}


def seed(rng: random.Random) -> dict:
    names = rng.sample([f"{f} {s}" for f in CL_FIRST for s in CL_LAST], 10)
    patients = {}
    for i, name in enumerate(names):
        year = 2016 if i == 9 else rng.randint(1950, 2000)  # P-109 is a child
        patients[f"P-{100 + i}"] = {"name": name, "dob": f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                                    "phone": f"+44 7700 {rng.randint(100000, 999999)}"}
    doctors = {}
    for did, spec, start, end in CL_DOCTORS:
        days = set(CL_FIXED_DAYS[did]) | set(rng.sample(CL_DAYS, 5))
        doctors[did] = {"name": f"Dr. {rng.choice(CL_FIRST)} {rng.choice(CL_LAST)}", "specialty": spec,
                        "hours": {"start": start, "end": end}, "working_days": sorted(days)}
    appointments = {}

    def add(pid, did, date, time, status, note=None):
        appointments[f"A-{501 + len(appointments)}"] = {
            "patient_id": pid, "doctor_id": did, "date": date, "time": time, "reason": rng.choice(CL_REASONS),
            "status": status, "visit_note": note, "cancel_reason": None}

    add("P-100", "D-10", "2025-03-11", "09:00", "booked")
    add("P-101", "D-10", "2025-03-10", "10:00", "booked")  # today
    add("P-102", "D-11", "2025-03-05", "14:00", "completed",
        {"note": "Mild viral infection; rest and fluids.", "diagnosis": "J06.9", "follow_up_weeks": None})
    add("P-100", "D-12", "2025-03-12", "10:30", "booked")
    add("P-103", "D-10", "2025-03-12", "09:30", "cancelled")
    add("P-109", "D-14", "2025-03-13", "09:00", "booked")
    taken = set()
    for _ in range(6):  # background bookings, away from the fixed ones
        pid = f"P-{rng.randint(104, 108)}"
        did, date = rng.choice([("D-11", "2025-03-18"), ("D-13", "2025-03-19")])
        time = f"{rng.randint(14, 16)}:{rng.choice(['00', '30'])}"
        if (did, date, time) in taken or (pid, did, date) in taken:
            continue
        taken |= {(did, date, time), (pid, did, date)}
        add(pid, did, date, time, "booked")
    return {"today": "2025-03-10", "slot_minutes": 30, "patients": patients, "doctors": doctors,
            "appointments": appointments}
