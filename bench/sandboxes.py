"""Benchmark the sandbox layer: tool-call latency, exec, reset, pool acquire, start-up, density.

    python bench/sandboxes.py [--backend auto|docker|local] [--quick] [--max-sandboxes N] [--no-isolation-baseline]

Progress goes to stderr; the LAST line on stdout is one JSON object with every
number (milliseconds unless the key says otherwise), the targets, and which
targets were met. Every latency is measured with time.perf_counter around the
awaited call; percentiles come from statistics.quantiles over all samples.

The `docker exec` baseline runs in the same process against a sandbox container
of the same configuration, through the docker SDK (exec_create + exec_start,
timed inside the worker thread, so it does not pay for our event loop): it is
what a tool call would cost if every call were a fresh `docker exec python3 -c`
reading and writing its state in a file. The `no_isolation_*` numbers are the tool-call, exec and
reset loops run again in the same process with `Hardening(isolate_tool_server=False)`: what the
separation of commands from the tool server costs (`isolation_cost_*`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sandboxes import SandboxConfig, SandboxFileNotFound, SandboxPool, open_sandbox
from sandboxes.api import Sandbox
from sandboxes.backends import resolve_backend
from sandboxes.errors import SandboxError

console = Console(stderr=True, highlight=False)

TARGETS = {
    "tool_call_p50_ms": 5.0,  # <=
    "isolated_tool_call_p50_ms": 0.5,  # <= with the tool server separated from commands (issue 21)
    "speedup_vs_docker_exec": 10.0,  # >=
    "reset_p50_ms": 20.0,  # <=
    "acquire_p50_ms": 10.0,  # <=
    "max_concurrent": 200,  # >= (full mode only)
}

# How many samples each measurement takes: (full, quick).
COUNTS = {
    "fresh_start": (10, 5),
    "tool_warmup": (50, 20),
    "tool_call": (2000, 300),
    "exec": (200, 50),
    "spawn_exec": (100, 30),
    "docker_exec": (200, 30),
    "reset": (200, 30),
    "acquire": (200, 50),
    "max_sandboxes": (200, 24),
}

# The work of one counter_incr, done the docker-exec way: state lives in a file.
DOCKER_EXEC_CODE = (
    "import json,os\n"
    "p='/tmp/bench_state.json'\n"
    "s=json.load(open(p)) if os.path.exists(p) else {'kv':{},'counters':{}}\n"
    "c=s['counters'];c['bench']=c.get('bench',0)+1\n"
    "json.dump(s,open(p,'w'))\n"
    "print(json.dumps({'name':'bench','value':c['bench']}))\n"
)


# ----------------------------------------------------------------- helpers
def pct(samples_s: list[float], q: int) -> float | None:
    """The q-th percentile of samples (seconds) in milliseconds, rounded to 3 decimals."""
    if not samples_s:
        return None
    if len(samples_s) == 1:
        return round(samples_s[0] * 1000, 3)
    if q == 50:
        return round(statistics.median(samples_s) * 1000, 3)
    return round(statistics.quantiles(samples_s, n=100, method="inclusive")[q - 1] * 1000, 3)


def summary(name: str, samples_s: list[float], with_p99: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {f"{name}_p50_ms": pct(samples_s, 50)}
    if with_p99:
        out[f"{name}_p99_ms"] = pct(samples_s, 99)
    out[f"{name}_mean_ms"] = round(statistics.fmean(samples_s) * 1000, 3) if samples_s else None
    out[f"{name}_n"] = len(samples_s)
    return out


def count(key: str, quick: bool) -> int:
    full, q = COUNTS[key]
    return q if quick else full


def progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def mem_total_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 2)
    except OSError:
        pass
    return None


def children_map() -> dict[int, list[int]]:
    """ppid -> [pid] for every process on the host, from /proc/<pid>/stat."""
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def proc_tree(pid: int, kids: dict[int, list[int]]) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def proc_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, Pss) of one process in KiB; 0 where unreadable (gone, or a kernel thread)."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
                break
    except OSError:
        pass
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
                break
    except OSError:
        pass
    return rss, pss


def tree_kb(pid: int, kids: dict[int, list[int]]) -> tuple[int, int]:
    rss = pss = 0
    for p in proc_tree(pid, kids):
        r, s = proc_kb(p)
        rss += r
        pss += s
    return rss, pss


def docker_cgroup_usage(container_id: str) -> int | None:
    for path in (
        f"/sys/fs/cgroup/memory/docker/{container_id}/memory.usage_in_bytes",  # v1, cgroupfs driver
        f"/sys/fs/cgroup/memory/system.slice/docker-{container_id}.scope/memory.usage_in_bytes",  # v1, systemd
        f"/sys/fs/cgroup/docker/{container_id}/memory.current",  # v2, cgroupfs
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.current",  # v2, systemd
    ):
        try:
            return int(Path(path).read_text())
        except (OSError, ValueError):
            continue
    return None


def measure_memory(sandboxes: list[Sandbox], backend: str) -> dict[str, Any]:
    """Average host memory per live sandbox (blocking: run it in a thread)."""
    if not sandboxes:
        return {"rss_per_sandbox_mb": None}
    kids = children_map()
    n = len(sandboxes)
    tree_rss = tree_pss = 0
    shim_rss = 0
    cgroup_bytes: list[int] = []
    for sb in sandboxes:
        pid = sb.host_pid()  # type: ignore[attr-defined]
        r, s = tree_kb(pid, kids)
        tree_rss += r
        tree_pss += s
        if backend == "docker":
            usage = docker_cgroup_usage(sb.container_id)  # type: ignore[attr-defined]
            if usage is not None:
                cgroup_bytes.append(usage)
            try:  # the container's containerd-shim, which is host cost the cgroup does not count
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                shim_rss += proc_kb(ppid)[0]
            except (OSError, ValueError):
                pass
    out: dict[str, Any] = {
        "proc_rss_per_sandbox_mb": round(tree_rss / n / 1024, 2),
        "proc_pss_per_sandbox_mb": round(tree_pss / n / 1024, 2) if tree_pss else None,
    }
    if backend == "docker" and len(cgroup_bytes) == n:
        out["rss_per_sandbox_mb"] = round(sum(cgroup_bytes) / n / 1024 / 1024, 2)
        out["rss_source"] = "memory cgroup usage (memory.usage_in_bytes) of each container"
    else:
        out["rss_per_sandbox_mb"] = out["proc_rss_per_sandbox_mb"]
        out["rss_source"] = "sum of VmRSS over host_pid() and its descendants"
    if backend == "docker":
        out["shim_rss_per_sandbox_mb"] = round(shim_rss / n / 1024, 2)
    return out


async def close_all(sandboxes: list[Sandbox], limit: int = 16) -> float:
    """Close every sandbox (bounded concurrency, shielded); returns the wall time."""
    t0 = time.perf_counter()
    lim = anyio.CapacityLimiter(limit)

    async def one(sb: Sandbox) -> None:
        async with lim:
            try:
                await sb.close()
            except Exception as e:  # noqa: BLE001 - keep closing the others
                console.print(f"[yellow]close of {sb.id} failed: {type(e).__name__}: {e}")

    with anyio.CancelScope(shield=True):
        async with anyio.create_task_group() as tg:
            for sb in list(sandboxes):
                tg.start_soon(one, sb)
    sandboxes.clear()
    return time.perf_counter() - t0


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


async def incr(sb: Sandbox, name: str) -> int:
    r = await sb.call_tool("counter_incr", {"name": name})
    expect(r.ok, f"counter_incr failed: {r}")
    return r.output["value"]  # type: ignore[union-attr]


# ------------------------------------------------------------------ phases
async def bench_fresh_start(cfg: SandboxConfig, quick: bool) -> dict[str, Any]:
    n = count("fresh_start", quick)
    starts, closes = [], []
    with progress() as p:
        task = p.add_task("fresh start", total=n)
        for _ in range(n):
            t0 = time.perf_counter()
            sb = await open_sandbox(cfg)
            try:
                await sb.ping()
                starts.append(time.perf_counter() - t0)
            finally:
                t1 = time.perf_counter()
                await sb.close()
                closes.append(time.perf_counter() - t1)
            p.advance(task)
    return {**summary("fresh_start", starts, with_p99=False), "close_p50_ms": pct(closes, 50)}


async def bench_tool_calls(cfg: SandboxConfig, quick: bool) -> dict[str, Any]:
    n, warm = count("tool_call", quick), count("tool_warmup", quick)
    out: dict[str, Any] = {}
    async with await open_sandbox(cfg) as sb:
        await sb.ping()
        for _ in range(warm):
            await incr(sb, "bench")
        lat = []
        value = warm
        with progress() as p:
            task = p.add_task("call_tool counter_incr", total=n)
            for _ in range(n):
                t0 = time.perf_counter()
                r = await sb.call_tool("counter_incr", {"name": "bench"})
                lat.append(time.perf_counter() - t0)
                expect(r.ok, f"counter_incr failed: {r}")
                value = r.output["value"]  # type: ignore[union-attr]
                p.advance(task)
        expect(value == warm + n, f"counter ended at {value}, expected {warm + n}: state was lost")
        out.update(summary("tool_call", lat))

        lat = []
        with progress() as p:
            task = p.add_task("exec 'true'", total=count("exec", quick))
            for _ in range(count("exec", quick)):
                t0 = time.perf_counter()
                r = await sb.exec("true", timeout=10)
                lat.append(time.perf_counter() - t0)
                expect(r.exit_code == 0, f"exec true failed: {r}")
                p.advance(task)
        out.update(summary("exec", lat))

        lat = []
        with progress() as p:
            task = p.add_task("exec python3 -c pass", total=count("spawn_exec", quick))
            for _ in range(count("spawn_exec", quick)):
                t0 = time.perf_counter()
                r = await sb.exec(["python3", "-c", "pass"], timeout=10)
                lat.append(time.perf_counter() - t0)
                expect(r.exit_code == 0, f"exec python3 failed: {r}")
                p.advance(task)
        out.update(summary("spawn_exec", lat))
    return out


async def bench_docker_exec(cfg: SandboxConfig, quick: bool) -> dict[str, Any]:
    from sandboxes.docker_client import client

    n = count("docker_exec", quick)
    api = (await anyio.to_thread.run_sync(client)).api
    async with await open_sandbox(cfg) as sb:
        cid = sb.container_id  # type: ignore[attr-defined]

        def loop(p: Progress, task: Any) -> list[float]:
            lat = []
            for i in range(-3, n):  # 3 warm-up runs
                t0 = time.perf_counter()
                ex = api.exec_create(cid, ["python3", "-c", DOCKER_EXEC_CODE], stdout=True, stderr=True)
                raw = api.exec_start(ex["Id"])
                dt = time.perf_counter() - t0
                got = json.loads(raw.decode().strip().splitlines()[-1])
                expect(got["value"] == i + 4, f"docker exec baseline returned {raw[:200]!r}")
                if i >= 0:
                    lat.append(dt)
                    p.advance(task)
            return lat

        with progress() as p:
            task = p.add_task("docker exec python3 -c (baseline)", total=n)
            lat = await anyio.to_thread.run_sync(loop, p, task)
    return summary("docker_exec", lat)


async def bench_reset(cfg: SandboxConfig, quick: bool) -> dict[str, Any]:
    n = count("reset", quick)
    lat = []
    blob = os.urandom(2048).hex()  # 4 KiB of text
    async with await open_sandbox(cfg) as sb:
        with progress() as p:
            task = p.add_task("reset", total=n)
            for i in range(n):
                for _ in range(3):
                    await incr(sb, "r")
                await sb.write_file("bench/data.txt", blob)
                t0 = time.perf_counter()
                await sb.reset()
                lat.append(time.perf_counter() - t0)
                v = (await sb.call_tool("counter_get", {"name": "r"})).output["value"]  # type: ignore[union-attr]
                expect(v == 0, f"counter is {v} after reset, expected 0")
                if i in (0, n - 1):
                    try:
                        await sb.read_file("bench/data.txt")
                        raise AssertionError("a file written before reset survived it")
                    except SandboxFileNotFound:
                        pass
                p.advance(task)
    return summary("reset", lat)


async def bench_without_isolation(cfg: SandboxConfig, quick: bool) -> dict[str, Any]:
    """The tool-call, exec and reset loops again with `Hardening(isolate_tool_server=False)`: the
    baseline, in the same run, of what keeping commands away from the tool server costs."""
    base = cfg.model_copy(update={"hardening": cfg.hardening.model_copy(update={"isolate_tool_server": False})})
    res = {**await bench_tool_calls(base, quick), **await bench_reset(base, quick)}
    return {f"no_isolation_{k}": v for k, v in res.items() if k.endswith(("_p50_ms", "_p99_ms"))}


async def bench_acquire(cfg: SandboxConfig, quick: bool) -> dict[str, Any]:
    n = count("acquire", quick)
    acq, rel = [], []
    t0 = time.perf_counter()
    # reap_on_start=False: a benchmark must not remove anybody else's sandboxes.
    async with SandboxPool(cfg, size=2, max_concurrency=2, health_interval_s=3600, reap_on_start=False) as pool:
        fill = time.perf_counter() - t0
        with progress() as p:
            task = p.add_task("pool acquire/release", total=n)
            for _ in range(n):
                t0 = time.perf_counter()
                sb = await pool.acquire(timeout=30)
                acq.append(time.perf_counter() - t0)
                try:
                    v = await incr(sb, "pool")
                    expect(v == 1, f"pooled sandbox was not clean: counter_incr gave {v}")
                finally:
                    t1 = time.perf_counter()
                    await pool.release(sb)
                    rel.append(time.perf_counter() - t1)
                p.advance(task)
        stats = pool.stats
        out = {
            **summary("acquire", acq),
            "release_p50_ms": pct(rel, 50),
            "pool_fill_s": round(fill, 3),
            "pool_on_demand_starts": stats.on_demand,
            "pool_replaced": stats.replaced,
            "pool_reset_failures": stats.reset_failures,
        }
    return out


async def bench_concurrency(
    cfg: SandboxConfig, backend: str, target: int, start_concurrency: int, deadline_s: float
) -> dict[str, Any]:
    live: list[Sandbox] = []
    errors: list[str] = []
    stop = False
    limiter = anyio.CapacityLimiter(start_concurrency)
    out: dict[str, Any] = {"max_concurrent_target": target, "start_concurrency": start_concurrency}
    try:
        with progress() as p:
            task = p.add_task(f"start {target} sandboxes", total=target)
            t0 = time.perf_counter()
            give_up_at = t0 + deadline_s

            async def start_one(i: int) -> None:
                nonlocal stop
                async with limiter:
                    if stop:
                        return
                    if time.perf_counter() > give_up_at:
                        if not stop:
                            errors.append(f"gave up: {deadline_s:.0f}s start deadline passed with {len(live)} up")
                        stop = True
                        return
                    try:
                        sb = await open_sandbox(cfg)
                    except Exception as e:  # noqa: BLE001 - record what limited us, stop launching
                        errors.append(f"start #{i}: {type(e).__name__}: {e}")
                        stop = True
                        return
                    live.append(sb)
                    p.advance(task)

            async with anyio.create_task_group() as tg:
                for i in range(target):
                    tg.start_soon(start_one, i)
            wall = time.perf_counter() - t0
        out["concurrent_start_wall_s"] = round(wall, 3)
        out["started"] = len(live)

        # Every sandbox must answer, and hold its own state: counter_incr is 1 in each.
        ok = 0
        vlim = anyio.CapacityLimiter(32)

        async def verify(sb: Sandbox) -> None:
            nonlocal ok
            async with vlim:
                try:
                    await sb.ping()
                    v = await incr(sb, "iso")
                    if v != 1:
                        errors.append(f"sandbox {sb.id}: counter_incr gave {v}, expected 1 (state not isolated)")
                        return
                    ok += 1
                except (SandboxError, AssertionError) as e:
                    errors.append(f"verify {sb.id}: {type(e).__name__}: {e}")

        t1 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for sb in live:
                tg.start_soon(verify, sb)
        out["verify_wall_s"] = round(time.perf_counter() - t1, 3)
        out["max_concurrent"] = ok

        if live:
            try:
                out.update(await anyio.to_thread.run_sync(measure_memory, list(live), backend))
            except Exception as e:  # noqa: BLE001
                out["rss_per_sandbox_mb"] = None
                errors.append(f"memory measurement: {type(e).__name__}: {e}")
            # Still all there after the memory walk?
            alive = 0
            for sb in live:
                try:
                    await sb.ping()
                    alive += 1
                except SandboxError:
                    pass
            out["alive_after_measurement"] = alive
    finally:
        n_live = len(live)
        out["close_all_wall_s"] = round(await close_all(live), 3)
        out["closed"] = n_live
        out["max_concurrent_error"] = "; ".join(errors[:5]) if errors else None
    return out


async def leftovers(backend: str) -> dict[str, Any]:
    """Sandboxes of this process still around after everything was closed (should be none)."""
    me = os.getpid()
    if backend == "docker":
        from sandboxes.docker_client import client
        from sandboxes.owner import PID_LABEL

        api = client().api

        def ours() -> list[dict]:
            return api.containers(all=True, filters={"label": f"{PID_LABEL}={me}"})

        found = await anyio.to_thread.run_sync(ours)
        deadline = time.monotonic() + 15
        while found and time.monotonic() < deadline:  # auto_remove is asynchronous
            await anyio.sleep(0.5)
            found = await anyio.to_thread.run_sync(ours)
        return {"leftover_containers": len(found), "leftover_ids": [c["Id"][:12] for c in found][:10]}
    await anyio.sleep(0.2)
    cgroups = [
        str(d)
        for root in (
            "/sys/fs/cgroup/tooldojo",
            "/sys/fs/cgroup/memory/tooldojo",
            "/sys/fs/cgroup/pids/tooldojo",
            "/sys/fs/cgroup/cpu/tooldojo",
        )
        if Path(root).is_dir()
        for d in Path(root).iterdir()
        if d.is_dir() and d.name.startswith(f"{me}-")
    ]
    procs = [p for p in proc_tree(me, children_map()) if p != me]
    return {"leftover_cgroups": len(cgroups), "leftover_processes": len(procs)}


# -------------------------------------------------------------------- main
async def run(args: argparse.Namespace, result: dict[str, Any]) -> None:
    backend, why = await anyio.to_thread.run_sync(resolve_backend, args.backend)
    result["backend"] = backend
    result["backend_reason"] = why
    cfg = SandboxConfig(backend=backend)
    quick = args.quick
    console.print(f"[bold]tooldojo sandbox bench[/] backend={backend} ({why}) mode={'quick' if quick else 'full'}")
    phase_s: dict[str, float] = {}
    errors: dict[str, str] = {}
    result["phase_s"] = phase_s
    result["errors"] = errors

    async def phase(name: str, fn: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        t0 = time.perf_counter()
        try:
            res = await fn()
            result.update(res)
            shown = {
                k: v
                for k, v in res.items()
                if k.endswith(("_p50_ms", "_p99_ms"))
                or k in ("max_concurrent", "concurrent_start_wall_s", "rss_per_sandbox_mb", "max_concurrent_error")
            }
            console.print(f"[green]✓[/] {name}: {shown}")
        except Exception as e:  # noqa: BLE001
            errors[name] = f"{type(e).__name__}: {e}"
            console.print(f"[red]✗ {name}: {type(e).__name__}: {e}")
        finally:
            phase_s[name] = round(time.perf_counter() - t0, 2)

    await phase("fresh_start", lambda: bench_fresh_start(cfg, quick))
    await phase("tool_calls", lambda: bench_tool_calls(cfg, quick))
    if backend == "docker":
        await phase("docker_exec", lambda: bench_docker_exec(cfg, quick))
    else:
        result["docker_exec_p50_ms"] = None
    await phase("reset", lambda: bench_reset(cfg, quick))
    if args.isolation_baseline:
        await phase("no_isolation", lambda: bench_without_isolation(cfg, quick))
    await phase("acquire", lambda: bench_acquire(cfg, quick))
    target = args.max_sandboxes if args.max_sandboxes is not None else count("max_sandboxes", quick)
    start_conc = args.start_concurrency or 8
    deadline = args.start_deadline or (25.0 if quick else 480.0)
    await phase("concurrency", lambda: bench_concurrency(cfg, backend, target, start_conc, deadline))
    result.update(await leftovers(backend))


def finish(result: dict[str, Any], quick: bool) -> None:
    """Derived numbers, targets and verdicts, filled in place (missing inputs give null)."""
    g = result.get
    tc, de, se = g("tool_call_p50_ms"), g("docker_exec_p50_ms"), g("spawn_exec_p50_ms")
    result["speedup_vs_docker_exec"] = round(de / tc, 1) if de and tc else None
    result["speedup_vs_spawn_exec"] = round(se / tc, 1) if se and tc else None
    for k in ("tool_call_p50_ms", "exec_p50_ms", "spawn_exec_p50_ms", "reset_p50_ms"):
        on, off = g(k), g(f"no_isolation_{k}")
        result[f"isolation_cost_{k}"] = round(on - off, 3) if on is not None and off is not None else None
    for key in (
        "tool_call_p50_ms",
        "tool_call_p99_ms",
        "docker_exec_p50_ms",
        "exec_p50_ms",
        "spawn_exec_p50_ms",
        "reset_p50_ms",
        "acquire_p50_ms",
        "fresh_start_p50_ms",
        "max_concurrent",
        "concurrent_start_wall_s",
        "rss_per_sandbox_mb",
        "max_concurrent_error",
    ):
        result.setdefault(key, None)

    def le(v: Any, t: float) -> bool | None:
        return None if v is None else v <= t

    def ge(v: Any, t: float) -> bool | None:
        return None if v is None else v >= t

    result["targets"] = {
        "tool_call_p50_ms_max": TARGETS["tool_call_p50_ms"],
        "isolated_tool_call_p50_ms_max": TARGETS["isolated_tool_call_p50_ms"],
        "speedup_vs_docker_exec_min": TARGETS["speedup_vs_docker_exec"],
        "reset_p50_ms_max": TARGETS["reset_p50_ms"],
        "acquire_p50_ms_max": TARGETS["acquire_p50_ms"],
        "max_concurrent_min": TARGETS["max_concurrent"],
    }
    result["meets_targets"] = {
        "tool_call_p50_ms": le(g("tool_call_p50_ms"), TARGETS["tool_call_p50_ms"]),
        "isolated_tool_call_p50_ms": le(g("tool_call_p50_ms"), TARGETS["isolated_tool_call_p50_ms"]),
        "speedup_vs_docker_exec": ge(g("speedup_vs_docker_exec"), TARGETS["speedup_vs_docker_exec"]),
        "reset_p50_ms": le(g("reset_p50_ms"), TARGETS["reset_p50_ms"]),
        "acquire_p50_ms": le(g("acquire_p50_ms"), TARGETS["acquire_p50_ms"]),
        "max_concurrent": None if quick else ge(g("max_concurrent"), TARGETS["max_concurrent"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", choices=["auto", "docker", "local"], default="auto")
    ap.add_argument("--quick", action="store_true", help="fewer samples and 24 sandboxes; under a minute")
    ap.add_argument(
        "--max-sandboxes",
        type=int,
        default=None,
        metavar="N",
        help="live sandboxes to hold at once (default 200 full, 24 quick)",
    )
    ap.add_argument(
        "--start-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="sandboxes starting at the same time in the density test (default 8)",
    )
    ap.add_argument(
        "--start-deadline",
        type=float,
        default=None,
        metavar="S",
        help="stop launching sandboxes after S seconds (default 25 quick, 480 full)",
    )
    ap.add_argument("--no-isolation-baseline", dest="isolation_baseline", action="store_false",
                    help="skip the tool-call, exec and reset loops without the tool-server separation")
    args = ap.parse_args()
    if args.max_sandboxes is not None and args.max_sandboxes < 1:
        ap.error("--max-sandboxes must be >= 1")

    result: dict[str, Any] = {
        "backend": None,
        "quick": bool(args.quick),
        "machine": {
            "cpus": os.cpu_count(),
            "mem_gb": mem_total_gb(),
            "kernel": platform.release(),
            "python": platform.python_version(),
        },
    }
    t0 = time.perf_counter()
    rc = 0
    try:
        anyio.run(run, args, result)
    except KeyboardInterrupt:
        result["error"] = "interrupted"
        rc = 130
    except Exception as e:  # noqa: BLE001
        result["error"] = f"{type(e).__name__}: {e}"
        rc = 1
    result["wall_s"] = round(time.perf_counter() - t0, 2)
    finish(result, args.quick)
    if result.get("errors"):
        rc = rc or 1
    _common.emit(result, ("backend", "quick", "machine"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
