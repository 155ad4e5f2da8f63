"""The policy inside an episode: :class:`TokenAgent` samples each turn through a
:class:`rl.batcher.GenerationBatcher` and keeps the whole episode as tokens (with the mask and the
sampling log-probs the trainer needs); :func:`parse_assistant` turns generated text into an
assistant message with tool calls.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rl.batcher import GenerationBatcher
from rl.generation import GenRequest
from synth.episode import BudgetExhausted

__all__ = ["TokenAgent", "parse_assistant"]


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
