"""Typed errors of the sandbox layer. Each message says what to do next."""

from __future__ import annotations


class SandboxError(Exception):
    """Base class: anything the sandbox layer raises."""


class BackendUnavailable(SandboxError):
    """The requested backend cannot run on this machine (no engine, no bwrap...)."""


class ImageNotFound(SandboxError):
    """The sandbox image is missing from the Docker engine."""


class SandboxStartError(SandboxError):
    """The sandbox process or container failed to start."""


class SandboxDead(SandboxError):
    """The sandbox's tool server is gone (killed, crashed, OOM, container removed)."""


class SandboxTimeout(SandboxDead):
    """The tool server did not answer in time; the sandbox was killed."""


class ProtocolError(SandboxDead):
    """The tool server sent something that is not a valid response."""


class RequestTooLarge(SandboxError, ValueError):
    """A request (tool arguments, file data, stdin) exceeds the configured cap."""


class InvalidRequest(SandboxError, ValueError):
    """A request that cannot be sent as JSON (not serialisable, or nested too deeply); nothing was sent."""


class PathOutsideSandbox(SandboxError, ValueError):
    """A file path escapes the sandbox's writable scratch directories."""


class SandboxFileNotFound(SandboxError, FileNotFoundError):
    """read_file of a path that does not exist."""


class RequestFailed(SandboxError):
    """The tool server rejected a request; `type` is its error type."""

    def __init__(self, type_: str, message: str):
        super().__init__(f"{type_}: {message}")
        self.type = type_
        self.message = message


class PoolClosed(SandboxError):
    """acquire() on a pool that is not running."""


class PoolExhausted(SandboxError, TimeoutError):
    """acquire() timed out waiting for a free sandbox."""
