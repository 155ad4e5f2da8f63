"""`dojo synth ...`: synthesize tools (and, with the synth issue, tasks)."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sandboxes.cli import one_line_errors
from sandboxes.cli_files import check_out_dir
from sandboxes.cli_options import count_option, split_names, url_option
from toolzoo.domain_dirs import HELP as DOMAIN_DIR_HELP

DomainDirOpt = typer.Option(None, "--domain-dir", metavar="DIR", help=DOMAIN_DIR_HELP)

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
    n: int = count_option(2000, "--n", limit="items", min=1, help="stop once this many distinct tools pass validation"),
    out: str = typer.Option(..., "--out", help="directory to write zoo.json and rejected.jsonl into"),
    seed: int = count_option(0, "--seed", limit="seed", min=0, help="seed of every random choice: same seed, same zoo"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    sandboxes: int = count_option(4, "--sandboxes", limit="sandboxes", min=1, help="sandboxes validating in parallel"),
    base_url: str = url_option(None, "--base-url", help="OpenAI-compatible endpoint for LLM evolution, e.g. http://127.0.0.1:8000/v1"),
    model: str = typer.Option(None, "--model", help="model name the --base-url endpoint serves"),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="environment variable holding the API key"),
    categories: str = typer.Option(None, "--categories", help="LLM: comma-separated categories (default: all)"),
    domains_per_category: int = count_option(1, "--domains-per-category", limit="rounds", min=0, help="LLM: new domains per category"),
    tools_per_domain: int = count_option(4, "--tools-per-domain", limit="rounds", min=1, help="LLM: new tools per domain"),
    repairs: int = count_option(2, "--repairs", limit="rounds", min=0, help="LLM: repair rounds for a failing domain or tool"),
    extend: str = typer.Option(None, "--extend", help="LLM: comma-separated seed domains to add tools to"),
    max_tokens: int = count_option(None, "--max-tokens", limit="tokens", min=16, help="LLM: cap on tokens per answer"),
    concurrency: int = count_option(8, "--concurrency", limit="concurrency", min=1, help="LLM: requests in flight"),
) -> None:
    """Evolve the seed zoo: --offline with rule-based operators (add_parameter, add_constraint,
    change_representation, specialise, compose) until N distinct tools pass sandboxed validation, or with
    an LLM (--base-url, --model: categories -> new domains -> tools with code, validated and repaired);
    write the zoo and the rejected candidates."""
    import anyio

    from toolzoo.evolve import synthesize
    from toolzoo.validate import Validator

    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")
    check_out_dir(out)
    if not offline:
        if not base_url:
            raise ValueError("LLM evolution needs an LLM endpoint: pass --base-url URL --model M "
                             "[--api-key-env VAR], or --offline for rule-based evolution")
        from synth.evolve_llm import run_cli

        code = run_cli(base_url=base_url, model=model, api_key_env=api_key_env, out=out, seed=seed, backend=backend,
                       sandboxes=sandboxes, categories=categories, domains_per_category=domains_per_category,
                       tools_per_domain=tools_per_domain, repairs=repairs, extend=extend, max_tokens=max_tokens,
                       concurrency=concurrency)
        if code:
            raise typer.Exit(code)
        return

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



@app.command("tasks")
@one_line_errors
def tasks_cmd(
    n: int = count_option(..., "--n", limit="items", min=1, help="how many replay-validated tasks to write"),
    out: str = typer.Option(..., "--out", help="directory for tasks.jsonl, the dataset (hf/, tasks.parquet), summary.json"),
    seed: int = count_option(0, "--seed", limit="seed", min=0, help="seed of every random choice: same seed, same tasks"),
    domains: str = typer.Option(None, "--domains", help="comma-separated seed domains (default: all)"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    sandboxes: int = count_option(4, "--sandboxes", limit="sandboxes", min=1, help="sandboxes working in parallel"),
    domain_dir: list[str] = DomainDirOpt,
) -> None:
    """Synthesize verifiable tasks (APIGen-MT blueprints: instruction, gold actions, expected outputs),
    each validated by replaying its gold actions twice in fresh sandboxes. With --domain-dir and no
    --domains, the tasks are in the folders' domains."""
    from synth.tasks import export_tasks, synthesize_tasks
    from toolzoo.domain_dirs import use

    mine = use(domain_dir)
    names = split_names(domains, "--domains") or (mine or None)
    check_out_dir(out)
    with Progress(TextColumn("[bold]tasks[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=False) as bar:
        bars: dict[str, int] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in bars:
                bars[phase] = bar.add_task(phase, total=total)
            bar.update(bars[phase], completed=done, total=total)

        result = synthesize_tasks(n, seed=seed, domains=names, backend=backend, sandboxes=sandboxes, progress=progress)
    if not result.tasks:
        why = ", ".join(f"{k} ({v}x)" for k, v in sorted(result.stats.generation_failures.items(), key=lambda kv: -kv[1])[:3])
        raise ValueError(f"no task could be made in {result.stats.attempts} attempts: {why or 'every replay failed'}")
    path = export_tasks(result, out)
    s = result.stats
    console.print(f"{s.kept}/{n} tasks in {s.seconds:.1f}s ({s.tasks_per_min:.0f}/min, backend {s.backend}); "
                  f"replay pass rate {s.replay_pass_rate:.1%} of {s.replayed}; {s.attempts} attempts; "
                  + ", ".join(f"{k} {v}" for k, v in s.per_difficulty.items())
                  + f"; {s.needs_user_info} need user info; {len(s.per_domain)} domains", highlight=False)
    console.print(f"wrote {path / 'tasks.jsonl'}, {path / 'hf'}, {path / 'tasks.parquet'}, {path / 'summary.json'}",
                  highlight=False)
    if s.kept < n:
        err_console.print(f"only {s.kept} of {n} tasks were made: see {path / 'dropped.jsonl'}", style="red")
        raise typer.Exit(1)

@app.command("import-tasks")
@one_line_errors
def import_tasks_cmd(
    tasks: str = typer.Argument(..., help="tasks with gold actions and outputs: JSON, JSONL or Python Task(...) calls"),
    domain: str = typer.Option(..., "--domain", help="the tasks' domain: a name (with --domain-dir) or a folder"),
    out: str = typer.Option(..., "--out", help="directory for tasks.jsonl, the dataset and dropped.jsonl"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    sandboxes: int = count_option(4, "--sandboxes", limit="sandboxes", min=1, help="sandboxes replaying in parallel"),
    computed_outputs: bool = typer.Option(False, "--computed-outputs",
                                          help="keep tasks whose outputs the agent computes (a sum, a count) "
                                               "rather than reads: they need not appear in the gold results and "
                                               "are checked in the agent's answer only"),
    domain_dir: list[str] = DomainDirOpt,
) -> None:
    """Import an environment's own tasks (instruction, gold actions, outputs), each kept only if its gold
    actions replay to the same state twice and produce its outputs."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from synth.imported_tasks import import_tasks
    from synth.tasks import export_tasks
    from toolzoo.domain_dirs import use
    from toolzoo.domains import load_domain

    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")
    check_out_dir(out)
    use(domain_dir)
    dom = load_domain(domain)
    kept, dropped = import_tasks(tasks, dom, backend=backend, sandboxes=sandboxes, computed_outputs=computed_outputs)
    path = Path(out).expanduser()
    # Written in a staging folder next to OUT and moved in only when complete.
    anchor = next(a for a in (path, *path.absolute().parents) if a.exists())
    staging = Path(tempfile.mkdtemp(prefix=".import-tasks-", dir=anchor))
    try:
        if kept:
            export_tasks(kept, staging)
        with open(staging / "dropped.jsonl", "w") as f:
            for d in dropped:
                f.write(d.model_dump_json() + "\n")
        path.mkdir(parents=True, exist_ok=True)
        for child in staging.iterdir():
            if (path / child.name).is_dir():
                shutil.rmtree(path / child.name)
            os.replace(child, path / child.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not kept:
        first = dropped[0]
        raise ValueError(f"none of the {len(dropped)} task(s) was kept (first: {first.id}: {first.reason}); "
                         f"the reasons are in {path / 'dropped.jsonl'}")
    console.print(f"{len(kept)} tasks kept, {len(dropped)} dropped (see {path / 'dropped.jsonl'}); "
                  f"wrote {path / 'tasks.jsonl'}", highlight=False)


@app.command("trajectories")
@one_line_errors
def trajectories_cmd(
    tasks: str = typer.Option(..., "--tasks", help="directory (or tasks.jsonl) written by `dojo synth tasks`"),
    out: str = typer.Option(..., "--out", help="directory for trajectories.jsonl and the TRL dataset (sft/)"),
    agent: str = typer.Option("scripted", "--agent", help="scripted (replays the gold actions) | endpoint"),
    user: str = typer.Option("scripted", "--user", help="scripted | llm"),
    base_url: str = url_option(None, "--base-url", help="OpenAI-compatible endpoint for --agent endpoint / --user llm"),
    model: str = typer.Option(None, "--model", help="model name at --base-url"),
    concurrency: int = count_option(8, "--concurrency", limit="concurrency", min=1, help="episodes (and sandboxes) at a time"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    best_of_n: int = count_option(1, "--best-of-n", limit="candidates", min=1, help="LLM user: candidates per reply"),
    critique: bool = typer.Option(False, "--critique", help="LLM user: pick among candidates with a self-critique"),
    domain_dir: list[str] = DomainDirOpt,
) -> None:
    """Run every task once (agent + user simulator + sandboxed tools); write trajectories.jsonl and a
    Hugging Face dataset in TRL's conversational tool-calling format (messages + tools)."""
    import collections
    import time

    import anyio

    from synth.sft_data import generate
    from synth.tasks import load_tasks

    from toolzoo.domain_dirs import use

    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")
    use(domain_dir)
    task_list = load_tasks(tasks)
    check_out_dir(out)
    start = time.perf_counter()
    trajs, report = anyio.run(lambda: generate(
        task_list, out, agent=agent, user=user, base_url=base_url, model=model, concurrency=concurrency,
        backend=backend, best_of_n=best_of_n, critique=critique))
    dt = time.perf_counter() - start
    ends = collections.Counter(t.termination for t in trajs)
    ep = report.episodes_s
    console.print(f"{len(trajs)} episodes in {ep:.1f}s ({len(trajs) / max(ep, 1e-9) * 60:.0f}/min; "
                  f"{dt - ep:.1f}s more for sandbox start-up and export): "
                  + ", ".join(f"{k} {v}" for k, v in ends.most_common())
                  + f"; {sum(t.reached_expected_state for t in trajs)} reach the gold state, "
                  f"{sum(t.stats.malformed_calls for t in trajs)} malformed calls", highlight=False)
    console.print(f"wrote {report.jsonl} and {report.dataset} ({report.rows} rows, {report.skipped} skipped)",
                  highlight=False)


@app.command("behaviours")
@one_line_errors
def behaviours_cmd(
    tasks: str = typer.Option(..., "--tasks", help="directory (or tasks.jsonl) written by `dojo synth tasks`"),
    condition: str = typer.Option("all", "--condition", help="all | none | incorrect | empty | length_matched | "
                                  "no_backtracking | subgoal | verification | backtracking | backward_chaining"),
    out: str = typer.Option(..., "--out", help="directory for trajectories.jsonl, the TRL dataset (sft/), summary.json"),
    mode: str = typer.Option("procedural", "--mode", help="procedural (templated, offline) | llm (an endpoint as agent)"),
    base_url: str = url_option(None, "--base-url", help="OpenAI-compatible endpoint for --mode llm"),
    model: str = typer.Option(None, "--model", help="model name at --base-url"),
    system_prompt: str = typer.Option("brief", "--system-prompt", help="the system prompt the traces carry: brief | policy"),
    seed: int = count_option(0, "--seed", limit="seed", min=0, help="seed of the per-trace behaviour draws"),
    concurrency: int = count_option(8, "--concurrency", limit="concurrency", min=1, help="episodes (and sandboxes) at a time"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    domain_dir: list[str] = DomainDirOpt,
) -> None:
    """Priming traces with (or without) cognitive behaviours (Gandhi et al. 2025): one real episode per
    task in the chosen condition; writes trajectories.jsonl, sft/ (TRL format) and summary.json."""
    from pathlib import Path

    import anyio

    from synth.behaviours import CONDITIONS, agenerate_traces
    from synth.sft_data import write_trajectories
    from synth.tasks import load_tasks

    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}: use one of {', '.join(CONDITIONS)}")
    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")
    if mode == "llm" and not (base_url and model):
        raise ValueError("--mode llm needs --base-url and --model")
    from toolzoo.domain_dirs import use

    use(domain_dir)
    task_list = load_tasks(tasks)
    check_out_dir(out)

    async def run():  # -> TraceSet
        client = None
        if mode == "llm":
            from synth.llm import LLMClient, LLMConfig

            client = LLMClient(LLMConfig(base_url=base_url, model=model))
        try:
            return await agenerate_traces(task_list, condition, mode=mode, backend=backend,  # type: ignore[arg-type]
                                          system_prompt=system_prompt, seed=seed, concurrency=concurrency,
                                          llm=client, progress=True)
        finally:
            if client is not None:
                await client.aclose()

    traces = anyio.run(run)
    report = write_trajectories(traces.trajectories, out)
    summary = {**traces.summary(), "tasks": len(task_list), "sft_rows": report.rows, "skipped": report.skipped}
    (Path(out) / "summary.json").write_text(json.dumps(summary, indent=1))
    console.print(f"{condition} ({mode}): {summary['trajectories']} traces of {len(task_list)} tasks, "
                  f"{summary['reached_expected_state']} reach the expected state"
                  + (f", {summary['dropped_not_wrong']} dropped as not wrong" if condition == "incorrect" else "")
                  + (", behaviours " + ", ".join(f"{k} {v}" for k, v in summary["behaviours"].items())
                     if summary["behaviours"] else ""), highlight=False)
    console.print(f"wrote {report.jsonl}, {report.dataset} ({report.rows} rows) and {Path(out) / 'summary.json'}",
                  highlight=False)
