"""`dojo synth ...`: synthesize tools (and, with the synth issue, tasks)."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sandboxes.cli import one_line_errors

app = typer.Typer(help="Synthesize tools from the seed zoo.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


@app.callback()
def _synth() -> None:
    """Synthesize tools from the seed zoo."""


@app.command("tools")
@one_line_errors
def tools_cmd(
    offline: bool = typer.Option(False, "--offline", help="rule-based evolution (no LLM)"),
    n: int = typer.Option(2000, "--n", min=1, help="stop once this many distinct tools pass validation"),
    out: str = typer.Option(..., "--out", help="directory to write zoo.json and rejected.jsonl into"),
    seed: int = typer.Option(0, "--seed", help="seed of every random choice: same seed, same zoo"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    sandboxes: int = typer.Option(4, "--sandboxes", min=1, help="sandboxes validating in parallel"),
) -> None:
    """Evolve the seed zoo (add_parameter, add_constraint, change_representation, specialise, compose)
    until N distinct tools pass sandboxed validation; write the zoo and the rejected candidates."""
    import anyio

    from toolzoo.evolve import synthesize
    from toolzoo.validate import Validator

    if not offline:
        raise ValueError("an LLM endpoint comes with the synth issue; use --offline for rule-based evolution")
    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")

    with Progress(TextColumn("[bold]tools[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=False) as bar:
        task = bar.add_task("passing", total=n)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=min(done, total))

        async def run():  # -> SynthResult
            async with Validator(backend=backend, sandboxes=sandboxes, seed=seed) as v:
                return await synthesize(n, validator=v, seed=seed, progress=progress)

        result = anyio.run(run)
    path = result.zoo.save(out)
    with open(path / "rejected.jsonl", "w") as f:
        for r in result.rejected:
            f.write(r.model_dump_json(exclude_none=True) + "\n")
    s = result.stats
    console.print(
        f"{s.passing} tools pass ({s.seed_tools} seed, {s.evolved} evolved: "
        + ", ".join(f"{k} {v}" for k, v in sorted(s.by_operator.items()))
        + f"); rejected {s.duplicates} duplicates and {s.failed_validation} that failed validation",
        highlight=False,
    )
    console.print(f"generate {s.proposed / max(s.generate_s, 1e-9):.0f} tools/s, "
                  f"validate {s.validated / max(s.validate_s, 1e-9):.0f} tools/s; "
                  f"wrote {path / 'zoo.json'} and {path / 'rejected.jsonl'}", highlight=False)
    (path / "synth_stats.json").write_text(json.dumps(s.model_dump(), indent=1))
    if s.passing < n:
        err_console.print(f"only {s.passing} distinct tools pass: the operators ran out of new tools", style="red")
        raise typer.Exit(1)
