"""library_loans: every tool, its success path and its declared errors, in a real sandbox."""

import datetime

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("library_loans") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _arrange(h, change):
    """Start the test from the seeded state edited by `change(state)`."""
    state = h.state()
    change(state)
    h.sandbox.reset(state)
    return state


def _clean(state):
    """No loans, no holds, no fees: a predictable desk."""
    state["loans"] = {}
    for it in state["items"].values():
        it["holds"] = []
    for m in state["members"].values():
        m["fees_cents"] = 0
        m["type"] = "student"


def test_search_library_catalogue(h):
    items = h.ok("search_library_catalogue", {"query": "okafor"})["items"]
    titles = {i["title"] for i in items}
    assert "The Silent Orbit" in titles and "Wild Rivers" in titles
    state = h.state()
    for i in items:
        it = state["items"][i["item_id"]]
        on_loan = sum(1 for ln in state["loans"].values() if ln["item_id"] == i["item_id"] and ln["returned"] is None)
        assert i["available"] == it["copies"] - on_loan
    fmt = items[0]["format"]
    assert all(i["format"] == fmt for i in h.ok("search_library_catalogue", {"query": "okafor", "format": fmt})["items"])
    h.err("search_library_catalogue", {"query": " a "}, code="query_too_short")
    h.err("search_library_catalogue", {"query": "okafor", "format": "vinyl"}, kind="invalid_arguments")


def test_get_library_member(h):
    state = h.state()
    lid, loan = next(iter(sorted(state["loans"].items())))
    m = h.ok("get_library_member", {"member_id": loan["member_id"]})
    assert lid in {x["loan_id"] for x in m["loans"]}
    assert m["max_loans"] == state["rules"]["max_loans"][m["type"]]
    h.err("get_library_member", {"member_id": "M-999"}, code="member_not_found")
    h.err("get_library_member", {}, kind="invalid_arguments")


def test_borrow_library_item(h):
    _arrange(h, _clean)
    r = h.ok("borrow_library_item", {"member_id": "M-100", "item_id": "B-200"})
    state = h.state()
    loan = state["loans"][r["loan_id"]]
    assert loan["member_id"] == "M-100" and loan["item_id"] == "B-200" and loan["returned"] is None
    fmt = state["items"]["B-200"]["format"]
    assert r["due"] == {"book": "2024-07-01", "audiobook": "2024-06-24", "dvd": "2024-06-17"}[fmt]
    h.err("borrow_library_item", {"member_id": "M-100", "item_id": "B-200"}, code="already_borrowed")
    h.err("borrow_library_item", {"member_id": "M-999", "item_id": "B-200"}, code="member_not_found")
    h.err("borrow_library_item", {"member_id": "M-100", "item_id": "B-999"}, code="item_not_found")
    h.ok("borrow_library_item", {"member_id": "M-100", "item_id": "B-201"})
    h.ok("borrow_library_item", {"member_id": "M-100", "item_id": "B-202"})
    h.err("borrow_library_item", {"member_id": "M-100", "item_id": "B-203"}, code="loan_limit_reached")


def test_borrow_blocked_by_fees_and_holds(h):
    def change(s):
        _clean(s)
        s["members"]["M-101"]["fees_cents"] = 1000
        s["items"]["B-205"]["copies"] = 1
        s["items"]["B-205"]["holds"] = ["M-102"]

    _arrange(h, change)
    h.err("borrow_library_item", {"member_id": "M-101", "item_id": "B-200"}, code="fees_outstanding")
    h.err("borrow_library_item", {"member_id": "M-103", "item_id": "B-205"}, code="no_copy_available")
    # the member at the front of the queue gets the copy, and leaves the queue
    h.ok("borrow_library_item", {"member_id": "M-102", "item_id": "B-205"})
    assert h.state()["items"]["B-205"]["holds"] == []
    h.err("borrow_library_item", {"member_id": "M-103", "item_id": "B-205"}, code="no_copy_available")


def test_return_library_item(h):
    def change(s):
        _clean(s)
        s["loans"]["L-1"] = {"item_id": "B-205", "member_id": "M-101", "borrowed": "2024-05-01", "due": "2024-06-01",
                             "renewals": 0, "returned": None, "fee_cents": 0}
        s["loans"]["L-2"] = {"item_id": "B-206", "member_id": "M-101", "borrowed": "2024-01-01", "due": "2024-02-01",
                             "renewals": 0, "returned": None, "fee_cents": 0}
        s["items"]["B-205"]["holds"] = ["M-103"]

    _arrange(h, change)
    r = h.ok("return_library_item", {"loan_id": "L-1"})
    assert r["days_late"] == 9 and r["late_fee_cents"] == 225 and r["next_in_holds_queue"] == "M-103"
    state = h.state()
    assert state["loans"]["L-1"]["returned"] == "2024-06-10"
    assert state["members"]["M-101"]["fees_cents"] == 225
    r = h.ok("return_library_item", {"loan_id": "L-2"})
    assert r["late_fee_cents"] == 1500  # capped
    assert h.state()["members"]["M-101"]["fees_cents"] == 1725
    h.err("return_library_item", {"loan_id": "L-1"}, code="already_returned")
    h.err("return_library_item", {"loan_id": "L-404"}, code="loan_not_found")


def test_renew_library_loan(h):
    def change(s):
        _clean(s)
        for lid, item, due in (("L-1", "B-200", "2024-06-12"), ("L-2", "B-201", "2024-06-01"), ("L-3", "B-202", "2024-06-20")):
            s["loans"][lid] = {"item_id": item, "member_id": "M-100", "borrowed": "2024-05-01", "due": due,
                               "renewals": 0, "returned": None, "fee_cents": 0}
        s["items"]["B-202"]["holds"] = ["M-104"]

    state = _arrange(h, change)
    r = h.ok("renew_library_loan", {"loan_id": "L-1"})
    days = state["rules"]["loan_days"][state["items"]["B-200"]["format"]]
    assert r["renewals"] == 1 and r["due"] == (datetime.date(2024, 6, 10) + datetime.timedelta(days=days)).isoformat()
    assert h.state()["loans"]["L-1"]["renewals"] == 1
    h.ok("renew_library_loan", {"loan_id": "L-1"})
    h.err("renew_library_loan", {"loan_id": "L-1"}, code="renewal_limit_reached")
    h.err("renew_library_loan", {"loan_id": "L-2"}, code="loan_overdue")
    h.err("renew_library_loan", {"loan_id": "L-3"}, code="item_has_holds")
    h.err("renew_library_loan", {"loan_id": "L-9"}, code="loan_not_found")
    h.ok("return_library_item", {"loan_id": "L-3"})
    h.err("renew_library_loan", {"loan_id": "L-3"}, code="already_returned")


def test_place_library_hold(h):
    def change(s):
        _clean(s)
        s["items"]["B-205"]["copies"] = 1
        s["loans"]["L-1"] = {"item_id": "B-205", "member_id": "M-100", "borrowed": "2024-06-01", "due": "2024-06-20",
                             "renewals": 0, "returned": None, "fee_cents": 0}

    _arrange(h, change)
    assert h.ok("place_library_hold", {"member_id": "M-101", "item_id": "B-205"})["position"] == 1
    assert h.ok("place_library_hold", {"member_id": "M-102", "item_id": "B-205"})["position"] == 2
    assert h.state()["items"]["B-205"]["holds"] == ["M-101", "M-102"]
    h.err("place_library_hold", {"member_id": "M-101", "item_id": "B-205"}, code="duplicate_hold")
    h.err("place_library_hold", {"member_id": "M-100", "item_id": "B-205"}, code="already_borrowed")
    h.err("place_library_hold", {"member_id": "M-101", "item_id": "B-200"}, code="copy_available")
    h.err("place_library_hold", {"member_id": "M-999", "item_id": "B-205"}, code="member_not_found")
    h.err("place_library_hold", {"member_id": "M-101", "item_id": "B-999"}, code="item_not_found")
    held = h.ok("get_library_member", {"member_id": "M-102"})["holds"]
    assert held == [{"item_id": "B-205", "position": 2}]


def test_cancel_library_hold(h):
    _arrange(h, lambda s: (_clean(s), s["items"]["B-205"].update(holds=["M-101", "M-102"])))
    r = h.ok("cancel_library_hold", {"member_id": "M-101", "item_id": "B-205"})
    assert r["queue_length"] == 1
    assert h.state()["items"]["B-205"]["holds"] == ["M-102"]
    h.err("cancel_library_hold", {"member_id": "M-101", "item_id": "B-205"}, code="hold_not_found")
    h.err("cancel_library_hold", {"member_id": "M-101", "item_id": "B-999"}, code="item_not_found")


def test_pay_library_fees(h):
    _arrange(h, lambda s: (_clean(s), s["members"]["M-103"].update(fees_cents=1200)))
    h.err("borrow_library_item", {"member_id": "M-103", "item_id": "B-200"}, code="fees_outstanding")
    r = h.ok("pay_library_fees", {"member_id": "M-103", "amount_cents": 500})
    assert r["fees_cents"] == 700 and h.state()["members"]["M-103"]["fees_cents"] == 700
    h.ok("borrow_library_item", {"member_id": "M-103", "item_id": "B-200"})
    h.err("pay_library_fees", {"member_id": "M-103", "amount_cents": 701}, code="overpayment")
    h.err("pay_library_fees", {"member_id": "M-999", "amount_cents": 1}, code="member_not_found")
    h.err("pay_library_fees", {"member_id": "M-103", "amount_cents": 0}, kind="invalid_arguments")
