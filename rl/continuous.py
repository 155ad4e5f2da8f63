"""Multi-turn generation with transformers' continuous batching (where vLLM is not installed).

A padded ``model.generate`` batch decodes until its longest sequence ends, so an episode whose
turn ended early waits for the slowest one before its next turn can even start: a step of
multi-turn episodes costs the sum of its turns' longest decodes. With continuous batching
(``transformers``' paged-attention manager) every request joins the running batch when it
arrives and leaves when it ends, so an episode's next turn decodes alongside the first turns
still running, as with vLLM. On the GPU machine (no vLLM) that is what keeps the multi-turn
trainer near bare TRL's cost per generated token.

    gen = ContinuousHFGenerator(lambda: model, tok, Sampling(), eos_ids=[eos], context_limit=4096)
    with gen.session(seed=0) as s:          # the manager's generation thread runs meanwhile
        rid = s.submit(GenRequest(prompt_ids, max_tokens=64))
        for rid, result in s.poll(0.01): ...  # GenResult, or a RolloutError for a failed request
    gen.generate([GenRequest(...), ...])    # the batch API, on a session of its own

Sampling: one seed per session (the manager samples every running sequence from one
generator), so a step's samples depend on when its requests arrived: unlike the padded path,
not reproducible bit for bit. Log-probs are those of the sampled tokens under the processed
distribution (temperature, top-k, top-p), as the trainer computes them.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rl.generation import GenRequest, GenResult, RolloutError, Sampling, cut_at_eos, run_to_completion

log = logging.getLogger("tooldojo.rl")

__all__ = ["CB_DEFAULTS", "CacheWork", "ContinuousHFGenerator", "ContinuousSession", "cb_kwargs", "check_cb_config",
           "kv_bytes_per_token", "work_sized"]

# transformers' ContinuousBatchingConfig keywords we set unless the config does. max_memory_percent:
# the KV cache takes this share of free GPU memory for the session (transformers' 0.9 would leave
# none for the backward pass; TRL uses 0.5 for the same reason). CUDA graphs: without them a decode
# step is launch-bound; measured on the H100 (0.49B, 16 x ~1,100-token prompts, 128 new tokens),
# padded generate 5.25 s, continuous batching 16.2 s without graphs, 5.14 s with graphs captured
# afresh each session (bench/results/continuous_batching_h100.json, from bench/continuous_batching.py).
CB_DEFAULTS: dict[str, Any] = {"max_memory_percent": 0.5, "use_cuda_graph": True}
OWN_KEYS = ("return_logprobs", "seed", "drop_unsupported_processors")  # set per session, not configurable
CPU_KV_TOKENS = 65536  # without CUDA, a fixed KV cache (transformers would size it from system RAM)
MAX_BATCH_TOKENS = 8192  # transformers' own default for the tokens of one forward


@dataclass(frozen=True)
class CacheWork:
    """What a step's generation must hold at once: ``sequences`` episodes in flight (this rank's
    generation batch; an episode has one request at a time), each at most ``tokens`` long (its
    longest prompt plus the whole completion budget, every turn and tool output included)."""

    sequences: int
    tokens: int


def kv_bytes_per_token(model_config: Any, dtype_bytes: int = 2) -> int:
    """K and V of one token over every layer."""
    heads = getattr(model_config, "num_key_value_heads", None) or model_config.num_attention_heads
    head_dim = getattr(model_config, "head_dim", None) or model_config.hidden_size // model_config.num_attention_heads
    return 2 * model_config.num_hidden_layers * heads * head_dim * dtype_bytes


def work_sized(work: CacheWork, block_size: int = 256) -> dict[str, int]:
    """``num_blocks`` and ``max_batch_tokens`` for ``work``: every sequence's tokens in whole blocks
    (a sequence wastes at most one block's tail) and one spare block per sequence, so a step never
    waits for blocks; one forward takes at most what the cache holds, and never more than
    transformers' default of 8,192 tokens (its attention mask is max_batch_tokens x cache)."""
    per_seq = math.ceil(work.tokens / block_size) + 1
    num_blocks = max(1, work.sequences * per_seq)
    return {"num_blocks": num_blocks, "max_batch_tokens": max(256, min(MAX_BATCH_TOKENS, num_blocks * block_size))}


def check_cb_config(cb_config: dict[str, Any]) -> None:
    """Raise ValueError naming keywords transformers' ContinuousBatchingConfig does not take (or
    that this module sets itself)."""
    import dataclasses

    from transformers.generation import ContinuousBatchingConfig

    known = {f.name for f in dataclasses.fields(ContinuousBatchingConfig)} - set(OWN_KEYS)
    unknown = sorted(set(cb_config) - known)
    if unknown:
        raise ValueError(f"hf_continuous_batching: unknown or reserved keys {unknown}; "
                         f"ContinuousBatchingConfig takes {sorted(known)}")


def cb_kwargs(cb_config: dict[str, Any], device_type: str, *, work: CacheWork | None = None,
              memory_cap: float | None = None, model_config: Any = None,
              free_bytes: int | None = None) -> dict[str, Any]:
    """ContinuousBatchingConfig keywords: ours over :data:`CB_DEFAULTS`, and without CUDA a fixed
    KV cache (transformers would size it from system RAM). bench/train_step.py gives TRL's own
    continuous batching the same.

    On CUDA with ``work`` (and the model's config), the cache is sized to the work
    (:func:`work_sized`) instead of to a share of free memory: a 0.49B policy's 8 episodes of
    ~1,400 tokens need ~0.6 GB, where half of an H100's free memory is ~20 GB.
    ``memory_cap`` (a share of free memory, ``rollout.generation_memory_cap``) stays a cap: work
    that would not fit under it gets transformers' own sizing within the cap, i.e. requests queue
    for blocks. Explicit ``num_blocks`` / ``max_batch_tokens`` in ``cb_config`` win."""
    check_cb_config(cb_config)
    kw = {**CB_DEFAULTS, **({"max_memory_percent": memory_cap} if memory_cap is not None else {}), **cb_config}
    if device_type != "cuda" and "num_blocks" not in cb_config:
        kw.setdefault("num_blocks", math.ceil(CPU_KV_TOKENS / int(kw.get("block_size", 256))))
        kw.setdefault("max_batch_tokens", 4096)
        kw.pop("max_memory_percent", None)
    if device_type != "cuda" and "use_cuda_graph" not in cb_config:
        kw.pop("use_cuda_graph", None)
    if (device_type == "cuda" and work is not None and model_config is not None
            and "num_blocks" not in cb_config and "max_batch_tokens" not in cb_config):
        sized = work_sized(work, int(kw.get("block_size", 256)))
        need = sized["num_blocks"] * int(kw.get("block_size", 256)) * kv_bytes_per_token(model_config)
        if free_bytes is None:
            import torch

            free_bytes = torch.cuda.mem_get_info()[0]
        cap = float(kw.get("max_memory_percent") or 1.0) * free_bytes
        if need <= cap:
            kw.update(sized)
        else:
            log.warning("generation cache: %d sequences x %d tokens need %.2f GB, more than the cap "
                        "(generation_memory_cap %.2f of %.1f GB free); sized to the cap, requests queue for blocks",
                        work.sequences, work.tokens, need / 1e9, kw.get("max_memory_percent") or 1.0,
                        free_bytes / 1e9)
    return kw


class ContinuousSession:
    """One running continuous-batching manager: :meth:`submit` requests, :meth:`poll` results."""

    def __init__(self, manager: Any, eos_ids: Sequence[int]):
        self.manager = manager
        self.eos_ids = list(eos_ids)
        self.pending: dict[str, GenRequest] = {}
        self.submitted = 0

    def submit(self, request: GenRequest) -> str:
        if request.max_tokens <= 0:
            raise RolloutError(f"a generation request needs max_tokens > 0, not {request.max_tokens}")
        rid = self.manager.add_request(list(request.prompt_ids), request_id=f"r{self.submitted}",
                                       max_new_tokens=request.max_tokens, eos_token_id=self.eos_ids)
        if rid is None:
            raise RolloutError("the continuous-batching manager refused a request (it is stopping or failed: "
                               f"{self.manager.background_thread_status.fatal_error!r})")
        self.submitted += 1
        self.pending[rid] = request
        return rid

    def poll(self, timeout: float) -> list[tuple[str, GenResult | RolloutError]]:
        """Finished requests: waits up to ``timeout`` for the first, then takes what else is ready.
        Raises :class:`RolloutError` when the manager's thread died with requests outstanding."""
        out: list[tuple[str, GenResult | RolloutError]] = []
        wait = timeout
        while self.pending:
            res = self.manager.get_result(timeout=wait)
            if res is None:
                break
            wait = 0.001
            req = self.pending.pop(res.request_id, None)
            if req is None:  # not ours (cannot happen with a session per manager): drop it
                continue
            if res.error is not None or res.status.name != "FINISHED":
                out.append((res.request_id, RolloutError(f"generation failed: {res.error or res.status.name}")))
                continue
            out.append((res.request_id, self._result(res, req)))
        if not out and self.pending:
            fatal = self.manager.background_thread_status.fatal_error
            if fatal is not None or not self.manager.is_running():
                raise RolloutError(f"the continuous-batching generation thread stopped with {len(self.pending)} "
                                   f"requests outstanding: {fatal!r}")
        return out

    def _result(self, res: Any, req: GenRequest) -> GenResult:
        ids, lps = list(res.generated_tokens)[: req.max_tokens], [float(x) for x in res.logprobs][: req.max_tokens]
        if len(lps) != len(ids):
            raise RolloutError(f"the manager returned {len(ids)} tokens but {len(lps)} log-probs")
        return cut_at_eos(ids, lps, self.eos_ids)


class ContinuousHFGenerator:
    """A :class:`rl.generation.Generator` on transformers' continuous batching, streaming too: the
    rollout's batcher submits each request as it arrives (see :meth:`session`)."""

    streaming = True

    def __init__(self, model_fn: Callable[[], Any], tokenizer: Any, sampling: Sampling, *, eos_ids: Sequence[int],
                 context_limit: int, cb_config: dict[str, Any] | None = None, work: CacheWork | None = None,
                 memory_cap: float | None = None):
        if sampling.repetition_penalty != 1.0 or sampling.min_p:
            raise RolloutError("continuous batching samples with temperature, top_k and top_p only; "
                               "set repetition_penalty: 1.0 and min_p: 0 or rollout.hf_generation: padded")
        self.model_fn = model_fn
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.eos_ids = list(eos_ids)
        self.context_limit = context_limit
        self.cb_config = dict(cb_config or {})
        self.work = work  # None: the cache is sized from free memory (transformers' way), under the cap
        self.memory_cap = memory_cap

    def _configs(self, model: Any, seed: int | None) -> tuple[Any, Any]:
        from transformers import GenerationConfig
        from transformers.generation import ContinuousBatchingConfig

        s = self.sampling
        greedy = s.temperature <= 0
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_ids[0]
        gen = GenerationConfig(do_sample=not greedy, eos_token_id=self.eos_ids, pad_token_id=pad,
                               max_new_tokens=max(1, self.context_limit // 2),
                               **({} if greedy else dict(temperature=s.temperature, top_p=s.top_p,
                                                         top_k=s.top_k or None)))
        kw = cb_kwargs(self.cb_config, model.device.type, work=self.work, memory_cap=self.memory_cap,
                       model_config=model.config)
        # unsupported logits processors raise rather than being dropped: samples must follow the config
        cb = ContinuousBatchingConfig(return_logprobs=True, seed=seed, drop_unsupported_processors=False, **kw)
        return gen, cb

    @contextlib.contextmanager
    def session(self, seed: int | None = None) -> Iterator[ContinuousSession]:
        """Start a manager on the model as it is now (the trainer's current weights), yield it,
        then stop it and put the model back as it was (attention implementation, train mode). The
        global RNG is left as it was, so training randomness does not depend on generation."""
        import torch

        model = self.model_fn()
        was_training = model.training
        model.eval()
        devices = [model.device] if model.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            gen, cb = self._configs(model, seed)
            manager = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cb)
            try:
                manager.start()
                yield ContinuousSession(manager, self.eos_ids)
            finally:
                try:
                    manager.stop(block=True, timeout=60)
                    manager.destroy()
                finally:
                    model.train(was_training)

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        if not requests:
            return []
        seeds = [r.seed for r in requests if r.seed is not None]
        with self.session(seed=min(seeds) if seeds else None) as s:
            return run_to_completion(s, requests, wait=0.05)
