"""Run a suite against one or more models with pydantic-evals, and keep the results.

    records = run_suite_sync(load_suite("examples/evals/personal"), [parse_model("tiny@http://...")],
                             RunOptions(repeat=3))

For each model in turn (a grid): start it (a local checkpoint gets its own vLLM server), open a
sandbox pool if any case needs one, and call ``Dataset.evaluate`` with the model as the task,
``repeat``, ``max_concurrency`` and a per-case lifecycle (evals.context). The task runs a chat
case as one model call and a tool episode with synth.episode.run_episode. Whatever a case does
wrong (an unreachable model, a missing task, a case that did not load) fails that case with the
reason; the run goes on. Then the model stops and the run is saved to the history.

Repeats and the cache: the k-th run of a case samples with ``seed + k`` (runs of a case get seeds
seed, seed+1, ... in the order they start), so repeats are distinct samples and an unchanged
re-run asks for exactly the same requests, which the response cache answers without a call.
``--only-failed`` re-runs the failed cases with the same seeds: it re-asks the model only for runs
whose call failed (failures are not cached) and re-evaluates cached answers, e.g. after fixing an
evaluator; pass ``--seed`` or ``--no-cache`` to draw new samples.
"""

from __future__ import annotations

import logging
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anyio

from evals.context import (
    CaseSandboxLifecycle,
    EvalError,
    RunResources,
    case_resources,
    reset_run,
    set_run,
)
from evals.evaluators import needs_sandbox
from evals.history import current_view, default_history_dir, new_run_id, run_dir, save_run
from evals.inputs import EvalInputs, InlineTask
from evals.models import EvalModel
from evals.results import PassAtK, RunRecord, case_results, summarize
from evals.suite import Suite, SuiteDataset

log = logging.getLogger("tooldojo.evals")

__all__ = ["RunOptions", "cases_to_run", "run_suite", "run_suite_sync"]

_INFRA_ENDS = ("agent_error", "setup_error", "sandbox_dead", "user_error")


@dataclass
class RunOptions:
    repeat: int = 1
    only_failed: bool = False
    cases: list[str] | None = None          # fnmatch patterns of case names to run (default: all)
    concurrency: int = 4
    backend: str = "auto"
    history_dir: Path = field(default_factory=default_history_dir)
    cache: bool = True
    cache_dir: Path | None = None           # default: HISTORY/cache
    seed: int = 0
    temperature: float = 0.7
    max_tokens: int = 512
    max_turns: int = 6
    max_retries: int = 2
    timeout_s: float = 120.0
    judge: EvalModel | None = None
    judge_client: Any = None                # an LLMClient-like object used as the judge as is (tests)
    progress: bool = True
    save: bool = True

    def resolved_cache_dir(self) -> Path | None:
        if not self.cache:
            return None
        return self.cache_dir or (self.history_dir / "cache")


class CaseNotRunnable(Exception):
    """The case could not be run (it did not load, its task is missing, the episode broke)."""


# ============================================================================ the task
def _task_for(inputs: EvalInputs, run: RunResources) -> Any:
    if isinstance(inputs.task, InlineTask):
        return inputs.task.to_task(inputs.task.id or "inline")
    path = inputs.base_dir / (inputs.tasks or "tasks.jsonl")
    try:
        tasks = run.tasks_at(path)
    except (OSError, ValueError) as e:
        raise CaseNotRunnable(f"cannot read tasks from {path}: {' '.join(str(e).split())[:300]}") from None
    if inputs.task not in tasks:
        raise CaseNotRunnable(f"no task {inputs.task!r} in {path} ({len(tasks)} tasks there)")
    return tasks[inputs.task]


def make_task(model: EvalModel, options: RunOptions):
    """The pydantic-evals task: EvalInputs -> the model's final answer text."""
    from pydantic_evals import set_eval_attribute

    starts: dict[int, int] = {}

    async def run_case(inputs: EvalInputs) -> str:
        if inputs.load_error:
            raise CaseNotRunnable(inputs.load_error)
        k = starts.get(id(inputs), 0)          # the k-th run of this case to start: seed + k
        starts[id(inputs)] = k + 1
        sampling = {"seed": options.seed + k,
                    "temperature": options.temperature if inputs.temperature is None else inputs.temperature,
                    "max_tokens": options.max_tokens if inputs.max_tokens is None else inputs.max_tokens}
        set_eval_attribute("seed", sampling["seed"])
        case = case_resources()
        if inputs.task is None:
            msgs = inputs.chat_messages()
            msg = await model.agent(task=None, **sampling).act(list(msgs), [])
            text = (msg.get("content") if isinstance(msg, dict) else None) or ""
            case.conversation = [*msgs, {"role": "assistant", "content": text}]
            return text

        from synth.episode import EpisodeLimits, run_episode
        from synth.usersim import ScriptedUser

        run = case.run
        task = _task_for(inputs, run)
        pool = run.require_pool("a tool episode")
        turns = inputs.max_turns or options.max_turns
        traj = await run_episode(task, model.agent(task=task, **sampling), ScriptedUser(max_turns=turns), pool,
                                 limits=EpisodeLimits(max_turns=turns, max_tool_calls=4 * turns))
        case.task, case.trajectory = task, traj
        set_eval_attribute("episode", {
            "task": task.id, "domain": task.domain, "termination": traj.termination,
            "agent_turns": traj.stats.agent_turns, "tool_calls": traj.stats.tool_calls,
            "malformed_calls": traj.stats.malformed_calls, "reached_expected_state": traj.reached_expected_state,
            "messages": [{k: m.get(k) for k in ("role", "content", "tool_calls") if m.get(k) is not None}
                         for m in traj.messages if m.get("role") != "system"],
        })
        if traj.termination in _INFRA_ENDS:
            raise CaseNotRunnable(f"the episode ended with {traj.termination}: {traj.error}")
        if traj.termination == "max_tokens" and traj.stats.agent_turns == 0:
            # not a failed case: the model never got to answer (its first prompt did not fit its context)
            raise CaseNotRunnable(f"the prompt (system prompt and {len(traj.tools)} tool schemas) does not fit the "
                                  f"model's context, so it never answered ({traj.error}); use fewer tools, a shorter "
                                  "system prompt or a model with a longer context")
        last = next((m for m in reversed(traj.messages) if m.get("role") == "assistant" and m.get("content")), None)
        return (last or {}).get("content") or ""

    run_case.__name__ = f"model:{model.label}"
    return run_case


# ============================================================================ selection
def cases_to_run(suite: Suite, model: EvalModel, options: RunOptions) -> tuple[list[str], str | None]:
    """(case names, a note): the cases matching --case, and with --only-failed only those that did not
    pass in the model's current view of this suite."""
    import fnmatch

    names = suite.case_names
    if options.cases:
        names = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in options.cases)]
        if not names:
            raise EvalError(f"no case matches {', '.join(options.cases)} in suite {suite.name}")
    if not options.only_failed:
        return names, None
    view = current_view(options.history_dir, suite.name, model.label)
    if view is None:
        raise EvalError(f"--only-failed: {model.label} has no earlier run of suite {suite.name} in "
                        f"{options.history_dir}; run it once without --only-failed")
    failed = {c.name for c in view.cases if not c.all_passed}
    keep = [n for n in names if n in failed]
    return keep, f"{len(keep)} of {len(view.cases)} cases failed last time ({view.run_id})"


def _needs_pool(ds: SuiteDataset) -> bool:
    return any(isinstance(c.inputs, EvalInputs) and c.inputs.task is not None and not c.inputs.load_error
               or any(needs_sandbox(e) for e in c.evaluators) for c in ds.cases) \
        or any(needs_sandbox(e) for e in ds.evaluators)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


# ============================================================================ one model, then the grid
async def _run_model(suite: Suite, model: EvalModel, options: RunOptions, judge: Any, judge_error: str | None,
                     log_dir: Path) -> RunRecord | None:
    from sandboxes import SandboxConfig, SandboxError, SandboxPool

    names, note = cases_to_run(suite, model, options)
    if note:
        log.info("%s: %s", model.label, note)
    if not names:
        return None
    ds = suite.subset(names)
    if options.repeat > 1:
        ds.report_evaluators = [*ds.report_evaluators, PassAtK()]
    record = RunRecord(run_id=new_run_id(model.label), suite=suite.name, suite_version=suite.version,
                       suite_path=str(suite.path), model=model.describe(), label=model.label, started_at=_now(),
                       repeat=options.repeat, only_failed=options.only_failed,
                       options={"seed": options.seed, "temperature": options.temperature,
                                "max_tokens": options.max_tokens, "max_turns": options.max_turns,
                                "backend": options.backend, "cache": options.cache, "cases": options.cases})
    t0 = time.perf_counter()
    await model.start(cache_dir=options.resolved_cache_dir(), log_dir=log_dir, max_retries=options.max_retries,
                      timeout_s=options.timeout_s, max_concurrency=max(1, options.concurrency))
    try:
        async with AsyncExitStack() as stack:
            run = RunResources(judge=judge, judge_error=judge_error, backend=options.backend)
            if _needs_pool(ds):
                try:
                    run.pool = await stack.enter_async_context(SandboxPool(
                        SandboxConfig(backend=options.backend), size=min(2, options.concurrency),
                        max_concurrency=3 * options.concurrency + 1))
                    record.options["backend"] = run.pool.backend
                except SandboxError as e:   # the cases that need a sandbox fail with this; the others run
                    run.pool_error = f"{type(e).__name__}: {e}"
                    log.warning("no sandbox pool for this run: %s", run.pool_error)
            token = set_run(run)
            try:
                report = await ds.evaluate(make_task(model, options), name=model.label, task_name=model.label,
                                           max_concurrency=options.concurrency, progress=options.progress,
                                           repeat=options.repeat, lifecycle=CaseSandboxLifecycle,
                                           metadata={"model": model.describe(), "suite_version": suite.version})
            finally:
                reset_run(token)
    finally:
        with anyio.CancelScope(shield=True):
            await model.stop()
    tags = {c.name or "": list(getattr(c.metadata, "tags", []) or []) for c in ds.cases}
    record.cases = case_results(report, tags)
    record.summary = summarize(record.cases)
    record.usage = model.usage()
    record.finished_at = _now()
    record.duration_s = round(time.perf_counter() - t0, 3)
    if options.save:
        save_run(options.history_dir, record, report)
    return record


async def run_suite(suite: Suite, models: list[EvalModel], options: RunOptions | None = None) -> list[RunRecord]:
    """Run ``suite`` on every model in turn; returns one record per model that had cases to run."""
    options = options or RunOptions()
    if options.repeat < 1:
        raise EvalError("--repeat must be at least 1")
    if options.concurrency < 1:
        raise EvalError("--concurrency must be at least 1")
    labels = [m.label for m in models]
    if len(set(labels)) != len(labels):
        raise EvalError(f"two models share a label ({', '.join(labels)}): name them with LABEL=MODEL")
    if not models:
        raise EvalError("give at least one --model")
    log_dir = options.history_dir / "logs"
    records: list[RunRecord] = []
    judge, judge_error = options.judge_client, None
    async with AsyncExitStack() as stack:
        if judge is None and options.judge is not None:
            await options.judge.start(cache_dir=options.resolved_cache_dir(), log_dir=log_dir,
                                      max_retries=options.max_retries, timeout_s=options.timeout_s)
            stack.push_async_callback(options.judge.stop)
            judge = getattr(options.judge, "client", None)
            judge_error = getattr(options.judge, "start_error", None)
            if judge is None:
                judge_error = judge_error or f"the judge {options.judge.label} is not an endpoint model"
        elif judge is None:
            judge_error = "no judge model: run with --judge MODEL"
        for m in models:
            rec = await _run_model(suite, m, options, judge, judge_error, log_dir)
            if rec is not None:
                records.append(rec)
    return records


def run_suite_sync(suite: Suite, models: list[EvalModel], options: RunOptions | None = None) -> list[RunRecord]:
    return anyio.run(run_suite, suite, models, options)


def record_dir(options: RunOptions, record: RunRecord) -> Path:
    return run_dir(options.history_dir, record)

