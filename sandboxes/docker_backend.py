"""Docker backend: one hardened, long-lived container per sandbox.

The tool server is the container's main process. We attach to its stdin and
stdout once, before it starts, and keep that stream for the sandbox's life, so
a tool call is a write and a read on a Unix socket (no `docker exec`).
`stdin_once` plus `auto_remove` make the container exit and vanish when its
owner's stream closes, even after a `kill -9`; `gc()` sweeps what is left.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import uuid
from typing import Any

import anyio
import anyio.abc

from sandboxes import owner
from sandboxes.api import SCRATCH, WORKDIR, Sandbox, Transport
from sandboxes.docker_client import client
from sandboxes.errors import BackendUnavailable, ImageNotFound, SandboxDead, SandboxStartError
from sandboxes.image import SERVER_PATH_IN_IMAGE, resolve_image
from sandboxes.models import SandboxConfig

LABEL = "tooldojo.sandbox"
STDOUT, STDERR = 1, 2


def engine_available() -> tuple[bool, str]:
    try:
        c = client()
    except BackendUnavailable as e:
        client.cache_clear()
        return False, str(e)
    v = c.version()
    return True, f"Docker engine {v.get('Version')} (API {v.get('ApiVersion')})"


class DockerTransport(Transport):
    """Docker's attach stream: stdin raw, stdout/stderr in 8-byte-header frames."""

    def __init__(self, stream: anyio.abc.SocketStream, container_id: str, max_line: int):
        super().__init__(max_line)
        self._stream = stream
        self.container_id = container_id
        self._raw = bytearray()
        self._stderr = bytearray()
        self._killed = False

    def describe(self) -> str:
        return f"container {self.container_id[:12]}"

    async def _send_raw(self, data: bytes) -> None:
        await self._stream.send(data)

    async def _receive_raw(self) -> bytes:
        return await self._stream.receive(1 << 16)

    def _feed(self, chunk: bytes) -> None:
        self._raw += chunk
        self._demux()

    def _demux(self) -> None:
        raw = self._raw
        while len(raw) >= 8:
            size = int.from_bytes(raw[4:8], "big")
            if len(raw) < 8 + size:
                return
            payload = bytes(raw[8 : 8 + size])
            if raw[0] == STDOUT:
                self.lines.feed(payload)
            else:
                self._stderr = (self._stderr + payload)[-8192:]
            del raw[: 8 + size]

    def diagnostics(self) -> str:
        return self._stderr.decode(errors="replace").strip()[-500:]

    async def close_input(self) -> None:
        try:
            await self._stream.send_eof()
        except Exception:
            pass

    async def wait_exit(self, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            try:
                while True:
                    await self._stream.receive(1 << 16)
            except Exception:
                return True
        return False

    async def kill(self) -> None:
        if self._killed:
            return
        self._killed = True
        await self._stream.aclose()
        await anyio.to_thread.run_sync(_remove, self.container_id)


def _remove(container_id: str) -> None:
    import docker.errors

    try:
        client().api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if "already in progress" not in str(e):
            raise


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(self, config: SandboxConfig, transport: DockerTransport, sandbox_id: str):
        super().__init__(config, transport, sandbox_id)
        self.container_id = transport.container_id

    async def _shutdown(self) -> None:
        t: DockerTransport = self._transport  # type: ignore[assignment]
        if self._dead is None:
            # Closing stdin makes the server exit and auto_remove delete the container.
            await t.close_input()
            if await t.wait_exit(2.0):
                t._killed = True
                await t._stream.aclose()
                return
        await t.kill()

    def host_pid(self) -> int:
        return int(client().api.inspect_container(self.container_id)["State"]["Pid"])


def _server_config(cfg: SandboxConfig) -> dict[str, Any]:
    lim = cfg.limits
    return {
        "workdir": WORKDIR,
        "scratch": list(SCRATCH),
        # Docker's own /dev/shm (shm_size) and the IPC namespace's /dev/mqueue: emptied on reset.
        "wiped": ["/dev/shm", "/dev/mqueue"],
        "max_output_bytes": lim.max_output_bytes,
        "max_request_bytes": lim.max_request_bytes,
        "max_file_bytes": lim.max_file_bytes,
        "own_pid_namespace": cfg.hardening.kill_on_timeout,
        "separation": separation(cfg),
    }


def separation(cfg: SandboxConfig) -> str | None:
    """Commands as another uid than the tool server; with `non_root=False` commands run as root, which
    no uid keeps out, so the server is only non-dumpable (PID 1 also ignores their SIGKILL/SIGSTOP)."""
    hard = cfg.hardening
    if not hard.isolate_tool_server:
        return None
    return "uid" if hard.non_root else "non_dumpable"


def container_kwargs(cfg: SandboxConfig, name: str) -> dict[str, Any]:
    lim, hard = cfg.limits, cfg.hardening
    tmpfs_opts = f"rw,exec,nosuid,nodev,size={lim.scratch_mb}m,mode=1777"
    kw: dict[str, Any] = dict(
        command=["python3", "-I", "-u", SERVER_PATH_IN_IMAGE, json.dumps(_server_config(cfg))],
        name=name,
        hostname="sandbox",
        stdin_open=True,  # with detach=False the SDK also sets StdinOnce
        tty=False,
        auto_remove=True,
        working_dir=WORKDIR,
        environment={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKDIR, "LANG": "C.UTF-8"},
        labels={LABEL: "1", **owner.labels()},
        tmpfs={d: tmpfs_opts for d in SCRATCH},
        mem_limit=f"{lim.memory_mb}m",
        memswap_limit=f"{lim.memory_mb}m",
        pids_limit=lim.pids,
        shm_size=f"{lim.scratch_mb}m",  # docker's 64 MiB default otherwise: every writable tmpfs has our cap
        nano_cpus=int(lim.cpus * 1e9),
        network_mode="bridge" if hard.network else "none",
        read_only=hard.read_only_root,
        log_config={"type": "none", "config": {}},
    )
    if hard.drop_capabilities:
        kw["cap_drop"] = ["ALL"]
    kw["security_opt"] = (["no-new-privileges"] if hard.no_new_privileges else []) + \
        ([] if hard.seccomp else ["seccomp=unconfined"])
    kw["user"] = "65534:65534" if hard.non_root else "0:0"
    if separation(cfg) == "uid":
        # Root only for the tool server's first instructions: on its way to uid 65533, before it reads
        # a request, it empties the bounding set and keeps KILL/SETUID/SETGID; commands run as 65534.
        kw["user"] = "0:0"
        kw["cap_drop"] = ["ALL"]
        kw["cap_add"] = ["SETUID", "SETGID", "SETPCAP", "KILL"]
    return kw


async def start(cfg: SandboxConfig) -> DockerSandbox:
    import docker.errors

    c = await anyio.to_thread.run_sync(client)
    image = resolve_image(cfg.image)
    sandbox_id = uuid.uuid4().hex[:12]
    name = f"tooldojo-{os.getpid()}-{sandbox_id}"
    try:
        container = await anyio.to_thread.run_sync(
            functools.partial(c.api.create_container, image, **_create_args(c, cfg, name))
        )
    except docker.errors.ImageNotFound:
        raise ImageNotFound(
            f"sandbox image {image!r} is not in the Docker engine; build it with `dojo sandbox build-image`"
        ) from None
    except docker.errors.APIError as e:
        raise SandboxStartError(f"Docker refused the sandbox container: {e.explanation or e}") from None
    cid = container["Id"]
    try:
        sock = await anyio.to_thread.run_sync(
            functools.partial(c.api.attach_socket, cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        )
        raw = sock._sock if hasattr(sock, "_sock") else sock
        dup = socket.socket(fileno=os.dup(raw.fileno()))
        sock.close()
        stream = await anyio.abc.SocketStream.from_socket(dup)
        transport = DockerTransport(stream, cid, 1 << 30)
        await anyio.to_thread.run_sync(c.api.start, cid)
    except docker.errors.APIError as e:
        await anyio.to_thread.run_sync(_remove, cid)
        raise SandboxStartError(f"sandbox container failed to start: {e.explanation or e}") from None
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_remove, cid)
        raise
    sb = DockerSandbox(cfg, transport, sandbox_id)
    transport.lines.limit = sb._max_line
    try:
        with anyio.fail_after(cfg.start_timeout_s):
            await sb._request("ping", cfg.start_timeout_s)
    except BaseException as e:
        with anyio.CancelScope(shield=True):
            await sb.close()
            await anyio.to_thread.run_sync(_remove, cid)
        if isinstance(e, (SandboxDead, TimeoutError)):
            raise SandboxStartError(f"tool server in {image} did not come up: {e}") from None
        raise
    return sb


def _create_args(c, cfg: SandboxConfig, name: str) -> dict[str, Any]:
    """container_kwargs mapped onto the low-level API (create_host_config)."""
    kw = container_kwargs(cfg, name)
    host_keys = {
        "auto_remove", "tmpfs", "mem_limit", "memswap_limit", "pids_limit", "nano_cpus", "shm_size",
        "network_mode", "read_only", "cap_drop", "cap_add", "security_opt", "log_config",
    }
    host = {k: kw.pop(k) for k in list(kw) if k in host_keys}
    if "log_config" in host:
        from docker.types import LogConfig

        host["log_config"] = LogConfig(type=host["log_config"]["type"])
    kw["host_config"] = c.api.create_host_config(**host)
    return kw


def gc(everything: bool = False) -> list[str]:
    """Remove sandbox containers whose owner process is gone (all of ours with `everything`)."""
    c = client()
    removed = []
    for info in c.api.containers(all=True, filters={"label": LABEL}):
        labels = info.get("Labels") or {}
        if everything or not owner.is_alive(labels):
            _remove(info["Id"])
            removed.append(info["Id"][:12])
    return removed


def list_sandboxes() -> list[dict]:
    c = client()
    return [
        {"id": i["Id"][:12], "name": (i.get("Names") or ["?"])[0].lstrip("/"), "state": i.get("State"),
         "owner_pid": (i.get("Labels") or {}).get(owner.PID_LABEL), "owner_alive": owner.is_alive(i.get("Labels") or {})}
        for i in c.api.containers(all=True, filters={"label": LABEL})
    ]
