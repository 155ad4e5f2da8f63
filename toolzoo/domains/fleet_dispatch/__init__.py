"""A delivery fleet's dispatch console: vehicles, drivers, jobs, assignments, status updates, maintenance holds."""

CATEGORY = "transportation_logistics"
DESCRIPTION = "Dispatcher assistant for a regional delivery fleet: match jobs to vehicles and drivers within capacity, licence and hours rules, track job status, and put vehicles on maintenance hold."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["assign_dispatch_job"],
     "message": "the dispatch server timed out; check get_dispatch_job before retrying"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_fleet_vehicles", "list_dispatch_jobs"]},
]
