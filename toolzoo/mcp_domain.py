"""MCP servers as first-class domains: episodes, gold replays and rewards over a real MCP server.

A domain folder with an `mcp.json` (written by `dojo zoo import-mcp --domain-out DIR`) is a
domain whose tools live on an MCP server:

    {"tools": [ToolSpec, ...],               the server's tools, as imported
     "state": {"read": "tool:get_state",     how to read the server's world state (a tool, or
               "reset": "tool:reset_state"}, "resource:URI"), and how to put it back to the start
     "category": "...", "description": "..."}

`McpPool` stands where a SandboxPool does for such a domain: each `acquire()` opens a new MCP
client session (a stdio server is a fresh process per episode, so episodes never share state)
and `release()` closes it. A session answers the sandbox calls the episode loop and the rewards
make (`load_domain`, `call_tool`, `snapshot`, `digest`, `reset`): loading calls the reset hook,
a snapshot calls the read hook. Without a declared `state`, a snapshot's state is None and
world-state rewards abstain (`has_state`). A connection the server drops is a `SandboxDead`
(McpConnectionError): the episode ends as `sandbox_dead`, not as the agent's failure.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from sandboxes import DomainBundle, Snapshot, ToolError, ToolResult
from sandboxes.errors import SandboxDead
from toolzoo.mcp import McpClient, McpConnectionError
from toolzoo.spec import Domain, McpStateHook, ToolSpec


MODEL_NAME = re.compile(r"[^a-zA-Z0-9_-]")


class StateHookError(SandboxDead):
    """A state hook failed or answered something that is not a JSON state: the episode cannot be
    scored on the world state, and it is not the agent's doing."""


def is_mcp_domain(domain: Domain) -> bool:
    return bool(domain.tools) and all(t.provenance == "mcp" for t in domain.tools)


def has_state(domain: Domain) -> bool:
    """Whether world-state rewards can score this domain (a zoo domain, or MCP with a state hook)."""
    return not is_mcp_domain(domain) or domain.mcp_state is not None


def pool_for(domain: Domain, pool: Any) -> Any:
    """The pool episodes of `domain` take their tool environment from."""
    return McpPool(domain) if is_mcp_domain(domain) else pool


async def release_to(sb: Any, pool: Any) -> None:
    """Give `sb` back to the pool it came from: `pool`, or its own McpPool for an MCP session."""
    await (sb.pool if isinstance(sb, McpSession) else pool).release(sb)


class McpSession:
    """One episode's session to the domain's MCP server, answering like a Sandbox."""

    backend = "mcp"

    def __init__(self, domain: Domain, *, call_timeout: float = 30.0, connect_timeout: float = 60.0):
        self.domain = domain
        self.tools = {t.name: t for t in domain.tools}
        self.hook: McpStateHook | None = domain.mcp_state
        self.client = McpClient(call_timeout=call_timeout, connect_timeout=connect_timeout)
        self.pool: Any = None  # the McpPool it came from
        self._portal_cm: Any = None
        self._client_cm: Any = None

    # The client's session lives in an event loop of its own (a blocking portal's thread): the
    # episode loop and the rewards acquire and release inside cancel scopes of their own
    # (shielded releases), which must not nest with the client's task group.
    async def _run(self, fn: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(self._portal.call, fn, *args)

    async def open(self) -> McpSession:
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = await anyio.to_thread.run_sync(self._portal_cm.__enter__)
        try:
            self._client_cm = self._portal.wrap_async_context_manager(self.client)
            await anyio.to_thread.run_sync(self._client_cm.__enter__)
            await self._run(self.client.session, self.domain.tools[0].mcp)
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        client_cm, portal_cm, self._client_cm, self._portal_cm = self._client_cm, self._portal_cm, None, None
        with anyio.CancelScope(shield=True):
            try:
                if client_cm is not None:
                    await anyio.to_thread.run_sync(client_cm.__exit__, None, None, None)
            finally:
                if portal_cm is not None:
                    await anyio.to_thread.run_sync(portal_cm.__exit__, None, None, None)

    # -------------------------------------------------------- sandbox calls
    async def load_domain(self, bundle: DomainBundle) -> list[str]:
        await self.reset()
        return sorted(self.tools)

    async def call_tool(self, name: str, args: dict[str, Any] | None = None, *, timeout: float | None = None,
                        **_: Any) -> ToolResult | ToolError:
        spec = self.tools.get(name)
        if spec is None:
            return ToolError(name=name, kind="unknown_tool", message=f"unknown tool {name!r}; available: {sorted(self.tools)}")
        try:
            return await self._run(self.client.call, spec, args or {})
        except McpConnectionError as e:
            raise SandboxDead(str(e)) from None

    async def snapshot(self) -> Snapshot:
        return Snapshot(domain=self.domain.name, state=await self._state())

    async def digest(self) -> str:
        return (await self.snapshot()).digest

    async def reset(self, state: Any = None) -> None:
        if self.hook is not None and self.hook.reset:
            await self._hook(self.hook.reset, "reset")

    # ---------------------------------------------------------------- hooks
    async def _state(self) -> Any:
        if self.hook is None:
            return None
        return await self._hook(self.hook.read)

    async def _hook(self, ref: str, role: str = "read") -> Any:
        kind, _, target = ref.partition(":")
        where = f"the state {role} hook {ref} of MCP domain {self.domain.name}"
        source = self.domain.tools[0].mcp
        assert source is not None
        if kind == "resource":
            async def read() -> Any:
                return await (await self.client.session(source)).read_resource(target)

            try:
                result = await self._run(read)
            except McpConnectionError as e:
                raise SandboxDead(str(e)) from None
            except Exception as e:  # noqa: BLE001 - the server's own error (no such resource): name the hook
                raise StateHookError(f"{where} failed: {type(e).__name__}: {e}") from None
            texts = [getattr(c, "text", None) for c in result.contents]
            text = "".join(t for t in texts if t is not None)
            try:
                return json.loads(text)
            except ValueError:
                raise StateHookError(f"{where} returned text that is not JSON: {text[:80]!r}") from None
        spec = ToolSpec(name=MODEL_NAME.sub("_", target)[:64] or "state_hook", mcp_name=target,
                        description=f"state hook {target}", provenance="mcp", mcp=source, domain=self.domain.name)
        try:
            r = await self._run(self.client.call, spec, {})
        except McpConnectionError as e:
            raise SandboxDead(str(e)) from None
        if not r.ok:
            raise StateHookError(f"{where} failed: {r.message}")
        if role == "reset":
            return None
        out = r.output
        if isinstance(out, dict) and set(out) == {"result"}:  # the SDK wraps a typed return as {"result": ...}
            out = out["result"]
        elif isinstance(out, list) and len(out) == 1:
            out = out[0]
        if isinstance(out, str):
            # One text block that is not a JSON object or array: a world state cannot be compared to it.
            raise StateHookError(f"{where} returned text that is not JSON: {out[:80]!r}")
        return out


class McpPool:
    """A SandboxPool's interface over per-episode MCP sessions."""

    def __init__(self, domain: Domain):
        self.domain = domain

    async def acquire(self) -> McpSession:
        session = McpSession(self.domain)
        session.pool = self
        try:
            return await session.open()
        except McpConnectionError as e:
            raise SandboxDead(str(e)) from None

    async def release(self, session: McpSession) -> None:
        await session.close()

    @asynccontextmanager
    async def sandbox(self) -> AsyncIterator[McpSession]:
        session = await self.acquire()
        try:
            yield session
        finally:
            await self.release(session)


def resolve_hooks(specs: list[ToolSpec], state: McpStateHook | None) -> McpStateHook | None:
    """The hooks with each `tool:` target as the server names it (a hook may be given by the tool's model
    name, `kv_get_state`, or its server name, `kv.get_state`)."""
    from toolzoo.spec import SpecError

    if state is None:
        return None
    by_any = {**{t.name: t.call_name for t in specs}, **{t.call_name: t.call_name for t in specs}}
    out = {}
    for role in ("read", "reset"):
        ref = getattr(state, role)
        if ref and ref.startswith("tool:"):
            target = ref.partition(":")[2]
            if target not in by_any:
                raise SpecError(f"--state-{role} {ref}: the server has no tool {target!r}; it has "
                                f"{', '.join(sorted(t.call_name for t in specs))}")
            ref = f"tool:{by_any[target]}"
        out[role] = ref
    return McpStateHook(**out)


def write_mcp_domain(specs: list[ToolSpec], out: str | Path, name: str, *, state: McpStateHook | None = None,
                     effects: dict[str, str] | None = None, policy: str | None = None,
                     description: str = "", overwrite: bool = True) -> Path:
    """A domain folder OUT/NAME (mcp.json) of imported MCP tools; the state hooks' tools are not offered.
    Written under a temporary name and renamed into place."""
    from toolzoo.spec import NAME_RE, SpecError

    from toolzoo.domain_dirs import builtin_names, write_atomically

    if not NAME_RE.match(name):
        raise SpecError(f"domain name {name!r} must be an identifier")
    if name in builtin_names():
        raise SpecError(f"--name {name!r} is a built-in domain's name (reserved); choose another")
    effects = dict(effects or {})
    names = {t.name for t in specs}
    state = resolve_hooks(specs, state)
    hooks = {ref.partition(":")[2] for ref in ((state.read, state.reset) if state else ()) if ref and
             ref.startswith("tool:")}
    missing = sorted(set(effects) - names)
    if missing:
        raise SpecError(f"the server has no tool {', '.join(map(repr, missing))}; it has {', '.join(sorted(names))}")
    tools = [t.model_copy(update={"domain": name, "effect": effects.get(t.name, t.effect)})
             for t in specs if t.call_name not in hooks]
    if not tools:
        raise SpecError("the server has no tools besides the state hooks")
    files = {"mcp.json": json.dumps({
        "description": description or f"tools of the MCP server {name}",
        "state": state.model_dump() if state else None,
        "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools]}, indent=1)}
    if policy:
        files["policy.md"] = policy
    return write_atomically(Path(out).expanduser(), name, files, overwrite=overwrite)


def probe_state(specs: list[ToolSpec], state: McpStateHook, name: str, *, timeout: float = 30.0) -> Any:
    """Call the hooks once, as an episode will (reset, then read), and return the state; a hook that
    fails or answers something other than a JSON object or array is a SpecError naming its option."""
    from toolzoo.spec import SpecError

    domain = Domain(name=name, category="mcp", description=name, policy="", source="", mcp_state=state,
                    tools=[t.model_copy(update={"domain": name}) for t in specs])

    async def go() -> Any:
        with anyio.fail_after(timeout):  # the whole probe (connect, reset, read), not each step
            session = McpSession(domain, call_timeout=timeout, connect_timeout=timeout)
            await session.open()
            try:
                await session.reset()
                return await session._state()
            finally:
                await session.close()

    try:
        value = anyio.run(go)
    except SandboxDead as e:
        raise SpecError(f"--state-read/--state-reset: {e}") from None
    except TimeoutError:
        raise SpecError(f"--state-read/--state-reset: the hooks did not answer within the --timeout left "
                        f"({timeout:.3g}s)") from None
    if not isinstance(value, dict | list):
        raise SpecError(f"--state-read {state.read} returned {type(value).__name__} {value!r:.60}, not a JSON "
                        "object or array (the server's whole world state)")
    return value
