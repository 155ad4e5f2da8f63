import random

IT_USERS = ["alex", "bea", "chidi", "dana", "eitan", "fumi"]
IT_LAST = ["Moreno", "Schulz", "Obi", "Kowalski", "Levi", "Tanaka", "Nguyen", "Ruiz", "Park", "Mensah"]
IT_TITLES = {
    "bug": ["Login button unresponsive on Safari", "Crash when uploading an empty file", "Dates show in UTC",
            "Pagination skips the last page", "Password reset email never arrives", "Timeout on large exports"],
    "feature": ["Dark mode", "Export reports to CSV", "Bulk edit of tags", "Webhook retries", "SSO with Okta"],
    "task": ["Upgrade the ORM", "Rotate API keys", "Write runbook for deploys", "Remove feature flag cleanup"],
}
IT_PROJECTS = {
    "WEB": {"name": "Web app", "lead": "alex", "members": ["alex", "bea", "chidi", "dana"],
            "labels": ["bug", "frontend", "ux", "docs", "performance"]},
    "API": {"name": "Public API", "lead": "dana", "members": ["dana", "eitan", "fumi", "bea"],
            "labels": ["backend", "security", "docs", "performance", "breaking-change"]},
}
# (key, status, assignee, reviewer)
IT_SCENARIO = [
    ("WEB-1", "open", None, None), ("WEB-2", "open", "bea", None), ("WEB-3", "in_progress", "chidi", None),
    ("WEB-4", "review", "bea", "alex"), ("WEB-5", "done", "chidi", "dana"), ("WEB-6", "open", None, None),
    ("API-1", "in_progress", "eitan", None), ("API-2", "review", "fumi", "dana"), ("API-3", "open", None, None),
    ("API-4", "done", "eitan", "fumi"), ("API-5", "open", "fumi", None),
]


def seed(rng: random.Random) -> dict:
    users = {u: {"name": f"{u.title()} {rng.choice(IT_LAST)}", "role": "lead" if u in ("alex", "dana") else "engineer"}
             for u in IT_USERS}
    projects = {k: {**v, "members": list(v["members"]), "labels": list(v["labels"])} for k, v in IT_PROJECTS.items()}
    issues = {}
    for key, status, assignee, reviewer in IT_SCENARIO:
        project = key.split("-")[0]
        kind = rng.choice(["bug", "bug", "feature", "task"])
        members = projects[project]["members"]
        issues[key] = {
            "project": project, "title": rng.choice(IT_TITLES[kind]), "type": kind,
            "priority": rng.choice(["low", "medium", "medium", "high", "critical"]),
            "status": status, "assignee": assignee, "reviewer": reviewer, "reporter": rng.choice(members),
            "labels": sorted(rng.sample(projects[project]["labels"], rng.randint(0, 2))),
            "description": "", "comments": [], "history": [],
        }
    for p in projects:
        projects[p]["next_number"] = 1 + sum(1 for k in issues if k.startswith(p + "-"))
    issues["WEB-3"]["comments"].append({"author": "chidi", "body": "Reproduced locally, working on a fix."})
    return {"users": users, "projects": projects, "issues": issues}
