"""Pod exec for the FAKE API server (k8s/fake_apiserver.py): the v5/v4 channel protocol over a real
WebSocket, the command run as a LOCAL bubblewrap subprocess with the pod's emptyDir and ConfigMap
volumes bound at their mountPaths (none of the pod's isolation: see the server's docstring)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from k8s.fake_objects import CORE, HttpError

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _ws_recv(rfile) -> tuple[int, bytes] | None:
    """One (possibly fragmented) client message: (opcode, payload); None at EOF."""
    opcode, payload = None, b""
    while True:
        head = rfile.read(2)
        if len(head) < 2:
            return None
        fin, op = head[0] & 0x80, head[0] & 0x0F
        masked, n = head[1] & 0x80, head[1] & 0x7F
        if n == 126:
            n = int.from_bytes(rfile.read(2), "big")
        elif n == 127:
            n = int.from_bytes(rfile.read(8), "big")
        mask = rfile.read(4) if masked else b""
        data = rfile.read(n)
        if len(data) < n:
            return None
        if masked:
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        if op >= 0x8:  # control frames are never fragmented
            return op, data
        if op != 0:
            opcode = op
        payload += data
        if fin:
            return opcode or 0x2, payload


def _ws_frame(payload: bytes, opcode: int = 0x2) -> bytes:
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | opcode, n])
    elif n < 1 << 16:
        head = bytes([0x80 | opcode, 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 127]) + n.to_bytes(8, "big")
    return head + payload


@dataclass
class ExecSession:
    proc: subprocess.Popen
    pod: tuple[str, str]
    closed: threading.Event = field(default_factory=threading.Event)


def kill_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            proc.kill()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


class PodExec:
    """The server's exec subresource (mixed into FakeApiServer: uses its store, lock and root)."""

    def _exec_argv(self, pod: dict, container: dict, command: list[str]) -> list[str]:
        """bubblewrap argv running `command` with the pod's emptyDir/ConfigMap volumes at their mountPaths."""
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise HttpError(500, "InternalError", "the fake API server runs exec under bubblewrap, which is not installed")
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        root = self._root / ns / name
        volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        sc = container.get("securityContext") or {}
        # A container that starts as root with added capabilities (a `baseline` sandbox pod, whose tool
        # server drops to a uid of its own) gets them: as real root, no user namespace (one that maps
        # a single uid could not hold the server's and the commands' uids) and bwrap's --cap-add.
        as_root = sc.get("runAsUser") == 0 and os.geteuid() == 0
        argv = [bwrap, "--die-with-parent", "--new-session", *([] if as_root else ["--unshare-user-try"]),
                "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox"]
        if as_root:
            for cap in (sc.get("capabilities") or {}).get("add") or []:
                argv += ["--cap-add", f"CAP_{cap}"]
        for d in ("usr", "etc"):
            argv += ["--ro-bind", f"/{d}", f"/{d}"]
        for link in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
            p = Path("/") / link
            if p.is_symlink():
                argv += ["--symlink", os.readlink(p), f"/{link}"]
            elif p.is_dir():
                argv += ["--ro-bind", str(p), f"/{link}"]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        if as_root:  # bwrap, privileged, makes missing parents 0700: a mount below them would be root's alone
            for parent in sorted({str(p) for vm in container.get("volumeMounts") or []
                                  for p in Path(vm["mountPath"]).parents if str(p) != "/"}):
                argv += ["--perms", "0755", "--dir", parent]
        for vm in container.get("volumeMounts") or []:
            vol = volumes.get(vm["name"], {})
            local = root / "volumes" / vm["name"]
            if "configMap" in vol:
                local.mkdir(parents=True, exist_ok=True)
                cm = self._objs.get((CORE, "configmaps", ns, vol["configMap"]["name"]))
                if cm is None:
                    raise HttpError(500, "InternalError", f"configmap {vol['configMap']['name']} is missing")
                local.chmod(0o755)
                for k, v in (cm.get("data") or {}).items():
                    (local / k).write_text(v)
                    (local / k).chmod(vol["configMap"].get("defaultMode", 0o644))
                argv += ["--ro-bind", str(local), vm["mountPath"]]
            elif "emptyDir" in vol:
                local.mkdir(parents=True, exist_ok=True)
                local.chmod(0o1777)
                argv += ["--bind", str(local), vm["mountPath"]]
        argv += ["--chdir", container.get("workingDir") or "/"]
        for env in container.get("env") or []:
            if "value" in env:
                argv += ["--setenv", env["name"], env["value"]]
        return argv + ["--", *command]

    def _serve_exec(self, h: BaseHTTPRequestHandler, ns: str, name: str, query: dict[str, list[str]]) -> None:
        with self._lock:
            pod = self._objs.get((CORE, "pods", ns, name))
            if pod is None:
                raise HttpError(404, "NotFound", f'pods "{name}" not found')
            if pod["status"].get("phase") != "Running":
                raise HttpError(400, "BadRequest", f"pod {name} is not running (phase {pod['status'].get('phase')})")
            cname = (query.get("container") or [pod["spec"]["containers"][0]["name"]])[0]
            container = next((c for c in pod["spec"]["containers"] if c["name"] == cname), None)
            if container is None:
                raise HttpError(400, "BadRequest", f"container {cname} is not valid for pod {name}")
            argv = self._exec_argv(pod, container, query.get("command") or [])
        key = h.headers.get("Sec-WebSocket-Key")
        if not key or "websocket" not in (h.headers.get("Upgrade") or "").lower():
            raise HttpError(400, "BadRequest", "exec needs a websocket upgrade")
        offered = [p.strip() for p in (h.headers.get("Sec-WebSocket-Protocol") or "").split(",") if p.strip()]
        proto = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered), None)
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        h.send_response(101, "Switching Protocols")
        h.send_header("Upgrade", "websocket")
        h.send_header("Connection", "Upgrade")
        h.send_header("Sec-WebSocket-Accept", accept)
        if proto:
            h.send_header("Sec-WebSocket-Protocol", proto)
        h.end_headers()
        h.wfile.flush()
        h.close_connection = True
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"})
        ex = ExecSession(proc, (ns, name))
        with self._lock:
            self._execs.append(ex)
        send_lock = threading.Lock()

        def send(payload: bytes, opcode: int = 0x2) -> None:
            with send_lock:
                try:
                    h.wfile.write(_ws_frame(payload, opcode))
                    h.wfile.flush()
                except OSError:
                    pass

        def pump(stream, channel: int) -> None:
            while True:
                data = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
                if not data:
                    return
                send(bytes([channel]) + data)

        pumps = [threading.Thread(target=pump, args=(proc.stdout, 1), daemon=True),
                 threading.Thread(target=pump, args=(proc.stderr, 2), daemon=True)]
        for t in pumps:
            t.start()

        def reader() -> None:
            try:
                while True:
                    msg = _ws_recv(h.rfile)
                    if msg is None:
                        break
                    if msg[0] == 0x8:
                        send(msg[1][:2] or b"\x03\xe8", 0x8)  # answer the close handshake (RFC 6455 5.5.1)
                        break
                    op, data = msg
                    if op == 0x9:
                        send(data, 0xA)
                        continue
                    if not data:
                        continue
                    if data[0] == 0 and proc.stdin is not None:
                        try:
                            proc.stdin.write(data[1:])
                            proc.stdin.flush()
                        except (BrokenPipeError, ValueError, OSError):
                            pass
                    elif data[0] == 255 and data[1:2] == b"\x00" and proc.stdin is not None:
                        proc.stdin.close()  # v5: the client closed stdin
            except (OSError, ValueError):
                pass
            finally:
                ex.closed.set()
                try:
                    if proc.stdin is not None:
                        proc.stdin.close()
                except OSError:
                    pass
                # the client is gone: give the command a moment to see EOF, then kill it
                try:
                    proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    kill_process(proc)

        threading.Thread(target=reader, daemon=True).start()
        code = proc.wait()
        for t in pumps:
            t.join(timeout=5)
        if not ex.closed.is_set():
            status = ({"metadata": {}, "status": "Success"} if code == 0 else
                      {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                       "message": f"command terminated with non-zero exit code: {code}",
                       "details": {"causes": [{"reason": "ExitCode", "message": str(code if code > 0 else 137)}]}})
            send(b"\x03" + json.dumps(status).encode())
            send(b"\x03\xe8", 0x8)
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        with self._lock:
            if ex in self._execs:
                self._execs.remove(ex)
