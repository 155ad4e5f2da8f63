"""User simulators (synth.usersim): the scripted rules, the LLM user's BoN/critique/fallback logic
against a scripted test double of the LLM client, and the plumbing against the real vLLM server."""

from __future__ import annotations

from typing import Any


from synth.llm import ChatResult, Usage
from synth.tasks import Action, Rubric, Task, UserScenario
from synth.usersim import (
    STOP,
    LLMUser,
    ScriptedUser,
    UserSimulator,
    asks_for,
    flip,
    is_plausible,
    scenario_text,
    user_only_info,
)


def make_task(**overrides) -> Task:
    fields = dict(
        id="t", domain="retail_orders", seed=3,
        instruction="Please cancel order O-1005 for me (I changed my mind) and tell me the refund in cents.",
        persona="Dara, terse.",
        user_scenario=UserScenario(
            persona="Dara, terse.", reason_for_call="You want to cancel a pending order.",
            known_info={"email": "user100@example.com", "order id": "O-1005", "postal code": "73301"},
            unknown_info=["the refunded amount"], task_instructions="Give your email only when asked."),
        gold_actions=[Action(name="cancel_order", arguments={"order_id": "O-1005", "reason": "changed_mind"})],
        expected_outputs=["15,896", "cancelled"],
        rubric=Rubric(checkpoints=["asks the user for the missing detail (user100@example.com) instead of guessing it"]),
        tools=["cancel_order"], difficulty="medium", needs_user_info=True,
    )
    fields.update(overrides)
    return Task(**fields)


def convo(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "policy"}] + [{"role": r, "content": c} for r, c in pairs]


# -------------------------------------------------------------------------- scripted
async def test_scripted_user_reveals_known_info_only_when_asked():
    task = make_task()
    user = ScriptedUser()
    assert isinstance(user, UserSimulator)
    first = await user.first_message(task)
    assert first == task.instruction  # the instruction never held the email
    c = convo(("user", first), ("assistant", "I can help with that."))
    reply = await user.reply(task, c)
    assert "user100@example.com" not in reply and "O-1005" not in reply and STOP not in reply

    c += [{"role": "user", "content": reply}, {"role": "assistant", "content": "Could you tell me your email address?"}]
    reply = await user.reply(task, c)
    assert reply == "My email is user100@example.com."
    # a statement that mentions a key is not a question
    c += [{"role": "user", "content": reply}, {"role": "assistant", "content": "I updated the postal code records"}]
    assert "73301" not in await user.reply(task, c)
    # two keys at once, synonyms ("order number")
    c += [{"role": "user", "content": "ok"},
          {"role": "assistant", "content": "What is the order number and your postal code?"}]
    reply = await user.reply(task, c)
    assert "O-1005" in reply and "73301" in reply and "user100" not in reply
    # tool traffic is invisible: the last *text* of the agent counts
    c += [{"role": "user", "content": reply},
          {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "type": "function",
                                                                "function": {"name": "cancel_order", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "x", "content": '{"email": "user100@example.com"}'},
          {"role": "assistant", "content": "Which refund amount do you expect?"}]
    assert await user.reply(task, c) == "Sorry, I don't know that."
    assert user.stats.revealed == 3


async def test_scripted_user_stops_on_expected_outputs_or_turns():
    task = make_task()
    user = ScriptedUser(max_turns=4)
    c = convo(("user", "hi"), ("assistant", "Your order is Cancelled."))
    assert STOP not in await user.reply(task, c)               # one of two outputs so far
    c += [{"role": "user", "content": "and?"}, {"role": "assistant", "content": "The refund is 15896 cents."}]
    assert STOP in await user.reply(task, c)                   # tau-style: case and commas ignored, across messages
    c = convo(*[(r, "hmm") for _ in range(4) for r in ("user", "assistant")])
    assert STOP in await user.reply(task, c)                   # 4 user turns, then stop
    assert user.stats.stops == 2
    # no expected outputs: a final statement (no question) ends it
    done = make_task(expected_outputs=[])
    assert STOP in await ScriptedUser().reply(done, convo(("user", "hi"), ("assistant", "Done, it is cancelled.")))
    assert STOP not in await ScriptedUser().reply(done, convo(("user", "hi"), ("assistant", "Shall I cancel it?")))


async def test_opening_redacts_flagged_user_only_values():
    leaky = make_task(instruction="Cancel order O-1005; my email is user100@example.com.")
    assert set(user_only_info(leaky)) == {"email", "postal code"}
    opening = await ScriptedUser().first_message(leaky)
    assert "user100@example.com" not in opening and "[my email]" in opening and "O-1005" in opening
    plain = make_task(needs_user_info=False, instruction="Cancel order O-1005; my email is user100@example.com.")
    assert await ScriptedUser().first_message(plain) == plain.instruction


def test_asks_for_and_plausibility():
    assert asks_for("Can you share the customer email?", "email")
    assert asks_for("what's the order id?", "order_id")
    assert asks_for("Please provide the weight (in kg).", "weight (in kg)")
    assert asks_for("How heavy is it, what weight?", "weight (in kg)")
    assert not asks_for("Thanks for your email.", "email")
    assert not asks_for("What is your name?", "order id")
    assert is_plausible("Hi, I'd like to cancel my order O-1005, please.")
    assert is_plausible(STOP) and is_plausible(f"Thanks! {STOP}")
    assert is_plausible("It's jane_doe@example.com, and the order is O-1005 ($158.96).")
    assert is_plausible("Yes.\nPlease go ahead, thanks!")
    assert is_plausible("Yes.") and is_plausible("okay")
    for junk in ["", "   ", "<|im_start|>assistant", '{"name": "get_order", "arguments": {', "zxcvbnm qwrtpsdf ghjklzxc",
                 "ordercustomer_idreturnsitemsstatuspendingshipped", "ùñ∂∑ßåœ∆ 漢字漢字", "_id\": ,\"\": [{ }]",
                 # random-init tiny model outputs seen against vLLM
                 "exceed si attende moved>\n\n You_s work launwitfter plancloreadTHusJ\n\n\x06parametersaract",
                 "clo", "filtered.",
                 '"aresug_chkeob W market filteredplet|>\npendingvidedXvehic any disunit\x03 student products_book',
                 " on \\\"rokerouse�_conflict roomcy rece parceledscel labels}}}\nrepname"]:
        assert not is_plausible(junk), junk


def test_flip_and_scenario():
    task = make_task()
    flipped = flip(convo(("user", "hello"), ("assistant", "Which order?"),
                         ("assistant", "Also your email?"), ("user", "O-1005")))
    assert [m["role"] for m in flipped] == ["user", "assistant", "user", "assistant"]
    assert flipped[2]["content"] == "Which order?\n\nAlso your email?"
    text = scenario_text(task)
    assert "user100@example.com" in text and "the refunded amount" in text and "Dara" in text


# ------------------------------------------------------------------ LLM user, test double
class ScriptedLLM:
    """A test double of synth.llm.LLMClient: canned texts per call, records what it was asked."""

    def __init__(self, texts: list[list[str]], verdicts: list[Any] | None = None, fail: bool = False):
        self.texts = list(texts)
        self.verdicts = list(verdicts or [])
        self.fail = fail
        self.calls: list[dict[str, Any]] = []

    def _result(self, text: str) -> ChatResult:
        return ChatResult(message={"role": "assistant", "content": text}, finish_reason="stop",
                          usage=Usage(prompt_tokens=10, completion_tokens=3))

    async def chat(self, messages, **kw):
        return (await self.chat_many(messages, n=1, **kw))[0]

    async def chat_many(self, messages, *, n, **kw):
        self.calls.append({"messages": messages, "n": n, **kw})
        if self.fail:
            raise ConnectionError("endpoint down")
        batch = self.texts.pop(0)
        assert len(batch) == n
        return [self._result(t) for t in batch]

    async def json(self, messages, schema):
        self.calls.append({"json": messages, "schema": schema})
        v = self.verdicts.pop(0)
        if isinstance(v, Exception):
            raise v
        return v


async def test_llm_user_prompt_and_single_sample():
    task = make_task()
    llm = ScriptedLLM([["Hi, I need to cancel an order."], ["Sure, it's user100@example.com."]])
    user = LLMUser(llm)
    assert await user.first_message(task) == "Hi, I need to cancel an order."
    system = llm.calls[0]["messages"][0]["content"]
    assert "###STOP###" in system and "###TRANSFER###" in system and "only when the agent asks" in system
    assert "user100@example.com" in system and "the refunded amount" in system
    assert llm.calls[0]["messages"][1] == {"role": "user", "content": "Hi! How can I help you today?"}
    c = convo(("user", "Hi, I need to cancel an order."), ("assistant", "What's your email?"))
    assert await user.reply(task, c) == "Sure, it's user100@example.com."
    assert [m["role"] for m in llm.calls[1]["messages"]] == ["system", "user", "assistant", "user"]
    assert user.stats.fallbacks == 0 and user.stats.llm_calls == 2 and user.stats.completion_tokens == 6


async def test_llm_user_best_of_n_with_critique():
    task = make_task()
    llm = ScriptedLLM([["My email is user100@example.com.", "", "My email is fake@x.com, order O-9."]],
                      verdicts=[{"scores": [{"candidate": 0, "score": 2}, {"candidate": 1, "score": 9}], "best": 1}])
    user = LLMUser(llm, best_of_n=3, critique=True)
    c = convo(("user", "hi"), ("assistant", "What's your email?"))
    reply = await user.reply(task, c)
    assert reply == "My email is fake@x.com, order O-9."   # the critic's pick among the 2 valid candidates
    assert llm.calls[0]["n"] == 3 and "[1] My email is fake@x.com" in llm.calls[1]["json"][0]["content"]
    assert user.stats.invalid_candidates == 1 and user.stats.critiques == 1
    # a critic that fails or answers nonsense: first valid candidate
    llm = ScriptedLLM([["Yes please.", "Yes, go ahead."]] * 2, verdicts=[RuntimeError("bad json"), {"best": 7, "scores": []}])
    user = LLMUser(llm, best_of_n=2, critique=True)
    assert await user.reply(task, c) == "Yes please."
    assert await user.reply(task, c) == "Yes please."
    assert user.stats.critique_failures == 2


async def test_llm_user_garbage_is_retried_then_replaced_by_the_scripted_user():
    task = make_task()
    llm = ScriptedLLM([["", "\u00e5\u00df\u2202\u0192"], ["Ok thanks!", "zzkq xxrt"]])
    user = LLMUser(llm, best_of_n=2)
    c = convo(("user", "hi"), ("assistant", "What's your email?"))
    assert await user.reply(task, c) == "Ok thanks!"            # retry succeeded
    assert user.stats.retries == 1 and user.stats.fallbacks == 0

    llm = ScriptedLLM([["ĠĠ_id\":{"], ["<|im_end|>"]])
    user = LLMUser(llm)
    assert await user.reply(task, c) == "My email is user100@example.com."   # the scripted rules answer
    assert user.stats.retries == 1 and user.stats.fallbacks == 1
    llm = ScriptedLLM([[""], [""]])
    user = LLMUser(llm)
    assert await user.first_message(task) == task.instruction and user.stats.fallbacks == 1

    down = LLMUser(ScriptedLLM([], fail=True))
    assert await down.reply(task, c) == "My email is user100@example.com."
    assert down.stats.fallbacks == 1 and down.stats.llm_calls == 2
    # the turn cap holds even when the model never stops
    many = convo(*[(r, "hmm?") for _ in range(10) for r in ("user", "assistant")])
    assert STOP in await LLMUser(ScriptedLLM([]), max_turns=10).reply(task, many)


# ------------------------------------------------------------------- the real vLLM server
async def test_llm_user_against_vllm(vllm_server):
    server = vllm_server  # a parameter, not getfixturevalue: tests/conftest.py groups its users by it
    from synth.llm import LLMClient, LLMConfig

    async with LLMClient(LLMConfig(base_url=server.base_url, model=server.model)) as client:
        task = make_task()
        user = LLMUser(client, best_of_n=2, critique=True, max_tokens=32, seed=0)
        first = await user.first_message(task)
        reply = await user.reply(task, convo(("user", first), ("assistant", "What's your email?")))
    # random weights: whatever came back is either plausible text or the scripted fallback
    assert isinstance(first, str) and first.strip() and isinstance(reply, str) and reply.strip()
    assert user.stats.llm_calls >= 2 and user.stats.candidates >= 4
    assert user.stats.fallbacks + (user.stats.candidates - user.stats.invalid_candidates > 0) >= 1
    if user.stats.fallbacks == 2:
        assert first == task.instruction and reply == "My email is user100@example.com."
