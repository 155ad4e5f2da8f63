"""Reward composition (weights, gates, abstention), configs, and the TRL reward-function adapter."""

from __future__ import annotations

import inspect
import json
import sys
import types

import pytest

from rewards.base import RewardResult
from rewards.compose import (
    CompositeReward,
    RewardConfig,
    RewardSpec,
    build_reward,
    default_resolve,
    to_trl_reward,
    trajectory_from_messages,
)
from synth.episode import Trajectory
from synth.tasks import Action, Rubric, Task, UserScenario


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def make_task(**overrides) -> Task:
    fields = dict(
        id="retail-cancel", domain="retail_orders", seed=3,
        instruction="Please cancel my order O-1005 (email user100@example.com). Tell me the refund (in cents).",
        persona="Dara.", user_scenario=UserScenario(persona="Dara.", reason_for_call="Cancel an order.", task_instructions="-"),
        gold_actions=[Action(name="find_customer_by_email", arguments={"email": "user100@example.com"}),
                      Action(name="cancel_order", arguments={"order_id": "O-1005", "reason": "changed_mind"})],
        expected_outputs=["15896"], rubric=Rubric(), tools=["find_customer_by_email", "get_order", "cancel_order"],
        difficulty="medium")
    fields.update(overrides)
    return Task(**fields)


class Const:
    def __init__(self, name, score, flags=(), reason="const"):
        self.name, self.value, self.flags, self.reason, self.calls = name, score, list(flags), reason, 0

    async def score(self, task, trajectory):
        self.calls += 1
        return RewardResult(name=self.name, score=self.value, reason=self.reason, flags=self.flags)


class Boom:
    name = "boom"

    async def score(self, task, trajectory):
        raise RuntimeError("judge endpoint down")


TASK = make_task()
TRAJ = Trajectory(task_id="retail-cancel", domain="retail_orders", termination="user_stop",
                  messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Refund: 15896 cents."}])


# ------------------------------------------------------------------ composition
async def test_weighted_mean_over_non_abstaining_components():
    c = CompositeReward({"a": (Const("a", 1.0), 3.0), "b": (Const("b", 0.0), 1.0), "c": (Const("c", None), 5.0)}, gate=[],
                        judges=["c"])  # an abstaining judge is left out of the mean
    r = await c.score(TASK, TRAJ)
    assert r.score == pytest.approx(0.75) and set(r.details) >= {"a", "b", "c", "weights", "accepted"}
    assert r.details["c"]["score"] is None and r.details["a"]["score"] == 1.0 and "b 0.00" in r.reason
    assert r.details["accepted"] is False
    everyone_abstains = CompositeReward({"a": (Const("a", None), 1.0), "b": (Boom(), 1.0)}, gate=[], judges=["a", "b"])
    r = await everyone_abstains.score(TASK, TRAJ)
    assert r.score is None and "abstained" in r.reason
    assert r.details["b"]["score"] is None and "judge endpoint down" in r.details["b"]["reason"] and "error" in r.flags
    ok = await CompositeReward({"a": (Const("a", 1.0), 1.0), "z": (Const("z", 0.0), 0.0)}, gate=[]).score(TASK, TRAJ)
    assert ok.score == 1.0 and ok.details["accepted"]  # zero weight: reported, not counted


async def test_gates_zero_the_total_or_abstain():
    def comp(gate_score, flags=(), **kw):
        return CompositeReward({"a": (Const("a", 1.0), 1.0), "g": (Const("g", gate_score, flags, "tampered"), 0.0)},
                               gate=["g"], **kw)

    assert (await comp(1.0).score(TASK, TRAJ)).score == 1.0
    r = await comp(0.0, ["hack:state_mismatch"]).score(TASK, TRAJ)
    assert r.score == 0.0 and r.reason == "gated by g: tampered" and r.flags == ["hack:state_mismatch"]
    assert r.details["gated_by"] == "g" and r.details["pre_gate"] == 1.0
    assert (await comp(1.0, ["hack:claims_without_effect"]).score(TASK, TRAJ)).score == 0.0  # a flag alone gates
    assert (await comp(None).score(TASK, TRAJ)).score is None                               # unverified: abstain
    assert (await comp(None, gate_abstain="zero").score(TASK, TRAJ)).score == 0.0
    assert (await comp(None, gate_abstain="ignore").score(TASK, TRAJ)).score == 1.0
    # gates only run above gate_min_score
    g = Const("g", 0.0)
    low = CompositeReward({"a": (Const("a", 0.2), 1.0), "g": (g, 0.0)}, gate=["g"], gate_min_score=0.5)
    r = await low.score(TASK, TRAJ)
    assert r.score == pytest.approx(0.2) and g.calls == 0 and r.details["gates_run"] is False


async def test_a_hack_flag_from_any_component_zeroes_the_total():
    """Issue 22 item 3: only gate components' flags acted; a judge's own hack:judge_injection was ignored."""
    judge = Const("judge", 1.0, ["judge:injection_in_data", "hack:judge_injection"], "all criteria met")
    c = CompositeReward({"a": (Const("a", 1.0), 1.0), "judge": (judge, 1.0), "g": (Const("g", 1.0), 0.0)},
                        gate=["g"], judges=["judge"])
    r = await c.score(TASK, TRAJ)
    assert r.score == 0.0 and not r.details["accepted"] and r.details["hacked_by"] == ["judge"]
    assert "hack:judge_injection" in r.flags and r.reason.startswith("hack flag hack:judge_injection from judge")
    # weight 0, and even an abstaining component: its hack flag still zeroes the total
    for score, weight in ((1.0, 0.0), (None, 1.0)):
        c = CompositeReward({"a": (Const("a", 1.0), 1.0), "x": (Const("x", score, ["hack:tool_output_forged"]), weight)},
                            gate=[])
        r = await c.score(TASK, TRAJ)
        assert r.score == 0.0 and r.details["hacked_by"] == ["x"]
    # other flags do not zero a non-gate component
    c = CompositeReward({"a": (Const("a", 1.0, ["judge:reasked"]), 1.0)}, gate=[])
    assert (await c.score(TASK, TRAJ)).score == 1.0


async def test_a_weighted_verifiable_component_that_abstains_is_never_a_pass():
    """Issue 22 item 18: world_state abstained and a do-nothing agent scored 1.0, accepted."""
    def comp(ws_weight):
        return CompositeReward({"world_state": (Const("world_state", None, reason="gold action #1 failed"), ws_weight),
                                "communication": (Const("communication", 1.0), 0.3),
                                "reverify": (Const("reverify", 1.0), 0.0)}, gate=["reverify"])

    r = await comp(0.6).score(TASK, TRAJ)
    assert r.score is None and not r.details["accepted"] and r.details["unverified"] == ["world_state"]
    assert "world_state could not verify" in r.reason and "gold action #1 failed" in r.reason
    r = await comp(0.0).score(TASK, TRAJ)       # weight 0: reported only, as before
    assert r.score == 1.0 and "unverified" not in r.details
    weighted_gate = CompositeReward({"a": (Const("a", 1.0), 1.0), "g": (Const("g", None), 1.0)}, gate=["g"],
                                    gate_abstain="ignore")
    assert (await weighted_gate.score(TASK, TRAJ)).score == 1.0   # a gate follows gate_abstain


async def test_a_judge_never_lifts_a_trajectory_above_its_verifiable_checks():
    """Issue 22 item 3: a fooled judge (1.0) lifted a failed episode to 0.4, and alone to 1.0 and accepted."""
    fooled = Const("judge", 1.0, reason="fooled: every criterion met")
    default_plus_judge = CompositeReward({
        "world_state": (Const("world_state", 0.0), 0.6), "communication": (Const("communication", 0.2), 0.3),
        "tool_validity": (Const("tool_validity", 1.0), 0.1), "judge": (fooled, 0.5),
        "reverify": (Const("reverify", 1.0), 0.0)}, gate=["reverify"], judges=["judge"])
    r = await default_plus_judge.score(TASK, TRAJ)
    verifiable = 0.6 * 0.0 + 0.3 * 0.2 + 0.1 * 1.0
    assert r.score == pytest.approx(verifiable) and r.details["judge_capped"]["cap"] == pytest.approx(verifiable)
    assert r.details["judge_capped"]["before"] > verifiable and "never lifts" in r.reason
    judge_only = CompositeReward({"world_state": (Const("world_state", 0.0), 0.0), "judge": (fooled, 1.0),
                                  "reverify": (Const("reverify", 1.0), 0.0)}, gate=["reverify"], judges=["judge"])
    r = await judge_only.score(TASK, TRAJ)
    assert r.score == 0.0 and not r.details["accepted"]
    # a judge can still lower a reward, and a judge alone (no verifiable check) is scored as it says
    low = CompositeReward({"world_state": (Const("world_state", 1.0), 1.0), "judge": (Const("judge", 0.0), 1.0)},
                          gate=[], judges=["judge"])
    assert (await low.score(TASK, TRAJ)).score == pytest.approx(0.5)
    alone = CompositeReward({"judge": (fooled, 1.0)}, gate=[], judges=["judge"])
    assert (await alone.score(TASK, TRAJ)).score == 1.0
    # build_reward marks components of kind judge as judges
    cfg = RewardConfig(components=[RewardSpec(name="ws", kind="tool_validity", weight=0.0),
                                   RewardSpec(name="j", kind="judge", weight=1.0)], gate=[])
    assert build_reward(cfg, llm_client=object()).judges == {"j"}


def test_config_from_yaml_and_dict():
    text = """
components:
  - {name: world, kind: world_state, weight: 0.5}
  - {name: comm, kind: communication, weight: 0.5, params: {partial: true}}
  - {name: reverify, kind: reverify, weight: 0}
gate: [reverify]
threshold: 0.9
"""
    cfg = RewardConfig.from_yaml(text)
    assert [c.kind for c in cfg.components] == ["world_state", "communication", "reverify"] and cfg.threshold == 0.9
    assert RewardConfig.model_validate(json.loads(cfg.model_dump_json())) == cfg
    assert RewardConfig.from_yaml(cfg.to_yaml()) == cfg
    assert RewardConfig.default().gate == ["reverify"]
    with pytest.raises(ValueError, match="not components"):
        RewardConfig(components=[RewardSpec(name="a", kind="communication", weight=1)], gate=["reverify"])
    with pytest.raises(ValueError, match="unique"):
        RewardConfig(components=[RewardSpec(name="a", kind="communication"), RewardSpec(name="a", kind="rubric")], gate=[])
    with pytest.raises(ValueError):
        RewardSpec(name="x", kind="vibes", weight=1)


def test_build_reward_wires_every_kind(monkeypatch):
    made = {}

    def fake(mod, cls):
        m = types.ModuleType(mod)

        class R:
            def __init__(self, *args, **params):
                made[cls] = (args, params)
                self.name = cls

            async def score(self, task, trajectory):
                return RewardResult(name=self.name, score=1.0, reason="fake")

        setattr(m, cls, R)
        monkeypatch.setitem(sys.modules, mod, m)

    fake("rewards.judge", "RubricJudge")
    fake("rewards.code", "UnitTestReward")
    fake("rewards.answer", "AnswerReward")
    pool, client = object(), object()
    cfg = RewardConfig(components=[
        RewardSpec(name=k, kind=k, weight=1.0, params={"p": 1} if k in ("judge", "unit_tests", "answer") else {})
        for k in ("world_state", "communication", "rubric", "tool_validity", "reverify", "judge", "unit_tests", "answer")])
    c = build_reward(cfg, pool=pool, llm_client=client)
    assert list(c.rewards) == ["world_state", "communication", "rubric", "tool_validity", "reverify", "judge",
                               "unit_tests", "answer"]
    assert c.gate == ["reverify"]
    assert made == {"RubricJudge": ((client,), {"p": 1}), "UnitTestReward": ((pool,), {"p": 1}),
                    "AnswerReward": ((), {"p": 1})}
    with pytest.raises(ValueError, match="LLM client"):
        build_reward({"components": [{"name": "j", "kind": "judge"}], "gate": []}, pool=pool)
    with pytest.raises(ValueError, match="sandbox pool"):
        build_reward(None)  # the default needs a pool


# ------------------------------------------------------------------------- TRL
async def test_trl_adapter_contract():
    from trl.trainer.utils import get_callable_name, is_async_callable

    comp = CompositeReward({"a": (Const("a", 0.5), 1.0)}, gate=[], name="tau")
    fn = to_trl_reward(comp)
    assert inspect.iscoroutinefunction(fn) and is_async_callable(fn)
    assert fn.__name__ == "tau" and get_callable_name(fn) == "tau"
    extras, metrics = {}, {}
    rows = [{"task": TASK.model_dump_json(), "trajectory": TRAJ.model_dump_json()},
            {"task": TASK.model_dump(), "trajectory": TRAJ},
            {"task": None, "trajectory": None}]
    coro = fn(prompts=[[{"role": "user", "content": "hi"}]] * 3,
              completions=[[{"role": "assistant", "content": "x"}]] * 3, completion_ids=[[1]] * 3,
              task=[r["task"] for r in rows], trajectory=[r["trajectory"] for r in rows],
              trainer_state=object(), log_extra=lambda k, v: extras.__setitem__(k, v),
              log_metric=lambda k, v: metrics.__setitem__(k, v))
    assert inspect.isawaitable(coro)
    out = await coro
    assert out == [0.5, 0.5, None]
    assert extras["tau_reason"][2] == "no task/trajectory for this completion" and metrics["tau/hack_rate"] == 0.0


async def test_trl_adapter_resolvers_and_failures():
    class Env:
        def __init__(self, traj):
            self.task, self._traj = TASK, traj

        def trajectory(self):
            return self._traj

    seen = []

    class Spy:
        name = "spy"

        async def score(self, task, trajectory):
            seen.append(trajectory)
            return RewardResult(name="spy", score=1.0 if trajectory.tool_calls else 0.25, reason="ok")

    fn = to_trl_reward(Spy())
    out = await fn(prompts=["p", "p"], completions=["c", "c"], environments=[Env(TRAJ), Env(TRAJ)])
    assert out == [0.25, 0.25] and seen[0] is TRAJ

    # text-only fallback: the completion's messages, tool calls parsed
    completion = [{"role": "assistant", "content": None, "tool_calls": [{"id": "k1", "type": "function", "function": {
                      "name": "get_order", "arguments": '{"order_id": "O-1005"}'}}]},
                  {"role": "tool", "tool_call_id": "k1", "name": "get_order", "content": '{"status": "pending"}'},
                  {"role": "assistant", "content": "It is pending."}]
    out = await fn(prompts=[[{"role": "user", "content": "status?"}]], completions=[completion], task=[TASK])
    assert out == [1.0]
    rec = seen[-1].tool_calls[0]
    assert rec.ok and rec.arguments == {"order_id": "O-1005"} and rec.output == {"status": "pending"}
    assert seen[-1].messages[0]["content"] == "status?" and seen[-1].final_state is None

    # a custom async resolver, one that raises, and a reward that raises: abstain, never fail the batch
    async def resolve(row, i):
        if i == 1:
            raise KeyError("no such episode")
        return TASK, TRAJ

    out = await to_trl_reward(Spy(), resolve=resolve, name="custom")(prompts=["a", "b"], completions=["a", "b"])
    assert out == [0.25, None]
    out = await to_trl_reward(Boom())(prompts=["a"], completions=["a"], task=[TASK], trajectory=[TRAJ])
    assert out == [None]


def test_trajectory_from_messages_marks_errors_and_unknown_tools():
    msgs = [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "a", "function": {"name": "launch", "arguments": "{}"}},
                {"id": "b", "function": {"name": "get_order", "arguments": "{bad"}},
                {"id": "c", "function": {"name": "cancel_order", "arguments": {"order_id": "O-1"}}}]},
            {"role": "tool", "tool_call_id": "a", "content": "Error (malformed_call): unknown tool"},
            {"role": "tool", "tool_call_id": "b", "content": "Error: bad json"},
            {"role": "tool", "tool_call_id": "c", "content": "Error (tool_failure, order_not_found): no order"}]
    t = trajectory_from_messages(TASK, msgs)
    assert [(r.name, r.ok, r.malformed) for r in t.tool_calls] == [
        ("launch", False, True), ("get_order", False, True), ("cancel_order", False, False)]
    assert default_resolve({"task": None}, 0) is None


# ------------------------------------------------------------ real sandboxes
@pytest.fixture(scope="module")
async def pool():
    from conftest import require
    from sandboxes import SandboxConfig, SandboxPool

    require("docker")
    async with SandboxPool(SandboxConfig(backend="docker"), size=2, max_concurrency=8) as p:
        yield p


@pytest.mark.docker
async def test_default_composite_on_real_episodes(pool):
    from synth.episode import CallableAgent, ScriptedAgent, run_episode
    from synth.tasks import replay_task
    from synth.usersim import ScriptedUser

    r = await replay_task(make_task(), pool)
    task = make_task(final_state_hash=r.final_state_hash)
    reward = build_reward(RewardConfig.default(), pool=pool)
    gold = await run_episode(task, ScriptedAgent(task), ScriptedUser(), pool)
    g = await reward.score(task, gold)
    assert g.score == 1.0 and g.details["accepted"] and g.details["reverify"]["score"] == 1.0, g.reason

    def liar(messages, tools):
        return {"role": "assistant", "content": "I've cancelled order O-1005; you get 15896 cents back."}

    bad = await run_episode(task, CallableAgent(liar), ScriptedUser(), pool)
    b = await reward.score(task, bad)
    # communication alone would give 0.3 + tool validity 0.1; the hack check zeroes it
    assert b.details["pre_gate"] == pytest.approx(0.4)
    assert b.score == 0.0 and b.reason.startswith("gated by reverify") and "hack:claims_without_effect" in b.flags

    fn = to_trl_reward(reward)
    out = await fn(prompts=["p"] * 3, completions=["c"] * 3, task=[task] * 3, trajectory=[gold, bad, None])
    assert out == [1.0, 0.0, None]
    assert pool.leased == 0


def test_build_reward_finds_an_out_of_tree_domain_from_an_object_or_a_folder(tmp_path, clean_registry):
    """Not only through $TOOLDOJO_DOMAIN_DIRS: a Domain object reaches every component that reads the
    task's domain, and a domain folder is registered by name."""
    from toolzoo import domain_dirs
    from toolzoo.domains import load_domain

    dom = load_domain("notes_app").model_copy(update={"name": "my_notes"})
    reward = build_reward(RewardConfig.default(), pool=object(), domain=dom)
    readers = {name: r for name, (r, _w) in reward.rewards.items()
               if type(r).__name__ in ("WorldStateReward", "RubricReward", "ReverifyReward")}
    assert readers, reward.rewards
    for r in readers.values():
        assert (r.replayer.domain if hasattr(r, "replayer") else r.domain) is dom, r

    (tmp_path / "my_dom").mkdir()
    (tmp_path / "my_dom" / "tools.py").write_text("")
    build_reward(RewardConfig.default(), pool=object(), domain_dir=tmp_path / "my_dom")
    assert domain_dirs.registered()["my_dom"] == (tmp_path / "my_dom").resolve()
