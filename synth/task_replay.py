"""Gold replay (step 6 of synth/tasks.py): run a task's gold actions in fresh sandboxes at its
seeded state; a task is kept only if every action succeeds, two replays end in the same state as
the generation run, and every expected output appears in the gold results. Imported tasks
(synth.imported_tasks) may have gold calls that fail with a declared error (`declared_failure`),
as the rewards' gold replay allows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
from pydantic import BaseModel, Field

from sandboxes.models import state_digest
from synth.task_models import CALL_TIMEOUT, DroppedTask, Task
from synth.task_values import _dumps
from toolzoo.domains import resolve_domain
from toolzoo.mcp_domain import pool_for
from toolzoo.spec import Domain


def declared_failure(domain: Domain, result: Any) -> bool:
    """Is this failed call a tool error the tool declares (`ToolFailure` with a code in its spec's
    `errors`, or any `tool_failure` of a tool that declares none, e.g. an MCP tool)? Such a call is
    part of a gold trajectory (tau-bench's "look up O-9999, then cancel O-1000"): its state effect is
    nil and the replay goes on. Any other failure (bad arguments, unknown tool, crash, timeout) means
    the gold actions are broken and the task cannot be verified. (Task synthesis stays strict: a
    task it writes has no failing gold call; imported tasks such as tau-bench's do.)"""
    if getattr(result, "kind", None) != "tool_failure":
        return False
    try:
        errors = domain.tool(result.name).errors
    except (KeyError, ValueError):
        return False
    return not errors or result.code in errors


class ReplayResult(BaseModel):
    ok: bool
    final_state_hash: str = ""
    outputs: list[Any] = Field(default_factory=list)
    reason: str | None = None


async def replay_task(task: Task, pool: Any, domain: Domain | None = None, *,
                      declared_failures: bool = False) -> ReplayResult:
    """Run the gold actions in a fresh sandbox loaded at the task's seeded state.

    `domain` is the task's domain; by default it is looked up by name (built-in or registered).
    With `declared_failures`, a call failing with a declared error is a result (`{"error": code,
    "message": ...}`) and the replay goes on.
    """
    from toolzoo.runtime import bundle

    domain = resolve_domain(task.domain, domain)
    async with pool_for(domain, pool).sandbox() as sb:
        await sb.load_domain(bundle(domain, seed=task.seed))  # a pooled sandbox, reset on release
        outputs = []
        for i, a in enumerate(task.gold_actions):
            r = await sb.call_tool(a.name, a.arguments, timeout=CALL_TIMEOUT)
            if not r.ok and declared_failures and declared_failure(domain, r):
                outputs.append({"error": r.code, "message": r.message})
                continue
            if not r.ok:
                return ReplayResult(ok=False, outputs=outputs, reason=(
                    f"action failed: #{i + 1} {a.name} -> {r.kind}{' ' + r.code if r.code else ''}: {r.message[:160]}"))
            outputs.append(r.output)
        snap = await sb.snapshot()
    return ReplayResult(ok=True, final_state_hash=state_digest(snap.state), outputs=outputs)


async def check_task(task: Task, pool: Any, domain: Domain | None = None, *,
                     declared_failures: bool = False, outputs_in_results: bool = True) -> tuple[bool, str]:
    """Gold replay twice (fresh sandboxes): (ok, reason). Sets nothing; the task's hash must be reproduced.
    With ``outputs_in_results`` (the default) every expected output must also appear in the gold calls'
    results; without it, outputs the agent computes (a sum, a count) are allowed, and only the agent's
    answer is checked against them (the communication reward)."""
    runs = [await replay_task(task, pool, domain, declared_failures=declared_failures) for _ in range(2)]
    for r in runs:
        if not r.ok:
            return False, r.reason or "replay failed"
    if runs[0].final_state_hash != runs[1].final_state_hash:
        return False, "nondeterministic: two replays end in different states"
    if task.final_state_hash and runs[0].final_state_hash != task.final_state_hash:
        return False, "state mismatch: the replay does not reach the recorded final state"
    blob = _dumps(runs[0].outputs)
    for v in task.expected_outputs if outputs_in_results else ():
        if v not in blob:
            return False, f"output missing: expected output {v!r} is not in the gold results"
    return True, "ok"


async def validate_tasks(tasks: Sequence[Task], pool: Any,
                         domains: Sequence[Domain] = ()) -> tuple[list[Task], list[DroppedTask]]:
    kept: list[Task] = []
    dropped: list[DroppedTask] = []
    results: list[tuple[bool, str]] = [(False, "")] * len(tasks)
    by_name = {d.name: d for d in domains}

    async def one(i: int) -> None:
        results[i] = await check_task(tasks[i], pool, by_name.get(tasks[i].domain))

    async with anyio.create_task_group() as tg:
        for i in range(len(tasks)):
            tg.start_soon(one, i)
    for t, (ok, why) in zip(tasks, results, strict=True):
        if ok:
            kept.append(t)
        else:
            dropped.append(DroppedTask(id=t.id, domain=t.domain, stage="replay", reason=why))
    return kept, dropped


def replay_tasks(tasks: Sequence[Task], *, backend: str = "auto", sandboxes: int = 4,
                 domains: Sequence[Domain] = ()) -> list[ReplayResult]:
    from sandboxes import SandboxConfig, SandboxPool

    by_name = {d.name: d for d in domains}

    async def go() -> list[ReplayResult]:
        out: list[ReplayResult] = [ReplayResult(ok=False)] * len(tasks)
        async with SandboxPool(SandboxConfig(backend=backend), size=sandboxes) as pool:  # type: ignore[arg-type]
            limiter = anyio.CapacityLimiter(sandboxes)

            async def one(i: int) -> None:
                async with limiter:
                    out[i] = await replay_task(tasks[i], pool, by_name.get(tasks[i].domain))

            async with anyio.create_task_group() as tg:
                for i in range(len(tasks)):
                    tg.start_soon(one, i)
        return out

    return anyio.run(go)
