"""A custodial crypto wallet service: wallets, balances, fee-bearing transfers, address books, history."""

CATEGORY = "financial_trading"
DESCRIPTION = "Support desk of a custodial crypto wallet: balances, sending to whitelisted addresses with network fees, internal transfers, address book and transaction history."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["send_crypto"],
     "message": "the broadcast service timed out; the transfer was NOT sent, check list_wallet_transactions before retrying"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_wallet_transactions", "list_address_book"]},
]
