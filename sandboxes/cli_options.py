"""The bounds of every numeric and URL option of the `dojo` CLI, in one table.

A count of 10**20 sandboxes, port 99999999 or a timeout of nan is refused as a usage error (exit 2,
before any work) and the bound shows in ``--help``; a URL that is not http(s)://HOST... is refused
the same way, before a client library turns it into a warning or a hang. Each command builds its
options with these helpers, so a new option gets the same checks (tests/test_bad_inputs.py walks
every command and fails on a numeric option without an upper bound).
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlsplit

import typer

# Upper bounds, chosen far above any real use on one machine and far below what exhausts one.
LIMITS: dict[str, int | float] = {
    "sandboxes": 256,        # sandboxes (containers or bubblewrap jails) at once
    "concurrency": 1024,     # requests, episodes or cases in flight
    "items": 1_000_000,      # tools / tasks to synthesise
    "repeat": 1000,          # runs per eval case
    "candidates": 64,        # LLM user simulator: candidate replies per turn
    "tokens": 1_000_000,     # tokens per model answer
    "turns": 1000,           # agent turns per episode
    "rounds": 100,           # repair rounds, new domains per category, tools per domain
    "lines": 1_000_000,      # log lines
    "node": 4096,            # node rank of a multi-node job
    "memory_mb": 1_048_576,  # 1 TiB
    "pids": 1_000_000,
    "seed": 2**32 - 1,       # numpy and torch take any seed below this
    "timeout_s": 86_400.0,   # one day
    "temperature": 2.0,      # OpenAI-compatible servers accept 0..2
    "data_mb": 65_536.0,     # an imported domain's database (64 GiB)
}
MAX_PORT = 65535


def count_option(default: Any, *flags: str, limit: str, min: int = 1, help: str, **kw: Any) -> Any:
    """An int option between `min` and ``LIMITS[limit]``."""
    return typer.Option(default, *flags, min=min, max=LIMITS[limit], help=help, **kw)


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def float_option(default: Any, *flags: str, limit: str, min: float = 0.0, help: str, **kw: Any) -> Any:
    """A finite float option between `min` and ``LIMITS[limit]``."""
    return typer.Option(default, *flags, min=min, max=LIMITS[limit], callback=_finite, help=help, **kw)


def _positive(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value} is not a positive number of seconds")
    return value


def timeout_option(default: Any, *flags: str, help: str, **kw: Any) -> Any:
    """Seconds: above 0, at most ``LIMITS["timeout_s"]``."""
    return typer.Option(default, *flags, max=LIMITS["timeout_s"], callback=_positive, help=help, **kw)


def port_option(default: int, *flags: str, any_free: bool = False, help: str, **kw: Any) -> Any:
    """A TCP port, 1..65535 (0 as well with `any_free`: the OS picks one)."""
    return typer.Option(default, *flags, min=0 if any_free else 1, max=MAX_PORT, help=help, **kw)


def check_url(value: str | None) -> str | None:
    """`value` when it is an http(s) URL with a host (None passes); else a usage error."""
    if value is None:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 -- raises ValueError on a port out of range or not a number
    except ValueError as e:
        raise typer.BadParameter(f"{value!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise typer.BadParameter(f"{value!r} is not an http(s)://HOST[:PORT][/PATH] URL")
    return value


def url_option(default: Any, *flags: str, help: str, **kw: Any) -> Any:
    """An http(s) URL option, checked before any client sees it."""
    return typer.Option(default, *flags, callback=check_url, help=help, **kw)


def split_names(value: str | None, flag: str) -> list[str] | None:
    """A comma-separated option (``--domains a,b``) as a list; None when not given. A value that names
    nothing (``","``) is an error, not "all"."""
    if value is None:
        return None
    names = list(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    if not names:
        raise ValueError(f"{flag} {value!r} names nothing; leave {flag} out for all")
    return names
