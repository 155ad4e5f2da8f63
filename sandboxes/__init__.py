"""tooldojo.sandboxes: hardened, fast, stateful places for an agent's commands and tools.

    async with await open_sandbox(SandboxConfig(backend="auto")) as sb:
        await sb.call_tool("kv_set", {"key": "a", "value": "1"})
        r = await sb.exec("echo hi", timeout=5)

`SandboxPool` keeps warm sandboxes for rollouts; `SyncSandbox` wraps the async API.
"""

from sandboxes.api import Sandbox
from sandboxes.backends import open_sandbox
from sandboxes.errors import (
    BackendUnavailable,
    ImageNotFound,
    InvalidRequest,
    PathOutsideSandbox,
    PoolClosed,
    PoolExhausted,
    ProtocolError,
    RequestFailed,
    RequestTooLarge,
    SandboxDead,
    SandboxError,
    SandboxFileNotFound,
    SandboxStartError,
    SandboxTimeout,
)
from sandboxes.models import (
    DomainBundle,
    ExecResult,
    Hardening,
    Limits,
    SandboxConfig,
    Snapshot,
    ToolError,
    ToolResult,
    state_digest,
)
from sandboxes.pool import SandboxPool, reap_orphans
from sandboxes.sync import SyncSandbox

__all__ = [
    "BackendUnavailable",
    "DomainBundle",
    "ExecResult",
    "Hardening",
    "ImageNotFound",
    "InvalidRequest",
    "Limits",
    "PathOutsideSandbox",
    "PoolClosed",
    "PoolExhausted",
    "ProtocolError",
    "RequestFailed",
    "RequestTooLarge",
    "Sandbox",
    "SandboxConfig",
    "SandboxDead",
    "SandboxError",
    "SandboxFileNotFound",
    "SandboxPool",
    "SandboxStartError",
    "SandboxTimeout",
    "Snapshot",
    "SyncSandbox",
    "ToolError",
    "ToolResult",
    "open_sandbox",
    "reap_orphans",
    "state_digest",
]
