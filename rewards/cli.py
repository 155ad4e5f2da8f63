"""`dojo rewards ...`: score trajectories, filter them into SFT data, check a judge against the state.

`filter_cmd` is also mounted as `dojo synth filter` by the root CLI (synth must not import rewards).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from sandboxes.cli import one_line_errors
from sandboxes.cli_files import check_out_dir, load_yaml, read_jsonl, validation_reason
from sandboxes.cli_options import count_option, url_option
from toolzoo.domain_dirs import HELP as DOMAIN_DIR_HELP
from toolzoo.domain_dirs import use as use_domain_dirs

DomainDirOpt = typer.Option(None, "--domain-dir", metavar="DIR", help=DOMAIN_DIR_HELP)

app = typer.Typer(help="Rewards: the SFT filter and judge agreement.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


@app.callback()
def _rewards() -> None:
    """Rewards: the SFT filter and judge agreement."""


def load_trajectories(path: str | Path):
    """Trajectories from a trajectories.jsonl file or a directory holding one (`dojo synth trajectories`)."""
    from synth.episode import Trajectory

    p = Path(path)
    f = p / "trajectories.jsonl" if p.is_dir() else p
    if not f.exists():
        raise FileNotFoundError(f"no trajectories at {path}: expected {f} (written by `dojo synth trajectories`)")
    return read_jsonl(f, Trajectory.model_validate_json, "trajectories")


def reward_config(path: str):  # -> RewardConfig
    """The reward config YAML at `path`, validated; errors name the file."""
    from pydantic import ValidationError

    from rewards.compose import RewardConfig

    if not Path(path).is_file():
        raise FileNotFoundError(f"no reward config at {path}")
    try:
        return RewardConfig.model_validate(load_yaml(path, "reward config"))
    except ValidationError as e:
        raise ValueError(f"{path}: {validation_reason(e)}") from None


class EndpointFailed(ValueError):
    """Every call to an LLM endpoint failed, so the command measured nothing (a ValueError: the CLI's
    one-line error and exit 1)."""


def check_endpoint(what: str, url: str, calls: int, failed: int, last_error: str | None) -> None:
    """After a command's LLM calls: raise EndpointFailed naming the endpoint and the error when every
    call failed; print one warning line on stderr when some did."""
    if not failed:
        return
    if failed >= calls:
        raise EndpointFailed(f"{what} at {url} failed on every call ({failed} of {calls}): {last_error}")
    err_console.print(f"warning: {what} at {url} failed on {failed} of {calls} calls: {last_error}",
                      style="yellow", highlight=False, markup=False, soft_wrap=True)


def _check_backend(backend: str) -> None:
    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")


def judge_client(base_url: str | None, model: str | None, api_key_env: str, cache_dir: str | None,
                 max_concurrency: int = 8):
    if not base_url and not model:
        return None
    if not (base_url and model):
        raise ValueError("a judge needs both --judge-base-url and --judge-model")
    from synth.llm import LLMClient, LLMConfig

    return LLMClient(LLMConfig(base_url=base_url, model=model, api_key_env=api_key_env, cache_dir=cache_dir,
                               max_concurrency=max_concurrency))


def _pool(backend: str, sandboxes: int):
    from sandboxes import SandboxConfig, SandboxPool

    # each trajectory may hold two sandboxes at once (world-state replay and the reverify check)
    return SandboxPool(SandboxConfig(backend=backend), size=sandboxes, max_concurrency=2 * sandboxes)


def _print_filter(summary: dict[str, Any], report: Any) -> None:
    t = Table(title="acceptance per domain")
    for col in ("domain", "trajectories", "kept", "rejected", "abstained", "acceptance"):
        t.add_column(col, justify="left" if col == "domain" else "right")
    for dom, d in summary["per_domain"].items():
        t.add_row(dom, str(d["total"]), str(d["kept"]), str(d["rejected"]), str(d["abstained"]), f"{d['acceptance']:.0%}")
    t.add_row("[bold]all[/]", str(summary["trajectories"]), str(summary["kept"]), str(summary["rejected"]),
              str(summary["abstained"]), f"{summary['acceptance']:.0%}")
    console.print(t)
    if summary["rejections"]:
        r = Table(title="why trajectories were not kept")
        r.add_column("reason")
        r.add_column("count", justify="right")
        r.add_column("example", overflow="fold")
        examples: dict[str, str] = {}
        for s in report.scored:
            if not s.kept:
                examples.setdefault(s.category, f"{s.task_id}: {s.reason}"[:160])
        for cat, n in summary["rejections"].items():
            r.add_row(cat, str(n), examples.get(cat, ""))
        console.print(r)


@app.command("filter")
@one_line_errors
def filter_cmd(
    tasks: str = typer.Option(..., "--tasks", help="directory (or tasks.jsonl) written by `dojo synth tasks`"),
    trajectories: str = typer.Option(..., "--trajectories", help="directory (or trajectories.jsonl) written by `dojo synth trajectories`"),
    out: str = typer.Option(..., "--out", help="directory for the kept trajectories, the TRL dataset (sft/), scores.jsonl"),
    config: str = typer.Option(None, "--config", help="reward config YAML (rewards.compose.RewardConfig); default: "
                                                      "world_state, communication, tool_validity, reverify gate"),
    judge_base_url: str = url_option(None, "--judge-base-url", help="OpenAI-compatible endpoint of an LLM judge"),
    judge_model: str = typer.Option(None, "--judge-model", help="model name at --judge-base-url"),
    judge_api_key_env: str = typer.Option("OPENAI_API_KEY", "--judge-api-key-env", help="environment variable with the judge's API key"),
    judge_cache_dir: str = typer.Option(None, "--judge-cache-dir", help="on-disk cache of judge responses"),
    threshold: float = typer.Option(0.5, "--threshold", min=0.0, max=1.0, help="keep when the judge scores at least this"),
    keep_abstain: bool = typer.Option(False, "--keep-abstain", help="keep trajectories a judge or gate abstained on"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    sandboxes: int = count_option(4, "--sandboxes", limit="sandboxes", min=1, help="trajectories verified in parallel"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON instead of tables"),
    domain_dir: list[str] = DomainDirOpt,
) -> None:
    """Rejection-sample trajectories into SFT data: keep those whose verifiable rewards all score 1.0 (no hack
    flags) and, with a judge, that the judge scores >= --threshold; write the kept ones in TRL's format,
    scores.jsonl with every component's reason, and print acceptance per domain and rejection reasons."""
    import anyio

    from rewards.filter import filter_trajectories, write_filtered
    from synth.tasks import load_tasks

    _check_backend(backend)
    use_domain_dirs(domain_dir)
    reward_cfg = reward_config(config) if config is not None else None
    task_list = load_tasks(tasks)
    trajs = load_trajectories(trajectories)
    check_out_dir(out)
    client = judge_client(judge_base_url, judge_model, judge_api_key_env, judge_cache_dir)

    judge = None
    if client is not None:
        from rewards.judge import RubricJudge

        judge = RubricJudge(client, threshold=threshold)

    async def run():
        try:
            async with _pool(backend, sandboxes) as pool:
                return await filter_trajectories(task_list, trajs, pool=pool, config=reward_cfg, judge=judge,
                                                 llm_client=client, threshold=threshold, keep_abstain=keep_abstain,
                                                 concurrency=sandboxes)
        finally:
            if client is not None:
                await client.aclose()

    report = anyio.run(run)
    if judge is not None:
        check_endpoint("the judge", judge_base_url, judge.stats["llm_requests"], judge.stats["llm_errors"], judge.last_error)
    if as_json:  # stdout is the JSON alone
        from datasets.utils.logging import disable_progress_bar

        disable_progress_bar()
    summary = write_filtered(report, out)
    if as_json:
        print(json.dumps(summary))
        return
    _print_filter(summary, report)
    console.print(f"kept {summary['kept']}/{summary['trajectories']} trajectories ({summary['acceptance']:.0%}) in "
                  f"{summary['seconds']:.1f}s; wrote {summary['jsonl']}, {summary['dataset']} ({summary['rows']} rows) "
                  f"and {summary['scores']}", highlight=False)


@app.command("agreement")
@one_line_errors
def agreement_cmd(
    tasks: str = typer.Option(..., "--tasks", help="directory (or tasks.jsonl) written by `dojo synth tasks`"),
    trajectories: str = typer.Option(..., "--trajectories", help="directory (or trajectories.jsonl) of labelled trajectories"),
    judge_base_url: str = url_option(..., "--judge-base-url", help="OpenAI-compatible endpoint of the judge"),
    judge_model: str = typer.Option(..., "--judge-model", help="model name at --judge-base-url"),
    judge_api_key_env: str = typer.Option("OPENAI_API_KEY", "--judge-api-key-env", help="environment variable with the judge's API key"),
    judge_cache_dir: str = typer.Option(None, "--judge-cache-dir", help="on-disk cache of judge responses"),
    judge_max_tokens: int = count_option(1024, "--judge-max-tokens", limit="tokens", min=16, help="cap on the judge's answer"),
    threshold: float = typer.Option(0.5, "--threshold", min=0.0, max=1.0, help="judge score that counts as success"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    sandboxes: int = count_option(4, "--sandboxes", limit="sandboxes", min=1, help="trajectories checked in parallel"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
    domain_dir: list[str] = DomainDirOpt,
) -> None:
    """How often the LLM judge agrees with the verifiable world-state reward: precision, recall and F1 of
    "judge says success" against "state says success", the confusion matrix and the abstention rate."""
    import anyio

    from rewards.filter import judge_agreement
    from rewards.judge import RubricJudge
    from synth.tasks import load_tasks

    _check_backend(backend)
    use_domain_dirs(domain_dir)
    task_list = load_tasks(tasks)
    trajs = load_trajectories(trajectories)
    client = judge_client(judge_base_url, judge_model, judge_api_key_env, judge_cache_dir)

    judge = RubricJudge(client, threshold=threshold, max_tokens=judge_max_tokens)

    async def run():
        try:
            async with _pool(backend, sandboxes) as pool:
                return await judge_agreement(task_list, trajs, pool=pool, judge=judge, threshold=threshold,
                                             concurrency=sandboxes)
        finally:
            await client.aclose()

    rep = anyio.run(run)
    check_endpoint("the judge", judge_base_url, judge.stats["llm_requests"], judge.stats["llm_errors"], judge.last_error)
    if as_json:
        print(json.dumps({**rep.model_dump(exclude={"items"}), "confusion": rep.confusion()}))
        return
    fmt = lambda x: "n/a" if x is None else f"{x:.2f}"
    m = Table(title=f"judge vs world state ({rep.compared} compared of {rep.total})")
    m.add_column("")
    m.add_column("judge: success", justify="right")
    m.add_column("judge: failure", justify="right")
    m.add_row("state: success", str(rep.tp), str(rep.fn))
    m.add_row("state: failure", str(rep.fp), str(rep.tn))
    console.print(m)
    console.print(f"precision {fmt(rep.precision)}, recall {fmt(rep.recall)}, F1 {fmt(rep.f1)}, accuracy "
                  f"{fmt(rep.accuracy)}, kappa {fmt(rep.cohen_kappa)}; judge abstained on {rep.judge_abstained} "
                  f"({rep.abstention_rate:.0%}), state unverifiable on {rep.state_unverified}", highlight=False)
    why = next((i["judge_reason"] for i in rep.items if i.get("judge") is None and i.get("judge_reason")), None)
    if rep.judge_abstained and why:
        console.print(f"first abstention: {why}", highlight=False, markup=False)
