"""Verifiable rewards on real sandboxed episodes (Docker): gold trajectories pass every reward,
misbehaving agents are caught with the right reason, a dead sandbox abstains."""

from __future__ import annotations

import json
import os
import signal

import pytest

from rewards.verifiable import (
    FLAG_CLAIMS,
    FLAG_FORGED,
    FLAG_STATE,
    CommunicationReward,
    GoldCache,
    ReverifyReward,
    RubricReward,
    ToolCallValidityReward,
    WorldStateReward,
    claims,
    mentions,
    state_diff,
)
from sandboxes import SandboxConfig, SandboxPool, state_digest
from synth.episode import CallableAgent, ScriptedAgent, Trajectory, run_episode, run_episodes
from synth.tasks import Action, Rubric, Task, UserScenario, replay_task
from synth.usersim import STOP, ScriptedUser
from conftest import require, tasks16

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def anyio_backend() -> str:  # module-scoped async fixtures (one pool, one set of episodes)
    return "asyncio"


@pytest.fixture(scope="module")
def docker() -> str:
    require("docker")
    return "docker"


@pytest.fixture(scope="module")
def tasks(docker, synth16_docker) -> list[Task]:
    return tasks16(synth16_docker)  # made once per session (tests/conftest.py)


@pytest.fixture(scope="module")
async def pool(docker):
    async with SandboxPool(SandboxConfig(backend=docker), size=4, max_concurrency=16) as p:
        yield p


@pytest.fixture(scope="module")
async def gold(tasks, pool) -> list[Trajectory]:
    return await run_episodes(tasks, ScriptedAgent, lambda t: ScriptedUser(), pool, concurrency=8, progress=False)


def all_rewards(pool, **kw):
    return [WorldStateReward(pool), CommunicationReward(), RubricReward(**kw), ToolCallValidityReward(), ReverifyReward(pool)]


# ----------------------------------------------------------------------- tasks
async def hashed(task: Task, pool) -> Task:
    r = await replay_task(task, pool)
    assert r.ok, r.reason
    return task.model_copy(update={"final_state_hash": r.final_state_hash})


def retail_task(**overrides) -> Task:
    fields = dict(
        id="retail-cancel", domain="retail_orders", seed=3,
        instruction="Hi, please cancel my order O-1005 (my email is user100@example.com), I changed my mind. "
                    "Tell me how much gets refunded (in cents).",
        persona="Dara, terse.",
        user_scenario=UserScenario(persona="Dara, terse.", reason_for_call="You want to cancel a pending order.",
                                   known_info={"email": "user100@example.com", "order id": "O-1005"},
                                   unknown_info=["the refunded amount"], task_instructions="Confirm when asked."),
        gold_actions=[Action(name="find_customer_by_email", arguments={"email": "user100@example.com"}),
                      Action(name="cancel_order", arguments={"order_id": "O-1005", "reason": "changed_mind"})],
        expected_outputs=["15896"],
        rubric=Rubric(expected_tool_pattern=["find_customer_by_email", "cancel_order"],
                      checkpoints=["confirms the change with the user before calling cancel_order"]),
        tools=["find_customer_by_email", "get_order", "cancel_order"], difficulty="medium")
    fields.update(overrides)
    return Task(**fields)


def grocery_task() -> Task:
    return Task(
        id="grocery-add", domain="grocery_cart", seed=0,
        instruction="I'm customer G-100. Please add 2 greek yoghurts (SKU-101) to my cart.",
        persona="Ana.", user_scenario=UserScenario(persona="Ana.", reason_for_call="Add yoghurt.",
                                                    task_instructions="Confirm when asked."),
        gold_actions=[Action(name="add_to_grocery_cart", arguments={"customer_id": "G-100", "sku": "SKU-101", "qty": 2})],
        expected_outputs=[], rubric=Rubric(expected_tool_pattern=["add_to_grocery_cart"]),
        tools=["view_grocery_cart", "add_to_grocery_cart", "remove_from_grocery_cart"], difficulty="easy")


def call(name: str, i: int = 1, **args) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def say(text: str) -> dict:
    return {"role": "assistant", "content": text}


def script(*steps: dict) -> CallableAgent:
    """An agent that plays `steps` in order, then repeats the last text."""
    it = iter(steps)
    last = {"role": "assistant", "content": "Is there anything else?"}

    def act(messages, tools):
        nonlocal last
        step = next(it, None)
        if step is None:
            return dict(last)
        if step.get("content"):
            last = step
        return dict(step)

    return CallableAgent(act)


async def score_all(rewards, task, traj):
    return {r.name: await r.score(task, traj) for r in rewards}


# ------------------------------------------------------------------------ gold
async def test_gold_trajectories_score_one_on_every_verifiable_reward(tasks, gold, pool):
    assert len({t.domain for t in tasks}) >= 8
    rewards = all_rewards(pool, strict_writes=True)
    for task, traj in zip(tasks, gold, strict=True):
        assert traj.termination == "user_stop" and traj.reached_expected_state
        for name, r in (await score_all(rewards, task, traj)).items():
            assert r.score == 1.0 and not r.flags, (task.id, name, r.reason)
    assert pool.leased == 0


async def test_gold_state_is_replayed_not_trusted_and_cached(tasks, gold, pool):
    task, traj = tasks[0], gold[0]
    cache = GoldCache()
    world = WorldStateReward(pool, cache=cache)
    stale = task.model_copy(update={"final_state_hash": "0" * 64})
    r = await world.score(stale, traj)
    assert r.score == 1.0 and r.details["stale_task_hash"] == "0" * 64 and r.details["gold_hash"] == traj.final_state_hash
    assert cache.get(task) is not None and cache.get(task)[0] == task.final_state_hash
    started = pool.stats.acquired
    await world.score(task, traj)
    assert pool.stats.acquired == started  # cached: no second replay


async def test_rubric_confirmation_checkpoints(tasks, gold, pool):
    task, traj = next((t, g) for t, g in zip(tasks, gold, strict=True)
                      if any(c.startswith("confirms the change") for c in t.rubric.checkpoints))
    # the scripted gold agent writes without asking: reported, counted only when asked for
    r = await RubricReward().score(task, traj)
    conf = [c for c in r.details["checkpoints"] if c["kind"] == "confirmation"]
    assert r.score == 1.0 and conf and not any(c["satisfied"] or c["counted"] for c in conf)
    r = await RubricReward(check_confirmations=True).score(task, traj)
    assert r.score < 1.0 and "without asking the user to confirm" in r.reason

    class Confirming(ScriptedAgent):
        """Asks before each write; ScriptedUser answers 'Please go ahead with my request.'"""

        async def act(self, messages, tools):
            pending = self.task.gold_actions[self.next] if not self.ask and self.next < len(self.task.gold_actions) else None
            if pending and pending.name in writes and messages[-1]["role"] != "user":
                return say(f"I'm about to call {pending.name}. Shall I go ahead?")
            return await super().act(messages, tools)

    from toolzoo.domains import load_domain
    writes = {t.name for t in load_domain(task.domain).tools if t.effect == "write"}
    traj2 = await run_episode(task, Confirming(task), ScriptedUser(), pool)
    r = await RubricReward(check_confirmations=True).score(task, traj2)
    assert r.score == 1.0, r.reason
    for name, res in (await score_all(all_rewards(pool, check_confirmations=True), task, traj2)).items():
        assert res.score == 1.0, (name, res.reason)


# -------------------------------------------------------------------- corrupted
async def test_wrong_write_fails_world_state_with_a_diff(pool):
    task = await hashed(retail_task(), pool)
    agent = script(call("find_customer_by_email", 1, email="user100@example.com"),
                   call("cancel_order", 2, order_id="O-1009", reason="changed_mind"),
                   say("I've cancelled your order; the refund is 15896 cents."))
    traj = await run_episode(task, agent, ScriptedUser(), pool)
    res = await score_all(all_rewards(pool), task, traj)
    w = res["world_state"]
    assert w.score == 0.0 and w.details["differing_keys"] == ["orders"]
    assert any(p.startswith("orders.O-1005.status") for p in w.details["diff"]) and "orders" in w.reason
    assert any(p.startswith("orders.O-1009") for p in w.details["diff"])
    rub = res["rubric"]
    assert rub.score < 1.0 and "cancel_order was called with other arguments" in rub.reason
    # honest about what it did: the record replays cleanly, so no hack flag
    assert res["reverify"].score == 1.0 and not res["reverify"].flags, res["reverify"].reason


async def test_missing_output_fails_communication(pool):
    task = await hashed(retail_task(), pool)
    agent = script(call("find_customer_by_email", 1, email="user100@example.com"),
                   call("cancel_order", 2, order_id="O-1005", reason="changed_mind"), say("Done, your order is cancelled."))
    traj = await run_episode(task, agent, ScriptedUser(max_turns=3), pool)
    res = await score_all(all_rewards(pool), task, traj)
    assert res["world_state"].score == 1.0
    c = res["communication"]
    assert c.score == 0.0 and c.details["missing"] == ["15896"] and "'15896'" in c.reason
    assert res["reverify"].score == 1.0, res["reverify"].reason
    partial = await CommunicationReward(partial=True).score(task.model_copy(update={"expected_outputs": ["15896", "cancelled"]}), traj)
    assert partial.score == 0.5 and partial.details["found"] == ["cancelled"]


async def test_forbidden_tools_are_caught(pool):
    task = await hashed(retail_task(), pool)
    # a tool the domain has but the task did not offer
    agent = script(call("find_customer_by_email", 1, email="user100@example.com"),
                   call("return_items", 2, order_id="O-1006", skus=["P-101"]),
                   call("cancel_order", 3, order_id="O-1005", reason="changed_mind"), say("Refunded 15896 cents."))
    traj = await run_episode(task, agent, ScriptedUser(), pool)
    rub = await RubricReward().score(task, traj)
    assert rub.score < 1.0 and "called tools not offered: return_items" in rub.reason
    v = await ToolCallValidityReward().score(task, traj)
    assert v.score == pytest.approx(2 / 3) and v.details["malformed"] == 1 and "unknown_tool" in v.reason
    # an extra write among the offered tools: caught by strict_writes (and by the world state)
    agent = script(call("find_customer_by_email", 1, email="user100@example.com"),
                   call("cancel_order", 2, order_id="O-1005", reason="changed_mind"),
                   call("cancel_order", 3, order_id="O-1009", reason="changed_mind"), say("Refunded 15896 cents."))
    traj = await run_episode(task, agent, ScriptedUser(), pool)
    assert (await RubricReward().score(task, traj)).score == 1.0
    strict = await RubricReward(strict_writes=True).score(task, traj)
    assert strict.score < 1.0 and "extra write(s): cancel_order" in strict.reason and "O-1009" in strict.reason
    assert (await WorldStateReward(pool).score(task, traj)).score == 0.0


async def test_claims_without_effect_are_flagged(pool):
    task = await hashed(retail_task(), pool)
    agent = script(call("get_order", 1, order_id="O-1005"),
                   say("I've cancelled order O-1005 for you. The refund of 15896 cents is on its way."))
    traj = await run_episode(task, agent, ScriptedUser(), pool)
    res = await score_all(all_rewards(pool), task, traj)
    assert res["communication"].score == 1.0  # it did say the number...
    assert res["world_state"].score == 0.0 and "initial state" in res["world_state"].reason
    rv = res["reverify"]
    assert rv.score == 0.0 and rv.flags == [FLAG_CLAIMS] and "no successful write call" in rv.reason
    assert "I've cancelled" in rv.reason


async def test_reverted_writes_score_zero_world_state_and_flag_the_claim(pool):
    task = await hashed(grocery_task(), pool)
    agent = script(call("add_to_grocery_cart", 1, customer_id="G-100", sku="SKU-101", qty=2),
                   call("remove_from_grocery_cart", 2, customer_id="G-100", sku="SKU-101"),
                   say("I've added 2 greek yoghurts (SKU-101) to your cart."))
    traj = await run_episode(task, agent, ScriptedUser(), pool)
    assert traj.final_state_hash == traj.initial_state_hash and traj.stats.tool_calls == 2
    res = await score_all(all_rewards(pool), task, traj)
    w = res["world_state"]
    assert w.score == 0.0 and "no change the agent made persisted" in w.reason and "customers" in w.details["differing_keys"]
    rv = res["reverify"]
    assert rv.flags == [FLAG_CLAIMS] and "left the state as it was" in rv.reason


async def test_tampered_records_are_caught(tasks, gold, pool):
    rv = ReverifyReward(pool)
    i, task = next((i, t) for i, t in enumerate(tasks) if len(t.gold_actions) >= 2)
    traj = gold[i]
    assert (await rv.score(task, traj)).score == 1.0
    # 1. the final state edited after the episode (hash left alone)
    t1 = traj.model_copy(deep=True)
    key = next(iter(t1.final_state))
    t1.final_state[key] = {"tampered": True}
    r = await rv.score(task, t1)
    assert r.score == 0.0 and FLAG_STATE in r.flags and "does not hash" in r.reason
    # 2. state and hash both rewritten consistently (the checker fooled) -> the replay disagrees
    t2 = traj.model_copy(deep=True)
    t2.final_state = {"anything": 1}
    t2.final_state_hash = state_digest(t2.final_state)
    r = await rv.score(task, t2)
    assert r.score == 0.0 and FLAG_STATE in r.flags and "final state hash differs" in r.reason
    # 3. a recorded tool output edited
    t3 = traj.model_copy(deep=True)
    j = next(k for k, c in enumerate(t3.tool_calls) if c.ok)
    t3.tool_calls[j].output = {"forged": "yes"}
    r = await rv.score(task, t3)
    assert r.score == 0.0 and r.flags == [FLAG_FORGED] and f"call #{j + 1}" in r.reason
    # 4. a per-step hash edited
    t4 = traj.model_copy(deep=True)
    t4.tool_calls[0].state_hash = "f" * 64
    r = await rv.score(task, t4)
    assert r.score == 0.0 and r.flags == [FLAG_STATE] and "after call #1" in r.reason
    # 5. a failed call rewritten as a success of a tool that was never offered
    t5 = traj.model_copy(deep=True)
    rec = t5.tool_calls[0].model_copy(update={"name": "no_such_tool", "ok": True})
    t5.tool_calls.insert(0, rec)
    r = await rv.score(task, t5)
    assert r.score == 0.0 and FLAG_FORGED in r.flags and "fails on replay" in r.reason
    assert pool.leased == 0


class KillingPool:
    """Hands out sandboxes whose tool server was just killed (SIGKILL)."""

    def __init__(self, pool):
        self.pool = pool

    async def acquire(self, timeout=None):
        sb = await self.pool.acquire(timeout)
        os.kill(sb.host_pid(), signal.SIGKILL)
        return sb

    async def release(self, sb, **kw):
        await self.pool.release(sb, **kw)


async def test_a_dead_sandbox_abstains_instead_of_raising(tasks, gold, pool):
    killing = KillingPool(pool)
    for reward in (ReverifyReward(killing), WorldStateReward(killing)):
        r = await reward.score(tasks[0], gold[0])
        assert r.score is None and "sandbox failed" in r.reason, r.reason
    assert pool.leased == 0
    # the episode itself died before the agent's first tool call: every reward abstains
    dead = gold[0].model_copy(update={"termination": "sandbox_dead", "final_state": None, "final_state_hash": None,
                                      "error": "SandboxDead: gone", "tool_calls": [],
                                      "stats": gold[0].stats.model_copy(update={"tool_calls": 0})})
    for reward in all_rewards(pool):
        assert (await reward.score(tasks[0], dead)).score is None
    # ... and after it (the agent's commands may have killed it): every reward scores 0 (issue 21)
    killed = dead.model_copy(update={"tool_calls": gold[0].tool_calls, "stats": gold[0].stats})
    assert killed.stats.tool_calls > 0
    for reward in all_rewards(pool):
        r = await reward.score(tasks[0], killed)
        assert r.score == 0.0 and "may have killed it" in r.reason, (reward.name, r.reason)
    # and the pool still works
    assert (await ReverifyReward(pool).score(tasks[0], gold[0])).score == 1.0


async def test_tool_validity_format_checks(tasks, gold):
    task, traj = tasks[0], gold[0]
    v = ToolCallValidityReward()
    t = traj.model_copy(deep=True)
    t.messages.append(call("get_order", 9, order_id="O-1"))
    r = await v.score(task, t)
    assert r.score == 0.0 and STOP in r.reason and "no text for the user" in r.reason
    t = traj.model_copy(deep=True)
    t.messages = [m for m in t.messages if m["role"] != "user" or STOP not in (m.get("content") or "")]
    t.messages.append({"role": "assistant", "content": "  "})
    r = await v.score(task, t)
    assert r.score == 0.0 and r.details["format_problems"] == ["the last assistant message has no text for the user"]


# ------------------------------------------------------------------- pure helpers
def test_mentions_normalises_numbers_and_strings():
    assert mentions("The refund is 12,000 cents.", "12000")
    assert mentions("Total: $120.00", "12000")                 # currency amount vs cents
    assert not mentions("Total: 120.00", "12000")              # no currency marker: no cents conversion
    assert mentions("It costs 1999", "1,999") and mentions("it is 19.990", "19.99")
    assert not mentions("order 112000", "12000") and not mentions("order O-12000", "12000")
    assert mentions("Your hold id is H-1.", "h-1") and not mentions("hold H-10", "H-1")
    assert mentions("Status: CANCELLED", "cancelled") and mentions("on 2024-06-10", "2024-06-10")


def test_mentions_integers_and_ids_match_exactly():
    """Issue 22 item 19: a relative tolerance let a 12-digit id off by one (or by hundreds) pass."""
    assert not mentions("Tracking number 286422338956", "286422338955")
    assert not mentions("Tracking number 286422338956", "286422338670")
    assert mentions("Tracking number 286422338956", "286422338956")
    assert not mentions("card 4000000000000001", "4000000000000002")      # past float precision too
    assert not mentions("Total: $2864223389.55", "286422338956")          # cents: exact as well
    assert not mentions("your id is 42", "0042") and mentions("your id is 0042", "0042")  # leading zero: an id
    assert mentions("it is 19.990000000001", "19.99") and not mentions("it is 19.994", "19.99")  # quantities only
    assert not mentions("order 100", "10") and not mentions("I live in Illinois", "IL")   # kept: no substring match


def test_claim_patterns():
    first, passive = claims(["I've cancelled your order.", "We just booked it.", "I have not cancelled anything.",
                             "Your order has been refunded successfully.", "Could you tell me your email?"])
    assert first == ["I've cancelled", "We just booked"]
    assert "has been refunded" in passive and "successfully" in passive


def test_state_diff():
    top, paths = state_diff({"a": {"x": 1, "y": [1, 2]}, "b": 2, "c": 3}, {"a": {"x": 2, "y": [1, 2]}, "b": 2, "d": 4})
    assert top == ["a", "c", "d"]
    assert paths == ["a.x: 1 != 2", "c: unexpected 3", "d: missing (expected 4)"]
