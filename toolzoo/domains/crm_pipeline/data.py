import datetime
import random

CRM_STAGES = [("prospecting", 10), ("qualification", 25), ("proposal", 50), ("negotiation", 75),
              ("closed_won", 100), ("closed_lost", 0)]
CRM_COMPANIES = [("Northwind Foods", "retail"), ("Bluepeak Energy", "energy"), ("Cobalt Health", "healthcare"),
                 ("Helix Software", "technology"), ("Orchard Logistics", "logistics"), ("Vela Bank", "finance"),
                 ("Quarry Build", "construction")]
CRM_PEOPLE = ["Ana Silva", "Ben Okafor", "Chen Lee", "Dara Novak", "Eli Haddad", "Fatima Kim", "Goran Rossi",
              "Hana Sato", "Ivan Lee", "Jun Kim"]
CRM_TITLES = ["CFO", "CTO", "Head of Procurement", "Operations Manager", "VP Sales", "IT Director"]


def seed(rng: random.Random) -> dict:
    today = datetime.date(2024, 6, 10)
    reps = {f"U-{i + 1}": {"name": n, "quarterly_quota_cents": rng.choice([20, 30, 40]) * 1000000}
            for i, n in enumerate(["Maya Stone", "Leo Grant", "Ines Duarte"])}
    accounts, contacts = {}, {}
    for i, (name, industry) in enumerate(rng.sample(CRM_COMPANIES, 6)):
        aid = f"A-{100 + i}"
        accounts[aid] = {"name": name, "industry": industry, "owner_rep_id": rng.choice(sorted(reps)),
                         "tier": rng.choice(["enterprise", "mid_market", "smb"])}
        domain = name.split()[0].lower() + ".example.com"
        for person in rng.sample(CRM_PEOPLE, rng.randint(1, 2)):
            cid = f"CT-{200 + len(contacts)}"
            contacts[cid] = {"account_id": aid, "name": person, "email": f"{person.split()[0].lower()}@{domain}",
                             "title": rng.choice(CRM_TITLES)}
    deals, activities = {}, {}
    names = ["renewal", "expansion", "pilot", "platform licence", "support upgrade"]
    for j in range(10):
        aid = rng.choice(sorted(accounts))
        stage = rng.choice([s for s, _ in CRM_STAGES])
        closed = stage.startswith("closed")
        delta = -rng.randint(1, 60) if closed else rng.randint(5, 100)
        acct_contacts = sorted(c for c, v in contacts.items() if v["account_id"] == aid)
        did = f"DL-{300 + j}"
        deals[did] = {"account_id": aid, "name": f"{accounts[aid]['name']} {rng.choice(names)}",
                      "amount_cents": rng.randint(5, 120) * 100000, "stage": stage,
                      "close_date": (today + datetime.timedelta(days=delta)).isoformat(),
                      "owner_rep_id": accounts[aid]["owner_rep_id"],
                      "primary_contact_id": rng.choice(acct_contacts) if stage not in ("prospecting", "qualification") else None,
                      "lost_reason": "price" if stage == "closed_lost" else None}
        if rng.random() < 0.6:
            aid2 = f"AC-{len(activities) + 1}"
            activities[aid2] = {"deal_id": did, "kind": rng.choice(["call", "email", "meeting"]),
                                "note": "discussed timeline and budget", "contact_id": None,
                                "date": (today - datetime.timedelta(days=rng.randint(1, 20))).isoformat()}
    return {"today": today.isoformat(), "stages": [{"name": s, "probability": p} for s, p in CRM_STAGES],
            "reps": reps, "accounts": accounts, "contacts": contacts, "deals": deals, "activities": activities,
            "next_contact": 200 + len(contacts), "next_deal": 310, "next_activity": len(activities) + 1}
