import random

PM_FIRST = ["Amira", "Bruno", "Carla", "Dmitri", "Esi", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kemi", "Lars"]
PM_LAST = ["Adeyemi", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat", "Ito", "Jensen"]
PM_BUILDINGS = ["Maple Court", "Harbor View", "Cedar Flats"]
PM_TRADES = ["plumbing", "electrical", "hvac", "appliance", "general"]
PM_ISSUES = {
    "plumbing": ["kitchen sink drains slowly", "leaking shower head", "toilet keeps running"],
    "electrical": ["bedroom outlet has no power", "hallway light flickers", "breaker trips when kettle is on"],
    "hvac": ["heating does not warm the living room", "air conditioner is noisy", "thermostat display is blank"],
    "appliance": ["dishwasher does not drain", "fridge is not cold enough", "oven door will not close"],
    "general": ["front door lock is stiff", "window latch is broken", "cabinet hinge came off"],
}
PM_CONTRACTOR_FIRMS = ["QuickFix", "ProServe", "BlueLine", "Apex", "Metro", "Reliable", "Summit"]


def seed(rng: random.Random) -> dict:
    units, tenants, contractors, work_orders, invoices = {}, {}, {}, {}, {}
    names = rng.sample([f"{f} {s}" for f in PM_FIRST for s in PM_LAST], 8)
    for i in range(10):
        uid = f"U-{101 + i}"
        units[uid] = {
            "building": PM_BUILDINGS[i % 3],
            "unit_number": f"{1 + i // 3}{'ABC'[i % 3]}",
            "bedrooms": rng.randint(1, 3),
            "tenant_id": None,
        }
    for i in range(8):
        tid = f"T-{201 + i}"
        uid = f"U-{101 + i}"
        first = names[i].split()[0].lower()
        tenants[tid] = {"name": names[i], "email": f"{first}.{201 + i}@tenantmail.example",
                        "phone": f"+1-555-{rng.randint(1000, 9999)}", "unit_id": uid}
        units[uid]["tenant_id"] = tid
    for i in range(7):
        kid = f"K-{301 + i}"
        trade = PM_TRADES[i % 5]
        contractors[kid] = {
            "name": f"{PM_CONTRACTOR_FIRMS[i]} {trade.title()}",
            "trade": trade,
            "hourly_rate_cents": rng.choice([6500, 7500, 8500, 9500]),
            "available": i != 5,  # one contractor is on leave
            "max_active_jobs": 2,
        }
    # fixed scenarios, rng-varied details
    scenario = [
        ("U-101", "plumbing", "open", None),
        ("U-102", "electrical", "open", None),
        ("U-103", "hvac", "assigned", "K-303"),
        ("U-104", "appliance", "completed", "K-304"),
        ("U-105", "general", "completed", "K-305"),
        ("U-106", "plumbing", "assigned", "K-301"),
        ("U-107", "general", "cancelled", None),
        ("U-108", "appliance", "open", None),
    ]
    for j, (uid, trade, status, kid) in enumerate(scenario):
        wid = f"WO-{5001 + j}"
        done = status == "completed"
        work_orders[wid] = {
            "unit_id": uid,
            "tenant_id": units[uid]["tenant_id"],
            "category": trade,
            "description": rng.choice(PM_ISSUES[trade]),
            "priority": rng.choice(["low", "normal", "normal", "urgent"]),
            "status": status,
            "contractor_id": kid,
            "created_on": f"2025-03-0{1 + rng.randrange(8)}",
            "hours": rng.choice([1.0, 1.5, 2.0, 3.0]) if done else None,
            "materials_cents": rng.choice([0, 1200, 4500]) if done else 0,
            "tenant_damage": bool(j == 4) if done else False,
            "completion_notes": "work finished" if done else "",
            "invoice_id": None,
        }
    wid = "WO-5004"
    wo = work_orders[wid]
    amount = int(round(wo["hours"] * contractors["K-304"]["hourly_rate_cents"])) + wo["materials_cents"]
    invoices["INV-7001"] = {"work_order_id": wid, "contractor_id": "K-304", "bill_to": "owner",
                            "amount_cents": amount, "status": "unpaid", "paid_cents": 0}
    wo["invoice_id"] = "INV-7001"
    return {"today": "2025-03-10", "units": units, "tenants": tenants, "contractors": contractors,
            "work_orders": work_orders, "invoices": invoices}
