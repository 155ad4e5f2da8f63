import re
from typing import Annotated

from toolzoo.dsl import ToolFailure, tool

_EM_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")


def _em_message(state, message_id):
    if message_id not in state["messages"]:
        raise ToolFailure("message_not_found", f"no message {message_id}; find it with list_mail_folder or search_mailbox")
    return state["messages"][message_id]


def _em_folder(state, folder):
    if folder not in state["folders"]:
        raise ToolFailure("folder_not_found", f"no folder {folder!r}; folders are {sorted(state['folders'])}")


def _em_check_addresses(addresses, code="invalid_recipient"):
    for a in addresses:
        if not _EM_ADDRESS.match(a.strip()):
            raise ToolFailure(code, f"{a!r} is not a valid email address; look the person up with lookup_email_contact")


def _em_new_draft(state, to, cc, subject, body, thread_id=None, in_reply_to=None):
    mid = f"M-{max(int(k[2:]) for k in state['messages']) + 1}"
    state["messages"][mid] = {
        "folder": "drafts", "from": state["account"]["address"], "to": [a.strip().lower() for a in to],
        "cc": [a.strip().lower() for a in cc], "subject": subject, "body": body + "\n\n" + state["account"]["signature"],
        "date": state["now"], "read": True, "thread_id": thread_id or f"TH-{mid[2:]}", "in_reply_to": in_reply_to,
    }
    return mid


def _em_summary(mid, m):
    return {"message_id": mid, "folder": m["folder"], "from": m["from"], "to": m["to"], "subject": m["subject"],
            "date": m["date"], "read": m["read"]}


def _em_is_draft(m, what):
    if m["folder"] == "drafts":
        raise ToolFailure("is_draft", f"that message is a draft; you cannot {what} it, send or edit it instead")


@tool(errors={"folder_not_found": "unknown folder"})
def list_mail_folder(state, folder: str = "inbox", unread_only: bool = False) -> dict:
    """List the messages in a folder, newest first, without bodies.

    Args:
        folder: the folder name, e.g. "inbox", "sent", "drafts", "archive", "trash", "spam", or a custom folder.
        unread_only: only unread messages.
    """
    _em_folder(state, folder)
    rows = [_em_summary(mid, m) for mid, m in state["messages"].items()
            if m["folder"] == folder and (not unread_only or not m["read"])]
    rows.sort(key=lambda r: (r["date"], r["message_id"]), reverse=True)
    return {"folder": folder, "unread": sum(1 for r in rows if not r["read"]), "messages": rows}


@tool(errors={"message_not_found": "unknown message id"})
def read_email_message(state, message_id: str) -> dict:
    """Show a whole message: sender, recipients, subject, body and thread. Does not mark it read.

    Args:
        message_id: the message, e.g. "M-1001".
    """
    return {"message_id": message_id, **_em_message(state, message_id)}


@tool(errors={"folder_not_found": "unknown folder"})
def search_mailbox(state, query: Annotated[str, {"minLength": 2}], folder: str | None = None) -> dict:
    """Search messages whose subject, body, sender or recipients contain the text (case-insensitive).

    Args:
        query: the text to look for (at least 2 characters).
        folder: only search this folder; null searches every folder except trash and spam.
    """
    if folder is not None:
        _em_folder(state, folder)
    q = query.strip().lower()
    hits = []
    for mid, m in state["messages"].items():
        if folder is not None and m["folder"] != folder:
            continue
        if folder is None and m["folder"] in ("trash", "spam"):
            continue
        hay = " ".join([m["subject"], m["body"], m["from"], *m["to"], *m["cc"]]).lower()
        if q in hay:
            hits.append(_em_summary(mid, m))
    hits.sort(key=lambda r: (r["date"], r["message_id"]), reverse=True)
    return {"query": query, "results": hits}


@tool(effect="write", errors={"invalid_recipient": "an address is not a valid email address"})
def compose_email_draft(state, to: Annotated[list[str], {"minItems": 1, "maxItems": 20}],
                        subject: Annotated[str, {"minLength": 1, "maxLength": 200}], body: str,
                        cc: list[str] | None = None) -> dict:
    """Write a new message as a draft (not sent); the signature is added to the body.

    Args:
        to: recipient addresses, e.g. ["adele.abbott@acme.example"].
        subject: the subject line.
        body: the message text.
        cc: addresses to copy.
    """
    _em_check_addresses(to + (cc or []))
    mid = _em_new_draft(state, to, cc or [], subject.strip(), body)
    return {"draft_id": mid, "folder": "drafts"}


@tool(effect="write", errors={"message_not_found": "unknown message id", "is_draft": "drafts cannot be replied to"})
def reply_to_email(state, message_id: str, body: str, reply_all: bool = False) -> dict:
    """Create a reply draft to a message (not sent yet): "Re:" subject, same thread, original quoted.

    Args:
        message_id: the message to answer.
        body: the reply text.
        reply_all: also address everyone else on the original (to and cc), not only the sender.
    """
    m = _em_message(state, message_id)
    _em_is_draft(m, "reply to")
    me = state["account"]["address"]
    to = list(m["to"]) if m["from"] == me else [m["from"]]
    cc = []
    if reply_all:
        everyone = [m["from"], *m["to"], *m["cc"]]
        cc = [a for a in dict.fromkeys(everyone) if a != me and a not in to]
    subject = m["subject"] if m["subject"].lower().startswith("re:") else f"Re: {m['subject']}"
    quoted = "\n".join("> " + line for line in m["body"].splitlines())
    mid = _em_new_draft(state, to, cc, subject, f"{body}\n\nOn {m['date']}, {m['from']} wrote:\n{quoted}",
                        thread_id=m["thread_id"], in_reply_to=message_id)
    return {"draft_id": mid, "to": to, "cc": cc, "subject": subject}


@tool(effect="write", errors={
    "message_not_found": "unknown message id",
    "is_draft": "drafts cannot be forwarded",
    "spam_message": "messages in spam must not be forwarded",
    "invalid_recipient": "an address is not a valid email address",
})
def forward_email(state, message_id: str, to: Annotated[list[str], {"minItems": 1}], note: str = "") -> dict:
    """Create a forward draft of a message (not sent yet): "Fwd:" subject with the original below your note.

    Args:
        message_id: the message to forward.
        to: who to forward it to.
        note: your text above the forwarded message.
    """
    m = _em_message(state, message_id)
    _em_is_draft(m, "forward")
    if m["folder"] == "spam":
        raise ToolFailure("spam_message", f"{message_id} is in spam; do not forward it")
    _em_check_addresses(to)
    subject = f"Fwd: {m['subject']}"
    body = f"{note}\n\n---------- Forwarded message ----------\nFrom: {m['from']}\nDate: {m['date']}\n" \
           f"Subject: {m['subject']}\n\n{m['body']}"
    mid = _em_new_draft(state, to, [], subject, body)
    return {"draft_id": mid, "to": [a.strip().lower() for a in to], "subject": subject}


@tool(effect="write", errors={"message_not_found": "unknown message id", "not_a_draft": "only drafts can be sent"})
def send_email_draft(state, draft_id: str) -> dict:
    """Send a draft: it moves to "sent" with the current time.

    Args:
        draft_id: the draft's message id, from compose_email_draft, reply_to_email or forward_email.
    """
    m = _em_message(state, draft_id)
    if m["folder"] != "drafts":
        raise ToolFailure("not_a_draft", f"{draft_id} is in {m['folder']}, not drafts; only drafts can be sent")
    m["folder"] = "sent"
    m["date"] = state["now"]
    return {"message_id": draft_id, "folder": "sent", "to": m["to"], "cc": m["cc"], "sent_at": m["date"]}


@tool(effect="write", errors={"message_not_found": "a message id is unknown"})
def mark_email_read(state, message_ids: Annotated[list[str], {"minItems": 1}], read: bool = True) -> dict:
    """Mark messages as read, or as unread with read=false.

    Args:
        message_ids: the messages, e.g. ["M-1001", "M-1002"].
        read: true for read, false for unread.
    """
    for mid in message_ids:
        _em_message(state, mid)
    for mid in message_ids:
        state["messages"][mid]["read"] = read
    return {"updated": sorted(set(message_ids)), "read": read}


@tool(effect="write", errors={
    "message_not_found": "unknown message id",
    "folder_not_found": "unknown folder",
    "invalid_move": "drafts/sent cannot be a target, and drafts or sent mail can only go to trash",
    "same_folder": "the message is already in that folder",
})
def move_email_to_folder(state, message_id: str, folder: str) -> dict:
    """Move a message to another folder (archive, trash, spam, inbox or a custom folder).

    Args:
        message_id: the message.
        folder: the target folder.
    """
    m = _em_message(state, message_id)
    _em_folder(state, folder)
    if m["folder"] == folder:
        raise ToolFailure("same_folder", f"{message_id} is already in {folder}")
    if folder in ("drafts", "sent"):
        raise ToolFailure("invalid_move", f"nothing can be moved into {folder}")
    if m["folder"] in ("drafts", "sent") and folder != "trash":
        raise ToolFailure("invalid_move", f"{message_id} is in {m['folder']}; it can only be moved to trash")
    old = m["folder"]
    m["folder"] = folder
    return {"message_id": message_id, "from_folder": old, "folder": folder}


@tool(errors={"contact_not_found": "no contact matches"})
def lookup_email_contact(state, query: Annotated[str, {"minLength": 2}]) -> dict:
    """Find address-book contacts whose name or email contains the text (case-insensitive).

    Args:
        query: part of a name or address, e.g. "adele".
    """
    q = query.strip().lower()
    hits = [{"contact_id": cid, **c} for cid, c in sorted(state["contacts"].items())
            if q in c["name"].lower() or q in c["email"].lower()]
    if not hits:
        raise ToolFailure("contact_not_found", f"no contact matches {query!r}; ask the user for the address")
    return {"contacts": hits}


@tool(effect="write", errors={"invalid_email": "the address is not a valid email", "duplicate_contact": "a contact has this email"})
def add_email_contact(state, name: Annotated[str, {"minLength": 1, "maxLength": 80}], email: str,
                      favorite: bool = False) -> dict:
    """Add a person to the address book.

    Args:
        name: their full name.
        email: their email address.
        favorite: mark them as a favorite.
    """
    _em_check_addresses([email], code="invalid_email")
    for cid, c in sorted(state["contacts"].items()):
        if c["email"].lower() == email.strip().lower():
            raise ToolFailure("duplicate_contact", f"{cid} ({c['name']}) already has {email}")
    cid = f"CT-{max(int(k[3:]) for k in state['contacts']) + 1}"
    state["contacts"][cid] = {"name": name.strip(), "email": email.strip().lower(), "favorite": favorite}
    return {"contact_id": cid}
