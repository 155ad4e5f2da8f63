import random

FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun"]
LAST = ["Silva", "Okafor", "Lee", "Novak", "Haddad", "Kim", "Rossi", "Sato"]
HEX = "0123456789abcdef"
B32 = "023456789acdefghjklmnpqrstuvwxyz"
LABELS = ["Exchange deposit", "Cold storage", "Mum", "Landlord", "Payroll", "Savings vault", "Friend"]


def _addr(rng, asset):
    if asset == "BTC":
        return "bc1q" + "".join(rng.choice(B32) for _ in range(38))
    return "0x" + "".join(rng.choice(HEX) for _ in range(40))


def seed(rng: random.Random) -> dict:
    assets = {
        "BTC": {"usd_cents": rng.randint(5500000, 7000000), "min_send": 0.0001,
                "fees": {"slow": 0.00002, "standard": 0.00005, "fast": 0.0001}},
        "ETH": {"usd_cents": rng.randint(250000, 400000), "min_send": 0.001,
                "fees": {"slow": 0.0004, "standard": 0.0008, "fast": 0.0015}},
        "USDC": {"usd_cents": 100, "min_send": 5.0, "fees": {"slow": 0.5, "standard": 1.0, "fast": 2.5}},
    }
    owners = [{"name": f"{rng.choice(FIRST)} {rng.choice(LAST)}", "email": f"holder{100 + i}@example.com"} for i in range(3)]
    wallets = {}
    frozen = rng.randrange(6)
    for i in range(6):
        owner = owners[i // 2]
        wallets[f"W-{200 + i}"] = {
            "owner": owner["name"], "email": owner["email"],
            "label": "Main" if i % 2 == 0 else "Savings",
            "status": "frozen" if i == frozen else "active",
            "balances": {"BTC": round(rng.uniform(0.01, 0.8), 8), "ETH": round(rng.uniform(0.1, 6.0), 8),
                         "USDC": float(rng.randint(50, 5000))},
            "daily_limit_usd_cents": rng.choice([200000, 500000, 1000000]),
            "sent_today_usd_cents": 0,
        }
    book, txs = {}, {}
    n = 0
    for wid in wallets:
        for asset in rng.sample(sorted(assets), 2):
            book[f"AB-{len(book) + 1}"] = {"wallet_id": wid, "label": rng.choice(LABELS), "asset": asset,
                                           "address": _addr(rng, asset)}
        for _ in range(rng.randint(1, 3)):
            asset = rng.choice(sorted(assets))
            n += 1
            txs[f"TX-{n:04d}"] = {"seq": n, "wallet_id": wid, "type": "receive", "asset": asset,
                                  "amount": round(rng.uniform(0.001, 0.1), 8) if asset != "USDC" else float(rng.randint(10, 300)),
                                  "fee": 0.0, "counterparty": _addr(rng, asset), "status": "confirmed"}
    return {"assets": assets, "wallets": wallets, "address_book": book, "transactions": txs, "next_tx_no": n + 1,
            "next_entry_no": len(book) + 1}
