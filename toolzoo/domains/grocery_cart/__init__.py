"""An online grocery shop: products with stock, shopping carts, coupons with rules, delivery slots and checkout."""

CATEGORY = "ecommerce"
DESCRIPTION = "Online grocery shopping assistant: find products, manage a customer's cart, apply coupons, book a delivery slot and check out."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["checkout_grocery_cart"], "message": "the payment service timed out; nothing was charged, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["search_grocery_products", "list_grocery_delivery_slots"]},
]
