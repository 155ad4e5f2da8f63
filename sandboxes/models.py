"""Pydantic contracts of the sandbox layer: what goes in, what comes out."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Backend = Literal["docker", "local"]
BackendChoice = Literal["auto", "docker", "local"]

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


ToolErrorKind = Literal["unknown_tool", "invalid_arguments", "tool_failure", "internal_error", "timeout"]


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
