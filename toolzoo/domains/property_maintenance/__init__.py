"""A property manager's maintenance desk: tenants report problems, work orders get a contractor, are completed and invoiced."""

CATEGORY = "real_estate_property"
DESCRIPTION = ("Maintenance desk of a residential property manager: tenants and units, work orders, "
               "contractor assignment, completion and invoices.")
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["assign_maintenance_contractor", "pay_maintenance_invoice"],
     "message": "the maintenance system timed out; nothing changed, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_unit_work_orders", "find_contractors_for_trade"]},
]
