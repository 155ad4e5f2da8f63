"""The tool server: one long-lived process inside every sandbox.

It speaks JSON lines on stdin/stdout (one request, one response, in order) and
holds the episode's tool state in memory, so a tool call costs a pipe round
trip instead of a `docker exec`. It must run on a bare python3 (the sandbox
image has nothing else), so it imports the standard library only.

Long because: it is shipped into every sandbox as one file (the image tag and the Kubernetes
ConfigMap are named by its hash, and the pod mounts just this file), so it cannot import siblings.

Request:  {"id": 7, "op": "call_tool", "name": "kv_set", "args": {...}}
Response: {"id": 7, "ok": true, "result": {...}}
      or  {"id": 7, "ok": false, "error": {"type": "...", "message": "..."}}
"""

from __future__ import annotations

import base64
import copy
import ctypes
import functools
import inspect
import json
import os
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import time
import traceback

PROTOCOL_VERSION = 1

DEFAULTS = {
    "workdir": "/workspace",
    # Emptied on every reset: each backend names its sandbox's own dirs; none by default, so a server
    # started outside a sandbox (a test, a bench) never empties the host's /tmp.
    "scratch": [],
    # Also emptied on reset, never a write_file target (/dev/shm, /dev/mqueue where the backend has them).
    "wiped": [],
    "max_output_bytes": 64 * 1024,
    "max_request_bytes": 8 * 1024 * 1024,
    "max_file_bytes": 8 * 1024 * 1024,
    # The tool state's JSON may not outgrow what one restore request carries (a snapshot that can
    # never be restored), nor an output the client's line: None is max_request_bytes less 64 KiB.
    "max_state_bytes": None,
    # Only a backend that gave us our own PID namespace may set this: it lets a
    # timeout kill every process in the sandbox, not just the command's group.
    "own_pid_namespace": False,
    # Applied to exec'd commands only (the daemon-less backend without cgroups).
    "rlimit_nproc": None,
    # A cgroup.procs file: each command moves itself there before it runs (local: the commands' own
    # memory cgroup, so an OOM among commands never picks the server).
    "command_cgroup": None,
    "rlimit_as_bytes": None,
    "env": {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/workspace", "LANG": "C.UTF-8"},
    "oom_paths": ["/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"],
    # How the backend keeps exec'd commands away from this process (see `separate`):
    # "uid": we start as root holding only SETUID/SETGID/SETPCAP/KILL and drop to server_uid, commands
    #        run as command_uid; "pid_namespace": commands run in a PID namespace of their own;
    # "non_dumpable": only the dumpable flag (same uid, same PID namespace); None: nothing.
    "separation": None,
    "server_uid": 65533,
    "command_uid": 65534,
}

# Commands in a PID namespace of their own, without any capability the tool server holds to make it.
# The helpers run with capabilities of ours (unshare in our PID namespace), so they are named by the
# absolute path found at start-up and run with an empty environment: neither the caller's PATH nor its
# LD_PRELOAD may pick what runs there. `env -i` after setpriv (already without capabilities) gives the
# command, and only the command, the caller's environment.
PIDNS_PREFIX = ["unshare", "--pid", "--fork", "--kill-child", "--",
                "setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--", "env", "-i", "--"]
HELPERS = ("unshare", "setpriv", "env")
PR_SET_DUMPABLE, PR_SET_KEEPCAPS, PR_CAPBSET_DROP = 4, 8, 24
# What the tool server keeps in "uid" mode: to kill commands (CAP_KILL) and start them as another
# uid (CAP_SETUID/SETGID). The bounding set is empty, so no command ever gets them back.
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7
KEPT_CAPS = (CAP_KILL, CAP_SETGID, CAP_SETUID)
OOM_SCORE_ADJ_MAX = 1000
# Deeper arguments would blow the recursion limit of copy.deepcopy in every later call.
MAX_JSON_DEPTH = 100
_libc = ctypes.CDLL(None, use_errno=True)


class ToolFailure(Exception):
    """Raised by a tool implementation for a declared, agent-readable error."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class InvalidArguments(ToolFailure):
    """Raised by a domain's argument validation: the agent called a tool wrongly."""

    def __init__(self, message: str):
        super().__init__("invalid_arguments", message)


class RequestError(Exception):
    def __init__(self, type_: str, message: str):
        super().__init__(message)
        self.type = type_
        self.message = message


class _ToolTimeout(BaseException):
    pass


class SeparationError(Exception):
    """The backend asked for a separation this process cannot set up: refuse to serve."""


def separate(cfg: dict) -> None:
    """Put this process out of the reach of the commands it will run, or refuse to start.

    What holds, per mode: with "uid" every uid of ours (server_uid) differs from every id of a
    command (command_uid), so the kernel refuses it kill(), ptrace(), process_vm_*,
    /proc/PID/{mem,fd,environ} and setpriority/sched_setscheduler/sched_setaffinity on us; we keep
    CAP_KILL and CAP_SETUID/SETGID (an empty bounding set: commands never get them) to stop and
    start commands, and our filesystem uid is command_uid, so files we write are the agent's. With "pid_namespace"
    commands cannot name us at all (kill, ptrace, process_vm_* take a pid in the caller's
    namespace). Every mode clears the dumpable flag, which alone denies same-uid
    /proc/PID/mem, ptrace and pidfd_getfd, but not signals.
    """
    mode = cfg["separation"]
    if not mode:
        return
    if mode not in ("uid", "pid_namespace", "non_dumpable"):
        raise SeparationError(f"unknown separation {mode!r}")
    if mode == "uid":
        if os.geteuid() != 0:
            raise SeparationError(f"separation 'uid' needs the tool server started as root with CAP_SETUID, "
                                  f"CAP_SETGID, CAP_SETPCAP and CAP_KILL; it runs as uid {os.geteuid()}")
        for cap in range(64):  # EINVAL past the kernel's last capability; commands inherit the empty set
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        server, command = int(cfg["server_uid"]), int(cfg["command_uid"])
        kept = KEPT_CAPS
        _libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
        os.setgroups([])
        os.setresgid(server, server, server)
        os.setresuid(server, server, server)
        _libc.prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0)
        _set_caps(kept)  # no uid is 0 any more; keep only what commands need from us, nothing else
        _libc.setfsgid(command)  # files we create are the agent's to edit
        _libc.setfsuid(command)
        want = sum(1 << c for c in kept)
        with open("/proc/self/status") as f:
            st = {k: v.strip() for k, _, v in (line.partition(":") for line in f)}
        got = {k: int(st[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
        if got != {"CapInh": 0, "CapPrm": want, "CapEff": want, "CapBnd": 0, "CapAmb": 0} or \
                st["Uid"].split() != [str(server), str(server), str(server), str(command)]:
            raise SeparationError(f"the drop to uid {server} left {got}, uids {st['Uid']}")
    elif mode == "pid_namespace":
        found = {p: shutil.which(p, path=cfg["env"].get("PATH")) for p in HELPERS}
        missing = [p for p, path in found.items() if path is None]
        if missing:
            raise SeparationError(f"separation 'pid_namespace' needs {' and '.join(missing)} (util-linux, coreutils) "
                                  "in the sandbox's root filesystem")
        cfg["pidns_prefix"] = [found.get(a, a) for a in PIDNS_PREFIX]
    if _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise SeparationError(f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(ctypes.get_errno())}")


def _set_caps(caps) -> None:
    """capset(2): `caps` effective and permitted, nothing inheritable."""
    mask = sum(1 << c for c in caps)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)(mask, mask, 0, 0, 0, 0)  # {effective, permitted, inheritable} x 2
    if _libc.capset(header, data) != 0:
        raise SeparationError(f"capset failed: {os.strerror(ctypes.get_errno())}")


# ---------------------------------------------------------------- test domain
# A small built-in domain so the sandbox layer can be proven on its own: a
# key-value store and a counter. Later packages load richer domains.
BUILTIN_SOURCE = '''
def kv_set(state, key: str, value: str):
    """Store value under key; returns the previous value or null."""
    if not isinstance(key, str) or not key:
        raise ToolFailure("invalid_key", "key must be a non-empty string")
    prev = state["kv"].get(key)
    state["kv"][key] = value
    return {"key": key, "previous": prev}

def kv_get(state, key: str):
    """Return the value stored under key."""
    if key not in state["kv"]:
        raise ToolFailure("not_found", f"no key {key!r}; known keys: {sorted(state['kv'])}")
    return {"key": key, "value": state["kv"][key]}

def kv_delete(state, key: str):
    """Delete key; fails if it does not exist."""
    if key not in state["kv"]:
        raise ToolFailure("not_found", f"no key {key!r}")
    del state["kv"][key]
    return {"deleted": key}

def kv_list(state, prefix: str = ""):
    """List keys that start with prefix."""
    return {"keys": sorted(k for k in state["kv"] if k.startswith(prefix))}

def counter_incr(state, name: str, by: int = 1):
    """Add `by` to the named counter and return its new value."""
    if not isinstance(by, int) or isinstance(by, bool):
        raise ToolFailure("invalid_increment", "by must be an integer")
    state["counters"][name] = state["counters"].get(name, 0) + by
    return {"name": name, "value": state["counters"][name]}

def counter_get(state, name: str):
    """Return the named counter's value (0 if never incremented)."""
    return {"name": name, "value": state["counters"].get(name, 0)}

TOOLS = [kv_set, kv_get, kv_delete, kv_list, counter_incr, counter_get]
INITIAL_STATE = {"kv": {}, "counters": {}}
'''


@functools.lru_cache(maxsize=32)
def _compile_text(source: str, filename: str, mode: str, *rest):
    return compile(source, filename, mode, *rest)


def _compile(source, filename, mode, *rest, **kw):
    """`compile`, kept per text: a code object is immutable, and each load still runs it in fresh
    globals. Compiling was 7 of a domain load's 8 ms (the bundle compiles the tool DSL's source
    inside it too), paid on every task draw, replay and episode."""
    if kw or not (isinstance(source, str) and isinstance(filename, str) and isinstance(mode, str)):
        return compile(source, filename, mode, *rest, **kw)
    try:
        return _compile_text(source, filename, mode, *rest)
    except TypeError:  # an unhashable flag argument
        return compile(source, filename, mode, *rest)


class Domain:
    def __init__(self, name: str, source: str, state: dict | None, run_command=None):
        # run_command(cmd, timeout=30.0) -> the exec result: a shell or code tool runs its command
        # exactly as `exec` does (separated from us), never with a subprocess of our own.
        namespace: dict = {"ToolFailure": ToolFailure, "InvalidArguments": InvalidArguments,
                           "run_command": run_command, "__name__": f"tooldojo_domain_{name}",
                           "compile": _compile}
        try:
            exec(_compile(source, f"<domain {name}>", "exec"), namespace)
        except Exception as e:
            raise RequestError("DomainLoadError", f"domain {name!r} failed to load: {type(e).__name__}: {e}")
        tools = namespace.get("TOOLS")
        if not isinstance(tools, (list, tuple)) or not all(callable(t) for t in tools):
            raise RequestError("DomainLoadError", f"domain {name!r} must define TOOLS as a list of functions")
        self.name = name
        self.source = source
        self.tools = {t.__name__: t for t in tools}
        initial = state if state is not None else namespace.get("INITIAL_STATE", {})
        self.initial_state = _json_copy(initial, "initial state")
        self.state = _json_copy(self.initial_state, "initial state")
        self.digest = None  # of self.state; None after a write
        self.text = None  # self.state's canonical JSON when a write just measured it, else None
        self.digests = _Digests()


class _Digests:
    """sha256 of the state's canonical JSON, re-serialising only what changed since the last one.

    Canonical JSON (sorted keys, no spaces) of a dict is the join of its entries' own canonical
    JSON, so the text of an entry (and of each row of a big table) is kept with the object it was
    made from, and reused while the state holds that same object. Writes replace what they touch
    (copy on write, or a deep copy), so an object still in place is unchanged.
    """

    TABLE = 32  # top-level dicts with more entries than this keep a text per row

    def __init__(self):
        self.top = {}  # key -> (object, text, {row key: (object, '"key":text')} or None)

    def digest(self, state) -> str:
        import hashlib

        return hashlib.sha256(self.text(state).encode()).hexdigest()

    def text(self, state) -> str:
        """The state's canonical JSON (what the digest hashes)."""
        try:
            text = self._state(state) if isinstance(state, dict) else None
        except TypeError:  # a non-string key: the slow, exact way
            text = None
        if text is None:
            self.top = {}
            text = _canonical(json.loads(json.dumps(state)))
        return text

    def _state(self, state) -> str:
        fresh, out = {}, []
        for key in sorted(state):
            _str_key(key)
            value = dict.__getitem__(state, key)
            hit = self.top.get(key)
            if hit is not None and hit[0] is value:  # the same object: unchanged
                fresh[key] = hit
            elif isinstance(value, dict) and len(value) > self.TABLE:
                old_rows = hit[2] if hit is not None and hit[2] is not None else {}
                rows, parts = {}, []
                for rk in sorted(value):
                    _str_key(rk)
                    row = dict.__getitem__(value, rk)
                    old = old_rows.get(rk)
                    if old is None or old[0] is not row:  # the row's "key":value text
                        old = (row, json.dumps(rk, ensure_ascii=False) + ":" + _canonical(row))
                    rows[rk] = old
                    parts.append(old[1])
                fresh[key] = (value, "{" + ",".join(parts) + "}", rows)
            else:
                fresh[key] = (value, _canonical(value), None)
            out.append(json.dumps(key, ensure_ascii=False) + ":" + fresh[key][1])
        self.top = fresh
        return "{" + ",".join(out) + "}"


def _str_key(key) -> None:
    if type(key) is not str:
        raise TypeError("a non-string key (JSON would turn it into a string)")


def _wire_len(text: str) -> int:
    """Length of `text` (canonical JSON: non-ASCII raw) as the wire's ASCII JSON writes it, where
    every UTF-16 unit past ASCII is a 6-byte \\uXXXX."""
    if text.isascii():
        return len(text)
    ascii_n = len(text.encode("ascii", "ignore"))
    return ascii_n + 6 * (len(text.encode("utf-16-le", "surrogatepass")) // 2 - ascii_n)


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _json_copy(obj, what: str):
    try:
        return json.loads(json.dumps(obj))
    except (TypeError, ValueError) as e:
        raise RequestError("StateNotSerializable", f"{what} is not JSON-serialisable: {e}")


class Server:
    def __init__(self, config: dict):
        self.cfg = {**DEFAULTS, **config}
        separate(self.cfg)
        self.domain = Domain("builtin", BUILTIN_SOURCE, None)
        self.in_pid_ns = bool(self.cfg["own_pid_namespace"]) and os.getpid() <= 2
        # What a reset checks is still ours: a command that changed it (a reniced or OOM-first
        # server) leaves a sandbox that reset cannot clean, and the pool replaces it.
        self.knobs = _server_knobs()
        # Each scratch and wiped root as it was at start (mode, owner, xattrs, times): a command may
        # chmod, setxattr or touch a root it owns, and the wipe itself moves its mtime; reset puts
        # them back (see _restore_roots).
        self.roots = {r: _root_attrs(r) for r in list(self.cfg["scratch"]) + list(self.cfg["wiped"])}

    # --------------------------------------------------------------- dispatch
    def handle(self, req: dict) -> dict:
        op = req.get("op")
        fn = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        if fn is None:
            raise RequestError("UnknownOperation", f"unknown op {op!r}")
        params = {k: v for k, v in req.items() if k not in ("id", "op")}
        try:
            return fn(**params)
        except TypeError as e:
            if _is_signature_error(e, fn):
                raise RequestError("MalformedRequest", f"bad parameters for op {op!r}: {e}")
            raise

    def op_ping(self):
        return {"pong": True, "pid": os.getpid(), "protocol": PROTOCOL_VERSION, "domain": self.domain.name}

    # ------------------------------------------------------------------ tools
    def _state_cap(self) -> int:
        cap = self.cfg["max_state_bytes"]
        return int(cap) if cap else max(1024, int(self.cfg["max_request_bytes"]) - (64 << 10))

    def op_load_domain(self, name: str, source: str, state=None):
        domain = Domain(name, source, state, run_command=self.op_exec)
        size = _wire_len(domain.digests.text(domain.state))
        if size > self._state_cap():
            raise RequestError("StateTooLarge", f"domain {name!r}: its initial state is {size} bytes of JSON; "
                                                f"the cap is {self._state_cap()} (what a restore may carry)")
        self.domain = domain
        return {"domain": name, "tools": sorted(self.domain.tools)}

    def op_list_tools(self):
        out = []
        for name, fn in sorted(self.domain.tools.items()):
            out.append({"name": name, "doc": inspect.getdoc(fn) or "", "signature": str(inspect.signature(fn))})
        return {"domain": self.domain.name, "tools": out}

    def op_call_tool(self, name: str, args=None, timeout: float | None = None):
        args = {} if args is None else args
        fn = self.domain.tools.get(name)
        if fn is None:
            return _tool_error("unknown_tool", f"unknown tool {name!r}; available: {sorted(self.domain.tools)}")
        if not isinstance(args, dict):
            return _tool_error("invalid_arguments", f"arguments must be a JSON object, got {type(args).__name__}")
        if json_depth(args) > MAX_JSON_DEPTH:
            return _tool_error("invalid_arguments", f"{name}: arguments are nested deeper than {MAX_JSON_DEPTH} levels")
        try:
            inspect.signature(fn).bind(None, **args)
        except TypeError as e:
            return _tool_error("invalid_arguments", f"{name}: {e}")
        # Work on a copy so a tool that fails half-way leaves the world unchanged. A zoo tool brings
        # its own (toolzoo/dsl.py: copy on write; a read keeps the old state); others get a deep copy.
        begin = getattr(fn, "begin", None)
        working = begin(self.domain.state) if begin else copy.deepcopy(self.domain.state)
        old = signal.signal(signal.SIGALRM, _raise_tool_timeout)
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, float(timeout))
        try:
            output = fn(working, **args)
            size = len(json.dumps(output))
        except InvalidArguments as e:
            return _tool_error("invalid_arguments", f"{name}: {e.message}")
        except ToolFailure as e:
            return _tool_error("tool_failure", e.message, code=e.code)
        except _ToolTimeout:
            return _tool_error("timeout", f"{name} did not finish within {timeout}s")
        except (TypeError, ValueError) as e:
            if "JSON serializable" in str(e) or "Circular" in str(e):
                return _tool_error("internal_error", f"{name} returned a value that is not JSON: {e}")
            return _tool_error("internal_error", _short_tb(e))
        except RecursionError as e:
            return _tool_error("internal_error", f"{name}: {e}")
        except Exception as e:
            return _tool_error("internal_error", _short_tb(e))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        cap = self._state_cap()
        if size > cap:
            return _tool_error("output_too_large", f"{name} returned {size} bytes of JSON; the cap is {cap}")
        commit = getattr(fn, "commit", None)
        new = commit(self.domain.state, working) if commit else working
        if new is not self.domain.state:
            # Measured here, the text a later digest hashes (no second serialisation): a state a
            # snapshot could not carry back in a restore is refused, and the old one stays.
            text = self.domain.digests.text(new)
            size = _wire_len(text)
            if size > cap:
                return _tool_error("state_too_large", f"{name} would make the tool state {size} bytes of JSON; "
                                                      f"the cap is {cap}: the call was undone")
            self.domain.state, self.domain.digest, self.domain.text = new, None, text
        return {"ok": True, "output": output}

    def op_snapshot(self):
        return {"domain": self.domain.name, "state": _json_copy(self.domain.state, "state")}

    def op_digest(self):
        """The state's digest (sandboxes.models.state_digest) without sending the state: kept until a
        write, and then only the top-level entries and table rows that changed are serialised again."""
        if self.domain.digest is None:
            import hashlib

            text = self.domain.text if self.domain.text is not None else self.domain.digests.text(self.domain.state)
            self.domain.digest, self.domain.text = hashlib.sha256(text.encode()).hexdigest(), None
        return {"domain": self.domain.name, "digest": self.domain.digest}

    def op_restore(self, state, domain: str | None = None):
        if domain is not None and domain != self.domain.name:
            raise RequestError("DomainMismatch", f"snapshot is of domain {domain!r}, sandbox has {self.domain.name!r}")
        self.domain.state = _json_copy(state, "restored state")
        self.domain.digest = self.domain.text = None
        return {"restored": True}

    def op_reset(self, state=None):
        killed = self._kill_strays()
        with self._as_command():
            left = self._clear_scratch() + self._clear_ipc() + self._restore_roots()
        knobs = _server_knobs()
        if knobs != self.knobs:
            left.append(f"the tool server's scheduling/OOM settings changed: {self.knobs} -> {knobs}")
        if left:
            raise RequestError("ResetIncomplete", "the sandbox cannot be made as good as new: " + "; ".join(left[:5]))
        self.domain.state = _json_copy(self.domain.initial_state if state is None else state, "state")
        self.domain.digest = self.domain.text = None
        return {"killed": killed}

    # ------------------------------------------------------------------ files
    def _confine(self, path: str) -> str:
        if not isinstance(path, str) or not path or "\x00" in path:
            raise RequestError("PathOutsideSandbox", f"invalid path {path!r}")
        full = os.path.normpath(os.path.join(self.cfg["workdir"], path))
        real = os.path.realpath(full)
        for root in self.cfg["scratch"]:
            if real == root or real.startswith(root.rstrip("/") + "/"):
                return real
        raise RequestError("PathOutsideSandbox", f"{path!r} is outside the writable scratch dirs {self.cfg['scratch']}")

    def op_write_file(self, path: str, data_b64: str, mode: int = 0o644):
        real = self._confine(path)
        data = base64.b64decode(data_b64)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        try:
            # O_NONBLOCK: a FIFO planted by a command must fail the request, not hang us.
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_NOFOLLOW, 0o600)
            with open(fd, "wb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise RequestError("FileError", f"{path!r} is not a regular file")
                f.write(data)
                os.fchmod(fd, mode)  # the file we wrote, even if a command swapped the path since
        except OSError as e:
            raise RequestError("FileError", f"cannot write {path!r}: {e.strerror}")
        return {"path": real, "bytes": len(data)}

    def op_read_file(self, path: str):
        real = self._confine(path)
        try:
            with open(os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW), "rb") as f:
                st = os.fstat(f.fileno())
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError
                if not stat.S_ISREG(st.st_mode):
                    raise RequestError("FileError", f"{path!r} is not a regular file")
                if st.st_size > self.cfg["max_file_bytes"]:
                    raise RequestError("FileTooLarge", f"{path!r} is {st.st_size} bytes; "
                                                       f"the limit is {self.cfg['max_file_bytes']}")
                data = f.read(self.cfg["max_file_bytes"] + 1)
        except FileNotFoundError:
            raise RequestError("FileNotFound", f"no file {path!r} in the sandbox")
        except IsADirectoryError:
            raise RequestError("FileError", f"{path!r} is a directory")
        return {"path": real, "data_b64": base64.b64encode(data).decode()}

    # ------------------------------------------------------------------- exec
    def op_exec(self, cmd, timeout: float = 30.0, stdin_b64: str | None = None, env=None, cwd: str | None = None):
        if isinstance(cmd, str):
            argv = ["/bin/sh", "-c", cmd]
        elif isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd):
            argv = cmd
        else:
            raise RequestError("MalformedRequest", "cmd must be a string or a non-empty list of strings")
        stdin_data = base64.b64decode(stdin_b64) if stdin_b64 else b""
        run_env = dict(self.cfg["env"])
        if env is not None and not (isinstance(env, dict) and all(
                isinstance(k, str) and isinstance(v, str) and k and "=" not in k and "\0" not in k + v
                for k, v in env.items())):
            raise RequestError("MalformedRequest", "env must map names (no '=' or NUL) to strings")
        run_env.update(env or {})
        oom_before = self._oom_count()
        started = time.monotonic()
        mode, ids = self.cfg["separation"], {}
        if mode == "uid":
            ids = {"user": int(self.cfg["command_uid"]), "group": int(self.cfg["command_uid"])}
        elif mode == "pid_namespace":
            # env -i NAME=VALUE... COMMAND: a command whose name holds '=' would read as one more
            # variable, so such a name goes through the shell (which then runs as the command).
            head = ["/bin/sh", "-c", 'exec "$0" "$@"'] if "=" in argv[0] else []
            argv = self.cfg["pidns_prefix"] + [f"{k}={v}" for k, v in run_env.items()] + head + argv
            run_env = {}  # the helpers' own environment: nothing of the caller's
        # A tool call's timeout (SIGALRM, raised as _ToolTimeout) may only interrupt the wait in
        # _pump: were it to unwind us past the kills below, the command would outlive its tool call
        # and could write the verdict a grader reads later. So it is blocked from Popen to the end,
        # and the kills run on every way out (a pending alarm is raised once they are done).
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        try:
            try:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    cwd=self._confine(cwd) if cwd else self.cfg["workdir"], env=run_env,
                    start_new_session=True, close_fds=True, preexec_fn=self._child_setup, **ids,
                )
            except (OSError, subprocess.SubprocessError) as e:
                # EAGAIN under a pids limit, ENOENT for a missing program, a failed preexec step.
                why = getattr(e, "strerror", None) or str(e)
                return {"exit_code": 127 if isinstance(e, FileNotFoundError) else 126, "stdout_b64": "",
                        "stderr_b64": base64.b64encode(f"cannot start {argv[0]}: {why}".encode()).decode(),
                        "timed_out": False, "truncated": False, "oom_killed": False, "duration_s": 0.0}
            try:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                try:
                    out, err, truncated, timed_out = self._pump(proc, stdin_data, started + float(timeout))
                finally:
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            except BaseException:
                self._close_pipes(proc)
                self._kill_group(proc.pid)
                proc.wait()
                self._kill_strays()
                self._reap()
                raise
            if timed_out:
                self._kill_group(proc.pid)
            try:
                rc = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill_group(proc.pid)
                rc = proc.wait()
            # Whatever is left of the command (setsid, double fork) dies with it, timed out or not: a
            # process that outlives its exec shares the uid of every later command and could trace or
            # write them (/proc/PID/mem, ptrace) and so forge their exit codes or output. On local each
            # command's PID namespace already ends with it; on docker this kill(-1) is what does it.
            self._kill_strays()
            self._reap()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        oom = self._oom_count() > oom_before
        return {"exit_code": rc if rc >= 0 else 128 - rc, "stdout_b64": base64.b64encode(out).decode(),
                "stderr_b64": base64.b64encode(err).decode(), "timed_out": timed_out, "truncated": truncated,
                "oom_killed": oom, "duration_s": round(time.monotonic() - started, 4)}

    def _child_setup(self):
        # Our fork inherits the cleared dumpable flag, which leaves /proc/self root-owned; the
        # command gets it back at execve anyway (it holds none of our fds by then: 0-2 are its pipes).
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})  # op_exec blocked it around the fork
        if self.cfg["command_cgroup"]:
            with open(self.cfg["command_cgroup"], "w") as f:
                f.write("0")  # this process; fails the exec (126) rather than run it beside us
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if self.cfg["rlimit_nproc"]:
            resource.setrlimit(resource.RLIMIT_NPROC, (self.cfg["rlimit_nproc"],) * 2)
        if self.cfg["rlimit_as_bytes"]:
            resource.setrlimit(resource.RLIMIT_AS, (self.cfg["rlimit_as_bytes"],) * 2)
        # Make the command, not the tool server, the OOM killer's first choice.
        _write_oom_score_adj(OOM_SCORE_ADJ_MAX)

    def _pump(self, proc, stdin_data: bytes, deadline: float):
        cap = int(self.cfg["max_output_bytes"])
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        bufs = {out_fd: bytearray(), err_fd: bytearray()}
        truncated = False
        sel = selectors.DefaultSelector()
        for fd in bufs:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        in_fd = proc.stdin.fileno()
        os.set_blocking(in_fd, False)
        pending = memoryview(stdin_data)
        if pending:
            sel.register(in_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        exited_at = None
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                self._close_pipes(proc)
                return bytes(bufs[out_fd]), bytes(bufs[err_fd]), truncated, True
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            # A background child may keep the pipes open after the command
            # exits; stop reading shortly after the command itself is gone.
            if exited_at is not None and now - exited_at > 0.2:
                break
            for key, _ in sel.select(timeout=min(0.05, deadline - now)):
                fd = key.fd
                if fd == in_fd:
                    try:
                        n = os.write(fd, pending[:65536])
                        pending = pending[n:]
                    except (BrokenPipeError, BlockingIOError):
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    continue
                room = cap - len(bufs[fd])
                if room > 0:
                    bufs[fd] += chunk[:room]
                if len(chunk) > room:
                    truncated = True  # keep draining so the writer never blocks
        self._close_pipes(proc)
        return bytes(bufs[out_fd]), bytes(bufs[err_fd]), truncated, False

    @staticmethod
    def _close_pipes(proc):
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f.close()
            except OSError:
                pass

    def _kill_group(self, pgid: int):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _strays(self) -> list[int]:
        me = os.getpid()
        pids = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                pid = int(name)
                if pid != me and pid != 1:
                    pids.append(pid)
        return pids

    def _kill_strays(self) -> int:
        """Kill every process in the sandbox but us (fork bombs included)."""
        if not self.in_pid_ns:
            return 0
        killed = 0
        for _ in range(200):
            strays = self._strays()
            if not strays:
                break
            killed = max(killed, len(strays))
            try:
                os.kill(-1, signal.SIGKILL)  # everything we may signal except PID 1 and ourselves
            except ProcessLookupError:
                pass
            self._reap()
            time.sleep(0.002)
        self._reap()
        return killed

    def _reap(self):
        # As PID 1 of a container we inherit orphans; collect them so they do
        # not hold slots under the pids limit.
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def _as_command(self):
        """Clean up as the uid that made the mess: on docker the server (65533) owns neither the
        commands' SysV IPC objects nor, without DAC override, their mode-000 dirs. CAP_SETUID lets
        us switch the effective uid and back (between non-zero uids our capabilities stay)."""
        import contextlib

        if self.cfg["separation"] != "uid":
            return contextlib.nullcontext()

        @contextlib.contextmanager
        def switched():
            server, command = int(self.cfg["server_uid"]), int(self.cfg["command_uid"])
            os.setegid(command)
            os.seteuid(command)
            try:
                yield
            finally:
                os.seteuid(server)
                os.setegid(server)
                _libc.setfsgid(command)  # seteuid reset the filesystem ids: files we write stay the agent's
                _libc.setfsuid(command)
        return switched()

    def _clear_scratch(self) -> list[str]:
        """Empty every scratch and wiped dir; what could not be removed, as messages."""
        left = []
        for root in list(self.cfg["scratch"]) + list(self.cfg["wiped"]):
            if not _wipe(root):
                left.append(f"{root} could not be emptied")
        return left

    def _restore_roots(self) -> list[str]:
        """Every scratch/wiped root's mode, xattrs and times back to what they were at start; what
        differs after (an owner no uid of ours can change back), as messages. A root that is not
        ours (docker's root-owned /dev/mqueue) is as unchangeable for commands as for us, except its
        mtime, which any queue created there moves: that one is left as it is."""
        left = []
        for root, want in self.roots.items():
            got = _root_attrs(root)
            if want is None or got == want:
                continue
            if got is None or not stat.S_ISDIR(got["mode"]):
                left.append(f"{root} is gone or no longer a directory")
                continue
            times_ours = True
            try:
                if got["mode"] != want["mode"]:
                    os.chmod(root, stat.S_IMODE(want["mode"]))
                for name in set(got["xattrs"]) - set(want["xattrs"]):
                    os.removexattr(root, name)
                for name, value in want["xattrs"].items():
                    if got["xattrs"].get(name) != value:
                        os.setxattr(root, name, value)
            except OSError as e:
                left.append(f"cannot restore {root}: {e.strerror}")
                continue
            try:
                os.utime(root, ns=(want["atime_ns"], want["mtime_ns"]))
            except PermissionError:
                times_ours = False
            except OSError as e:
                left.append(f"cannot restore the times of {root}: {e.strerror}")
            got = _root_attrs(root)
            keys = [k for k in ("mode", "uid", "gid", "xattrs", "mtime_ns") if k != "mtime_ns" or times_ours]
            diff = {k: (want[k], got[k]) for k in keys if got is None or got[k] != want[k]}
            if diff:
                left.append(f"{root} differs from the start: {diff}")
        return left

    def _clear_ipc(self) -> list[str]:
        """Remove every System V shared memory segment, message queue and semaphore set of our IPC
        namespace (POSIX queues and shm live in the wiped /dev/mqueue and /dev/shm)."""
        left = []
        for kind, fn, extra in (("shm", "shmctl", ()), ("msg", "msgctl", ()), ("sem", "semctl", (0,))):
            if _sysv_in_use(kind) == 0:
                continue
            ids = _sysv_ids(kind)
            for ipc_id in ids:
                getattr(_libc, fn)(ipc_id, *extra, 0, None)  # IPC_RMID
            rest = _sysv_ids(kind) if ids else []
            if rest:
                left.append(f"System V {kind} ids {rest[:3]} remain")
        return left

    def _oom_count(self) -> int:
        for path in self.cfg["oom_paths"]:
            try:
                with open(path) as f:
                    for line in f:
                        k, _, v = line.partition(" ")
                        if k == "oom_kill":
                            return int(v)
            except (OSError, ValueError):
                continue
        return 0


def _wipe(root: str) -> bool:
    """Empty `root` without following a link and without holding a listing in memory (an inode
    flood of a million names must not kill the server that cleans it up): depth first through
    directory fds, each directory made 0700 before it is entered (a command may leave 000 or 555
    dirs), entries unlinked as the directory is read. True when `root` is empty (or absent) after."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        top = os.open(root, flags)
    except FileNotFoundError:
        return True
    except PermissionError:  # a command made its scratch root 000 (local: the root is its uid's)
        try:
            os.chmod(root, 0o1777)
            top = os.open(root, flags)
        except OSError:
            return False
    except OSError:
        return False
    seen = set()  # (dev, ino) of dirs entered: one that cannot be emptied is not entered again
    stack = [(top, None)]  # (dir fd, its name in the parent)
    clean = True
    try:
        while stack:
            fd, _ = stack[-1]
            child, stuck = None, False
            with os.scandir(fd) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            st = e.stat(follow_symlinks=False)
                            if (st.st_dev, st.st_ino) in seen:
                                stuck = True  # entered before and still there
                                continue
                            seen.add((st.st_dev, st.st_ino))
                            os.chmod(e.name, 0o700, dir_fd=fd)  # no command runs now: still a dir
                            child = (os.open(e.name, flags, dir_fd=fd), e.name)
                            break
                        os.unlink(e.name, dir_fd=fd)
                    except OSError:
                        stuck = True
            if child is not None:
                stack.append(child)
                continue
            fd, name = stack.pop()
            os.close(fd)
            if not stack:
                clean = not stuck
            elif name is not None:
                try:
                    os.rmdir(name, dir_fd=stack[-1][0])
                except OSError:
                    pass  # the parent's next pass finds it again, and is stuck
    finally:
        for fd, _ in stack:
            os.close(fd)
    return clean


def _root_attrs(path: str) -> dict | None:
    """What a command could change of a scratch root itself: mode, owner, xattrs, times."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    xattrs = {}
    try:
        for name in os.listxattr(path, follow_symlinks=False):
            try:
                xattrs[name] = os.getxattr(path, name, follow_symlinks=False)
            except OSError:
                pass
    except OSError:
        pass
    return {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid, "xattrs": xattrs,
            "atime_ns": st.st_atime_ns, "mtime_ns": st.st_mtime_ns}


# IPC_INFO-style counts: (ctl function, command, index of the "objects in use" int in its struct).
SYSV_COUNTS = {"shm": ("shmctl", 14, 0), "msg": ("msgctl", 12, 0), "sem": ("semctl", 19, 7)}


def _sysv_in_use(kind: str) -> int:
    """How many objects of a kind exist (SHM_INFO used_ids, MSG_INFO msgpool, SEM_INFO semusz): one
    syscall, so a reset reads /proc/sysvipc only when there is something to remove."""
    fn, cmd, index = SYSV_COUNTS[kind]
    buf = (ctypes.c_int * 32)()
    args = (0, 0, cmd, buf) if fn == "semctl" else (0, cmd, buf)
    if getattr(_libc, fn)(*args) < 0:
        return -1  # unknown: look
    return buf[index]


def _sysv_ids(kind: str) -> list[int]:
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            next(f)  # the header
            return [int(line.split()[1]) for line in f if line.strip()]
    except (OSError, StopIteration, ValueError, IndexError):
        return []


def _write_oom_score_adj(value: int) -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass


def _server_knobs() -> dict:
    """What a command could change about us from outside: niceness, policy, OOM score."""
    try:
        with open("/proc/self/oom_score_adj") as f:
            oom = int(f.read())
    except (OSError, ValueError):
        oom = None
    return {"nice": os.getpriority(os.PRIO_PROCESS, 0), "policy": os.sched_getscheduler(0), "oom_score_adj": oom}


def json_depth(obj) -> int:
    """Nesting depth of a JSON value, without recursion (a deep value must not crash the measure)."""
    deepest, todo = 0, [(obj, 1)]
    while todo:
        o, d = todo.pop()
        if isinstance(o, (dict, list)):
            deepest = max(deepest, d)
            todo.extend((v, d + 1) for v in (o.values() if isinstance(o, dict) else o))
    return deepest


def _raise_tool_timeout(signum, frame):
    raise _ToolTimeout()


def _tool_error(kind: str, message: str, code: str | None = None) -> dict:
    return {"ok": False, "error": {"kind": kind, "message": message, "code": code}}


def _short_tb(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    where = next((f"line {f.lineno} in {f.name}" for f in reversed(frames) if f.filename.startswith("<domain")), "")
    return f"{type(e).__name__}: {e}" + (f" ({where})" if where else "")


def _is_signature_error(e: TypeError, fn) -> bool:
    return e.__traceback__ is not None and e.__traceback__.tb_next is None


def serve(config: dict, rfile=None, wfile=None) -> None:
    rfile = rfile or sys.stdin.buffer
    wfile = wfile or sys.stdout.buffer
    server = Server(config)
    limit = int(server.cfg["max_request_bytes"])
    while True:
        line = rfile.readline(limit + 1)
        if not line:
            return  # our owner went away: exit, and the sandbox goes with us
        if len(line) > limit and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # discard the rest of the oversized line
                line = rfile.readline(limit + 1)
            resp = {"id": None, "ok": False, "error": {"type": "RequestTooLarge",
                    "message": f"request exceeds {limit} bytes"}}
        else:
            resp = _respond(server, line)
        wfile.write(json.dumps(resp, separators=(",", ":")).encode() + b"\n")
        wfile.flush()
        if resp.get("shutdown"):
            return


def _respond(server: Server, line: bytes) -> dict:
    try:
        req = json.loads(line)
    except ValueError as e:
        return {"id": None, "ok": False, "error": {"type": "MalformedRequest", "message": f"not JSON: {e}"}}
    except RecursionError:
        return {"id": None, "ok": False, "error": {"type": "MalformedRequest", "message": "JSON nested too deeply"}}
    if not isinstance(req, dict):
        return {"id": None, "ok": False, "error": {"type": "MalformedRequest", "message": "request must be an object"}}
    rid = req.get("id")
    if req.get("op") == "shutdown":
        return {"id": rid, "ok": True, "result": {}, "shutdown": True}
    try:
        return {"id": rid, "ok": True, "result": server.handle(req)}
    except RequestError as e:
        return {"id": rid, "ok": False, "error": {"type": e.type, "message": e.message}}
    except Exception as e:  # the server must survive anything a request does
        return {"id": rid, "ok": False, "error": {"type": "ServerError", "message": _short_tb(e)}}


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    serve(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
