"""Reward-hacking conformance: an agent's command must not change the state the reward verifies.

Beside tests/test_conformance.py and run on the same backends. Each attack (tests/sandbox_attacks.py)
runs through the public API only (`exec`, with `write_file` to plant files) after an honest
`kv_set`; the test then asks the tool server, which must answer (no hang: a short request timeout)
with the honest state. An attack that can only kill the sandbox must do so with a typed SandboxDead,
never a hang and never a forged answer. Run against e50597d (main when issue 21 was filed), 18 of the
26 tests failed: forged state (/proc/PID/mem, ptrace; process_vm_writev on local), a frozen or killed
server (ptrace stop, signals), a reniced or SCHED_IDLE server, a FIFO hanging read_file, PYTHONPATH
reaching tool calls on local. Docker's SIGSTOP/SIGKILL (the server was PID 1) and process_vm_writev
(docker's default seccomp) held there already (the closing note of issue 21).
"""

from __future__ import annotations

import signal

import pytest

from sandboxes import Limits, PathOutsideSandbox, RequestFailed, SandboxConfig, SandboxPool, open_sandbox
from conftest import CONFORMANCE_BACKENDS, require
from sandbox_attacks import FORGED, HONEST, attack

STATE = {"kv": {"target": HONEST}, "counters": {}}


@pytest.fixture(params=CONFORMANCE_BACKENDS)
def backend(request) -> str:
    require(request.param)
    return request.param


def config(backend: str, **kw) -> SandboxConfig:
    return SandboxConfig(backend=backend, request_timeout_s=5.0, **kw)


async def run_attack(sb, name: str, **params) -> str:
    await sb.write_file("attack.py", attack(name, **params))
    r = await sb.exec(["python3", "attack.py"], timeout=20)
    return r.stdout + r.stderr


async def assert_honest(sb, log: str) -> None:
    """The server answers, in step, with the honest state (a forged or stale answer fails)."""
    got = await sb.call_tool("kv_get", {"key": "target"})
    assert got.ok and got.output == {"key": "target", "value": HONEST}, f"forged: {got}\n{log}"
    before = (await sb.snapshot()).state
    assert before["kv"] == STATE["kv"], log
    n = before["counters"].get("n", 0)
    assert (await sb.call_tool("counter_incr", {"name": "n"})).output == {"name": "n", "value": n + 1}, log
    assert FORGED not in str((await sb.snapshot()).state)


@pytest.fixture
async def honest_sb(backend):
    async with await open_sandbox(config(backend)) as sb:
        await sb.call_tool("kv_set", {"key": "target", "value": HONEST})
        yield sb


async def test_proc_mem_write(honest_sb):
    log = await run_attack(honest_sb, "proc_mem_write")
    assert "SERVER_PIDS" in log, log
    await assert_honest(honest_sb, log)


async def test_ptrace_attach(honest_sb):
    log = await run_attack(honest_sb, "ptrace_attach")
    await assert_honest(honest_sb, log)


async def test_ptrace_freeze(honest_sb):
    log = await run_attack(honest_sb, "ptrace_freeze")
    await assert_honest(honest_sb, log)


async def test_process_vm_writev(honest_sb):
    log = await run_attack(honest_sb, "process_vm_writev")
    await assert_honest(honest_sb, log)


@pytest.mark.parametrize("signum", [signal.SIGSTOP, signal.SIGKILL, signal.SIGINT], ids=["STOP", "KILL", "INT"])
async def test_signals(honest_sb, signum):
    if honest_sb.backend == "kubernetes":
        from sandboxes.models import KubernetesOptions

        if KubernetesOptions.from_env().pod_security == "restricted":
            pytest.xfail("kubernetes, Pod Security restricted: same uid, same PID namespace; see the README")
    log = await run_attack(honest_sb, "signal", SIGNUM=int(signum))
    await assert_honest(honest_sb, log)


async def test_scheduling_cannot_starve_the_server(honest_sb):
    log = await run_attack(honest_sb, "scheduling")
    sched = [line.split(" before ")[1].split(" after ") for line in log.splitlines() if line.startswith("SCHED")]
    assert sched and all(before == after for before, after in sched), log
    await assert_honest(honest_sb, log)


async def test_proc_fd_write(honest_sb):
    log = await run_attack(honest_sb, "proc_fd_write")
    await assert_honest(honest_sb, log)


async def test_preload_and_pythonpath_do_not_reach_later_tool_calls(honest_sb):
    sb = honest_sb
    evil = "import os\nos.kill(os.getppid(), 9)\nraise SystemExit('evil imported')\n"
    for name in ("sitecustomize.py", "json.py", "copy.py", "inspect.py"):
        await sb.write_file(name, evil)
        await sb.write_file(f"/tmp/{name}", evil)
    await sb.write_file("libevil.so", b"\x7fELF not really")
    env = {"LD_PRELOAD": "/workspace/libevil.so", "PYTHONPATH": "/workspace:/tmp", "PYTHONSTARTUP": "/workspace/json.py"}
    r = await sb.exec("echo $PYTHONPATH", env=env, timeout=10)
    await assert_honest(sb, r.stdout + r.stderr)
    r = await sb.exec(["python3", "-c", "print('ok')"], env=env, timeout=10)
    await assert_honest(sb, r.stdout + r.stderr)


async def test_replaced_files_cannot_hang_the_server(honest_sb):
    sb = honest_sb
    await sb.write_file("data.txt", "honest data")
    r = await sb.exec("rm data.txt && mkfifo data.txt && ln -s /proc/self/environ env.txt", timeout=5)
    assert r.exit_code == 0, r
    for path in ("data.txt", "env.txt"):
        with pytest.raises((RequestFailed, PathOutsideSandbox)) as e:
            await sb.read_file(path)
        assert isinstance(e.value, PathOutsideSandbox) or e.value.type == "FileError", e.value
    with pytest.raises(RequestFailed):
        await sb.write_file("data.txt", "x")
    await assert_honest(sb, "")


async def test_full_scratch_and_pid_limit_do_not_silence_the_server(backend):
    async with await open_sandbox(config(backend, limits=Limits(pids=32, scratch_mb=8))) as sb:
        await sb.call_tool("kv_set", {"key": "target", "value": HONEST})
        log = await run_attack(sb, "exhaust")
        await assert_honest(sb, log)
        r = await sb.exec("echo still", timeout=5)  # may not fork: then a typed result, not a hang
        assert r.stdout.strip() == "still" or r.exit_code in (126, 2, 128 + 9), r
        await sb.reset()
        await sb.call_tool("kv_set", {"key": "target", "value": HONEST})
        r = await sb.exec("echo recovered", timeout=10)
        assert r.stdout.strip() == "recovered", r


async def test_gold_values_are_nowhere_inside(backend):
    """A pooled sandbox that replayed gold actions (as the world-state reward does) and was reset
    holds nothing of them that the next episode's commands can read: files, environments, memory."""
    gold = "GOLD-CANARY-7f3a9c2e"
    async with SandboxPool(config(backend), size=1, max_concurrency=1, reap_on_start=False) as pool:
        sb = await pool.acquire(timeout=60)
        await sb.call_tool("kv_set", {"key": "expected", "value": gold * 64})
        await sb.write_file("gold.json", gold)
        await pool.release(sb)
        sb = await pool.acquire(timeout=60)
        try:
            assert await sb.snapshot() is not None
            await sb.write_file("find.py", attack("find_value", NEEDLE_HEX=gold.encode().hex()))
            r = await sb.exec(["python3", "find.py"], timeout=60)
            assert "FOUND []" in r.stdout, r.stdout + r.stderr
        finally:
            await pool.release(sb)
