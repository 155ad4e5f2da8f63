"""Submit and manage tooldojo jobs on a cluster: the logic behind `dojo submit` and `dojo jobs ...`.

Everything takes a `K8sClient` and returns plain data; the CLI only prints. A job is found by name
among Jobs and TrainJobs labelled app.kubernetes.io/managed-by=tooldojo; its pods carry
tooldojo.dev/job=<name> and the completion index (= node rank) as batch.kubernetes.io/job-completion-index.

Submission order: PVC (kept), ConfigMap (the record resubmit reads; kept until `cancel --purge`),
then the Job/TrainJob created *suspended*, then the Secret and the headless Service with an
ownerReference to it (so they go when the job goes), then the job is resumed. With a Kueue queue
label the job is left to Kueue: the Secret and Service are created first, unowned.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from k8s.client import AlreadyExists, K8sClient, K8sError, NotFound
from k8s.config import SubmitConfigError, parse_submit_config
from k8s.render import (
    ANN_COMMIT,
    ANN_GPUS,
    ANN_NODES,
    ANN_RESUBMIT,
    INDEX_ANNOTATION,
    JOB_CONTAINER,
    LABEL_JOB,
    LABEL_KIND,
    TRAINJOB_CONTAINER,
    Rendered,
    render,
)

MANAGED_SELECTOR = "app.kubernetes.io/managed-by=tooldojo,tooldojo.dev/job"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
TERMINAL = ("Succeeded", "Failed")


@dataclass
class PodInfo:
    name: str
    node: int
    phase: str
    reason: str = ""


@dataclass
class JobInfo:
    name: str
    namespace: str
    workload: str  # Job | TrainJob
    kind: str  # train | synth | eval
    phase: str  # Pending | Running | Succeeded | Failed | Suspended
    reason: str
    nodes: int
    gpus: int
    created: str
    commit: str
    resubmit_of: str | None
    pods: list[PodInfo] = field(default_factory=list)

    @property
    def age(self) -> str:
        return age(self.created)


def age(timestamp: str | None, now: dt.datetime | None = None) -> str:
    if not timestamp:
        return "-"
    t = dt.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    s = max(0, int(((now or dt.datetime.now(dt.timezone.utc)) - t).total_seconds()))
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit}"
    return f"{s}s"


# ------------------------------------------------------------------ submit
def submit(client: K8sClient, r: Rendered) -> dict:
    """Create every object of a rendered job; returns the created Job/TrainJob."""
    ns = r.namespace
    wl = copy.deepcopy(r.workload)
    kind = wl["kind"]
    if kind == "TrainJob" and not client.serves("TrainJob"):
        raise K8sError(f"{client.server} does not serve trainer.kubeflow.org/v1alpha1 TrainJobs: install Kubeflow "
                       "Trainer v2, or use k8s.kind: job (a plain indexed Job, no operator needed)")
    try:
        client.get(kind, r.name, ns)
    except NotFound:
        pass
    else:
        raise AlreadyExists(409, "AlreadyExists",
                            f"{kind} {r.name} already exists in {ns}: see `dojo jobs status {r.name} -n {ns}`; "
                            f"pass --name, or `dojo jobs resubmit {r.name} -n {ns}`")
    owned = []
    for m in r.manifests:
        if m is r.workload:
            continue
        m = copy.deepcopy(m)
        if m["kind"] == "Secret":
            m["stringData"] = dict(r.secret_values)
        if m["kind"] == "PersistentVolumeClaim":
            try:
                client.create(m, ns)
            except AlreadyExists:
                pass  # the checkpoints volume outlives jobs
        elif m["kind"] == "ConfigMap":
            _create_replacing(client, m, ns)  # a cancelled job's record with the same name is stale
        else:
            owned.append(m)
    kueue = KUEUE_QUEUE in (wl["metadata"].get("labels") or {})
    if kueue:
        for m in owned:
            _create_replacing(client, m, ns)
        return client.create(wl, ns)
    if owned:
        wl["spec"]["suspend"] = True
    created = client.create(wl, ns)
    try:
        ref = {"apiVersion": created["apiVersion"], "kind": kind, "name": r.name, "uid": created["metadata"]["uid"],
               "blockOwnerDeletion": False}
        for m in owned:
            m["metadata"]["ownerReferences"] = [ref]
            _create_replacing(client, m, ns)
        if owned:
            created = client.patch(kind, r.name, ns, {"spec": {"suspend": False}})
    except BaseException:
        client.delete(kind, r.name, ns, missing_ok=True)
        raise
    return created


def _create_replacing(client: K8sClient, m: dict, ns: str) -> None:
    try:
        client.create(m, ns)
    except AlreadyExists:
        client.delete(m["kind"], m["metadata"]["name"], ns, missing_ok=True)
        client.create(m, ns)


def server_dry_run(client: K8sClient, r: Rendered) -> list[str]:
    """Send every object with dryRun=All: the API server validates and admits (webhooks, quotas, Pod Security)
    without storing anything. Returns 'Kind/name' of each accepted object."""
    if r.workload["kind"] == "TrainJob" and not client.serves("TrainJob"):
        raise K8sError(f"{client.server} does not serve trainer.kubeflow.org/v1alpha1 TrainJobs")
    accepted = []
    for m in r.manifests:
        m = copy.deepcopy(m)
        if m["kind"] == "Secret":
            m["stringData"] = {k: "dry-run" for k in m.get("stringData") or {}}
        try:
            client.create(m, r.namespace, server_dry_run=True)
        except AlreadyExists:
            if m["kind"] not in ("PersistentVolumeClaim", "ConfigMap"):
                raise
        accepted.append(f"{m['kind']}/{m['metadata']['name']}")
    return accepted


# ------------------------------------------------------------------- find
def get_workload(client: K8sClient, ns: str, name: str) -> dict:
    kinds = ["Job"] + (["TrainJob"] if client.serves("TrainJob") else [])
    for kind in kinds:
        try:
            obj = client.get(kind, name, ns)
        except NotFound:
            continue
        if (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") != "tooldojo":
            raise K8sError(f"{kind} {name} in {ns} was not submitted by tooldojo")
        return obj
    raise NotFound(404, "NotFound", f"no tooldojo job {name} in namespace {ns}; see `dojo jobs list -n {ns}`")


def list_workloads(client: K8sClient, ns: str) -> list[dict]:
    out = client.list("Job", ns, label_selector=MANAGED_SELECTOR)
    if client.serves("TrainJob"):
        out += client.list("TrainJob", ns, label_selector=MANAGED_SELECTOR)
    return sorted(out, key=lambda o: (o["metadata"].get("creationTimestamp") or "", o["metadata"]["name"]),
                  reverse=True)


def pods_of(client: K8sClient, ns: str, name: str) -> list[dict]:
    pods = client.list("Pod", ns, label_selector=f"{LABEL_JOB}={name}")
    return sorted(pods, key=lambda p: (_node(p), p["metadata"].get("creationTimestamp") or ""))


def _node(pod: dict) -> int:
    meta = pod["metadata"]
    v = (meta.get("labels") or {}).get(INDEX_ANNOTATION) or (meta.get("annotations") or {}).get(INDEX_ANNOTATION)
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def _pod_reason(pod: dict) -> str:
    st = pod.get("status") or {}
    for cs in st.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if state.get("waiting"):
            w = state["waiting"]
            return f"{w.get('reason', '')}: {w.get('message', '')}".strip(": ")
        if state.get("terminated"):
            t = state["terminated"]
            return f"exit {t.get('exitCode')} ({t.get('reason', '')})"
    for c in st.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason"):
            return f"{c['reason']}: {c.get('message', '')}".strip(": ")
    return st.get("reason") or ""


def job_info(obj: dict, pods: list[dict]) -> JobInfo:
    meta, spec, st = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    ann, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    conds = {c["type"]: c for c in st.get("conditions") or [] if c.get("status") == "True"}
    pinfo = [PodInfo(p["metadata"]["name"], _node(p), (p.get("status") or {}).get("phase", "Pending"),
                     _pod_reason(p)) for p in pods]
    reason = ""
    if "Complete" in conds:
        phase = "Succeeded"
    elif "Failed" in conds:
        phase = "Failed"
        reason = f"{conds['Failed'].get('reason', '')}: {conds['Failed'].get('message', '')}".strip(": ")
    elif spec.get("suspend"):
        phase = "Suspended"
    elif any(p.phase == "Running" for p in pinfo):
        phase = "Running"
    else:
        phase = "Pending"
        waiting = [p for p in pinfo if p.phase == "Pending" and p.reason]
        reason = waiting[0].reason if waiting else ("" if pinfo else "no pods yet")
    if phase == "Failed" and not reason:
        failed = [p for p in pinfo if p.phase == "Failed"]
        reason = failed[0].reason if failed else ""
    return JobInfo(name=meta["name"], namespace=meta.get("namespace", ""), workload=obj["kind"],
                   kind=labels.get(LABEL_KIND, "?"), phase=phase, reason=reason,
                   nodes=int(ann.get(ANN_NODES, "1")), gpus=int(ann.get(ANN_GPUS, "0")),
                   created=meta.get("creationTimestamp", ""), commit=ann.get(ANN_COMMIT, "unknown"),
                   resubmit_of=ann.get(ANN_RESUBMIT), pods=pinfo)


def status(client: K8sClient, ns: str, name: str) -> JobInfo:
    return job_info(get_workload(client, ns, name), pods_of(client, ns, name))


def list_jobs(client: K8sClient, ns: str) -> list[JobInfo]:
    pods = client.list("Pod", ns, label_selector=LABEL_JOB)
    by_job: dict[str, list[dict]] = {}
    for p in pods:
        by_job.setdefault((p["metadata"].get("labels") or {}).get(LABEL_JOB, ""), []).append(p)
    return [job_info(o, sorted(by_job.get(o["metadata"]["name"], []), key=_node)) for o in list_workloads(client, ns)]


# ------------------------------------------------------------------- logs
def node_pod(client: K8sClient, ns: str, name: str, node: int) -> dict:
    pods = [p for p in pods_of(client, ns, name) if _node(p) == node]
    if not pods:
        info = status(client, ns, name)
        raise NotFound(404, "NotFound", f"job {name} has no pod for node {node} (nodes 0..{info.nodes - 1}, "
                                        f"{len(info.pods)} pod(s) so far); see `dojo jobs events {name} -n {ns}`")
    return pods[-1]


def container_of(workload: dict) -> str:
    return TRAINJOB_CONTAINER if workload["kind"] == "TrainJob" else JOB_CONTAINER


def wait_started(client: K8sClient, ns: str, name: str, node: int, *, timeout_s: float | None = None,
                 on_wait: Callable[[str], None] | None = None) -> dict:
    """The node's pod once it has left Pending (Running or finished)."""
    start = time.monotonic()
    deadline = None if timeout_s is None else start + timeout_s
    told = ""
    while True:
        try:
            pod = node_pod(client, ns, name, node)
        except NotFound:
            pod = None
        if pod is not None and (pod.get("status") or {}).get("phase") != "Pending":
            return pod
        info = status(client, ns, name)
        if info.phase in TERMINAL and pod is None:
            raise K8sError(f"job {name} ended ({info.phase}: {info.reason}) before node {node} ran")
        why = _pod_reason(pod) if pod else "no pod yet"
        if on_wait and why != told:
            on_wait(f"waiting for node {node}: {why or 'Pending'}")
            told = why
        if deadline is not None and time.monotonic() > deadline:
            raise K8sError(f"node {node} of job {name} is still Pending: {why}")
        # a pod may not exist yet, so poll: briskly at first, then gently
        time.sleep(0.2 if time.monotonic() - start < 10 else 2.0)


def logs(client: K8sClient, ns: str, name: str, *, node: int = 0, follow: bool = False,
         tail: int | None = None, on_wait: Callable[[str], None] | None = None) -> Iterator[str]:
    workload = get_workload(client, ns, name)
    pod = wait_started(client, ns, name, node, on_wait=on_wait) if follow else node_pod(client, ns, name, node)
    if not follow and (pod.get("status") or {}).get("phase") == "Pending":
        raise K8sError(f"node {node} of job {name} has not started ({_pod_reason(pod) or 'Pending'}); "
                       f"`dojo jobs logs {name} -n {ns} -f` waits for it")
    yield from client.pod_log(pod["metadata"]["name"], ns, container=container_of(workload), follow=follow,
                              tail_lines=tail)


def follow(client: K8sClient, ns: str, name: str, out: Callable[[str], None], *, node: int = 0,
           poll_s: float = 1.0, on_wait: Callable[[str], None] | None = None) -> JobInfo:
    """Stream node `node`'s log to `out`, then wait until the job ends; returns its final state."""
    for line in logs(client, ns, name, node=node, follow=True, on_wait=on_wait):
        out(line)
    start = time.monotonic()
    while True:  # the log ends with node 0's container; the job ends when every node has
        info = status(client, ns, name)
        if info.phase in TERMINAL:
            return info
        time.sleep(min(poll_s, 0.2) if time.monotonic() - start < 10 else poll_s)


# ----------------------------------------------------------------- events
def events(client: K8sClient, ns: str, name: str) -> list[dict]:
    names = {name, f"{name}-config", f"{name}-env"} | {p["metadata"]["name"] for p in pods_of(client, ns, name)}
    evs = [e for e in client.list("Event", ns)
           if (e.get("involvedObject") or {}).get("name") in names
           or (e.get("involvedObject") or {}).get("name", "").startswith(f"{name}-node-")]
    return sorted(evs, key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or
                                      e["metadata"].get("creationTimestamp") or ""))


# ------------------------------------------------------------- cancel etc.
def cancel(client: K8sClient, ns: str, name: str, *, purge: bool = False) -> list[str]:
    obj = get_workload(client, ns, name)
    deleted = []
    if client.delete(obj["kind"], name, ns, propagation="Background", missing_ok=True):
        deleted.append(f"{obj['kind']}/{name}")
    for kind, n in (("Service", name), ("Secret", f"{name}-env")):
        if client.delete(kind, n, ns, missing_ok=True):
            deleted.append(f"{kind}/{n}")
    if purge and client.delete("ConfigMap", f"{name}-config", ns, missing_ok=True):
        deleted.append(f"ConfigMap/{name}-config")
    return deleted


def resubmit(client: K8sClient, ns: str, name: str, *, new_name: str | None = None, from_checkpoint: bool = False,
             environ: dict[str, str] | None = None, trainer_version: str = "2.3") -> Rendered:
    """Re-render a job from the config snapshot in its ConfigMap (the job itself may be gone); a TrainJob
    for Kubeflow Trainer ``trainer_version`` (k8s.render)."""
    import yaml

    try:
        cm = client.get("ConfigMap", f"{name}-config", ns)
    except NotFound:
        raise NotFound(404, "NotFound", f"no config snapshot {name}-config in {ns} (it goes with "
                                        "`dojo jobs cancel --purge`); submit the config file again") from None
    record = yaml.safe_load((cm.get("data") or {}).get("submit.yaml") or "{}")
    submit_cfg = parse_submit_config(record)
    config = record["job"].get("config")
    if from_checkpoint:
        if submit_cfg.job.kind != "train":
            raise SubmitConfigError(f"--from-checkpoint resumes training; {name} is a {submit_cfg.job.kind} job")
        if submit_cfg.k8s.pvc is None:
            raise SubmitConfigError(f"--from-checkpoint needs the checkpoints of {name} on a PVC, and it had no "
                                    "k8s.pvc: its checkpoints went with its pods")
        config = copy.deepcopy(config)
        config["run"]["resume"] = True  # the latest checkpoint in run.output_dir (on the PVC)
    target = new_name or next_name(client, ns, name)
    commit = (cm["metadata"].get("annotations") or {}).get(ANN_COMMIT, "unknown")
    return render(submit_cfg, base_dir=Path.cwd(), git_commit=commit, environ=environ,
                  resubmit_of=name, resolved_config=config, name=target, trainer_version=trainer_version)


def next_name(client: K8sClient, ns: str, name: str) -> str:
    base = re.sub(r"-r\d+$", "", name)
    for i in range(2, 1000):
        cand = f"{base}-r{i}"
        try:
            get_workload(client, ns, cand)
        except NotFound:
            try:
                client.get("ConfigMap", f"{cand}-config", ns)
            except NotFound:
                return cand
    raise K8sError(f"no free resubmit name for {name}; pass --name")


def default_namespace(client: K8sClient | None, given: str | None) -> str:
    return given or (client.namespace if client is not None else None) or os.environ.get(
        "TOOLDOJO_K8S_JOBS_NAMESPACE") or "tooldojo"
