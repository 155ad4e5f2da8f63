"""email_client: every tool, its success path, resulting state and declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness

ME = "sam.rivera@mailbox.example"


@pytest.fixture(scope="module")
def h():
    with DomainHarness("email_client") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def test_list_mail_folder(h):
    r = h.ok("list_mail_folder", {})
    assert r["folder"] == "inbox" and len(r["messages"]) == 5 and r["unread"] == 3
    dates = [m["date"] for m in r["messages"]]
    assert dates == sorted(dates, reverse=True)
    unread = h.ok("list_mail_folder", {"folder": "inbox", "unread_only": True})["messages"]
    assert {m["message_id"] for m in unread} == {"M-1001", "M-1002", "M-1005"}
    assert [m["message_id"] for m in h.ok("list_mail_folder", {"folder": "Receipts"})["messages"]] == ["M-1008"]
    h.err("list_mail_folder", {"folder": "Later"}, code="folder_not_found")
    h.err("list_mail_folder", {"folder": "inbox", "unread_only": "yes"}, kind="invalid_arguments")


def test_read_email_message(h):
    m = h.ok("read_email_message", {"message_id": "M-1001"})
    assert m["subject"] == "Invoice 2291 overdue" and m["to"] == [ME]
    assert h.state()["messages"]["M-1001"]["read"] is False  # reading does not mark read
    h.err("read_email_message", {"message_id": "M-1"}, code="message_not_found")


def test_search_mailbox(h):
    assert [m["message_id"] for m in h.ok("search_mailbox", {"query": "OFFSITE"})["results"]] \
        == sorted(["M-1002", "M-1009"], key=lambda mid: h.state()["messages"][mid]["date"], reverse=True)
    assert [m["message_id"] for m in h.ok("search_mailbox", {"query": "offsite", "folder": "sent"})["results"]] == ["M-1009"]
    assert h.ok("search_mailbox", {"query": "cruise"})["results"] == []  # spam is skipped by default
    assert len(h.ok("search_mailbox", {"query": "cruise", "folder": "spam"})["results"]) == 1
    sender = h.state()["messages"]["M-1004"]["from"]
    assert "M-1004" in [m["message_id"] for m in h.ok("search_mailbox", {"query": sender})["results"]]
    h.err("search_mailbox", {"query": "offsite", "folder": "nope"}, code="folder_not_found")
    h.err("search_mailbox", {"query": "o"}, kind="invalid_arguments")


def test_compose_email_draft(h):
    r = h.ok("compose_email_draft", {"to": ["New.Person@Example.com"], "subject": "Hello", "body": "Hi there",
                                     "cc": ["boss@example.com"]})
    d = h.state()["messages"][r["draft_id"]]
    assert d["folder"] == "drafts" and d["to"] == ["new.person@example.com"] and d["cc"] == ["boss@example.com"]
    assert d["from"] == ME and d["body"].startswith("Hi there") and d["body"].endswith("-- Sam Rivera")
    h.err("compose_email_draft", {"to": ["not-an-address"], "subject": "Hello", "body": "x"}, code="invalid_recipient")
    h.err("compose_email_draft", {"to": ["a@b.com"], "subject": "Hello", "body": "x", "cc": ["bad@"]},
          code="invalid_recipient")
    h.err("compose_email_draft", {"to": [], "subject": "Hello", "body": "x"}, kind="invalid_arguments")
    h.err("compose_email_draft", {"to": ["a@b.com"], "subject": "", "body": "x"}, kind="invalid_arguments")


def test_reply_to_email(h):
    orig = h.state()["messages"]["M-1002"]
    r = h.ok("reply_to_email", {"message_id": "M-1002", "body": "Sounds good."})
    assert r["to"] == [orig["from"]] and r["cc"] == [] and r["subject"] == "Re: Team offsite agenda"
    d = h.state()["messages"][r["draft_id"]]
    assert d["folder"] == "drafts" and d["thread_id"] == orig["thread_id"] and d["in_reply_to"] == "M-1002"
    assert "> Draft agenda attached" in d["body"]
    r = h.ok("reply_to_email", {"message_id": "M-1002", "body": "All: yes.", "reply_all": True})
    assert r["to"] == [orig["from"]] and r["cc"] == orig["cc"]
    r = h.ok("reply_to_email", {"message_id": "M-1003", "body": "Great"})
    assert r["subject"] == "Re: contract renewal"  # no "Re: Re:"
    sent = h.state()["messages"]["M-1009"]
    assert h.ok("reply_to_email", {"message_id": "M-1009", "body": "Following up"})["to"] == sent["to"]
    h.err("reply_to_email", {"message_id": "M-1010", "body": "x"}, code="is_draft")
    h.err("reply_to_email", {"message_id": "M-9", "body": "x"}, code="message_not_found")


def test_forward_email(h):
    r = h.ok("forward_email", {"message_id": "M-1005", "to": ["Partner@Home.example"], "note": "My flight details"})
    assert r["subject"] == "Fwd: Your flight to Lisbon" and r["to"] == ["partner@home.example"]
    d = h.state()["messages"][r["draft_id"]]
    assert d["folder"] == "drafts" and "QX7P2L" in d["body"] and d["body"].startswith("My flight details")
    h.err("forward_email", {"message_id": "M-1007", "to": ["a@b.com"]}, code="spam_message")
    h.err("forward_email", {"message_id": "M-1010", "to": ["a@b.com"]}, code="is_draft")
    h.err("forward_email", {"message_id": "M-1005", "to": ["nobody"]}, code="invalid_recipient")
    h.err("forward_email", {"message_id": "M-7", "to": ["a@b.com"]}, code="message_not_found")


def test_send_email_draft(h):
    draft = h.ok("reply_to_email", {"message_id": "M-1004", "body": "Yes, see you there."})["draft_id"]
    r = h.ok("send_email_draft", {"draft_id": draft})
    assert r["folder"] == "sent" and r["sent_at"] == "2025-03-10T09:00"
    m = h.state()["messages"][draft]
    assert m["folder"] == "sent" and m["date"] == "2025-03-10T09:00"
    assert draft in [x["message_id"] for x in h.ok("list_mail_folder", {"folder": "sent"})["messages"]]
    h.ok("send_email_draft", {"draft_id": "M-1010"})
    h.err("send_email_draft", {"draft_id": draft}, code="not_a_draft")
    h.err("send_email_draft", {"draft_id": "M-1001"}, code="not_a_draft")
    h.err("send_email_draft", {"draft_id": "M-0"}, code="message_not_found")


def test_mark_email_read(h):
    r = h.ok("mark_email_read", {"message_ids": ["M-1001", "M-1002"]})
    assert r["updated"] == ["M-1001", "M-1002"]
    s = h.state()["messages"]
    assert s["M-1001"]["read"] and s["M-1002"]["read"]
    h.ok("mark_email_read", {"message_ids": ["M-1003"], "read": False})
    assert h.state()["messages"]["M-1003"]["read"] is False
    before = h.state()
    h.err("mark_email_read", {"message_ids": ["M-1004", "M-404"], "read": False}, code="message_not_found")
    assert h.state() == before
    h.err("mark_email_read", {"message_ids": []}, kind="invalid_arguments")


def test_move_email_to_folder(h):
    r = h.ok("move_email_to_folder", {"message_id": "M-1005", "folder": "Travel"})
    assert r["from_folder"] == "inbox"
    assert h.state()["messages"]["M-1005"]["folder"] == "Travel"
    h.err("move_email_to_folder", {"message_id": "M-1005", "folder": "Travel"}, code="same_folder")
    h.err("move_email_to_folder", {"message_id": "M-1001", "folder": "sent"}, code="invalid_move")
    h.err("move_email_to_folder", {"message_id": "M-1010", "folder": "archive"}, code="invalid_move")
    h.ok("move_email_to_folder", {"message_id": "M-1010", "folder": "trash"})
    assert h.state()["messages"]["M-1010"]["folder"] == "trash"
    h.err("move_email_to_folder", {"message_id": "M-1001", "folder": "Later"}, code="folder_not_found")
    h.err("move_email_to_folder", {"message_id": "M-404", "folder": "trash"}, code="message_not_found")


def test_lookup_email_contact(h):
    c = h.state()["contacts"]["CT-3"]
    first = c["name"].split()[0]
    hits = h.ok("lookup_email_contact", {"query": first.upper()})["contacts"]
    assert "CT-3" in [x["contact_id"] for x in hits]
    assert h.ok("lookup_email_contact", {"query": c["email"]})["contacts"][0]["contact_id"] == "CT-3"
    h.err("lookup_email_contact", {"query": "zzzz"}, code="contact_not_found")
    h.err("lookup_email_contact", {"query": "z"}, kind="invalid_arguments")


def test_add_email_contact(h):
    r = h.ok("add_email_contact", {"name": "Nia Okoro", "email": "Nia.Okoro@Example.com", "favorite": True})
    assert h.state()["contacts"][r["contact_id"]] == {"name": "Nia Okoro", "email": "nia.okoro@example.com", "favorite": True}
    assert h.ok("lookup_email_contact", {"query": "okoro"})["contacts"][0]["contact_id"] == r["contact_id"]
    h.err("add_email_contact", {"name": "Nia again", "email": "nia.okoro@example.com"}, code="duplicate_contact")
    h.err("add_email_contact", {"name": "Bad", "email": "bad-address"}, code="invalid_email")
    h.err("add_email_contact", {"name": "", "email": "x@y.com"}, kind="invalid_arguments")
