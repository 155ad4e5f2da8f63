"""Issue 29: a sandbox is a clean, sealed room. Beside tests/test_reward_hacking.py, same backends,
same rules: attacks through the public API only (scripts in tests/sandbox_attacks.py), judged by
what the tool server and a later command see afterwards, never by what the attack printed.

Run against main's sandboxes at ef8ae07 (before the fix), 12 of 19 failed: local's helpers found by
the caller's PATH (the fake `unshare` froze and interrupted the server), unchecked env names, a
leftover writing into a later command's stdout (docker), a host-root sandbox (local), no seccomp
(local), a user namespace mounting cgroupfs (local), uncapped /dev (local) and docker's 64 MiB
/dev/shm, reset leaving 000/555 dirs, /dev/shm, IPC (both), commands in the server's memory cgroup
(local). Held there already: the PATH trap, seccomp and user namespaces on docker (no helper, the
engine's profile), leftovers on local (their PID namespace), the inode flood on both.
"""

from __future__ import annotations

import json

import pytest

from sandboxes import Limits, SandboxConfig, SandboxPool, open_sandbox
from conftest import CONFORMANCE_BACKENDS, require
from sandbox_attacks import HONEST, attack
from test_reward_hacking import STATE, assert_honest, run_attack


@pytest.fixture(params=CONFORMANCE_BACKENDS)
def backend(request) -> str:
    require(request.param)
    return request.param


def config(backend: str, **kw) -> SandboxConfig:
    return SandboxConfig(backend=backend, request_timeout_s=10.0, **kw)


@pytest.fixture
async def honest_sb(backend):
    async with await open_sandbox(config(backend)) as sb:
        await sb.call_tool("kv_set", {"key": "target", "value": HONEST})
        yield sb


# ---------------------------------------------------------------- item 3
async def test_callers_path_never_picks_the_servers_helpers(honest_sb):
    """A caller's PATH with a fake `unshare`/`setpriv`/`env` in /workspace must reach the command only:
    the server's own helpers (which run with its capabilities, in its PID namespace) stay its own."""
    sb = honest_sb
    trap = "#!/bin/sh\nkill -INT 1; kill -STOP 1; echo HIJACKED\nexit 0\n"
    for name in ("unshare", "setpriv", "env"):
        await sb.write_file(name, trap, mode=0o755)
    env = {"PATH": "/workspace:/usr/bin:/bin", "MARK": "caller-env"}
    r = await sb.exec(["sh", "-c", 'echo "$MARK"; command -v unshare'], env=env, timeout=10)
    await assert_honest(sb, r.stdout + r.stderr)
    # The command itself does get the caller's environment, PATH included.
    assert r.stdout.split() == ["caller-env", "/workspace/unshare"], r
    assert "HIJACKED" not in r.stdout, r


async def test_bad_env_names_are_refused(honest_sb):
    from sandboxes import RequestFailed

    with pytest.raises(RequestFailed, match="MalformedRequest"):
        await honest_sb.exec("true", env={"A=B": "x"}, timeout=5)
    await assert_honest(honest_sb, "")


# ---------------------------------------------------------------- item 4
async def test_a_process_left_behind_cannot_write_into_later_commands(honest_sb):
    """A double-forked process outlived its exec on docker and wrote into every later command's
    stdout (/proc/PID/fd/1: same uid). It must be gone when its exec returns."""
    sb = honest_sb
    log = await run_attack(sb, "leftover_injector")
    assert "LEFTOVER started" in log, log
    r = await sb.exec(["sh", "-c", "sleep 0.5; echo clean-output # victim-marker"], timeout=10)
    assert r.stdout == "clean-output\n", r
    assert (await fingerprint(sb))["processes"] == [], "a process outlived its exec"
    await assert_honest(sb, log)


# ---------------------------------------------------------------- items 1 and 2
async def test_no_sandbox_process_is_host_root(honest_sb):
    """local ran bwrap as host root, so uid 65534 inside was uid 0 outside: a command could write the
    tool server's /proc knobs (oom_score_adj, autogroup) and read host root's keyrings in /proc/keys."""
    from pathlib import Path

    sb = honest_sb
    status = Path(f"/proc/{sb.host_pid()}/status").read_text()
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert "0" not in uids, f"the tool server runs as host uid {uids}"
    r = await sb.exec(["sh", "-c", "for k in oom_score_adj autogroup coredump_filter clear_refs; do "
                       "(echo 1 > /proc/1/$k) 2>/dev/null && echo WROTE $k; done; "
                       "wc -l < /proc/keys 2>/dev/null || echo 0"], timeout=10)
    assert "WROTE" not in r.stdout, r
    assert r.stdout.split()[-1] == "0", f"host keyrings visible: {r}"
    await assert_honest(sb, r.stdout)


LOCAL_REFUSED = ["io_uring_setup", "userfaultfd", "perf_event_open", "keyctl", "add_key", "unshare", "open_tree",
                 "kcmp", "move_pages", "memfd_secret"]
# docker 20.10's default profile (the engine's, not ours) still allows io_uring_* and memfd_secret.
DOCKER_REFUSED = [s for s in LOCAL_REFUSED if s not in ("io_uring_setup", "memfd_secret")]


async def test_seccomp_refuses_what_dockers_default_refuses(honest_sb):
    sb = honest_sb
    names = LOCAL_REFUSED if sb.backend == "local" else DOCKER_REFUSED
    await sb.write_file("sys.py", attack("syscalls", SYSCALLS=names + ["clone3"]))
    r = await sb.exec(["python3", "sys.py"], timeout=20)
    got = {line.split()[1]: line.split()[2:] for line in r.stdout.splitlines() if line.startswith("SYSCALL")}
    assert set(got) == set(names) | {"clone3"}, r
    allowed = {n: v for n, v in got.items() if n != "clone3" and v != ["-1", "EPERM"]}
    assert not allowed, f"not refused with EPERM: {allowed}\n{r.stdout}{r.stderr}"
    assert got["clone3"] == ["-1", "ENOSYS"], got  # glibc falls back to clone, whose flags the filter reads
    status = await sb.exec(["grep", "^Seccomp:", "/proc/self/status"], timeout=5)
    assert status.stdout.split() == ["Seccomp:", "2"], status
    await assert_honest(sb, r.stdout)


async def test_no_user_namespace_so_no_cgroupfs_or_keyrings(honest_sb):
    """In a user namespace of its own a local command mounted cgroupfs and raised its own limits
    (and froze another sandbox); keyctl listed host root's keyrings. Neither is reachable now."""
    sb = honest_sb
    r = await sb.exec(["sh", "-c", "mkdir -p /tmp/cg && unshare -U -r -m -C sh -c "
                       "'mount -t cgroup2 none /tmp/cg && ls /tmp/cg' ; echo rc=$?"], timeout=10)
    assert "cgroup.procs" not in r.stdout and "rc=0" not in r.stdout, r
    r = await sb.exec(["python3", "-c", attack("syscalls", SYSCALLS=["keyctl", "add_key"])], timeout=10)
    assert r.stdout.count("EPERM") == 2, r
    await assert_honest(sb, r.stdout + r.stderr)


async def test_every_writable_tmpfs_is_capped_dev_included(backend):
    mb = 8
    async with await open_sandbox(config(backend, limits=Limits(scratch_mb=mb))) as sb:
        await sb.call_tool("kv_set", {"key": "target", "value": HONEST})
        r = await sb.exec(["sh", "-c", "for d in /dev /dev/shm /workspace /tmp; do "
                           "dd if=/dev/zero of=$d/fill bs=1M count=32 2>/dev/null; "
                           "echo $d $(stat -c %s $d/fill 2>/dev/null || echo 0); done"], timeout=30)
        sizes = {line.split()[0]: int(line.split()[1]) for line in r.stdout.splitlines()}
        assert set(sizes) == {"/dev", "/dev/shm", "/workspace", "/tmp"}, r
        over = {d: n for d, n in sizes.items() if n > mb << 20}
        assert not over, f"wrote past the {mb} MiB cap: {over}"
        await assert_honest(sb, r.stdout)


# ---------------------------------------------------------------- items 5 and 6
async def fingerprint(sb) -> dict:
    r = await sb.exec(["python3", "-c", attack("fingerprint")], timeout=30)
    line = [x for x in r.stdout.splitlines() if x.startswith("FINGERPRINT")]
    assert line, r
    return json.loads(line[0][len("FINGERPRINT"):])


async def test_reset_is_as_good_as_new(backend):
    """Differential: after an episode that did its worst, release + acquire gives a sandbox whose
    observable state equals a fresh one's (a slot reset cannot clean is replaced, not reused)."""
    cfg = config(backend)
    async with await open_sandbox(cfg) as fresh:
        want = await fingerprint(fresh)
        want.pop("root_mtimes")
    async with SandboxPool(cfg, size=1, max_concurrency=1, reap_on_start=False) as pool:
        sb = await pool.acquire(timeout=60)
        mtimes = (await fingerprint(sb))["root_mtimes"]
        log = await run_attack(sb, "worst_episode")
        assert "WORST done" in log, log
        await pool.release(sb)
        sb = await pool.acquire(timeout=60)
        try:
            got = await fingerprint(sb)
            # Issue 61: the roots' mtimes as they were (the wipe and the episode's utime moved them),
            # but for docker's /dev/mqueue: root's, which no uid of the sandbox can date back.
            got_mtimes = got.pop("root_mtimes")
            if backend == "docker":
                mtimes.pop("/dev/mqueue"), got_mtimes.pop("/dev/mqueue")
            assert got_mtimes == mtimes, f"scratch roots' mtimes moved: {mtimes} -> {got_mtimes}\n{log}"
            diff = {k: (want.get(k), got.get(k)) for k in set(want) | set(got) if want.get(k) != got.get(k)}
            assert not diff, f"differs from a fresh sandbox: {json.dumps(diff, indent=1)[:3000]}\n{log}"
            assert (await sb.snapshot()).state == {"kv": {}, "counters": {}}
        finally:
            await pool.release(sb)


async def test_reset_survives_an_inode_flood(backend):
    async with await open_sandbox(config(backend, limits=Limits(memory_mb=128))) as sb:
        r = await sb.exec(["python3", "-c", (
            "import os\n"
            "n = 0\n"
            "try:\n"
            "    for d in range(400):\n"
            "        os.mkdir(f'/tmp/d{d}')\n"
            "        for i in range(500):\n"
            "            open(f'/tmp/d{d}/{i:0100d}', 'w').close(); n += 1\n"
            "except OSError as e:\n"
            "    print('stopped', e)\n"
            "print('files', n)\n")], timeout=60)
        assert "files" in r.stdout or r.oom_killed, r
        await sb.reset(STATE)
        left = await sb.exec(["sh", "-c", "ls -A /tmp | wc -l"], timeout=10)
        assert left.stdout.strip() == "0", left
        await assert_honest(sb, r.stdout)


async def test_commands_out_of_memory_kill_commands_not_the_server(backend):
    """Commands run in a memory cgroup of their own, capped below the sandbox's limit (docker on a
    cgroup v1 host: a sibling of the container's cgroup under a per-sandbox parent), so whatever they
    do to their oom_score_adj (a command may set it back to 0), an OOM among them picks among them;
    their tmpfs pages are charged there too."""
    async with await open_sandbox(config(backend, limits=Limits(memory_mb=128))) as sb:
        await sb.call_tool("kv_set", {"key": "target", "value": HONEST})
        r = await sb.exec(["sh", "-c", "grep memory /proc/self/cgroup; grep memory /proc/1/cgroup"], timeout=10)
        mine, server = r.stdout.split()
        assert mine != server, f"commands share the tool server's memory cgroup: {r.stdout}"
        r = await sb.exec(["sh", "-c", "echo 0 > /proc/self/oom_score_adj; "
                           "for d in /tmp /workspace /dev/shm; do dd if=/dev/zero of=$d/fill bs=1M count=64; done; "
                           "python3 -c 'b = bytearray(64 << 20)'"], timeout=30)
        assert r.oom_killed, r
        await assert_honest(sb, r.stdout + r.stderr)
        await sb.reset(STATE)
        assert (await sb.exec("echo again", timeout=10)).stdout == "again\n"


FORK_BOMB = """
import os, time
kids = []
for i in range(40):
    try:
        pid = os.fork()
    except OSError as e:
        print('fork failed', e); break
    if pid == 0:
        b = b'x' * (8 << 20)  # touched: charged now
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
dead = sum(1 for p in kids if os.waitpid(p, 0)[1] != 0)
print('children', len(kids), 'killed', dead)
"""


async def test_forked_children_out_of_memory_kill_commands_not_the_server(backend):
    """The attack of item 6: a command sets its oom_score_adj back to 0, then forks 40 children of
    8 MiB each in a 128 MiB sandbox. The OOM killer must take children, never the tool server."""
    async with await open_sandbox(config(backend, limits=Limits(memory_mb=128, pids=64))) as sb:
        await sb.call_tool("kv_set", {"key": "target", "value": HONEST})
        r = await sb.exec(["sh", "-c", "echo 0 > /proc/self/oom_score_adj && exec python3 -c \"$0\"", FORK_BOMB],
                          timeout=30)
        assert r.oom_killed, r
        assert "killed 0" not in r.stdout, r
        await assert_honest(sb, r.stdout + r.stderr)
        await sb.reset(STATE)
        assert (await sb.exec("echo again", timeout=10)).stdout == "again\n"
