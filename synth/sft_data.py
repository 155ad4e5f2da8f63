"""Trajectories to disk: the raw JSONL and a Hugging Face dataset for TRL's SFTTrainer.

    write_trajectories(trajs, "out/")   # out/trajectories.jsonl, out/sft/ (datasets.save_to_disk)
    ds = datasets.load_from_disk("out/sft")
    SFTTrainer(model=..., train_dataset=ds, args=SFTConfig(...))

The dataset is TRL's conversational tool-calling format: a `messages` column
(system, user, assistant turns whose `tool_calls[].function.arguments` is a
dict, and `tool` turns with `name` and `tool_call_id`) and a `tools` column of
OpenAI function schemas. Both are stored as `datasets.Json` so every row keeps
its own argument keys (an Arrow struct would merge the keys of all tools and
fill the gaps with nulls, which chat templates then render).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from synth.episode import Trajectory

if TYPE_CHECKING:
    from synth.tasks import Task


class ExportReport(BaseModel):
    trajectories: int
    rows: int
    skipped: int             # trajectories with a call whose arguments are not a JSON object, or no agent turn
    jsonl: str
    dataset: str
    episodes_s: float = 0.0  # wall time of the episodes alone (generate() fills it in)


def trl_messages(traj: Trajectory) -> list[dict[str, Any]] | None:
    """The trajectory's messages in TRL's format, or None when a tool call cannot be written as a dict.

    Trailing non-assistant turns (the user's ###STOP###, unanswered tool results) are dropped.
    """
    out: list[dict[str, Any]] = []
    for m in traj.messages:
        role = m.get("role")
        if role in ("system", "user"):
            out.append({"role": role, "content": m.get("content") or ""})
        elif role == "tool":
            out.append({"role": "tool", "name": m.get("name") or "", "tool_call_id": m.get("tool_call_id") or "",
                        "content": m.get("content") or ""})
        elif role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("content") or ""}
            if m.get("reasoning_content"):
                msg["reasoning_content"] = m["reasoning_content"]
            calls = []
            for c in m.get("tool_calls") or []:
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                    return None
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args.strip() else {}
                    except ValueError:
                        return None
                if not isinstance(args, dict):
                    return None
                calls.append({"id": c.get("id") or "", "type": "function",
                              "function": {"name": fn["name"], "arguments": args}})
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
    while out and out[-1]["role"] != "assistant":
        out.pop()
    return out if any(m["role"] == "assistant" for m in out) else None


def trl_row(traj: Trajectory) -> dict[str, Any] | None:
    messages = trl_messages(traj)
    if messages is None:
        return None
    return {
        "messages": messages,
        "tools": traj.tools,
        "task_id": traj.task_id,
        "domain": traj.domain,
        "termination": traj.termination,
        "reached_expected_state": traj.reached_expected_state,
        "malformed_calls": traj.stats.malformed_calls,
    }


def features():
    from datasets import Features, Json, List, Value

    return Features({
        "messages": List(Json()), "tools": List(Json()), "task_id": Value("string"), "domain": Value("string"),
        "termination": Value("string"), "reached_expected_state": Value("bool"), "malformed_calls": Value("int64"),
    })


def to_dataset(trajs: Sequence[Trajectory]):
    """A `datasets.Dataset` of the trajectories that can be written in TRL's format."""
    from datasets import Dataset

    rows = [r for r in (trl_row(t) for t in trajs) if r is not None]
    cols = {k: [r[k] for r in rows] for k in features()}
    return Dataset.from_dict(cols, features=features())


def write_trajectories(trajs: Sequence[Trajectory], out_dir: str | Path) -> ExportReport:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "trajectories.jsonl"
    with open(jsonl, "w") as f:
        for t in trajs:
            f.write(t.model_dump_json() + "\n")
    ds = to_dataset(trajs)
    ds.save_to_disk(str(out / "sft"))
    return ExportReport(trajectories=len(trajs), rows=len(ds), skipped=len(trajs) - len(ds),
                        jsonl=str(jsonl), dataset=str(out / "sft"))


def read_trajectories(path: str | Path) -> list[Trajectory]:
    with open(path) as f:
        return [Trajectory.model_validate_json(line) for line in f if line.strip()]


async def generate(
    tasks: Sequence[Task],
    out_dir: str | Path,
    *,
    agent: str = "scripted",
    user: str = "scripted",
    base_url: str | None = None,
    model: str | None = None,
    concurrency: int = 8,
    backend: str = "auto",
    best_of_n: int = 1,
    critique: bool = False,
    limits: Any = None,
) -> tuple[list[Trajectory], ExportReport]:
    """Run every task once with the chosen agent and user, then write the trajectories (the CLI's body)."""
    from sandboxes import SandboxConfig, SandboxPool
    from synth.episode import LLMAgent, ScriptedAgent, run_episodes
    from synth.usersim import LLMUser, ScriptedUser

    if agent not in ("scripted", "endpoint"):
        raise ValueError(f"unknown agent {agent!r}: use scripted or endpoint")
    if user not in ("scripted", "llm"):
        raise ValueError(f"unknown user {user!r}: use scripted or llm")
    client = None
    if agent == "endpoint" or user == "llm":
        if not (base_url and model):
            raise ValueError("--agent endpoint and --user llm need --base-url and --model")
        from synth.llm import LLMClient, LLMConfig

        client = LLMClient(LLMConfig(base_url=base_url, model=model))
    agent_factory = (lambda t: ScriptedAgent(t)) if agent == "scripted" else (lambda t: LLMAgent(client))
    user_factory = ((lambda t: ScriptedUser()) if user == "scripted"
                    else (lambda t: LLMUser(client, best_of_n=best_of_n, critique=critique)))
    size = max(1, min(concurrency, len(tasks)))
    try:
        async with SandboxPool(SandboxConfig(backend=backend), size=size, max_concurrency=size) as pool:
            start = time.perf_counter()
            trajs = await run_episodes(tasks, agent_factory, user_factory, pool, concurrency=size,
                                       **({"limits": limits} if limits is not None else {}))
            episodes_s = time.perf_counter() - start
    finally:
        if client is not None:
            await client.aclose()
    report = write_trajectories(trajs, out_dir)
    report.episodes_s = episodes_s
    return trajs, report
