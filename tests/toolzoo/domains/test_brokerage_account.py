"""brokerage_account: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("brokerage_account") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _account(h, status="active"):
    return next(aid for aid, a in sorted(h.state()["accounts"].items()) if a["status"] == status)


def _symbol(h, halted=False):
    return next(s for s, q in sorted(h.state()["quotes"].items()) if q["halted"] == halted)


def test_find_brokerage_accounts(h):
    r = h.ok("find_brokerage_accounts", {"email": "INVESTOR101@example.com"})
    assert [a["account_id"] for a in r["accounts"]] == ["A-101"]
    h.err("find_brokerage_accounts", {"email": "nobody@example.com"}, code="customer_not_found")


def test_get_brokerage_account(h):
    state = h.state()
    r = h.ok("get_brokerage_account", {"account_id": "A-100"})
    a = state["accounts"]["A-100"]
    assert r["cash_cents"] == a["cash_cents"]
    assert {p["symbol"]: p["quantity"] for p in r["positions"]} == a["positions"]
    assert r["available_cash_cents"] == r["cash_cents"] - r["reserved_cash_cents"]
    h.err("get_brokerage_account", {"account_id": "A-999"}, code="account_not_found")
    h.err("get_brokerage_account", {}, kind="invalid_arguments")


def test_get_stock_quote(h):
    sym = _symbol(h)
    q = h.ok("get_stock_quote", {"symbol": sym.lower()})
    assert q["symbol"] == sym and q["bid_cents"] < q["ask_cents"]
    h.err("get_stock_quote", {"symbol": "ZZZZ"}, code="unknown_symbol")


def test_list_stock_orders(h):
    state = h.state()
    listed = h.ok("list_stock_orders", {"account_id": "A-100"})["orders"]
    assert {o["order_id"] for o in listed} == {oid for oid, o in state["orders"].items() if o["account_id"] == "A-100"}
    open_ = h.ok("list_stock_orders", {"account_id": "A-100", "status": "open"})["orders"]
    assert all(o["status"] == "open" for o in open_)
    h.err("list_stock_orders", {"account_id": "A-999"}, code="account_not_found")
    h.err("list_stock_orders", {"account_id": "A-100", "status": "pending"}, kind="invalid_arguments")


def test_place_stock_order_market_buy_and_sell(h):
    aid, sym = _account(h), _symbol(h)
    before = h.state()
    q = before["quotes"][sym]
    r = h.ok("place_stock_order", {"account_id": aid, "symbol": sym, "side": "buy", "quantity": 2, "order_type": "market"})
    assert r["status"] == "filled" and r["fill_price_cents"] == q["ask_cents"]
    after = h.state()
    assert after["accounts"][aid]["cash_cents"] == before["accounts"][aid]["cash_cents"] - 2 * q["ask_cents"]
    assert after["accounts"][aid]["positions"][sym] == before["accounts"][aid]["positions"].get(sym, 0) + 2
    assert after["orders"][r["order_id"]]["status"] == "filled"
    r = h.ok("place_stock_order", {"account_id": aid, "symbol": sym, "side": "sell", "quantity": 2, "order_type": "market"})
    assert r["fill_price_cents"] == q["bid_cents"]
    assert h.state()["accounts"][aid]["positions"].get(sym, 0) == before["accounts"][aid]["positions"].get(sym, 0)


def test_place_stock_order_open_limit_reserves_cash(h):
    aid, sym = _account(h), _symbol(h)
    q = h.state()["quotes"][sym]
    limit = q["bid_cents"] - 500
    r = h.ok("place_stock_order", {"account_id": aid, "symbol": sym, "side": "buy", "quantity": 3,
                                   "order_type": "limit", "limit_price_cents": limit})
    assert r["status"] == "open"
    acct = h.ok("get_brokerage_account", {"account_id": aid})
    assert acct["reserved_cash_cents"] >= 3 * limit
    assert h.state()["orders"][r["order_id"]]["status"] == "open"


def test_place_stock_order_errors(h):
    aid, sym = _account(h), _symbol(h)
    base = {"account_id": aid, "symbol": sym, "side": "buy", "quantity": 1, "order_type": "market"}
    before = h.state()
    h.err("place_stock_order", {**base, "account_id": "A-999"}, code="account_not_found")
    h.err("place_stock_order", {**base, "symbol": "ZZZZ"}, code="unknown_symbol")
    h.err("place_stock_order", {**base, "symbol": _symbol(h, halted=True)}, code="trading_halted")
    h.err("place_stock_order", {**base, "account_id": _account(h, "restricted")}, code="account_restricted")
    h.err("place_stock_order", {**base, "order_type": "limit"}, code="limit_price_required")
    h.err("place_stock_order", {**base, "limit_price_cents": 100}, code="limit_price_not_allowed")
    h.err("place_stock_order", {**base, "quantity": 10000}, code="insufficient_funds")
    h.err("place_stock_order", {**base, "side": "sell", "quantity": 9999}, code="insufficient_shares")
    h.err("place_stock_order", {**base, "quantity": 0}, kind="invalid_arguments")
    h.err("place_stock_order", {**base, "side": "short"}, kind="invalid_arguments")
    assert h.state() == before


def test_restricted_account_can_sell(h):
    aid = _account(h, "restricted")
    state = h.state()
    sym = next(s for s in sorted(state["accounts"][aid]["positions"]) if not state["quotes"][s]["halted"])
    r = h.ok("place_stock_order", {"account_id": aid, "symbol": sym, "side": "sell", "quantity": 1, "order_type": "market"})
    assert r["status"] == "filled"


def test_cancel_stock_order(h):
    oid = next(oid for oid, o in sorted(h.state()["orders"].items()) if o["status"] == "open")
    assert h.ok("cancel_stock_order", {"order_id": oid})["status"] == "cancelled"
    assert h.state()["orders"][oid]["status"] == "cancelled"
    h.err("cancel_stock_order", {"order_id": oid}, code="order_not_open")
    h.err("cancel_stock_order", {"order_id": "SO-1"}, code="stock_order_not_found")


def test_deposit_brokerage_cash(h):
    cash = h.state()["accounts"]["A-100"]["cash_cents"]
    assert h.ok("deposit_brokerage_cash", {"account_id": "A-100", "amount_cents": 50000})["cash_cents"] == cash + 50000
    assert h.state()["accounts"]["A-100"]["cash_cents"] == cash + 50000
    h.err("deposit_brokerage_cash", {"account_id": "A-999", "amount_cents": 50000}, code="account_not_found")
    h.err("deposit_brokerage_cash", {"account_id": "A-100", "amount_cents": 5}, kind="invalid_arguments")


def test_withdraw_brokerage_cash(h):
    aid = _account(h)
    cash = h.state()["accounts"][aid]["cash_cents"]
    h.ok("withdraw_brokerage_cash", {"account_id": aid, "amount_cents": 10000})
    a = h.state()["accounts"][aid]
    assert a["cash_cents"] == cash - 10000 and a["withdrawn_today_cents"] == 10000
    h.err("withdraw_brokerage_cash", {"account_id": aid, "amount_cents": cash * 10}, code="insufficient_funds")
    h.err("withdraw_brokerage_cash", {"account_id": "A-999", "amount_cents": 100}, code="account_not_found")
    h.ok("deposit_brokerage_cash", {"account_id": aid, "amount_cents": 2500000})
    h.err("withdraw_brokerage_cash", {"account_id": aid, "amount_cents": 1000000}, code="withdrawal_limit_exceeded")
