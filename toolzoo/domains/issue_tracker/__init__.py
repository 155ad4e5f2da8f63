"""A software team's issue tracker: projects, issues, assignment, a review workflow, comments and labels."""

CATEGORY = "software_apps"
DESCRIPTION = ("An issue tracker like Jira or Linear: projects with members and labels, issues that move "
               "open -> in_progress -> review -> done under workflow rules, assignment, comments and labels.")
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["transition_issue"], "message": "the tracker timed out; the issue did not move, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["list_project_issues"]},
]
