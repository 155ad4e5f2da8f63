"""`dojo sandbox ...`: doctor, build-image, demo, exec, ls, gc."""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from sandboxes.cli_options import count_option, timeout_option
from sandboxes.errors import SandboxError
from sandboxes.models import BackendChoice, Limits, SandboxConfig

app = typer.Typer(help="Hardened, stateful sandboxes for agent tools.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


class Terminated(KeyboardInterrupt):
    """SIGTERM turned into an interrupt (what Kubernetes and launchers send to stop a pod): handled like
    Ctrl-C (runs are recorded as interrupted) but the process exits 143 (128 + SIGTERM), not 130."""

    exit_code = 128 + 15


def interrupt_exit_code(e: KeyboardInterrupt) -> int:
    """The shell's convention: 128 + the signal's number (SIGINT 130, SIGTERM 143)."""
    return e.exit_code if isinstance(e, Terminated) else 130


def one_line_errors(fn: F) -> F:
    """CLI commands print a one-line error (no traceback) and exit non-zero on bad input."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                return fn(*args, **kwargs)
            except BaseExceptionGroup as eg:
                from sandboxes.pool import first_error

                raise first_error(eg) from None
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or e.title
            err_console.print(f"error: {where}: {first['msg']}", style="red", highlight=False, markup=False, soft_wrap=True)
        except (SandboxError, ValueError, OSError) as e:
            err_console.print(f"error: {e}", style="red", highlight=False, markup=False, soft_wrap=True)
        except KeyboardInterrupt as e:
            err_console.print("interrupted")
            raise typer.Exit(interrupt_exit_code(e)) from None
        raise typer.Exit(1)

    return wrapper  # type: ignore[return-value]


BackendOpt = typer.Option("auto", "--backend", "-b",
                          help="auto | docker | local | kubernetes (a cluster from TOOLDOJO_K8S_* / kubeconfig)")


def _config(backend: str, **limits: Any) -> SandboxConfig:
    return SandboxConfig(backend=backend, limits=Limits(**{k: v for k, v in limits.items() if v is not None}))


@app.command()
@one_line_errors
def doctor(json_out: bool = typer.Option(False, "--json", help="print the report as JSON")) -> None:
    """Report which sandbox backends work on this machine, and why not."""
    from sandboxes.backends import doctor as run_doctor

    reports = run_doctor()
    if json_out:
        print(json.dumps([r.model_dump() for r in reports]))
    else:
        table = Table(title="sandbox backends")
        table.add_column("backend")
        table.add_column("works")
        table.add_column("detail", overflow="fold")
        for r in reports:
            table.add_row(r.backend, "[green]yes[/]" if r.works else "[red]no[/]", r.detail)
        console.print(table)
    if not any(r.works for r in reports):
        raise typer.Exit(1)


@app.command("build-image")
@one_line_errors
def build_image_cmd(
    force: bool = typer.Option(False, help="rebuild even if present"),
    base: str = typer.Option(None, help="base image to build FROM (one your engine can pull); default: offline debootstrap"),
    rootfs_only: bool = typer.Option(False, help="only build the rootfs for the local backend (no Docker needed)"),
) -> None:
    """Build the sandbox image offline (debootstrap minbase + python3, docker import, tool server)."""
    from sandboxes.image import build_image, build_rootfs

    def log(msg: str) -> None:
        console.print(f"[dim]build-image:[/] {msg}", highlight=False)

    if rootfs_only:
        build_rootfs(log, force=force)
        return
    with console.status("building the sandbox image"):
        tag = build_image(log, force=force, base=base)
    console.print(f"[green]ready:[/] {tag}")


@app.command()
@one_line_errors
def gc(
    everything: bool = typer.Option(False, "--all", help="remove every tooldojo sandbox, live owners included"),
    kubernetes: bool = typer.Option(False, "--kubernetes", help="also reap sandbox pods and claims in the cluster "
                                                                 "(namespace and cluster from TOOLDOJO_K8S_* / kubeconfig)"),
) -> None:
    """Remove sandboxes left behind by processes that died."""
    from sandboxes import docker_backend, local_backend

    removed: list[str] = []
    ok, _ = docker_backend.engine_available()
    if ok:
        removed += [f"docker:{c}" for c in docker_backend.gc(everything)]
    removed += [f"local:{c}" for c in local_backend.gc(everything)]
    if kubernetes:
        from sandboxes import kubernetes_backend

        removed += [f"kubernetes:{c}" for c in kubernetes_backend.gc(everything)]
    console.print(f"removed {len(removed)} sandbox(es)" + (": " + ", ".join(removed) if removed else ""))


@app.command("ls")
@one_line_errors
def list_cmd() -> None:
    """List tooldojo sandbox containers and their owners."""
    from sandboxes import docker_backend

    ok, why = docker_backend.engine_available()
    if not ok:
        raise SandboxError(why)
    table = Table()
    for col in ("id", "name", "state", "owner_pid", "owner_alive"):
        table.add_column(col)
    for row in docker_backend.list_sandboxes():
        table.add_row(*(str(row[c]) for c in ("id", "name", "state", "owner_pid", "owner_alive")))
    console.print(table)


@app.command("exec")
@one_line_errors
def exec_cmd(
    command: str = typer.Argument(..., help="shell command to run in a fresh sandbox"),
    backend: str = BackendOpt,
    timeout: float = timeout_option(30.0, "--timeout", help="seconds before every process of the command is killed"),
    memory_mb: int = count_option(None, "--memory-mb", limit="memory_mb", min=0, help="memory limit"),
    pids: int = count_option(None, "--pids", limit="pids", min=0, help="process limit"),
) -> None:
    """Run one command in a fresh, hardened sandbox and print its result."""
    import anyio

    from sandboxes.backends import open_sandbox

    cfg = _config(_backend(backend), memory_mb=memory_mb, pids=pids)

    async def run() -> Any:
        async with await open_sandbox(cfg) as sb:
            return await sb.exec(command, timeout=timeout)

    r = anyio.run(run)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    flags = [f for f in ("timed_out", "truncated", "oom_killed") if getattr(r, f)]
    if flags:
        err_console.print(f"[yellow]{', '.join(flags)}[/]")
    raise typer.Exit(r.exit_code)


def _backend(b: str) -> BackendChoice:
    if b not in ("auto", "docker", "local", "kubernetes"):
        raise ValueError(f"unknown backend {b!r}: use auto, docker, local or kubernetes")
    return b  # type: ignore[return-value]


@app.command()
@one_line_errors
def demo(backend: str = BackendOpt) -> None:
    """A short sandboxed tool episode: stateful tools, a command, a snapshot and a rollback."""
    import anyio

    from sandboxes.backends import resolve_backend
    from sandboxes.pool import SandboxPool

    cfg = SandboxConfig(backend=_backend(backend))
    chosen, why = resolve_backend(cfg.backend)
    console.print(f"[bold]backend:[/] {chosen} ({why})", highlight=False)
    table = Table(title="a sandboxed tool episode")
    for col in ("step", "action", "result", "ms"):
        table.add_column(col, overflow="fold")

    async def episode() -> None:
        async with SandboxPool(cfg, size=1) as pool:
            async with pool.sandbox() as sb:
                steps: list[tuple[str, Any]] = [
                    ("tool", ("kv_set", {"key": "order-17", "value": "shipped"})),
                    ("tool", ("counter_incr", {"name": "orders_shipped"})),
                    ("tool", ("kv_get", {"key": "order-99"})),
                    ("exec", "whoami; echo interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1)"),
                    ("exec", "echo note > notes.txt && echo pwned > /etc/motd"),
                    ("snapshot", None),
                    ("tool", ("kv_delete", {"key": "order-17"})),
                    ("restore", None),
                    ("tool", ("kv_get", {"key": "order-17"})),
                ]
                snap = None
                for i, (kind, arg) in enumerate(steps, 1):
                    t = time.perf_counter()
                    if kind == "tool":
                        r = await sb.call_tool(*arg)
                        action = f"{arg[0]}({json.dumps(arg[1])})"
                        shown = json.dumps(r.output) if r.ok else f"[red]{r.kind} ({r.code})[/]: {r.message}"
                    elif kind == "exec":
                        r = await sb.exec(arg, timeout=10)
                        action = f"$ {arg}"
                        shown = f"exit {r.exit_code}: {(r.stdout + r.stderr).strip()}"
                    elif kind == "snapshot":
                        snap = await sb.snapshot()
                        action, shown = "snapshot()", f"state digest {snap.digest[:16]}"
                    else:
                        assert snap is not None
                        await sb.restore(snap)
                        action, shown = "restore(snapshot)", f"digest {(await sb.snapshot()).digest[:16]}"
                    table.add_row(str(i), action, shown, f"{(time.perf_counter() - t) * 1000:.1f}")

    anyio.run(episode)
    console.print(table)
