"""A thin typed wrapper over the official kubernetes client: any API server, plain dicts in and out.

It lives in the sandbox layer (the lowest one) because the kubernetes sandbox backend needs it;
`k8s.client` re-exports it for job submission. It imports no other tooldojo module.

    c = K8sClient.connect()                                  # $KUBECONFIG / ~/.kube/config, else in-cluster
    c = K8sClient.connect(kubeconfig="kc.yaml", context="gpu")
    c = K8sClient.connect(server="http://127.0.0.1:8080")    # a bare URL (e.g. the fake API server in tests)
    job = c.create(manifest)                                 # a dict in camelCase, as the API server returns it
    for kind, obj in c.watch("Pod", ns, field_selector="metadata.name=x", timeout_s=60): ...

Built-in kinds go through the client's typed APIs (CoreV1Api, BatchV1Api, ...), which also check a
dict body against the client's models; custom resources (TrainJob, the agent-sandbox CRDs) go
through CustomObjectsApi. Responses are read raw (`_preload_content=False`) and returned as the
JSON the server sent, so callers never meet snake_case models. Every failure is a :class:`K8sError`
whose message says what to do next.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
# (connect, read) seconds: a server that accepts and never answers is an error, not a hang. A request that
# sets no timeout of its own gets the read value as its total deadline (connect and read together, one
# attempt). $TOOLDOJO_K8S_REQUEST_TIMEOUT overrides it.
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 30.0


def request_timeout() -> tuple[float, float]:
    raw = os.environ.get("TOOLDOJO_K8S_REQUEST_TIMEOUT")
    try:
        read = float(raw) if raw else READ_TIMEOUT_S
    except ValueError:
        raise K8sUnavailable(f"TOOLDOJO_K8S_REQUEST_TIMEOUT={raw!r} is not a number of seconds") from None
    if not 0 < read < float("inf"):
        raise K8sUnavailable(f"TOOLDOJO_K8S_REQUEST_TIMEOUT={raw!r} is not a positive number of seconds")
    return (min(CONNECT_TIMEOUT_S, read), read)


# ------------------------------------------------------------------ errors
class K8sError(Exception):
    """Anything that went wrong talking to Kubernetes; the message says what to do next."""


class K8sUnavailable(K8sError):
    """No cluster is configured, or the API server cannot be reached."""


class K8sApiError(K8sError):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(K8sApiError):
    pass


class AlreadyExists(K8sApiError):
    pass


class Forbidden(K8sApiError):
    pass


class Invalid(K8sApiError):
    pass


# --------------------------------------------------------------- resources
@dataclass(frozen=True)
class Resource:
    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    api: str  # attribute name of the typed API class; "" for custom objects
    snake: str = ""  # the typed API's method suffix, e.g. "config_map"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def custom(self) -> bool:
        return not self.api


TRAINER_GROUP = "trainer.kubeflow.org"
SANDBOX_GROUP = "agents.x-k8s.io"
SANDBOX_EXT_GROUP = "extensions.agents.x-k8s.io"

RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (
        Resource("Pod", "", "v1", "pods", "CoreV1Api", "pod"),
        Resource("Service", "", "v1", "services", "CoreV1Api", "service"),
        Resource("ConfigMap", "", "v1", "configmaps", "CoreV1Api", "config_map"),
        Resource("Secret", "", "v1", "secrets", "CoreV1Api", "secret"),
        Resource("Event", "", "v1", "events", "CoreV1Api", "event"),
        Resource("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", "CoreV1Api",
                 "persistent_volume_claim"),
        Resource("Job", "batch", "v1", "jobs", "BatchV1Api", "job"),
        Resource("NetworkPolicy", "networking.k8s.io", "v1", "networkpolicies", "NetworkingV1Api", "network_policy"),
        Resource("TrainJob", TRAINER_GROUP, "v1alpha1", "trainjobs", ""),
        Resource("Sandbox", SANDBOX_GROUP, "v1beta1", "sandboxes", ""),
        Resource("SandboxClaim", SANDBOX_EXT_GROUP, "v1beta1", "sandboxclaims", ""),
        Resource("SandboxTemplate", SANDBOX_EXT_GROUP, "v1beta1", "sandboxtemplates", ""),
        Resource("SandboxWarmPool", SANDBOX_EXT_GROUP, "v1beta1", "sandboxwarmpools", ""),
    )
}


def resource(kind: str) -> Resource:
    try:
        return RESOURCES[kind]
    except KeyError:
        raise K8sError(f"tooldojo does not handle kind {kind!r}; known kinds: {', '.join(sorted(RESOURCES))}") from None


# ------------------------------------------------------------ rate limiting
class TokenBucket:
    """A thread-safe token bucket: `rate` tokens a second, at most `burst` saved up.

    `acquire()` blocks until a token is free; `clock` and `sleep` are injectable for tests.
    """

    def __init__(self, rate: float, burst: int, *, clock=time.monotonic, sleep=time.sleep):
        if rate <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate > 0 and burst >= 1")
        self.rate = float(rate)
        self.burst = int(burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token now and return how long the caller must wait before using it."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def acquire(self) -> float:
        wait = self.reserve()
        if wait > 0:
            self._sleep(wait)
        return wait


# ------------------------------------------------------------------ client
class K8sClient:
    """One API server, one connection pool. Thread-safe: the sandbox backend calls it from worker threads."""

    def __init__(self, api_client: Any, *, source: str, namespace: str | None = None,
                 qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST):
        from kubernetes import client as k

        self.api_client = api_client
        self.source = source
        self.namespace = namespace  # the kubeconfig context's namespace, if any
        self.bucket = TokenBucket(qps, burst)
        self.requests = 0
        self.timeout = request_timeout()
        self._apis = {name: getattr(k, name)(api_client) for name in ("CoreV1Api", "BatchV1Api", "NetworkingV1Api")}
        self._custom = k.CustomObjectsApi(api_client)
        self._groups: dict[str, list[str]] | None = None

    # ---------------------------------------------------------- construction
    @classmethod
    def connect(cls, *, kubeconfig: str | None = None, context: str | None = None, server: str | None = None,
                token: str | None = None, verify_tls: bool = True, qps: float = DEFAULT_QPS,
                burst: int = DEFAULT_BURST) -> K8sClient:
        """A client for `server` (a URL), else a kubeconfig (`kubeconfig`, $KUBECONFIG, ~/.kube/config),
        else the in-cluster service account. Raises K8sUnavailable when none is configured."""
        import yaml
        from kubernetes import client as k
        from kubernetes import config as kc

        cfg = k.Configuration()
        namespace = None
        if server:
            cfg.host = server.rstrip("/")
            cfg.verify_ssl = verify_tls
            if token:
                cfg.api_key = {"authorization": f"Bearer {token}"}
            source = f"server {cfg.host}"
        else:
            path = kubeconfig or _default_kubeconfig()
            if path is not None:
                try:
                    kc.load_kube_config(config_file=path, context=context, client_configuration=cfg,
                                        persist_config=False)
                    _, active = kc.list_kube_config_contexts(config_file=path)
                    if context:
                        active = next((c for c in kc.list_kube_config_contexts(config_file=path)[0]
                                       if c["name"] == context), active)
                    namespace = (active or {}).get("context", {}).get("namespace")
                except (kc.ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as e:
                    raise K8sUnavailable(f"cannot load kubeconfig {path}: {e}") from None
                source = f"kubeconfig {path}" + (f" (context {context})" if context else "")
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                try:
                    kc.load_incluster_config(client_configuration=cfg)
                except kc.ConfigException as e:
                    raise K8sUnavailable(f"in-cluster config failed: {e}") from None
                ns_file = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                namespace = ns_file.read_text().strip() if ns_file.is_file() else None
                source = "in-cluster service account"
            else:
                raise K8sUnavailable(
                    "no Kubernetes cluster configured: set $KUBECONFIG or pass --kubeconfig, --context or --server "
                    "(in a pod, the service account is used)")
        # one attempt: urllib3 retrying a timed-out request doubled the stated wait ("within 30 s" took 62 s);
        # callers decide what to retry
        cfg.retries = 0
        cfg.connection_pool_maxsize = 64
        return cls(k.ApiClient(cfg), source=source, namespace=namespace, qps=qps, burst=burst)

    @property
    def server(self) -> str:
        return self.api_client.configuration.host

    def close(self) -> None:
        try:
            self.api_client.close()
        except Exception:
            pass

    # ------------------------------------------------------------- plumbing
    def _call(self, fn, *args: Any, what: str, **kwargs: Any) -> Any:
        """Call a typed API method raw; map every failure to a K8sError naming `what`."""
        from kubernetes.client.exceptions import ApiException
        from pydantic import ValidationError

        self.bucket.acquire()
        self.requests += 1
        # a number is urllib3's total deadline (connect and read together): the wait the error message states
        kwargs.setdefault("_request_timeout", self.timeout[1])
        try:
            return fn(*args, _preload_content=False, **kwargs)
        except ApiException as e:
            raise _api_error(e, what, self.server) from None
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"][1:])
            raise Invalid(422, "Invalid", f"{what}: the kubernetes client rejected the manifest at {loc}: "
                                          f"{first['msg']}") from None
        except Exception as e:
            if _is_connection_error(e):
                if _is_timeout(e):
                    raise K8sUnavailable(f"the Kubernetes API server at {self.server} did not answer within "
                                         f"{self.timeout[1]:g} s ({what}); check --server/--kubeconfig and that the "
                                         "cluster is up ($TOOLDOJO_K8S_REQUEST_TIMEOUT sets the wait)") from None
                raise K8sUnavailable(f"cannot reach the Kubernetes API server at {self.server} ({what}): "
                                     f"{type(e).__name__}; check --server/--kubeconfig and that the cluster is up") from None
            raise

    @staticmethod
    def _json(resp: Any) -> dict:
        try:
            data = resp.data
        finally:
            resp.release_conn()
        return json.loads(data) if data else {}

    def _namespaced(self, r: Resource, op: str):
        return getattr(self._apis[r.api], f"{op}_namespaced_{r.snake}")

    # ------------------------------------------------------------ verbs
    def create(self, manifest: dict, namespace: str | None = None, *, server_dry_run: bool = False) -> dict:
        """Create one object; with `server_dry_run` the API server validates and admits it (webhooks, quotas,
        Pod Security) but stores nothing."""
        r = resource(manifest.get("kind", "?"))
        ns = namespace or manifest.get("metadata", {}).get("namespace") or self.namespace or "default"
        what = f"create {r.kind} {manifest.get('metadata', {}).get('name') or '(generated name)'} in {ns}"
        kw = {"dry_run": "All"} if server_dry_run else {}
        if r.custom:
            resp = self._call(self._custom.create_namespaced_custom_object, r.group, r.version, ns, r.plural,
                              manifest, what=what, **kw)
        else:
            resp = self._call(self._namespaced(r, "create"), ns, manifest, what=what, **kw)
        return self._json(resp)

    def get(self, kind: str, name: str, namespace: str) -> dict:
        r = resource(kind)
        what = f"get {kind} {name} in {namespace}"
        if r.custom:
            resp = self._call(self._custom.get_namespaced_custom_object, r.group, r.version, namespace, r.plural,
                              name, what=what)
        else:
            resp = self._call(self._namespaced(r, "read"), name, namespace, what=what)
        return self._json(resp)

    def list(self, kind: str, namespace: str, *, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict]:
        return self.list_raw(kind, namespace, label_selector=label_selector, field_selector=field_selector)["items"]

    def list_raw(self, kind: str, namespace: str, *, label_selector: str | None = None,
                 field_selector: str | None = None) -> dict:
        r = resource(kind)
        kw = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector)) if v}
        what = f"list {r.plural} in {namespace}"
        if r.custom:
            resp = self._call(self._custom.list_namespaced_custom_object, r.group, r.version, namespace, r.plural,
                              what=what, **kw)
        else:
            resp = self._call(self._namespaced(r, "list"), namespace, what=what, **kw)
        out = self._json(resp)
        out.setdefault("items", [])
        return out

    def patch(self, kind: str, name: str, namespace: str, body: dict) -> dict:
        """A JSON merge patch (RFC 7386): `{"spec": {"suspend": False}}` changes that one field."""
        r = resource(kind)
        what = f"patch {kind} {name} in {namespace}"
        ct = "application/merge-patch+json"
        if r.custom:
            resp = self._call(self._custom.patch_namespaced_custom_object, r.group, r.version, namespace, r.plural,
                              name, body, what=what, _content_type=ct)
        else:
            resp = self._call(self._namespaced(r, "patch"), name, namespace, body, what=what, _content_type=ct)
        return self._json(resp)

    def delete(self, kind: str, name: str, namespace: str, *, propagation: str = "Background",
               grace_period_s: int | None = None, missing_ok: bool = False) -> bool:
        """Delete one object; False if it was already gone and `missing_ok`."""
        r = resource(kind)
        kw: dict[str, Any] = {"propagation_policy": propagation}
        if grace_period_s is not None:
            kw["grace_period_seconds"] = grace_period_s
        what = f"delete {kind} {name} in {namespace}"
        try:
            if r.custom:
                resp = self._call(self._custom.delete_namespaced_custom_object, r.group, r.version, namespace,
                                  r.plural, name, what=what, **kw)
            else:
                resp = self._call(self._namespaced(r, "delete"), name, namespace, what=what, **kw)
        except NotFound:
            if missing_ok:
                return False
            raise
        self._json(resp)  # read the body: a pooled connection must be clean for the next request
        return True

    def watch(self, kind: str, namespace: str, *, label_selector: str | None = None,
              field_selector: str | None = None, timeout_s: float = 60.0,
              resource_version: str | None = None) -> Iterator[tuple[str, dict]]:
        """(event type, object) pairs until `timeout_s` passes on the server; existing objects first as ADDED."""
        r = resource(kind)
        kw: dict[str, Any] = {"watch": True, "timeout_seconds": max(1, int(timeout_s)),
                              "_request_timeout": (10, max(1.0, timeout_s) + 10)}
        for k, v in (("label_selector", label_selector), ("field_selector", field_selector),
                     ("resource_version", resource_version)):
            if v:
                kw[k] = v
        what = f"watch {r.plural} in {namespace}"
        if r.custom:
            resp = self._call(self._custom.list_namespaced_custom_object, r.group, r.version, namespace, r.plural,
                              what=what, **kw)
        else:
            resp = self._call(self._namespaced(r, "list"), namespace, what=what, **kw)
        try:
            for line in _iter_lines(resp):
                ev = json.loads(line)
                if ev.get("type") == "ERROR":
                    obj = ev.get("object") or {}
                    raise K8sApiError(int(obj.get("code") or 500), str(obj.get("reason") or "Error"),
                                      f"{what}: {obj.get('message') or 'watch failed'}")
                yield ev["type"], ev["object"]
        except Exception as e:
            if _is_connection_error(e):
                raise K8sUnavailable(f"{what}: the watch connection to {self.server} broke ({type(e).__name__})") from None
            raise
        finally:
            _close_stream(resp)

    def pod_log(self, name: str, namespace: str, *, container: str | None = None, follow: bool = False,
                tail_lines: int | None = None) -> Iterator[str]:
        """The pod's log, line by line (without newlines); with `follow`, until the container exits."""
        kw: dict[str, Any] = {"follow": follow}
        if container:
            kw["container"] = container
        if tail_lines is not None:
            kw["tail_lines"] = tail_lines
        if follow:
            kw["_request_timeout"] = (10, 24 * 3600)
        resp = self._call(self._apis["CoreV1Api"].read_namespaced_pod_log, name, namespace,
                          what=f"logs of pod {name} in {namespace}", **kw)
        try:
            for line in _iter_lines(resp, keep_empty=True):
                yield line.decode(errors="replace")
        finally:
            _close_stream(resp)

    def exec_stream(self, name: str, namespace: str, command: list[str], *, container: str | None = None,
                    stdin: bool = True) -> Any:
        """An open exec session (a kubernetes.stream WSClient in binary mode) running `command` in the pod."""
        from kubernetes import client as k
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream

        self.bucket.acquire()
        self.requests += 1
        kw: dict[str, Any] = {"command": command, "stdin": stdin, "stdout": True, "stderr": True, "tty": False,
                              "_preload_content": False, "binary": True}
        if container:
            kw["container"] = container
        # stream() swaps the ApiClient's call_api for a WebSocket call while it runs, so on a shared
        # ApiClient a request from another thread would go out as a WebSocket handshake: use a private one.
        private = k.ApiClient(self.api_client.configuration)
        try:
            return stream(k.CoreV1Api(private).connect_get_namespaced_pod_exec, name, namespace, **kw)
        except ApiException as e:
            raise K8sApiError(e.status or 0, "ExecFailed",
                              f"exec into pod {name} in {namespace} failed: {e.reason or e} (exec needs the "
                              "pods/exec create permission)") from None
        finally:
            private.close()

    def api_groups(self) -> dict[str, list[str]]:
        """Served API groups and their versions (cached): how we tell whether a CRD is installed."""
        if self._groups is None:
            from kubernetes import client as k

            resp = self._call(k.ApisApi(self.api_client).get_api_versions, what="discover API groups")
            groups = self._json(resp).get("groups") or []
            self._groups = {g["name"]: [v["version"] for v in g.get("versions") or []] for g in groups}
        return self._groups

    def serves(self, kind: str) -> bool:
        r = resource(kind)
        return not r.group or r.version in self.api_groups().get(r.group, [])


# ----------------------------------------------------------------- helpers
def _default_kubeconfig() -> str | None:
    env = os.environ.get("KUBECONFIG")
    if env:
        first = env.split(os.pathsep)[0]
        return first if first else None
    home = Path.home() / ".kube" / "config"
    return str(home) if home.is_file() else None


def _is_connection_error(e: BaseException) -> bool:
    import urllib3.exceptions

    return isinstance(e, (urllib3.exceptions.MaxRetryError, urllib3.exceptions.NewConnectionError,
                          urllib3.exceptions.ProtocolError, urllib3.exceptions.TimeoutError, ConnectionError))


def _is_timeout(e: BaseException) -> bool:
    import urllib3.exceptions

    # MaxRetryError wraps the cause; NewConnectionError subclasses ConnectTimeoutError but is a refusal
    return any(isinstance(x, urllib3.exceptions.TimeoutError) and not isinstance(x, urllib3.exceptions.NewConnectionError)
               for x in (e, getattr(e, "reason", None)))


def _api_error(e: Any, what: str, server: str) -> K8sError:
    status = int(e.status or 0)
    reason, message = str(e.reason or ""), ""
    try:
        body = json.loads(e.body or b"{}")
        message = body.get("message") or ""
        reason = body.get("reason") or reason
    except (ValueError, TypeError, AttributeError):
        message = str(e.body or "")[:300]
    detail = f"{what}: {message or reason or 'HTTP ' + str(status)}"
    if status == 0:
        return K8sUnavailable(f"cannot reach the Kubernetes API server at {server} ({what}): {e.reason}")
    if status == 404:
        return NotFound(status, reason or "NotFound", detail)
    if status == 409:
        return AlreadyExists(status, reason or "AlreadyExists", detail)
    if status in (401, 403):
        return Forbidden(status, reason or "Forbidden",
                         f"{detail} (your identity lacks RBAC for this; k8s/manifests/rbac-*.yaml grant what "
                         "tooldojo needs)")
    if status == 422:
        return Invalid(status, reason or "Invalid", detail)
    return K8sApiError(status, reason or "Error", detail)


def _close_stream(resp: Any) -> None:
    """A stream may be abandoned half-read: close its connection rather than return it dirty to the pool."""
    try:
        resp.close()
    finally:
        resp.release_conn()


def _iter_lines(resp: Any, keep_empty: bool = False) -> Iterator[bytes]:
    buf = b""
    for chunk in resp.stream(amt=65536, decode_content=True):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if keep_empty or line.strip():
                yield line
    if buf.strip():
        yield buf
