"""What a case asks of a model (``EvalInputs``), what it is about (``CaseMeta``), inline tasks.

A case is one of:

* a **chat** case: ``prompt`` (and ``system``), or a whole ``messages`` conversation; the model's
  answer text is the output;
* a **tool episode**: ``task`` is a zoo task id (looked up in ``tasks``: a tasks.jsonl, or a folder
  holding one, relative to the suite file; default ``tasks.jsonl`` next to it) or an inline task;
  the model plays the agent with the task's tools in a sandbox, a scripted user opens and replies,
  and the output is the agent's last message (the trajectory is kept for ``EpisodeReward``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from synth.task_models import ExpectedOutput
from synth.tasks import Difficulty, Rubric, Task, UserScenario

__all__ = ["CaseMeta", "EvalInputs", "InlineTask"]


class InlineTask(BaseModel):
    """A zoo task written by hand: only ``domain`` and ``instruction`` are required. The rest gets
    defaults: the case name as id, all of the domain's tools, a user scenario from the instruction.
    ``gold_actions`` (the calls a correct agent makes) are what ``world_state`` rewards replay."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    domain: str
    seed: int = Field(0, description="the domain seed: the state is seed(random.Random(seed))")
    instruction: str
    persona: str = "A customer."
    user_scenario: UserScenario | None = None
    gold_actions: list[dict[str, Any]] = Field(default_factory=list,
                                               description='[{"name": tool, "arguments": {...}}, ...]')
    expected_outputs: list[ExpectedOutput] = Field(
        default_factory=list, description='what the agent must tell the user: a string, or {"field": ..., "value": ...} '
                                          'for a value asked for by field (rewards.field_answers)')
    rubric: Rubric = Field(default_factory=Rubric)
    tools: list[str] = Field(default_factory=list, description="tools offered to the agent (default: all of the domain's)")
    difficulty: Difficulty = "medium"
    needs_user_info: bool = False

    def to_task(self, default_id: str) -> Task:
        data = self.model_dump(exclude_none=True)
        data["id"] = self.id or default_id
        data.setdefault("user_scenario", {
            "persona": self.persona, "reason_for_call": self.instruction,
            "task_instructions": "Open with your first message as written. When the task is done, end with ###STOP###.",
        })
        return Task.model_validate(data)


class EvalInputs(BaseModel):
    """The inputs of every case. Give ``prompt`` (or ``messages``) for a chat case, ``task`` for a
    tool episode."""

    model_config = ConfigDict(extra="forbid")

    prompt: str | None = Field(None, description="the user's message")
    system: str | None = Field(None, description="a system message before it")
    messages: list[dict[str, Any]] | None = Field(
        None, description="a whole OpenAI-style conversation instead of system/prompt (a prompt is appended as the "
                          "last user message)")
    task: str | InlineTask | None = Field(
        None, description="a tool episode: a task id (looked up in `tasks`) or an inline task")
    tasks: str | None = Field(
        None, description="tasks.jsonl, or a folder holding one, where a task id is looked up; relative to the suite "
                          "file (default: tasks.jsonl next to it)")
    max_turns: int | None = Field(None, ge=1, description="agent turns of a tool episode (default: the run's --max-turns)")
    max_tokens: int | None = Field(None, ge=1, description="completion tokens per model call (default: the run's)")
    temperature: float | None = Field(None, ge=0, description="sampling temperature (default: the run's)")

    # Set by the loader, never serialised: where relative paths start, and why a case could not load.
    _base_dir: Path | None = PrivateAttr(None)
    _load_error: str | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _something_to_do(self) -> EvalInputs:
        if self.task is None and self.prompt is None and not self.messages:
            raise ValueError("a case needs `prompt`, `messages` or `task`")
        if self.task is not None and (self.prompt is not None or self.messages):
            raise ValueError("a tool-episode case (`task`) takes no `prompt`/`messages`: the task's instruction opens it")
        return self

    @classmethod
    def broken(cls, reason: str, base_dir: Path | None = None) -> EvalInputs:
        """Inputs of a case that could not be loaded: running it fails with ``reason``."""
        inputs = cls.model_construct(prompt=None)
        inputs._load_error = reason
        inputs._base_dir = base_dir
        return inputs

    @property
    def load_error(self) -> str | None:
        return self._load_error

    @property
    def base_dir(self) -> Path:
        return self._base_dir or Path.cwd()

    def chat_messages(self) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = []
        if self.messages:
            msgs.extend(dict(m) for m in self.messages)
        elif self.system:
            msgs.append({"role": "system", "content": self.system})
        if self.prompt is not None:
            msgs.append({"role": "user", "content": self.prompt})
        return msgs


class CaseMeta(BaseModel):
    """What a case is about: shown in reports, and ``tags`` get pass rates of their own."""

    model_config = ConfigDict(extra="allow")

    tags: list[str] = Field(default_factory=list, description="e.g. code, tool-use, reasoning")
    description: str | None = None
