"""The batch generators: vLLM's colocated engine (:class:`VLLMGenerator`) and transformers'
``generate`` on left-padded batches (:class:`HFGenerator`). Both answer a list of
:class:`rl.generation.GenRequest` at once; rl/continuous.py holds the streaming one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rl.generation import GenRequest, GenResult, RolloutError, Sampling, cut_at_eos

__all__ = ["HFGenerator", "VLLMGenerator"]


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
        self.synced_gpus = False  # every rank steps until all are done (a sharded policy: rl.distributed)

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
                    use_cache=True, synced_gpus=self.synced_gpus)
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
