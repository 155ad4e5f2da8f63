"""FakeApiServer: a FAKE Kubernetes API server on 127.0.0.1, owned by this repo, for tests only.

It is not Kubernetes. It implements the subset of the REST API that tooldojo uses, closely enough
for the official kubernetes Python client to talk to it unmodified:

* create / get / list / delete / watch (label and field selectors, chunked JSON-lines watch
  streams, resourceVersions) for Pods, Services, ConfigMaps, Secrets, Events,
  PersistentVolumeClaims, Jobs, NetworkPolicies and, once "installed", the custom resources
  TrainJob (trainer.kubeflow.org) and Sandbox / SandboxClaim / SandboxTemplate / SandboxWarmPool
  (agent-sandbox);
* discovery (`/api`, `/apis`, `/apis/<group>/<version>`), so "is this CRD installed?" works;
* pod logs (`tailLines`, `follow` until the pod ends);
* pod exec over a real WebSocket (the v5/v4 channel protocol the client's `kubernetes.stream`
  speaks). The command runs as a LOCAL SUBPROCESS of the fake under bubblewrap, with the pod's
  emptyDir and ConfigMap volumes materialised as temporary directories and bound at their
  mountPaths. That gives the command the paths it expects; it gives it none of the pod's isolation
  (no image, no securityContext, no resource limits, no NetworkPolicy).
* tiny controllers, so state machines can be driven: a Job makes its (indexed) pods, a TrainJob
  makes one pod per node, a SandboxWarmPool keeps warm Sandboxes, a SandboxClaim adopts one (or
  cold-starts one); deleting an owner deletes its dependents (ownerReferences).

Pods stay Pending until the test moves them (`set_pod_phase`, `set_waiting`, `set_unschedulable`),
unless `auto_start_pods=True`. Job and TrainJob status follow their pods. `fail()` injects error
responses (403, 409, 500...). `calls` records every request.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import socket
import string
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

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

_ROUTE_CORE = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$")
_ROUTE_GROUP = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$")
_ROUTE_DISCOVERY = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/?$")
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rand(n: int = 5) -> str:
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


# ------------------------------------------------------------- websockets
def _ws_recv(rfile) -> tuple[int, bytes] | None:
    """One (possibly fragmented) client message: (opcode, payload); None at EOF."""
    opcode, payload = None, b""
    while True:
        head = rfile.read(2)
        if len(head) < 2:
            return None
        fin, op = head[0] & 0x80, head[0] & 0x0F
        masked, n = head[1] & 0x80, head[1] & 0x7F
        if n == 126:
            n = int.from_bytes(rfile.read(2), "big")
        elif n == 127:
            n = int.from_bytes(rfile.read(8), "big")
        mask = rfile.read(4) if masked else b""
        data = rfile.read(n)
        if len(data) < n:
            return None
        if masked:
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        if op >= 0x8:  # control frames are never fragmented
            return op, data
        if op != 0:
            opcode = op
        payload += data
        if fin:
            return opcode or 0x2, payload


def _ws_frame(payload: bytes, opcode: int = 0x2) -> bytes:
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | opcode, n])
    elif n < 1 << 16:
        head = bytes([0x80 | opcode, 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 127]) + n.to_bytes(8, "big")
    return head + payload


@dataclass
class _Fault:
    method: str
    path: re.Pattern
    status: int
    reason: str
    message: str
    times: int


@dataclass
class _Exec:
    proc: subprocess.Popen
    pod: tuple[str, str]
    closed: threading.Event = field(default_factory=threading.Event)


class FakeApiServer:
    """A fake Kubernetes API server on 127.0.0.1 (see the module docstring). Use as a context manager."""

    def __init__(self, *, auto_start_pods: bool = False, start_delay_s: float = 0.0,
                 trainer: bool = False, agent_sandbox: bool = False):
        self.auto_start_pods = auto_start_pods
        self.start_delay_s = start_delay_s
        self.groups: set[str] = set(BUILTIN_GROUPS)
        if trainer:
            self.install_trainer()
        if agent_sandbox:
            self.install_agent_sandbox()
        self.calls: list[tuple[str, str, dict[str, list[str]]]] = []
        self._objs: dict[tuple[str, str, str, str], dict] = {}
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._events: list[tuple[int, str, str, str, str, dict]] = []  # rv, type, group, plural, ns, obj
        self._rv = itertools.count(1)
        self._last_rv = 0
        self._logs: dict[tuple[str, str, str], str] = {}
        self._faults: list[_Fault] = []
        self._execs: list[_Exec] = []
        self._timers: list[threading.Timer] = []
        self._ips = itertools.count(2)
        self._root = Path(tempfile.mkdtemp(prefix="tooldojo-fake-apiserver-"))
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> FakeApiServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # watches and log follows end on their own (they watch _stopping)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-apiserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        for t in self._timers:
            t.cancel()
        for ex in list(self._execs):
            _kill(ex.proc)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def write_kubeconfig(self, path: str | Path, namespace: str = "default", context: str = "fake") -> Path:
        """A kubeconfig pointing at this fake (no credentials), so the real kubeconfig loader is exercised."""
        import yaml

        p = Path(path)
        p.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
        }))
        return p

    def install_trainer(self) -> None:
        self.groups |= TRAINER_GROUPS

    def install_agent_sandbox(self) -> None:
        self.groups |= SANDBOX_GROUPS

    # ----------------------------------------------------------- test drivers
    def fail(self, method: str, path_regex: str, status: int, message: str = "injected failure",
             reason: str | None = None, times: int = 1) -> None:
        """Answer the next `times` requests matching `method` and `path_regex` with an error."""
        reasons = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "AlreadyExists", 422: "Invalid",
                   429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
        with self._lock:
            self._faults.append(_Fault(method.upper(), re.compile(path_regex), status,
                                       reason or reasons.get(status, "Error"), message, times))

    def get(self, kind: str, name: str, namespace: str = "default") -> dict | None:
        group, plural = self._kind_key(kind)
        with self._lock:
            obj = self._objs.get((group, plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        group, plural = self._kind_key(kind)
        reqs = parse_label_selector(label_selector)
        with self._lock:
            return [copy.deepcopy(o) for (g, p, ns, _), o in sorted(self._objs.items())
                    if g == group and p == plural and (namespace is None or ns == namespace)
                    and labels_match(o["metadata"].get("labels") or {}, reqs)]

    def set_pod_phase(self, namespace: str, name: str, phase: str, *, exit_code: int | None = None,
                      reason: str | None = None, message: str | None = None) -> None:
        """Move a pod: Pending -> Running -> Succeeded / Failed (controllers follow)."""
        with self._lock:
            pod = self._objs[(CORE, "pods", namespace, name)]
            self._apply_phase(pod, phase, exit_code=exit_code, reason=reason, message=message)
            self._modified(CORE, "pods", pod)
            self._reconcile_owners(pod)

    def set_waiting(self, namespace: str, name: str, reason: str, message: str = "") -> None:
        """Keep a pod Pending with its container waiting (ErrImagePull, CreateContainerConfigError...)."""
        with self._lock:
            pod = self._objs[(CORE, "pods", namespace, name)]
            pod["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
                             "containerStatuses": [
                                 {"name": c["name"], "ready": False, "restartCount": 0, "image": c.get("image", ""),
                                  "imageID": "", "state": {"waiting": {"reason": reason, "message": message}}}
                                 for c in pod["spec"]["containers"]]}
            self._modified(CORE, "pods", pod)
            self._event(namespace, pod, "Warning", "Failed", message or reason)

    def set_unschedulable(self, namespace: str, name: str, message: str) -> None:
        with self._lock:
            pod = self._objs[(CORE, "pods", namespace, name)]
            pod["status"] = {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}
            self._modified(CORE, "pods", pod)
            self._event(namespace, pod, "Warning", "FailedScheduling", message, source="default-scheduler")

    def append_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        with self._lock:
            obj = self._objs[(CORE, "pods", namespace, pod)]
            c = container or obj["spec"]["containers"][0]["name"]
            self._logs[(namespace, pod, c)] = self._logs.get((namespace, pod, c), "") + text

    def add_event(self, namespace: str, kind: str, name: str, reason: str, message: str,
                  type_: str = "Normal") -> None:
        with self._lock:
            group, plural = self._kind_key(kind)
            obj = self._objs.get((group, plural, namespace, name)) or {
                "kind": kind, "metadata": {"name": name, "namespace": namespace, "uid": ""}}
            self._event(namespace, obj, type_, reason, message)

    def pods(self, namespace: str, label_selector: str | None = None) -> list[dict]:
        return self.list("Pod", namespace, label_selector)

    def exec_count(self) -> int:
        with self._lock:
            return sum(1 for e in self._execs if e.proc.poll() is None)

    # --------------------------------------------------------------- store
    @staticmethod
    def _kind_key(kind: str) -> tuple[str, str]:
        for key, (k, _) in KINDS.items():
            if k == kind:
                return key
        raise KeyError(kind)

    def _next_rv(self) -> str:
        self._last_rv = next(self._rv)
        return str(self._last_rv)

    def _emit(self, type_: str, group: str, plural: str, obj: dict) -> None:
        self._events.append((int(obj["metadata"]["resourceVersion"]), type_, group, plural,
                             obj["metadata"]["namespace"], copy.deepcopy(obj)))
        self._cond.notify_all()

    def _modified(self, group: str, plural: str, obj: dict) -> None:
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._emit("MODIFIED", group, plural, obj)

    def _insert(self, group: str, plural: str, ns: str, body: dict) -> dict:
        kind, version = KINDS[(group, plural)]
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise _HttpError(422, "Invalid", f"{kind}: metadata.name or metadata.generateName is required")
            meta["name"] = meta["generateName"] + _rand()
        key = (group, plural, ns, meta["name"])
        if key in self._objs:
            raise _HttpError(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists')
        obj["apiVersion"] = f"{group}/{version}" if group else version
        obj["kind"] = kind
        meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=_now(), resourceVersion=self._next_rv())
        meta.setdefault("labels", {})
        meta.setdefault("annotations", {})
        if kind == "Secret" and "stringData" in obj:
            data = obj.setdefault("data", {})
            for k, v in obj.pop("stringData").items():
                data[k] = base64.b64encode(str(v).encode()).decode()
        if kind == "Pod":
            obj.setdefault("status", {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]})
        self._objs[key] = obj
        self._emit("ADDED", group, plural, obj)
        self._after_create(group, plural, obj)
        return obj

    def _dry_run(self, group: str, plural: str, ns: str, body: dict) -> dict:
        """What a create would return, stored nowhere (the fake admits everything it can store)."""
        kind, version = KINDS[(group, plural)]
        name = (body.get("metadata") or {}).get("name")
        if name and (group, plural, ns, name) in self._objs:
            raise _HttpError(409, "AlreadyExists", f'{plural} "{name}" already exists')
        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = (f"{group}/{version}" if group else version), kind
        obj.setdefault("metadata", {}).update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=_now())
        return obj

    def _delete(self, group: str, plural: str, ns: str, name: str) -> dict:
        key = (group, plural, ns, name)
        obj = self._objs.pop(key, None)
        if obj is None:
            raise _HttpError(404, "NotFound", f'{plural} "{name}" not found')
        obj["metadata"]["resourceVersion"] = self._next_rv()
        obj["metadata"]["deletionTimestamp"] = _now()
        self._emit("DELETED", group, plural, obj)
        uid = obj["metadata"]["uid"]
        if plural == "pods":
            for ex in self._execs:
                if ex.pod == (ns, name):
                    _kill(ex.proc)
            shutil.rmtree(self._root / ns / name, ignore_errors=True)
        # garbage collection: everything this object owned goes too
        for (g, p, n, nm), o in list(self._objs.items()):
            if n == ns and any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or []):
                if (g, p, n, nm) in self._objs:
                    self._delete(g, p, n, nm)
        self._after_delete(group, plural, obj)
        return obj

    def _patch(self, group: str, plural: str, ns: str, name: str, patch: dict) -> dict:
        obj = self._objs.get((group, plural, ns, name))
        if obj is None:
            raise _HttpError(404, "NotFound", f'{plural} "{name}" not found')
        was_suspended = bool((obj.get("spec") or {}).get("suspend"))
        protected = {k: obj["metadata"][k] for k in ("name", "namespace", "uid", "creationTimestamp")}
        _merge(obj, copy.deepcopy(patch))
        obj["metadata"].update(protected)
        self._modified(group, plural, obj)
        if was_suspended and not (obj.get("spec") or {}).get("suspend"):
            self._after_create(group, plural, obj)  # resumed: the controller starts its pods now
        return obj

    def _event(self, ns: str, involved: dict, type_: str, reason: str, message: str, source: str = "fake") -> None:
        meta = involved["metadata"]
        self._insert(CORE, "events", ns, {
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:12]}"},
            "involvedObject": {"kind": involved.get("kind"), "name": meta["name"], "namespace": ns,
                               "uid": meta.get("uid", ""), "apiVersion": involved.get("apiVersion", "v1")},
            "reason": reason, "message": message, "type": type_, "source": {"component": source},
            "firstTimestamp": _now(), "lastTimestamp": _now(), "count": 1,
        })

    # --------------------------------------------------------- controllers
    def _after_create(self, group: str, plural: str, obj: dict) -> None:
        kind = obj["kind"]
        if kind == "Pod":
            self._event(obj["metadata"]["namespace"], obj, "Normal", "Scheduled",
                        f"Successfully assigned {obj['metadata']['namespace']}/{obj['metadata']['name']} to fake-node",
                        source="default-scheduler")
            if self.auto_start_pods:
                t = threading.Timer(self.start_delay_s, self._auto_run,
                                    args=(obj["metadata"]["namespace"], obj["metadata"]["name"], obj["metadata"]["uid"]))
                t.daemon = True
                self._timers.append(t)
                t.start()
        elif kind == "Job":
            self._run_job(obj)
        elif kind == "TrainJob":
            self._run_trainjob(obj)
        elif kind == "SandboxWarmPool":
            self._fill_warm_pool(obj)
        elif kind == "SandboxClaim":
            self._claim(obj)

    def _after_delete(self, group: str, plural: str, obj: dict) -> None:
        if obj["kind"] == "Sandbox":
            pool = obj["metadata"].get("labels", {}).get(WARM_POOL_LABEL)
            wp = self._objs.get(("extensions.agents.x-k8s.io", "sandboxwarmpools", obj["metadata"]["namespace"], pool or ""))
            if wp is not None:
                self._fill_warm_pool(wp)

    def _auto_run(self, ns: str, name: str, uid: str) -> None:
        with self._lock:
            pod = self._objs.get((CORE, "pods", ns, name))
            if pod is None or pod["metadata"]["uid"] != uid or pod["status"].get("phase") != "Pending":
                return
            if (pod["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("waiting"):
                return  # a test parked it (image pull error...)
            self._apply_phase(pod, "Running")
            self._modified(CORE, "pods", pod)
            self._reconcile_owners(pod)

    def _apply_phase(self, pod: dict, phase: str, *, exit_code: int | None = None, reason: str | None = None,
                     message: str | None = None) -> None:
        now = _now()
        st = pod.setdefault("status", {})
        st["phase"] = phase
        st.setdefault("startTime", now)
        st.setdefault("podIP", f"10.0.0.{next(self._ips) % 250 + 2}")
        st["hostIP"] = "10.1.0.1"
        pod["spec"].setdefault("nodeName", "fake-node")
        if phase == "Running":
            state = {"running": {"startedAt": now}}
            ready = "True"
            self._event(pod["metadata"]["namespace"], pod, "Normal", "Started", "Started container")
        elif phase in TERMINAL:
            code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
            state = {"terminated": {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                                    "message": message or "", "startedAt": st["startTime"], "finishedAt": now}}
            ready = "False"
        else:
            state = {"waiting": {"reason": reason or "ContainerCreating"}}
            ready = "False"
        st["conditions"] = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": ready}]
        if reason and phase in TERMINAL:
            st["reason"] = reason
        if message:
            st["message"] = message
        st["containerStatuses"] = [{"name": c["name"], "ready": ready == "True", "restartCount": 0,
                                    "image": c.get("image", ""), "imageID": "", "state": state}
                                   for c in pod["spec"]["containers"]]

    def _owner_ref(self, owner: dict) -> dict:
        return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}

    def _new_pod(self, ns: str, name: str, template: dict, labels: dict, annotations: dict,
                 owner: dict, hostname: str | None = None) -> dict:
        spec = copy.deepcopy(template.get("spec") or {})
        if hostname:
            spec["hostname"] = hostname
        meta = {"name": name, "labels": {**(template.get("metadata") or {}).get("labels", {}), **labels},
                "annotations": {**(template.get("metadata") or {}).get("annotations", {}), **annotations},
                "ownerReferences": [self._owner_ref(owner)]}
        pod = self._insert(CORE, "pods", ns, {"metadata": meta, "spec": spec})
        self._event(ns, owner, "Normal", "SuccessfulCreate", f"Created pod: {name}", source=f"{owner['kind'].lower()}-controller")
        return pod

    def _run_job(self, job: dict) -> None:
        spec, meta = job["spec"], job["metadata"]
        if spec.get("suspend"):
            return
        n = int(spec.get("completions") or spec.get("parallelism") or 1)
        indexed = spec.get("completionMode") == "Indexed"
        sub = spec["template"]["spec"].get("subdomain")
        for i in range(n):
            labels = {"batch.kubernetes.io/controller-uid": meta["uid"], "controller-uid": meta["uid"],
                      "batch.kubernetes.io/job-name": meta["name"], "job-name": meta["name"]}
            ann = {}
            if indexed:
                labels[INDEX_KEY] = ann[INDEX_KEY] = str(i)
            name = f"{meta['name']}-{i}-{_rand()}" if indexed else f"{meta['name']}-{_rand()}"
            self._new_pod(meta["namespace"], name, spec["template"], labels, ann, job,
                          hostname=f"{meta['name']}-{i}" if indexed and sub else None)
        job["status"] = {"active": n, "startTime": _now(), "ready": 0}
        self._modified("batch", "jobs", job)

    def _run_trainjob(self, tj: dict) -> None:
        spec, meta = tj["spec"], tj["metadata"]
        if spec.get("suspend"):
            return
        trainer = spec.get("trainer") or {}
        n = int(trainer.get("numNodes") or 1)
        patch: dict = {}
        for rp in spec.get("runtimePatches") or []:
            for rj in (((rp.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get(
                    "replicatedJobs") or []:
                if rj.get("name") == "node":
                    patch = (((rj.get("template") or {}).get("spec") or {}).get("template")) or {}
        pspec = patch.get("spec") or {}
        mounts = next((c.get("volumeMounts") for c in pspec.get("containers") or [] if c.get("name") == "node"), [])
        container = {"name": "node", "image": trainer.get("image", "runtime-default"),
                     "command": trainer.get("command"), "args": trainer.get("args"), "env": trainer.get("env"),
                     "resources": trainer.get("resourcesPerNode"), "volumeMounts": mounts}
        template = {"metadata": patch.get("metadata") or {}, "spec": {
            "containers": [{k: v for k, v in container.items() if v}], "restartPolicy": "Never",
            **{k: pspec[k] for k in ("volumes", "nodeSelector", "tolerations", "serviceAccountName") if k in pspec}}}
        for i in range(n):
            labels = {"jobset.sigs.k8s.io/jobset-name": meta["name"], "jobset.sigs.k8s.io/replicatedjob-name": "node",
                      "batch.kubernetes.io/job-name": f"{meta['name']}-node-0", INDEX_KEY: str(i)}
            self._new_pod(meta["namespace"], f"{meta['name']}-node-0-{i}-{_rand()}", template, labels,
                          {INDEX_KEY: str(i)}, tj)
        tj["status"] = {"conditions": []}
        self._modified("trainer.kubeflow.org", "trainjobs", tj)

    def _reconcile_owners(self, pod: dict) -> None:
        ns = pod["metadata"]["namespace"]
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref["kind"] == "Job":
                job = self._objs.get(("batch", "jobs", ns, ref["name"]))
                if job is not None:
                    self._reconcile_job(job)
            elif ref["kind"] == "TrainJob":
                tj = self._objs.get(("trainer.kubeflow.org", "trainjobs", ns, ref["name"]))
                if tj is not None:
                    self._reconcile_trainjob(tj)
            elif ref["kind"] == "Sandbox":
                sb = self._objs.get(("agents.x-k8s.io", "sandboxes", ns, ref["name"]))
                if sb is not None:
                    self._reconcile_sandbox(sb, pod)

    def _owned_pods(self, owner: dict) -> list[dict]:
        uid = owner["metadata"]["uid"]
        return [o for (g, p, _, _), o in self._objs.items() if p == "pods" and g == CORE
                and any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]

    def _reconcile_job(self, job: dict) -> None:
        pods = self._owned_pods(job)
        phases = [p["status"].get("phase") for p in pods]
        st = job.setdefault("status", {})
        st["active"] = sum(ph not in TERMINAL for ph in phases)
        st["ready"] = sum(ph == "Running" for ph in phases)
        st["succeeded"] = phases.count("Succeeded")
        st["failed"] = phases.count("Failed")
        completions = int(job["spec"].get("completions") or 1)
        backoff = int(job["spec"].get("backoffLimit", 6))
        conds = st.setdefault("conditions", [])
        if not conds:
            if st["succeeded"] >= completions:
                conds += [{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": _now()},
                          {"type": "Complete", "status": "True", "lastTransitionTime": _now()}]
                st["completionTime"] = _now()
            elif st["failed"] > backoff:
                msg = "Job has reached the specified backoff limit"
                conds += [{"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": msg},
                          {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": msg,
                           "lastTransitionTime": _now()}]
                self._event(job["metadata"]["namespace"], job, "Warning", "BackoffLimitExceeded", msg,
                            source="job-controller")
        self._modified("batch", "jobs", job)

    def _reconcile_trainjob(self, tj: dict) -> None:
        phases = [p["status"].get("phase") for p in self._owned_pods(tj)]
        conds = tj.setdefault("status", {}).setdefault("conditions", [])
        if not any(c["type"] in ("Complete", "Failed") for c in conds):
            if phases and all(ph == "Succeeded" for ph in phases):
                conds.append({"type": "Complete", "status": "True", "reason": "JobsCompleted",
                              "message": "jobset completed successfully", "lastTransitionTime": _now()})
            elif "Failed" in phases:
                conds.append({"type": "Failed", "status": "True", "reason": "JobsFailed",
                              "message": "jobset failed", "lastTransitionTime": _now()})
        self._modified("trainer.kubeflow.org", "trainjobs", tj)

    # agent-sandbox: a warm pool keeps `replicas` unclaimed Sandboxes; a claim adopts one
    def _template(self, ns: str, name: str) -> dict | None:
        return self._objs.get(("extensions.agents.x-k8s.io", "sandboxtemplates", ns, name))

    def _new_sandbox(self, ns: str, name: str, template: dict, owner: dict, labels: dict) -> dict:
        pod_template = template["spec"]["podTemplate"]
        sb = self._insert("agents.x-k8s.io", "sandboxes", ns, {
            "metadata": {"name": name, "labels": labels, "ownerReferences": [self._owner_ref(owner)],
                         "annotations": {POD_NAME_ANNOTATION: name}},
            "spec": {"podTemplate": copy.deepcopy(pod_template)}})
        self._new_pod(ns, name, pod_template, labels, {}, sb)
        return sb

    def _fill_warm_pool(self, wp: dict) -> None:
        ns, name = wp["metadata"]["namespace"], wp["metadata"]["name"]
        tmpl = self._template(ns, (wp["spec"].get("sandboxTemplateRef") or {}).get("name", ""))
        if tmpl is None:
            return
        have = [o for (g, p, n, _), o in self._objs.items() if p == "sandboxes" and n == ns
                and o["metadata"]["labels"].get(WARM_POOL_LABEL) == name]
        for _ in range(int(wp["spec"].get("replicas", 1)) - len(have)):
            self._new_sandbox(ns, f"{name}-{_rand()}", tmpl, wp, {WARM_POOL_LABEL: name})
        wp["status"] = {"replicas": int(wp["spec"].get("replicas", 1)), "readyReplicas": 0}
        self._modified("extensions.agents.x-k8s.io", "sandboxwarmpools", wp)

    def _claim(self, claim: dict) -> None:
        ns, meta = claim["metadata"]["namespace"], claim["metadata"]
        pool_name = (claim["spec"].get("warmPoolRef") or {}).get("name", "")
        wp = self._objs.get(("extensions.agents.x-k8s.io", "sandboxwarmpools", ns, pool_name))
        extra = ((claim["spec"].get("additionalPodMetadata") or {}).get("labels")) or {}
        if wp is None:
            claim["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "WarmPoolNotFound",
                                               "message": f"SandboxWarmPool {pool_name!r} not found",
                                               "lastTransitionTime": _now()}]}
            self._modified("extensions.agents.x-k8s.io", "sandboxclaims", claim)
            return
        warm = sorted((o for (g, p, n, _), o in self._objs.items() if p == "sandboxes" and n == ns
                       and o["metadata"]["labels"].get(WARM_POOL_LABEL) == pool_name),
                      key=lambda o: int(o["metadata"]["resourceVersion"]))
        if warm:
            sb = warm[0]
            sb["metadata"]["labels"].pop(WARM_POOL_LABEL, None)
            sb["metadata"]["labels"].update(extra)
            sb["metadata"]["ownerReferences"] = [self._owner_ref(claim)]
            self._modified("agents.x-k8s.io", "sandboxes", sb)
            pod = self._objs.get((CORE, "pods", ns, sb["metadata"]["annotations"][POD_NAME_ANNOTATION]))
            if pod is not None:
                pod["metadata"]["labels"].pop(WARM_POOL_LABEL, None)
                pod["metadata"]["labels"].update(extra)
                self._modified(CORE, "pods", pod)
            self._fill_warm_pool(wp)
        else:
            tmpl = self._template(ns, (wp["spec"].get("sandboxTemplateRef") or {}).get("name", ""))
            if tmpl is None:
                claim["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "TemplateNotFound",
                                                   "message": "SandboxTemplate not found", "lastTransitionTime": _now()}]}
                self._modified("extensions.agents.x-k8s.io", "sandboxclaims", claim)
                return
            sb = self._new_sandbox(ns, meta["name"], tmpl, claim, extra)
            pod = self._objs.get((CORE, "pods", ns, meta["name"]))
        ready = pod is not None and pod["status"].get("phase") == "Running"
        claim["status"] = {"sandbox": {"name": sb["metadata"]["name"]},
                           "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                           "reason": "SandboxReady" if ready else "SandboxNotReady",
                                           "message": "", "lastTransitionTime": _now()}]}
        self._modified("extensions.agents.x-k8s.io", "sandboxclaims", claim)

    def _reconcile_sandbox(self, sb: dict, pod: dict) -> None:
        ready = pod["status"].get("phase") == "Running"
        sb["status"] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                        "reason": "DependenciesReady" if ready else "DependenciesNotReady",
                                        "message": "", "lastTransitionTime": _now()}],
                        "podIPs": [pod["status"].get("podIP")] if ready else []}
        self._modified("agents.x-k8s.io", "sandboxes", sb)
        for ref in sb["metadata"].get("ownerReferences") or []:
            if ref["kind"] == "SandboxClaim":
                claim = self._objs.get(("extensions.agents.x-k8s.io", "sandboxclaims", sb["metadata"]["namespace"],
                                        ref["name"]))
                if claim is not None:
                    claim.setdefault("status", {})["conditions"] = sb["status"]["conditions"]
                    self._modified("extensions.agents.x-k8s.io", "sandboxclaims", claim)

    # ---------------------------------------------------------------- exec
    def _exec_argv(self, pod: dict, container: dict, command: list[str]) -> list[str]:
        """bubblewrap argv running `command` with the pod's emptyDir/ConfigMap volumes at their mountPaths."""
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise _HttpError(500, "InternalError", "the fake API server runs exec under bubblewrap, which is not installed")
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        root = self._root / ns / name
        volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-user-try", "--unshare-pid", "--unshare-net",
                "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox"]
        for d in ("usr", "etc"):
            argv += ["--ro-bind", f"/{d}", f"/{d}"]
        for link in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
            p = Path("/") / link
            if p.is_symlink():
                argv += ["--symlink", os.readlink(p), f"/{link}"]
            elif p.is_dir():
                argv += ["--ro-bind", str(p), f"/{link}"]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        for vm in container.get("volumeMounts") or []:
            vol = volumes.get(vm["name"], {})
            local = root / "volumes" / vm["name"]
            if "configMap" in vol:
                local.mkdir(parents=True, exist_ok=True)
                cm = self._objs.get((CORE, "configmaps", ns, vol["configMap"]["name"]))
                if cm is None:
                    raise _HttpError(500, "InternalError", f"configmap {vol['configMap']['name']} is missing")
                for k, v in (cm.get("data") or {}).items():
                    (local / k).write_text(v)
                argv += ["--ro-bind", str(local), vm["mountPath"]]
            elif "emptyDir" in vol:
                local.mkdir(parents=True, exist_ok=True)
                local.chmod(0o1777)
                argv += ["--bind", str(local), vm["mountPath"]]
        argv += ["--chdir", container.get("workingDir") or "/"]
        for env in container.get("env") or []:
            if "value" in env:
                argv += ["--setenv", env["name"], env["value"]]
        return argv + ["--", *command]

    def _serve_exec(self, h: _Handler, ns: str, name: str, query: dict[str, list[str]]) -> None:
        with self._lock:
            pod = self._objs.get((CORE, "pods", ns, name))
            if pod is None:
                raise _HttpError(404, "NotFound", f'pods "{name}" not found')
            if pod["status"].get("phase") != "Running":
                raise _HttpError(400, "BadRequest", f"pod {name} is not running (phase {pod['status'].get('phase')})")
            cname = (query.get("container") or [pod["spec"]["containers"][0]["name"]])[0]
            container = next((c for c in pod["spec"]["containers"] if c["name"] == cname), None)
            if container is None:
                raise _HttpError(400, "BadRequest", f"container {cname} is not valid for pod {name}")
            argv = self._exec_argv(pod, container, query.get("command") or [])
        key = h.headers.get("Sec-WebSocket-Key")
        if not key or "websocket" not in (h.headers.get("Upgrade") or "").lower():
            raise _HttpError(400, "BadRequest", "exec needs a websocket upgrade")
        offered = [p.strip() for p in (h.headers.get("Sec-WebSocket-Protocol") or "").split(",") if p.strip()]
        proto = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered), None)
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        h.send_response(101, "Switching Protocols")
        h.send_header("Upgrade", "websocket")
        h.send_header("Connection", "Upgrade")
        h.send_header("Sec-WebSocket-Accept", accept)
        if proto:
            h.send_header("Sec-WebSocket-Protocol", proto)
        h.end_headers()
        h.wfile.flush()
        h.close_connection = True
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"})
        ex = _Exec(proc, (ns, name))
        with self._lock:
            self._execs.append(ex)
        send_lock = threading.Lock()

        def send(payload: bytes, opcode: int = 0x2) -> None:
            with send_lock:
                try:
                    h.wfile.write(_ws_frame(payload, opcode))
                    h.wfile.flush()
                except OSError:
                    pass

        def pump(stream, channel: int) -> None:
            while True:
                data = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
                if not data:
                    return
                send(bytes([channel]) + data)

        pumps = [threading.Thread(target=pump, args=(proc.stdout, 1), daemon=True),
                 threading.Thread(target=pump, args=(proc.stderr, 2), daemon=True)]
        for t in pumps:
            t.start()

        def reader() -> None:
            try:
                while True:
                    msg = _ws_recv(h.rfile)
                    if msg is None:
                        break
                    if msg[0] == 0x8:
                        send(msg[1][:2] or b"\x03\xe8", 0x8)  # answer the close handshake (RFC 6455 5.5.1)
                        break
                    op, data = msg
                    if op == 0x9:
                        send(data, 0xA)
                        continue
                    if not data:
                        continue
                    if data[0] == 0 and proc.stdin is not None:
                        try:
                            proc.stdin.write(data[1:])
                            proc.stdin.flush()
                        except (BrokenPipeError, ValueError, OSError):
                            pass
                    elif data[0] == 255 and data[1:2] == b"\x00" and proc.stdin is not None:
                        proc.stdin.close()  # v5: the client closed stdin
            except (OSError, ValueError):
                pass
            finally:
                ex.closed.set()
                try:
                    if proc.stdin is not None:
                        proc.stdin.close()
                except OSError:
                    pass
                # the client is gone: give the command a moment to see EOF, then kill it
                try:
                    proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    _kill(proc)

        threading.Thread(target=reader, daemon=True).start()
        code = proc.wait()
        for t in pumps:
            t.join(timeout=5)
        if not ex.closed.is_set():
            status = ({"metadata": {}, "status": "Success"} if code == 0 else
                      {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                       "message": f"command terminated with non-zero exit code: {code}",
                       "details": {"causes": [{"reason": "ExitCode", "message": str(code if code > 0 else 137)}]}})
            send(b"\x03" + json.dumps(status).encode())
            send(b"\x03\xe8", 0x8)
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        with self._lock:
            if ex in self._execs:
                self._execs.remove(ex)


def _merge(target: dict, patch: dict) -> None:
    """RFC 7386 JSON merge patch, in place."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = v


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            proc.kill()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _HttpError(Exception):
    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class _Handler(BaseHTTPRequestHandler):
    fake: FakeApiServer
    protocol_version = "HTTP/1.1"
    server_version = "tooldojo-fake-apiserver/1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -------------------------------------------------------------- plumbing
    def _send_json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _status(self, e: _HttpError) -> None:
        self._send_json(e.status, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": e.message, "reason": e.reason, "code": e.status})

    def _start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _body(self) -> dict:
        if getattr(self, "_body_read", False):
            return {}
        self._body_read = True
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise _HttpError(400, "BadRequest", "request body is not JSON") from None

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    # --------------------------------------------------------------- routing
    def _dispatch(self, method: str) -> None:
        fake = self.fake
        self._body_read = False
        url = urlparse(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        fake.calls.append((method, url.path, query))
        try:
            with fake._lock:
                for f in fake._faults:
                    if f.times > 0 and f.method == method and f.path.search(url.path):
                        f.times -= 1
                        raise _HttpError(f.status, f.reason, f.message)
            self._route(method, url.path, query)
        except _HttpError as e:
            if method in ("POST", "PUT", "PATCH"):
                try:
                    self._body()
                except _HttpError:
                    pass
            self._status(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _route(self, method: str, path: str, query: dict[str, list[str]]) -> None:
        fake = self.fake
        if path in ("/api", "/api/"):
            return self._send_json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        if path in ("/apis", "/apis/"):
            groups = [{"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                       "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}}
                      for g, v in sorted({(g, v) for (g, _), (_, v) in KINDS.items() if g and g in fake.groups})]
            return self._send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        m = _ROUTE_CORE.match(path)
        if m:
            group, version = CORE, "v1"
        else:
            m = _ROUTE_GROUP.match(path)
            if m:
                group, version = m.group("group"), m.group("version")
            else:
                d = _ROUTE_DISCOVERY.match(path)
                if d and d.group("group") in fake.groups:
                    res = [{"name": p, "kind": k, "namespaced": True, "verbs": ["create", "delete", "get", "list", "watch"]}
                           for (g, p), (k, v) in KINDS.items() if g == d.group("group") and v == d.group("version")]
                    if res:
                        return self._send_json(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                                     "groupVersion": f"{d.group('group')}/{d.group('version')}",
                                                     "resources": res})
                raise _HttpError(404, "NotFound", "the server could not find the requested resource")
        ns, plural, name, sub = m.group("ns"), m.group("plural"), m.group("name"), m.group("sub")
        if (group, plural) not in KINDS or group not in fake.groups or KINDS[(group, plural)][1] != version:
            raise _HttpError(404, "NotFound", "the server could not find the requested resource")
        if sub == "log" and plural == "pods" and method == "GET":
            return self._logs(ns, name, query)
        if sub == "exec" and plural == "pods" and method in ("GET", "POST"):
            return fake._serve_exec(self, ns, name, query)
        if sub is not None:
            raise _HttpError(404, "NotFound", f"subresource {sub} is not served by the fake")
        if name is None:
            if method == "GET":
                if (query.get("watch") or ["false"])[0] in ("true", "1"):
                    return self._watch(group, plural, ns, query)
                return self._list(group, plural, ns, query)
            if method == "POST":
                body = self._body()
                with fake._lock:
                    if (query.get("dryRun") or [""])[0] == "All":
                        return self._send_json(201, fake._dry_run(group, plural, ns, body))
                    obj = fake._insert(group, plural, ns, body)
                    return self._send_json(201, obj)
        else:
            if method == "GET":
                with fake._lock:
                    obj = fake._objs.get((group, plural, ns, name))
                    if obj is None:
                        raise _HttpError(404, "NotFound", f'{plural} "{name}" not found')
                    return self._send_json(200, obj)
            if method == "DELETE":
                self._body()
                with fake._lock:
                    obj = fake._delete(group, plural, ns, name)
                return self._send_json(200, obj)
            if method == "PATCH":
                ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                if ctype != "application/merge-patch+json":
                    self._body()
                    raise _HttpError(415, "UnsupportedMediaType", f"the fake only applies merge patches, not {ctype}")
                body = self._body()
                with fake._lock:
                    obj = fake._patch(group, plural, ns, name, body)
                return self._send_json(200, obj)
        raise _HttpError(405, "MethodNotAllowed", f"{method} is not supported by the fake for {path}")

    def _select(self, group: str, plural: str, ns: str, query: dict[str, list[str]]) -> list[dict]:
        reqs = parse_label_selector((query.get("labelSelector") or [""])[0])
        fsel = (query.get("fieldSelector") or [""])[0]
        return [o for (g, p, n, _), o in sorted(self.fake._objs.items(), key=lambda kv: kv[0])
                if g == group and p == plural and n == ns
                and labels_match(o["metadata"].get("labels") or {}, reqs) and fields_match(o, fsel)]

    def _list(self, group: str, plural: str, ns: str, query: dict[str, list[str]]) -> None:
        kind, version = KINDS[(group, plural)]
        with self.fake._lock:
            items = self._select(group, plural, ns, query)
            self._send_json(200, {"kind": f"{kind}List", "apiVersion": f"{group}/{version}" if group else version,
                                  "metadata": {"resourceVersion": str(self.fake._last_rv)}, "items": items})

    def _watch(self, group: str, plural: str, ns: str, query: dict[str, list[str]]) -> None:
        fake = self.fake
        reqs = parse_label_selector((query.get("labelSelector") or [""])[0])
        fsel = (query.get("fieldSelector") or [""])[0]
        timeout = float((query.get("timeoutSeconds") or ["1800"])[0])
        rv = (query.get("resourceVersion") or [""])[0]
        deadline = time.monotonic() + timeout
        self._start_stream("application/json")

        def line(type_: str, obj: dict) -> None:
            self._chunk(json.dumps({"type": type_, "object": obj}).encode() + b"\n")

        with fake._lock:
            if rv in ("", "0"):
                for obj in self._select(group, plural, ns, query):
                    line("ADDED", obj)
                seen = fake._last_rv
            else:
                seen = int(rv)
        try:
            while not fake._stopping.is_set():
                with fake._cond:
                    pending = [e for e in fake._events if e[0] > seen]
                    if not pending:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        fake._cond.wait(min(left, 0.5))
                        continue
                    seen = pending[-1][0]
                    batch = [(t, o) for (_, t, g, p, n, o) in pending if g == group and p == plural and n == ns
                             and labels_match(o["metadata"].get("labels") or {}, reqs) and fields_match(o, fsel)]
                for t, o in batch:
                    line(t, o)
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _logs(self, ns: str, name: str, query: dict[str, list[str]]) -> None:
        fake = self.fake
        with fake._lock:
            pod = fake._objs.get((CORE, "pods", ns, name))
            if pod is None:
                raise _HttpError(404, "NotFound", f'pods "{name}" not found')
            cname = (query.get("container") or [pod["spec"]["containers"][0]["name"]])[0]
            if pod["status"].get("phase") == "Pending":
                waiting = ((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting") or {}
                raise _HttpError(400, "BadRequest", f'container "{cname}" in pod "{name}" is waiting to start: '
                                                    f'{waiting.get("reason", "ContainerCreating")}')
            uid = pod["metadata"]["uid"]
        follow = (query.get("follow") or ["false"])[0] in ("true", "1")
        tail = query.get("tailLines")
        self._start_stream("text/plain")
        sent = 0
        try:
            with fake._lock:
                text = fake._logs.get((ns, name, cname), "")
            if tail:
                lines = text.splitlines(keepends=True)
                out = "".join(lines[-int(tail[0]):]) if int(tail[0]) > 0 else ""
                self._chunk(out.encode())
            else:
                self._chunk(text.encode())
            sent = len(text)
            while follow and not fake._stopping.is_set():
                time.sleep(0.02)
                with fake._lock:
                    pod = fake._objs.get((CORE, "pods", ns, name))
                    text = fake._logs.get((ns, name, cname), "")
                    done = pod is None or pod["metadata"]["uid"] != uid or pod["status"].get("phase") in TERMINAL
                if len(text) > sent:
                    self._chunk(text[sent:].encode())
                    sent = len(text)
                if done:
                    break
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
