"""A personal email client: folders, reading and searching mail, drafting replies and forwards, sending, and contacts."""

CATEGORY = "software_apps"
DESCRIPTION = ("An email client for one mailbox: folders, read/unread, search, moving mail, drafts for new "
               "messages, replies and forwards, sending drafts, and an address book.")
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["send_email_draft"], "message": "the mail server did not answer; the draft was not sent, retry"},
    {"kind": "rate_limit", "tools": ["send_email_draft", "search_mailbox"]},
    {"kind": "partial", "tools": ["list_mail_folder", "search_mailbox"]},
]
