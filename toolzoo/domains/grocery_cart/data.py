import random

GROCERY_PRODUCTS = [
    ("milk 1l", "dairy", 129), ("greek yoghurt", "dairy", 249), ("cheddar 200g", "dairy", 389),
    ("sourdough loaf", "bakery", 349), ("croissants 4pk", "bakery", 299), ("bananas 1kg", "produce", 119),
    ("apples 6pk", "produce", 259), ("spinach 250g", "produce", 179), ("avocados 2pk", "produce", 299),
    ("pasta 500g", "pantry", 149), ("olive oil 500ml", "pantry", 699), ("coffee beans 250g", "pantry", 899),
    ("red wine 75cl", "alcohol", 1099), ("lager 6pk", "alcohol", 799), ("chicken breast 500g", "meat", 549),
    ("salmon fillets", "fish", 799),
]
GROCERY_NAMES = ["Ana Silva", "Ben Okafor", "Chen Lee", "Dara Novak", "Eli Haddad", "Fatima Kim"]


def seed(rng: random.Random) -> dict:
    products = {}
    for i, (name, cat, price) in enumerate(GROCERY_PRODUCTS):
        products[f"SKU-{100 + i}"] = {
            "name": name, "category": cat, "price_cents": price + rng.choice([0, 0, 10, -10, 20]),
            "stock": rng.choice([0, 2, 5, 8, 15, 30]), "max_per_order": rng.choice([6, 10, 12]),
            "age_restricted": cat == "alcohol",
        }
    customers = {}
    for i, name in enumerate(GROCERY_NAMES):
        cart = []
        for sku in rng.sample(sorted(products), rng.randint(0, 3)):
            if products[sku]["stock"] > 0:
                cart.append({"sku": sku, "qty": 1})
        customers[f"G-{100 + i}"] = {"name": name, "member": rng.random() < 0.5, "cart": cart,
                                    "coupon": None, "slot_id": None}
    coupons = {
        "WELCOME5": {"kind": "fixed", "value": 500, "min_subtotal_cents": 3000, "category": None, "members_only": False, "expired": False},
        "FRESH10": {"kind": "percent", "value": 10, "min_subtotal_cents": 0, "category": "produce", "members_only": False, "expired": False},
        "MEMBER15": {"kind": "percent", "value": 15, "min_subtotal_cents": 2000, "category": None, "members_only": True, "expired": False},
        "SPRING20": {"kind": "percent", "value": 20, "min_subtotal_cents": 0, "category": None, "members_only": False, "expired": True},
    }
    slots = {}
    for d, day in enumerate(["2024-06-11", "2024-06-12"]):
        for w, window in enumerate(["08:00-10:00", "12:00-14:00", "18:00-20:00"]):
            cap = rng.choice([2, 3, 4])
            slots[f"S-{d + 1}{w + 1}"] = {"day": day, "window": window, "capacity": cap,
                                        "booked": rng.randint(0, cap), "fee_cents": rng.choice([199, 299, 399])}
    return {
        "rules": {"min_order_cents": 1500, "free_delivery_over_cents": 6000},
        "products": products, "customers": customers, "coupons": coupons, "slots": slots,
        "orders": {}, "next_order": 5000 + rng.randint(0, 99) * 10,
    }
