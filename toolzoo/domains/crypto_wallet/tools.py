import re
from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

Asset = Literal["BTC", "ETH", "USDC"]
Speed = Literal["slow", "standard", "fast"]


def _wallet(state, wallet_id):
    if wallet_id not in state["wallets"]:
        raise ToolFailure("wallet_not_found", f"no wallet {wallet_id}; list the customer's wallets with list_owner_wallets")
    return state["wallets"][wallet_id]


def _active(wallet_id, w):
    if w["status"] == "frozen":
        raise ToolFailure("wallet_frozen", f"wallet {wallet_id} is frozen; the customer must contact the security team")


def _usd_cents(state, asset, amount):
    return int(round(amount * state["assets"][asset]["usd_cents"]))


def _check_min(state, asset, amount):
    if amount < state["assets"][asset]["min_send"]:
        raise ToolFailure("amount_below_minimum", f"the minimum {asset} transfer is {state['assets'][asset]['min_send']} {asset}")


def _record(state, wallet_id, kind, asset, amount, fee, counterparty, status):
    n = state["next_tx_no"]
    state["next_tx_no"] += 1
    tx_id = f"TX-{n:04d}"
    state["transactions"][tx_id] = {"seq": n, "wallet_id": wallet_id, "type": kind, "asset": asset, "amount": amount,
                                    "fee": fee, "counterparty": counterparty, "status": status}
    return tx_id


@tool(errors={"owner_not_found": "no wallet has this email"})
def list_owner_wallets(state, email: str) -> dict:
    """List the wallets of the customer with this email.

    Args:
        email: the customer's email, e.g. "holder101@example.com".
    """
    found = [{"wallet_id": wid, "label": w["label"], "status": w["status"]}
             for wid, w in sorted(state["wallets"].items()) if w["email"].lower() == email.strip().lower()]
    if not found:
        raise ToolFailure("owner_not_found", f"no wallets for {email}; ask the customer to check the email")
    return {"owner": state["wallets"][found[0]["wallet_id"]]["owner"], "wallets": found}


@tool(errors={"wallet_not_found": "unknown wallet id"})
def get_wallet_balance(state, wallet_id: str) -> dict:
    """Show a wallet's balance per asset with its USD value, its status and what is left of today's send limit.

    Args:
        wallet_id: the wallet id, e.g. "W-201".
    """
    w = _wallet(state, wallet_id)
    balances = [{"asset": a, "amount": amt, "usd_cents": _usd_cents(state, a, amt)} for a, amt in sorted(w["balances"].items())]
    return {"wallet_id": wallet_id, "label": w["label"], "status": w["status"], "balances": balances,
            "total_usd_cents": sum(b["usd_cents"] for b in balances),
            "send_limit_left_usd_cents": w["daily_limit_usd_cents"] - w["sent_today_usd_cents"]}


@tool(errors={"amount_below_minimum": "below the asset's minimum transfer"})
def estimate_transfer_fee(state, asset: Asset, amount: Annotated[float, {"exclusiveMinimum": 0}], speed: Speed = "standard") -> dict:
    """Estimate the network fee and the total debited for sending `amount` of an asset at a given speed.

    Args:
        asset: the asset to send.
        amount: how much the recipient should receive, in whole units (e.g. 0.05 BTC).
        speed: confirmation speed; faster costs more.
    """
    _check_min(state, asset, amount)
    fee = state["assets"][asset]["fees"][speed]
    return {"asset": asset, "amount": amount, "speed": speed, "fee": fee, "total_debited": round(amount + fee, 8),
            "usd_cents": _usd_cents(state, asset, amount)}


@tool(effect="write", errors={
    "wallet_not_found": "unknown wallet id",
    "wallet_frozen": "the wallet is frozen",
    "amount_below_minimum": "below the asset's minimum transfer",
    "address_not_in_book": "the destination is not in the wallet's address book for this asset",
    "insufficient_balance": "amount plus fee exceeds the balance",
    "daily_limit_exceeded": "over the wallet's daily USD send limit",
})
def send_crypto(state, wallet_id: str, asset: Asset, amount: Annotated[float, {"exclusiveMinimum": 0}], to_address: str,
                speed: Speed = "standard") -> dict:
    """Send crypto from a wallet to an external address saved in its address book. The network fee is added
    on top of the amount. Irreversible.

    Args:
        wallet_id: the sending wallet.
        asset: the asset to send.
        amount: how much the recipient receives, in whole units.
        to_address: the destination address; must be in the wallet's address book for this asset.
        speed: confirmation speed; faster costs more.
    """
    w = _wallet(state, wallet_id)
    _active(wallet_id, w)
    _check_min(state, asset, amount)
    if not any(e["wallet_id"] == wallet_id and e["asset"] == asset and e["address"] == to_address.strip()
               for e in state["address_book"].values()):
        raise ToolFailure("address_not_in_book", f"{to_address} is not a saved {asset} address of {wallet_id}; add it with add_address_book_entry first")
    fee = state["assets"][asset]["fees"][speed]
    total = round(amount + fee, 8)
    if total > w["balances"][asset] + 1e-12:
        raise ToolFailure("insufficient_balance", f"sending {amount} {asset} costs {total} {asset} with the fee, but the balance is {w['balances'][asset]}")
    usd = _usd_cents(state, asset, amount)
    left = w["daily_limit_usd_cents"] - w["sent_today_usd_cents"]
    if usd > left:
        raise ToolFailure("daily_limit_exceeded", f"this transfer is worth {usd} USD cents but only {left} are left of today's limit")
    w["balances"][asset] = round(w["balances"][asset] - total, 8)
    w["sent_today_usd_cents"] += usd
    tx_id = _record(state, wallet_id, "send", asset, amount, fee, to_address.strip(), "pending")
    return {"transaction_id": tx_id, "status": "pending", "amount": amount, "fee": fee, "total_debited": total,
            "balance_after": w["balances"][asset]}


@tool(effect="write", errors={
    "wallet_not_found": "unknown wallet id",
    "wallet_frozen": "one of the wallets is frozen",
    "same_wallet": "source and destination are the same wallet",
    "not_same_owner": "internal transfers only between wallets of one owner",
    "insufficient_balance": "amount exceeds the balance",
})
def transfer_between_wallets(state, from_wallet_id: str, to_wallet_id: str, asset: Asset,
                             amount: Annotated[float, {"exclusiveMinimum": 0}]) -> dict:
    """Move funds between two wallets of the same owner; instant, no network fee, not counted in the send limit.

    Args:
        from_wallet_id: the wallet to debit.
        to_wallet_id: the wallet to credit.
        asset: the asset to move.
        amount: how much to move, in whole units.
    """
    src, dst = _wallet(state, from_wallet_id), _wallet(state, to_wallet_id)
    if from_wallet_id == to_wallet_id:
        raise ToolFailure("same_wallet", "choose two different wallets")
    _active(from_wallet_id, src)
    _active(to_wallet_id, dst)
    if src["email"] != dst["email"]:
        raise ToolFailure("not_same_owner", "internal transfers are only allowed between wallets of the same owner; use send_crypto to a saved address")
    if amount > src["balances"][asset] + 1e-12:
        raise ToolFailure("insufficient_balance", f"{from_wallet_id} holds only {src['balances'][asset]} {asset}")
    src["balances"][asset] = round(src["balances"][asset] - amount, 8)
    dst["balances"][asset] = round(dst["balances"][asset] + amount, 8)
    out_id = _record(state, from_wallet_id, "internal_out", asset, amount, 0.0, to_wallet_id, "confirmed")
    _record(state, to_wallet_id, "internal_in", asset, amount, 0.0, from_wallet_id, "confirmed")
    return {"transaction_id": out_id, "from_balance": src["balances"][asset], "to_balance": dst["balances"][asset]}


@tool(errors={"wallet_not_found": "unknown wallet id"})
def list_address_book(state, wallet_id: str) -> dict:
    """List the saved (whitelisted) destination addresses of a wallet.

    Args:
        wallet_id: the wallet id.
    """
    _wallet(state, wallet_id)
    return {"entries": [{"entry_id": eid, **e} for eid, e in sorted(state["address_book"].items()) if e["wallet_id"] == wallet_id]}


@tool(effect="write", errors={"wallet_not_found": "unknown wallet id", "invalid_address": "malformed address for the asset",
                              "duplicate_address": "already saved for this wallet and asset"})
def add_address_book_entry(state, wallet_id: str, label: Annotated[str, {"minLength": 1, "maxLength": 40}], asset: Asset,
                           address: str) -> dict:
    """Save a destination address to a wallet's address book so that send_crypto may use it.

    Args:
        wallet_id: the wallet id.
        label: a short name for the address, e.g. "Landlord".
        asset: which asset the address receives. BTC addresses start "bc1q"; ETH and USDC addresses are "0x" + 40 hex digits.
        address: the full address, exactly as the customer gives it.
    """
    _wallet(state, wallet_id)
    address = address.strip()
    pattern = r"^bc1q[02-9ac-hj-np-z]{38}$" if asset == "BTC" else r"^0x[0-9a-fA-F]{40}$"
    if not re.match(pattern, address):
        raise ToolFailure("invalid_address", f"{address!r} is not a valid {asset} address; ask the customer to re-check it")
    if any(e["wallet_id"] == wallet_id and e["asset"] == asset and e["address"].lower() == address.lower()
           for e in state["address_book"].values()):
        raise ToolFailure("duplicate_address", f"this {asset} address is already saved for {wallet_id}")
    eid = f"AB-{state['next_entry_no']}"
    state["next_entry_no"] += 1
    state["address_book"][eid] = {"wallet_id": wallet_id, "label": label, "asset": asset, "address": address}
    return {"entry_id": eid, "wallet_id": wallet_id, "asset": asset, "address": address}


@tool(effect="write", errors={"entry_not_found": "no such address book entry for this wallet"})
def remove_address_book_entry(state, wallet_id: str, entry_id: str) -> dict:
    """Delete a saved address from a wallet's address book.

    Args:
        wallet_id: the wallet that owns the entry.
        entry_id: the entry, e.g. "AB-3".
    """
    e = state["address_book"].get(entry_id)
    if e is None or e["wallet_id"] != wallet_id:
        raise ToolFailure("entry_not_found", f"{wallet_id} has no address book entry {entry_id}; see list_address_book")
    del state["address_book"][entry_id]
    return {"removed": entry_id}


@tool(errors={"wallet_not_found": "unknown wallet id"})
def list_wallet_transactions(state, wallet_id: str, asset: Asset | None = None,
                             limit: Annotated[int, {"minimum": 1, "maximum": 50}] = 10) -> dict:
    """List a wallet's transactions, newest first.

    Args:
        wallet_id: the wallet id.
        asset: only this asset; omit for all.
        limit: at most this many transactions (1-50).
    """
    _wallet(state, wallet_id)
    rows = [{"transaction_id": tid, **t} for tid, t in state["transactions"].items()
            if t["wallet_id"] == wallet_id and asset in (None, t["asset"])]
    rows.sort(key=lambda t: -t["seq"])
    return {"transactions": rows[:limit]}
