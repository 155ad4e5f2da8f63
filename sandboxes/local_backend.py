"""Daemon-less backend: the tool server under bubblewrap, limits from cgroups.

bwrap gives new user, PID, network, IPC, UTS and cgroup namespaces, a
read-only root (the same debootstrap rootfs the Docker image is built from,
or the host's /usr when that is missing), size-capped tmpfs scratch dirs and
no capabilities. Memory, pids and CPU come from a per-sandbox cgroup when we
may create one (root on cgroup v1 or v2); otherwise from rlimits on every
command the tool server runs. `--die-with-parent` ties the sandbox's life to
its owner, so a killed owner leaves nothing running.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc

from sandboxes import owner, seccomp
from sandboxes.api import SCRATCH, WORKDIR, Sandbox, Transport
from sandboxes.errors import BackendUnavailable, SandboxDead, SandboxStartError
from sandboxes.image import SERVER_PATH_IN_IMAGE, SERVER_SOURCE, rootfs_dir, rootfs_ready
from sandboxes.models import SandboxConfig

CGROUP_ROOT = Path("/sys/fs/cgroup")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKDIR, "LANG": "C.UTF-8"}
GROUP = "tooldojo"
SECCOMP_FD_PLACEHOLDER = "{seccomp_fd}"  # bwrap_argv is pure; start() swaps in the pipe it opens
# Emptied on reset beside the scratch dirs, but never a target of write_file.
WIPED = ("/dev/shm", "/dev/mqueue")


# ------------------------------------------------------------------ cgroups
# The host uid a local sandbox runs as when its owner is root: bwrap started by root maps the
# sandbox's uid 65534 to host root, and then the server's /proc knobs (owned by root once it is
# non-dumpable), host root's keyrings and any cgroupfs a command mounted were the command's. Not a
# uid docker's sandboxes use (65533/65534) nor a login's.
HOST_UID = 65520
STAGE_DIR = Path(tempfile.gettempdir()) / "tooldojo-stage"
BIND_OPS = ("--ro-bind", "--ro-bind-try", "--bind")
COMMANDS = "commands"  # child memory cgroup of every exec'd command (see Cgroup.create)
COMMAND_PROCS_IN_SANDBOX = "/opt/tooldojo/commands.procs"


def server_reserve_mb(memory_mb: int) -> int:
    """Memory that commands cannot take from the tool server: a quarter of the limit, at most 32 MiB
    (the server runs in about 15 MiB)."""
    return min(32, memory_mb // 4)


class Cgroup:
    """A per-sandbox cgroup (v1: one dir per controller; v2: one dir).

    Memory is split (v1): commands run in a child cgroup capped at the limit minus the server's reserve,
    the tool server stays outside it. A command's memory and its tmpfs pages are charged to the
    child, so when commands run out of memory the OOM killer picks among commands only: the
    server's place does not depend on oom_score_adj, which a command may set back to 0.
    """

    def __init__(self, dirs: dict[str, Path], version: int, join: dict[str, Path] | None = None,
                 commands: Path | None = None):
        self.dirs = dirs
        self.version = version
        self.join = join or dirs  # where the sandbox's first process goes
        self.commands = commands  # the commands' cgroup.procs (bind-mounted into the sandbox)

    @staticmethod
    def version() -> int | None:
        if (CGROUP_ROOT / "cgroup.controllers").exists():
            return 2
        if (CGROUP_ROOT / "memory").is_dir() and (CGROUP_ROOT / "pids").is_dir():
            return 1
        return None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        v = cls.version()
        if v is None:
            return False, "no cgroup v1 memory/pids hierarchy or cgroup v2 mount"
        probe = f"probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        try:
            cg = cls.create(probe, memory_mb=64, pids=16, cpus=1.0)
            cg.remove()
        except OSError as e:
            return False, f"cannot create cgroups under {CGROUP_ROOT} ({e.strerror}); need root"
        return True, f"cgroup v{v}"

    @classmethod
    def create(cls, name: str, *, memory_mb: int, pids: int, cpus: float) -> Cgroup:
        v = cls.version()
        mem = str(memory_mb * 1024 * 1024)
        cmd_mem = str((memory_mb - server_reserve_mb(memory_mb)) * 1024 * 1024)
        period = 100_000
        quota = max(1000, int(cpus * period))
        if v == 2:
            parent = CGROUP_ROOT / GROUP
            parent.mkdir(exist_ok=True)
            _enable_v2_controllers(parent)
            d = parent / name
            d.mkdir()
            _write(d / "memory.max", mem)
            _write(d / "memory.swap.max", "0", optional=True)
            _write(d / "pids.max", str(pids))
            _write(d / "cpu.max", f"{quota} {period}", optional=True)
            # No commands' cgroup on v2 yet: bwrap's cgroup namespace is rooted at the server's
            # cgroup, and v2 refuses a migration whose common ancestor lies outside it.
            return cls({"unified": d}, 2)
        if v == 1:
            dirs = {}
            try:
                for ctl in ("memory", "pids", "cpu"):
                    base = CGROUP_ROOT / ctl
                    if not base.is_dir():
                        continue
                    d = base / GROUP / name
                    d.mkdir(parents=True)
                    dirs[ctl] = d
                _write(dirs["memory"] / "memory.limit_in_bytes", mem)
                _write(dirs["memory"] / "memory.memsw.limit_in_bytes", mem, optional=True)
                _write(dirs["pids"] / "pids.max", str(pids))
                if "cpu" in dirs:
                    _write(dirs["cpu"] / "cpu.cfs_period_us", str(period))
                    _write(dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
                child = dirs["memory"] / COMMANDS
                child.mkdir()
                _write(child / "memory.limit_in_bytes", cmd_mem)
                _write(child / "memory.memsw.limit_in_bytes", cmd_mem, optional=True)
            except OSError:
                cls(dirs, 1).remove()
                raise
            return cls(dirs, 1, commands=dirs["memory"] / COMMANDS / "cgroup.procs")
        raise OSError(2, "no usable cgroup hierarchy")

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.join.values()]

    def oom_kills(self) -> int:
        if self.version == 2:
            return oom_kill_count(self.dirs["unified"] / "memory.events")
        # v1's oom_control counts its own cgroup only: add the commands' child
        return (oom_kill_count(self.dirs["memory"] / "memory.oom_control")
                + oom_kill_count(self.dirs["memory"] / COMMANDS / "memory.oom_control"))

    def remove(self) -> None:
        for d in self.dirs.values():
            _rmdir_cgroup(d)


def oom_kill_count(path: Path) -> int:
    """The ``oom_kill`` line of a memory cgroup's ``memory.events`` / ``memory.oom_control`` (0 if unreadable)."""
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
    except (OSError, ValueError):
        pass
    return 0


class OOMWatch:
    """OOM kills among commands since the last look, counted by a cgroup the tool server cannot see."""

    def __init__(self, count: Callable[[], int]):
        self.count = count
        self.seen = count()

    def new(self) -> bool:
        n = self.count()
        hit, self.seen = n > self.seen, n
        return hit


def _write(path: Path, value: str, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError:
        if not optional:
            raise


def _enable_v2_controllers(parent: Path) -> None:
    for p in (CGROUP_ROOT, parent):
        try:
            (p / "cgroup.subtree_control").write_text("+memory +pids +cpu")
        except OSError:
            pass


def _rmdir_cgroup(d: Path) -> None:
    # Children first (the commands' and the server's cgroups), then this one.
    if (d / COMMANDS).is_dir():
        _rmdir_cgroup(d / COMMANDS)
    # A cgroup can only go once its last process has been reaped; retry briefly (up to 5 s: a command
    # killed with hundreds of MiB of tmpfs or an inode flood behind it takes a while to exit on a
    # loaded machine; gc() sweeps what still stays).
    for _ in range(250):
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            procs = d / "cgroup.procs"
            try:
                for pid in procs.read_text().split():
                    try:
                        os.kill(int(pid), 9)
                    except OSError:
                        pass
            except OSError:
                pass
            import time

            time.sleep(0.02)


# --------------------------------------------------------------- transport
class ProcessTransport(Transport):
    def __init__(self, proc: anyio.abc.Process, stderr_path: Path, max_line: int):
        super().__init__(max_line)
        self.proc = proc
        self._stderr_path = stderr_path
        self._killed = False

    def describe(self) -> str:
        return f"sandbox process {self.proc.pid}"

    async def _send_raw(self, data: bytes) -> None:
        await self.proc.stdin.send(data)  # type: ignore[union-attr]

    async def _receive_raw(self) -> bytes:
        return await self.proc.stdout.receive(1 << 16)  # type: ignore[union-attr]

    def diagnostics(self) -> str:
        try:
            return self._stderr_path.read_text(errors="replace").strip()[-500:]
        except OSError:
            return ""

    async def kill(self) -> None:
        if self._killed:
            return
        self._killed = True
        if self.proc.returncode is None:
            # os.kill, not proc.kill(): Popen.send_signal polls first, which reaps a process that
            # already died (Ctrl-C reaches bwrap too) under asyncio's child watcher, and the watcher
            # then warns "Unknown child process" on the user's terminal. Killing a zombie is harmless.
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        with anyio.CancelScope(shield=True):
            await self.proc.wait()
            await self.proc.aclose()
        self._stderr_path.unlink(missing_ok=True)


class LocalSandbox(Sandbox):
    backend = "local"

    def __init__(self, config: SandboxConfig, transport: ProcessTransport, sandbox_id: str, cgroup: Cgroup | None):
        super().__init__(config, transport, sandbox_id)
        self.cgroup = cgroup
        self._oom = OOMWatch(cgroup.oom_kills) if cgroup else None

    async def _backend_oom(self) -> bool:
        return self._oom is not None and self._oom.new()

    async def _shutdown(self) -> None:
        await self._transport.kill()
        if self.cgroup is not None:
            await anyio.to_thread.run_sync(self.cgroup.remove)

    async def _mark_dead(self, why: str) -> None:
        await super()._mark_dead(why)
        if self.cgroup is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.cgroup.remove)

    def host_pid(self) -> int:
        """The tool server's pid on the host. An unprivileged bwrap (HOST_UID) stays outside the
        sandbox as its monitor, with the server as its only child; as root it became the server."""
        pid = self._transport.proc.pid  # type: ignore[attr-defined]
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return pid
        return int(children[0]) if len(children) == 1 else pid


def bwrap_available() -> tuple[bool, str]:
    if shutil.which("bwrap") is None:
        return False, "bubblewrap is not installed (apt-get install bubblewrap; scripts/setup.sh does)"
    root = rootfs_dir()
    rootfs = f"rootfs {root}" if rootfs_ready(root) else "host /usr (no rootfs: run `dojo sandbox build-image`)"
    cg_ok, cg = Cgroup.available()
    return True, f"bubblewrap with {rootfs}; limits from {cg if cg_ok else 'rlimits (' + cg + ')'}"


def bwrap_argv(cfg: SandboxConfig, server_cfg: dict) -> list[str]:
    lim, hard = cfg.limits, cfg.hardening
    server_cfg = dict(server_cfg)
    command_procs_host = server_cfg.pop("command_cgroup_host", None)  # a host path: not for the server
    root = Path(cfg.rootfs) if cfg.rootfs else rootfs_dir()
    use_rootfs = rootfs_ready(root) if not cfg.rootfs else (root / "usr/bin/python3").exists()
    if cfg.rootfs and not use_rootfs:
        raise SandboxStartError(f"rootfs {root} has no usr/bin/python3; build one with `dojo sandbox build-image`")
    src = root if use_rootfs else Path("/")
    argv = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not hard.network:
        argv.append("--unshare-net")
    # --as-pid-1: the tool server itself is PID 1, with no bwrap reaper beside it holding copies of
    # its stdin and stdout (a dumpable process any command could open them through /proc/1/fd).
    argv += ["--as-pid-1", "--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    for k, v in server_cfg["env"].items():
        argv += ["--setenv", k, v]
    argv += ["--ro-bind", str(src / "usr"), "/usr"]
    for link in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        p = src / link
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), f"/{link}"]
        elif p.is_dir():
            argv += ["--ro-bind", str(p), f"/{link}"]
    if use_rootfs:
        argv += ["--ro-bind", str(src / "etc"), "/etc"]
    else:
        # The host's /etc holds secrets and config; expose only what python needs.
        for f in ("passwd", "group", "ld.so.cache", "localtime", "nsswitch.conf"):
            argv += ["--ro-bind-try", f"/etc/{f}", f"/etc/{f}"]
    size = str(lim.scratch_mb * 1024 * 1024)
    # /dev is bwrap's own tmpfs, with no size cap: a command wrote 240 MiB there and the next tool
    # call died of it. So /dev goes read-only, with a size-capped /dev/shm (POSIX shm and semaphores)
    # and the IPC namespace's own mqueue fs mounted on it first (reset empties both).
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm",
             "--mqueue", "/dev/mqueue", "--remount-ro", "/dev"]
    for d in SCRATCH:
        argv += ["--perms", "1777", "--size", size, "--tmpfs", d]
    argv += ["--dir", "/opt/tooldojo", "--ro-bind", str(SERVER_SOURCE), SERVER_PATH_IN_IMAGE]
    if server_cfg.get("command_cgroup"):
        # The one cgroup file the sandbox may write: the server moves each command into the
        # commands' cgroup before it runs. A command can move only processes it can name (its own:
        # a PID namespace of its own), and only into that cgroup.
        argv += ["--bind", command_procs_host, server_cfg["command_cgroup"]]
    if hard.read_only_root:
        argv += ["--remount-ro", "/"]
    if hard.non_root:
        argv += ["--uid", "65534", "--gid", "65534"]
    if hard.drop_capabilities:
        argv += ["--cap-drop", "ALL"]
    if server_cfg.get("separation") == "pid_namespace":
        # Capabilities of the sandbox's own user namespace, for `unshare --pid` (a PID namespace per
        # command); setpriv drops them, bounding set included, before the command runs.
        argv += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
    if hard.seccomp:
        argv += ["--seccomp", SECCOMP_FD_PLACEHOLDER]
    argv += ["--chdir", WORKDIR, "--", "python3", "-I", "-u", SERVER_PATH_IN_IMAGE, json.dumps(server_cfg)]
    return argv


async def start(cfg: SandboxConfig) -> LocalSandbox:
    ok, why = bwrap_available()
    if not ok:
        raise BackendUnavailable(why)
    lim = cfg.limits
    sandbox_id = uuid.uuid4().hex[:12]
    cgroup: Cgroup | None = None
    try:
        cgroup = Cgroup.create(f"{os.getpid()}-{sandbox_id}", memory_mb=lim.memory_mb, pids=lim.pids, cpus=lim.cpus)
    except OSError:
        cgroup = None
    separated = cfg.hardening.isolate_tool_server
    server_cfg = {
        "workdir": WORKDIR,
        "scratch": list(SCRATCH),
        "wiped": list(WIPED),
        "max_output_bytes": lim.max_output_bytes,
        "max_request_bytes": lim.max_request_bytes,
        "max_file_bytes": lim.max_file_bytes,
        "own_pid_namespace": cfg.hardening.kill_on_timeout,
        "env": dict(ENV),
        # One uid only is mapped into bwrap's user namespace, so commands are kept from the tool
        # server by a PID namespace of their own (plus the server's cleared dumpable flag).
        "separation": "pid_namespace" if cfg.hardening.isolate_tool_server else None,
        # Without a cgroup the kernel's per-namespace rlimits are our only cap.
        "rlimit_nproc": None if cgroup else lim.pids,
        "command_cgroup": COMMAND_PROCS_IN_SANDBOX if cgroup and cgroup.commands and separated else None,
        "command_cgroup_host": str(cgroup.commands) if cgroup and cgroup.commands and separated else None,
        "rlimit_as_bytes": None if cgroup else lim.memory_mb * 1024 * 1024,
    }
    argv = bwrap_argv(cfg, server_cfg)
    stage: list[tuple[str, str]] = []
    if os.geteuid() == 0:
        argv, stage = _staged(argv)
        if cgroup is not None and cgroup.commands is not None:
            os.chown(cgroup.commands, HOST_UID, HOST_UID)  # the server moves commands there
    # bwrap reads its arguments from a pipe, so host paths never show up in
    # the sandbox's /proc/1/cmdline.
    seccomp_r = None
    if SECCOMP_FD_PLACEHOLDER in argv:
        try:
            seccomp_r = seccomp.program_fd()
        except seccomp.SeccompUnsupported as e:
            if cgroup:
                cgroup.remove()
            raise BackendUnavailable(f"{e}; or loosen with Hardening(seccomp=False)") from None
        argv[argv.index(SECCOMP_FD_PLACEHOLDER)] = str(seccomp_r)
    args_r, args_w = os.pipe()
    split = argv.index("--")
    os.write(args_w, b"".join(a.encode() + b"\0" for a in argv[1:split]))
    os.close(args_w)
    argv = [shutil.which("bwrap") or "bwrap", "--args", str(args_r), *argv[split:]]
    if stage:
        argv = _unprivileged(argv, stage)
    if cgroup is not None:
        # Join the cgroup before exec'ing bwrap so every sandbox process is counted.
        join = " ".join(f"&& echo $$ > {shlex.quote(p)}" for p in cgroup.procs_files())
        argv = ["/bin/sh", "-c", f"true {join} && unset PWD OLDPWD && exec \"$@\"", "sh", *argv]
    fd, stderr_name = tempfile.mkstemp(prefix=f"tooldojo-{sandbox_id}-", suffix=".stderr")
    try:
        proc = await anyio.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fd, pass_fds=(args_r,) + ((seccomp_r,) if seccomp_r is not None else ()),
            # bwrap is PID 1 inside: its environment is the sandbox's, not the host's PATH or cwd.
            env=dict(ENV), cwd="/",
        )
    except OSError as e:
        if cgroup:
            cgroup.remove()
        raise SandboxStartError(f"cannot start bwrap: {e}") from None
    finally:
        os.close(fd)
        os.close(args_r)
        if seccomp_r is not None:
            os.close(seccomp_r)
    transport = ProcessTransport(proc, Path(stderr_name), 1 << 30)
    sb = LocalSandbox(cfg, transport, sandbox_id, cgroup)
    transport.lines.limit = sb._max_line
    try:
        await sb._request("ping", cfg.start_timeout_s)
    except BaseException as e:
        diag = transport.diagnostics()
        with anyio.CancelScope(shield=True):
            await sb.close()
        if isinstance(e, SandboxDead):
            raise SandboxStartError(f"local sandbox did not come up: {e} {diag}".strip()) from None
        raise
    return sb


def _staged(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Every bind source of `argv` renamed to a slot under STAGE_DIR; returns (argv, [(source, slot)]).
    bwrap without privileges resolves sources by path as HOST_UID, which cannot enter root's 0700 home
    where the rootfs lives; root mounts each source on its slot first (see _unprivileged)."""
    out, stage = list(argv), []
    split = out.index("--")
    i = 0
    while i < split:
        if out[i] in BIND_OPS:
            src = out[i + 1]
            slot = str(STAGE_DIR / str(len(stage)))
            stage.append((src, slot))
            out[i + 1] = slot
            i += 3
        else:
            i += 1
    return out, stage


def _unprivileged(argv: list[str], stage: list[tuple[str, str]]) -> list[str]:
    """`argv` (bwrap ...) run as HOST_UID: root, in a private mount namespace of its own, mounts a small
    tmpfs on STAGE_DIR, binds each source on its slot, then drops to HOST_UID with no capabilities
    (bounding set included) and execs bwrap, which makes its user namespace unprivileged."""
    STAGE_DIR.mkdir(mode=0o755, exist_ok=True)
    st = os.lstat(STAGE_DIR)
    if st.st_uid != 0 or not os.path.isdir(STAGE_DIR) or os.path.islink(STAGE_DIR):
        raise SandboxStartError(f"{STAGE_DIR} must be a directory owned by root")
    q = shlex.quote
    steps = [f"mount -t tmpfs -o mode=0755,size=64k tooldojo-stage {q(str(STAGE_DIR))}"]
    for src, slot in stage:
        make = f"mkdir {q(slot)}" if os.path.isdir(src) else f": > {q(slot)}"
        steps.append(f"if [ -e {q(src)} ]; then {make} && mount --bind {q(src)} {q(slot)}; fi")
    uid = str(HOST_UID)
    script = " && ".join(steps) + f' && exec setpriv --reuid={uid} --regid={uid} --clear-groups ' \
        '--inh-caps=-all --bounding-set=-all -- "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh", *argv]


def gc(everything: bool = False) -> list[str]:
    """Remove per-sandbox cgroups whose owner process is gone (bwrap itself dies with its owner)."""
    removed = []
    roots = [CGROUP_ROOT / GROUP] + [CGROUP_ROOT / c / GROUP for c in ("memory", "pids", "cpu")]
    for root in roots:
        if not root.is_dir():
            continue
        for d in root.iterdir():
            if not d.is_dir():
                continue
            pid = d.name.split("-", 1)[0]
            if everything or not pid.isdigit() or owner.process_start_time(int(pid)) is None:
                _rmdir_cgroup(d)
                removed.append(d.name)
    return sorted(set(removed))
