import random

EM_FIRST = ["Adele", "Bilal", "Carmen", "Deshawn", "Elif", "Florian", "Grace", "Hamid", "Ingrid", "Jorge", "Keiko"]
EM_LAST = ["Abbott", "Bakr", "Castillo", "Daniels", "Erdem", "Fontaine", "Greene", "Hosseini", "Iversen", "Jimenez"]
EM_DOMAINS = ["acme.example", "globex.example", "initech.example", "mailbox.example"]
# (folder, read, subject, body) - folder fixed so scenarios are stable; who sent it is random
EM_MESSAGES = [
    ("inbox", False, "Invoice 2291 overdue", "Hi Sam, invoice 2291 is now 14 days overdue. Could you check?"),
    ("inbox", False, "Team offsite agenda", "Draft agenda attached: strategy in the morning, hiking after lunch."),
    ("inbox", True, "Re: contract renewal", "We are fine with a 12-month renewal at the current rate."),
    ("inbox", True, "Lunch on Thursday?", "Are you free for lunch on Thursday at the usual place?"),
    ("inbox", False, "Your flight to Lisbon", "Booking ref QX7P2L. Departure 14 April 07:40 from gate B."),
    ("archive", True, "Q4 report final", "Attached the final Q4 report; numbers match finance."),
    ("spam", False, "You won a cruise!!!", "Click here to claim your free cruise now."),
    ("Receipts", True, "Receipt for your order 5531", "Thank you for your purchase of a desk lamp, 29.99."),
    ("sent", True, "Offsite venue options", "Three venues shortlisted; I prefer the lake house."),
    ("drafts", True, "Budget question", "Quick question about next year's travel budget:"),
]


def seed(rng: random.Random) -> dict:
    me = "sam.rivera@mailbox.example"
    people = rng.sample([(f, s) for f in EM_FIRST for s in EM_LAST], 8)
    contacts = {}
    for i, (f, last) in enumerate(people):
        contacts[f"CT-{i + 1}"] = {"name": f"{f} {last}", "email": f"{f.lower()}.{last.lower()}@{rng.choice(EM_DOMAINS)}",
                                   "favorite": rng.random() < 0.3}
    emails = [c["email"] for c in contacts.values()]
    messages = {}
    for j, (folder, read, subject, body) in enumerate(EM_MESSAGES):
        mid = f"M-{1001 + j}"
        other = emails[j % len(emails)]
        mine = folder in ("sent", "drafts")
        messages[mid] = {
            "folder": folder,
            "from": me if mine else (other if folder != "spam" else "prizes@lucky-winner.example"),
            "to": [other] if mine else [me],
            "cc": [emails[(j + 3) % len(emails)]] if j in (1, 8) else [],
            "subject": subject, "body": body,
            "date": f"2025-03-{rng.randint(1, 9):02d}T{rng.randint(7, 19):02d}:{rng.choice(['05', '20', '45'])}",
            "read": read, "thread_id": f"TH-{1001 + j}", "in_reply_to": None,
        }
    folders = {name: {"system": True} for name in ["inbox", "sent", "drafts", "archive", "trash", "spam"]}
    folders["Receipts"] = {"system": False}
    folders["Travel"] = {"system": False}
    return {"now": "2025-03-10T09:00",
            "account": {"address": me, "name": "Sam Rivera", "signature": "-- Sam Rivera"},
            "folders": folders, "contacts": contacts, "messages": messages}
