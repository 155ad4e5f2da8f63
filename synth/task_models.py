"""The task blueprint contracts (APIGen-MT style: instruction + gold actions + expected outputs) and
the synthesis results; synth/tasks.py makes them and re-exports them."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, WithJsonSchema


Difficulty = Literal["easy", "medium", "hard"]
TIERS: tuple[Difficulty, ...] = ("easy", "medium", "hard")
CALL_TIMEOUT = 5.0  # seconds per sandboxed tool call, when probing, searching and replaying


class FieldValue(str):
    """An expected output the task asks for by field: ``FieldValue("light", "type")`` is the device's type.

    It is the value's own string (joined, searched and compared as text, as a plain output is), and it
    knows its `field`, so the communication reward credits it only where the answer states it for that
    field (rewards.field_answers). It is written ``{"field": "type", "value": "light"}`` in tasks.jsonl and
    in the dataset's `expected_outputs` column; an output that names no field stays a plain string."""

    field: str

    def __new__(cls, value: str, field: str) -> FieldValue:
        if not isinstance(field, str) or not field.strip():
            raise ValueError(f"the field of expected output {value!r} must be a non-empty string, not {field!r}")
        obj = super().__new__(cls, value)
        obj.field = field
        return obj

    def __getnewargs__(self) -> tuple[str, str]:  # copy, deepcopy and pickle keep the field
        return str(self), self.field

    def __repr__(self) -> str:
        return f"FieldValue({str(self)!r}, field={self.field!r})"


def output_of(raw: Any) -> str:
    """An expected output from its JSON form: a string, or ``{"field": ..., "value": ...}``."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict) and set(raw) == {"field", "value"} and all(isinstance(v, str) for v in raw.values()):
        return FieldValue(raw["value"], raw["field"])
    raise ValueError(f"an expected output is a string or {{\"field\": ..., \"value\": ...}} (both strings), "
                     f"not {raw!r}")


def output_json(o: str) -> str | dict[str, str]:
    """The JSON form of an expected output (the inverse of `output_of`)."""
    return {"field": o.field, "value": str(o)} if isinstance(o, FieldValue) else str(o)


ExpectedOutput = Annotated[
    str, PlainValidator(output_of), PlainSerializer(output_json),
    WithJsonSchema({"anyOf": [{"type": "string"}, {
        "type": "object", "required": ["field", "value"], "additionalProperties": False,
        "properties": {"field": {"type": "string"}, "value": {"type": "string"}}}]}),
]


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Rubric(BaseModel):
    model_config = ConfigDict(extra="forbid")

    success_criteria: list[str] = Field(default_factory=list)
    expected_tool_pattern: list[str] = Field(default_factory=list)
    checkpoints: list[str] = Field(default_factory=list)


class UserScenario(BaseModel):
    """What the user simulator knows (tau2's StructuredUserInstructions)."""

    model_config = ConfigDict(extra="forbid")

    persona: str
    reason_for_call: str
    known_info: dict[str, str] = Field(default_factory=dict)
    unknown_info: list[str] = Field(default_factory=list)
    task_instructions: str


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    domain: str
    seed: int = Field(description="the domain seed: the state is seed(random.Random(seed))")
    instruction: str
    persona: str
    user_scenario: UserScenario
    gold_actions: list[Action]
    expected_outputs: list[ExpectedOutput] = Field(
        default_factory=list, description="what the agent must tell the user: a string, or a FieldValue when the "
                                          "task asks for it by field (\"tell me the type\")")
    rubric: Rubric
    tools: list[str] = Field(description="tools offered to the agent: the gold tools plus distractors")
    difficulty: Difficulty
    needs_user_info: bool = False
    final_state_hash: str = ""
    provenance: Literal["template", "llm", "imported"] = "template"


class DroppedTask(BaseModel):
    id: str
    domain: str
    stage: Literal["generate", "replay"]
    reason: str


class TaskStats(BaseModel):
    requested: int = 0
    kept: int = 0
    attempts: int = 0
    generation_failures: dict[str, int] = Field(default_factory=dict)
    replayed: int = 0
    replay_failures: dict[str, int] = Field(default_factory=dict)
    llm_rewrites: int = 0
    llm_errors: int = 0
    per_domain: dict[str, int] = Field(default_factory=dict)
    per_difficulty: dict[str, int] = Field(default_factory=dict)
    per_length: dict[str, int] = Field(default_factory=dict)
    needs_user_info: int = 0
    backend: str | None = None
    seconds: float = 0.0

    @property
    def replay_pass_rate(self) -> float:
        return (self.replayed - sum(self.replay_failures.values())) / self.replayed if self.replayed else 0.0

    @property
    def tasks_per_min(self) -> float:
        return 60.0 * self.kept / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {**self.model_dump(), "replay_pass_rate": round(self.replay_pass_rate, 4),
                "tasks_per_min": round(self.tasks_per_min, 1)}


class TaskSynthesis(BaseModel):
    tasks: list[Task] = Field(default_factory=list)
    dropped: list[DroppedTask] = Field(default_factory=list)
    stats: TaskStats = Field(default_factory=TaskStats)


class JsonLLM(Protocol):
    """What task writing needs of an LLM: synth.llm.LLMClient has this method."""

    async def json(self, messages: list[dict[str, Any]], schema: dict[str, Any]) -> Any: ...
