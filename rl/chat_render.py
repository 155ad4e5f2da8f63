"""A conversation rendered exactly as the policy sees it (the corpus and the copy drills both write these)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["render_transcript"]


def render_transcript(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """A conversation exactly as the policy sees it (the chat template, no generation prompt)."""
    from rl.tiny import qwen2_5_chat_template
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
    return env.from_string(qwen2_5_chat_template()).render(messages=messages, tools=tools, add_generation_prompt=False)
