"""Streaming generation on the colocated vLLM engine: an episode's next turn joins the running batch.

``rl.rollout.VLLMGenerator`` answers one batch per ``LLM.generate`` call, and the batcher sends a
batch when every live episode waits in it: each turn of a rollout costs as many engine steps as its
longest answer, and the next turn starts only when the slowest sequence of this one ends. With
``rollout.vllm_streaming`` the batcher drives this generator instead (its streaming path, as for
rl.continuous): each request is added to the engine the moment its episode asks
(``LLMEngine.add_request``), and every :meth:`VLLMStreamSession.poll` runs one engine step
(``LLMEngine.step``) and hands back the requests that finished in it. A rollout then costs about
as many engine steps as its longest *episode*, not the sum of each turn's longest answer.

The samples are the engine's own (same sampling parameters, per-request seeds, processed
log-probs) but which requests share an engine step depends on timing, so a streamed rollout is not
bit-reproducible from its seeds as a batched one is (vLLM's numerics depend on the batch).

Seeded requests must not be prefilled in chunks on CPU (see ``VLLMGenerator.waves``): the session
admits a request into the engine only when its whole prompt fits the next step's token budget
(:class:`VLLMStreamSession`), and refuses with :class:`RolloutError` a prompt that exceeds the budget
(``rollout.vllm_max_num_batched_tokens``) on its own.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from rl.generation import GenRequest, GenResult, RolloutError, Sampling, run_to_completion

__all__ = ["VLLMStreamSession", "VLLMStreamingGenerator"]

_sessions = itertools.count()


def to_result(out: Any) -> GenResult:
    """A finished vLLM ``RequestOutput`` as token ids and the sampled tokens' log-probs."""
    c = out.outputs[0]
    ids = list(c.token_ids)
    lps = [float(step[tok].logprob) if step is not None and tok in step else float("nan")
           for tok, step in zip(ids, c.logprobs or [None] * len(ids), strict=True)]
    return GenResult(ids=ids, logprobs=lps)


class VLLMStreamSession:
    """Requests in flight on one engine: :meth:`submit` queues one, :meth:`poll` admits what fits the
    next engine step and runs it.

    Admission keeps the engine from ever prefilling a seeded request in chunks (fatal on CPU): a
    step's budget is ``max_num_batched_tokens``, of which every running request takes one token
    (its decode) and every new one its whole prompt, and at most ``max_num_seqs`` run at once, so
    that vLLM's own queue never holds a request back to chunk it later."""

    def __init__(self, generator: VLLMStreamingGenerator):
        self.gen = generator
        self.engine = generator.llm.llm_engine
        self.prefix = f"stream{next(_sessions)}-"
        self.waiting: deque[tuple[str, GenRequest]] = deque()
        self.running: dict[str, str] = {}  # in the engine (its outputs carry the id we gave)
        self.requests: dict[str, GenRequest] = {}
        self.submitted = 0
        self.steps = 0
        self.max_running = 0
        self.admitted: list[int] = []  # requests admitted before each step

    @property
    def pending(self) -> int:
        return len(self.waiting) + len(self.running)

    def submit(self, request: GenRequest) -> str:
        if request.max_tokens <= 0:
            raise RolloutError(f"a generation request needs max_tokens > 0, not {request.max_tokens}")
        budget = self.gen.prefill_budget
        if budget is not None and len(request.prompt_ids) + 1 > budget:
            raise RolloutError(f"a {len(request.prompt_ids)}-token prompt exceeds the engine's prefill budget "
                               f"({budget} tokens, max_num_batched_tokens); raise rollout.vllm_max_num_batched_tokens")
        key = f"{self.prefix}{self.submitted}"
        self.submitted += 1
        self.requests[key] = request
        self.waiting.append((key, request))
        return key

    def _admit(self) -> None:
        budget, seqs = self.gen.prefill_budget, self.gen.max_seqs
        used = len(self.running)  # one decode token each
        admitted = 0
        while self.waiting:
            key, req = self.waiting[0]
            if seqs is not None and len(self.running) >= seqs:
                break
            if budget is not None and used + len(req.prompt_ids) > budget:
                break
            self.waiting.popleft()
            self.engine.add_request(key, {"prompt_token_ids": list(req.prompt_ids)}, self.gen.params(req))
            self.running[key] = key
            used += len(req.prompt_ids)
            admitted += 1
        self.admitted.append(admitted)
        self.max_running = max(self.max_running, len(self.running))

    def poll(self, timeout: float) -> list[tuple[str, GenResult | RolloutError]]:
        """Admit what fits, run one engine step, return the requests that finished in it.
        (``timeout`` is unused: a step is the wait.)"""
        self._admit()
        if not self.running:
            return []
        self.steps += 1
        out: list[tuple[str, GenResult | RolloutError]] = []
        for res in self.engine.step():
            key = self.running.get(res.request_id)
            if key is None or not getattr(res, "finished", False):
                continue
            del self.running[res.request_id]
            self.requests.pop(key, None)
            out.append((key, to_result(res)))
        if not out and self.running and not self.engine.has_unfinished_requests():
            lost = len(self.running)
            self.running.clear()
            raise RolloutError(f"the vLLM engine has no unfinished request, but {lost} of ours never finished")
        return out

    def close(self) -> None:
        self.waiting.clear()
        if self.running:  # a failed rollout: free the engine for the next one
            self.engine.abort_request(list(self.running))
            self.running.clear()


class VLLMStreamingGenerator:
    """A streaming :class:`rl.rollout.Generator` on a ``vllm.LLM`` (TRL's colocated engine)."""

    streaming = True

    def __init__(self, llm: Any, sampling: Sampling, *, extra: dict[str, Any] | None = None):
        from rl.generators import VLLMGenerator

        self.llm = llm
        self.sampling = sampling
        self.extra = dict(extra or {})
        batch = VLLMGenerator(llm, sampling, extra=extra)  # context limit and the scheduler's budgets
        self.context_limit = batch.context_limit
        self.prefill_budget = batch.prefill_budget
        self.max_seqs = batch.max_seqs
        if self.llm.llm_engine.has_unfinished_requests():
            raise RolloutError("the vLLM engine has requests in flight: a streaming rollout needs it to itself")

    def params(self, request: GenRequest) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        s = self.sampling
        return SamplingParams(n=1, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, min_p=s.min_p,
                              repetition_penalty=s.repetition_penalty, max_tokens=request.max_tokens, logprobs=0,
                              seed=request.seed, output_kind=RequestOutputKind.FINAL_ONLY, **self.extra)

    @contextlib.contextmanager
    def session(self, seed: int | None = None) -> Iterator[VLLMStreamSession]:
        s = VLLMStreamSession(self)
        try:
            yield s
        finally:
            s.close()

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        """All of ``requests`` at once, streamed to the end (results in request order)."""
        if not requests:
            return []
        with self.session() as s:
            return run_to_completion(s, requests, wait=0.0)
