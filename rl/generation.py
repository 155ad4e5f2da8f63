"""The generation contract shared by every generation path: requests, results, sampling settings and
the end-of-sequence cut.

The rollout (rl/rollout.py) asks a :class:`Generator` for continuations; the generators themselves
live beside it: vLLM and padded transformers batches in rl/generators.py, transformers' continuous
batching in rl/continuous.py. They all import their types from here, so none imports the rollout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["GenRequest", "GenResult", "Generator", "RolloutError", "Sampling", "StreamSession", "cut_at_eos",
           "run_to_completion"]


class RolloutError(RuntimeError):
    """A rollout batch could not be produced (the generation backend failed, a prompt names an
    unknown task, ...). Every sandbox has been released when it is raised."""


@dataclass
class GenRequest:
    prompt_ids: list[int]
    max_tokens: int
    seed: int | None = None  # per-request sampling seed: reproducible rollouts, across resumes too


@dataclass
class GenResult:
    ids: list[int]
    logprobs: list[float]


class Generator(Protocol):
    """Samples continuations of token prompts; called from the trainer's thread only."""

    context_limit: int

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]: ...


class StreamSession(Protocol):
    """A streaming generator's open session: requests go in at any time, results come out as they
    finish (transformers' continuous batching, vLLM streaming)."""

    def submit(self, request: GenRequest) -> str: ...

    def poll(self, timeout: float) -> list[tuple[str, GenResult | RolloutError]]: ...


def run_to_completion(session: StreamSession, requests: Sequence[GenRequest], *, wait: float) -> list[GenResult]:
    """Submit every request, poll until each has finished, and return the results in request order;
    a failed request raises its RolloutError."""
    order = [session.submit(r) for r in requests]
    done: dict[str, GenResult] = {}
    while len(done) < len(order):
        for rid, res in session.poll(wait):
            if isinstance(res, RolloutError):
                raise res
            done[rid] = res
    return [done[rid] for rid in order]


@dataclass
class Sampling:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0

    @classmethod
    def from_args(cls, args: Any) -> Sampling:
        return cls(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k or 0,
                   min_p=args.min_p or 0.0, repetition_penalty=args.repetition_penalty)

def cut_at_eos(ids: list[int], logprobs: list[float], eos_ids: Sequence[int]) -> GenResult:
    """The sampled tokens up to and including the first end token (a batch decodes past it)."""
    for j, t in enumerate(ids):
        if t in eos_ids:
            return GenResult(ids=ids[: j + 1], logprobs=logprobs[: j + 1])
    return GenResult(ids=ids, logprobs=logprobs)
