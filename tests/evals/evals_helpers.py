"""Shared helpers of the evals tests: a sandbox backend, known-good answers, a scripted judge."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conftest import backend_status
from evals.models import FunctionModel
from synth.episode import ScriptedAgent

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "evals" / "personal"


def sandbox_backend() -> str:
    for b in ("docker", "local"):
        if backend_status(b)[0]:
            return b
    pytest.skip("no sandbox backend works here: " + "; ".join(f"{b}: {backend_status(b)[1]}" for b in ("docker", "local")))


# Correct answers to the example suite's chat cases (keyed by a phrase of the prompt).
GOOD = {
    "FizzBuzz": "```python\nfor i in range(1, 16):\n    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 "
                "else 'Buzz' if i % 5 == 0 else i)\n```",
    "first 10 prime": "Here:\n```python\nprint(' '.join(map(str, [2, 3, 5, 7, 11, 13, 17, 19, 23, 29])))\n```",
    "reverse_words": "```python\ndef reverse_words(s):\n    return ' '.join(reversed(s.split(' ')))\n```",
    "is_palindrome": "```python\ndef is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n```",
    "bash script": "```bash\necho 1,2,3,4,5\n```",
    "JSON object": "```python\nimport json, sys\nprint(json.load(sys.stdin)['name'])\n```",
    "fib(n)": "```python\ndef fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\nprint(fib(10))\n```",
    "safe_div": "```python\ndef safe_div(a, b):\n    return None if b == 0 else a / b\n```",
    "17 * 23": "391", "bat and a ball": "5", "Wednesday": "It will be Saturday.", "alphabetically": "apple, fig, pear",
    "seconds": "10,800 seconds", "bloops": "Yes.", "two letters OK": "OK",
    "sky is blue": "Rayleigh scattering: air molecules scatter shorter, blue wavelengths more than red ones.",
    "France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "haiku": "sand walls hold the code / nothing leaks",
}


def good_answer(messages: list[dict], tools: list[dict], task: Any) -> str:
    prompt = messages[-1]["content"]
    return next((v for k, v in GOOD.items() if k in prompt), "I do not know.")


class GoodModel(FunctionModel):
    """Known-good: the answers above for chat cases, the gold-replaying ScriptedAgent for tool episodes."""

    def __init__(self, label: str = "good", respond=good_answer) -> None:
        super().__init__(label, respond)
        self.episodes = 0

    def agent(self, *, task, **kw):
        if task is not None:
            self.episodes += 1
            return ScriptedAgent(task)
        return super().agent(task=task, **kw)


class _JudgeConfig:
    model = "scripted-judge"


class ScriptedJudge:
    """TEST DOUBLE of the judge's LLM client (``json`` + ``config.model``), not a model: every criterion
    is met iff ``needle`` occurs in the transcript, with the needle quoted from the last step as
    evidence. ``fail`` makes every call raise like an unreachable endpoint."""

    def __init__(self, needle: str, *, fail: bool = False) -> None:
        self.needle = needle
        self.fail = fail
        self.calls = 0
        self.config = _JudgeConfig()

    async def json(self, messages: list[dict], schema: dict, **kw: Any) -> Any:
        from synth.llm import LLMUnavailable

        self.calls += 1
        if self.fail:
            raise LLMUnavailable("http://127.0.0.1:9/v1/chat/completions (model 'judge') failed after 1 attempt(s): "
                                 "cannot connect")
        text = messages[-1]["content"]
        criteria = [item["properties"]["criterion"]["const"] for item in schema["properties"]["criteria"]["prefixItems"]]
        data = text.split("<transcript_data>\n", 1)[1].split("\n</transcript_data>", 1)[0].splitlines()
        steps = [json.loads(line) for line in data]
        hit = next((st for st in steps if self.needle in json.dumps(st, ensure_ascii=False)), None)
        met = hit is not None
        evidence = f'step {hit["step"]}: "{self.needle}"' if met else f"step {steps[-1]['step']}: not there"
        return {"criteria": [{"criterion": c, "met": met, "evidence": evidence} for c in criteria],
                "explanation": "scripted", "score": 1.0 if met else 0.0}


def server_requests(base_url: str) -> float:
    """vllm:request_success_total summed over finish reasons, read from the server's /metrics."""
    with urllib.request.urlopen(base_url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=30) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total{"))
