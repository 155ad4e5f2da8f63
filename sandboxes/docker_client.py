"""The one docker SDK client every docker user here shares (the backend, the image builder, the
benches): one connection pool, one clear error when no engine answers."""

from __future__ import annotations

import functools

from sandboxes.errors import BackendUnavailable

__all__ = ["client"]


@functools.lru_cache(maxsize=1)
def client():
    """The shared docker SDK client (a connection pool big enough for parallel starts)."""
    import docker

    try:
        c = docker.from_env(max_pool_size=64, timeout=120)
        c.ping()
    except Exception as e:
        raise BackendUnavailable(
            f"no Docker engine answers ({type(e).__name__}: {str(e)[:160]}); start dockerd "
            "(scripts/setup.sh does) or use backend='local'"
        ) from None
    return c
