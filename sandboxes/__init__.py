"""tooldojo.sandboxes: hardened, fast, stateful places for an agent's commands and tools.

    async with await open_sandbox(SandboxConfig(backend="auto")) as sb:
        await sb.call_tool("kv_set", {"key": "a", "value": "1"})
        r = await sb.exec("echo hi", timeout=5)

`SandboxPool` keeps warm sandboxes for rollouts; `SyncSandbox` wraps the async API.
"""

from sandboxes.api import Sandbox, open_sandbox
from sandboxes.pool import SandboxPool, reap_orphans
from sandboxes.sync import SyncSandbox
from sandboxes.errors import (
    BackendUnavailable,
    ImageNotFound,
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

__all__ = [
    "BackendUnavailable", "DomainBundle", "ExecResult", "Hardening", "ImageNotFound", "Limits",
    "PathOutsideSandbox", "PoolClosed", "PoolExhausted", "ProtocolError", "RequestFailed", "RequestTooLarge",
    "Sandbox", "SandboxConfig", "SandboxPool", "SyncSandbox", "reap_orphans", "SandboxDead", "SandboxError", "SandboxFileNotFound", "SandboxStartError",
    "SandboxTimeout", "Snapshot", "ToolError", "ToolResult", "open_sandbox", "state_digest",
]
