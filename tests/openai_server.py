"""A real OpenAI-compatible chat-completions server on 127.0.0.1, for tests of code that talks to one.

    class Double(ChatServer):
        def handle(self, body):                       # -> (status, payload[, headers])
            return 200, completion("<count>2</count>", model=body.get("model"))

    with Double() as server:
        client = LLMClient(LLMConfig(base_url=server.base_url, model="m", api_key_env="NO_KEY"))

It is an http.server in a thread (no mock of the client): requests go through the real HTTP stack.
Every request body is kept in `requests`, its Authorization header in `auth_headers`; `in_flight` and
`max_in_flight` count concurrent requests.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(text: str | None = None, *, tool_calls: list[dict[str, Any]] | None = None, model: Any = None,
               choices: list[dict[str, Any]] | None = None, prompt_tokens: int = 7, completion_tokens: int = 3,
               id: str = "chatcmpl-test") -> dict[str, Any]:
    """A chat.completion payload: one choice with `text` (and `tool_calls`), or the given `choices`."""
    if choices is None:
        msg: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            msg["tool_calls"] = tool_calls
        choices = [{"index": 0, "message": msg, "finish_reason": "tool_calls" if tool_calls else "stop"}]
    return {"id": id, "object": "chat.completion", "created": 0, "model": model, "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def error(status: int, message: str = "boom") -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": "test", "code": status}}


class ChatServer:
    """POST /v1/chat/completions answered by `handle(body)`; override it (or pass `handler`)."""

    def __init__(self, handler: Any = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._handler = handler
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.auth_headers.append(self.headers.get("authorization", ""))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    out = server.handle(body)
                    status, payload = out[0], out[1]
                    self._send(status, payload, out[2] if len(out) > 2 else None)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeouts)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def handle(self, body: dict[str, Any]) -> tuple[Any, ...]:
        if self._handler is None:
            raise NotImplementedError("pass handler= or override handle()")
        return self._handler(body)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
