"""`dojo train`: Dr. GRPO training from a YAML config plus ``key=value`` overrides.

    dojo train --config examples/train_tiny.yaml grpo.max_steps=5 run.output_dir=runs/t1
    dojo train examples/train_tiny.yaml run.resume=true

Order of work, so that a bad config fails fast and without a traceback: the config is loaded and
validated (every problem printed as ``error: field: reason``, exit code 2) before torch or
transformers is imported; then the logging backends are checked, the run directory is prepared
(``rl.run``) and the checkpoint to resume from is found; only then is ``rl.trainer`` imported and
``rl.trainer.train`` called. The root CLI mounts ``train_cmd`` as ``dojo train``.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from sandboxes.cli import Terminated, one_line_errors
from sandboxes.cli_options import count_option, url_option

if TYPE_CHECKING:
    from rl.config import ConfigError

app = typer.Typer(help="Train tool-using agents with Dr. GRPO.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

CONFIG_EXIT_CODE = 2


def split_config_arg(config: str | None, args: list[str]) -> tuple[str | None, list[str]]:
    """``(config path, overrides)``: the first positional is the config when it ends with
    ``.yaml`` / ``.yml`` and holds no ``=`` (``dojo train FILE.yaml k=v``)."""
    from rl.config import ConfigError

    args = list(args)
    if args and "=" not in args[0] and args[0].lower().endswith((".yaml", ".yml")):
        if config is not None:
            raise ConfigError(f"two configs given: --config {config} and {args[0]}; pass one", field="--config")
        return args[0], args[1:]
    return config, args


def print_config_error(e: ConfigError) -> None:
    """One ``error: field: reason`` line per problem, on stderr."""
    for field, reason in e.problems or [(None, str(e))]:
        reason = " ".join(str(reason).split())  # one line, whatever YAML's messages hold
        err_console.print(f"error: {field or 'config'}: {reason}", style="red", highlight=False, markup=False,
                          soft_wrap=True)


def _summary(result: Any, run_dir: Path, checkpoint: str | None) -> dict[str, Any]:
    from rl.run import CURVE_FILE, METRICS_FILE, jsonable, plot_reward_curve, read_metrics_jsonl, reward_points

    history = read_metrics_jsonl(run_dir / METRICS_FILE) or list(getattr(result, "log_history", None) or [])
    points = reward_points(history)
    first = getattr(result, "first_reward_mean", None)
    if first is None and points:
        first = points[0][1]
    final = getattr(result, "final_reward_mean", None)
    if final is None and points:
        final = points[-1][1]
    curve = run_dir / CURVE_FILE
    if not curve.is_file() and points:  # the trainer did not plot it: do it from metrics.jsonl
        try:
            plot_reward_curve(history, curve, title=run_dir.name)
        except Exception as e:  # a plot must not fail a finished run
            err_console.print(f"warning: could not plot the reward curve: {e}", highlight=False, markup=False)
    return jsonable({
        "run_dir": str(getattr(result, "run_dir", None) or run_dir),
        "steps": getattr(result, "steps", None),
        "first_reward_mean": first,
        "final_reward_mean": final,
        "reward_curve": str(curve) if curve.is_file() else None,
        "resumed_from": checkpoint,
        "metrics": getattr(result, "metrics", None) or {},
    })


def _print_summary(summary: dict[str, Any]) -> None:
    def num(v: Any) -> str:
        return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)

    t = Table(title="training run", show_header=False)
    t.add_column("", style="bold")
    t.add_column("", overflow="fold")
    t.add_row("steps", num(summary["steps"]))
    t.add_row("first reward mean", num(summary["first_reward_mean"]))
    t.add_row("last reward mean", num(summary["final_reward_mean"]))
    t.add_row("run dir", summary["run_dir"])
    t.add_row("reward curve", summary["reward_curve"] or "-")
    if summary["resumed_from"]:
        t.add_row("resumed from", summary["resumed_from"])
    console.print(t)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (what Kubernetes and launchers send to stop a pod) interrupts like Ctrl-C, so the run is
    recorded as interrupted instead of dying at "running"; the process then exits 143 (``Terminated``)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise Terminated(f"signal {signal.Signals(signum).name}")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _train(config: str | None, args: list[str]) -> dict[str, Any]:
    from rl.config import check_data, load_config

    config_path, overrides = split_config_arg(config, args)
    cfg = load_config(config_path, overrides)  # the only thing before any heavy import
    check_data(cfg)  # before the run directory is written

    from rl.distributed import Ranks, init_distributed, main_first
    from rl.run import (check_run_dir, configure_logging, prepare_run_dir, record_rank_failure, report_to,
                        update_run_record, utc_now)

    ranks = Ranks.from_env()  # under accelerate launch / torchrun: rank 0 alone writes the run's records
    report_to(cfg)
    run_dir, checkpoint = check_run_dir(cfg)  # every rank refuses a bad run dir by itself
    if ranks.distributed:
        init_distributed()
    with main_first(ranks):
        if ranks.is_main:
            run_dir = prepare_run_dir(cfg, config_path=config_path, overrides=overrides)
    dirs = configure_logging(cfg, run_dir)
    if dirs and ranks.is_main:
        update_run_record(run_dir, logging_dirs=dirs)
    if checkpoint and ranks.is_main:
        err_console.print(f"resuming from {checkpoint}", highlight=False, markup=False)

    from rl.trainer import train

    try:
        with sigterm_interrupts():
            result = train(cfg, run_dir=run_dir, resume_from=checkpoint)
    except BaseException as e:
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        error = f"{type(e).__name__}: {e}".splitlines()[0][:500] if status == "failed" else None
        if ranks.distributed:
            record_rank_failure(run_dir, str(ranks), status, error)
        else:
            update_run_record(run_dir, status=status, end_time=utc_now(), error=error)
        raise
    if not ranks.is_main:
        return {}
    summary = _summary(result, run_dir, checkpoint)
    update_run_record(run_dir, status="finished", end_time=utc_now(), final_step=summary["steps"],
                      final_reward_mean=summary["final_reward_mean"],
                      reward_curve=Path(summary["reward_curve"]).name if summary["reward_curve"] else None)
    return summary


@app.command("train")
@one_line_errors
def train_cmd(
    args: Annotated[list[str] | None, typer.Argument(
        metavar="OVERRIDES",
        help="dotted key=value overrides such as grpo.max_steps=5 run.output_dir=runs/t1 (values are YAML); a first "
             "argument ending in .yaml is the config")] = None,
    config: str = typer.Option(None, "--config", "-c", help="the training config (YAML); see examples/train_tiny.yaml"),
) -> None:
    """Train with Dr. GRPO: the run directory gets the resolved config, run.json (git commit, seeds, package
    versions), metrics.jsonl, checkpoints and reward_curve.png; run.resume=true continues the latest checkpoint.
    Prints a summary table and, last, one JSON line."""
    from rl.config import ConfigError  # here, not at the top: `dojo` starts without loading rl.config
    from rl.distributed import Ranks, record_failure

    ranks = Ranks.from_env()
    try:
        summary = _train(config, list(args or []))
    except ConfigError as e:
        print_config_error(e)
        raise typer.Exit(CONFIG_EXIT_CODE) from None
    except (KeyboardInterrupt, typer.Exit):
        raise
    except BaseException as e:
        if not ranks.distributed:
            raise
        # one line naming the rank, also in the launcher's failure summary; the launcher then stops
        # the other ranks (they would otherwise wait for this one in a collective)
        err_console.print(f"error: {record_failure(e, ranks)}", style="red", highlight=False, markup=False,
                          soft_wrap=True)
        raise typer.Exit(1) from None
    if not ranks.is_main:
        return  # rank 0 prints the report
    _print_summary(summary)
    sys.stdout.flush()
    print(json.dumps(summary), flush=True)


# ------------------------------------------------------------------------------ dojo rl ...
rl_app = typer.Typer(help="Inspect RL runs and their trajectories.", no_args_is_help=True)


@rl_app.callback()
def _rl() -> None:
    """Inspect RL runs and their trajectories."""


@rl_app.command("behaviours")
@one_line_errors
def behaviours_cmd(
    source: str = typer.Argument(..., metavar="DATASET_OR_RUN",
                                 help="a folder with trajectories.jsonl, a .jsonl of trajectories, or a run directory "
                                      "(every **/trajectories.jsonl and episodes/*.jsonl below it, one row group each)"),
    counter: str = typer.Option("heuristic", "--counter", help="heuristic (offline) | llm (one prompt per behaviour)"),
    base_url: str = url_option(None, "--base-url", help="OpenAI-compatible endpoint for --counter llm"),
    model: str = typer.Option(None, "--model", help="model name at --base-url"),
    concurrency: int = count_option(8, "--concurrency", limit="concurrency", min=1, help="trajectories counted at a time"),
    json_out: bool = typer.Option(False, "--json", help="print the report as one JSON object"),
) -> None:
    """How often the trajectories show the four cognitive behaviours (verification, backtracking, subgoal
    setting, backward chaining): per group, the mean count per trajectory and the share with at least one."""
    import anyio

    from rl.behaviours import HeuristicCounter, LLMCounter, abehaviour_report

    if counter not in ("heuristic", "llm"):
        raise ValueError(f"unknown counter {counter!r}: use heuristic or llm")
    if counter == "llm" and not (base_url and model):
        raise ValueError("--counter llm needs --base-url and --model")

    counters: list[LLMCounter] = []

    async def run():  # -> BehaviourReport
        if counter == "heuristic":
            return await abehaviour_report(source, HeuristicCounter(), concurrency=concurrency)
        from synth.llm import LLMClient, LLMConfig

        async with LLMClient(LLMConfig(base_url=base_url, model=model, max_concurrency=concurrency)) as client:
            counters.append(LLMCounter(client))
            return await abehaviour_report(source, counters[0], concurrency=concurrency)

    report = anyio.run(run)
    if counters:
        from rewards.cli import check_endpoint

        c = counters[0]
        check_endpoint("the counting model", base_url, c.stats["calls"], c.stats["failed"], c.last_error)
    if json_out:
        print(report.model_dump_json())
        return
    for g in report.groups:
        t = Table(title=f"{g.group} ({g.n} trajectories, {report.counter} counter)")
        t.add_column("behaviour")
        t.add_column("mean / trajectory", justify="right")
        t.add_column("with >= 1", justify="right")
        t.add_column("not counted", justify="right")
        for b, s in g.behaviours.items():
            t.add_row(b, "-" if s.mean is None else f"{s.mean:.2f}", "-" if s.frac is None else f"{s.frac:.0%}",
                      str(s.uncounted))
        console.print(t)


@one_line_errors
def demo_cmd(
    args: Annotated[list[str] | None, typer.Argument(
        metavar="[CONFIG.yaml] OVERRIDES",
        help="an optional demo config (examples/demo.yaml) and dotted key=value overrides such as "
             "train.grpo.max_steps=4 out_dir=runs/demo-smoke")] = None,
) -> None:
    """The whole pipeline on the tiny model: tasks, behaviour priming, SFT, Dr. GRPO, held-out evaluation
    of the base, primed and trained policies, and a report (table, reward curve, HTML); one JSON line last."""
    from rl.config import ConfigError
    from rl.demo import load_demo_config, run_demo

    try:
        config_path, overrides = split_config_arg(None, list(args or []))
        cfg = load_demo_config(config_path, overrides)
    except ConfigError as e:
        print_config_error(e)
        raise typer.Exit(CONFIG_EXIT_CODE) from None
    res = run_demo(cfg, console=err_console)
    t = Table(title=f"held-out success ({res.held_out_tasks} tasks, {res.eval_samples} samples each at T=1; greedy)")
    t.add_column("policy")
    t.add_column("sampled", justify="right")
    t.add_column("greedy", justify="right")
    t.add_column("multi-step, sampled", justify="right")
    for name in ("base", "sft", "grpo"):
        g, m = getattr(res, f"{name}_greedy_success"), getattr(res, f"multistep_{name}_success")
        t.add_row(name, f"{getattr(res, f'{name}_success'):.1%}", "-" if g is None else f"{g:.1%}",
                  "-" if m is None else f"{m:.1%}")
    err_console.print(t)
    err_console.print(f"target ({res.target}): {'met' if res.target_met else 'not met'}", highlight=False)
    err_console.print(f"report: {res.report}   ({res.minutes:.1f} min; target "
                      f"{'met' if res.target_met else 'not met'})", highlight=False)
    print(res.model_dump_json())
