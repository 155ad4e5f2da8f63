"""A warm pool of sandboxes for rollouts.

    async with SandboxPool(SandboxConfig(), size=16) as pool:
        async with pool.sandbox() as sb:      # acquire() ... release()
            await sb.call_tool(...)

Sandboxes are reset when released (stray processes killed, scratch emptied,
tool state back to its initial value), so `acquire()` hands out a clean one
after a sub-millisecond health ping. Dead sandboxes are dropped and replaced by
the pool's own task group; when the idle set is empty, acquire starts one on
demand rather than wait. Start-up first reaps sandboxes left by dead owners.
"""

from __future__ import annotations

import functools
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup

from sandboxes.api import Sandbox
from sandboxes.backends import resolve_backend, start_sandbox
from sandboxes.errors import PoolClosed, PoolExhausted, SandboxError
from sandboxes.models import DomainBundle, SandboxConfig

log = logging.getLogger("tooldojo.sandboxes.pool")


class PoolStats:
    def __init__(self) -> None:
        self.started = 0
        self.replaced = 0
        self.reset_failures = 0
        self.on_demand = 0
        self.acquired = 0
        self.gc_removed = 0


class SandboxPool:
    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        size: int = 4,
        max_concurrency: int | None = None,
        domain: DomainBundle | None = None,
        start_concurrency: int = 8,
        health_interval_s: float = 30.0,
        reap_on_start: bool = True,
    ):
        if size < 0:
            raise ValueError("pool size must be >= 0")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.config = config or SandboxConfig()
        self.size = size
        self.max_concurrency = max_concurrency if max_concurrency is not None else max(size, 1)
        self.domain = domain
        self.health_interval_s = health_interval_s
        self.reap_on_start = reap_on_start
        self.stats = PoolStats()
        self._idle: deque[Sandbox] = deque()
        self._leased: set[Sandbox] = set()
        self._slots = anyio.Semaphore(self.max_concurrency)
        self._start_limit = anyio.CapacityLimiter(start_concurrency)
        self._tg: TaskGroup | None = None
        self._running = False
        self.backend: str | None = None

    # ------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> SandboxPool:
        backend, why = resolve_backend(self.config.backend)
        self.backend = backend
        self.config = self.config.model_copy(update={"backend": backend})
        log.info("sandbox pool: backend %s (%s)", backend, why)
        if self.reap_on_start:
            reap = functools.partial(reap_orphans, backend, config=self.config)
            self.stats.gc_removed = len(await anyio.to_thread.run_sync(reap))
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._running = True
        try:
            async with anyio.create_task_group() as fill:
                for _ in range(self.size):
                    fill.start_soon(self._add_one)
        except BaseException as e:
            await self.aclose()
            raise first_error(e) from None
        self._tg.start_soon(self._health_loop)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._tg is None:
            return
        self._running = False
        tg, self._tg = self._tg, None
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as closer:
                for sb in list(self._idle) + list(self._leased):
                    closer.start_soon(sb.close)
        self._idle.clear()
        self._leased.clear()

    # ----------------------------------------------------------- internals
    async def _new(self) -> Sandbox:
        async with self._start_limit:
            sb = await start_sandbox(self.config)
        try:
            if self.domain is not None:
                await sb.load_domain(self.domain)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await sb.close()
            raise
        self.stats.started += 1
        return sb

    async def _add_one(self) -> None:
        sb = await self._new()
        if self._running:
            self._idle.append(sb)
        else:
            await sb.close()

    async def _replace(self) -> None:
        try:
            await self._add_one()
            self.stats.replaced += 1
        except SandboxError as e:
            log.warning("could not replace a dead sandbox: %s", e)

    async def _health_loop(self) -> None:
        while True:
            await anyio.sleep(self.health_interval_s)
            await self.check_health()

    async def check_health(self) -> int:
        """Ping every idle sandbox; replace the dead ones. Returns how many were replaced."""
        dead = []
        for sb in list(self._idle):
            try:
                await sb.ping()
            except SandboxError:
                dead.append(sb)
        for sb in dead:
            if sb in self._idle:
                self._idle.remove(sb)
            await sb.close()
            self._spawn_replacement()
        return len(dead)

    def _spawn_replacement(self) -> None:
        if self._running and self._tg is not None and len(self._idle) + len(self._leased) < self.size:
            self._tg.start_soon(self._replace)

    # ------------------------------------------------------------ public API
    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def leased(self) -> int:
        return len(self._leased)

    async def acquire(self, timeout: float | None = None) -> Sandbox:
        """A healthy, reset sandbox. Waits while `max_concurrency` are leased."""
        if not self._running:
            raise PoolClosed("the pool is not running; use `async with SandboxPool(...) as pool`")
        try:
            with anyio.fail_after(timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise PoolExhausted(
                f"no sandbox free within {timeout}s ({self.leased} leased, max_concurrency={self.max_concurrency}); "
                "release sandboxes or raise max_concurrency"
            ) from None
        try:
            while self._idle:
                sb = self._idle.popleft()
                try:
                    await sb.ping()
                except SandboxError:
                    await sb.close()
                    self._spawn_replacement()
                    continue
                break
            else:
                self.stats.on_demand += 1
                sb = await self._new()
        except BaseException:
            self._slots.release()
            raise
        self._leased.add(sb)
        self.stats.acquired += 1
        return sb

    async def release(self, sb: Sandbox, *, state: Any = None) -> None:
        """Give a sandbox back: reset and returned to the idle set, or replaced if it is broken."""
        if sb not in self._leased:
            if not self._running and self._tg is None:
                await sb.close()  # the pool closed while this lease was out: nothing to return it to
                return
            raise ValueError(f"sandbox {sb.id} is not leased from this pool")
        self._leased.discard(sb)
        try:
            with anyio.CancelScope(shield=True):
                ok = False
                if sb.alive and self._running:
                    try:
                        await sb.reset(state)
                        ok = True
                    except SandboxError as e:
                        self.stats.reset_failures += 1
                        log.info("reset of sandbox %s failed (%s); replacing it", sb.id, e)
                if ok:
                    self._idle.append(sb)
                else:
                    await sb.close()
                    self._spawn_replacement()
        finally:
            self._slots.release()

    @asynccontextmanager
    async def sandbox(self, timeout: float | None = None) -> AsyncIterator[Sandbox]:
        sb = await self.acquire(timeout)
        try:
            yield sb
        finally:
            await self.release(sb)


def first_error(e: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, so callers see a typed error."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def reap_orphans(backend: str, everything: bool = False, config: SandboxConfig | None = None) -> list[str]:
    """Remove sandboxes (containers, cgroups or pods) whose owning process has died."""
    from sandboxes import docker_backend, local_backend

    if backend == "docker":
        return docker_backend.gc(everything)
    if backend == "kubernetes":
        from sandboxes import kubernetes_backend

        return kubernetes_backend.gc(everything, config)
    return local_backend.gc(everything)
