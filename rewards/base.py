"""The reward contract: every reward scores one (task, trajectory) and says why.

A score of `None` means abstain (a judge that could not be parsed or reached):
TRL leaves such completions out of the group baseline instead of scoring them 0.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from synth.episode import Trajectory
from synth.tasks import Task


class RewardResult(BaseModel):
    name: str
    score: float | None = Field(description="in [0, 1]; None = abstain")
    reason: str = Field(description="one sentence a person can act on")
    details: dict[str, Any] = Field(default_factory=dict)
    flags: list[str] = Field(default_factory=list, description="e.g. 'hack:claims_without_effect'")

    @property
    def passed(self) -> bool:
        return self.score is not None and self.score >= 1.0


@runtime_checkable
class Reward(Protocol):
    name: str

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult: ...
