"""What the FAKE Kubernetes API server (k8s/fake_apiserver.py) knows of objects: the kinds it
serves, label and field selectors, merge patches, timestamps and the API error it answers with.
Shared by the store, its controllers and its HTTP handler."""

from __future__ import annotations

import datetime as dt
import random
import re
import string
from typing import Any

CORE = ""
KINDS: dict[tuple[str, str], tuple[str, str]] = {
    # (group, plural): (kind, version)
    (CORE, "pods"): ("Pod", "v1"),
    (CORE, "services"): ("Service", "v1"),
    (CORE, "configmaps"): ("ConfigMap", "v1"),
    (CORE, "secrets"): ("Secret", "v1"),
    (CORE, "events"): ("Event", "v1"),
    (CORE, "persistentvolumeclaims"): ("PersistentVolumeClaim", "v1"),
    ("batch", "jobs"): ("Job", "v1"),
    ("networking.k8s.io", "networkpolicies"): ("NetworkPolicy", "v1"),
    ("trainer.kubeflow.org", "trainjobs"): ("TrainJob", "v1alpha1"),
    ("agents.x-k8s.io", "sandboxes"): ("Sandbox", "v1beta1"),
    ("extensions.agents.x-k8s.io", "sandboxclaims"): ("SandboxClaim", "v1beta1"),
    ("extensions.agents.x-k8s.io", "sandboxtemplates"): ("SandboxTemplate", "v1beta1"),
    ("extensions.agents.x-k8s.io", "sandboxwarmpools"): ("SandboxWarmPool", "v1beta1"),
}
BUILTIN_GROUPS = {CORE, "batch", "networking.k8s.io"}
TRAINER_GROUPS = {"trainer.kubeflow.org"}
SANDBOX_GROUPS = {"agents.x-k8s.io", "extensions.agents.x-k8s.io"}
TERMINAL = ("Succeeded", "Failed")
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
WARM_POOL_LABEL = "agents.x-k8s.io/warm-pool-sandbox"
POD_NAME_ANNOTATION = "agents.x-k8s.io/pod-name"


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rand_suffix(n: int = 5) -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=n))


# --------------------------------------------------------------- selectors
def parse_label_selector(s: str | None) -> list[tuple[str, str, list[str]]]:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h` -> [(key, op, values)]."""
    if not s:
        return []
    terms, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    terms.append(cur)
    out = []
    for t in (t.strip() for t in terms):
        if not t:
            continue
        m = re.match(r"^([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)$", t)
        if m:
            out.append((m.group(1), m.group(2), [v.strip() for v in m.group(3).split(",") if v.strip()]))
        elif "!=" in t:
            k, v = t.split("!=", 1)
            out.append((k.strip(), "!=", [v.strip()]))
        elif "=" in t:
            k, v = t.replace("==", "=").split("=", 1)
            out.append((k.strip(), "=", [v.strip()]))
        elif t.startswith("!"):
            out.append((t[1:].strip(), "!exists", []))
        else:
            out.append((t, "exists", []))
    return out


def labels_match(labels: dict[str, str], reqs: list[tuple[str, str, list[str]]]) -> bool:
    for key, op, values in reqs:
        v = labels.get(key)
        if op == "=" and v != values[0]:
            return False
        if op == "!=" and v == values[0]:
            return False
        if op == "in" and v not in values:
            return False
        if op == "notin" and v in values:
            return False
        if op == "exists" and v is None:
            return False
        if op == "!exists" and v is not None:
            return False
    return True


def fields_match(obj: dict, selector: str | None) -> bool:
    for term in (selector or "").split(","):
        term = term.strip()
        if not term:
            continue
        neg = "!=" in term
        path, value = term.split("!=" if neg else "=", 1)
        cur: Any = obj
        for part in path.replace("==", "").split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if (str(cur) == value) == neg:
            return False
    return True


def merge_patch(target: dict, patch: dict) -> None:
    """RFC 7386 JSON merge patch, in place."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            merge_patch(target[k], v)
        else:
            target[k] = v


class HttpError(Exception):
    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message
