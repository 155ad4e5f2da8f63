"""issue_tracker: every tool, its success path, resulting state and declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("issue_tracker") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def test_list_tracker_projects(h):
    r = h.ok("list_tracker_projects", {})
    web = next(p for p in r["projects"] if p["project_key"] == "WEB")
    assert web["lead"] == "alex" and web["issues_not_done"] == 5
    h.err("list_tracker_projects", {"project_key": "WEB"}, kind="invalid_arguments")


def test_list_project_issues(h):
    keys = [i["issue_key"] for i in h.ok("list_project_issues", {"project_key": "WEB"})["issues"]]
    assert keys == [f"WEB-{n}" for n in range(1, 7)]
    r = h.ok("list_project_issues", {"project_key": "WEB", "status": "open"})
    assert {i["issue_key"] for i in r["issues"]} == {"WEB-1", "WEB-2", "WEB-6"}
    assert [i["issue_key"] for i in h.ok("list_project_issues", {"project_key": "API", "assignee": "fumi"})["issues"]] \
        == ["API-2", "API-5"]
    title = h.state()["issues"]["WEB-4"]["title"]
    hits = h.ok("list_project_issues", {"project_key": "WEB", "text": title.upper()})["issues"]
    assert "WEB-4" in [i["issue_key"] for i in hits]
    h.ok("update_issue_labels", {"issue_key": "WEB-6", "add": ["docs"]})
    assert "WEB-6" in [i["issue_key"] for i in h.ok("list_project_issues", {"project_key": "WEB", "label": "docs"})["issues"]]
    h.err("list_project_issues", {"project_key": "NOPE"}, code="project_not_found")
    h.err("list_project_issues", {"project_key": "WEB", "status": "closed"}, kind="invalid_arguments")


def test_get_tracker_issue(h):
    i = h.ok("get_tracker_issue", {"issue_key": "WEB-3"})
    assert i["status"] == "in_progress" and i["assignee"] == "chidi" and len(i["comments"]) == 1
    h.err("get_tracker_issue", {"issue_key": "WEB-99"}, code="issue_not_found")


def test_create_tracker_issue(h):
    r = h.ok("create_tracker_issue", {"project_key": "WEB", "reporter": "bea", "title": "Broken footer links",
                                      "issue_type": "bug", "priority": "high", "labels": ["frontend", "bug"]})
    assert r["issue_key"] == "WEB-7"
    s = h.state()
    i = s["issues"]["WEB-7"]
    assert i["status"] == "open" and i["assignee"] is None and i["labels"] == ["bug", "frontend"] and i["reporter"] == "bea"
    assert s["projects"]["WEB"]["next_number"] == 8
    args = {"project_key": "API", "reporter": "eitan", "title": "Rate limit headers", "issue_type": "feature"}
    h.err("create_tracker_issue", {**args, "project_key": "MOB"}, code="project_not_found")
    h.err("create_tracker_issue", {**args, "reporter": "chidi"}, code="not_a_member")
    h.err("create_tracker_issue", {**args, "labels": ["frontend"]}, code="unknown_label")
    h.err("create_tracker_issue", {**args, "issue_type": "epic"}, kind="invalid_arguments")
    h.err("create_tracker_issue", {**args, "title": "x"}, kind="invalid_arguments")


def test_assign_tracker_issue(h):
    r = h.ok("assign_tracker_issue", {"issue_key": "WEB-1", "assignee": "dana"})
    assert r["previous_assignee"] is None and h.state()["issues"]["WEB-1"]["assignee"] == "dana"
    h.ok("assign_tracker_issue", {"issue_key": "WEB-1", "assignee": None})
    assert h.state()["issues"]["WEB-1"]["assignee"] is None
    h.ok("assign_tracker_issue", {"issue_key": "WEB-3", "assignee": "bea"})
    h.err("assign_tracker_issue", {"issue_key": "WEB-3", "assignee": None}, code="assignee_required")
    h.err("assign_tracker_issue", {"issue_key": "WEB-4", "assignee": "alex"}, code="reviewer_conflict")
    h.err("assign_tracker_issue", {"issue_key": "WEB-5", "assignee": "bea"}, code="issue_closed")
    h.err("assign_tracker_issue", {"issue_key": "WEB-1", "assignee": "eitan"}, code="not_a_member")
    h.err("assign_tracker_issue", {"issue_key": "WEB-0", "assignee": "bea"}, code="issue_not_found")
    h.err("assign_tracker_issue", {"issue_key": "WEB-1"}, kind="invalid_arguments")


def test_transition_issue_full_workflow(h):
    h.err("transition_issue", {"issue_key": "WEB-1", "to_status": "in_progress", "actor": "alex"}, code="assignee_required")
    h.ok("assign_tracker_issue", {"issue_key": "WEB-1", "assignee": "chidi"})
    h.ok("transition_issue", {"issue_key": "WEB-1", "to_status": "in_progress", "actor": "chidi"})
    h.err("transition_issue", {"issue_key": "WEB-1", "to_status": "review", "actor": "chidi"}, code="reviewer_required")
    h.err("transition_issue", {"issue_key": "WEB-1", "to_status": "review", "actor": "chidi", "reviewer": "chidi"},
          code="reviewer_required")
    h.err("transition_issue", {"issue_key": "WEB-1", "to_status": "review", "actor": "chidi", "reviewer": "fumi"},
          code="not_a_member")
    h.ok("transition_issue", {"issue_key": "WEB-1", "to_status": "review", "actor": "chidi", "reviewer": "bea"})
    h.err("transition_issue", {"issue_key": "WEB-1", "to_status": "done", "actor": "chidi"}, code="not_reviewer")
    h.err("transition_issue", {"issue_key": "WEB-1", "to_status": "in_progress", "actor": "bea"}, code="comment_required")
    h.ok("transition_issue", {"issue_key": "WEB-1", "to_status": "in_progress", "actor": "bea", "comment": "add tests"})
    h.ok("transition_issue", {"issue_key": "WEB-1", "to_status": "review", "actor": "chidi", "reviewer": "bea"})
    r = h.ok("transition_issue", {"issue_key": "WEB-1", "to_status": "done", "actor": "bea"})
    assert r["from"] == "review" and r["status"] == "done"
    i = h.state()["issues"]["WEB-1"]
    assert i["status"] == "done" and i["reviewer"] == "bea"
    assert [x["to"] for x in i["history"]] == ["in_progress", "review", "in_progress", "review", "done"]
    assert i["comments"] == [{"author": "bea", "body": "add tests"}]


def test_transition_issue_errors(h):
    h.err("transition_issue", {"issue_key": "WEB-2", "to_status": "done", "actor": "bea"}, code="invalid_transition")
    h.err("transition_issue", {"issue_key": "WEB-2", "to_status": "review", "actor": "bea", "reviewer": "alex"},
          code="invalid_transition")
    h.err("transition_issue", {"issue_key": "WEB-5", "to_status": "open", "actor": "chidi"}, code="comment_required")
    r = h.ok("transition_issue", {"issue_key": "WEB-5", "to_status": "open", "actor": "chidi", "comment": "regressed"})
    assert r["reviewer"] is None and h.state()["issues"]["WEB-5"]["status"] == "open"
    h.err("transition_issue", {"issue_key": "WEB-2", "to_status": "in_progress", "actor": "eitan"}, code="not_a_member")
    h.err("transition_issue", {"issue_key": "WEB-77", "to_status": "open", "actor": "bea"}, code="issue_not_found")
    h.err("transition_issue", {"issue_key": "WEB-2", "to_status": "closed", "actor": "bea"}, kind="invalid_arguments")


def test_comment_on_issue(h):
    r = h.ok("comment_on_issue", {"issue_key": "WEB-3", "author": "alex", "body": "Any update?"})
    assert r["comment_count"] == 2
    assert h.state()["issues"]["WEB-3"]["comments"][-1] == {"author": "alex", "body": "Any update?"}
    h.err("comment_on_issue", {"issue_key": "WEB-3", "author": "fumi", "body": "hi"}, code="not_a_member")
    h.err("comment_on_issue", {"issue_key": "WEB-42", "author": "alex", "body": "hi"}, code="issue_not_found")
    h.err("comment_on_issue", {"issue_key": "WEB-3", "author": "alex", "body": ""}, kind="invalid_arguments")


def test_update_issue_labels(h):
    before = set(h.state()["issues"]["API-3"]["labels"])
    r = h.ok("update_issue_labels", {"issue_key": "API-3", "add": ["security"], "remove": ["docs"]})
    assert r["labels"] == sorted((before | {"security"}) - {"docs"})
    assert h.state()["issues"]["API-3"]["labels"] == r["labels"]
    h.err("update_issue_labels", {"issue_key": "API-3", "add": ["ux"]}, code="unknown_label")
    h.err("update_issue_labels", {"issue_key": "API-9", "add": ["docs"]}, code="issue_not_found")


def test_set_issue_priority(h):
    h.ok("set_issue_priority", {"issue_key": "API-1", "priority": "critical"})
    assert h.state()["issues"]["API-1"]["priority"] == "critical"
    h.err("set_issue_priority", {"issue_key": "API-4", "priority": "low"}, code="issue_closed")
    h.err("set_issue_priority", {"issue_key": "API-99", "priority": "low"}, code="issue_not_found")
    h.err("set_issue_priority", {"issue_key": "API-1", "priority": "urgent"}, kind="invalid_arguments")
