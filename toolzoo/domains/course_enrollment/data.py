import random

CE_FIRST = ["Ama", "Bjorn", "Citlali", "Dong", "Efua", "Fionn", "Giulia", "Haruto", "Ifeoma", "Jasper", "Kavya"]
CE_LAST = ["Appiah", "Berglund", "Cortes", "Dang", "Eze", "Flanagan", "Greco", "Hayashi", "Iyer", "Jovanovic"]
CE_COURSES = [
    # id, title, credits, prerequisites, instructor
    ("CS101", "Introduction to Programming", 4, [], "I-1"),
    ("CS201", "Data Structures", 4, ["CS101"], "I-1"),
    ("CS301", "Algorithms", 4, ["CS201", "MATH201"], "I-2"),
    ("MATH101", "Calculus I", 4, [], "I-3"),
    ("MATH201", "Linear Algebra", 3, ["MATH101"], "I-3"),
    ("PHYS101", "Mechanics", 4, ["MATH101"], "I-4"),
    ("HIST110", "World History", 3, [], "I-5"),
    ("ART120", "Drawing Studio", 2, [], "I-5"),
]
CE_GOOD = ["A", "A-", "B+", "B", "B-", "C+", "C"]


def seed(rng: random.Random) -> dict:
    names = rng.sample([f"{f} {s}" for f in CE_FIRST for s in CE_LAST], 8)
    students = {}
    for i, name in enumerate(names):
        sid = f"S-{1001 + i}"
        first, last = name.split()
        students[sid] = {"name": name, "email": f"{first.lower()}.{last.lower()}@uni.example",
                         "max_credits": 12 if sid == "S-1007" else 18, "completed": {}}
    g = lambda: rng.choice(CE_GOOD)  # noqa: E731
    students["S-1001"]["completed"] = {"CS101": g(), "MATH101": g()}
    for sid in ("S-1002", "S-1003", "S-1004", "S-1005"):
        students[sid]["completed"] = {"CS101": g()}
    students["S-1006"]["completed"] = {"CS101": rng.choice(["D", "F"]), "MATH101": g()}
    students["S-1007"]["completed"] = {"MATH101": g(), "CS101": g()}
    instructors = {f"I-{k}": {"name": f"Prof. {rng.choice(CE_LAST)}"} for k in range(1, 6)}
    courses = {}
    for cid, title, credits, prereq, inst in CE_COURSES:
        courses[cid] = {"title": title, "credits": credits, "capacity": rng.randint(20, 40), "prerequisites": prereq,
                        "instructor_id": inst, "enrolled": [], "waitlist": [], "grades": {}}
    courses["CS201"].update(capacity=3, enrolled=["S-1002", "S-1003", "S-1004"], waitlist=["S-1005"])
    courses["HIST110"]["enrolled"] = ["S-1003", "S-1007"]
    courses["HIST110"]["grades"] = {"S-1003": g()}
    students["S-1003"]["completed"]["HIST110"] = courses["HIST110"]["grades"]["S-1003"]
    courses["MATH201"]["enrolled"] = ["S-1001", "S-1007"]
    courses["PHYS101"]["enrolled"] = ["S-1001", "S-1007"]
    courses["ART120"]["capacity"] = 2
    return {"term": "2025-spring", "passing_grades": CE_GOOD, "students": students, "instructors": instructors,
            "courses": courses}
