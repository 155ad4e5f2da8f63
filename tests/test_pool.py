"""The warm pool: clean hand-outs, replacement of dead sandboxes, limits, reaping."""

from __future__ import annotations

import os
import signal

import anyio
import pytest

from sandboxes import DomainBundle, PoolClosed, PoolExhausted, SandboxConfig, SandboxDead, SandboxPool, SyncSandbox

COUNTER_DOMAIN = DomainBundle(
    name="tally",
    source="def add(state, n: int):\n    state['total'] += n\n    return {'total': state['total']}\nTOOLS = [add]\n",
    state={"total": 100},
)


async def test_acquire_hands_out_reset_sandboxes(backend):
    async with SandboxPool(SandboxConfig(backend=backend), size=2, max_concurrency=2) as pool:
        assert pool.idle == 2
        sb = await pool.acquire()
        await sb.call_tool("kv_set", {"key": "leak", "value": "x"})
        await sb.write_file("leak.txt", "x")
        await sb.exec("sleep 60 &", timeout=5)
        await pool.release(sb)
        # Whichever sandbox comes next, no trace of the previous lease remains.
        for _ in range(3):
            async with pool.sandbox() as again:
                assert (await again.call_tool("kv_list", {})).output["keys"] == []
                r = await again.exec("ls /workspace; cat /proc/[0-9]*/cmdline | tr '\\0' ' '", timeout=5)
                assert "leak.txt" not in r.stdout and "sleep" not in r.stdout
        assert pool.stats.started == 2 and pool.stats.on_demand == 0


async def test_pool_with_domain_resets_to_its_seed_state(backend):
    async with SandboxPool(SandboxConfig(backend=backend), size=1, domain=COUNTER_DOMAIN) as pool:
        async with pool.sandbox() as sb:
            assert (await sb.call_tool("add", {"n": 5})).output == {"total": 105}
        async with pool.sandbox() as sb:
            assert (await sb.call_tool("add", {"n": 1})).output == {"total": 101}


async def test_dead_sandboxes_are_replaced(backend):
    async with SandboxPool(SandboxConfig(backend=backend), size=2, health_interval_s=3600) as pool:
        victims = list(pool._idle)
        for v in victims:
            os.kill(v.host_pid(), signal.SIGKILL)
        await anyio.sleep(0.3)
        sb = await pool.acquire()  # skips the dead ones, starts one on demand
        assert sb not in victims
        assert (await sb.call_tool("counter_incr", {"name": "x"})).ok
        await pool.release(sb)
        with anyio.fail_after(30):
            while pool.idle < 2:  # the pool's task group refills it
                await anyio.sleep(0.05)
        assert pool.stats.replaced >= 1 or pool.stats.on_demand >= 1
        # A sandbox that dies while leased is replaced on release, not handed out again.
        sb = await pool.acquire()
        os.kill(sb.host_pid(), signal.SIGKILL)
        await anyio.sleep(0.3)
        with pytest.raises(SandboxDead):
            await sb.call_tool("counter_get", {"name": "x"})
        await pool.release(sb)
        assert sb not in pool._idle
        assert await pool.check_health() == 0


async def test_concurrency_limit_and_exhaustion(backend):
    async with SandboxPool(SandboxConfig(backend=backend), size=1, max_concurrency=1) as pool:
        held = await pool.acquire()
        with pytest.raises(PoolExhausted, match="max_concurrency"):
            await pool.acquire(timeout=0.3)
        await pool.release(held)
        async with pool.sandbox(timeout=5):
            pass
        with pytest.raises(ValueError, match="not leased"):
            await pool.release(held)
    with pytest.raises(PoolClosed):
        await pool.acquire()


async def test_many_concurrent_episodes_share_a_small_pool(backend):
    results = []
    async with SandboxPool(SandboxConfig(backend=backend), size=4, max_concurrency=4) as pool:

        async def episode(i: int) -> None:
            async with pool.sandbox() as sb:
                for _ in range(i % 4 + 1):
                    await sb.call_tool("counter_incr", {"name": "steps"})
                results.append((i, (await sb.call_tool("counter_get", {"name": "steps"})).output["value"]))

        async with anyio.create_task_group() as tg:
            for i in range(24):
                tg.start_soon(episode, i)
        assert pool.stats.started == 4
    assert sorted(results) == [(i, i % 4 + 1) for i in range(24)]


def test_sync_wrapper(backend):
    with SyncSandbox(SandboxConfig(backend=backend)) as sb:
        assert sb.backend == backend
        assert sb.exec("echo sync").stdout == "sync\n"
        assert sb.call_tool("counter_incr", {"name": "s"}).output["value"] == 1
        sb.write_file("f.txt", "data")
        assert sb.read_file("f.txt") == b"data"
        snap = sb.snapshot()
        sb.call_tool("counter_incr", {"name": "s"})
        sb.restore(snap)
        assert sb.call_tool("counter_get", {"name": "s"}).output["value"] == 1
        assert sb.load_domain(COUNTER_DOMAIN) == ["add"]
        assert sb.call_tool("add", {"n": 1}).output == {"total": 101}


async def test_release_after_the_pool_closed_is_harmless(backend):
    pool = SandboxPool(SandboxConfig(backend=backend), size=1)
    async with pool:
        sb = await pool.acquire()
    assert not sb.alive  # aclose closed leased sandboxes too
    await pool.release(sb)  # an episode finishing late must not crash
