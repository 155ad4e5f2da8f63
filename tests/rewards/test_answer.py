"""rewards.answer.AnswerReward: math-verify equivalence of the final answer (no sandbox, no model)."""

from __future__ import annotations

import threading

import anyio
import pytest

pytest.importorskip("math_verify")

from rewards.answer import AnswerReward, last_boxed, last_number  # noqa: E402
from synth.episode import Trajectory  # noqa: E402
from synth.tasks import Rubric, Task, UserScenario  # noqa: E402


def task(expected: list[str] | None = None, id: str = "math-1") -> Task:
    return Task(id=id, domain="math", seed=0, instruction="What is 1 divided by 2?", persona="a student",
                user_scenario=UserScenario(persona="a student", reason_for_call="homework", task_instructions="ask"),
                gold_actions=[], expected_outputs=["1/2"] if expected is None else expected, rubric=Rubric(),
                tools=[], difficulty="easy")


def said(*texts: str | None) -> Trajectory:
    msgs = [{"role": "user", "content": "What is 1 divided by 2?"}]
    msgs += [{"role": "assistant", "content": t} for t in texts]
    return Trajectory(task_id="math-1", domain="math", messages=msgs)


@pytest.mark.parametrize("text", [r"So the answer is $\boxed{\frac{1}{2}}$.", r"\boxed{0.5}", r"\boxed{1/2}",
                                  r"\boxed{\dfrac{1}{2}}", r"\boxed{\frac12}", r"\boxed{2^{-1}}"])
async def test_boxed_equivalent_forms(text):
    r = await AnswerReward(extract="last_boxed").score(task(), said(text))
    assert r.score == 1.0, r.reason


@pytest.mark.parametrize("expected", ["1/2", "0.5", r"\frac{1}{2}", r"$\frac{1}{2}$"])
async def test_expected_forms(expected):
    for text in [r"\boxed{0.5}", r"\boxed{\frac{1}{2}}", r"\boxed{1/2}"]:
        r = await AnswerReward().score(task([expected]), said(text))
        assert r.score == 1.0, (expected, text, r.reason)


async def test_last_number_and_final_message():
    r = await AnswerReward(extract="last_number").score(task(), said("First 3, then 7... finally it is 0.5"))
    assert r.score == 1.0 and r.details["extracted"] == "0.5", r.reason
    r = await AnswerReward(extract="last_number").score(task(), said("half, i.e. 1/2"))
    assert r.score == 1.0, r.reason
    r = await AnswerReward(extract="last_number").score(task(["1234.5"]), said("It costs 1,234.5 dollars."))
    assert r.score == 1.0, r.reason
    r = await AnswerReward(extract="final_message").score(task(), said(r"The result is $\frac{1}{2}$"))
    assert r.score == 1.0, r.reason
    # the final message is the last assistant text, not an earlier one
    r = await AnswerReward(extract="last_number").score(task(), said("maybe 0.5?", "no wait, it is 2", None))
    assert r.score == 0.0 and "'2'" in r.reason


async def test_wrong_answers():
    for text, extract in [(r"\boxed{0.25}", "last_boxed"), (r"\boxed{2}", "last_boxed"), ("It is 3", "last_number"),
                          (r"\boxed{-\frac{1}{2}}", "last_boxed")]:
        r = await AnswerReward(extract=extract).score(task(), said(text))
        assert r.score == 0.0 and "differs" in r.reason, (text, r.reason)


async def test_unparseable_and_missing_never_raise():
    cases = [
        (said("I think it is one half."), "last_boxed", "no \\boxed"),
        (said("no digits here"), "last_number", "no number"),
        (said(r"\boxed{}"), "last_boxed", "no \\boxed"),
        (said(r"\boxed{\frac{1}{"), "last_boxed", "no \\boxed"),          # unbalanced
        (said(r"\boxed{@@@ ### !!!}"), "last_boxed", "cannot be parsed"),
        (said("%%%%"), "final_message", "cannot be parsed"),
        (said(), "last_boxed", "no final assistant message"),
        (said("\x00" * 10 + r"\boxed{" + "{" * 500 + "}" * 500 + "}"), "last_boxed", ""),
    ]
    for traj, extract, why in cases:
        r = await AnswerReward(extract=extract).score(task(), traj)
        assert r.score == 0.0 and why in r.reason, (extract, r.reason)
    r = await AnswerReward().score(task([]), said(r"\boxed{1}"))
    assert r.score is None and "no expected answer" in r.reason
    r = await AnswerReward().score(task(["@@@"]), said(r"\boxed{1}"))
    assert r.score is None and "cannot be parsed" in r.reason
    with pytest.raises(ValueError):
        AnswerReward(extract="first_word")


async def test_explicit_answer_param_and_worker_threads():
    r = await AnswerReward(answer="3").score(task(["1/2"]), said(r"\boxed{3}"))
    assert r.score == 1.0
    r = await AnswerReward(answer={"math-1": "0.75"}).score(task(), said(r"\boxed{\frac{3}{4}}"))
    assert r.score == 1.0
    r = await AnswerReward(answer=lambda t: "10").score(task(), said(r"\boxed{10}"))
    assert r.score == 1.0
    # in a worker thread (SIGALRM is unavailable there) it still works
    out = {}

    def work():
        out["r"] = anyio.run(AnswerReward().score, task(), said(r"\boxed{0.5}"))
        out["thread"] = threading.current_thread() is not threading.main_thread()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert out["thread"] and out["r"].score == 1.0


def test_extractors():
    assert last_boxed(r"\boxed{1} then \boxed{\frac{a}{b}}") == r"\frac{a}{b}"
    assert last_boxed(r"\fbox{x^{2}}") == "x^{2}"
    assert last_boxed("none") is None
    assert last_number("a -3.5 and 7/8 and 50%") == "50%"
    assert last_number("-3.5") == "-3.5" and last_number("x2y") is None and last_number("1,000") == "1000"
