"""`dojo train` refuses, before training, a run in which no episode can generate: the prompt (system
prompt and tool schemas) fills the model's context (issue 30 finding 8)."""

from __future__ import annotations

import json

import pytest

from rl.rollout import MultiTurnRollout, PromptTooLong
from synth.tasks import Action, Rubric, Task, UserScenario
from toolzoo.domains import load_domain


class WordTokenizer:
    """TEST DOUBLE of a chat tokenizer: one token per whitespace-separated word of the rendered chat."""

    def apply_chat_template(self, messages, tools=None, tokenize=False, add_generation_prompt=False):
        return " ".join([json.dumps(tools or [])] + [m["content"] for m in messages] + ["assistant:"])

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": list(range(len(text.split())))}


def _task(tools: list[str]) -> Task:
    return Task(id="t1", domain="home_devices", seed=0, instruction="Apply a scene.", persona="p",
                user_scenario=UserScenario(persona="p", reason_for_call="r", task_instructions="i"),
                gold_actions=[Action(name=tools[0], arguments={})], rubric=Rubric(), tools=tools, difficulty="easy")


def test_a_prompt_that_fills_the_context_is_refused_with_the_counts():
    tools = [t.name for t in load_domain("home_devices").tools]
    rollout = MultiTurnRollout([_task(tools)], tokenizer=WordTokenizer(), max_completion_length=64)
    n = rollout.prompt_tokens(rollout.tasks["t1"])
    assert n > 10
    with pytest.raises(PromptTooLong) as e:
        rollout.check_prompts_fit(n)
    msg = str(e.value)
    assert f"is {n} tokens and the model's context is {n}" in msg and "fewer tools" in msg, msg
    assert "rollout.system_prompt=brief" in msg and "max_completion_length" in msg, msg
    rollout.check_prompts_fit(n + 1)  # room for one token: an episode can generate


def test_train_checks_the_prompts_before_building_the_trainer():
    """The check is wired into rl.trainer.train ahead of build_trainer (nothing is trained first)."""
    import inspect

    from rl import trainer

    src = inspect.getsource(trainer.train)
    assert 0 < src.index("rollout.check_prompts_fit(") < src.index("build_trainer(")
