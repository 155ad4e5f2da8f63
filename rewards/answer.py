"""Math-style answer equivalence with `math-verify` (pip install 'tooldojo[rewards]').

    reward = AnswerReward(extract="last_boxed")           # expected answer: task.expected_outputs[0]
    reward = AnswerReward(extract="last_number", answer="1/2")   # or one fixed answer for every task
    r = await reward.score(task, traj)                     # 1.0 equivalent, 0.0 otherwise (always a reason)

*The expected answer* is the `answer` argument when given (a string, a `{task_id: answer}` mapping
or a callable `task -> str | None`), else `task.expected_outputs[0]`. A task with neither makes the
reward abstain (score None).

*The agent's answer* comes from its **final message**: the last assistant message with text.
`extract` picks what of that text is compared:

- `last_boxed`: the content of the last `\\boxed{...}` (or `\\fbox{...}`), braces balanced;
- `last_number`: the last number, fraction (`3/4`), decimal or percentage (`1,234.5`, `-2`, `50%`);
- `final_message`: the whole message, handed to math-verify, which finds the answer in it (LaTeX
  or a plain expression).

Both sides are parsed with `math_verify.parse` and compared with `math_verify.verify`, so `1/2`,
`0.5` and `\\frac{1}{2}` are the same answer. Nothing raises: no final message, nothing to
extract, an answer math-verify cannot parse or a parser timeout all give 0.0 with a reason.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal

from rewards.base import RewardResult
from synth.episode import Trajectory
from synth.tasks import Task

Extract = Literal["last_boxed", "last_number", "final_message"]
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*-?\d+(?:\.\d+)?)?%?|(?<![\w.])-?\.\d+%?")
_MAX_CHARS = 20_000  # longer final messages are cut from the front (answers come last)


def final_message(traj: Trajectory) -> str | None:
    """Text of the last assistant message that has any."""
    for m in reversed(traj.messages):
        if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip():
            return m["content"]
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} in `text`, with nested braces balanced; None if there is none."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth, i = 1, start
        while i < len(text) and depth:
            if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
                i += 2
                continue
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            inner = text[start:i - 1].strip()
            if inner:
                return inner
    return None


def last_number(text: str) -> str | None:
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "").replace(" ", "") if found else None


def _parse(text: str, timeout: int | None, *, snippet: bool) -> list[Any]:
    """math-verify's parse without its raw-string fallback (so 'cannot be parsed' means it). A
    `snippet` (an extracted answer, the expected answer) is read as LaTeX math first: `2^{-1}`."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    tries = [f"${text}$", text] if snippet and "$" not in text else [text] + ([] if "$" in text else [f"${text}$"])
    for t in tries:
        got = parse(t, extraction_config=configs, fallback_mode="no_fallback", parsing_timeout=timeout)
        if got:
            return got
    return []


class AnswerReward:
    """1.0 when the final answer is mathematically equivalent to the expected one, else 0.0."""

    name = "answer"

    def __init__(
        self,
        *,
        extract: Extract = "last_boxed",
        answer: str | Mapping[str, str] | Callable[[Task], str | None] | None = None,
        float_rounding: int = 6,
        timeout_s: int = 5,
    ):
        if extract not in ("last_boxed", "last_number", "final_message"):
            raise ValueError(f"unknown extract {extract!r}: use last_boxed, last_number or final_message")
        try:
            import math_verify  # noqa: F401
        except ImportError as e:  # fail at construction, not at every score
            raise ImportError("AnswerReward needs math-verify: pip install 'tooldojo[rewards]'") from e
        self.extract = extract
        self.answer = answer
        self.float_rounding = float_rounding
        self.timeout_s = timeout_s

    def expected(self, task: Task) -> str | None:
        a = self.answer
        if isinstance(a, str):
            return a
        if isinstance(a, Mapping):
            return a.get(task.id)
        if callable(a):
            return a(task)
        return task.expected_outputs[0] if task.expected_outputs else None

    def _result(self, score: float | None, reason: str, **details: Any) -> RewardResult:
        return RewardResult(name=self.name, score=score, reason=reason, details=details)

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        try:
            return self._score(task, trajectory)
        except Exception as e:  # never raise out of a reward
            return self._result(0.0, f"the answer could not be checked ({type(e).__name__}: {str(e)[:200]})")

    def _score(self, task: Task, traj: Trajectory) -> RewardResult:
        from math_verify import verify

        gold_text = self.expected(task)
        if gold_text is None or not str(gold_text).strip():
            return self._result(None, f"task {task.id} has no expected answer (expected_outputs is empty and no "
                                      "answer was given); abstaining")
        gold_text = str(gold_text)
        # math-verify's timeouts use SIGALRM, which only the main thread may set
        timeout = self.timeout_s if threading.current_thread() is threading.main_thread() else None
        gold = _parse(gold_text, timeout, snippet=True)
        if not gold:
            return self._result(None, f"the expected answer {gold_text[:80]!r} cannot be parsed; abstaining",
                                expected=gold_text)
        text = final_message(traj)
        if text is None:
            return self._result(0.0, "no final assistant message to take an answer from", expected=gold_text)
        text = text[-_MAX_CHARS:]
        if self.extract == "last_boxed":
            pred_text = last_boxed(text)
            if pred_text is None:
                return self._result(0.0, "the final message has no \\boxed{...} answer", expected=gold_text)
        elif self.extract == "last_number":
            pred_text = last_number(text)
            if pred_text is None:
                return self._result(0.0, "the final message has no number in it", expected=gold_text)
        else:
            pred_text = text
        pred = _parse(pred_text, timeout, snippet=self.extract != "final_message")
        details = {"expected": gold_text, "extracted": pred_text[:500], "parsed": str(pred[0])[:200] if pred else None}
        if not pred:
            return self._result(0.0, f"the answer {pred_text[:80]!r} cannot be parsed as math", **details)
        ok = verify(gold, pred, float_rounding=self.float_rounding, timeout_seconds=timeout)
        if ok:
            return self._result(1.0, f"the answer {pred_text[:80]!r} equals the expected {gold_text[:80]!r}", **details)
        return self._result(0.0, f"the answer {pred_text[:80]!r} differs from the expected {gold_text[:80]!r}",
                            **details)
