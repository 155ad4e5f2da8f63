from typing import Annotated, Literal

from toolzoo.dsl import ToolFailure, tool

Status = Literal["open", "in_progress", "review", "done"]
Priority = Literal["low", "medium", "high", "critical"]

# allowed (from, to) moves of the workflow
_IT_MOVES = {("open", "in_progress"), ("in_progress", "open"), ("in_progress", "review"),
             ("review", "in_progress"), ("review", "done"), ("done", "open")}


def _it_project(state, project_key):
    if project_key not in state["projects"]:
        raise ToolFailure("project_not_found", f"no project {project_key}; known: {sorted(state['projects'])}")
    return state["projects"][project_key]


def _it_issue(state, issue_key):
    if issue_key not in state["issues"]:
        raise ToolFailure("issue_not_found", f"no issue {issue_key}; issue keys look like WEB-3")
    return state["issues"][issue_key]


def _it_member(state, project_key, user):
    if user not in state["projects"][project_key]["members"]:
        raise ToolFailure("not_a_member", f"{user} is not a member of project {project_key}")


def _it_labels(state, project_key, labels):
    allowed = state["projects"][project_key]["labels"]
    for label in labels:
        if label not in allowed:
            raise ToolFailure("unknown_label", f"{label!r} is not a label of {project_key}; use one of {allowed}")


@tool()
def list_tracker_projects(state) -> dict:
    """List the projects with their lead, members, labels and count of issues not done."""
    out = []
    for key, p in sorted(state["projects"].items()):
        not_done = sum(1 for i in state["issues"].values() if i["project"] == key and i["status"] != "done")
        out.append({"project_key": key, "name": p["name"], "lead": p["lead"], "members": p["members"],
                    "labels": p["labels"], "issues_not_done": not_done})
    return {"projects": out}


@tool(errors={"project_not_found": "unknown project key"})
def list_project_issues(state, project_key: str, status: Literal["open", "in_progress", "review", "done", "any"] = "any",
                        assignee: str | None = None, label: str | None = None, text: str | None = None) -> dict:
    """List a project's issues, filtered by status, assignee, label or title text.

    Args:
        project_key: the project, e.g. "WEB".
        status: only issues in this status; "any" for all.
        assignee: only issues assigned to this username.
        label: only issues with this label.
        text: only issues whose title contains this text (case-insensitive).
    """
    _it_project(state, project_key)
    out = []
    for key, i in sorted(state["issues"].items(), key=lambda kv: int(kv[0].split("-")[1])):
        if i["project"] != project_key or status not in ("any", i["status"]):
            continue
        if assignee is not None and i["assignee"] != assignee:
            continue
        if label is not None and label not in i["labels"]:
            continue
        if text is not None and text.lower() not in i["title"].lower():
            continue
        out.append({"issue_key": key, "title": i["title"], "type": i["type"], "status": i["status"],
                    "priority": i["priority"], "assignee": i["assignee"], "labels": i["labels"]})
    return {"project_key": project_key, "issues": out}


@tool(errors={"issue_not_found": "unknown issue key"})
def get_tracker_issue(state, issue_key: str) -> dict:
    """Show an issue in full: status, people, labels, comments and workflow history.

    Args:
        issue_key: the issue, e.g. "WEB-3".
    """
    return {"issue_key": issue_key, **_it_issue(state, issue_key)}


@tool(effect="write", errors={
    "project_not_found": "unknown project key",
    "not_a_member": "the reporter is not a project member",
    "unknown_label": "a label is not defined in the project",
})
def create_tracker_issue(state, project_key: str, reporter: str, title: Annotated[str, {"minLength": 5, "maxLength": 120}],
                         issue_type: Literal["bug", "feature", "task"], priority: Priority = "medium",
                         description: str = "", labels: list[str] | None = None) -> dict:
    """Create a new open, unassigned issue in a project.

    Args:
        project_key: the project, e.g. "API".
        reporter: username of the member reporting it.
        title: a short summary (5 to 120 characters).
        issue_type: bug, feature or task.
        priority: how urgent it is.
        description: details, steps to reproduce.
        labels: labels from the project's own label list.
    """
    p = _it_project(state, project_key)
    _it_member(state, project_key, reporter)
    labels = sorted(set(labels or []))
    _it_labels(state, project_key, labels)
    key = f"{project_key}-{p['next_number']}"
    p["next_number"] += 1
    state["issues"][key] = {"project": project_key, "title": title.strip(), "type": issue_type, "priority": priority,
                            "status": "open", "assignee": None, "reviewer": None, "reporter": reporter,
                            "labels": labels, "description": description, "comments": [], "history": []}
    return {"issue_key": key, "status": "open"}


@tool(effect="write", errors={
    "issue_not_found": "unknown issue key",
    "not_a_member": "the assignee is not a project member",
    "issue_closed": "done issues cannot be reassigned",
    "assignee_required": "issues in progress or in review must keep an assignee",
    "reviewer_conflict": "the reviewer of an issue in review cannot also be its assignee",
})
def assign_tracker_issue(state, issue_key: str, assignee: str | None) -> dict:
    """Assign an issue to a project member, or unassign it with null.

    Args:
        issue_key: the issue.
        assignee: the member's username, or null to unassign (only allowed while the issue is open).
    """
    i = _it_issue(state, issue_key)
    if i["status"] == "done":
        raise ToolFailure("issue_closed", f"{issue_key} is done; reopen it before reassigning")
    if assignee is None:
        if i["status"] != "open":
            raise ToolFailure("assignee_required", f"{issue_key} is {i['status']}; it must keep an assignee")
    else:
        _it_member(state, i["project"], assignee)
        if assignee == i["reviewer"] and i["status"] == "review":
            raise ToolFailure("reviewer_conflict", f"{assignee} reviews {issue_key}; pick someone else as assignee")
    previous = i["assignee"]
    i["assignee"] = assignee
    return {"issue_key": issue_key, "assignee": assignee, "previous_assignee": previous}


@tool(effect="write", errors={
    "issue_not_found": "unknown issue key",
    "not_a_member": "the actor or reviewer is not a project member",
    "invalid_transition": "the workflow does not allow this move",
    "assignee_required": "starting work needs an assignee",
    "reviewer_required": "moving to review needs a reviewer other than the assignee",
    "not_reviewer": "only the issue's reviewer can approve it or request changes",
    "comment_required": "requesting changes and reopening need a comment",
})
def transition_issue(state, issue_key: str, to_status: Status, actor: str, reviewer: str | None = None,
                     comment: str | None = None) -> dict:
    """Move an issue through the workflow open -> in_progress -> review -> done.

    Allowed moves: open->in_progress (needs an assignee), in_progress->open, in_progress->review (needs
    `reviewer`), review->done (actor must be the reviewer), review->in_progress (reviewer requests changes,
    needs `comment`), done->open (reopen, needs `comment`).

    Args:
        issue_key: the issue to move.
        to_status: the status to move it to.
        actor: username of the member making the move.
        reviewer: for in_progress->review: who reviews (a member other than the assignee).
        comment: a comment recorded with the move; required for changes requested and reopening.
    """
    i = _it_issue(state, issue_key)
    _it_member(state, i["project"], actor)
    frm = i["status"]
    if (frm, to_status) not in _IT_MOVES:
        allowed = sorted(t for f, t in _IT_MOVES if f == frm)
        raise ToolFailure("invalid_transition", f"{issue_key} is {frm}; it can move only to {allowed}")
    note = (comment or "").strip()
    if frm == "open" and not i["assignee"]:
        raise ToolFailure("assignee_required", f"assign {issue_key} before starting work")
    if to_status == "review":
        if not reviewer or reviewer == i["assignee"]:
            raise ToolFailure("reviewer_required", "name a reviewer who is not the assignee")
        _it_member(state, i["project"], reviewer)
    if frm == "review" and actor != i["reviewer"]:
        raise ToolFailure("not_reviewer", f"only {i['reviewer']} (the reviewer) can move {issue_key} out of review")
    if (frm, to_status) in (("review", "in_progress"), ("done", "open")) and not note:
        raise ToolFailure("comment_required", "add a comment explaining what must change or why it is reopened")
    if to_status == "review":
        i["reviewer"] = reviewer
    if to_status == "open" and frm == "done":
        i["reviewer"] = None
    i["status"] = to_status
    i["history"].append({"from": frm, "to": to_status, "by": actor})
    if note:
        i["comments"].append({"author": actor, "body": note})
    return {"issue_key": issue_key, "from": frm, "status": to_status, "reviewer": i["reviewer"]}


@tool(effect="write", errors={"issue_not_found": "unknown issue key", "not_a_member": "the author is not a project member"})
def comment_on_issue(state, issue_key: str, author: str, body: Annotated[str, {"minLength": 1, "maxLength": 2000}]) -> dict:
    """Add a comment to an issue.

    Args:
        issue_key: the issue.
        author: username of the member commenting.
        body: the comment text.
    """
    i = _it_issue(state, issue_key)
    _it_member(state, i["project"], author)
    i["comments"].append({"author": author, "body": body.strip()})
    return {"issue_key": issue_key, "comment_count": len(i["comments"])}


@tool(effect="write", errors={"issue_not_found": "unknown issue key", "unknown_label": "a label is not defined in the project"})
def update_issue_labels(state, issue_key: str, add: list[str] | None = None, remove: list[str] | None = None) -> dict:
    """Add and remove labels on an issue; labels must come from the project's label list.

    Args:
        issue_key: the issue.
        add: labels to add.
        remove: labels to remove; labels not on the issue are ignored.
    """
    i = _it_issue(state, issue_key)
    _it_labels(state, i["project"], add or [])
    labels = (set(i["labels"]) | set(add or [])) - set(remove or [])
    i["labels"] = sorted(labels)
    return {"issue_key": issue_key, "labels": i["labels"]}


@tool(effect="write", errors={"issue_not_found": "unknown issue key", "issue_closed": "done issues cannot be re-prioritised"})
def set_issue_priority(state, issue_key: str, priority: Priority) -> dict:
    """Change an issue's priority.

    Args:
        issue_key: the issue.
        priority: the new priority.
    """
    i = _it_issue(state, issue_key)
    if i["status"] == "done":
        raise ToolFailure("issue_closed", f"{issue_key} is done; reopen it first")
    old = i["priority"]
    i["priority"] = priority
    return {"issue_key": issue_key, "priority": priority, "previous_priority": old}
