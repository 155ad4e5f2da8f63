"""Tasks brought with an environment: gold actions and required outputs, validated by gold replay.

An OpenAI-function environment (toolzoo.openai_functions) usually ships its tasks as an
instruction, the gold actions (`{"name", "kwargs"}`) and the outputs the agent must report. Each
becomes a `Task` as it is: the rubric and persona are left empty, not invented; the user scenario
is the instruction. A task is kept only if its gold actions replay without error, twice to the
same state, in fresh sandboxes, and every required output appears in their results (as for
synthesised tasks) -- unless the import says the outputs are computed (``computed_outputs``: a total the
agent adds up appears in no tool result; the communication reward still checks the agent's answer for it); a gold call failing with a declared error (a look-up of a user that does not
exist) is part of the gold, as in the rewards' replay. The others are dropped with the reason.

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


def read_task_file(path: str | Path) -> list[tuple[str, Any]]:
    """[(where, raw task)]: `where` names the file and the task's line (JSONL, Python) or number (JSON)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise SpecError(f"{path}: no such task file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not UTF-8 text (byte {e.object[e.start]:#x} at offset {e.start})") from None
    try:
        if p.suffix == ".py":
            tree = ast.parse(text)
            calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Task"]
            out = []
            for c in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
                try:
                    out.append((f"{path}:{c.lineno}", _call_to_dict(c)))
                except ValueError:
                    raise SpecError(f"{path}:{c.lineno}: a Task(...) must hold literals only (the file is read, "
                                    "not run)") from None
            return out
        if p.suffix == ".jsonl":
            out = []
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        out.append((f"{path}:{n}", json.loads(line)))
                    except ValueError as e:
                        raise SpecError(f"{path}:{n}: not JSON: {e}") from None
            return out
        rows = json.loads(text)
    except SyntaxError as e:
        raise SpecError(f"{path}:{e.lineno}: {e.msg}") from None
    except ValueError as e:
        raise SpecError(f"{path}: cannot read the tasks: {e}") from None
    except (RecursionError, MemoryError):
        raise SpecError(f"{path}: nested too deeply to read") from None
    if not isinstance(rows, list):
        raise SpecError(f"{path}: a JSON task file holds a list of tasks")
    return [(f"{path}: task #{i + 1}", r) for i, r in enumerate(rows)]


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) and not isinstance(v, bool)
                                              for v in value):
        raise SpecError(f"{what} must be a list of strings (or numbers), e.g. [\"Reno\"], not {value!r:.60}")
    return [str(v) for v in value]


def to_task(raw: dict[str, Any], domain: Domain, index: int, where: str | None = None) -> Task:
    """One imported task; keys: instruction, actions [{name, kwargs|arguments}], outputs, optional id."""
    where = where or f"task #{index + 1}"
    if not isinstance(raw, dict) or not isinstance(raw.get("instruction"), str):
        raise SpecError(f"{where}: needs an instruction (a string)")
    tid = str(raw.get("id") or f"{domain.name}-{index:05d}")
    here = f"{where} ({tid})"
    tools = {t.name for t in domain.tools}
    raw_actions = raw.get("actions") or []
    if not isinstance(raw_actions, list):
        raise SpecError(f"{here}: actions must be a list of {{\"name\", \"kwargs\"}} objects")
    actions = []
    for j, a in enumerate(raw_actions):
        if not isinstance(a, dict) or not isinstance(a.get("name"), str):
            raise SpecError(f"{here}: action #{j + 1} needs a name")
        args = a.get("kwargs", a.get("arguments", {}))
        if args is not None and not isinstance(args, dict):
            raise SpecError(f"{here}: action #{j + 1} ({a['name']}): kwargs must be an object of arguments, "
                            f"not {type(args).__name__} {args!r:.60}")
        if a["name"] not in tools:
            raise SpecError(f"{here}: action {a['name']!r} is not a tool of {domain.name}")
        actions.append(Action(name=a["name"], arguments=dict(args or {})))
    instruction = raw["instruction"]
    return Task(
        id=tid, domain=domain.name, seed=0,
        instruction=instruction, persona="",
        user_scenario=UserScenario(persona="", reason_for_call=instruction, task_instructions=instruction),
        gold_actions=actions, expected_outputs=_strings(raw.get("outputs"), f"{here}: outputs"), rubric=Rubric(),
        tools=[t.name for t in domain.tools], difficulty=difficulty_of(len(actions), False),
        provenance="imported",
    )


def read_tasks(path: str | Path, domain: Domain) -> list[Task]:
    """Every task of the file converted, or a SpecError naming the file, line (or number) and task."""
    from pydantic import ValidationError

    from sandboxes.cli_files import validation_reason

    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for i, (where, raw) in enumerate(read_task_file(path)):
        try:
            t = to_task(raw, domain, i, where)
        except ValidationError as e:
            raise SpecError(f"{where}: {validation_reason(e)}") from None
        except RecursionError:
            raise SpecError(f"{where}: nested too deeply") from None
        if t.id in seen:
            raise SpecError(f"{where}: task id {t.id!r} is also the id of {seen[t.id]}; ids must be unique")
        seen[t.id] = where
        tasks.append(t)
    if not tasks:
        raise SpecError(f"{path}: no tasks")
    return tasks


async def validate_imported(tasks: Sequence[Task], domain: Domain, pool: Any, *,
                            computed_outputs: bool = False) -> tuple[list[Task], list[DroppedTask]]:
    """Record each task's gold final state, then check it as synthesised tasks are checked. With
    ``computed_outputs`` an expected output need not appear in the gold results (module docstring)."""
    results: list[tuple[Task, bool, str]] = [(t, False, "") for t in tasks]

    async def one(i: int) -> None:
        t = tasks[i]
        first = await replay_task(t, pool, domain, declared_failures=True)
        if not first.ok:
            results[i] = (t, False, first.reason or "replay failed")
            return
        t = t.model_copy(update={"final_state_hash": first.final_state_hash})
        ok, why = await check_task(t, pool, domain, declared_failures=True, outputs_in_results=not computed_outputs)
        if not ok and why.startswith("output missing"):
            why += ("; if the agent is meant to compute it (a sum, a count), import with --computed-outputs: "
                    "it is then checked in the agent's answer only")
        results[i] = (t, ok, why)

    async with anyio.create_task_group() as tg:
        for i in range(len(tasks)):
            tg.start_soon(one, i)
    kept = [t for t, ok, _ in results if ok]
    dropped = [DroppedTask(id=t.id, domain=t.domain, stage="replay", reason=why) for t, ok, why in results if not ok]
    return kept, dropped


def import_tasks(path: str | Path, domain: Domain, *, backend: str = "auto", sandboxes: int = 4,
                 computed_outputs: bool = False) -> tuple[list[Task], list[DroppedTask]]:
    """Read, convert and replay-validate the tasks at `path` for `domain`: (kept, dropped)."""
    from sandboxes import SandboxConfig, SandboxPool

    tasks = read_tasks(path, domain)

    async def go() -> tuple[list[Task], list[DroppedTask]]:
        async with SandboxPool(SandboxConfig(backend=backend), size=sandboxes) as pool:  # type: ignore[arg-type]
            return await validate_imported(tasks, domain, pool, computed_outputs=computed_outputs)

    return anyio.run(go)
