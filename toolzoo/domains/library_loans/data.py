import datetime
import random

LIB_TITLES = [
    ("The Silent Orbit", "R. Okafor", "science"), ("Gardens of Salt", "M. Haddad", "fiction"),
    ("A Short History of Bridges", "T. Novak", "engineering"), ("Learning Python Deeply", "J. Kim", "computing"),
    ("The Lighthouse Keeper", "A. Silva", "fiction"), ("Cells and Signals", "H. Sato", "science"),
    ("Cooking with Fire", "G. Rossi", "cooking"), ("Data on the Ground", "E. Lee", "computing"),
    ("Wild Rivers", "F. Okafor", "nature"), ("Moonlit Harbour", "D. Novak", "fiction"),
    ("Statistics Made Plain", "I. Haddad", "mathematics"), ("Birds of the Coast", "C. Silva", "nature"),
    ("The Glass Archive", "B. Kim", "fiction"), ("Quantum Kitchen", "L. Rossi", "science"),
]
LIB_FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun"]
LIB_LAST = ["Silva", "Okafor", "Lee", "Novak", "Haddad", "Kim", "Rossi", "Sato"]
LIB_LOAN_DAYS = {"book": 21, "audiobook": 14, "dvd": 7}
LIB_MAX_LOANS = {"student": 3, "staff": 6, "child": 2}


def seed(rng: random.Random) -> dict:
    today = datetime.date(2024, 6, 10)
    items = {}
    for i, (title, author, subject) in enumerate(LIB_TITLES):
        items[f"B-{200 + i}"] = {
            "title": title, "author": author, "subject": subject,
            "format": rng.choice(["book", "book", "book", "audiobook", "dvd"]),
            "copies": rng.randint(1, 3), "holds": [],
        }
    members = {}
    for i in range(6):
        members[f"M-{100 + i}"] = {
            "name": f"{rng.choice(LIB_FIRST)} {rng.choice(LIB_LAST)}",
            "type": rng.choice(["student", "staff", "child"]),
            "fees_cents": rng.choice([0, 0, 0, 150, 1200]),
        }
    loans = {}
    n = 0
    for _ in range(14):
        mid = rng.choice(sorted(members))
        iid = rng.choice(sorted(items))
        active = [ln for ln in loans.values() if ln["returned"] is None]
        if sum(1 for ln in active if ln["item_id"] == iid) >= items[iid]["copies"]:
            continue
        if sum(1 for ln in active if ln["member_id"] == mid) >= LIB_MAX_LOANS[members[mid]["type"]] - 1:
            continue
        if any(ln["item_id"] == iid and ln["member_id"] == mid for ln in active):
            continue
        borrowed = today - datetime.timedelta(days=rng.randint(1, 30))
        loans[f"L-{3000 + n}"] = {
            "item_id": iid, "member_id": mid, "borrowed": borrowed.isoformat(),
            "due": (borrowed + datetime.timedelta(days=LIB_LOAN_DAYS[items[iid]["format"]])).isoformat(),
            "renewals": 0, "returned": None, "fee_cents": 0,
        }
        n += 1
    for iid, item in sorted(items.items()):
        out = sum(1 for ln in loans.values() if ln["item_id"] == iid)
        if out >= item["copies"]:
            borrowers = {ln["member_id"] for ln in loans.values() if ln["item_id"] == iid}
            waiting = [m for m in sorted(members) if m not in borrowers]
            item["holds"] = rng.sample(waiting, rng.randint(0, 2))
    return {
        "today": today.isoformat(),
        "rules": {"loan_days": dict(LIB_LOAN_DAYS), "max_loans": dict(LIB_MAX_LOANS), "max_renewals": 2,
                  "late_fee_cents_per_day": 25, "max_late_fee_cents": 1500, "fee_block_cents": 1000},
        "items": items, "members": members, "loans": loans, "next_loan": 3000 + n,
    }
