"""What evaluators can reach while a suite runs: the run's resources and the case's own.

pydantic-evals hands an evaluator only an ``EvaluatorContext`` (inputs, output, metadata,
attributes, metrics). Sandboxes, the judge and a tool episode's trajectory are not plain data, so
they live in two context variables that the runner and the case lifecycle set:

* :class:`RunResources` (one per model run): the sandbox pool (opened by the runner when a case
  needs one), the judge client, task lookup, sampling options.
* :class:`CaseResources` (one per case run): set by :class:`CaseSandboxLifecycle.setup` (a
  pydantic-evals ``CaseLifecycle``), so the task and every evaluator of that case run (they run in
  tasks spawned from it) see the same object. Its sandbox is leased from the pool on first use
  and given back in ``teardown``; the tool episode's task and trajectory are kept here for the
  evaluators that score them.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic_evals.lifecycle import CaseLifecycle

if TYPE_CHECKING:
    from sandboxes import Sandbox, SandboxPool
    from synth.episode import Trajectory
    from synth.tasks import Task

log = logging.getLogger("tooldojo.evals")

__all__ = ["CaseResources", "CaseSandboxLifecycle", "EvalError", "RunResources", "case_resources", "run_resources"]


class EvalError(ValueError):
    """A problem with a suite, a model spec, the history or the options; the message says what to do."""


@dataclass
class RunResources:
    """Shared by every case of one model's run."""

    pool: SandboxPool | None = None
    judge: Any = None                      # an LLMClient-like object (``json()``, ``config.model``) or None
    judge_error: str | None = None         # why there is no judge, shown when a judge evaluator runs
    backend: str = "auto"
    pool_error: str | None = None          # why no pool could be opened (cases that need one fail with it)
    cache: dict[Any, Any] = field(default_factory=dict)    # judges, built rewards: reused across cases
    _tasks: dict[Path, dict[str, Task]] = field(default_factory=dict)

    def require_pool(self, what: str) -> SandboxPool:
        if self.pool is None:
            if self.pool_error:
                raise EvalError(f"{what} needs a sandbox, but none could be started: {self.pool_error}")
            raise EvalError(f"{what} needs a sandbox, but this run opened no sandbox pool (run the suite with "
                            "`dojo eval run`, or mark the evaluator class with needs_sandbox = True)")
        return self.pool

    def rubric_judge(self, **params: Any) -> Any:
        """One rewards.judge.RubricJudge per parameter set (it memoises verdicts)."""
        if self.judge is None:
            raise EvalError(self.judge_error or "no judge model: run with --judge MODEL")
        key = ("judge", *sorted(params.items()))
        if key not in self.cache:
            from rewards.judge import RubricJudge

            self.cache[key] = RubricJudge(self.judge, **params)
        return self.cache[key]

    def tasks_at(self, path: Path) -> dict[str, Task]:
        path = path.resolve()
        if path not in self._tasks:
            from synth.tasks import load_tasks

            self._tasks[path] = {t.id: t for t in load_tasks(path)}
        return self._tasks[path]


@dataclass
class CaseResources:
    """One case run's own things (a repeat of a case is a case run of its own)."""

    run: RunResources
    task: Task | None = None
    trajectory: Trajectory | None = None
    conversation: list[dict[str, Any]] | None = None   # chat cases: the messages sent, then the answer
    _sandbox: Sandbox | None = None
    _lock: anyio.Lock = field(default_factory=anyio.Lock)
    sandbox_leases: int = 0

    async def sandbox(self) -> Sandbox:
        """This case's sandbox: leased from the run's pool on first use, the same one after that."""
        async with self._lock:
            if self._sandbox is None:
                pool = self.run.require_pool("this evaluator")
                self._sandbox = await pool.acquire(timeout=600)
                self.sandbox_leases += 1
            return self._sandbox

    async def release(self) -> None:
        sb, self._sandbox = self._sandbox, None
        if sb is not None and self.run.pool is not None:
            with anyio.CancelScope(shield=True):
                await self.run.pool.release(sb)


_RUN: contextvars.ContextVar[RunResources | None] = contextvars.ContextVar("tooldojo_eval_run", default=None)
_CASE: contextvars.ContextVar[CaseResources | None] = contextvars.ContextVar("tooldojo_eval_case", default=None)


def run_resources() -> RunResources:
    """The current run's resources (an empty set outside `dojo eval run`: no pool, no judge)."""
    run = _RUN.get()
    if run is None:
        run = RunResources(judge_error="no judge: this evaluation was not started by the tooldojo runner")
        _RUN.set(run)
    return run


def case_resources() -> CaseResources:
    """The current case run's resources (created on first use when no lifecycle set them)."""
    case = _CASE.get()
    if case is None:
        case = CaseResources(run_resources())
        _CASE.set(case)
    return case


def set_run(run: RunResources | None) -> contextvars.Token:
    return _RUN.set(run)


def reset_run(token: contextvars.Token) -> None:
    _RUN.reset(token)


class CaseSandboxLifecycle(CaseLifecycle):
    """pydantic-evals' per-case lifecycle: fresh :class:`CaseResources` before the task runs; the
    case's sandbox (if any evaluator or the task used one) goes back to the pool after the
    evaluators, whatever happened. ``teardown`` never raises (that would abort the whole run)."""

    async def setup(self) -> None:
        self.resources = CaseResources(run_resources())
        self._token = _CASE.set(self.resources)

    async def teardown(self, result: Any) -> None:
        resources = getattr(self, "resources", None)
        if resources is None:
            return
        try:
            await resources.release()
        except Exception as e:  # noqa: BLE001 - a broken sandbox must not end the run
            log.warning("could not give case %s's sandbox back: %s", self.case.name, e)
        finally:
            try:
                _CASE.reset(self._token)
            except ValueError:  # reset from another context: nothing to undo there
                pass
