"""crypto_wallet: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness

ETH_ADDR = "0x" + "ab" * 20
BTC_ADDR = "bc1q" + "qpzry9x8gf2tvdw0s3jn54khce6mua7l"[:32] + "qqqqqq"


@pytest.fixture(scope="module")
def h():
    with DomainHarness("crypto_wallet") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _wallet(h, status="active"):
    return next(wid for wid, w in sorted(h.state()["wallets"].items()) if w["status"] == status)


def _entry(h, wid):
    return next((eid, e) for eid, e in sorted(h.state()["address_book"].items()) if e["wallet_id"] == wid)


def _pair(h, same_owner=True, active=True):
    ws = h.state()["wallets"]
    for a in sorted(ws):
        for b in sorted(ws):
            if a != b and (ws[a]["email"] == ws[b]["email"]) == same_owner and \
                    (not active or ws[a]["status"] == ws[b]["status"] == "active"):
                return a, b
    raise AssertionError("no such wallet pair in the seed")


def test_list_owner_wallets(h):
    r = h.ok("list_owner_wallets", {"email": "Holder100@example.com"})
    assert [w["wallet_id"] for w in r["wallets"]] == ["W-200", "W-201"]
    h.err("list_owner_wallets", {"email": "nobody@example.com"}, code="owner_not_found")


def test_get_wallet_balance(h):
    w = h.state()["wallets"]["W-200"]
    r = h.ok("get_wallet_balance", {"wallet_id": "W-200"})
    assert {b["asset"]: b["amount"] for b in r["balances"]} == w["balances"]
    assert r["send_limit_left_usd_cents"] == w["daily_limit_usd_cents"]
    h.err("get_wallet_balance", {"wallet_id": "W-1"}, code="wallet_not_found")


def test_estimate_transfer_fee(h):
    fees = h.state()["assets"]["ETH"]["fees"]
    r = h.ok("estimate_transfer_fee", {"asset": "ETH", "amount": 0.5, "speed": "fast"})
    assert r["fee"] == fees["fast"] and r["total_debited"] == pytest.approx(0.5 + fees["fast"])
    h.err("estimate_transfer_fee", {"asset": "USDC", "amount": 1.0}, code="amount_below_minimum")
    h.err("estimate_transfer_fee", {"asset": "DOGE", "amount": 1.0}, kind="invalid_arguments")
    h.err("estimate_transfer_fee", {"asset": "ETH", "amount": 0}, kind="invalid_arguments")


def test_send_crypto(h):
    wid = _wallet(h)
    eid, e = _entry(h, wid)
    before = h.state()
    asset = e["asset"]
    amount = before["assets"][asset]["min_send"]
    fee = before["assets"][asset]["fees"]["standard"]
    r = h.ok("send_crypto", {"wallet_id": wid, "asset": asset, "amount": amount, "to_address": e["address"]})
    after = h.state()
    assert after["wallets"][wid]["balances"][asset] == pytest.approx(before["wallets"][wid]["balances"][asset] - amount - fee)
    assert after["wallets"][wid]["sent_today_usd_cents"] > 0
    tx = after["transactions"][r["transaction_id"]]
    assert tx["type"] == "send" and tx["status"] == "pending" and tx["counterparty"] == e["address"]
    txs = h.ok("list_wallet_transactions", {"wallet_id": wid, "limit": 1})["transactions"]
    assert txs[0]["transaction_id"] == r["transaction_id"]


def test_send_crypto_errors(h):
    wid = _wallet(h)
    eid, e = _entry(h, wid)
    asset, addr = e["asset"], e["address"]
    base = {"wallet_id": wid, "asset": asset, "amount": h.state()["assets"][asset]["min_send"], "to_address": addr}
    before = h.state()
    h.err("send_crypto", {**base, "wallet_id": "W-1"}, code="wallet_not_found")
    frozen = _wallet(h, "frozen")
    h.err("send_crypto", {**base, "wallet_id": frozen}, code="wallet_frozen")
    h.err("send_crypto", {**base, "amount": base["amount"] / 10}, code="amount_below_minimum")
    h.err("send_crypto", {**base, "to_address": ETH_ADDR if asset == "BTC" else BTC_ADDR}, code="address_not_in_book")
    h.err("send_crypto", {**base, "amount": before["wallets"][wid]["balances"][asset]}, code="insufficient_balance")
    h.err("send_crypto", {**base, "speed": "instant"}, kind="invalid_arguments")
    assert h.state() == before


def test_send_crypto_daily_limit(h):
    state = h.state()
    wid, asset = next((wid, a) for wid, w in sorted(state["wallets"].items()) if w["status"] == "active"
                      for a in ("BTC", "ETH")
                      if w["balances"][a] * state["assets"][a]["usd_cents"] > w["daily_limit_usd_cents"] * 1.1)
    addr = BTC_ADDR if asset == "BTC" else ETH_ADDR
    h.ok("add_address_book_entry", {"wallet_id": wid, "label": "Test", "asset": asset, "address": addr})
    limit = state["wallets"][wid]["daily_limit_usd_cents"]
    amount = round(limit * 1.05 / state["assets"][asset]["usd_cents"], 6)
    h.err("send_crypto", {"wallet_id": wid, "asset": asset, "amount": amount, "to_address": addr}, code="daily_limit_exceeded")


def test_transfer_between_wallets(h):
    a, b = _pair(h)
    before = h.state()["wallets"]
    r = h.ok("transfer_between_wallets", {"from_wallet_id": a, "to_wallet_id": b, "asset": "USDC", "amount": 10.0})
    after = h.state()
    assert after["wallets"][a]["balances"]["USDC"] == before[a]["balances"]["USDC"] - 10
    assert after["wallets"][b]["balances"]["USDC"] == before[b]["balances"]["USDC"] + 10
    assert after["transactions"][r["transaction_id"]]["type"] == "internal_out"
    assert after["wallets"][a]["sent_today_usd_cents"] == 0


def test_transfer_between_wallets_errors(h):
    a, b = _pair(h)
    base = {"from_wallet_id": a, "to_wallet_id": b, "asset": "USDC", "amount": 10.0}
    h.err("transfer_between_wallets", {**base, "to_wallet_id": "W-1"}, code="wallet_not_found")
    h.err("transfer_between_wallets", {**base, "to_wallet_id": a}, code="same_wallet")
    x, y = _pair(h, same_owner=False)
    h.err("transfer_between_wallets", {**base, "from_wallet_id": x, "to_wallet_id": y}, code="not_same_owner")
    h.err("transfer_between_wallets", {**base, "amount": 10 ** 9}, code="insufficient_balance")
    frozen = _wallet(h, "frozen")
    h.err("transfer_between_wallets", {**base, "from_wallet_id": frozen}, code="wallet_frozen")


def test_list_address_book(h):
    entries = h.ok("list_address_book", {"wallet_id": "W-200"})["entries"]
    assert entries and all(e["wallet_id"] == "W-200" for e in entries)
    h.err("list_address_book", {"wallet_id": "W-1"}, code="wallet_not_found")


def test_add_address_book_entry(h):
    r = h.ok("add_address_book_entry", {"wallet_id": "W-200", "label": "Cousin", "asset": "ETH", "address": ETH_ADDR})
    assert h.state()["address_book"][r["entry_id"]]["address"] == ETH_ADDR
    h.err("add_address_book_entry", {"wallet_id": "W-200", "label": "Again", "asset": "ETH", "address": ETH_ADDR.upper().replace("0X", "0x")},
          code="duplicate_address")
    h.err("add_address_book_entry", {"wallet_id": "W-200", "label": "Bad", "asset": "BTC", "address": ETH_ADDR}, code="invalid_address")
    h.err("add_address_book_entry", {"wallet_id": "W-1", "label": "X", "asset": "ETH", "address": ETH_ADDR}, code="wallet_not_found")
    h.err("add_address_book_entry", {"wallet_id": "W-200", "label": "", "asset": "ETH", "address": ETH_ADDR}, kind="invalid_arguments")


def test_remove_address_book_entry(h):
    eid, e = _entry(h, "W-200")
    h.ok("remove_address_book_entry", {"wallet_id": "W-200", "entry_id": eid})
    assert eid not in h.state()["address_book"]
    h.err("remove_address_book_entry", {"wallet_id": "W-200", "entry_id": eid}, code="entry_not_found")
    other, _ = _entry(h, "W-201")
    h.err("remove_address_book_entry", {"wallet_id": "W-200", "entry_id": other}, code="entry_not_found")


def test_list_wallet_transactions(h):
    state = h.state()
    txs = h.ok("list_wallet_transactions", {"wallet_id": "W-200", "limit": 50})["transactions"]
    assert {t["transaction_id"] for t in txs} == {k for k, t in state["transactions"].items() if t["wallet_id"] == "W-200"}
    assert [t["seq"] for t in txs] == sorted((t["seq"] for t in txs), reverse=True)
    usdc = h.ok("list_wallet_transactions", {"wallet_id": "W-200", "asset": "USDC"})["transactions"]
    assert all(t["asset"] == "USDC" for t in usdc)
    h.err("list_wallet_transactions", {"wallet_id": "W-1"}, code="wallet_not_found")
    h.err("list_wallet_transactions", {"wallet_id": "W-200", "limit": 0}, kind="invalid_arguments")
