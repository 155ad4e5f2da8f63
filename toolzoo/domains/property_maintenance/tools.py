from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

Trade = Literal["plumbing", "electrical", "hvac", "appliance", "general"]


def _pm_unit(state, unit_id):
    if unit_id not in state["units"]:
        raise ToolFailure("unit_not_found", f"no unit {unit_id}; unit ids look like U-101")
    return state["units"][unit_id]


def _pm_work_order(state, work_order_id):
    if work_order_id not in state["work_orders"]:
        raise ToolFailure("work_order_not_found", f"no work order {work_order_id}; use list_unit_work_orders to find it")
    return state["work_orders"][work_order_id]


def _pm_active_jobs(state, contractor_id):
    return sum(1 for w in state["work_orders"].values()
               if w["contractor_id"] == contractor_id and w["status"] == "assigned")


def _pm_next_id(table, prefix):
    nums = [int(k.split("-")[1]) for k in table]
    return f"{prefix}-{max(nums) + 1 if nums else 1}"


@tool(errors={"tenant_not_found": "no tenant has this email"})
def lookup_maintenance_tenant(state, email: str) -> dict:
    """Find a tenant and their unit from the tenant's email address.

    Args:
        email: the tenant's email, e.g. "amira.201@tenantmail.example" (case-insensitive).
    """
    for tid, t in sorted(state["tenants"].items()):
        if t["email"].lower() == email.strip().lower():
            return {"tenant_id": tid, "name": t["name"], "unit_id": t["unit_id"], "phone": t["phone"]}
    raise ToolFailure("tenant_not_found", f"no tenant with email {email}; ask the tenant to confirm the address")


@tool(errors={"unit_not_found": "unknown unit id"})
def get_rental_unit(state, unit_id: str) -> dict:
    """Show a rental unit: building, unit number, current tenant and how many work orders are still open.

    Args:
        unit_id: the unit id, e.g. "U-101".
    """
    u = _pm_unit(state, unit_id)
    open_orders = [wid for wid, w in sorted(state["work_orders"].items())
                   if w["unit_id"] == unit_id and w["status"] in ("open", "assigned")]
    return {"unit_id": unit_id, **u, "open_work_orders": open_orders}


@tool(errors={"unit_not_found": "unknown unit id"})
def list_unit_work_orders(state, unit_id: str,
                          status: Literal["open", "assigned", "completed", "cancelled", "any"] = "any") -> dict:
    """List the work orders of a unit, optionally only those with one status.

    Args:
        unit_id: the unit id, e.g. "U-101".
        status: only work orders with this status; "any" for all.
    """
    _pm_unit(state, unit_id)
    out = [{"work_order_id": wid, "category": w["category"], "status": w["status"], "priority": w["priority"],
            "description": w["description"]}
           for wid, w in sorted(state["work_orders"].items())
           if w["unit_id"] == unit_id and status in ("any", w["status"])]
    return {"unit_id": unit_id, "work_orders": out}


@tool(errors={"work_order_not_found": "unknown work order id"})
def get_maintenance_work_order(state, work_order_id: str) -> dict:
    """Show every detail of one work order: unit, category, status, contractor, hours, materials and invoice.

    Args:
        work_order_id: the work order id, e.g. "WO-5001".
    """
    return {"work_order_id": work_order_id, **_pm_work_order(state, work_order_id)}


@tool(effect="write", errors={
    "tenant_not_found": "unknown tenant id",
    "unit_not_found": "unknown unit id",
    "tenant_not_in_unit": "the tenant does not live in this unit",
    "duplicate_open_request": "an open or assigned work order for this unit and category already exists",
})
def create_maintenance_work_order(state, tenant_id: str, unit_id: str, category: Trade,
                                  description: Annotated[str, {"minLength": 10, "maxLength": 500}],
                                  priority: Literal["low", "normal", "urgent"] = "normal") -> dict:
    """Open a new maintenance work order for a tenant's unit.

    Args:
        tenant_id: the reporting tenant, e.g. "T-201".
        unit_id: the tenant's own unit, e.g. "U-101".
        category: which trade the problem needs.
        description: what is wrong, in the tenant's words (at least 10 characters).
        priority: "urgent" for no heat, no power or an active leak; otherwise "normal" or "low".
    """
    if tenant_id not in state["tenants"]:
        raise ToolFailure("tenant_not_found", f"no tenant {tenant_id}; look the tenant up by email first")
    _pm_unit(state, unit_id)
    if state["tenants"][tenant_id]["unit_id"] != unit_id:
        raise ToolFailure("tenant_not_in_unit",
                          f"tenant {tenant_id} lives in {state['tenants'][tenant_id]['unit_id']}, not {unit_id}")
    for wid, w in sorted(state["work_orders"].items()):
        if w["unit_id"] == unit_id and w["category"] == category and w["status"] in ("open", "assigned"):
            raise ToolFailure("duplicate_open_request",
                              f"{wid} is already {w['status']} for {category} in {unit_id}; update that one instead")
    wid = _pm_next_id(state["work_orders"], "WO")
    state["work_orders"][wid] = {
        "unit_id": unit_id, "tenant_id": tenant_id, "category": category, "description": description.strip(),
        "priority": priority, "status": "open", "contractor_id": None, "created_on": state["today"],
        "hours": None, "materials_cents": 0, "tenant_damage": False, "completion_notes": "", "invoice_id": None,
    }
    return {"work_order_id": wid, "status": "open", "priority": priority}


@tool()
def find_contractors_for_trade(state, trade: Trade, only_available: bool = True) -> dict:
    """List contractors of a trade with their hourly rate and current workload.

    Args:
        trade: the trade needed, e.g. "plumbing".
        only_available: if true, leave out contractors on leave or already at their job limit.
    """
    out = []
    for kid, k in sorted(state["contractors"].items()):
        if k["trade"] != trade:
            continue
        active = _pm_active_jobs(state, kid)
        can_take = k["available"] and active < k["max_active_jobs"]
        if only_available and not can_take:
            continue
        out.append({"contractor_id": kid, "name": k["name"], "hourly_rate_cents": k["hourly_rate_cents"],
                    "active_jobs": active, "can_take_work": can_take})
    return {"trade": trade, "contractors": out}


@tool(effect="write", errors={
    "work_order_not_found": "unknown work order id",
    "contractor_not_found": "unknown contractor id",
    "invalid_status": "only open work orders can be assigned",
    "trade_mismatch": "the contractor's trade differs from the work order category",
    "contractor_unavailable": "the contractor is on leave or at their job limit",
})
def assign_maintenance_contractor(state, work_order_id: str, contractor_id: str) -> dict:
    """Assign a contractor to an open work order; the work order becomes "assigned".

    Args:
        work_order_id: an open work order, e.g. "WO-5001".
        contractor_id: a contractor of the matching trade, e.g. "K-301".
    """
    w = _pm_work_order(state, work_order_id)
    if contractor_id not in state["contractors"]:
        raise ToolFailure("contractor_not_found", f"no contractor {contractor_id}; use find_contractors_for_trade")
    k = state["contractors"][contractor_id]
    if w["status"] != "open":
        raise ToolFailure("invalid_status", f"{work_order_id} is {w['status']}; only open work orders can be assigned")
    if k["trade"] != w["category"]:
        raise ToolFailure("trade_mismatch", f"{contractor_id} does {k['trade']}, but {work_order_id} needs {w['category']}")
    if not k["available"] or _pm_active_jobs(state, contractor_id) >= k["max_active_jobs"]:
        raise ToolFailure("contractor_unavailable",
                          f"{contractor_id} cannot take more work now; pick another {w['category']} contractor")
    w["status"] = "assigned"
    w["contractor_id"] = contractor_id
    return {"work_order_id": work_order_id, "status": "assigned", "contractor_id": contractor_id}


@tool(effect="write", errors={
    "work_order_not_found": "unknown work order id",
    "invalid_status": "only assigned work orders can be completed",
})
def complete_maintenance_work_order(state, work_order_id: str,
                                    hours: Annotated[float, {"minimum": 0.25, "maximum": 40}],
                                    materials_cents: Annotated[int, {"minimum": 0, "maximum": 500000}] = 0,
                                    tenant_damage: bool = False, notes: str = "") -> dict:
    """Record that the contractor finished an assigned work order, with labour hours and materials cost.

    Args:
        work_order_id: an assigned work order.
        hours: labour hours the contractor reported (0.25 to 40).
        materials_cents: cost of parts and materials in cents.
        tenant_damage: true if the contractor found the damage was caused by the tenant.
        notes: the contractor's completion notes.
    """
    w = _pm_work_order(state, work_order_id)
    if w["status"] != "assigned":
        raise ToolFailure("invalid_status",
                          f"{work_order_id} is {w['status']}; assign a contractor before completing it")
    w.update(status="completed", hours=float(hours), materials_cents=materials_cents,
             tenant_damage=tenant_damage, completion_notes=notes.strip())
    return {"work_order_id": work_order_id, "status": "completed"}


@tool(effect="write", errors={
    "work_order_not_found": "unknown work order id",
    "invalid_status": "only open or assigned work orders can be cancelled",
})
def cancel_maintenance_work_order(state, work_order_id: str,
                                  reason: Literal["resolved_by_tenant", "duplicate", "tenant_request", "moved_out"]) -> dict:
    """Cancel an open or assigned work order; an assigned contractor is released.

    Args:
        work_order_id: the work order to cancel.
        reason: why it is cancelled.
    """
    w = _pm_work_order(state, work_order_id)
    if w["status"] not in ("open", "assigned"):
        raise ToolFailure("invalid_status", f"{work_order_id} is {w['status']} and can no longer be cancelled")
    released = w["contractor_id"]
    w.update(status="cancelled", contractor_id=None, cancel_reason=reason)
    return {"work_order_id": work_order_id, "status": "cancelled", "released_contractor_id": released}


@tool(effect="write", errors={
    "work_order_not_found": "unknown work order id",
    "not_completed": "the work order is not completed yet",
    "already_invoiced": "the work order already has an invoice",
})
def issue_maintenance_invoice(state, work_order_id: str) -> dict:
    """Create the invoice for a completed work order: hours x contractor rate + materials.

    The invoice is billed to the tenant if the contractor recorded tenant damage, otherwise to the owner.

    Args:
        work_order_id: a completed work order.
    """
    w = _pm_work_order(state, work_order_id)
    if w["status"] != "completed":
        raise ToolFailure("not_completed", f"{work_order_id} is {w['status']}; invoice only completed work")
    if w["invoice_id"]:
        raise ToolFailure("already_invoiced", f"{work_order_id} already has invoice {w['invoice_id']}")
    rate = state["contractors"][w["contractor_id"]]["hourly_rate_cents"]
    amount = int(round(w["hours"] * rate)) + w["materials_cents"]
    iid = _pm_next_id(state["invoices"], "INV")
    bill_to = "tenant" if w["tenant_damage"] else "owner"
    state["invoices"][iid] = {"work_order_id": work_order_id, "contractor_id": w["contractor_id"], "bill_to": bill_to,
                              "amount_cents": amount, "status": "unpaid", "paid_cents": 0}
    w["invoice_id"] = iid
    return {"invoice_id": iid, "amount_cents": amount, "bill_to": bill_to}


@tool(effect="write", errors={
    "invoice_not_found": "unknown invoice id",
    "already_paid": "the invoice is already paid",
    "amount_mismatch": "the payment is not exactly the amount due",
})
def pay_maintenance_invoice(state, invoice_id: str, amount_cents: Annotated[int, {"minimum": 1}]) -> dict:
    """Pay a maintenance invoice in full.

    Args:
        invoice_id: the invoice, e.g. "INV-7001".
        amount_cents: the amount paid, in cents; must equal the invoice amount.
    """
    inv = state["invoices"].get(invoice_id)
    if inv is None:
        raise ToolFailure("invoice_not_found", f"no invoice {invoice_id}")
    if inv["status"] == "paid":
        raise ToolFailure("already_paid", f"{invoice_id} was already paid")
    if amount_cents != inv["amount_cents"]:
        raise ToolFailure("amount_mismatch", f"{invoice_id} is for {inv['amount_cents']} cents; pay exactly that amount")
    inv["status"] = "paid"
    inv["paid_cents"] = amount_cents
    return {"invoice_id": invoice_id, "status": "paid", "paid_cents": amount_cents}
