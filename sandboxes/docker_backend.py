"""Docker backend: one hardened, long-lived container per sandbox.

The tool server is the container's main process. We attach to its stdin and
stdout once, before it starts, and keep that stream for the sandbox's life, so
a tool call is a write and a read on a Unix socket (no `docker exec`).
`stdin_once` plus `auto_remove` make the container exit and vanish when its
owner's stream closes, even after a `kill -9`; `gc()` sweeps what is left.

Memory is split as on the local backend when the engine runs on this host with cgroup v1 and the
cgroupfs driver, and we are root (see `CommandCgroup`): the container goes under a per-sandbox parent
memory cgroup holding the sandbox's limit, and every exec'd command moves itself into a sibling
`commands` cgroup capped below it, so an OOM among commands (their memory, their tmpfs pages, their
inodes) kills commands, never the tool server, whatever they set their oom_score_adj to. Elsewhere
(cgroup v2, the systemd driver, rootless or remote engines, not root) the container is one memory
cgroup as before and only the commands' oom_score_adj of 1000 favours the server.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from sandboxes import owner
from sandboxes.api import SCRATCH, WORKDIR, Sandbox, Transport
from sandboxes.docker_client import client
from sandboxes.errors import BackendUnavailable, ImageNotFound, SandboxDead, SandboxStartError
from sandboxes.image import SERVER_PATH_IN_IMAGE, resolve_image
from sandboxes.local_backend import (
    CGROUP_ROOT,
    COMMAND_PROCS_IN_SANDBOX,
    COMMANDS,
    OOMWatch,
    oom_kill_count,
    server_reserve_mb,
)
from sandboxes.models import SandboxConfig

LABEL = "tooldojo.sandbox"
STDOUT, STDERR = 1, 2
CGROUP_GROUP = "tooldojo-docker"  # /sys/fs/cgroup/<controller>/tooldojo-docker/<container name>
COMMAND_UID = 65534  # the uid commands run as (toolserver's command_uid; docker's "nobody")


def engine_available() -> tuple[bool, str]:
    try:
        c = client()
    except BackendUnavailable as e:
        client.cache_clear()
        return False, str(e)
    v = c.version()
    return True, f"Docker engine {v.get('Version')} (API {v.get('ApiVersion')})"


# ------------------------------------------------------------------ cgroups
@functools.cache
def split_available() -> tuple[bool, str]:
    """Whether sandboxes get a commands' memory cgroup of their own: the engine must be this host's
    (a Unix socket, its root dir here, not rootless) on cgroup v1 with the cgroupfs driver, which puts
    a container with `cgroup_parent=/P` at /sys/fs/cgroup/<controller>/P/<id>; and we must be root to
    create P. Cached per process."""
    if os.geteuid() != 0:
        return False, "not root"
    if not (CGROUP_ROOT / "memory" / "memory.limit_in_bytes").exists():
        return False, "no cgroup v1 memory hierarchy"
    try:
        c = client()
        info = c.info()
    except Exception as e:  # noqa: BLE001 - any failure means: no split
        return False, f"docker info failed: {e}"
    if not str(c.api.base_url).startswith("http+docker://localhost"):
        return False, f"engine at {c.api.base_url} is not a local Unix socket"
    if info.get("CgroupDriver") != "cgroupfs" or str(info.get("CgroupVersion", "1")) != "1":
        return False, f"engine uses cgroup v{info.get('CgroupVersion')} with the {info.get('CgroupDriver')} driver"
    if any("rootless" in str(o) for o in info.get("SecurityOptions") or []):
        return False, "rootless engine"
    if not os.path.isdir(str(info.get("DockerRootDir", ""))):
        return False, "the engine's root dir is not on this host"
    return True, "cgroup v1, cgroupfs driver"


class CommandCgroup:
    """The per-sandbox memory split (cgroup v1): a parent memory cgroup capped at the sandbox's limit,
    the container's own cgroup under it (docker's `cgroup_parent`), and beside that a `commands` cgroup
    capped at the limit minus `server_reserve_mb`, whose cgroup.procs (owned by the commands' uid) is
    bind-mounted into the container. The tool server's fork writes itself there before it execs a
    command, so commands and every page they first touch (tmpfs included) are charged there, and an
    OOM among them picks among them. Docker creates the parent in every other hierarchy too (empty,
    without limits: the container's own cgroups hold pids and CPU); `remove` deletes all of them."""

    def __init__(self, name: str):
        self.name = name
        self.memory = CGROUP_ROOT / "memory" / CGROUP_GROUP / name

    @property
    def parent(self) -> str:
        return f"/{CGROUP_GROUP}/{self.name}"

    @property
    def procs(self) -> Path:
        return self.memory / COMMANDS / "cgroup.procs"

    @classmethod
    def create(cls, name: str, memory_mb: int, command_uid: int | None) -> CommandCgroup:
        cg = cls(name)
        mem = str(memory_mb << 20)
        cmd_mem = str((memory_mb - server_reserve_mb(memory_mb)) << 20)
        try:
            cg.memory.mkdir(parents=True)
            _write(cg.memory / "memory.limit_in_bytes", mem)
            _write(cg.memory / "memory.memsw.limit_in_bytes", mem, optional=True)
            child = cg.memory / COMMANDS
            child.mkdir()
            _write(child / "memory.limit_in_bytes", cmd_mem)
            _write(child / "memory.memsw.limit_in_bytes", cmd_mem, optional=True)
            if command_uid is not None:
                os.chown(cg.procs, command_uid, command_uid)
        except OSError:
            cg.remove(wait_s=0)
            raise
        return cg

    def oom_kills(self) -> int:
        """OOM kills among commands (v1's oom_control counts its own cgroup only)."""
        return oom_kill_count(self.memory / COMMANDS / "memory.oom_control")

    def remove(self, wait_s: float = 10.0) -> bool:
        """Delete the parent in every hierarchy, children first. Commands left in ours are killed;
        the container's own cgroups are docker's to delete, so we wait for them (up to `wait_s`:
        auto_remove runs after the server exits). False when something stays (gc() sweeps it)."""
        return _remove_tree(self.name, wait_s)


def _write(path: Path, value: str, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError:
        if not optional:
            raise


def _group_dirs(name: str | None = None) -> list[Path]:
    """Our per-sandbox parents (`name`'s only, if given) in every mounted hierarchy."""
    out = []
    try:
        hierarchies = [h for h in CGROUP_ROOT.iterdir() if h.is_dir() and not h.is_symlink()]
    except OSError:
        return out
    for h in hierarchies:
        g = h / CGROUP_GROUP
        if name is not None:
            if (g / name).is_dir():
                out.append(g / name)
        elif g.is_dir():
            out += [d for d in g.iterdir() if d.is_dir()]
    return out


def _remove_tree(name: str, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    dirs = _group_dirs(name)
    while True:
        left = []
        for d in dirs:
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [d]:
                try:
                    sub.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(d)
                    if sub.name == COMMANDS:
                        _kill_procs(sub)
                    break
        if not left:
            return True
        if time.monotonic() >= deadline:
            return False
        dirs = left
        time.sleep(0.02)


def _kill_procs(d: Path) -> None:
    try:
        pids = (d / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        try:
            os.kill(int(pid), 9)
        except OSError:
            pass


# --------------------------------------------------------------- transport
class DockerTransport(Transport):
    """Docker's attach stream: stdin raw, stdout/stderr in 8-byte-header frames."""

    def __init__(self, stream: anyio.abc.SocketStream, container_id: str, max_line: int,
                 cgroup: CommandCgroup | None = None):
        super().__init__(max_line)
        self._stream = stream
        self.container_id = container_id
        self.cgroup = cgroup
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
        await self.release_cgroup()

    async def release_cgroup(self) -> None:
        cg, self.cgroup = self.cgroup, None
        if cg is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(cg.remove)


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
        self.memory_split = transport.cgroup
        self._oom = OOMWatch(self.memory_split.oom_kills) if self.memory_split else None

    async def _backend_oom(self) -> bool:
        return self._oom is not None and self._oom.new()

    async def _shutdown(self) -> None:
        t: DockerTransport = self._transport  # type: ignore[assignment]
        if self._dead is None:
            # Closing stdin makes the server exit and auto_remove delete the container.
            await t.close_input()
            if await t.wait_exit(2.0):
                t._killed = True
                await t._stream.aclose()
                await t.release_cgroup()  # waits for auto_remove to delete the container's cgroups
                return
        await t.kill()

    def host_pid(self) -> int:
        return int(client().api.inspect_container(self.container_id)["State"]["Pid"])


def _server_config(cfg: SandboxConfig, cgroup: CommandCgroup | None = None) -> dict[str, Any]:
    lim = cfg.limits
    return {
        "workdir": WORKDIR,
        "scratch": list(SCRATCH),
        # Our /dev/shm tmpfs and the IPC namespace's /dev/mqueue: emptied on reset.
        "wiped": ["/dev/shm", "/dev/mqueue"],
        "max_output_bytes": lim.max_output_bytes,
        "max_request_bytes": lim.max_request_bytes,
        "max_file_bytes": lim.max_file_bytes,
        "own_pid_namespace": cfg.hardening.kill_on_timeout,
        "separation": separation(cfg),
        "command_cgroup": COMMAND_PROCS_IN_SANDBOX if cgroup is not None else None,
    }


def separation(cfg: SandboxConfig) -> str | None:
    """Commands as another uid than the tool server; with `non_root=False` commands run as root, which
    no uid keeps out, so the server is only non-dumpable (PID 1 also ignores their SIGKILL/SIGSTOP)."""
    hard = cfg.hardening
    if not hard.isolate_tool_server:
        return None
    return "uid" if hard.non_root else "non_dumpable"


def container_kwargs(cfg: SandboxConfig, name: str, cgroup: CommandCgroup | None = None) -> dict[str, Any]:
    lim, hard = cfg.limits, cfg.hardening
    # Owned by the commands' uid, as local's are (bwrap's tmpfs belong to its one uid): then the tool
    # server, whose filesystem uid is the commands', can put back a root's mode, xattrs and mtime on
    # reset (a command can change them; the wipe itself moves the mtime). /dev/shm likewise, in
    # place of docker's root-owned shm mount (shm_size).
    ids = f"uid={COMMAND_UID},gid={COMMAND_UID}" if hard.non_root else "uid=0,gid=0"
    tmpfs_opts = f"rw,exec,nosuid,nodev,size={lim.scratch_mb}m,mode=1777,{ids}"
    shm_opts = f"rw,noexec,nosuid,nodev,size={lim.scratch_mb}m,mode=1777,{ids}"
    kw: dict[str, Any] = dict(
        command=["python3", "-I", "-u", SERVER_PATH_IN_IMAGE, json.dumps(_server_config(cfg, cgroup))],
        name=name,
        hostname="sandbox",
        stdin_open=True,  # with detach=False the SDK also sets StdinOnce
        tty=False,
        auto_remove=True,
        working_dir=WORKDIR,
        environment={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKDIR, "LANG": "C.UTF-8"},
        labels={LABEL: "1", **owner.labels()},
        tmpfs={**{d: tmpfs_opts for d in SCRATCH}, "/dev/shm": shm_opts},  # every writable tmpfs has our cap
        mem_limit=f"{lim.memory_mb}m",
        memswap_limit=f"{lim.memory_mb}m",
        pids_limit=lim.pids,
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
    if cgroup is not None:
        # The one cgroup file the sandbox may write (the rest of /sys/fs/cgroup is read-only): on v1
        # a process may move only processes of its own euid, and only into that cgroup.
        kw["cgroup_parent"] = cgroup.parent
        kw["binds"] = {str(cgroup.procs): {"bind": COMMAND_PROCS_IN_SANDBOX, "mode": "rw"}}
    return kw


def _command_cgroup(cfg: SandboxConfig, name: str) -> CommandCgroup | None:
    """The sandbox's memory split, or None (no split here, or the tool server is not separated from
    commands: then a command could move the server into its cgroup)."""
    mode = separation(cfg)
    if mode is None or not split_available()[0]:
        return None
    try:
        return CommandCgroup.create(name, cfg.limits.memory_mb, COMMAND_UID if mode == "uid" else None)
    except OSError:
        return None


async def start(cfg: SandboxConfig) -> DockerSandbox:

    c = await anyio.to_thread.run_sync(client)
    image = resolve_image(cfg.image)
    sandbox_id = uuid.uuid4().hex[:12]
    name = f"tooldojo-{os.getpid()}-{sandbox_id}"
    cgroup = await anyio.to_thread.run_sync(_command_cgroup, cfg, name)
    try:
        return await _start(c, cfg, image, name, sandbox_id, cgroup)
    except BaseException:
        if cgroup is not None:  # idempotent: a closed sandbox has released it already
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(cgroup.remove)
        raise


async def _start(c, cfg: SandboxConfig, image: str, name: str, sandbox_id: str,
                 cgroup: CommandCgroup | None) -> DockerSandbox:
    import docker.errors

    try:
        container = await anyio.to_thread.run_sync(
            functools.partial(c.api.create_container, image, **_create_args(c, cfg, name, cgroup))
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
        transport = DockerTransport(stream, cid, 1 << 30, cgroup)
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


def _create_args(c, cfg: SandboxConfig, name: str, cgroup: CommandCgroup | None = None) -> dict[str, Any]:
    """container_kwargs mapped onto the low-level API (create_host_config)."""
    kw = container_kwargs(cfg, name, cgroup)
    host_keys = {
        "auto_remove", "tmpfs", "mem_limit", "memswap_limit", "pids_limit", "nano_cpus",
        "network_mode", "read_only", "cap_drop", "cap_add", "security_opt", "log_config", "cgroup_parent", "binds",
    }
    host = {k: kw.pop(k) for k in list(kw) if k in host_keys}
    if "log_config" in host:
        from docker.types import LogConfig

        host["log_config"] = LogConfig(type=host["log_config"]["type"])
    kw["host_config"] = c.api.create_host_config(**host)
    return kw


def gc(everything: bool = False) -> list[str]:
    """Remove sandbox containers whose owner process is gone (all of ours with `everything`), then
    the per-sandbox cgroups (see CommandCgroup) of owners that are gone."""
    c = client()
    removed = []
    for info in c.api.containers(all=True, filters={"label": LABEL}):
        labels = info.get("Labels") or {}
        if everything or not owner.is_alive(labels):
            _remove(info["Id"])
            removed.append(info["Id"][:12])
    for name in sorted({d.name for d in _group_dirs()}):
        pid = name.removeprefix("tooldojo-").split("-", 1)[0]
        if everything or not pid.isdigit() or owner.process_start_time(int(pid)) is None:
            _remove_tree(name, wait_s=2.0)
            removed.append(f"cgroup:{name}")
    return removed


def list_sandboxes() -> list[dict]:
    c = client()
    return [
        {"id": i["Id"][:12], "name": (i.get("Names") or ["?"])[0].lstrip("/"), "state": i.get("State"),
         "owner_pid": (i.get("Labels") or {}).get(owner.PID_LABEL),
         "owner_alive": owner.is_alive(i.get("Labels") or {})}
        for i in c.api.containers(all=True, filters={"label": LABEL})
    ]
