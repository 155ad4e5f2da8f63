"""User simulators: the customer side of an episode.

    user = ScriptedUser()                              # deterministic, offline
    user = LLMUser(client, best_of_n=4, critique=True) # tau2-style prompt, APIGen-MT BoN + self-critique

A simulator opens the conversation (`first_message`) and answers the agent
(`reply`). A reply that contains `###STOP###` ends the episode as done;
`###TRANSFER###` ends it as handed to a human.

`conversation` is the episode's message list as the agent sees it (OpenAI
format: system, user, assistant with optional tool_calls, tool). Simulators
only read the user and assistant texts; tool traffic is invisible to the user.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

if TYPE_CHECKING:  # synth.tasks and synth.llm are contracts owned elsewhere
    from synth.llm import LLMClient
    from synth.tasks import Task

STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"
STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)
AGENT_GREETING = "Hi! How can I help you today?"


@runtime_checkable
class UserSimulator(Protocol):
    async def first_message(self, task: Task) -> str: ...

    async def reply(self, task: Task, conversation: Sequence[dict[str, Any]]) -> str: ...


class UserStats(BaseModel):
    """Counters of one simulator (per episode when made by a factory)."""

    replies: int = 0
    revealed: int = 0             # known_info values disclosed (scripted rules)
    stops: int = 0
    llm_calls: int = 0
    candidates: int = 0
    invalid_candidates: int = 0   # empty or garbled LLM texts
    retries: int = 0
    fallbacks: int = 0            # replies replaced by the scripted user
    critiques: int = 0
    critique_failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


# --------------------------------------------------------------------- text helpers
def normalize(text: str) -> str:
    """tau-bench's COMMUNICATE normalisation: lower case, no commas, single spaces."""
    return " ".join(text.lower().replace(",", "").split())


def contains_all(text: str, outputs: Sequence[str]) -> bool:
    t = normalize(text)
    return all(normalize(o) in t for o in outputs)


def agent_texts(conversation: Sequence[dict[str, Any]]) -> list[str]:
    return [m.get("content") or "" for m in conversation
            if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m.get("content")]


def last_agent_text(conversation: Sequence[dict[str, Any]]) -> str:
    for m in reversed(conversation):
        if m.get("role") == "user":
            return ""  # the agent has not spoken since the user's last message
        if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip():
            return m["content"]
    return ""


def user_turns(conversation: Sequence[dict[str, Any]]) -> int:
    return sum(1 for m in conversation if m.get("role") == "user")


_GENERIC = {"id", "number", "no", "num", "name", "the", "a", "an", "my", "your", "of", "in", "code", "info", "details"}
_SYNONYMS = {"id": ("id", "number", "identifier", "no"), "number": ("number", "id", "no"), "email": ("email", "e-mail", "mail")}
_ASKING = re.compile(r"\?|\b(could|can|would|may) you\b|\bplease\b|\b(tell|give|send|share|provide|confirm|need|what|which)\b", re.I)


def key_phrase(key: str) -> str:
    return " ".join(t for t in re.split(r"[_\-\s.]+", key.strip().lower()) if t)


def asks_for(text: str, key: str) -> bool:
    """Does the agent's `text` ask for the piece of information named `key`?"""
    if not text or not _ASKING.search(text):
        return False
    low = " " + re.sub(r"[^a-z0-9@\-]+", " ", text.lower()) + " "
    if key_phrase(key) in text.lower():
        return True
    tokens = re.findall(r"[a-z0-9]+", re.sub(r"\(.*?\)", " ", key.lower()))  # "(in kg)" is optional
    if not tokens:
        return False
    variants = {" ".join(tokens), "_".join(tokens), "".join(tokens)}
    last = tokens[-1]
    for syn in _SYNONYMS.get(last, ()):
        variants.add(" ".join(tokens[:-1] + [syn]))
    if any(f" {v} " in low or v in text.lower() for v in variants if v):
        return True
    words = {_stem(w) for w in low.split()}
    core = [t for t in tokens if t not in _GENERIC] or tokens
    return all(_stem(t) in words for t in core)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


_WITHHELD = re.compile(r"asks the user for the missing detail \((.+)\) instead of guessing it")


def user_only_info(task: Task) -> dict[str, str]:
    """The known_info items a needs_user_info task holds back until the agent asks.

    synth.tasks flags each with a rubric checkpoint "asks the user for the missing detail (VALUE) ...";
    known_info items whose value the instruction does not mention count too.
    """
    if not task.needs_user_info:
        return {}
    sc = task.user_scenario
    rubric = getattr(task, "rubric", None)
    flagged = {m.group(1) for c in getattr(rubric, "checkpoints", None) or [] if (m := _WITHHELD.search(c))}
    low = (task.instruction or "").lower()
    return {k: v for k, v in sc.known_info.items() if str(v) in flagged or str(v).lower() not in low}


def redact(text: str, info: dict[str, str]) -> str:
    """Remove `info`'s values from `text` (longest first), naming what is missing."""
    for key, value in sorted(info.items(), key=lambda kv: -len(str(kv[1]))):
        value = str(value)
        if len(value) >= 2:
            text = re.sub(re.escape(value), f"[my {key_phrase(key)}]", text, flags=re.I)
    return text


# -------------------------------------------------------------------------- scripted
class ScriptedUser:
    """A deterministic, offline user.

    Opens with the task's instruction (for `needs_user_info` tasks with the
    user-only values, `user_only_info`, redacted), reveals a known_info value only when the
    agent's last message asks for it (keyword match on the key), says it does
    not know unknown_info, and stops with ###STOP### once the agent has told it
    every expected output (tau-style substring match over the agent's texts),
    or after `max_turns` user turns.
    """

    def __init__(self, *, max_turns: int = 10):
        self.max_turns = max_turns
        self.stats = UserStats()

    async def first_message(self, task: Task) -> str:
        return self.opening(task)

    async def reply(self, task: Task, conversation: Sequence[dict[str, Any]]) -> str:
        text = self.answer(task, conversation)
        self.stats.replies += 1
        self.stats.stops += STOP in text
        return text

    # Sync cores, also used as the LLM user's fallback.
    @staticmethod
    def opening(task: Task) -> str:
        text = task.instruction or task.user_scenario.reason_for_call
        return redact(text, user_only_info(task))

    def answer(self, task: Task, conversation: Sequence[dict[str, Any]]) -> str:
        sc = task.user_scenario
        outputs = list(task.expected_outputs)
        last = last_agent_text(conversation)
        if outputs and contains_all("\n".join(agent_texts(conversation)), outputs):
            return f"Thanks, that's all I needed. {STOP}"
        if user_turns(conversation) >= self.max_turns:
            return f"I have to go now. {STOP}"
        asked = [k for k in sc.known_info if asks_for(last, k)]
        if asked:
            self.stats.revealed += len(asked)
            return " ".join(f"My {key_phrase(k)} is {sc.known_info[k]}." for k in asked)
        if any(asks_for(last, u) for u in sc.unknown_info):
            return "Sorry, I don't know that."
        if not outputs and last and "?" not in last:
            return f"Great, thank you. {STOP}"
        return "Please go ahead with my request."


# ------------------------------------------------------------------------------- LLM
SYSTEM_PROMPT = """You are playing a customer who is talking to a customer-service agent by chat.
Write only the customer's next message: one message at a time, in the customer's own words.

Rules:
- Follow the scenario below; stay in character as the persona describes.
- Do not give away everything at once. Share a piece of information only when the agent asks for it.
- Use only information that is in the scenario. Never invent ids, numbers, names or dates. If the agent
  asks for something you do not know, say that you do not know it.
- You are not the agent: never offer to do the agent's work and never call tools.
- When your goal is reached (the agent has done what you asked and told you what you wanted to know),
  or it clearly cannot be reached, reply with {stop} alone to end the chat. Do not end earlier.
- If the agent hands you over to a human agent, reply with {transfer} alone.

<scenario>
{scenario}
</scenario>"""

CRITIQUE_PROMPT = """You check a simulated customer for consistency. Below are the customer's scenario,
the chat so far, and {n} candidate next messages from the customer. Score each candidate from 0 to 10:
high when it follows the scenario, reveals only what the agent asked for, invents nothing, stays in
character and ends the chat ({stop}) only when the goal is reached. Return the index of the best one.

<scenario>
{scenario}
</scenario>

<chat>
{chat}
</chat>

<candidates>
{candidates}
</candidates>"""

CRITIQUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "scores": {"type": "array", "items": {
            "type": "object",
            "properties": {"candidate": {"type": "integer"}, "score": {"type": "number"},
                           "consistent": {"type": "boolean"}, "reason": {"type": "string"}},
            "required": ["candidate", "score"]}},
        "best": {"type": "integer"},
    },
    "required": ["scores", "best"],
}


def scenario_text(task: Task) -> str:
    sc = task.user_scenario
    lines = []
    if sc.persona or task.persona:
        lines.append(f"Persona: {sc.persona or task.persona}")
    lines.append(f"Reason for contacting the agent: {sc.reason_for_call or task.instruction}")
    if sc.known_info:
        lines.append("What you know (share each item only when asked):")
        lines += [f"- {key_phrase(k)}: {v}" for k, v in sc.known_info.items()]
    if sc.unknown_info:
        lines.append("What you do not know:")
        lines += [f"- {u}" for u in sc.unknown_info]
    if sc.task_instructions:
        lines.append(f"Instructions: {sc.task_instructions}")
    return "\n".join(lines)


def flip(conversation: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The conversation as the user model sees it: the agent speaks as `user`, the customer as `assistant`."""
    out: list[dict[str, str]] = [{"role": "user", "content": AGENT_GREETING}]
    for m in conversation:
        content = m.get("content")
        if not isinstance(content, str) or not content.strip():
            continue
        if m.get("role") == "user":
            out.append({"role": "assistant", "content": content})
        elif m.get("role") == "assistant":
            if out[-1]["role"] == "user":
                out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + content}
            else:
                out.append({"role": "user", "content": content})
    return out


_MARKUP = re.compile(r"[<>{}\[\]|\\^~`=\x00-\x08\x0b-\x1f\x7f]")
# a word, or a token with a digit or an @ in it (ids, amounts, emails)
_WORD = re.compile(r"^[\"'(]*[A-Za-z][A-Za-z'’\-]*[.,!?;:)\"']*$|^[\"'(]*(?=\S*[\d@])[\w@.\-/$%:#+]+[.,!?;:)\"']*$")


_SHORT_ANSWERS = frozenset({"yes", "no", "ok", "okay", "sure", "thanks", "correct", "right", "fine", "exactly"})


def is_plausible(text: str, *, max_chars: int = 2000) -> bool:
    """False for empty or garbled texts: markup or control characters, mostly non-letters, word salad
    without spaces or vowels, snake_case fragments."""
    t = (text or "").strip()
    if not t:
        return False
    if any(tok in t for tok in STOP_TOKENS) and len(t) < 400:
        return True
    if len(t) > max_chars or _MARKUP.search(t) or "\ufffd" in t:
        return False
    visible = [c for c in t if not c.isspace()]
    if sum(c.isascii() and (c.isalnum() or c in ".,!?'\"-:;()@$%/#&") for c in visible) < 0.9 * len(visible):
        return False
    if sum(c.isalpha() for c in visible) < 0.6 * len(visible):
        return False
    words = t.split()
    if len(words) == 1 and t.lower().strip(".!") not in _SHORT_ANSWERS:
        return False  # a lone fragment ("clo") says nothing a user would say
    if sum(len(w) for w in words) / len(words) > 12:
        return False
    letters_only = [w for w in words if w.isalpha() and len(w) > 3]
    if letters_only and sum(not re.search(r"[aeiouy]", w.lower()) for w in letters_only) > 0.3 * len(letters_only):
        return False
    return sum(bool(_WORD.match(w)) for w in words) >= 0.9 * len(words)


class LLMUser:
    """An LLM-driven user: tau2-style scenario prompt, optional best-of-N sampling and self-critique.

    Every candidate is checked with `validate` (default `is_plausible`); when
    no candidate is valid the call is retried once, then the reply is replaced
    by the scripted user's (stats.fallbacks).
    """

    def __init__(
        self,
        client: LLMClient,
        *,
        best_of_n: int = 1,
        critique: bool = False,
        temperature: float | None = 0.7,
        max_tokens: int = 256,
        seed: int | None = None,
        max_turns: int = 10,
        validate: Callable[[str], bool] = is_plausible,
    ):
        if best_of_n < 1:
            raise ValueError("best_of_n must be >= 1")
        self.client = client
        self.best_of_n = best_of_n
        self.critique = critique
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.validate = validate
        self.scripted = ScriptedUser(max_turns=max_turns)
        self.max_turns = max_turns
        self.stats = UserStats()

    async def first_message(self, task: Task) -> str:
        text = await self._generate(task, [])
        return text if text is not None else self._fallback(task, None)

    async def reply(self, task: Task, conversation: Sequence[dict[str, Any]]) -> str:
        self.stats.replies += 1
        if user_turns(conversation) >= self.max_turns:
            self.stats.stops += 1
            return f"I have to go now. {STOP}"
        text = await self._generate(task, conversation)
        text = text if text is not None else self._fallback(task, conversation)
        self.stats.stops += STOP in text
        return text

    # ------------------------------------------------------------------ internals
    def _fallback(self, task: Task, conversation: Sequence[dict[str, Any]] | None) -> str:
        self.stats.fallbacks += 1
        if conversation is None:
            return self.scripted.opening(task)
        return self.scripted.answer(task, conversation)

    async def _generate(self, task: Task, conversation: Sequence[dict[str, Any]]) -> str | None:
        system = SYSTEM_PROMPT.format(stop=STOP, transfer=TRANSFER, scenario=scenario_text(task))
        messages = [{"role": "system", "content": system}, *flip(conversation)]
        for attempt in range(2):
            if attempt:
                self.stats.retries += 1
            valid = await self._sample(messages)
            if valid:
                if len(valid) == 1 or not self.critique:
                    return valid[0]
                return await self._pick(task, messages, valid)
        return None

    async def _sample(self, messages: list[dict[str, Any]]) -> list[str]:
        kw: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.seed is not None:
            kw["seed"] = self.seed
        try:
            if self.best_of_n == 1:
                results = [await self.client.chat(messages, **kw)]
            else:
                results = await self.client.chat_many(messages, n=self.best_of_n, **kw)
        except Exception:  # an unreachable or failing endpoint counts as an invalid sample
            self.stats.llm_calls += 1
            self.stats.invalid_candidates += self.best_of_n
            return []
        self.stats.llm_calls += 1
        out = []
        for r in results:
            self.stats.candidates += 1
            usage = getattr(r, "usage", None)
            self.stats.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.stats.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
            msg = r.message or {}
            text = msg.get("content") if isinstance(msg.get("content"), str) else ""
            if msg.get("tool_calls") or not self.validate(text or ""):
                self.stats.invalid_candidates += 1
                continue
            out.append(text.strip())
        return out

    async def _pick(self, task: Task, messages: list[dict[str, Any]], candidates: list[str]) -> str:
        self.stats.critiques += 1
        chat = "\n".join(f"{'agent' if m['role'] == 'user' else 'customer'}: {m['content']}" for m in messages[1:])
        prompt = CRITIQUE_PROMPT.format(
            n=len(candidates), stop=STOP, scenario=scenario_text(task), chat=chat,
            candidates="\n".join(f"[{i}] {c}" for i, c in enumerate(candidates)),
        )
        try:
            verdict = await self.client.json([{"role": "user", "content": prompt}], CRITIQUE_SCHEMA)
            best = verdict.get("best") if isinstance(verdict, dict) else None
            if isinstance(best, int) and 0 <= best < len(candidates):
                return candidates[best]
            scores = {s.get("candidate"): s.get("score") for s in (verdict or {}).get("scores", []) if isinstance(s, dict)}
            ranked = [i for i in sorted(scores, key=lambda i: -(scores[i] or 0))
                      if isinstance(i, int) and 0 <= i < len(candidates)]
            if ranked:
                return candidates[ranked[0]]
        except Exception:
            pass
        self.stats.critique_failures += 1
        return candidates[0]
