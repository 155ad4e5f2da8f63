import datetime
import random

TIX_EVENTS = [("The Lumen Quartet", "Harbour Hall"), ("Comedy Night Live", "Old Theatre"),
              ("Neon Skyline Tour", "Arena North"), ("Swan Lake", "Opera House"), ("Indie Fest Day 1", "Riverside Park")]
TIX_PEOPLE = ["Ana Silva", "Ben Okafor", "Chen Lee", "Dara Novak", "Eli Haddad", "Fatima Kim"]


def seed(rng: random.Random) -> dict:
    today = datetime.date(2024, 7, 1)
    customers = {f"K-{100 + i}": {"name": n, "email": f"fan{100 + i}@example.com", "wallet_cents": rng.choice([0, 2500, 10000])}
                 for i, n in enumerate(TIX_PEOPLE)}
    events, tickets = {}, {}
    n_ticket = 1
    for i, (name, venue) in enumerate(rng.sample(TIX_EVENTS, 3)):
        eid = f"E-{i + 1}"
        front, back = rng.choice([6000, 8500, 12000]), rng.choice([3500, 4500])
        seats = {}
        for row, section, price in (("A", "front", front), ("B", "front", front), ("C", "back", back), ("D", "back", back)):
            for k in range(1, 4):
                seats[f"{row}{k}"] = {"section": section, "price_cents": price, "status": "available", "ticket_id": None}
        events[eid] = {"name": name, "venue": venue,
                       "date": (today + datetime.timedelta(days=rng.choice([3, 12, 30, 45]))).isoformat(),
                       "status": "on_sale", "per_customer_limit": rng.choice([2, 4]),
                       "refundable": rng.random() < 0.7, "transferable": rng.random() < 0.8, "seats": seats}
        for seat in rng.sample(sorted(seats), 4):
            owner = rng.choice(sorted(customers))
            if sum(1 for t in tickets.values() if t["owner"] == owner and t["event_id"] == eid) >= events[eid]["per_customer_limit"]:
                continue
            tid = f"TK-{n_ticket}"
            n_ticket += 1
            tickets[tid] = {"event_id": eid, "seat": seat, "owner": owner, "purchaser": owner,
                            "price_cents": seats[seat]["price_cents"], "payment_method": "card", "status": "valid", "transfers": 0}
            seats[seat].update(status="sold", ticket_id=tid)
    return {"today": today.isoformat(), "rules": {"max_transfers": 1, "refund_cutoff_days": 7},
            "customers": customers, "events": events, "holds": {}, "tickets": tickets,
            "next_hold": 1, "next_ticket": n_ticket}
