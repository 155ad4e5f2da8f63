"""A retail brokerage desk: cash, stock positions, quotes, market and limit orders, cancellations."""

CATEGORY = "financial_trading"
DESCRIPTION = "Customer support for a stock brokerage: account cash and positions, quotes, placing and cancelling orders."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["place_stock_order", "cancel_stock_order"],
     "message": "the order gateway timed out; the order was NOT sent, check list_stock_orders and retry"},
    {"kind": "rate_limit", "tools": ["get_stock_quote"], "message": "market data is rate limited; wait a moment and retry"},
    {"kind": "partial", "tools": ["list_stock_orders"]},
]
