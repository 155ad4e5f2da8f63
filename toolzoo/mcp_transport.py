"""The client transports toolzoo.mcp opens: stdio guarded against output that is not MCP, and streamable
HTTP whose httpx client carries extra headers. Both are async context managers giving (read, write)
streams, as `mcp.Client` takes them."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
from mcp import StdioServerParameters

log = logging.getLogger("toolzoo.mcp")  # one logger for the MCP client, whichever module speaks


class HttpTransport:
    """A streamable-HTTP transport whose httpx client carries extra headers (e.g. a bearer token)."""

    def __init__(self, url: str, http_client: Any, factory: Callable[..., Any]):
        self._url, self._http, self._factory = url, http_client, factory
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> Any:
        self._stack = contextlib.AsyncExitStack()
        await self._stack.__aenter__()
        await self._stack.enter_async_context(self._http)
        return await self._stack.enter_async_context(self._factory(self._url, http_client=self._http))

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._stack is not None
        return await self._stack.__aexit__(*exc)


_SDK_PARSE_FAILURE = "Failed to parse JSONRPC message from server"


def _drop_sdk_parse_tracebacks(record: logging.LogRecord) -> bool:
    """The SDK logs every non-JSON-RPC stdout line with a traceback; GuardedStdio reports it in one line."""
    return record.getMessage() != _SDK_PARSE_FAILURE


class GuardedStdio:
    """The SDK's stdio transport, guarded against a server that writes what is not JSON-RPC to stdout.

    Before the first protocol message (the handshake) such a line is a banner: logged in one line and
    dropped. After it the stream cannot be trusted (a stray byte may have eaten a reply), so the session is
    closed with the reason: pending and later calls fail at once with McpConnectionError instead of each
    waiting out its timeout. Bytes that are not UTF-8 arrive as U+FFFD lines (encoding_error_handler
    "replace"); with the SDK's default they kill its reader and every call times out.
    """

    def __init__(self, params: StdioServerParameters, name: str, on_broken: Callable[[str], None]):
        self._params, self._name, self._on_broken = params, name, on_broken
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> Any:
        from mcp.client.stdio import logger as sdk_logger
        from mcp.client.stdio import stdio_client

        if _drop_sdk_parse_tracebacks not in sdk_logger.filters:
            sdk_logger.addFilter(_drop_sdk_parse_tracebacks)
        self._stack = contextlib.AsyncExitStack()
        await self._stack.__aenter__()
        try:
            read, write = await self._stack.enter_async_context(stdio_client(self._params))
            send, receive = anyio.create_memory_object_stream[Any](0)
            tg = await self._stack.enter_async_context(anyio.create_task_group())
            self._stack.callback(tg.cancel_scope.cancel)
            tg.start_soon(self._guard, read, send)
        except BaseException:
            await self._stack.__aexit__(None, None, None)
            raise
        return receive, write

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._stack is not None
        return await self._stack.__aexit__(*exc)

    async def _guard(self, read: Any, send: Any) -> None:
        handshaken = False
        async with send:
            async for message in read:
                if not isinstance(message, Exception):
                    handshaken = True
                    await send.send(message)
                    continue
                line = _offending_line(message)
                if not handshaken:
                    log.warning("MCP server %s wrote text that is not MCP to stdout before the handshake "
                                "(ignored): %s", self._name, line)
                    continue
                reason = f"wrote output that is not MCP to stdout, so the session was closed: {line}"
                log.error("MCP server %s %s", self._name, reason)
                self._on_broken(reason)
                return  # closing `send` ends the session: waiting requests fail now


def _offending_line(e: Exception) -> str:
    """The stdout line the SDK could not parse, shown short and escaped (U+FFFD stands for bytes not UTF-8)."""
    errors = getattr(e, "errors", None)
    line = errors()[0].get("input") if callable(errors) and errors() else None
    if not isinstance(line, str):
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    shown = json.dumps(line[:80]) + (f" (+{len(line) - 80} characters)" if len(line) > 80 else "")
    return shown + (" (U+FFFD stands for bytes that are not UTF-8)" if "\ufffd" in line else "")
