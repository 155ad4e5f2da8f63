"""An online shop's order desk: look up customers and orders, cancel, return, change addresses."""

CATEGORY = "ecommerce"
DESCRIPTION = "Customer service for an online shop: orders, cancellations, returns and address changes."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["cancel_order", "return_items"], "message": "the order service timed out; nothing changed, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_customer_orders"]},
]
