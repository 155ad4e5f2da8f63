"""Kubernetes backend: one hardened pod per sandbox; the tool server reached over the pod's exec stream.

    SandboxConfig(backend="kubernetes", image="registry.example/tooldojo-sandbox:TAG",
                  kubernetes=KubernetesOptions(namespace="tooldojo-sandboxes", runtime_class="gvisor"))

A sandbox is a pod whose PID 1 is a tiny init (it reaps orphans and, for bare pods, exits after
`idle_exit_s` without a session, so a pod whose owner died before connecting ends itself). The
tool server (`sandboxes/toolserver.py`, shipped in a ConfigMap named after its hash, so any image
with python3 works) is started by `exec` and speaks JSON lines over that exec stream, exactly as
over Docker's attach stream: a tool call is a round trip on one WebSocket, not a new exec.

Pods get the hardened securityContext (commands as non-root 65534; under Pod Security `baseline`, the
default, the container starts as root with only SETUID/SETGID/SETPCAP/KILL so the tool server can drop
to 65533 before its first request; no privilege escalation, every other capability
dropped, read-only root, RuntimeDefault seccomp, no service-account token, no service links),
size-capped memory-backed emptyDirs for /workspace and /tmp, CPU/memory/ephemeral-storage limits,
an `activeDeadlineSeconds`, an optional RuntimeClass (gVisor) and a deny-all NetworkPolicy that
selects them by label. Creations are rate limited per process (a token bucket), API requests too.

Where the agent-sandbox CRDs are served (`use_crds`), sandboxes are SandboxClaims against a
SandboxWarmPool of a SandboxTemplate holding the same pod template; otherwise bare pods. Either
way, `SandboxPool` on top gives the warm pool of connected sandboxes with reset on release, and
`gc()` reaps by label (pods and claims whose owner process on this host is gone, and finished pods).

Limits the cluster enforces differently: `Limits.pids` has no per-pod field in Kubernetes (set the
kubelet's podPidsLimit); an OOM kill is seen by the tool server only on cgroup v2 nodes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import socket
import threading
import time
import uuid
from typing import Any

import anyio

from sandboxes import owner
from sandboxes.api import SCRATCH, WORKDIR, Sandbox, Transport
from sandboxes.errors import BackendUnavailable, SandboxDead, SandboxError, SandboxStartError
from sandboxes.image import SERVER_SOURCE, image_hash, resolve_image
from sandboxes.models import DEFAULT_IMAGE, KubernetesOptions, SandboxConfig

SANDBOX_LABEL = "tooldojo.dev/sandbox"
EGRESS_LABEL = "tooldojo.dev/egress"
TEMPLATE_LABEL = "tooldojo.dev/template"
MANAGED_BY = {"app.kubernetes.io/name": "tooldojo-sandbox", "app.kubernetes.io/managed-by": "tooldojo"}
CONTAINER = "sandbox"
TOOLSERVER_DIR = "/opt/tooldojo"
NETWORK_POLICY = "tooldojo-sandbox-deny-all"
INIT_MARKER = "tooldojo-sandbox-init"
POD_NAME_ANNOTATION = "agents.x-k8s.io/pod-name"
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKDIR, "LANG": "C.UTF-8"}
# Waiting reasons that will not fix themselves within a sandbox's start timeout.
FATAL_WAITING = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                 "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}

# PID 1 of every sandbox pod: reap orphans; exit on SIGTERM; with an idle limit, exit once no
# other process has existed for that long (standard library only, like the tool server).
INIT_SOURCE = f"""# {INIT_MARKER}
import os, signal, sys, time
idle = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
last = time.monotonic()
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    if any(p.isdigit() and p != "1" for p in os.listdir("/proc")):
        last = time.monotonic()
    elif idle and time.monotonic() - last > idle:
        sys.exit(0)
    time.sleep(1)
"""

# The exec'd command: the tool server, told it may kill every process in the pod on a timeout when
# PID 1 is our init (the pod's own PID namespace; `kill(-1)` spares PID 1 and the caller).
WRAPPER_SOURCE = f"""import json, signal, sys
sys.path.insert(0, sys.argv[1])
import toolserver
class Server(toolserver.Server):
    def __init__(self, config):
        super().__init__(config)
        if config.get("own_pid_namespace") and not self.in_pid_ns:
            try:
                with open("/proc/1/cmdline", "rb") as f:
                    self.in_pid_ns = b"{INIT_MARKER}" in f.read()
            except OSError:
                pass
toolserver.Server = Server
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
toolserver.serve(json.loads(sys.argv[2]))
"""


# ----------------------------------------------------------------- manifests
def toolserver_configmap_name() -> str:
    return f"tooldojo-toolserver-{image_hash()}"


def toolserver_configmap(namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": toolserver_configmap_name(), "namespace": namespace, "labels": dict(MANAGED_BY)},
            "data": {"toolserver.py": SERVER_SOURCE.read_text()}}


def network_policy(namespace: str) -> dict:
    """Deny all ingress and egress for pods labelled tooldojo.dev/egress=deny (the same object ships in
    k8s/manifests/networkpolicy-sandboxes.yaml). Enforced only where the CNI implements NetworkPolicy."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": NETWORK_POLICY, "namespace": namespace, "labels": dict(MANAGED_BY)},
            "spec": {"podSelector": {"matchLabels": {EGRESS_LABEL: "deny"}}, "policyTypes": ["Ingress", "Egress"]}}


def _millicores(cores: float) -> str:
    return f"{max(1, round(cores * 1000))}m"


def pod_template(cfg: SandboxConfig, opts: KubernetesOptions, image: str, *, idle_exit_s: int) -> dict:
    """{metadata: {labels, annotations}, spec: PodSpec} of a sandbox pod (shared by bare pods and SandboxTemplates)."""
    lim, hard = cfg.limits, cfg.hardening
    uid = 65534 if hard.non_root else 0
    run_as = {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid} if hard.non_root else {"runAsUser": 0,
                                                                                               "runAsGroup": 0}
    if separation(cfg, opts) == "uid":
        # Root only for the tool server's first instructions (as on docker): it empties the bounding
        # set and drops to uid 65533 before its first request; commands run as 65534, no capability.
        run_as = {"runAsNonRoot": False, "runAsUser": 0, "runAsGroup": 0}
    storage = f"{opts.ephemeral_storage_mb}Mi"
    container_sc: dict[str, Any] = {
        "allowPrivilegeEscalation": not hard.no_new_privileges,
        "privileged": False,
        "readOnlyRootFilesystem": hard.read_only_root,
        "seccompProfile": {"type": "RuntimeDefault"},
        **run_as,
    }
    if hard.drop_capabilities:
        container_sc["capabilities"] = {"drop": ["ALL"]}
    if separation(cfg, opts) == "uid":
        container_sc["capabilities"] = {"drop": ["ALL"], "add": list(SEPARATION_CAPS)}
    container = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": opts.image_pull_policy,
        "command": ["python3", "-I", "-u", "-c", INIT_SOURCE, str(idle_exit_s)],
        "workingDir": WORKDIR,
        "env": [{"name": k, "value": v} for k, v in ENV.items()],
        "resources": {
            "requests": {"cpu": _millicores(opts.cpu_request or lim.cpus), "memory": f"{lim.memory_mb}Mi",
                         "ephemeral-storage": storage},
            "limits": {"cpu": _millicores(lim.cpus), "memory": f"{lim.memory_mb}Mi", "ephemeral-storage": storage},
        },
        "securityContext": container_sc,
        "volumeMounts": [
            {"name": "workspace", "mountPath": SCRATCH[0]},
            {"name": "tmp", "mountPath": SCRATCH[1]},
            # The runtime's own /dev/shm is 64 MiB whatever our limits: every writable tmpfs gets our cap.
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "toolserver", "mountPath": TOOLSERVER_DIR, "readOnly": True},
        ],
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostname": "sandbox",
        "terminationGracePeriodSeconds": 2,
        "activeDeadlineSeconds": opts.max_lifetime_s,
        "securityContext": {**run_as, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [
            {"name": "workspace", "emptyDir": {"medium": "Memory", "sizeLimit": f"{lim.scratch_mb}Mi"}},
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": f"{lim.scratch_mb}Mi"}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{lim.scratch_mb}Mi"}},
            {"name": "toolserver", "configMap": {"name": toolserver_configmap_name(), "defaultMode": 0o444}},
        ],
    }
    if opts.runtime_class:
        spec["runtimeClassName"] = opts.runtime_class
    if opts.node_selector:
        spec["nodeSelector"] = dict(opts.node_selector)
    if opts.tolerations:
        spec["tolerations"] = [dict(t) for t in opts.tolerations]
    labels = {**MANAGED_BY, SANDBOX_LABEL: "1"}
    if not hard.network:
        labels[EGRESS_LABEL] = "deny"
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    labels[TEMPLATE_LABEL] = digest
    return {"metadata": {"labels": labels, "annotations": {"tooldojo.dev/toolserver": image_hash()}}, "spec": spec}


def pod_manifest(cfg: SandboxConfig, opts: KubernetesOptions, image: str, name: str) -> dict:
    tmpl = pod_template(cfg, opts, image, idle_exit_s=opts.idle_exit_s)
    meta = {"name": name, "namespace": opts.namespace, "labels": {**tmpl["metadata"]["labels"], **owner_labels()},
            "annotations": tmpl["metadata"]["annotations"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]}


def sandbox_template(cfg: SandboxConfig, opts: KubernetesOptions, image: str, name: str) -> dict:
    """An agent-sandbox SandboxTemplate of the same pod; its NetworkPolicy is ours (Unmanaged), not the
    controller's default (which allows the public internet)."""
    tmpl = pod_template(cfg, opts, image, idle_exit_s=0)  # warm pods wait unconnected by design
    return {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
            "metadata": {"name": name, "namespace": opts.namespace, "labels": dict(MANAGED_BY)},
            "spec": {"podTemplate": tmpl, "networkPolicyManagement": "Unmanaged"}}


def sandbox_warm_pool(opts: KubernetesOptions, name: str, template: str) -> dict:
    return {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
            "metadata": {"name": name, "namespace": opts.namespace, "labels": dict(MANAGED_BY)},
            "spec": {"replicas": opts.warm_pool_size, "sandboxTemplateRef": {"name": template}}}


def sandbox_claim(opts: KubernetesOptions, name: str, pool: str) -> dict:
    labels = {**MANAGED_BY, SANDBOX_LABEL: "1", **owner_labels()}
    deadline = time.gmtime(time.time() + opts.max_lifetime_s)
    return {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
            "metadata": {"name": name, "namespace": opts.namespace, "labels": labels},
            "spec": {"warmPoolRef": {"name": pool},
                     "lifecycle": {"shutdownTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", deadline),
                                   "shutdownPolicy": "Delete"},
                     "additionalPodMetadata": {"labels": owner_labels()}}}


# ------------------------------------------------------------------ owners
def _label_value(v: str) -> str:
    v = re.sub(r"[^A-Za-z0-9_.-]", "-", v)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", v)


def owner_labels() -> dict[str, str]:
    return {k: _label_value(v) for k, v in owner.labels().items()}


def orphaned(labels: dict[str, str]) -> bool:
    """True if the labels name an owner process on this host that is gone."""
    if labels.get(owner.HOST_LABEL) != _label_value(socket.gethostname()):
        return False  # not ours to judge
    try:
        pid = int(labels.get(owner.PID_LABEL, ""))
    except ValueError:
        return False
    start = owner.process_start_time(pid)
    return start is None or start != labels.get(owner.START_LABEL, start)


# ------------------------------------------------------------------ clusters
_lock = threading.Lock()
_clients: dict[tuple, Any] = {}
_buckets: dict[tuple, Any] = {}
_modes: dict[tuple, str] = {}
_ensured: set[tuple] = set()


def forget_clusters() -> None:
    """Drop cached clients and what we know about clusters (tests start a fresh fake API server each time)."""
    with _lock:
        for c in _clients.values():
            c.close()
        _clients.clear()
        _buckets.clear()
        _modes.clear()
        _ensured.clear()


def _key(opts: KubernetesOptions) -> tuple:
    return (opts.kubeconfig, opts.context, opts.server)


def client_for(opts: KubernetesOptions):
    from sandboxes.kube import K8sClient

    with _lock:
        c = _clients.get(_key(opts))
        if c is None:
            c = _clients[_key(opts)] = K8sClient.connect(kubeconfig=opts.kubeconfig, context=opts.context,
                                                         server=opts.server, qps=opts.api_qps,
                                                         burst=max(1, int(opts.api_qps * 2)))
        return c


def creation_bucket(opts: KubernetesOptions):
    from sandboxes.kube import TokenBucket

    key = (*_key(opts), opts.namespace)
    with _lock:
        b = _buckets.get(key)
        if b is None or (b.rate, b.burst) != (opts.creations_per_s, opts.creation_burst):
            b = _buckets[key] = TokenBucket(opts.creations_per_s, opts.creation_burst)
        return b


def mode_for(client, opts: KubernetesOptions) -> str:
    """'claims' (agent-sandbox CRDs) or 'pods'."""
    if opts.use_crds == "never":
        return "pods"
    key = (*_key(opts), opts.use_crds)
    with _lock:
        if key in _modes:
            return _modes[key]
    served = client.serves("SandboxClaim") and client.serves("Sandbox")
    if opts.use_crds == "always" and not served:
        raise BackendUnavailable(
            f"use_crds='always' but {client.server} does not serve the agent-sandbox CRDs "
            "(extensions.agents.x-k8s.io/v1beta1 SandboxClaim, agents.x-k8s.io/v1beta1 Sandbox); install them or "
            "use use_crds='auto'")
    mode = "claims" if served else "pods"
    with _lock:
        _modes[key] = mode
    return mode


def _create_once(client, manifest: dict, key: tuple) -> None:
    from sandboxes.kube import AlreadyExists

    with _lock:
        if key in _ensured:
            return
    try:
        client.create(manifest)
    except AlreadyExists:
        pass
    with _lock:
        _ensured.add(key)


def ensure_cluster_objects(client, cfg: SandboxConfig, opts: KubernetesOptions, image: str, mode: str) -> str | None:
    """The tool-server ConfigMap, the deny-all NetworkPolicy and, for claims, the template and warm pool.
    Returns the warm pool to claim from (claims mode)."""
    ns = opts.namespace
    base = (*_key(opts), ns)
    _create_once(client, toolserver_configmap(ns), (*base, "cm", toolserver_configmap_name()))
    if not cfg.hardening.network:
        _create_once(client, network_policy(ns), (*base, "netpol"))
    if mode != "claims":
        return None
    if opts.warm_pool:
        return opts.warm_pool  # an admin's pool: claim from it, create nothing
    tmpl = sandbox_template(cfg, opts, image, "x")
    name = f"tooldojo-{tmpl['spec']['podTemplate']['metadata']['labels'][TEMPLATE_LABEL]}"
    _create_once(client, sandbox_template(cfg, opts, image, name), (*base, "tmpl", name))
    _create_once(client, sandbox_warm_pool(opts, name, name), (*base, "pool", name))
    return name


# ------------------------------------------------------------------ waiting
def _describe_pod(pod: dict | None) -> str:
    if pod is None:
        return "no pod seen yet"
    st = pod.get("status") or {}
    bits = [f"phase {st.get('phase', '?')}"]
    for c in st.get("conditions") or []:
        if c.get("status") == "False" and c.get("reason"):
            bits.append(f"{c['type']}: {c['reason']} {c.get('message', '')}".strip())
    for cs in st.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting:
            bits.append(f"container {cs['name']} waiting: {waiting.get('reason')} {waiting.get('message', '')}".strip())
        term = (cs.get("state") or {}).get("terminated")
        if term:
            bits.append(f"container {cs['name']} exited {term.get('exitCode')} ({term.get('reason')})")
    return "; ".join(bits)


def _recent_events(client, ns: str, name: str) -> str:
    try:
        evs = client.list("Event", ns, field_selector=f"involvedObject.name={name}")
    except Exception:
        return ""
    warn = [f"{e.get('reason')}: {e.get('message')}" for e in evs if e.get("type") == "Warning"]
    return ("; events: " + " | ".join(warn[-3:])) if warn else ""


def wait_pod_running(client, ns: str, name: str, timeout_s: float) -> dict:
    """Block until the pod runs; SandboxStartError (with the reason and warning events) otherwise."""
    from sandboxes.kube import K8sError

    deadline = time.monotonic() + timeout_s
    last: dict | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SandboxStartError(f"pod {ns}/{name} did not start within {timeout_s:.0f}s: {_describe_pod(last)}"
                                    f"{_recent_events(client, ns, name)}")
        try:
            events = client.watch("Pod", ns, field_selector=f"metadata.name={name}", timeout_s=min(left, 30))
            for typ, pod in events:
                if typ == "DELETED":
                    raise SandboxStartError(f"pod {ns}/{name} was deleted before it started")
                last = pod
                st = pod.get("status") or {}
                phase = st.get("phase")
                if phase == "Running":
                    return pod
                if phase in ("Succeeded", "Failed"):
                    raise SandboxStartError(f"pod {ns}/{name} ended before the tool server came up: {_describe_pod(pod)}")
                for cs in st.get("containerStatuses") or []:
                    waiting = (cs.get("state") or {}).get("waiting") or {}
                    if waiting.get("reason") in FATAL_WAITING:
                        image = next((c.get("image") for c in pod["spec"]["containers"] if c["name"] == cs["name"]), "?")
                        raise SandboxStartError(f"pod {ns}/{name} cannot start: {waiting['reason']} "
                                                f"{waiting.get('message', '')} (image {image})".strip())
                if time.monotonic() >= deadline:
                    break
        except K8sError as e:
            raise SandboxStartError(f"waiting for pod {ns}/{name}: {e}") from None


def wait_claim_bound(client, ns: str, claim: str, timeout_s: float) -> str:
    """The Sandbox name the controller bound to the claim."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SandboxStartError(f"SandboxClaim {ns}/{claim} was not bound to a Sandbox within {timeout_s:.0f}s "
                                    "(is the agent-sandbox controller running?)")
        for typ, obj in client.watch("SandboxClaim", ns, field_selector=f"metadata.name={claim}",
                                     timeout_s=min(left, 30)):
            if typ == "DELETED":
                raise SandboxStartError(f"SandboxClaim {ns}/{claim} was deleted while binding")
            st = obj.get("status") or {}
            for c in st.get("conditions") or []:
                if c.get("type") == "Ready" and c.get("status") == "False" and c.get("reason") in (
                        "TemplateNotFound", "WarmPoolNotFound"):
                    raise SandboxStartError(f"SandboxClaim {ns}/{claim}: {c.get('reason')}: {c.get('message')}")
            name = (st.get("sandbox") or {}).get("name") or (st.get("sandbox") or {}).get("Name")
            if name:
                return name
            if time.monotonic() >= deadline:
                break


# ----------------------------------------------------------------- transport
class ExecChannel:
    """The exec stream as a blocking byte pipe: kubernetes.stream's WSClient (binary, v5/v4 channels)."""

    def __init__(self, ws: Any):
        self.ws = ws
        self.stopped = False
        self._stderr = bytearray()

    def write(self, data: bytes) -> None:
        try:
            self.ws.write_stdin(data)
        except Exception as e:
            raise BrokenPipeError(f"exec stream closed ({type(e).__name__})") from None

    def read(self, poll_s: float = 0.5) -> bytes | None:
        """Some stdout bytes; None once the stream has ended (or `stop()` was called)."""
        ws = self.ws
        while not self.stopped:
            try:
                if ws.is_open():
                    ws.update(timeout=poll_s)
                err = ws.read_channel(2, timeout=0)
                if err:
                    self._stderr = (self._stderr + err)[-8192:]
                out = ws.read_channel(1, timeout=0)
            except Exception:
                return None
            if out:
                return bytes(out)
            if not ws.is_open():
                return None
        return None

    def close_stdin(self) -> None:
        try:
            self.ws.close_channel(0)  # v5 only; a no-op on v4
        except Exception:
            pass

    def stop(self) -> None:
        self.stopped = True
        try:
            self.ws.close(timeout=1)  # do not wait long for the server's half of the close handshake
        except Exception:
            pass

    def stderr(self) -> str:
        return self._stderr.decode(errors="replace").strip()[-500:]


class PodHandle:
    """Which pod a sandbox lives in, and how to get rid of it (delete the pod, or the claim)."""

    def __init__(self, client, namespace: str, pod: str, claim: str | None = None):
        self.client, self.namespace, self.pod, self.claim = client, namespace, pod, claim
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        from sandboxes.kube import K8sError

        try:
            if self.claim:
                self.client.delete("SandboxClaim", self.claim, self.namespace, missing_ok=True)
            else:
                self.client.delete("Pod", self.pod, self.namespace, grace_period_s=0, missing_ok=True)
        except K8sError as e:
            import logging

            logging.getLogger("tooldojo.sandboxes.kubernetes").warning(
                "could not delete %s %s/%s (gc() and activeDeadlineSeconds will): %s",
                "SandboxClaim" if self.claim else "Pod", self.namespace, self.claim or self.pod, e)


class KubernetesTransport(Transport):
    def __init__(self, channel: ExecChannel, handle: PodHandle, max_line: int):
        super().__init__(max_line)
        self.channel = channel
        self.handle = handle
        self._limiter = anyio.CapacityLimiter(2)
        self._killed = False

    def describe(self) -> str:
        return f"pod {self.handle.namespace}/{self.handle.pod}"

    async def _send_raw(self, data: bytes) -> None:
        await anyio.to_thread.run_sync(self.channel.write, data, limiter=self._limiter)

    async def _receive_raw(self) -> bytes:
        chunk = await anyio.to_thread.run_sync(self.channel.read, abandon_on_cancel=True, limiter=self._limiter)
        if chunk is None:
            raise anyio.EndOfStream
        return chunk

    def diagnostics(self) -> str:
        return self.channel.stderr()

    async def kill(self) -> None:
        if self._killed:
            return
        self._killed = True
        self.channel.stopped = True
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.channel.stop)
            await anyio.to_thread.run_sync(self.handle.release)


class KubernetesSandbox(Sandbox):
    backend = "kubernetes"

    def __init__(self, config: SandboxConfig, transport: KubernetesTransport, sandbox_id: str):
        super().__init__(config, transport, sandbox_id)
        self.pod_name = transport.handle.pod
        self.namespace = transport.handle.namespace
        self.claim = transport.handle.claim


# ------------------------------------------------------------------ start
# The capabilities a `baseline` pod starts with so that the tool server can drop to a uid of its own
# (all four are in Pod Security baseline's allowed list; the server keeps none of SETPCAP).
SEPARATION_CAPS = ("SETUID", "SETGID", "SETPCAP", "KILL")


def separation(cfg: SandboxConfig, opts: KubernetesOptions) -> str | None:
    """As on docker: commands as another uid than the server's. Pod Security `restricted` forbids the
    root start that needs, and RuntimeDefault seccomp the unshare() a PID namespace needs, so there
    the server is only non-dumpable; root commands (non_root=False) no uid keeps out either."""
    hard = cfg.hardening
    if not hard.isolate_tool_server:
        return None
    if opts.pod_security == "baseline" and hard.non_root and hard.drop_capabilities:
        return "uid"
    return "non_dumpable"


def server_config(cfg: SandboxConfig, opts: KubernetesOptions | None = None) -> dict[str, Any]:
    lim = cfg.limits
    return {"workdir": WORKDIR, "scratch": list(SCRATCH), "wiped": ["/dev/shm", "/dev/mqueue"],
            "max_output_bytes": lim.max_output_bytes,
            "max_request_bytes": lim.max_request_bytes, "max_file_bytes": lim.max_file_bytes,
            "own_pid_namespace": cfg.hardening.kill_on_timeout, "env": dict(ENV),
            "separation": separation(cfg, opts or options(cfg))}


def exec_command(cfg: SandboxConfig, opts: KubernetesOptions | None = None) -> list[str]:
    return ["python3", "-I", "-u", "-c", WRAPPER_SOURCE, TOOLSERVER_DIR, json.dumps(server_config(cfg, opts))]


def resolve_k8s_image(cfg: SandboxConfig) -> str:
    env = os.environ.get("TOOLDOJO_K8S_IMAGE")
    if cfg.image == DEFAULT_IMAGE and env:
        return env
    return resolve_image(cfg.image)


def options(cfg: SandboxConfig) -> KubernetesOptions:
    return cfg.kubernetes or KubernetesOptions.from_env()


async def start(cfg: SandboxConfig) -> KubernetesSandbox:
    from sandboxes.kube import Forbidden, K8sError, K8sUnavailable

    opts = options(cfg)
    image = resolve_k8s_image(cfg)
    run = functools.partial(anyio.to_thread.run_sync)
    t0 = time.monotonic()
    try:
        client = await run(client_for, opts)
        mode = await run(mode_for, client, opts)
        pool = await run(ensure_cluster_objects, client, cfg, opts, image, mode)
    except K8sUnavailable as e:
        raise BackendUnavailable(str(e)) from None
    except Forbidden as e:
        raise SandboxStartError(str(e)) from None
    except K8sError as e:
        raise SandboxStartError(f"cannot prepare namespace {opts.namespace}: {e}") from None
    wait = creation_bucket(opts).reserve()
    if wait > 0:
        await anyio.sleep(wait)
    sandbox_id = uuid.uuid4().hex[:12]
    name = f"tooldojo-sb-{sandbox_id}"
    handle: PodHandle | None = None
    try:
        if mode == "claims":
            assert pool is not None
            await run(client.create, sandbox_claim(opts, name, pool))
            handle = PodHandle(client, opts.namespace, name, claim=name)
            left = cfg.start_timeout_s - (time.monotonic() - t0)
            sb_name = await run(wait_claim_bound, client, opts.namespace, name, left)
            sb_obj = await run(client.get, "Sandbox", sb_name, opts.namespace)
            handle.pod = (sb_obj["metadata"].get("annotations") or {}).get(POD_NAME_ANNOTATION) or sb_name
        else:
            await run(client.create, pod_manifest(cfg, opts, image, name))
            handle = PodHandle(client, opts.namespace, name)
        left = cfg.start_timeout_s - (time.monotonic() - t0)
        await run(wait_pod_running, client, opts.namespace, handle.pod, left)
        ws = await run(functools.partial(client.exec_stream, handle.pod, opts.namespace, exec_command(cfg, opts),
                                         container=CONTAINER))
    except BaseException as e:
        if handle is not None:
            with anyio.CancelScope(shield=True):
                await run(handle.release)
        if isinstance(e, Forbidden):
            raise SandboxStartError(str(e)) from None
        if isinstance(e, K8sUnavailable):
            raise BackendUnavailable(str(e)) from None
        if isinstance(e, K8sError):
            raise SandboxStartError(f"sandbox pod failed to start: {e}") from None
        raise
    transport = KubernetesTransport(ExecChannel(ws), handle, 1 << 30)
    sb = KubernetesSandbox(cfg, transport, sandbox_id)
    transport.lines.limit = sb._max_line
    try:
        left = max(1.0, cfg.start_timeout_s - (time.monotonic() - t0))
        await sb._request("ping", left)
    except BaseException as e:
        diag = transport.diagnostics()
        with anyio.CancelScope(shield=True):
            await sb.close()
        if isinstance(e, SandboxDead):
            raise SandboxStartError(f"tool server in pod {opts.namespace}/{handle.pod} did not come up: {e} {diag}"
                                    .strip()) from None
        raise
    return sb


# -------------------------------------------------------------------- reap
def gc(everything: bool = False, config: SandboxConfig | None = None) -> list[str]:
    """Delete sandbox pods and claims (by label) whose owner on this host is gone, and finished pods;
    with `everything`, every tooldojo sandbox in the namespace."""
    from sandboxes.kube import K8sError

    opts = options(config) if config is not None else KubernetesOptions.from_env()
    try:
        client = client_for(opts)
        removed: list[str] = []
        if client.serves("SandboxClaim"):
            for claim in client.list("SandboxClaim", opts.namespace, label_selector=SANDBOX_LABEL):
                meta = claim["metadata"]
                if everything or orphaned(meta.get("labels") or {}):
                    if client.delete("SandboxClaim", meta["name"], opts.namespace, missing_ok=True):
                        removed.append(f"claim/{meta['name']}")
        for pod in client.list("Pod", opts.namespace, label_selector=SANDBOX_LABEL):
            meta = pod["metadata"]
            if any(r.get("kind") == "Sandbox" for r in meta.get("ownerReferences") or []):
                continue  # the agent-sandbox controller owns it; its claim was handled above
            phase = (pod.get("status") or {}).get("phase")
            if everything or phase in ("Succeeded", "Failed") or orphaned(meta.get("labels") or {}):
                if client.delete("Pod", meta["name"], opts.namespace, grace_period_s=0, missing_ok=True):
                    removed.append(f"pod/{meta['name']}")
        return removed
    except K8sError as e:
        raise SandboxError(f"kubernetes gc in {opts.namespace}: {e}") from None
