"""MCP both ways: import a real MCP server's tools into the zoo, and serve a zoo domain as an MCP server.

Import (client side)::

    specs = await list_mcp_tools(McpSource(command=["python", "server.py"]))
    async with McpClient() as client:
        rt = ToolRuntime(sb, domain, external=specs, mcp_call=client.call)

`McpClient.call` checks the arguments against the tool's imported `inputSchema`
first (as zoo tools are checked in their sandbox), then returns the agent-facing
outcome of a call: `ToolResult`, or `ToolError` for anything the agent should
read (arguments the schema refuses or a JSON-RPC invalid-params error are kind
"invalid_arguments", an `isError` result "tool_failure", a call over its
deadline "timeout"). A result's `output` is the server's `structuredContent`
when it sends one; otherwise it is always a list with one item per content
block, whatever their number (a text block holding a JSON object or array
decoded, other text as is, other blocks as their MCP dict). When the MCP server itself cannot be reached
(spawn fails, connection refused, the session died) it *raises*
`McpConnectionError`, a `SandboxError`: like a dead sandbox, that is an
infrastructure failure of the episode, not something the agent caused. So does
a stdio server that writes what is not MCP to stdout after the handshake (the
session is closed at once; a banner before it is logged and ignored), and an
HTTP server that no longer knows the client's session raises `McpSessionLost`
(it restarted: the state may be gone), on that call and every later one.

Tools keep their server's name for the call (`ToolSpec.mcp_name`); the model
sees a valid, stable, collision-free name (toolzoo.mcp_names). `import_tools`
skips a tool that cannot be imported, with a one-line reason.

Serve (server side)::

    serve_domain("retail_orders", transport="http", port=8765, token="...")

opens one sandbox, loads `bundle(domain, seed=seed)` into it and answers
`tools/list` with each spec's `to_mcp()` (schemas byte-for-byte: the low-level
SDK server is used, so nothing regenerates them) and `tools/call` with
`sandbox.call_tool`. The state lives in that one sandbox for the life of the
server, so it persists across calls (and is shared by every client of an HTTP
server). Over HTTP a bind address other than loopback requires a bearer token;
with a token every request must carry `Authorization: Bearer <token>` or gets
401. The token is never logged or printed.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import json
import logging
import math
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal

import anyio
import mcp_types as mtypes
from mcp import Client, StdioServerParameters
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from sandboxes import Sandbox, SandboxConfig, SandboxError, ToolError, ToolResult, open_sandbox
from toolzoo.mcp_names import model_names
from toolzoo.mcp_transport import GuardedStdio, HttpTransport
from toolzoo.spec import ENV_REF_RE, Domain, McpSource, ToolSpec

log = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN_ENV = "TOOLDOJO_MCP_TOKEN"
MCP_PATH = "/mcp"


class McpConnectionError(SandboxError):
    """An MCP server could not be started or reached, or its session died."""


class McpSessionLost(McpConnectionError):
    """An HTTP MCP server no longer knows this client's session (it restarted, or expired the session), so
    the state the calls so far built may be gone. Every later call of this client to that server raises it
    too: an episode must end here, not go on (and be scored) on a world that changed under it."""


class SkippedTool(BaseModel):
    """A server's tool that was not imported, and why (one line)."""

    name: str
    reason: str


class McpImport(BaseModel):
    """What importing a server's tools gave: the tools, and those skipped."""

    tools: list[ToolSpec] = Field(default_factory=list)
    skipped: list[SkippedTool] = Field(default_factory=list)


# ====================================================================== client side


def describe(source: McpSource) -> str:
    """A printable name for a source (never includes URL credentials)."""
    if source.command is not None:
        return "`" + " ".join(source.command) + "`"
    url = source.url or ""
    return re.sub(r"//[^/@]*@", "//", url)


def _key(source: McpSource) -> str:
    return json.dumps([source.command, source.url, sorted(source.env.items())])


def resolve_env(source: McpSource, environ: dict[str, str] | None = None) -> dict[str, str]:
    """`source.env` with each `${NAME}` replaced by the caller's NAME; raises McpConnectionError
    naming the variable (never a value) when NAME is not set."""
    environ = dict(os.environ) if environ is None else environ
    out: dict[str, str] = {}
    for key, template in source.env.items():
        missing = [n for n in ENV_REF_RE.findall(template) if n not in environ]
        if missing:
            raise McpConnectionError(
                f"MCP server {describe(source)}: env {key} refers to ${{{missing[0]}}}, but {missing[0]} is not set "
                "in this environment")
        out[key] = ENV_REF_RE.sub(lambda m: environ[m.group(1)], template)
    return out


def domain_slug(name: str) -> str:
    """A zoo domain name from a server's name: lowercase, [a-z0-9_]."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _fallback_name(source: McpSource) -> str:
    if source.command:
        parts = [p for p in source.command if not p.startswith("-")]
        tail = parts[-1] if parts else source.command[0]
        return re.split(r"[\\/]", tail)[-1].rsplit(".", 1)[0]
    from urllib.parse import urlsplit

    return urlsplit(source.url or "").hostname or "mcp"


def _open_client(source: McpSource, headers: dict[str, str] | None, timeout: float, *, mode: str = "legacy",
                 on_status: Callable[[int], None] | None = None,
                 on_broken: Callable[[str], None] = lambda reason: None) -> Client:
    """A client for `source`; `on_status` hears each HTTP status (on an error the SDK keeps only a generic message),
    `on_broken` why a stdio session was closed because the server broke the protocol.

    `mode` is the SDK's for HTTP: "legacy" is the initialize handshake, so the server keeps a session id for us
    and a server that restarted answers it with 404 (McpSessionLost); the SDK's default, "auto", prefers the
    sessionless 2026 protocol, where a restart goes unnoticed.
    """
    if source.command is not None:
        if not source.command:
            raise ValueError("an MCP stdio source needs a non-empty command")
        params = StdioServerParameters(command=source.command[0], args=list(source.command[1:]),
                                       env=resolve_env(source) or None, encoding_error_handler="replace")
        return Client(GuardedStdio(params, describe(source), on_broken), read_timeout_seconds=timeout)
    else:
        assert source.url is not None
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

        http = create_mcp_http_client(headers=dict(headers) if headers else None)
        if on_status is not None:
            async def heard(response: Any) -> None:
                on_status(response.status_code)

            http.event_hooks["response"].append(heard)
        server = HttpTransport(source.url, http, streamable_http_client)
    return Client(server, read_timeout_seconds=timeout, mode=mode)


def _refuses_handshake(e: BaseException) -> bool:
    """Whether connecting failed because the server does not know the initialize handshake."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return isinstance(e, MCPError) and e.code in (mtypes.METHOD_NOT_FOUND, mtypes.INVALID_REQUEST)


def _refusal(source: McpSource, status: int | None, sent_auth: bool) -> McpConnectionError | None:
    """The error for an HTTP server that refused us as unauthorized (401) or forbidden (403), else None."""
    if status not in (401, 403):
        return None
    what = "unauthorized (HTTP 401)" if status == 401 else "forbidden (HTTP 403)"
    fix = ("check the token given with --token (sent as `Authorization: Bearer ...`)" if sent_auth
           else "it needs a bearer token: pass --token TOKEN (sent as `Authorization: Bearer TOKEN`)")
    return McpConnectionError(f"MCP server {describe(source)} refused the request as {what}: {fix}")


def _text_of(result: mtypes.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, mtypes.TextContent))


def _block(c: Any) -> Any:
    """One content block as output: JSON object/array text decoded, other text as is, others as MCP dicts."""
    if isinstance(c, mtypes.TextContent):
        if c.text.lstrip()[:1] in ("{", "["):
            try:
                return json.loads(c.text)
            except ValueError:
                pass
        return c.text
    return c.model_dump(by_alias=True, exclude_none=True, mode="json")


def _output_of(result: mtypes.CallToolResult) -> Any:
    """structuredContent if sent; else one item per block, so the shape never depends on how many there are."""
    if result.structured_content is not None:
        return result.structured_content
    return [_block(c) for c in result.content]


@functools.lru_cache(maxsize=1024)
def _arg_validator(schema_json: str) -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(schema_json))


def argument_problem(schema: dict[str, Any], args: Any) -> str | None:
    """Why `args` break the tool's input schema (one line), or None when they fit."""
    import jsonschema

    try:
        err = jsonschema.exceptions.best_match(_arg_validator(json.dumps(schema, sort_keys=True)).iter_errors(args))
    except Exception:  # noqa: BLE001 - a schema we cannot evaluate here (e.g. a remote $ref): the server decides
        return None
    if err is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
    return f"arguments{where}: {err.message}"


class McpClient:
    """Sessions to MCP servers, one per source, opened on first use and closed on exit.

    Each session lives in a task of this client's task group, so `call` may be
    used from any task (e.g. concurrent rollouts) while the client is open.
    `headers` go with every streamable-HTTP request (e.g. {"Authorization": "Bearer ..."}).
    """

    def __init__(
        self,
        *,
        headers: dict[str, str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float = 30.0,
    ):
        self.headers = dict(headers or {})
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self._sessions: dict[str, Client] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._http_status: dict[str, int] = {}  # the last HTTP status per source
        self._broken: dict[str, str] = {}  # why a session was closed under us, per source
        self._tg: Any = None
        self._closing = anyio.Event()

    async def __aenter__(self) -> McpClient:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        self._closing.set()
        tg, self._tg = self._tg, None
        # The caller's own exception is not the task group's: let it propagate unwrapped.
        await tg.__aexit__(None, None, None)
        return None

    # ------------------------------------------------------------ sessions
    async def _hold(self, source: McpSource, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        key = _key(source)
        deadline = anyio.current_time() + self.connect_timeout
        # HTTP: the initialize handshake first, so the server keeps a session (see _open_client); a server that
        # speaks only the sessionless protocol refuses it and is spoken to that way.
        modes = ("legacy", "auto") if source.url is not None else ("auto",)
        for mode in modes:
            started = False
            try:
                client = _open_client(source, self.headers, self.call_timeout, mode=mode,
                                      on_status=lambda status: self._http_status.__setitem__(key, status),
                                      on_broken=lambda reason: self._broken.__setitem__(key, reason))
                with anyio.CancelScope(deadline=deadline) as connecting:
                    async with client:
                        connecting.deadline = math.inf
                        self._sessions[key] = client
                        try:
                            task_status.started(client)
                            started = True
                            await self._closing.wait()
                        finally:
                            self._sessions.pop(key, None)
                if connecting.cancelled_caught and not started:
                    raise TimeoutError
                return
            except Exception as e:
                if not started and mode != modes[-1] and _refuses_handshake(e) and self._refused(source) is None:
                    log.warning("MCP server %s refuses the initialize handshake (%s): using the sessionless protocol, "
                                "where a restarted server cannot be noticed", describe(source), _one_line(e))
                    continue
                if not started:
                    raise self._refused(source) or _connection_error(source, e) from None
                log.warning("MCP session to %s ended: %s", describe(source), _one_line(e))
                # A later call must not open a fresh session (a fresh state) in its place.
                self._broken.setdefault(key, f"ended the session under this client ({_one_line(e)})")
                return

    async def session(self, source: McpSource) -> Client:
        """The open session to `source`, connecting if needed; raises McpConnectionError."""
        if self._tg is None:
            raise RuntimeError("use McpClient as `async with McpClient() as client:`")
        key = _key(source)
        if key in self._sessions:
            return self._sessions[key]
        lost = self._lost(source)
        if lost is not None:  # a lost session is not silently replaced by a fresh one (a fresh state)
            raise lost
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            if key not in self._sessions:
                await self._tg.start(self._hold, source)
            return self._sessions[key]

    def _lost(self, source: McpSource) -> McpConnectionError | None:
        """Why the session to `source` cannot be used any more (recorded when it broke, or a 404 now: the HTTP
        server no longer knows it), else None."""
        key = _key(source)
        if key not in self._broken and source.url is not None and self._http_status.get(key) == 404:
            self._broken[key] = "no longer knows this client's session (it restarted or expired it): its state may be gone"
            log.error("MCP server %s %s", describe(source), self._broken[key])
        if key not in self._broken:
            return None
        cls = McpSessionLost if source.url is not None else McpConnectionError
        return cls(f"MCP server {describe(source)} {self._broken[key]}")

    def _refused(self, source: McpSource) -> McpConnectionError | None:
        status = self._http_status.get(_key(source))
        return _refusal(source, status, any(h.lower() == "authorization" for h in self.headers))

    # ------------------------------------------------------------ API
    async def server_name(self, source: McpSource) -> str:
        client = await self.session(source)
        info = client.server_info
        return info.name if info is not None and info.name else ""

    async def list_tools(self, source: McpSource) -> list[ToolSpec]:
        """The server's importable tools as ToolSpecs (each skipped tool logged with its reason)."""
        imported = await self.import_tools(source)
        for skip in imported.skipped:
            log.warning("MCP tool %r of %s skipped: %s", skip.name, describe(source), skip.reason)
        return imported.tools

    async def import_tools(self, source: McpSource) -> McpImport:
        """The server's tools as ToolSpecs (provenance "mcp", category "mcp", schemas as sent), named for the
        model by toolzoo.mcp_names (the server's name in `mcp_name`); a tool that cannot be imported is skipped
        with a one-line reason, never sinking the others."""
        client = await self.session(source)
        domain = source.server_name or domain_slug(await self.server_name(source)) or domain_slug(_fallback_name(source)) or "mcp"
        src = source if source.server_name else source.model_copy(update={"server_name": domain})
        tools: list[mtypes.Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(self.call_timeout):
                for _ in range(1000):
                    page = await client.list_tools(cursor=cursor)
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except MCPError as e:
            raise self._refused(source) or McpConnectionError(
                f"MCP server {describe(source)} failed to list its tools: {e.message}") from None
        except TimeoutError:
            raise McpConnectionError(f"MCP server {describe(source)} did not list its tools within {self.call_timeout:.0f}s") from None
        except Exception as e:
            raise _connection_error(source, e) from None
        names, skipped = model_names([t.name for t in tools])
        out = McpImport(skipped=[SkippedTool(name=n, reason=r) for n, r in skipped.items()])
        for t in tools:
            if t.name not in names:
                continue
            raw = t.model_dump(by_alias=True, exclude_none=True, mode="json")
            try:
                out.tools.append(ToolSpec.from_mcp({**raw, "name": names[t.name]}, src, domain=domain, category="mcp",
                                                   mcp_name=t.name))
            except ValueError as e:
                out.skipped.append(SkippedTool(name=t.name, reason=_reason(e)))
        return out

    async def call(self, spec: ToolSpec, args: dict[str, Any] | None = None) -> ToolResult | ToolError:
        """Call an imported tool on its server (usable as ToolRuntime's `mcp_call`)."""
        if spec.mcp is None:
            return ToolError(name=spec.name, kind="internal_error", message=f"{spec.name} is not an MCP tool (no mcp source)")
        args = {} if args is None else args
        problem = argument_problem(spec.parameters, args)
        if problem is not None:
            return ToolError(name=spec.name, kind="invalid_arguments", message=f"{spec.name}: {problem}")
        client = await self.session(spec.mcp)
        try:
            with anyio.fail_after(self.call_timeout):
                result = await client.call_tool(spec.call_name, args)
        except TimeoutError:
            return ToolError(name=spec.name, kind="timeout", message=f"{spec.name} did not answer within {self.call_timeout:.0f}s")
        except MCPError as e:
            lost = self._lost(spec.mcp)
            if lost is not None:
                raise lost from None
            if e.code == mtypes.CONNECTION_CLOSED:
                raise McpConnectionError(f"MCP server {describe(spec.mcp)} closed the connection: {e.message}") from None
            if e.code == mtypes.REQUEST_TIMEOUT:
                return ToolError(name=spec.name, kind="timeout", message=e.message)
            refused = self._refused(spec.mcp)
            if refused is not None:
                raise refused from None
            kind = "invalid_arguments" if e.code == mtypes.INVALID_PARAMS else "tool_failure"
            return ToolError(name=spec.name, kind=kind, message=e.message or f"{spec.name} failed (MCP error {e.code})")
        except RuntimeError as e:
            # The SDK raises RuntimeError when structured output breaks the declared outputSchema.
            return ToolError(name=spec.name, kind="tool_failure", message=str(e))
        except Exception as e:
            raise _connection_error(spec.mcp, e) from None
        if result.is_error:
            code = None
            sc = result.structured_content
            if isinstance(sc, dict) and isinstance(sc.get("error"), dict) and isinstance(sc["error"].get("code"), str):
                code = sc["error"]["code"]
            return ToolError(name=spec.name, kind="tool_failure", message=_text_of(result) or f"{spec.name} failed", code=code)
        return ToolResult(name=spec.name, output=_output_of(result))


def _reason(e: ValueError) -> str:
    """The first message of a (pydantic) validation error, without pydantic's header and links."""
    errors = getattr(e, "errors", None)
    if callable(errors):
        first = errors()[0]
        return str(first.get("ctx", {}).get("error") or first.get("msg") or e)
    return str(e).strip().splitlines()[0]


def _one_line(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup) and e.exceptions:
        return _one_line(e.exceptions[0])
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0]}" if msg else type(e).__name__


def _connection_error(source: McpSource, e: BaseException) -> McpConnectionError:
    if isinstance(e, McpConnectionError):
        return e
    if isinstance(e, TimeoutError):
        return McpConnectionError(f"MCP server {describe(source)} did not answer the handshake in time")
    return McpConnectionError(f"cannot talk to MCP server {describe(source)}: {_one_line(e)}")


async def list_mcp_tools(source: McpSource, *, headers: dict[str, str] | None = None, timeout: float = 30.0) -> list[ToolSpec]:
    """Connect to a real MCP server (stdio `command` or streamable-HTTP `url`) and list its tools as ToolSpecs.

    `domain` is `source.server_name` if set, else derived from the server's name;
    the returned specs' `mcp` source carries that name. Raises McpConnectionError
    if the server cannot be reached; a tool that is not importable is logged and skipped.
    """
    async with McpClient(headers=headers, connect_timeout=timeout, call_timeout=timeout) as client:
        return await client.list_tools(source)


async def import_mcp_tools(source: McpSource, *, headers: dict[str, str] | None = None, timeout: float = 30.0) -> McpImport:
    """`list_mcp_tools`, also saying which tools were skipped and why. `timeout` bounds the whole import
    (starting or connecting, the handshake and listing the tools together), not each step."""
    with anyio.move_on_after(timeout):
        async with McpClient(headers=headers, connect_timeout=timeout, call_timeout=timeout) as client:
            return await client.import_tools(source)
    raise McpConnectionError(f"MCP server {describe(source)} did not give its tools within {timeout:g}s "
                             "(--timeout bounds the whole import)")


# ====================================================================== server side


def _tool_result(out: Any) -> mtypes.CallToolResult:
    return mtypes.CallToolResult(
        content=[mtypes.TextContent(text=json.dumps(out, ensure_ascii=False))],
        structured_content=out if isinstance(out, dict) else None,
    )


def _error_result(message: str, *, kind: str, code: str | None = None) -> mtypes.CallToolResult:
    return mtypes.CallToolResult(
        content=[mtypes.TextContent(text=message)],
        structured_content={"error": {"kind": kind, "code": code, "message": message}},
        is_error=True,
    )


def build_server(
    domain: Domain,
    sandbox: Sandbox,
    *,
    tools: Sequence[ToolSpec] | None = None,
    call_timeout: float | None = 10.0,
) -> Server[Any]:
    """An MCP server (low-level SDK) whose tools are `domain`'s, executed in `sandbox` (already loaded)."""
    specs = {t.name: t for t in (tools if tools is not None else domain.tools)}
    wire = [t.to_mcp() for t in specs.values()]

    async def on_list_tools(ctx: Any, params: Any) -> mtypes.ListToolsResult:
        return mtypes.ListToolsResult(tools=[mtypes.Tool.model_validate(json.loads(json.dumps(t))) for t in wire])

    async def on_call_tool(ctx: Any, params: mtypes.CallToolRequestParams) -> mtypes.CallToolResult:
        if params.name not in specs:
            return _error_result(f"no tool {params.name!r}; known: {', '.join(specs)}", kind="unknown_tool")
        try:
            r = await sandbox.call_tool(params.name, dict(params.arguments or {}), timeout=call_timeout)
        except SandboxError as e:
            log.error("sandbox failed during %s: %s", params.name, e)
            return _error_result(f"internal error: the sandbox failed ({type(e).__name__})", kind="internal_error")
        if isinstance(r, ToolError):
            return _error_result(r.message, kind=r.kind, code=r.code)
        return _tool_result(r.output)

    def input_schema(name: str) -> dict[str, Any] | None:
        return specs[name].parameters if name in specs else None

    try:
        from importlib.metadata import version as _dist_version

        version = _dist_version("tooldojo")
    except Exception:
        version = ""

    return Server(
        domain.name,
        version=version,
        title=f"tooldojo: {domain.name}",
        description=domain.description,
        instructions=domain.policy,
        get_tool_input_schema=input_schema,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


class BearerAuth:
    """ASGI middleware: every HTTP request must carry `Authorization: Bearer <token>`, else 401."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self._token = token.encode()

    def _ok(self, headers: list[tuple[bytes, bytes]]) -> bool:
        for name, value in headers:
            if name.lower() == b"authorization":
                scheme, _, given = value.strip().partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)
        return False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not self._ok(scope.get("headers") or []):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            body = b'{"error": "unauthorized", "error_description": "send Authorization: Bearer <token>"}'
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="tooldojo"')]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def check_bind(host: str, token: str | None) -> None:
    """Refuse to expose the server beyond loopback without a token."""
    if token is not None and not token.strip():
        raise ValueError("the MCP token is empty: give a non-empty --token (or TOOLDOJO_MCP_TOKEN)")
    if host not in LOOPBACK and not token:
        raise ValueError(
            f"binding to {host} exposes the tools beyond this machine; pass --token (or set {TOKEN_ENV}) "
            "so clients must send a bearer token, or bind 127.0.0.1"
        )


def _listen_socket(host: str, port: int) -> socket.socket:
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
        sock.set_inheritable(True)
    except OSError as e:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    return sock


@contextlib.asynccontextmanager
async def _domain_sandbox(domain: Domain, seed: int, backend: str) -> AsyncIterator[Sandbox]:
    from toolzoo.runtime import bundle

    sb = await open_sandbox(SandboxConfig(backend=backend))  # type: ignore[arg-type]
    try:
        await sb.load_domain(bundle(domain, seed=seed))
        yield sb
    finally:
        await sb.close()


async def _on_signal(stop: Callable[[], None]) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _ in signals:
            stop()
            return


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def aserve_domain(
    domain_name: str,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    seed: int = 0,
    backend: str = "auto",
) -> None:
    """Serve a zoo domain as an MCP server until stdin closes (stdio) or a signal arrives."""
    from toolzoo.domains import load_domain

    if transport not in ("stdio", "http"):
        raise ValueError(f"unknown transport {transport!r}: use stdio or http")
    domain = load_domain(domain_name)
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):  # fd 1 is diverted to stderr while serving
            async with _domain_sandbox(domain, seed, backend) as sb, anyio.create_task_group() as tg:
                server = build_server(domain, sb)
                tg.start_soon(_on_signal, tg.cancel_scope.cancel)
                await server.run(read, write, server.create_initialization_options())
                tg.cancel_scope.cancel()
        return

    import uvicorn

    check_bind(host, token)
    sock = _listen_socket(host, port)
    try:
        async with _domain_sandbox(domain, seed, backend) as sb:
            server = build_server(domain, sb)
            app: Any = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
            if token:
                app = BearerAuth(app, token)

            class _Uvicorn(uvicorn.Server):
                @contextlib.contextmanager
                def capture_signals(self) -> Any:  # we handle signals ourselves, so the sandbox gets closed
                    yield

            web = _Uvicorn(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
            bound = sock.getsockname()
            shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
            _say(f"serving {domain.name} ({len(domain.tools)} tools, sandbox {sb.backend}) at "
                 f"http://{shown}:{bound[1]}{MCP_PATH}" + (" (bearer token required)" if token else ""))
            async with anyio.create_task_group() as tg:
                tg.start_soon(_on_signal, lambda: setattr(web, "should_exit", True))
                await web.serve(sockets=[sock])
                tg.cancel_scope.cancel()
    finally:
        sock.close()


def serve_domain(
    domain_name: str,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    seed: int = 0,
    backend: str = "auto",
) -> None:
    """Blocking `aserve_domain`: serve a zoo domain over stdio or streamable HTTP (`http://host:port/mcp`)."""
    if transport == "http":
        check_bind(host, token)  # fail before any sandbox starts
    anyio.run(lambda: aserve_domain(domain_name, transport=transport, host=host, port=port,
                                    token=token, seed=seed, backend=backend))
