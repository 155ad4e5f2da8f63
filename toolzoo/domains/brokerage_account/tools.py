from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool


def _account(state, account_id):
    if account_id not in state["accounts"]:
        raise ToolFailure("account_not_found", f"no brokerage account {account_id}; look it up with find_brokerage_accounts")
    return state["accounts"][account_id]


def _quote(state, symbol):
    sym = symbol.strip().upper()
    if sym not in state["quotes"]:
        raise ToolFailure("unknown_symbol", f"no listed stock {symbol}; known symbols: {', '.join(sorted(state['quotes']))}")
    return sym, state["quotes"][sym]


def _open_orders(state, account_id):
    return [o for o in state["orders"].values() if o["account_id"] == account_id and o["status"] == "open"]


def _reserved_cash(state, account_id):
    return sum(o["limit_price_cents"] * o["quantity"] for o in _open_orders(state, account_id) if o["side"] == "buy")


def _reserved_shares(state, account_id, symbol):
    return sum(o["quantity"] for o in _open_orders(state, account_id) if o["side"] == "sell" and o["symbol"] == symbol)


@tool(errors={"customer_not_found": "no account has this email"})
def find_brokerage_accounts(state, email: str) -> dict:
    """Find the brokerage accounts owned by the customer with this email.

    Args:
        email: the account holder's email, e.g. "investor101@example.com".
    """
    found = [{"account_id": aid, "owner": a["owner"], "status": a["status"]}
             for aid, a in sorted(state["accounts"].items()) if a["email"].lower() == email.strip().lower()]
    if not found:
        raise ToolFailure("customer_not_found", f"no brokerage account with email {email}; ask the customer to check it")
    return {"accounts": found}


@tool(errors={"account_not_found": "unknown account id"})
def get_brokerage_account(state, account_id: str) -> dict:
    """Show an account: status, cash (total, reserved by open buy orders, available) and positions at last price.

    Args:
        account_id: the account id, e.g. "A-101".
    """
    a = _account(state, account_id)
    reserved = _reserved_cash(state, account_id)
    positions = []
    for sym, qty in sorted(a["positions"].items()):
        last = state["quotes"][sym]["last_cents"]
        positions.append({"symbol": sym, "quantity": qty, "reserved_for_sell_orders": _reserved_shares(state, account_id, sym),
                          "last_cents": last, "market_value_cents": last * qty})
    return {"account_id": account_id, "owner": a["owner"], "status": a["status"], "cash_cents": a["cash_cents"],
            "reserved_cash_cents": reserved, "available_cash_cents": a["cash_cents"] - reserved, "positions": positions,
            "total_value_cents": a["cash_cents"] + sum(p["market_value_cents"] for p in positions)}


@tool(errors={"unknown_symbol": "no such listed stock"})
def get_stock_quote(state, symbol: str) -> dict:
    """Get the current quote for a stock: last, bid and ask prices in cents, and whether trading is halted.

    Args:
        symbol: the ticker symbol, e.g. "ACME".
    """
    sym, q = _quote(state, symbol)
    return {"symbol": sym, **q}


@tool(errors={"account_not_found": "unknown account id"})
def list_stock_orders(state, account_id: str, status: Literal["open", "filled", "cancelled", "any"] = "any") -> dict:
    """List an account's stock orders, optionally only those with one status.

    Args:
        account_id: the account id.
        status: only orders with this status; "any" for all.
    """
    _account(state, account_id)
    out = [{"order_id": oid, **o} for oid, o in sorted(state["orders"].items())
           if o["account_id"] == account_id and status in ("any", o["status"])]
    return {"orders": out}


@tool(effect="write", errors={
    "account_not_found": "unknown account id",
    "unknown_symbol": "no such listed stock",
    "trading_halted": "trading in this stock is halted",
    "account_restricted": "restricted accounts may only sell",
    "limit_price_required": "limit orders need limit_price_cents",
    "limit_price_not_allowed": "market orders take no limit price",
    "insufficient_funds": "not enough available cash for the buy",
    "insufficient_shares": "not enough unreserved shares for the sell",
})
def place_stock_order(
    state,
    account_id: str,
    symbol: str,
    side: Literal["buy", "sell"],
    quantity: Annotated[int, {"minimum": 1, "maximum": 10000}],
    order_type: Literal["market", "limit"],
    limit_price_cents: Annotated[int | None, {"minimum": 1}] = None,
) -> dict:
    """Place a stock order. Market orders fill now at the ask (buy) or bid (sell). Limit orders fill now if
    the limit is marketable, otherwise they stay open and reserve cash (buy) or shares (sell).

    Args:
        account_id: the account placing the order.
        symbol: the ticker symbol, e.g. "ACME".
        side: "buy" or "sell".
        quantity: number of shares, 1 to 10000.
        order_type: "market" or "limit".
        limit_price_cents: the limit price per share in cents; required for limit orders, omitted for market orders.
    """
    a = _account(state, account_id)
    sym, q = _quote(state, symbol)
    if q["halted"]:
        raise ToolFailure("trading_halted", f"trading in {sym} is halted; no orders can be placed until it resumes")
    if side == "buy" and a["status"] == "restricted":
        raise ToolFailure("account_restricted", f"account {account_id} is restricted: only sell orders are allowed; the customer must contact compliance")
    if order_type == "limit" and limit_price_cents is None:
        raise ToolFailure("limit_price_required", "a limit order needs limit_price_cents")
    if order_type == "market" and limit_price_cents is not None:
        raise ToolFailure("limit_price_not_allowed", "market orders take no limit price; omit limit_price_cents or use a limit order")
    if side == "buy":
        fills = order_type == "market" or limit_price_cents >= q["ask_cents"]
        price = q["ask_cents"] if fills else limit_price_cents
        available = a["cash_cents"] - _reserved_cash(state, account_id)
        if price * quantity > available:
            raise ToolFailure("insufficient_funds", f"the buy needs {price * quantity} cents but only {available} cents are available; reduce the quantity or deposit cash")
    else:
        fills = order_type == "market" or limit_price_cents <= q["bid_cents"]
        price = q["bid_cents"] if fills else limit_price_cents
        free = a["positions"].get(sym, 0) - _reserved_shares(state, account_id, sym)
        if quantity > free:
            raise ToolFailure("insufficient_shares", f"only {free} unreserved shares of {sym} can be sold")
    oid = f"SO-{state['next_order_no']}"
    state["next_order_no"] += 1
    order = {"account_id": account_id, "symbol": sym, "side": side, "quantity": quantity, "order_type": order_type,
             "limit_price_cents": limit_price_cents, "status": "filled" if fills else "open",
             "fill_price_cents": price if fills else None}
    state["orders"][oid] = order
    if fills:
        if side == "buy":
            a["cash_cents"] -= price * quantity
            a["positions"][sym] = a["positions"].get(sym, 0) + quantity
        else:
            a["cash_cents"] += price * quantity
            a["positions"][sym] -= quantity
            if a["positions"][sym] == 0:
                del a["positions"][sym]
    return {"order_id": oid, **order, "cash_cents": a["cash_cents"]}


@tool(effect="write", errors={"stock_order_not_found": "unknown order id", "order_not_open": "only open orders can be cancelled"})
def cancel_stock_order(state, order_id: str) -> dict:
    """Cancel an open (unfilled) limit order; releases the cash or shares it reserved.

    Args:
        order_id: the order to cancel, e.g. "SO-5001".
    """
    if order_id not in state["orders"]:
        raise ToolFailure("stock_order_not_found", f"no stock order {order_id}; list them with list_stock_orders")
    o = state["orders"][order_id]
    if o["status"] != "open":
        raise ToolFailure("order_not_open", f"order {order_id} is {o['status']}; only open orders can be cancelled")
    o["status"] = "cancelled"
    return {"order_id": order_id, "status": "cancelled"}


@tool(effect="write", errors={"account_not_found": "unknown account id"})
def deposit_brokerage_cash(state, account_id: str, amount_cents: Annotated[int, {"minimum": 100, "maximum": 2500000}]) -> dict:
    """Deposit cash into a brokerage account from the customer's linked bank account.

    Args:
        account_id: the account to credit.
        amount_cents: the amount in cents, from 100 ($1) to 2500000 ($25,000).
    """
    a = _account(state, account_id)
    a["cash_cents"] += amount_cents
    return {"account_id": account_id, "cash_cents": a["cash_cents"]}


@tool(effect="write", errors={"account_not_found": "unknown account id",
                              "insufficient_funds": "more than the available cash",
                              "withdrawal_limit_exceeded": "over the daily withdrawal limit"})
def withdraw_brokerage_cash(state, account_id: str, amount_cents: Annotated[int, {"minimum": 100}]) -> dict:
    """Withdraw available cash to the customer's linked bank account.

    Args:
        account_id: the account to debit.
        amount_cents: the amount in cents, at least 100.
    """
    a = _account(state, account_id)
    available = a["cash_cents"] - _reserved_cash(state, account_id)
    if amount_cents > available:
        raise ToolFailure("insufficient_funds", f"only {available} cents are available to withdraw (open buy orders reserve the rest)")
    left = a["daily_withdrawal_limit_cents"] - a["withdrawn_today_cents"]
    if amount_cents > left:
        raise ToolFailure("withdrawal_limit_exceeded", f"only {left} cents more can be withdrawn today; try again tomorrow for the rest")
    a["cash_cents"] -= amount_cents
    a["withdrawn_today_cents"] += amount_cents
    return {"account_id": account_id, "cash_cents": a["cash_cents"], "withdrawn_today_cents": a["withdrawn_today_cents"]}
