"""Tasks brought with an environment: gold actions and required outputs, validated by gold replay.

An OpenAI-function environment (toolzoo.openai_functions) usually ships its tasks as an
instruction, the gold actions (`{"name", "kwargs"}`) and the outputs the agent must report. Each
becomes a `Task` as it is: the rubric and persona are left empty, not invented; the user scenario
is the instruction. A task is kept only if its gold actions replay without error, twice to the
same state, in fresh sandboxes, and every required output appears in their results (as for
synthesised tasks); the others are dropped with the reason.

Task files: a JSON list, JSONL, or Python source of `Task(...)` calls with `Action(...)` in them
(tau-bench's tasks_*.py), read without running it.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from synth.task_models import Action, DroppedTask, Rubric, Task, UserScenario
from synth.task_replay import check_task, replay_task
from synth.tasks import difficulty_of
from toolzoo.spec import Domain, SpecError


def _call_to_dict(node: ast.AST) -> Any:
    """Task(...)/Action(...) calls and literals -> plain data."""
    if isinstance(node, ast.Call):
        return {kw.arg: _call_to_dict(kw.value) for kw in node.keywords if kw.arg}
    if isinstance(node, ast.List | ast.Tuple):
        return [_call_to_dict(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_call_to_dict(k): _call_to_dict(v) for k, v in zip(node.keys, node.values, strict=True)}
    return ast.literal_eval(node)


def read_task_file(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise SpecError(f"{path}: no such task file")
    text = p.read_text()
    try:
        if p.suffix == ".py":
            tree = ast.parse(text)
            calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Task"]
            return [_call_to_dict(c) for c in calls]
        if p.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        rows = json.loads(text)
    except (ValueError, SyntaxError) as e:
        raise SpecError(f"{path}: cannot read the tasks: {e}") from None
    if not isinstance(rows, list):
        raise SpecError(f"{path}: a JSON task file holds a list of tasks")
    return rows


def to_task(raw: dict[str, Any], domain: Domain, index: int) -> Task:
    """One imported task; keys: instruction, actions [{name, kwargs|arguments}], outputs, optional id."""
    if not isinstance(raw, dict) or not isinstance(raw.get("instruction"), str):
        raise SpecError(f"task #{index + 1}: needs an instruction")
    actions = []
    for a in raw.get("actions") or []:
        if not isinstance(a, dict) or not isinstance(a.get("name"), str):
            raise SpecError(f"task #{index + 1}: an action needs a name")
        args = a.get("kwargs", a.get("arguments", {}))
        if a["name"] not in {t.name for t in domain.tools}:
            raise SpecError(f"task #{index + 1}: action {a['name']!r} is not a tool of {domain.name}")
        actions.append(Action(name=a["name"], arguments=dict(args or {})))
    instruction = raw["instruction"]
    return Task(
        id=str(raw.get("id") or f"{domain.name}-{index:05d}"), domain=domain.name, seed=0,
        instruction=instruction, persona="",
        user_scenario=UserScenario(persona="", reason_for_call=instruction, task_instructions=instruction),
        gold_actions=actions, expected_outputs=[str(o) for o in raw.get("outputs") or []], rubric=Rubric(),
        tools=[t.name for t in domain.tools], difficulty=difficulty_of(len(actions), False),
        provenance="imported",
    )


async def validate_imported(tasks: Sequence[Task], domain: Domain, pool: Any) -> tuple[list[Task], list[DroppedTask]]:
    """Record each task's gold final state, then check it as synthesised tasks are checked."""
    results: list[tuple[Task, bool, str]] = [(t, False, "") for t in tasks]

    async def one(i: int) -> None:
        t = tasks[i]
        first = await replay_task(t, pool, domain)
        if not first.ok:
            results[i] = (t, False, first.reason or "replay failed")
            return
        t = t.model_copy(update={"final_state_hash": first.final_state_hash})
        ok, why = await check_task(t, pool, domain)
        results[i] = (t, ok, why)

    async with anyio.create_task_group() as tg:
        for i in range(len(tasks)):
            tg.start_soon(one, i)
    kept = [t for t, ok, _ in results if ok]
    dropped = [DroppedTask(id=t.id, domain=t.domain, stage="replay", reason=why) for t, ok, why in results if not ok]
    return kept, dropped


def import_tasks(path: str | Path, domain: Domain, *, backend: str = "auto",
                 sandboxes: int = 4) -> tuple[list[Task], list[DroppedTask]]:
    """Read, convert and replay-validate the tasks at `path` for `domain`: (kept, dropped)."""
    from sandboxes import SandboxConfig, SandboxPool

    tasks = [to_task(r, domain, i) for i, r in enumerate(read_task_file(path))]
    if not tasks:
        raise SpecError(f"{path}: no tasks")

    async def go() -> tuple[list[Task], list[DroppedTask]]:
        async with SandboxPool(SandboxConfig(backend=backend), size=sandboxes) as pool:  # type: ignore[arg-type]
            return await validate_imported(tasks, domain, pool)

    return anyio.run(go)
