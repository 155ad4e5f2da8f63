"""A thin blocking wrapper over the async Sandbox, for scripts and notebooks.

    with SyncSandbox(SandboxConfig()) as sb:
        print(sb.exec("echo hi").stdout)

An event loop runs in a background thread (an anyio blocking portal); every
method forwards to the async one there.
"""

from __future__ import annotations

from typing import Any

from anyio.from_thread import start_blocking_portal

from sandboxes.api import Sandbox
from sandboxes.backends import open_sandbox
from sandboxes.models import DomainBundle, ExecResult, SandboxConfig, Snapshot, ToolError, ToolResult


class SyncSandbox:
    def __init__(self, config: SandboxConfig | None = None, **overrides: Any):
        self._cm = start_blocking_portal()
        self._portal = self._cm.__enter__()
        try:
            self._sb: Sandbox = self._portal.call(lambda: open_sandbox(config, **overrides))
        except BaseException:
            self._cm.__exit__(None, None, None)
            raise

    @property
    def id(self) -> str:
        return self._sb.id

    @property
    def backend(self) -> str:
        return self._sb.backend

    def __enter__(self) -> SyncSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn, *args: Any, **kwargs: Any) -> Any:
        return self._portal.call(lambda: fn(*args, **kwargs))

    def exec(self, cmd: str | list[str], timeout: float = 30.0, stdin: str | bytes | None = None, **kw: Any) -> ExecResult:
        return self._call(self._sb.exec, cmd, timeout, stdin, **kw)

    def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> str:
        return self._call(self._sb.write_file, path, data, mode)

    def read_file(self, path: str) -> bytes:
        return self._call(self._sb.read_file, path)

    def call_tool(self, name: str, args: dict[str, Any] | None = None, **kw: Any) -> ToolResult | ToolError:
        return self._call(self._sb.call_tool, name, args, **kw)

    def load_domain(self, bundle: DomainBundle) -> list[str]:
        return self._call(self._sb.load_domain, bundle)

    def snapshot(self) -> Snapshot:
        return self._call(self._sb.snapshot)

    def digest(self) -> str:
        return self._call(self._sb.digest)

    def restore(self, snapshot: Snapshot) -> None:
        self._call(self._sb.restore, snapshot)

    def reset(self, state: Any = None) -> None:
        self._call(self._sb.reset, state)

    def close(self) -> None:
        if self._cm is None:
            return
        try:
            self._call(self._sb.close)
        finally:
            cm, self._cm = self._cm, None
            cm.__exit__(None, None, None)
