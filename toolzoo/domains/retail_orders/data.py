import random

FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun"]
LAST = ["Silva", "Okafor", "Lee", "Novak", "Haddad", "Kim", "Rossi", "Sato"]
PRODUCTS = [("P-100", "desk lamp", 2999), ("P-101", "office chair", 15900), ("P-102", "usb hub", 1999),
            ("P-103", "monitor arm", 4999), ("P-104", "keyboard", 7900), ("P-105", "mouse pad", 999)]
CITIES = ["Lisbon", "Lagos", "Osaka", "Zagreb", "Austin"]


def seed(rng: random.Random) -> dict:
    customers, orders = {}, {}
    for i in range(6):
        cid = f"C-{100 + i}"
        customers[cid] = {
            "name": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
            "email": f"user{100 + i}@example.com",
            "address": f"{rng.randint(1, 99)} Main St, {rng.choice(CITIES)}",
        }
    for j in range(12):
        oid = f"O-{1000 + j}"
        items = []
        for sku, name, price in rng.sample(PRODUCTS, rng.randint(1, 3)):
            items.append({"sku": sku, "name": name, "unit_price_cents": price, "qty": rng.randint(1, 2)})
        orders[oid] = {
            "customer_id": f"C-{100 + rng.randrange(6)}",
            "status": rng.choice(["pending", "pending", "shipped", "delivered"]),
            "items": items,
            "refunded_cents": 0,
        }
    return {"customers": customers, "orders": orders}
