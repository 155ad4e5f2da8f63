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

The parts: object kinds and selectors in k8s/fake_objects.py, the controllers in
k8s/fake_controllers.py, pod exec in k8s/fake_exec.py, the HTTP handler in k8s/fake_http.py;
this module holds the store and the test-facing API.
"""

from __future__ import annotations

import base64
import copy
import itertools
import re
import shutil
import tempfile
import threading
import uuid
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path

from k8s.fake_controllers import Controllers
from k8s.fake_exec import ExecSession, PodExec, kill_process
from k8s.fake_http import Handler, Server
from k8s.fake_objects import (
    BUILTIN_GROUPS,
    CORE,
    KINDS,
    SANDBOX_GROUPS,
    TRAINER_GROUPS,
    HttpError,
    labels_match,
    merge_patch,
    parse_label_selector,
    rand_suffix,
    utc_now,
)

__all__ = ["FakeApiServer"]


@dataclass
class _Fault:
    method: str
    path: re.Pattern
    status: int
    reason: str
    message: str
    times: int


class FakeApiServer(Controllers, PodExec):
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
        self._execs: list[ExecSession] = []
        self._timers: list[threading.Timer] = []
        self._ips = itertools.count(2)
        self._root = Path(tempfile.mkdtemp(prefix="tooldojo-fake-apiserver-"))
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> FakeApiServer:
        handler = type("Handler", (Handler,), {"fake": self})
        self._httpd = Server(("127.0.0.1", 0), handler)
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
            kill_process(ex.proc)
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
                raise HttpError(422, "Invalid", f"{kind}: metadata.name or metadata.generateName is required")
            meta["name"] = meta["generateName"] + rand_suffix()
        key = (group, plural, ns, meta["name"])
        if key in self._objs:
            raise HttpError(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists')
        obj["apiVersion"] = f"{group}/{version}" if group else version
        obj["kind"] = kind
        meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=utc_now(), resourceVersion=self._next_rv())
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
            raise HttpError(409, "AlreadyExists", f'{plural} "{name}" already exists')
        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = (f"{group}/{version}" if group else version), kind
        obj.setdefault("metadata", {}).update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=utc_now())
        return obj

    def _delete(self, group: str, plural: str, ns: str, name: str) -> dict:
        key = (group, plural, ns, name)
        obj = self._objs.pop(key, None)
        if obj is None:
            raise HttpError(404, "NotFound", f'{plural} "{name}" not found')
        obj["metadata"]["resourceVersion"] = self._next_rv()
        obj["metadata"]["deletionTimestamp"] = utc_now()
        self._emit("DELETED", group, plural, obj)
        uid = obj["metadata"]["uid"]
        if plural == "pods":
            for ex in self._execs:
                if ex.pod == (ns, name):
                    kill_process(ex.proc)
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
            raise HttpError(404, "NotFound", f'{plural} "{name}" not found')
        was_suspended = bool((obj.get("spec") or {}).get("suspend"))
        protected = {k: obj["metadata"][k] for k in ("name", "namespace", "uid", "creationTimestamp")}
        merge_patch(obj, copy.deepcopy(patch))
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
            "firstTimestamp": utc_now(), "lastTimestamp": utc_now(), "count": 1,
        })
