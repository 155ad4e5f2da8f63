import random

FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun"]
LAST = ["Silva", "Okafor", "Lee", "Novak", "Haddad", "Kim", "Rossi", "Sato"]
STOCKS = [("ACME", "Acme Corp", 12500), ("BOLT", "Bolt Energy", 4200), ("CRUX", "Crux Biotech", 8800),
          ("DYNO", "Dyno Motors", 23100), ("ECHO", "Echo Media", 1950), ("FERN", "Fern Foods", 6700),
          ("GLOW", "Glow Semiconductors", 31500)]


def seed(rng: random.Random) -> dict:
    quotes = {}
    for sym, name, base in STOCKS:
        last = int(base * rng.uniform(0.85, 1.15))
        spread = max(1, last // 500)
        quotes[sym] = {"name": name, "last_cents": last, "bid_cents": last - spread, "ask_cents": last + spread,
                       "halted": False}
    quotes[rng.choice([s[0] for s in STOCKS])]["halted"] = True
    accounts = {}
    restricted = rng.randrange(5)
    for i in range(5):
        aid = f"A-{100 + i}"
        positions = {}
        for sym, _, _ in rng.sample(STOCKS, rng.randint(2, 3)):
            positions[sym] = rng.randint(5, 60)
        accounts[aid] = {
            "owner": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
            "email": f"investor{100 + i}@example.com",
            "status": "restricted" if i == restricted else "active",
            "cash_cents": rng.randint(200, 5000) * 100,
            "positions": positions,
            "withdrawn_today_cents": 0,
            "daily_withdrawal_limit_cents": 1000000,
        }
    orders = {}
    n = 0
    for aid, acct in accounts.items():
        for _ in range(rng.randint(1, 2)):
            sym = rng.choice(sorted(acct["positions"]))
            q = quotes[sym]
            kind = rng.choice(["filled", "open_sell", "cancelled"])
            oid = f"SO-{5000 + n}"
            n += 1
            if kind == "open_sell":
                qty = max(1, acct["positions"][sym] // 4)
                orders[oid] = {"account_id": aid, "symbol": sym, "side": "sell", "quantity": qty, "order_type": "limit",
                               "limit_price_cents": q["ask_cents"] + rng.randint(50, 400), "status": "open",
                               "fill_price_cents": None}
            else:
                qty = rng.randint(1, 5)
                limit = None if kind == "filled" else q["bid_cents"] - rng.randint(100, 900)
                orders[oid] = {"account_id": aid, "symbol": sym, "side": "buy", "quantity": qty,
                               "order_type": "market" if kind == "filled" else "limit", "limit_price_cents": limit,
                               "status": kind, "fill_price_cents": q["ask_cents"] if kind == "filled" else None}
    return {"quotes": quotes, "accounts": accounts, "orders": orders, "next_order_no": 5000 + n}
