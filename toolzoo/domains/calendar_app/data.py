import random

CAL_FIRST = ["Aisha", "Bo", "Clara", "Diego", "Emma", "Femi", "Gia", "Hugo", "Isla", "Jamal", "Kira", "Leo"]
CAL_LAST = ["Ahmed", "Brandt", "Cruz", "Dlamini", "Evans", "Moreau", "Nakamura", "Olsen", "Patel", "Quinn"]
CAL_WORK = ["Sprint planning", "Design review", "1:1", "Budget sync", "Customer call", "Hiring panel", "Retro"]
CAL_ROOMS = ["Room Atlas", "Room Borealis", "Video call", "Room Cedar"]
CAL_PERSONAL = ["Dentist", "Gym", "School pickup", "Lunch with Sam", "Car service"]


def seed(rng: random.Random) -> dict:
    users, calendars, events = {}, {}, {}
    names = rng.sample([f"{f} {s}" for f in CAL_FIRST for s in CAL_LAST], 6)
    for i in range(6):
        uid = f"USR-{i + 1}"
        first, last = names[i].split()
        users[uid] = {"name": names[i], "email": f"{first.lower()}.{last.lower()}@team.example"}
        calendars[f"CAL-{i + 1}1"] = {"owner": uid, "name": "Work", "color": rng.choice(["blue", "green", "teal"])}
        calendars[f"CAL-{i + 1}2"] = {"owner": uid, "name": "Personal", "color": rng.choice(["red", "orange", "pink"])}

    def add(cal, title, date, start, end, attendees, status="confirmed"):
        eid = f"EV-{101 + len(events)}"
        events[eid] = {"calendar_id": cal, "organizer": calendars[cal]["owner"], "title": title, "date": date,
                       "start": start, "end": end, "location": rng.choice(CAL_ROOMS), "attendees": attendees,
                       "status": status}

    # fixed scenarios (tests rely on their shape), rng-varied titles
    add("CAL-11", rng.choice(CAL_WORK), "2025-03-11", "10:00", "11:00", {"USR-2": "accepted", "USR-3": "pending"})
    add("CAL-12", rng.choice(CAL_PERSONAL), "2025-03-11", "10:30", "11:30", {})  # USR-1 double-booked
    add("CAL-21", rng.choice(CAL_WORK), "2025-03-11", "14:00", "15:00", {"USR-1": "tentative", "USR-4": "declined"})
    add("CAL-31", rng.choice(CAL_WORK), "2025-03-07", "09:00", "10:00", {"USR-1": "accepted"})  # in the past
    add("CAL-41", rng.choice(CAL_WORK), "2025-03-12", "13:00", "14:00", {"USR-5": "pending"}, status="cancelled")
    # background events on later days
    for _ in range(8):
        owner = rng.randint(1, 6)
        day = rng.choice(["2025-03-12", "2025-03-13", "2025-03-14"])
        hour = rng.randint(9, 15)
        others = rng.sample([u for u in range(1, 7) if u != owner], rng.randint(0, 2))
        add(f"CAL-{owner}1", rng.choice(CAL_WORK), day, f"{hour:02d}:00", f"{hour:02d}:{rng.choice(['30', '45'])}",
            {f"USR-{o}": rng.choice(["accepted", "pending", "tentative"]) for o in others})
    return {"today": "2025-03-10", "working_hours": {"start": "09:00", "end": "17:00"},
            "users": users, "calendars": calendars, "events": events}
