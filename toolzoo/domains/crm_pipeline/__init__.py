"""A B2B sales CRM: accounts, contacts, deals moving through pipeline stages, activities and a quarterly forecast."""

CATEGORY = "enterprise_business_intelligence"
DESCRIPTION = "Sales operations assistant over a CRM: look up accounts, add contacts, create and advance deals, log activities, report the forecast."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["crm_forecast_report"], "message": "the reporting warehouse timed out; retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["search_crm_accounts", "list_crm_activities"]},
]
