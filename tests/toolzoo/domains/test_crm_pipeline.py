"""crm_pipeline: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("crm_pipeline") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _deal(account, stage, amount, close, rep="U-1", contact=None):
    return {"account_id": account, "name": "deal", "amount_cents": amount, "stage": stage, "close_date": close,
            "owner_rep_id": rep, "primary_contact_id": contact, "lost_reason": None}


def _arrange(h, deals=None):
    """Accounts A-100 (owner U-1) and A-101; contacts CT-200 (A-100) and CT-201 (A-101); quotas 10,000,000 each."""
    s = h.state()
    s["accounts"]["A-100"]["owner_rep_id"] = "U-1"
    s["contacts"] = {"CT-200": {"account_id": "A-100", "name": "Ana Silva", "email": "ana@a100.example.com", "title": "CFO"},
                     "CT-201": {"account_id": "A-101", "name": "Ben Okafor", "email": "ben@a101.example.com", "title": "CTO"}}
    for r in s["reps"].values():
        r["quarterly_quota_cents"] = 10000000
    s["deals"], s["activities"] = deals or {}, {}
    h.sandbox.reset(s)
    return s


def _new_deal(h, account="A-100"):
    return h.ok("create_crm_deal", {"account_id": account, "name": "Pilot", "amount_cents": 500000,
                                    "close_date": "2024-08-15"})["deal_id"]


def test_search_crm_accounts(h):
    s = h.state()
    name = s["accounts"]["A-100"]["name"]
    out = h.ok("search_crm_accounts", {"query": name.split()[0].upper()})["accounts"]
    assert "A-100" in {a["account_id"] for a in out}
    ind = s["accounts"]["A-101"]["industry"]
    assert all(a["industry"] == ind for a in h.ok("search_crm_accounts", {"industry": ind})["accounts"])
    assert len(h.ok("search_crm_accounts", {})["accounts"]) == len(s["accounts"])
    h.err("search_crm_accounts", {"industry": "mining"}, kind="invalid_arguments")


def test_get_crm_account(h):
    s = h.state()
    a = h.ok("get_crm_account", {"account_id": "A-100"})
    assert {c["contact_id"] for c in a["contacts"]} == {c for c, v in s["contacts"].items() if v["account_id"] == "A-100"}
    assert {d["deal_id"] for d in a["deals"]} == {d for d, v in s["deals"].items() if v["account_id"] == "A-100"}
    h.err("get_crm_account", {"account_id": "A-999"}, code="account_not_found")


def test_create_crm_contact(h):
    _arrange(h)
    r = h.ok("create_crm_contact", {"account_id": "A-100", "name": "Chen Lee", "email": "Chen@A100.example.com", "title": "CTO"})
    c = h.state()["contacts"][r["contact_id"]]
    assert c == {"account_id": "A-100", "name": "Chen Lee", "email": "chen@a100.example.com", "title": "CTO"}
    h.err("create_crm_contact", {"account_id": "A-101", "name": "Chen L", "email": "chen@a100.example.com", "title": "x"},
          code="duplicate_email")
    h.err("create_crm_contact", {"account_id": "A-100", "name": "Dara", "email": "dara-at-example", "title": "x"},
          code="invalid_email")
    h.err("create_crm_contact", {"account_id": "A-999", "name": "Dara", "email": "d@x.com", "title": "x"},
          code="account_not_found")
    h.err("create_crm_contact", {"account_id": "A-100", "name": "D", "email": "d@x.com", "title": "x"}, kind="invalid_arguments")


def test_create_crm_deal(h):
    _arrange(h)
    r = h.ok("create_crm_deal", {"account_id": "A-100", "name": "Pilot", "amount_cents": 500000, "close_date": "2024-08-15"})
    assert r["owner_rep_id"] == "U-1" and r["stage"] == "prospecting"
    d = h.state()["deals"][r["deal_id"]]
    assert d["amount_cents"] == 500000 and d["primary_contact_id"] is None and d["close_date"] == "2024-08-15"
    r = h.ok("create_crm_deal", {"account_id": "A-101", "name": "Renewal", "amount_cents": 1, "close_date": "2024-06-10",
                                 "owner_rep_id": "U-2"})
    assert h.state()["deals"][r["deal_id"]]["owner_rep_id"] == "U-2"
    base = {"account_id": "A-100", "name": "Pilot", "amount_cents": 100}
    h.err("create_crm_deal", {**base, "close_date": "2024-06-09"}, code="invalid_close_date")
    h.err("create_crm_deal", {**base, "close_date": "2024-02-30"}, code="invalid_close_date")
    h.err("create_crm_deal", {**base, "close_date": "2024-08-01", "owner_rep_id": "U-9"}, code="rep_not_found")
    h.err("create_crm_deal", {**base, "account_id": "A-999", "close_date": "2024-08-01"}, code="account_not_found")
    h.err("create_crm_deal", {**base, "close_date": "15/08/2024"}, kind="invalid_arguments")
    h.err("create_crm_deal", {**base, "amount_cents": 0, "close_date": "2024-08-01"}, kind="invalid_arguments")


def test_update_crm_deal_stage(h):
    _arrange(h)
    did = _new_deal(h)
    h.err("update_crm_deal_stage", {"deal_id": did, "stage": "proposal"}, code="stage_skip")
    h.err("update_crm_deal_stage", {"deal_id": did, "stage": "prospecting"}, code="stage_unchanged")
    r = h.ok("update_crm_deal_stage", {"deal_id": did, "stage": "qualification"})
    assert r["probability"] == 25 and h.state()["deals"][did]["stage"] == "qualification"
    h.err("update_crm_deal_stage", {"deal_id": did, "stage": "proposal"}, code="missing_primary_contact")
    h.ok("set_crm_deal_contact", {"deal_id": did, "contact_id": "CT-200"})
    h.ok("update_crm_deal_stage", {"deal_id": did, "stage": "proposal"})
    h.err("update_crm_deal_stage", {"deal_id": did, "stage": "closed_won"}, code="stage_skip")
    h.ok("update_crm_deal_stage", {"deal_id": did, "stage": "negotiation"})
    h.ok("update_crm_deal_stage", {"deal_id": did, "stage": "closed_won"})
    d = h.state()["deals"][did]
    assert d["stage"] == "closed_won" and d["close_date"] == "2024-06-10"
    h.err("update_crm_deal_stage", {"deal_id": did, "stage": "negotiation"}, code="deal_closed")
    did2 = _new_deal(h)
    h.err("update_crm_deal_stage", {"deal_id": did2, "stage": "closed_lost"}, code="lost_reason_required")
    h.err("update_crm_deal_stage", {"deal_id": did2, "stage": "closed_lost", "lost_reason": "  "}, code="lost_reason_required")
    h.ok("update_crm_deal_stage", {"deal_id": did2, "stage": "closed_lost", "lost_reason": "chose a competitor"})
    assert h.state()["deals"][did2]["lost_reason"] == "chose a competitor"
    h.err("update_crm_deal_stage", {"deal_id": "DL-1", "stage": "proposal"}, code="deal_not_found")
    h.err("update_crm_deal_stage", {"deal_id": did2, "stage": "won"}, kind="invalid_arguments")


def test_set_crm_deal_contact(h):
    _arrange(h)
    did = _new_deal(h)
    h.ok("set_crm_deal_contact", {"deal_id": did, "contact_id": "CT-200"})
    assert h.state()["deals"][did]["primary_contact_id"] == "CT-200"
    h.err("set_crm_deal_contact", {"deal_id": did, "contact_id": "CT-201"}, code="contact_not_in_account")
    h.err("set_crm_deal_contact", {"deal_id": did, "contact_id": "CT-999"}, code="contact_not_found")
    h.err("set_crm_deal_contact", {"deal_id": "DL-1", "contact_id": "CT-200"}, code="deal_not_found")
    h.ok("update_crm_deal_stage", {"deal_id": did, "stage": "closed_lost", "lost_reason": "budget cut"})
    h.err("set_crm_deal_contact", {"deal_id": did, "contact_id": "CT-200"}, code="deal_closed")


def test_log_crm_activity(h):
    _arrange(h)
    did = _new_deal(h)
    r = h.ok("log_crm_activity", {"deal_id": did, "kind": "call", "note": "Intro call, budget confirmed", "contact_id": "CT-200"})
    a = h.state()["activities"][r["activity_id"]]
    assert a == {"deal_id": did, "kind": "call", "note": "Intro call, budget confirmed", "contact_id": "CT-200", "date": "2024-06-10"}
    h.ok("log_crm_activity", {"deal_id": did, "kind": "note", "note": "Sent deck"})
    h.err("log_crm_activity", {"deal_id": did, "kind": "call", "note": "hello", "contact_id": "CT-201"}, code="contact_not_in_account")
    h.err("log_crm_activity", {"deal_id": did, "kind": "call", "note": "hello", "contact_id": "CT-999"}, code="contact_not_found")
    h.err("log_crm_activity", {"deal_id": "DL-1", "kind": "call", "note": "hello"}, code="deal_not_found")
    h.err("log_crm_activity", {"deal_id": did, "kind": "fax", "note": "hello"}, kind="invalid_arguments")
    h.err("log_crm_activity", {"deal_id": did, "kind": "call", "note": "hi"}, kind="invalid_arguments")


def test_list_crm_activities(h):
    _arrange(h)
    did = _new_deal(h)
    s = h.state()
    s["activities"]["AC-1"] = {"deal_id": did, "kind": "email", "note": "old", "contact_id": None, "date": "2024-05-01"}
    s["next_activity"] = 2
    h.sandbox.reset(s)
    a2 = h.ok("log_crm_activity", {"deal_id": did, "kind": "meeting", "note": "demo"})["activity_id"]
    a3 = h.ok("log_crm_activity", {"deal_id": did, "kind": "email", "note": "follow up"})["activity_id"]
    acts = h.ok("list_crm_activities", {"deal_id": did})["activities"]
    assert [a["activity_id"] for a in acts] == [a3, a2, "AC-1"]
    assert h.ok("list_crm_activities", {"deal_id": _new_deal(h)})["activities"] == []
    h.err("list_crm_activities", {"deal_id": "DL-1"}, code="deal_not_found")


def test_crm_forecast_report(h):
    _arrange(h, deals={
        "DL-1": _deal("A-100", "proposal", 1000000, "2024-08-01", contact="CT-200"),        # Q3, 50%
        "DL-2": _deal("A-100", "prospecting", 2000000, "2024-09-30"),                       # Q3, 10%
        "DL-3": _deal("A-101", "closed_won", 3000000, "2024-07-02", rep="U-2"),             # Q3 won
        "DL-4": _deal("A-101", "closed_lost", 9000000, "2024-08-02", rep="U-2"),            # Q3 lost
        "DL-5": _deal("A-100", "negotiation", 4000000, "2024-10-01", contact="CT-200"),     # Q4
    })
    r = h.ok("crm_forecast_report", {"quarter": "2024-Q3"})
    assert r["pipeline_cents"] == 3000000 and r["weighted_pipeline_cents"] == 500000 + 200000
    assert r["won_cents"] == 3000000 and r["forecast_cents"] == 3700000
    assert r["quota_cents"] == 30000000 and r["attainment_pct"] == 10.0
    assert r["by_stage"]["closed_lost"] == {"count": 1, "amount_cents": 9000000}
    u1 = h.ok("crm_forecast_report", {"quarter": "2024-Q3", "rep_id": "U-1"})
    assert u1["won_cents"] == 0 and u1["weighted_pipeline_cents"] == 700000 and u1["quota_cents"] == 10000000
    assert h.ok("crm_forecast_report", {"quarter": "2024-Q4"})["weighted_pipeline_cents"] == 3000000
    # closing a deal moves it into the current quarter's won revenue
    h.ok("update_crm_deal_stage", {"deal_id": "DL-5", "stage": "closed_won"})
    assert h.ok("crm_forecast_report", {"quarter": "2024-Q2"})["won_cents"] == 4000000
    h.err("crm_forecast_report", {"quarter": "2024-Q3", "rep_id": "U-9"}, code="rep_not_found")
    h.err("crm_forecast_report", {"quarter": "Q3 2024"}, kind="invalid_arguments")
