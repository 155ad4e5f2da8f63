"""The FAKE API server's REST surface (k8s/fake_apiserver.py): routing, discovery, list, chunked
JSON-lines watches and pod log streams over ``http.server``. The handler reads and writes the
store of the ``FakeApiServer`` it is bound to (its ``fake`` attribute)."""

from __future__ import annotations

import json
import re
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from k8s.fake_objects import CORE, KINDS, TERMINAL, HttpError, fields_match, labels_match, parse_label_selector

_ROUTE_CORE = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$")
_ROUTE_GROUP = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$")
_ROUTE_DISCOVERY = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/?$")


class Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    fake: Any  # the FakeApiServer it serves (bound when the server starts)
    protocol_version = "HTTP/1.1"
    server_version = "tooldojo-fake-apiserver/1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -------------------------------------------------------------- plumbing
    def _send_json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _status(self, e: HttpError) -> None:
        self._send_json(e.status, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": e.message, "reason": e.reason, "code": e.status})

    def _start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _body(self) -> dict:
        if getattr(self, "_body_read", False):
            return {}
        self._body_read = True
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise HttpError(400, "BadRequest", "request body is not JSON") from None

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    # --------------------------------------------------------------- routing
    def _dispatch(self, method: str) -> None:
        fake = self.fake
        self._body_read = False
        url = urlparse(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        fake.calls.append((method, url.path, query))
        try:
            with fake._lock:
                for f in fake._faults:
                    if f.times > 0 and f.method == method and f.path.search(url.path):
                        f.times -= 1
                        raise HttpError(f.status, f.reason, f.message)
            self._route(method, url.path, query)
        except HttpError as e:
            if method in ("POST", "PUT", "PATCH"):
                try:
                    self._body()
                except HttpError:
                    pass
            self._status(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _route(self, method: str, path: str, query: dict[str, list[str]]) -> None:
        fake = self.fake
        if path in ("/api", "/api/"):
            return self._send_json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        if path in ("/apis", "/apis/"):
            groups = [{"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                       "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}}
                      for g, v in sorted({(g, v) for (g, _), (_, v) in KINDS.items() if g and g in fake.groups})]
            return self._send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        m = _ROUTE_CORE.match(path)
        if m:
            group, version = CORE, "v1"
        else:
            m = _ROUTE_GROUP.match(path)
            if m:
                group, version = m.group("group"), m.group("version")
            else:
                d = _ROUTE_DISCOVERY.match(path)
                if d and d.group("group") in fake.groups:
                    res = [{"name": p, "kind": k, "namespaced": True, "verbs": ["create", "delete", "get", "list", "watch"]}
                           for (g, p), (k, v) in KINDS.items() if g == d.group("group") and v == d.group("version")]
                    if res:
                        return self._send_json(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                                     "groupVersion": f"{d.group('group')}/{d.group('version')}",
                                                     "resources": res})
                raise HttpError(404, "NotFound", "the server could not find the requested resource")
        ns, plural, name, sub = m.group("ns"), m.group("plural"), m.group("name"), m.group("sub")
        if (group, plural) not in KINDS or group not in fake.groups or KINDS[(group, plural)][1] != version:
            raise HttpError(404, "NotFound", "the server could not find the requested resource")
        if sub == "log" and plural == "pods" and method == "GET":
            return self._logs(ns, name, query)
        if sub == "exec" and plural == "pods" and method in ("GET", "POST"):
            return fake._serve_exec(self, ns, name, query)
        if sub is not None:
            raise HttpError(404, "NotFound", f"subresource {sub} is not served by the fake")
        if name is None:
            if method == "GET":
                if (query.get("watch") or ["false"])[0] in ("true", "1"):
                    return self._watch(group, plural, ns, query)
                return self._list(group, plural, ns, query)
            if method == "POST":
                body = self._body()
                with fake._lock:
                    if (query.get("dryRun") or [""])[0] == "All":
                        return self._send_json(201, fake._dry_run(group, plural, ns, body))
                    obj = fake._insert(group, plural, ns, body)
                    return self._send_json(201, obj)
        else:
            if method == "GET":
                with fake._lock:
                    obj = fake._objs.get((group, plural, ns, name))
                    if obj is None:
                        raise HttpError(404, "NotFound", f'{plural} "{name}" not found')
                    return self._send_json(200, obj)
            if method == "DELETE":
                self._body()
                with fake._lock:
                    obj = fake._delete(group, plural, ns, name)
                return self._send_json(200, obj)
            if method == "PATCH":
                ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                if ctype != "application/merge-patch+json":
                    self._body()
                    raise HttpError(415, "UnsupportedMediaType", f"the fake only applies merge patches, not {ctype}")
                body = self._body()
                with fake._lock:
                    obj = fake._patch(group, plural, ns, name, body)
                return self._send_json(200, obj)
        raise HttpError(405, "MethodNotAllowed", f"{method} is not supported by the fake for {path}")

    def _select(self, group: str, plural: str, ns: str, query: dict[str, list[str]]) -> list[dict]:
        reqs = parse_label_selector((query.get("labelSelector") or [""])[0])
        fsel = (query.get("fieldSelector") or [""])[0]
        return [o for (g, p, n, _), o in sorted(self.fake._objs.items(), key=lambda kv: kv[0])
                if g == group and p == plural and n == ns
                and labels_match(o["metadata"].get("labels") or {}, reqs) and fields_match(o, fsel)]

    def _list(self, group: str, plural: str, ns: str, query: dict[str, list[str]]) -> None:
        kind, version = KINDS[(group, plural)]
        with self.fake._lock:
            items = self._select(group, plural, ns, query)
            self._send_json(200, {"kind": f"{kind}List", "apiVersion": f"{group}/{version}" if group else version,
                                  "metadata": {"resourceVersion": str(self.fake._last_rv)}, "items": items})

    def _watch(self, group: str, plural: str, ns: str, query: dict[str, list[str]]) -> None:
        fake = self.fake
        reqs = parse_label_selector((query.get("labelSelector") or [""])[0])
        fsel = (query.get("fieldSelector") or [""])[0]
        timeout = float((query.get("timeoutSeconds") or ["1800"])[0])
        rv = (query.get("resourceVersion") or [""])[0]
        deadline = time.monotonic() + timeout
        self._start_stream("application/json")

        def line(type_: str, obj: dict) -> None:
            self._chunk(json.dumps({"type": type_, "object": obj}).encode() + b"\n")

        with fake._lock:
            if rv in ("", "0"):
                for obj in self._select(group, plural, ns, query):
                    line("ADDED", obj)
                seen = fake._last_rv
            else:
                seen = int(rv)
        try:
            while not fake._stopping.is_set():
                with fake._cond:
                    pending = [e for e in fake._events if e[0] > seen]
                    if not pending:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        fake._cond.wait(min(left, 0.5))
                        continue
                    seen = pending[-1][0]
                    batch = [(t, o) for (_, t, g, p, n, o) in pending if g == group and p == plural and n == ns
                             and labels_match(o["metadata"].get("labels") or {}, reqs) and fields_match(o, fsel)]
                for t, o in batch:
                    line(t, o)
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _logs(self, ns: str, name: str, query: dict[str, list[str]]) -> None:
        fake = self.fake
        with fake._lock:
            pod = fake._objs.get((CORE, "pods", ns, name))
            if pod is None:
                raise HttpError(404, "NotFound", f'pods "{name}" not found')
            cname = (query.get("container") or [pod["spec"]["containers"][0]["name"]])[0]
            if pod["status"].get("phase") == "Pending":
                waiting = ((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting") or {}
                raise HttpError(400, "BadRequest", f'container "{cname}" in pod "{name}" is waiting to start: '
                                                    f'{waiting.get("reason", "ContainerCreating")}')
            uid = pod["metadata"]["uid"]
        follow = (query.get("follow") or ["false"])[0] in ("true", "1")
        tail = query.get("tailLines")
        self._start_stream("text/plain")
        sent = 0
        try:
            with fake._lock:
                text = fake._logs.get((ns, name, cname), "")
            if tail:
                lines = text.splitlines(keepends=True)
                out = "".join(lines[-int(tail[0]):]) if int(tail[0]) > 0 else ""
                self._chunk(out.encode())
            else:
                self._chunk(text.encode())
            sent = len(text)
            while follow and not fake._stopping.is_set():
                time.sleep(0.02)
                with fake._lock:
                    pod = fake._objs.get((CORE, "pods", ns, name))
                    text = fake._logs.get((ns, name, cname), "")
                    done = pod is None or pod["metadata"]["uid"] != uid or pod["status"].get("phase") in TERMINAL
                if len(text) > sent:
                    self._chunk(text[sent:].encode())
                    sent = len(text)
                if done:
                    break
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
