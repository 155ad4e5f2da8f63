"""Pick a backend and start sandboxes on it: `auto` means docker when an engine answers, else local
(never kubernetes).

This module sits above the backends: each backend imports the API's types (sandboxes/api.py) and
nothing here, and only this module (and the pool above it) knows which backends exist."""

from __future__ import annotations

import functools
import logging
from typing import Any

from sandboxes.api import Sandbox
from sandboxes.errors import BackendUnavailable
from sandboxes.models import Backend, BackendChoice, BackendReport, SandboxConfig

log = logging.getLogger("tooldojo.sandboxes")


@functools.lru_cache(maxsize=4)
def resolve_backend(choice: BackendChoice) -> tuple[Backend, str]:
    """The concrete backend for `choice`, and a sentence saying why."""
    from sandboxes import docker_backend, local_backend

    if choice == "docker":
        return "docker", "requested"
    if choice == "local":
        return "local", "requested"
    if choice == "kubernetes":
        return "kubernetes", "requested"
    ok, why = docker_backend.engine_available()
    if ok:
        return "docker", f"auto: {why}"
    ok_local, why_local = local_backend.bwrap_available()
    if ok_local:
        return "local", f"auto: no Docker engine ({why}); using {why_local}"
    raise BackendUnavailable(f"no sandbox backend works here: docker: {why}; local: {why_local}")


async def start_sandbox(cfg: SandboxConfig) -> Sandbox:
    from sandboxes import docker_backend, local_backend

    backend, why = resolve_backend(cfg.backend)
    if cfg.backend == "auto":
        log.info("sandbox backend %s (%s)", backend, why)
    if backend == "docker":
        return await docker_backend.start(cfg)
    if backend == "kubernetes":
        from sandboxes import kubernetes_backend

        return await kubernetes_backend.start(cfg)
    return await local_backend.start(cfg)


async def open_sandbox(config: SandboxConfig | None = None, **overrides: Any) -> Sandbox:
    """Start a sandbox with the configured backend (`auto`: docker if an engine answers, else local)."""
    cfg = config or SandboxConfig()
    if overrides:
        cfg = cfg.model_copy(update=overrides)
    return await start_sandbox(cfg)


def doctor() -> list[BackendReport]:
    """Which backends work on this machine, and why not — by actually starting one."""
    import anyio

    from sandboxes import docker_backend, local_backend
    from sandboxes.image import image_exists, resolve_image

    reports = []
    ok, why = docker_backend.engine_available()
    if ok:
        tag = resolve_image("tooldojo-sandbox")
        if not image_exists(tag):
            ok, why = False, f"{why}, but image {tag} is missing: run `dojo sandbox build-image`"
    if ok:
        ok, why = _try(anyio, "docker", why)
    reports.append(BackendReport(backend="docker", works=ok, detail=why))
    ok, why = local_backend.bwrap_available()
    if ok:
        ok, why = _try(anyio, "local", why)
    reports.append(BackendReport(backend="local", works=ok, detail=why))
    return reports


def _try(anyio, backend: Backend, why: str) -> tuple[bool, str]:
    import time

    async def probe() -> float:
        t = time.perf_counter()
        async with await start_sandbox(SandboxConfig(backend=backend)) as sb:
            started = time.perf_counter() - t
            r = await sb.exec("id -u && (cat /sys/class/net/*/operstate 2>/dev/null | wc -l)", timeout=10)
            if r.exit_code != 0 or r.stdout.split()[0] != "65534":
                raise RuntimeError(f"probe command failed: {r}")
            res = await sb.call_tool("counter_incr", {"name": "doctor"})
            if not res.ok:
                raise RuntimeError(f"tool call failed: {res}")
        return started

    try:
        started = anyio.run(probe)
    except Exception as e:
        return False, f"{why}; but a sandbox failed: {type(e).__name__}: {e}"
    return True, f"{why}; sandbox up in {started * 1000:.0f} ms"
