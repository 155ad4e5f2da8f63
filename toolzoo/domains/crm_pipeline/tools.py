import datetime
import re
from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

_CRM_OPEN = ["prospecting", "qualification", "proposal", "negotiation"]


def _crm_account(state, account_id):
    if account_id not in state["accounts"]:
        raise ToolFailure("account_not_found", f"no account {account_id}; use search_crm_accounts")
    return state["accounts"][account_id]


def _crm_deal(state, deal_id):
    if deal_id not in state["deals"]:
        raise ToolFailure("deal_not_found", f"no deal {deal_id}; see get_crm_account for the account's deals")
    return state["deals"][deal_id]


def _crm_contact_of(state, contact_id, account_id):
    if contact_id not in state["contacts"]:
        raise ToolFailure("contact_not_found", f"no contact {contact_id}")
    if state["contacts"][contact_id]["account_id"] != account_id:
        raise ToolFailure("contact_not_in_account", f"{contact_id} works for {state['contacts'][contact_id]['account_id']}, "
                          f"not {account_id}; pick a contact of the deal's account or create one")
    return state["contacts"][contact_id]


def _crm_prob(state, stage):
    return next(s["probability"] for s in state["stages"] if s["name"] == stage)


@tool()
def search_crm_accounts(state, query: str = "",
                        industry: Literal["retail", "energy", "healthcare", "technology", "logistics", "finance",
                                          "construction", "any"] = "any") -> dict:
    """Find accounts by name and industry; shows owner rep, tier and the number of open deals.

    Args:
        query: part of the account name, e.g. "bank"; empty for all.
        industry: only this industry; "any" for all.
    """
    q = query.strip().lower()
    out = [{"account_id": aid, **a,
            "open_deals": sum(1 for d in state["deals"].values() if d["account_id"] == aid and d["stage"] in _CRM_OPEN)}
           for aid, a in sorted(state["accounts"].items()) if q in a["name"].lower() and industry in ("any", a["industry"])]
    return {"accounts": out}


@tool(errors={"account_not_found": "unknown account id"})
def get_crm_account(state, account_id: str) -> dict:
    """Show an account with its contacts and deals (stage, amount, close date, primary contact).

    Args:
        account_id: the account, e.g. "A-102".
    """
    a = _crm_account(state, account_id)
    return {"account_id": account_id, **a,
            "contacts": [{"contact_id": c, **v} for c, v in sorted(state["contacts"].items()) if v["account_id"] == account_id],
            "deals": [{"deal_id": d, **v} for d, v in sorted(state["deals"].items()) if v["account_id"] == account_id]}


@tool(effect="write", errors={"account_not_found": "unknown account id", "invalid_email": "not an email address",
                              "duplicate_email": "a contact with this email exists"})
def create_crm_contact(state, account_id: str, name: Annotated[str, {"minLength": 2}], email: str, title: str) -> dict:
    """Add a contact person to an account.

    Args:
        account_id: the account they work for.
        name: full name.
        email: work email address.
        title: job title, e.g. "CFO".
    """
    _crm_account(state, account_id)
    email = email.strip().lower()
    if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]{2,}", email):
        raise ToolFailure("invalid_email", f"{email!r} is not a valid email address")
    for cid, c in sorted(state["contacts"].items()):
        if c["email"] == email:
            raise ToolFailure("duplicate_email", f"{email} already belongs to contact {cid} ({c['name']}); use that contact")
    cid = f"CT-{state['next_contact']}"
    state["next_contact"] += 1
    state["contacts"][cid] = {"account_id": account_id, "name": name.strip(), "email": email, "title": title.strip()}
    return {"contact_id": cid, "account_id": account_id}


@tool(effect="write", errors={"account_not_found": "unknown account id", "rep_not_found": "unknown sales rep id",
                              "invalid_close_date": "not a real date, or in the past"})
def create_crm_deal(state, account_id: str, name: Annotated[str, {"minLength": 3}],
                    amount_cents: Annotated[int, {"minimum": 1}],
                    close_date: Annotated[str, {"pattern": r"^\d{4}-\d{2}-\d{2}$"}],
                    owner_rep_id: str | None = None) -> dict:
    """Open a new deal at stage "prospecting".

    Args:
        account_id: the customer account.
        name: a short deal name, e.g. "Vela Bank platform licence".
        amount_cents: expected deal value in cents.
        close_date: expected close date, YYYY-MM-DD, today or later.
        owner_rep_id: the sales rep who owns it, e.g. "U-2"; null for the account's owner.
    """
    a = _crm_account(state, account_id)
    rep = owner_rep_id or a["owner_rep_id"]
    if rep not in state["reps"]:
        raise ToolFailure("rep_not_found", f"no sales rep {rep}; reps are {sorted(state['reps'])}")
    try:
        when = datetime.date.fromisoformat(close_date)
    except ValueError:
        raise ToolFailure("invalid_close_date", f"{close_date} is not a real date")
    if when < datetime.date.fromisoformat(state["today"]):
        raise ToolFailure("invalid_close_date", f"{close_date} is in the past (today is {state['today']})")
    did = f"DL-{state['next_deal']}"
    state["next_deal"] += 1
    state["deals"][did] = {"account_id": account_id, "name": name.strip(), "amount_cents": amount_cents,
                           "stage": "prospecting", "close_date": close_date, "owner_rep_id": rep,
                           "primary_contact_id": None, "lost_reason": None}
    return {"deal_id": did, "stage": "prospecting", "owner_rep_id": rep}


@tool(effect="write", errors={
    "deal_not_found": "unknown deal id", "deal_closed": "closed deals cannot change stage",
    "stage_unchanged": "the deal is already at that stage", "stage_skip": "open deals advance one stage at a time",
    "missing_primary_contact": "proposal and later stages need a primary contact",
    "lost_reason_required": "closing as lost needs a reason"})
def update_crm_deal_stage(state, deal_id: str,
                          stage: Literal["prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost"],
                          lost_reason: str | None = None) -> dict:
    """Move a deal to another stage. Deals advance one stage at a time (moving back is allowed); closed_won only from
    negotiation; closed_lost from any open stage with a reason. Closing sets the close date to today.

    Args:
        deal_id: the deal, e.g. "DL-304".
        stage: the new stage.
        lost_reason: why the deal was lost; required for closed_lost.
    """
    d = _crm_deal(state, deal_id)
    if d["stage"] not in _CRM_OPEN:
        raise ToolFailure("deal_closed", f"{deal_id} is {d['stage']}; closed deals are final, open a new deal instead")
    if stage == d["stage"]:
        raise ToolFailure("stage_unchanged", f"{deal_id} is already at {stage}")
    if stage == "closed_lost":
        if not (lost_reason or "").strip():
            raise ToolFailure("lost_reason_required", "ask why the deal was lost and pass lost_reason")
        d["lost_reason"] = lost_reason.strip()
    else:
        target = _CRM_OPEN.index(stage) if stage in _CRM_OPEN else len(_CRM_OPEN)
        if target > _CRM_OPEN.index(d["stage"]) + 1:
            nxt = _CRM_OPEN[_CRM_OPEN.index(d["stage"]) + 1]
            raise ToolFailure("stage_skip", f"{deal_id} is at {d['stage']}; it can only advance to {nxt} next")
        if target >= 2 and not d["primary_contact_id"]:
            raise ToolFailure("missing_primary_contact", f"set a primary contact (set_crm_deal_contact) before {stage}")
    old = d["stage"]
    d["stage"] = stage
    if stage.startswith("closed"):
        d["close_date"] = state["today"]
    return {"deal_id": deal_id, "from": old, "stage": stage, "probability": _crm_prob(state, stage)}


@tool(effect="write", errors={"deal_not_found": "unknown deal id", "deal_closed": "closed deals are final",
                              "contact_not_found": "unknown contact id",
                              "contact_not_in_account": "the contact belongs to another account"})
def set_crm_deal_contact(state, deal_id: str, contact_id: str) -> dict:
    """Set a deal's primary contact (must work for the deal's account).

    Args:
        deal_id: the deal.
        contact_id: the contact, e.g. "CT-203".
    """
    d = _crm_deal(state, deal_id)
    if d["stage"] not in _CRM_OPEN:
        raise ToolFailure("deal_closed", f"{deal_id} is {d['stage']}")
    _crm_contact_of(state, contact_id, d["account_id"])
    d["primary_contact_id"] = contact_id
    return {"deal_id": deal_id, "primary_contact_id": contact_id}


@tool(effect="write", errors={"deal_not_found": "unknown deal id", "contact_not_found": "unknown contact id",
                              "contact_not_in_account": "the contact belongs to another account"})
def log_crm_activity(state, deal_id: str, kind: Literal["call", "email", "meeting", "note"],
                     note: Annotated[str, {"minLength": 3, "maxLength": 500}], contact_id: str | None = None) -> dict:
    """Log a call, email, meeting or note on a deal (dated today).

    Args:
        deal_id: the deal.
        kind: what kind of activity.
        note: what happened, in a sentence or two.
        contact_id: the contact involved, if any; must work for the deal's account.
    """
    d = _crm_deal(state, deal_id)
    if contact_id is not None:
        _crm_contact_of(state, contact_id, d["account_id"])
    aid = f"AC-{state['next_activity']}"
    state["next_activity"] += 1
    state["activities"][aid] = {"deal_id": deal_id, "kind": kind, "note": note.strip(), "contact_id": contact_id,
                                "date": state["today"]}
    return {"activity_id": aid, "deal_id": deal_id, "date": state["today"]}


@tool(errors={"deal_not_found": "unknown deal id"})
def list_crm_activities(state, deal_id: str) -> dict:
    """List a deal's activities, newest first.

    Args:
        deal_id: the deal.
    """
    _crm_deal(state, deal_id)
    acts = [{"activity_id": a, **v} for a, v in state["activities"].items() if v["deal_id"] == deal_id]
    acts.sort(key=lambda a: (a["date"], int(a["activity_id"].split("-")[1])), reverse=True)
    return {"deal_id": deal_id, "activities": acts}


@tool(errors={"rep_not_found": "unknown sales rep id"})
def crm_forecast_report(state, quarter: Annotated[str, {"pattern": r"^20\d\d-Q[1-4]$"}], rep_id: str | None = None) -> dict:
    """Quarterly forecast from deals whose close date falls in the quarter: amounts per stage, open pipeline,
    probability-weighted pipeline, won revenue, forecast (won + weighted), quota and attainment.

    Args:
        quarter: the quarter, like "2024-Q3".
        rep_id: only this rep's deals and quota; null for the whole team.
    """
    if rep_id is not None and rep_id not in state["reps"]:
        raise ToolFailure("rep_not_found", f"no sales rep {rep_id}; reps are {sorted(state['reps'])}")
    year, q = int(quarter[:4]), int(quarter[-1])
    by_stage = {s["name"]: {"count": 0, "amount_cents": 0} for s in state["stages"]}
    weighted = 0
    for d in state["deals"].values():
        when = datetime.date.fromisoformat(d["close_date"])
        if when.year != year or (when.month - 1) // 3 + 1 != q or rep_id not in (None, d["owner_rep_id"]):
            continue
        by_stage[d["stage"]]["count"] += 1
        by_stage[d["stage"]]["amount_cents"] += d["amount_cents"]
        if d["stage"] in _CRM_OPEN:
            weighted += d["amount_cents"] * _crm_prob(state, d["stage"]) // 100
    won = by_stage["closed_won"]["amount_cents"]
    quota = sum(r["quarterly_quota_cents"] for rid, r in state["reps"].items() if rep_id in (None, rid))
    return {"quarter": quarter, "rep_id": rep_id, "by_stage": by_stage,
            "pipeline_cents": sum(by_stage[s]["amount_cents"] for s in _CRM_OPEN), "weighted_pipeline_cents": weighted,
            "won_cents": won, "forecast_cents": won + weighted, "quota_cents": quota,
            "attainment_pct": round(100 * won / quota, 1) if quota else None}
