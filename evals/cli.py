"""`dojo eval`: run personal eval suites on models, report, compare runs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from sandboxes.cli import one_line_errors
from sandboxes.cli_options import count_option, float_option, timeout_option
from toolzoo.domain_dirs import HELP as DOMAIN_DIR_HELP

DomainDirOpt = typer.Option(None, "--domain-dir", metavar="DIR", help=DOMAIN_DIR_HELP)

app = typer.Typer(help="Personal eval suites (pydantic-evals): run them on models, report, compare runs.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
console = Console()
err = Console(stderr=True, highlight=False)

HistoryOpt = typer.Option(None, "--history", help="run history folder (default $TOOLDOJO_EVALS_DIR or runs/evals)")
ModelOpt = typer.Option(..., "--model", "-m", help="[LABEL=]MODEL@URL | PROVIDER:MODEL | local model folder or "
                        "`dojo train` run dir; repeat for a grid")
CaseOpt = typer.Option(None, "--case", help="run only cases whose name matches (glob; repeatable)")
RunsArg = typer.Argument(None, help="run ids (or folders) to show side by side; default: the latest view of every "
                         "model on the suite")


def _history(history: str | None) -> Path:
    from evals.history import default_history_dir

    return Path(history).expanduser() if history else default_history_dir()


def _html_path(history: Path, suite: str, version: str | None, html: str | None) -> Path:
    from evals.models import slug

    if html:
        return Path(html).expanduser()
    return history / slug(suite) / (version or "") / "report.html"


@app.command("run")
@one_line_errors
def run_cmd(
    suite: str = typer.Argument(..., help="a suite file (.yaml/.json/.py) or a directory of them"),
    model: list[str] = ModelOpt,
    repeat: int = count_option(1, "--repeat", "-n", limit="repeat", min=1, help="runs per case (pass@k and pass^k for k <= N)"),
    only_failed: bool = typer.Option(False, "--only-failed", help="re-run only the cases that did not pass last time"),
    case: list[str] = CaseOpt,
    judge: str = typer.Option(None, "--judge", help="model for RubricJudge / judge rewards (same forms as --model)"),
    concurrency: int = count_option(4, "--concurrency", "-c", limit="concurrency", min=1, help="cases in flight"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    history: str = HistoryOpt,
    no_cache: bool = typer.Option(False, "--no-cache", help="ask the model again instead of using cached answers"),
    cache_dir: str = typer.Option(None, "--cache-dir", help="response cache (default HISTORY/cache)"),
    seed: int = count_option(0, "--seed", limit="seed", min=0,
                             help="sampling seed of the first run of each case (run k uses seed + k)"),
    temperature: float = float_option(0.7, "--temperature", limit="temperature",
                                      help="sampling temperature (a case may set its own)"),
    max_tokens: int = count_option(512, "--max-tokens", limit="tokens",
                                   help="completion tokens per model call (a case may set its own)"),
    max_turns: int = count_option(6, "--max-turns", limit="turns", help="agent turns per tool episode (a case may set its own)"),
    timeout: float = timeout_option(120.0, "--timeout", help="seconds to wait for one model answer"),
    retries: int = count_option(2, "--retries", limit="rounds", min=0,
                                help="retries of a model call that timed out or failed transiently"),
    html: str = typer.Option(None, "--html", help="write the HTML report here (default HISTORY/SUITE/VERSION/report.html)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    allow_broken: bool = typer.Option(False, "--allow-broken", help="exit 0 even when suite files or cases do not "
                                      "load (they still run as failures with the reason)"),
    domain_dir: list[str] = DomainDirOpt,
) -> None:
    """Run SUITE on one or more models; print the grid, save the runs and an HTML report.

    Files or cases that do not load are listed first; the rest of the suite runs, and the command
    then exits 1 unless --allow-broken."""
    from evals.models import parse_model
    from evals.report import failure_lines, grid_table, write_html
    from evals.runner import RunOptions, cases_to_run, run_suite_sync
    from evals.suite import load_suite

    from toolzoo.domain_dirs import use

    use(domain_dir)
    hist = _history(history)
    s = load_suite(suite)
    models = [parse_model(m) for m in model]
    opts = RunOptions(repeat=repeat, only_failed=only_failed, cases=case or None, concurrency=concurrency,
                      backend=backend, history_dir=hist, cache=not no_cache,
                      cache_dir=Path(cache_dir).expanduser() if cache_dir else None, seed=seed,
                      temperature=temperature, max_tokens=max_tokens, max_turns=max_turns,
                      timeout_s=timeout, max_retries=retries,
                      judge=parse_model(judge) if judge else None, progress=not quiet)
    plan = [(m, *cases_to_run(s, m, opts)) for m in models]     # bad selections fail here, before any work
    for f, why in s.broken_files.items():
        err.print(f"broken file {f}: {why}", style="red", markup=False, soft_wrap=True)
    unloadable = s.unloadable_cases
    for c in s.dataset.cases:   # cases that do not load on their own (their file is fine)
        if c.inputs.load_error and c.name not in s.cases_of_broken_files:
            err.print(f"case {c.name} does not load: {c.inputs.load_error}", style="red", markup=False, soft_wrap=True)
    err.print(f"suite {s.name} ({s.version}): {len(s.dataset.cases)} cases"
              + (f", {len(unloadable)} that do not load (they will fail with the reason)" if unloadable else ""))
    for m, names, note in plan:
        err.print(f"{m.label}: {len(names)} case(s)" + (f" x {repeat} runs" if repeat > 1 else "")
                  + (f"; {note}" if note else ""))
    records = run_suite_sync(s, models, opts)
    if not records:
        err.print("nothing to run")
        return
    console.print(grid_table(records))
    for r in records:
        lines = failure_lines(r)
        if lines:
            console.print(f"[bold]{r.label}[/]: why cases did not pass", highlight=False)
            for line in lines:
                console.print("  " + line, highlight=False, markup=False, soft_wrap=True)
    path = write_html(records, _html_path(hist, s.name, s.version, html))
    for r in records:
        console.print(f"saved run {r.run_id}", highlight=False, soft_wrap=True)
    console.print(f"HTML report: {path}", highlight=False, soft_wrap=True)
    ran = {n for _, names, _ in plan for n in names}
    not_loaded = [n for n in unloadable if n in ran]
    if not_loaded and not allow_broken:
        err.print(f"error: {len(not_loaded)} case(s) could not be loaded"
                  + (f" ({len(s.broken_files)} broken file(s), listed at the start)" if s.broken_files else "")
                  + "; fix them, or pass --allow-broken", style="red", markup=False, soft_wrap=True)
        raise typer.Exit(1)


@app.command("report")
@one_line_errors
def report_cmd(
    runs: list[str] = RunsArg,
    suite: str = typer.Option(None, "--suite", help="suite name or path (default: the suite run most recently)"),
    history: str = HistoryOpt,
    html: str = typer.Option(None, "--html", help="write the HTML report here (default HISTORY/SUITE/report.html)"),
) -> None:
    """Show runs as a grid (models side by side) and write the static HTML report."""
    from evals.context import EvalError
    from evals.history import current_view, find_run, list_runs, slug
    from evals.report import grid_table, write_html

    hist = _history(history)
    if runs:
        records = [find_run(hist, r)[0] for r in runs]
    else:
        name = suite
        if suite and Path(suite).exists():
            from evals.suite import load_suite

            name = load_suite(suite).name
        broken: list[tuple[Path, str]] = []
        all_runs = list_runs(hist, name, broken=broken) if name else list_runs(hist, broken=broken)
        name = name or (all_runs[-1][0].suite if all_runs else None)
        # a run.json that does not load is named, as `eval runs` does, never silently left out of the grid:
        # no report is written without that model (only broken runs of this suite's folder count)
        broken = [(f, why) for f, why in broken if not name or f.is_relative_to(hist / slug(name))]
        for f, why in broken:
            err.print(f"error: {f} does not load: {why}", style="red", markup=False, soft_wrap=True)
        if broken:
            raise typer.Exit(1)
        if not all_runs or not name:
            raise EvalError(f"no runs{' of suite ' + name if name else ''} in {hist}: `dojo eval run` first")
        labels: list[str] = []
        for r, _ in reversed(all_runs):
            if r.suite == name and r.label not in labels:
                labels.append(r.label)
        records = [v for lbl in reversed(labels) if (v := current_view(hist, name, lbl)) is not None]
        if not records:
            raise EvalError(f"no full run of suite {name} in {hist}")
    console.print(grid_table(records))
    versions = {r.suite_version for r in records}
    path = write_html(records, _html_path(hist, records[0].suite, versions.pop() if len(versions) == 1 else None, html))
    console.print(f"HTML report: {path}", highlight=False, soft_wrap=True)


@app.command("compare")
@one_line_errors
def compare_cmd(
    run_a: str = typer.Argument(..., help="the earlier run (id, id prefix or folder)"),
    run_b: str = typer.Argument(..., help="the later run"),
    history: str = HistoryOpt,
    show_all: bool = typer.Option(False, "--all", help="list unchanged cases too"),
    details: bool = typer.Option(False, "--details", help="also print pydantic-evals' case-by-case diff table"),
) -> None:
    """What changed between two runs: fixed and regressed cases, pass rates."""
    from evals.history import find_run, load_report
    from evals.report import compare_table

    hist = _history(history)
    (a, da), (b, db) = find_run(hist, run_a), find_run(hist, run_b)
    if a.suite != b.suite:
        err.print(f"note: different suites ({a.suite} vs {b.suite}); only cases with the same name are compared")
    elif a.suite_version != b.suite_version:
        err.print(f"note: the suite changed between the runs ({a.suite_version} -> {b.suite_version})")
    console.print(compare_table(a, b, show_all=show_all))
    if details:
        load_report(db).print(baseline=load_report(da), include_input=False, include_output=False,
                              include_reasons=True)


@app.command("runs")
@one_line_errors
def runs_cmd(suite: str = typer.Argument(None, help="only this suite (by name)"), history: str = HistoryOpt) -> None:
    """List the runs in the history."""
    from rich.table import Table

    from evals.context import EvalError
    from evals.history import list_runs

    hist = _history(history)
    if not hist.is_dir():
        raise EvalError(f"no eval history at {hist}: `dojo eval run` writes it (or pass --history)")
    broken: list[tuple[Path, str]] = []
    t = Table(title=f"runs in {hist}")
    for col in ("run", "suite", "version", "model", "cases", "pass rate", "repeat", "note"):
        t.add_column(col, no_wrap=col in ("run", "version", "pass rate"))
    for r, _ in list_runs(hist, suite, broken=broken):
        t.add_row(r.run_id, r.suite, r.suite_version, r.label, str(r.summary.cases), f"{100 * r.summary.pass_rate:.1f}%",
                  str(r.repeat), "only failed" if r.only_failed else "")
    console.print(t)
    for f, why in broken:
        err.print(f"error: {f} does not load: {why}", style="red", markup=False, soft_wrap=True)
    if broken:
        raise typer.Exit(1)


@app.command("schema")
@one_line_errors
def schema_cmd(directory: str = typer.Argument(".", help="where to write evals_schema.json")) -> None:
    """Write the JSON Schema of suite files (point `# yaml-language-server: $schema=evals_schema.json` at it)."""
    from evals.suite import write_schema

    console.print(f"wrote {write_schema(directory)}", highlight=False)
