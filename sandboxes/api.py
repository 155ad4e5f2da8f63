"""The Sandbox API: one isolated place where an episode's commands and tools run.

A `Sandbox` talks to the tool server inside it over one byte stream (JSON lines,
one request in flight at a time). Backends only provide the stream and the
process or container behind it; everything else lives here.
"""

from __future__ import annotations

import base64
import itertools
import json
import posixpath
from abc import ABC, abstractmethod
from typing import Any

import anyio

from sandboxes.errors import (
    InvalidRequest,
    PathOutsideSandbox,
    ProtocolError,
    RequestFailed,
    RequestTooLarge,
    SandboxDead,
    SandboxFileNotFound,
    SandboxTimeout,
)
from sandboxes.toolserver import MAX_JSON_DEPTH, json_depth
from sandboxes.models import (
    Backend,
    DomainBundle,
    ExecResult,
    SandboxConfig,
    Snapshot,
    ToolError,
    ToolResult,
)

WORKDIR = "/workspace"
SCRATCH = ("/workspace", "/tmp")
# Exec gets its own timeout; the tool server needs a little longer to kill,
# reap and answer before we declare it dead.
EXEC_GRACE_S = 10.0


class Transport(ABC):
    """A byte stream to the tool server plus the means to kill what is behind it.

    Backends provide the raw stream (`_send_raw`, `_receive_raw`); framing into
    lines and the mapping of a broken stream to SandboxDead live here.
    """

    _STREAM_ERRORS = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)

    def __init__(self, max_line: int):
        self.lines = LineBuffer(max_line)

    @abstractmethod
    async def _send_raw(self, data: bytes) -> None: ...

    @abstractmethod
    async def _receive_raw(self) -> bytes:
        """Some bytes from the stream; raises one of _STREAM_ERRORS when it ends."""

    def _feed(self, chunk: bytes) -> None:
        """Turn received bytes into tool-server stdout (docker overrides to demultiplex)."""
        self.lines.feed(chunk)

    @abstractmethod
    def describe(self) -> str:
        """What is behind the stream, for error messages."""

    async def send(self, data: bytes) -> None:
        try:
            await self._send_raw(data)
        except self._STREAM_ERRORS as e:
            raise SandboxDead(f"{self.describe()} is gone ({type(e).__name__})") from None

    async def receive_line(self) -> bytes:
        """Next full line from the tool server's stdout; raises SandboxDead on EOF."""
        while (line := self.lines.pop_line()) is None:
            try:
                chunk = await self._receive_raw()
            except self._STREAM_ERRORS:
                raise SandboxDead(f"{self.describe()} exited") from None
            self._feed(chunk)
        return line

    @abstractmethod
    async def kill(self) -> None:
        """Destroy the sandbox now (used on timeouts and close)."""

    def diagnostics(self) -> str:
        return ""


class LineBuffer:
    """Splits a byte stream into lines, refusing lines longer than `limit`."""

    def __init__(self, limit: int):
        self.limit = limit
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def pop_line(self) -> bytes | None:
        i = self._buf.find(b"\n")
        if i < 0:
            if len(self._buf) > self.limit:
                raise ProtocolError(f"tool server sent a line over {self.limit} bytes")
            return None
        line = bytes(self._buf[:i])
        del self._buf[: i + 1]
        return line


def confine_path(path: str) -> str:
    """Resolve `path` against /workspace; reject anything outside the scratch dirs."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise PathOutsideSandbox(f"invalid path {path!r}: give a relative path under {WORKDIR}")
    full = posixpath.normpath(posixpath.join(WORKDIR, path))
    if not any(full == root or full.startswith(root + "/") for root in SCRATCH):
        raise PathOutsideSandbox(
            f"{path!r} resolves to {full!r}, outside the sandbox's writable dirs {list(SCRATCH)}; "
            f"use a path under {WORKDIR}"
        )
    return full


class Sandbox(ABC):
    """Async handle to one sandbox. Use `async with await open_sandbox(cfg) as sb:`."""

    backend: Backend

    def __init__(self, config: SandboxConfig, transport: Transport, sandbox_id: str):
        self.config = config
        self.id = sandbox_id
        self._transport = transport
        self._lock = anyio.Lock()
        self._ids = itertools.count(1)
        self._dead: str | None = None
        self._closed = False
        self._max_line = config.limits.max_request_bytes * 2 + config.limits.max_file_bytes * 2 + 65536

    # ------------------------------------------------------------ lifecycle
    @property
    def alive(self) -> bool:
        return self._dead is None and not self._closed

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._shutdown()

    async def _shutdown(self) -> None:
        await self._transport.kill()

    # ---------------------------------------------------------------- wire
    async def _request(self, op: str, wait: float | None = None, /, **params: Any) -> dict:
        if self._closed:
            raise SandboxDead(f"sandbox {self.id} is closed; acquire or open a new one")
        if self._dead is not None:
            raise SandboxDead(f"sandbox {self.id} is dead ({self._dead}); open a new one or let the pool replace it")
        rid = next(self._ids)
        try:
            payload = json.dumps({"id": rid, "op": op, **params}, separators=(",", ":")).encode()
        except RecursionError:
            raise InvalidRequest(f"{op} request is nested too deeply to encode as JSON; "
                                 f"tool arguments may nest at most {MAX_JSON_DEPTH} levels") from None
        except (TypeError, ValueError) as e:
            raise InvalidRequest(f"{op} request is not JSON-serialisable: {e}") from None
        if len(payload) > self.config.limits.max_request_bytes:
            raise RequestTooLarge(
                f"{op} request is {len(payload)} bytes; the cap is {self.config.limits.max_request_bytes} "
                "(Limits.max_request_bytes): send less data or raise the cap"
            )
        wait = wait if wait is not None else self.config.request_timeout_s
        async with self._lock:
            try:
                with anyio.fail_after(wait):
                    await self._transport.send(payload + b"\n")
                    line = await self._transport.receive_line()
            except TimeoutError:
                await self._mark_dead(f"no answer to {op} within {wait:.1f}s")
                raise SandboxTimeout(
                    f"sandbox {self.id} did not answer {op} within {wait:.1f}s and was killed"
                ) from None
            except SandboxDead as e:
                await self._mark_dead(str(e))
                raise
            except BaseException:
                # Cancelled mid-request: the stream is out of step, so the sandbox cannot be reused.
                with anyio.CancelScope(shield=True):
                    await self._mark_dead(f"{op} was cancelled mid-request")
                raise
        try:
            resp = json.loads(line)
        except ValueError:
            await self._mark_dead("garbled response")
            raise ProtocolError(f"tool server sent non-JSON: {line[:200]!r}") from None
        if not isinstance(resp, dict) or resp.get("id") not in (rid, None):
            await self._mark_dead("response out of order")
            raise ProtocolError(f"unexpected response to request {rid}: {str(resp)[:200]}")
        if not resp.get("ok"):
            err = resp.get("error") or {}
            typ, msg = str(err.get("type", "ServerError")), str(err.get("message", ""))
            if typ == "RequestTooLarge":
                raise RequestTooLarge(msg)
            if typ == "PathOutsideSandbox":
                raise PathOutsideSandbox(msg)
            if typ == "FileNotFound":
                raise SandboxFileNotFound(msg)
            raise RequestFailed(typ, msg)
        return resp["result"]

    async def _mark_dead(self, why: str) -> None:
        if self._dead is None:
            diag = self._transport.diagnostics()
            self._dead = why + (f"; {diag}" if diag else "")
        with anyio.CancelScope(shield=True):
            await self._transport.kill()

    # ----------------------------------------------------------- public API
    async def ping(self) -> dict:
        return await self._request("ping", min(5.0, self.config.request_timeout_s))

    async def exec(
        self,
        cmd: str | list[str],
        timeout: float = 30.0,
        stdin: str | bytes | None = None,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run a shell command (str) or argv (list) inside the sandbox.

        When it returns, every process the command started is gone (nothing outlives its exec to
        reach a later command); on timeout that happens early and `timed_out` is set. `env` reaches
        the command only, never the tool server's helpers. Output beyond the cap sets `truncated`.
        """
        if timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        data = stdin.encode() if isinstance(stdin, str) else stdin
        params: dict[str, Any] = {"cmd": cmd, "timeout": timeout}
        if data:
            params["stdin_b64"] = base64.b64encode(data).decode()
        if env:
            params["env"] = env
        if cwd:
            params["cwd"] = confine_path(cwd)
        r = await self._request("exec", timeout + EXEC_GRACE_S, **params)
        return ExecResult(
            exit_code=r["exit_code"],
            stdout=base64.b64decode(r["stdout_b64"]).decode(errors="replace"),
            stderr=base64.b64decode(r["stderr_b64"]).decode(errors="replace"),
            timed_out=r["timed_out"],
            truncated=r["truncated"],
            oom_killed=r["oom_killed"] or await self._backend_oom(),
            duration_s=r["duration_s"],
        )

    async def _backend_oom(self) -> bool:
        """Backends that see OOM kills from outside override this."""
        return False

    async def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> str:
        raw = data.encode() if isinstance(data, str) else data
        r = await self._request("write_file", path=confine_path(path), data_b64=base64.b64encode(raw).decode(), mode=mode)
        return r["path"]

    async def read_file(self, path: str) -> bytes:
        r = await self._request("read_file", path=confine_path(path))
        return base64.b64decode(r["data_b64"])

    async def call_tool(self, name: str, args: dict[str, Any] | None = None, *, timeout: float | None = 10.0) -> ToolResult | ToolError:
        """Call a tool of the loaded domain. Agent-facing failures come back as ToolError."""
        if json_depth(args) > MAX_JSON_DEPTH:
            raise InvalidRequest(f"arguments of {name} are nested deeper than {MAX_JSON_DEPTH} levels")
        wait = None if timeout is None else max(self.config.request_timeout_s, timeout + EXEC_GRACE_S)
        r = await self._request("call_tool", wait, name=name, args=args if args is not None else {}, timeout=timeout)
        if r.get("ok"):
            return ToolResult(name=name, output=r.get("output"))
        e = r["error"]
        return ToolError(name=name, kind=e["kind"], message=e["message"], code=e.get("code"))

    async def list_tools(self) -> list[dict]:
        return (await self._request("list_tools"))["tools"]

    async def load_domain(self, bundle: DomainBundle) -> list[str]:
        r = await self._request("load_domain", name=bundle.name, source=bundle.source, state=bundle.state)
        return r["tools"]

    async def snapshot(self) -> Snapshot:
        r = await self._request("snapshot")
        return Snapshot(domain=r["domain"], state=r["state"])

    async def digest(self) -> str:
        """`snapshot().digest` without moving the state: the tool server keeps it between writes."""
        return (await self._request("digest"))["digest"]

    async def restore(self, snapshot: Snapshot) -> None:
        await self._request("restore", state=snapshot.state, domain=snapshot.domain)

    async def reset(self, state: Any = None) -> None:
        """Kill stray processes, empty the scratch dirs, restore the initial (or given) tool state."""
        await self._request("reset", state=state)
