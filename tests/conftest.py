"""Shared fixtures: which sandbox backends work here, and fresh sandboxes on each.

Set TOOLDOJO_REQUIRE_BACKENDS=docker,local (scripts/test.sh does) to turn a
missing backend into a failure instead of a skip.
"""

from __future__ import annotations

import functools
import os

import pytest

from sandboxes import SandboxConfig, open_sandbox


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@functools.cache
def backend_status(backend: str) -> tuple[bool, str]:
    from sandboxes import docker_backend, local_backend
    from sandboxes.image import image_exists, resolve_image

    if backend == "docker":
        ok, why = docker_backend.engine_available()
        if ok and not image_exists(resolve_image("tooldojo-sandbox")):
            return False, "sandbox image missing: run `dojo sandbox build-image`"
        return ok, why
    return local_backend.bwrap_available()


def require(backend: str) -> None:
    ok, why = backend_status(backend)
    if ok:
        return
    required = [b for b in os.environ.get("TOOLDOJO_REQUIRE_BACKENDS", "").split(",") if b]
    if backend in required:
        pytest.fail(f"backend {backend} is required here but does not work: {why}")
    pytest.skip(f"backend {backend} unavailable: {why}")


@pytest.fixture(params=["docker", "local"])
def backend(request) -> str:
    require(request.param)
    return request.param


@pytest.fixture
async def sb(backend):
    sandbox = await open_sandbox(SandboxConfig(backend=backend))
    try:
        yield sandbox
    finally:
        await sandbox.close()
