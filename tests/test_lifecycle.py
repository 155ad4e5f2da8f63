"""Owner death and reaping, dead sandboxes, and typed errors for bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import anyio
import pytest
from conftest import require
from pydantic import ValidationError

from sandboxes import (
    ImageNotFound,
    InvalidRequest,
    Limits,
    PathOutsideSandbox,
    RequestTooLarge,
    SandboxConfig,
    SandboxDead,
    SandboxFileNotFound,
    open_sandbox,
    reap_orphans,
)
from sandboxes.errors import RequestFailed

OWNER_SCRIPT = textwrap.dedent(
    """
    import json, sys, anyio
    from sandboxes import SandboxConfig, open_sandbox

    async def main():
        boxes = [await open_sandbox(SandboxConfig(backend=sys.argv[1])) for _ in range(3)]
        info = [{"id": b.id, "pid": b.host_pid(), "container": getattr(b, "container_id", None),
                 "cgroup": [str(d) for d in (b.cgroup.dirs.values() if getattr(b, "cgroup", None) else [])]}
                for b in boxes]
        print(json.dumps(info), flush=True)
        await anyio.sleep(600)

    anyio.run(main)
    """
)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_kill_9_owner_then_gc_leaves_nothing(backend, tmp_path):
    script = tmp_path / "owner.py"
    script.write_text(OWNER_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), backend], stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(proc.stdout.readline())
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(info) == 3
    removed = reap_orphans(backend)
    deadline = time.monotonic() + 15
    if backend == "docker":
        from sandboxes.docker_backend import client

        while time.monotonic() < deadline:
            left = client().api.containers(all=True, filters={"label": f"tooldojo.owner_pid={proc.pid}"})
            if not left:
                break
            reap_orphans(backend)
            time.sleep(0.2)
        assert left == [], f"containers left behind: {[c['Id'][:12] for c in left]} (gc removed {removed})"
        from sandboxes.docker_backend import _group_dirs

        cgroups = [str(d) for d in _group_dirs() if d.name.startswith(f"tooldojo-{proc.pid}-")]
        assert cgroups == [], f"cgroups left behind: {cgroups}"
    else:
        while time.monotonic() < deadline and any(_pid_alive(i["pid"]) for i in info):
            time.sleep(0.1)
        assert not any(_pid_alive(i["pid"]) for i in info), "bwrap processes outlived their owner"
        reap_orphans(backend)
        for i in info:
            for d in i["cgroup"]:
                assert not os.path.exists(d), f"cgroup {d} left behind"


async def test_dead_sandbox_gives_typed_error(backend):
    sb = await open_sandbox(SandboxConfig(backend=backend))
    try:
        assert (await sb.call_tool("counter_incr", {"name": "x"})).ok
        os.kill(sb.host_pid(), signal.SIGKILL)
        with pytest.raises(SandboxDead) as exc:
            for _ in range(50):  # the kill lands asynchronously
                await sb.call_tool("counter_get", {"name": "x"})
                await anyio.sleep(0.05)
        assert "dead" in str(exc.value) or "exited" in str(exc.value) or "gone" in str(exc.value)
        assert not sb.alive
        with pytest.raises(SandboxDead, match="open a new one"):
            await sb.exec("true")
    finally:
        await sb.close()


def test_unknown_image_is_typed():
    require("docker")

    async def go():
        await open_sandbox(SandboxConfig(backend="docker", image="tooldojo-no-such-image:v0"))

    with pytest.raises(ImageNotFound, match="dojo sandbox build-image"):
        anyio.run(go)


@pytest.mark.parametrize(
    "bad, field",
    [({"memory_mb": 1}, "memory_mb"), ({"pids": 2}, "pids"), ({"cpus": 0}, "cpus"), ({"scratch_mb": 0}, "scratch_mb"),
     ({"memory_mb": "lots"}, "memory_mb"), ({"bogus": 1}, "bogus")],
)
def test_invalid_limits_name_the_field(bad, field):
    with pytest.raises(ValidationError) as exc:
        Limits(**bad)
    assert field in str(exc.value)


def test_invalid_backend_rejected():
    with pytest.raises(ValidationError, match="backend"):
        SandboxConfig(backend="vm")


async def test_unknown_tool_and_bad_arguments(sb):
    r = await sb.call_tool("launch_rockets", {})
    assert not r.ok and r.kind == "unknown_tool" and "kv_set" in r.message
    r = await sb.call_tool("kv_set", {"key": "a"})
    assert not r.ok and r.kind == "invalid_arguments" and "value" in r.message
    r = await sb.call_tool("kv_set", {"key": "a", "value": "b", "extra": 1})
    assert not r.ok and r.kind == "invalid_arguments"
    r = await sb.call_tool("counter_incr", {"name": "c", "by": "two"})
    assert not r.ok and r.kind == "tool_failure" and r.code == "invalid_increment"
    assert (await sb.call_tool("counter_get", {"name": "c"})).output["value"] == 0


async def test_malformed_requests_keep_sandbox_usable(sb):
    t = sb._transport
    for garbage in (b"this is not json\n", b"[1, 2, 3]\n", b'{"id": 99, "op": "no_such_op"}\n',
                    b'{"id": 98, "op": "exec"}\n'):
        await t.send(garbage)
        resp = json.loads(await t.receive_line())
        assert resp["ok"] is False
        assert resp["error"]["type"] in ("MalformedRequest", "UnknownOperation"), resp
    assert (await sb.call_tool("counter_incr", {"name": "still"})).output["value"] == 1


async def test_huge_arguments_rejected_both_sides(backend):
    cfg = SandboxConfig(backend=backend, limits=Limits(max_request_bytes=64 * 1024))
    async with await open_sandbox(cfg) as sb:
        with pytest.raises(RequestTooLarge, match="max_request_bytes"):
            await sb.call_tool("kv_set", {"key": "k", "value": "x" * 100_000})
        with pytest.raises(RequestTooLarge):
            await sb.write_file("big.bin", b"\0" * 100_000)
        # A client that ignores the cap meets the server's own limit.
        await sb._transport.send(b'{"id": 5, "op": "ping", "pad": "' + b"y" * 200_000 + b'"}\n')
        resp = json.loads(await sb._transport.receive_line())
        assert resp["error"]["type"] == "RequestTooLarge"
        assert (await sb.call_tool("kv_set", {"key": "k", "value": "fits"})).ok


async def test_deeply_nested_arguments_are_typed_and_keep_the_sandbox(sb):
    deep: object = "leaf"
    for _ in range(10_000):
        deep = {"a": deep}
    with pytest.raises(InvalidRequest, match="nested"):
        await sb.call_tool("kv_set", {"key": "k", "value": deep})
    nested: object = "leaf"
    for _ in range(150):  # encodable, but every later deepcopy of the state would fail
        nested = [nested]
    with pytest.raises(InvalidRequest, match="nested deeper than 100"):
        await sb.call_tool("kv_set", {"key": "k", "value": nested})
    with pytest.raises(InvalidRequest, match="not JSON-serialisable"):
        await sb.call_tool("kv_set", {"key": "k", "value": {1, 2}})
    # A client that skips the check meets the server's: a typed answer, never a crash.
    t = sb._transport
    for line in (b'{"id": 7, "op": "ping", "x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}\n",
                 json.dumps({"id": 8, "op": "call_tool", "name": "kv_set", "args": {"key": "k", "value": nested}}).encode() + b"\n"):
        await t.send(line)
        resp = json.loads(await t.receive_line())
        err = resp["error"] if not resp["ok"] else resp["result"]["error"]
        assert "nested" in err["message"], resp
    assert (await sb.call_tool("kv_set", {"key": "k", "value": "fine"})).ok
    assert (await sb.ping())["pong"]


async def test_paths_confined(sb):
    for bad in ("../etc/passwd", "/etc/passwd", "/workspace/../../root", "/proc/self/environ", ""):
        with pytest.raises(PathOutsideSandbox):
            await sb.read_file(bad)
        if bad:
            with pytest.raises(PathOutsideSandbox):
                await sb.write_file(bad, "x")
    # A symlink planted inside the sandbox cannot be used to leave it.
    await sb.exec("ln -s /etc/passwd /workspace/link", timeout=5)
    with pytest.raises(PathOutsideSandbox):
        await sb.read_file("link")
    with pytest.raises(SandboxFileNotFound):
        await sb.read_file("missing.txt")
    path = await sb.write_file("sub/dir/ok.txt", "fine")
    assert path == "/workspace/sub/dir/ok.txt"
    assert await sb.read_file("/workspace/sub/dir/ok.txt") == b"fine"
    assert await sb.read_file("/tmp/../workspace/sub/dir/ok.txt") == b"fine"


async def test_exec_stdin_exit_codes_env_cwd(sb):
    r = await sb.exec("tr a-z A-Z", stdin="hello sandbox", timeout=5)
    assert r.stdout == "HELLO SANDBOX" and r.ok
    r = await sb.exec("exit 7", timeout=5)
    assert r.exit_code == 7 and not r.ok
    r = await sb.exec(["no-such-program"], timeout=5)
    assert r.exit_code == 127
    r = await sb.exec("echo $GREETING; pwd", env={"GREETING": "hi"}, cwd="/tmp", timeout=5)
    assert r.stdout == "hi\n/tmp\n"
    big = os.urandom(300_000)
    r = await sb.exec("wc -c", stdin=big, timeout=10)
    assert r.stdout.strip() == str(len(big))
    with pytest.raises(ValueError):
        await sb.exec("true", timeout=0)


async def test_snapshot_restore_and_reset(sb):
    await sb.call_tool("kv_set", {"key": "a", "value": "1"})
    snap = await sb.snapshot()
    await sb.call_tool("kv_set", {"key": "b", "value": "2"})
    await sb.call_tool("counter_incr", {"name": "n", "by": 5})
    changed = await sb.snapshot()
    assert changed.digest != snap.digest
    await sb.restore(snap)
    assert (await sb.snapshot()).digest == snap.digest
    assert (await sb.call_tool("kv_list", {})).output["keys"] == ["a"]
    await sb.write_file("junk.txt", "x")
    await sb.exec("sleep 100 &", timeout=5)
    await sb.reset()
    assert (await sb.call_tool("kv_list", {})).output["keys"] == []
    with pytest.raises(SandboxFileNotFound):
        await sb.read_file("junk.txt")
    r = await sb.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '", timeout=5)
    assert "sleep" not in r.stdout
    await sb.reset(state={"kv": {"seeded": "yes"}, "counters": {}})
    assert (await sb.call_tool("kv_get", {"key": "seeded"})).output["value"] == "yes"
    with pytest.raises(RequestFailed, match="DomainMismatch"):
        await sb.restore(snap.model_copy(update={"domain": "other"}))
