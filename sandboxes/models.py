"""Pydantic contracts of the sandbox layer: what goes in, what comes out."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Backend = Literal["docker", "local", "kubernetes"]
# `auto` picks docker or local only: a sandbox on a cluster is always an explicit choice.
BackendChoice = Literal["auto", "docker", "local", "kubernetes"]

DEFAULT_IMAGE = "tooldojo-sandbox"


class Limits(BaseModel):
    """Resource caps of one sandbox. Every one is enforced by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_mb: int = Field(256, ge=16, le=1 << 20, description="memory limit; no swap on top of it")
    cpus: float = Field(1.0, ge=0.01, le=1024, description="CPU quota in cores")
    pids: int = Field(64, ge=8, le=1_000_000, description="max processes+threads (the tool server needs a few)")
    scratch_mb: int = Field(64, ge=1, le=1 << 20, description="size of each writable tmpfs (/workspace, /tmp)")
    max_output_bytes: int = Field(64 * 1024, ge=1024, description="per stream (stdout, stderr) of one exec")
    max_request_bytes: int = Field(8 << 20, ge=1024, description="one request to the tool server")
    max_file_bytes: int = Field(8 << 20, ge=1024, description="read_file size cap")


class Hardening(BaseModel):
    """Each isolation control, on by default. Loosening one is an explicit, named choice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    network: bool = Field(False, description="allow network access (docker: default bridge; local: host net)")
    read_only_root: bool = Field(True, description="root filesystem read-only; only the scratch tmpfs are writable")
    drop_capabilities: bool = Field(True, description="drop every Linux capability")
    no_new_privileges: bool = Field(True, description="setuid binaries cannot raise privileges")
    non_root: bool = Field(True, description="run as uid/gid 65534 (nobody)")
    kill_on_timeout: bool = Field(True, description="a timed-out exec kills every process in the sandbox")
    isolate_tool_server: bool = Field(
        True, description="exec'd commands cannot trace, signal, read or write the tool server (docker: another "
                          "uid; local: their own PID namespace; kubernetes: another uid, or with pod_security='restricted' "
                          "the server is non-dumpable only)")
    seccomp: bool = Field(
        True, description="local: a seccomp filter at least as strict as docker's default profile (sandboxes/seccomp.py); "
                          "docker: the engine's default profile (False: unconfined)")


class KubernetesOptions(BaseModel):
    """Where and how the `kubernetes` backend runs sandbox pods (sandboxes/kubernetes_backend.py).

    Unset fields fall back to TOOLDOJO_K8S_* environment variables (see `from_env`), so the same
    code (and the conformance suite) can point at a cluster without editing configs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str = Field("tooldojo-sandboxes", description="namespace of the sandbox pods")
    kubeconfig: str | None = Field(None, description="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    context: str | None = Field(None, description="kubeconfig context")
    server: str | None = Field(None, description="API server URL, bypassing kubeconfig (no credentials)")
    runtime_class: str | None = Field(None, description="RuntimeClass for the pods, e.g. gvisor (k8s/manifests/gvisor)")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    cpu_request: float | None = Field(None, gt=0, description="CPU request in cores; None: equal to Limits.cpus "
                                                               "(a lower request packs more sandboxes per node)")
    ephemeral_storage_mb: int = Field(256, ge=16, description="node disk for the pod (logs; the root is read-only)")
    use_crds: Literal["auto", "never", "always"] = Field(
        "auto", description="use agent-sandbox SandboxClaims from a SandboxWarmPool where its CRDs are installed")
    warm_pool: str | None = Field(None, description="agent-sandbox SandboxWarmPool to claim from "
                                                    "(default: one named after the pod template's hash)")
    warm_pool_size: int = Field(0, ge=0, description="replicas of the SandboxWarmPool the backend creates "
                                                     "when it is missing (0: claims cold-start from the template)")
    creations_per_s: float = Field(10.0, gt=0, description="pod/claim creations per second from this process")
    creation_burst: int = Field(20, ge=1, description="creations allowed at once before the rate applies")
    api_qps: float = Field(50.0, gt=0, description="API requests per second from this process")
    max_lifetime_s: int = Field(6 * 3600, ge=60, description="pod activeDeadlineSeconds: a leaked pod dies by then")
    pod_security: Literal["baseline", "restricted"] = Field(
        "baseline", description="Pod Security level of the sandbox pods. baseline: the tool server starts as root "
                                "with only SETUID/SETGID/SETPCAP/KILL and drops to its own uid, so the agent's "
                                "commands (uid 65534) cannot signal, trace or read it (the docker separation); "
                                "restricted: never root, the server is only non-dumpable (a command can still "
                                "signal it, which kills the sandbox)")
    idle_exit_s: int = Field(600, ge=0, description="a bare pod with no tool-server session for this long exits "
                                                    "(0: never); covers owners that die before connecting")

    @classmethod
    def from_env(cls, **overrides: Any) -> KubernetesOptions:
        import os

        env = {
            "namespace": os.environ.get("TOOLDOJO_K8S_NAMESPACE"),
            "kubeconfig": os.environ.get("TOOLDOJO_K8S_KUBECONFIG"),
            "context": os.environ.get("TOOLDOJO_K8S_CONTEXT"),
            "server": os.environ.get("TOOLDOJO_K8S_SERVER"),
            "runtime_class": os.environ.get("TOOLDOJO_K8S_RUNTIME_CLASS"),
            "use_crds": os.environ.get("TOOLDOJO_K8S_USE_CRDS"),
            "pod_security": os.environ.get("TOOLDOJO_K8S_POD_SECURITY"),
        }
        return cls(**{k: v for k, v in env.items() if v}, **overrides)


class SandboxConfig(BaseModel):
    """How to start a sandbox. Plain data: build it from YAML or keyword arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: BackendChoice = "auto"
    image: str = Field(DEFAULT_IMAGE, description="docker image (tag defaults to the tool server's hash)")
    rootfs: str | None = Field(None, description="local backend: root filesystem dir (default: the built one)")
    limits: Limits = Field(default_factory=Limits)
    hardening: Hardening = Field(default_factory=Hardening)
    start_timeout_s: float = Field(60.0, gt=0)
    request_timeout_s: float = Field(30.0, gt=0, description="non-exec requests; exec uses its own timeout")
    kubernetes: KubernetesOptions | None = Field(
        None, description="kubernetes backend only: namespace, cluster, runtime class... (None: from the environment)")



class ExecResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    oom_killed: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


ToolErrorKind = Literal["unknown_tool", "invalid_arguments", "tool_failure", "internal_error", "timeout",
                        "state_too_large", "output_too_large"]


class ToolResult(BaseModel):
    """A tool call that succeeded: `output` is whatever JSON the tool returned."""

    model_config = ConfigDict(frozen=True)

    ok: Literal[True] = True
    name: str
    output: Any


class ToolError(BaseModel):
    """A tool call that failed in a way the agent should read and react to."""

    model_config = ConfigDict(frozen=True)

    ok: Literal[False] = False
    name: str
    kind: ToolErrorKind
    message: str
    code: str | None = None


class Snapshot(BaseModel):
    """The tool state of one sandbox at one moment; `digest` identifies it."""

    model_config = ConfigDict(frozen=True)

    domain: str
    state: Any

    @property
    def digest(self) -> str:
        return state_digest(self.state)


def state_digest(state: Any) -> str:
    canonical = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class DomainBundle(BaseModel):
    """Tool implementations shipped into a sandbox: Python source defining TOOLS."""

    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    state: Any = None


class BackendReport(BaseModel):
    backend: Backend
    works: bool
    detail: str
