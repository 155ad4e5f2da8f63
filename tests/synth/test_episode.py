"""Episodes end to end in Docker sandboxes: synth.episode (+ synth.sft_data's TRL export)."""

from __future__ import annotations

import contextvars
import json
import os
import signal

import anyio
import pytest

from sandboxes import SandboxConfig, SandboxPool
from synth.episode import (
    CallableAgent,
    EpisodeLimits,
    LLMAgent,
    ScriptedAgent,
    Trajectory,
    run_episode,
    run_episodes,
)
from synth.tasks import Action, Rubric, Task, UserScenario, replay_task
from synth.usersim import STOP, LLMUser, ScriptedUser
from conftest import require, tasks16

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def docker() -> str:
    require("docker")
    return "docker"


@pytest.fixture(scope="module")
def tasks(docker, synth16_docker) -> list[Task]:
    """16 replay-validated tasks from the real synthesizer (several domains, some needs_user_info)."""
    return tasks16(synth16_docker)  # made once per session (tests/conftest.py)


@pytest.fixture
async def pool(docker):
    async with SandboxPool(SandboxConfig(backend=docker), size=4, max_concurrency=16) as p:
        yield p


def retail_task(**overrides) -> Task:
    """A hand-written needs_user_info task: the email is held back until the agent asks."""
    fields = dict(
        id="retail-cancel", domain="retail_orders", seed=3,
        instruction="Hi, please cancel my order O-1005, I changed my mind. Tell me how much gets refunded (in cents).",
        persona="Dara, terse.",
        user_scenario=UserScenario(
            persona="Dara, terse.", reason_for_call="You want to cancel a pending order.",
            known_info={"email": "user100@example.com", "order id": "O-1005"}, unknown_info=["the refunded amount"],
            task_instructions="Give your email only when asked."),
        gold_actions=[Action(name="find_customer_by_email", arguments={"email": "user100@example.com"}),
                      Action(name="cancel_order", arguments={"order_id": "O-1005", "reason": "changed_mind"})],
        expected_outputs=["15896"],
        rubric=Rubric(checkpoints=["asks the user for the missing detail (user100@example.com) instead of guessing it"]),
        tools=["find_customer_by_email", "get_order", "cancel_order"],
        difficulty="medium", needs_user_info=True,
    )
    fields.update(overrides)
    return Task(**fields)


async def hashed(task: Task, pool: SandboxPool) -> Task:
    r = await replay_task(task, pool)
    assert r.ok, r.reason
    return task.model_copy(update={"final_state_hash": r.final_state_hash})


# ------------------------------------------------------------------ scripted, concurrent
async def test_sixteen_scripted_episodes_reach_the_gold_state(tasks, pool):
    trajs = await run_episodes(tasks, ScriptedAgent, lambda t: ScriptedUser(), pool, concurrency=16, progress=False)
    assert [t.task_id for t in trajs] == [t.id for t in tasks]
    for task, traj in zip(tasks, trajs, strict=True):
        assert traj.termination == "user_stop", (traj.task_id, traj.error)
        assert traj.final_state_hash == task.final_state_hash and traj.reached_expected_state
        assert STOP in traj.messages[-1]["content"] and traj.messages[-1]["role"] == "user"
        assert traj.stats.malformed_calls == 0 and traj.stats.tool_calls == len(task.gold_actions)
        # one state hash per tool call; a write changes it, and the last one is the final state
        assert len(traj.tool_calls) == len(task.gold_actions)
        assert traj.tool_calls[-1].state_hash == traj.final_state_hash
        assert {t["function"]["name"] for t in traj.tools} == set(task.tools)
        # every tool call is answered by a tool message with its id
        ids = [c["id"] for m in traj.messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        assert ids == [m["tool_call_id"] for m in traj.messages if m["role"] == "tool"]
        tm = traj.timings
        assert tm.total_s >= tm.setup_s + tm.agent_s + tm.tool_s + tm.user_s - 1e-6
        assert len([s for s in tm.steps if s.kind == "tool"]) == len(task.gold_actions)
    assert any(t.needs_user_info for t in tasks)
    assert pool.leased == 0


async def test_user_only_info_is_asked_for_and_revealed(pool):
    task = await hashed(retail_task(), pool)
    traj = await run_episode(task, ScriptedAgent(task), ScriptedUser(), pool)
    assert traj.termination == "user_stop" and traj.reached_expected_state
    texts = [(m["role"], m.get("content") or "") for m in traj.messages if m["role"] in ("user", "assistant")]
    assert "user100@example.com" not in texts[0][1] and "[my email]" not in texts[0][1]  # never in the instruction
    assert "email" in texts[1][1] and texts[1][0] == "assistant"
    assert texts[2] == ("user", "My email is user100@example.com.")
    assert traj.stats.user["revealed"] == 1
    assert traj.tool_calls[0].state_hash == traj.initial_state_hash      # a read
    assert traj.tool_calls[1].state_hash == traj.final_state_hash != traj.initial_state_hash


# ------------------------------------------------------------------------- malformed
def malformed_agent(messages, tools):
    if sum(m["role"] == "assistant" for m in messages) == 0:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": "{not json"}},
            {"id": "c2", "type": "function", "function": {"name": "launch_rocket", "arguments": "{}"}},
            {"id": "c3", "type": "function", "function": {"name": "get_order", "arguments": '{"order": 5}'}},
            {"id": "c4", "type": "function", "function": {"arguments": '{"order_id": "O-1005"}'}},
            {"id": "c5", "type": "function", "function": {"name": "get_order", "arguments": "[1]"}},
            {"id": "c6", "type": "function", "function": {"name": "return_items", "arguments": "{}"}},  # not offered
            "not a tool call",
            {"type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "O-1005"}'}},
        ]}
    return {"role": "assistant", "content": "The refund will be 15896 cents."}


async def test_malformed_calls_come_back_as_tool_errors(pool):
    task = retail_task(needs_user_info=False)
    traj = await run_episode(task, CallableAgent(malformed_agent), ScriptedUser(), pool)
    assert traj.termination == "user_stop"
    assert traj.stats.tool_calls == 8 and traj.stats.malformed_calls == 7
    tool_msgs = [m for m in traj.messages if m["role"] == "tool"]
    assert len(tool_msgs) == 8
    call_ids = [c["id"] for c in traj.messages[2]["tool_calls"]]
    assert [m["tool_call_id"] for m in tool_msgs] == call_ids and len(set(call_ids)) == 8
    text = [m["content"] for m in tool_msgs]
    assert "not valid JSON" in text[0]
    assert "unknown tool 'launch_rocket'" in text[1]
    assert text[2].startswith("Error (invalid_arguments)") and "order_id" in text[2]
    assert "no function name" in text[3]
    assert "must be a JSON object" in text[4]
    assert "unknown tool 'return_items'" in text[5]
    assert "function" in text[6]
    assert json.loads(text[7])["order_id"] == "O-1005"
    assert [c.malformed for c in traj.tool_calls] == [True] * 7 + [False]
    # the assistant message stays valid OpenAI: string arguments and a name on every call
    for c in traj.messages[2]["tool_calls"]:
        assert isinstance(c["function"]["arguments"], str) and isinstance(c["function"]["name"], str)


async def test_async_callable_agent_and_agent_errors(pool):
    task = retail_task(needs_user_info=False)

    async def agent(messages, tools):
        await anyio.sleep(0)
        raise RuntimeError("the model server is down")

    traj = await run_episode(task, CallableAgent(agent), ScriptedUser(), pool)
    assert traj.termination == "agent_error" and "model server is down" in traj.error
    assert traj.final_state_hash is None or traj.final_state_hash == traj.initial_state_hash
    traj = await run_episode(task, CallableAgent(lambda m, t: "just text"), ScriptedUser(), pool)
    assert traj.termination == "agent_error" and "not an assistant message" in traj.error
    assert pool.leased == 0


async def test_context_overflow_ends_the_episode_as_max_tokens(pool):
    from synth.llm import LLMRequestError

    def agent(messages, tools):
        raise LLMRequestError("This model's maximum context length is 2048 tokens; your prompt has 2301", status_code=400)

    traj = await run_episode(retail_task(needs_user_info=False), CallableAgent(agent), ScriptedUser(), pool)
    assert traj.termination == "max_tokens" and "2048" in traj.error


# ---------------------------------------------------------------------------- limits
def looping_agent(messages, tools):
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{len(messages)}", "type": "function",
         "function": {"name": "get_order", "arguments": '{"order_id": "O-1005"}'}}]}


async def test_limits_end_the_episode_with_their_reason(pool):
    task = retail_task(needs_user_info=False)
    traj = await run_episode(task, CallableAgent(looping_agent), ScriptedUser(), pool,
                             limits=EpisodeLimits(max_turns=100, max_tool_calls=5))
    assert traj.termination == "max_tool_calls" and traj.stats.tool_calls == 5 and traj.final_state_hash

    traj = await run_episode(task, CallableAgent(looping_agent), ScriptedUser(), pool,
                             limits=EpisodeLimits(max_turns=3, max_tool_calls=100))
    assert traj.termination == "max_turns" and traj.stats.agent_turns == 3

    chatty = CallableAgent(lambda m, t: {"role": "assistant", "content": "Anything else?"})
    traj = await run_episode(task, chatty, ScriptedUser(max_turns=100), pool, limits=EpisodeLimits(max_turns=4))
    assert traj.termination == "max_turns" and traj.stats.user_turns == 5

    def big(messages, tools):
        return {"role": "assistant", "content": "hmm?", "usage": {"prompt_tokens": 900, "completion_tokens": 200}}

    traj = await run_episode(task, CallableAgent(big), ScriptedUser(max_turns=100), pool,
                             limits=EpisodeLimits(max_tokens=1000))
    assert traj.termination == "max_tokens" and traj.usage.prompt_tokens == 900
    assert all("usage" not in m for m in traj.messages)
    # the scripted user gives up after its own turn budget
    traj = await run_episode(task, chatty, ScriptedUser(max_turns=3), pool)
    assert traj.termination == "user_stop" and traj.stats.user_turns == 4  # 3 turns, then ###STOP###
    assert pool.leased == 0


# ------------------------------------------------------------------- dead sandboxes
current_sandbox: contextvars.ContextVar = contextvars.ContextVar("current_sandbox")


class RecordingPool:
    """The pool, plus the leased sandbox in a context variable the agent (same task) can read."""

    def __init__(self, pool):
        self.pool = pool

    async def acquire(self, timeout=None):
        sb = await self.pool.acquire(timeout)
        current_sandbox.set(sb)
        return sb

    async def release(self, sb, **kw):
        await self.pool.release(sb, **kw)


class KillerAgent(ScriptedAgent):
    """Replays the gold actions but kills its own sandbox (SIGKILL to the tool server) after the first call."""

    async def act(self, messages, tools):
        if any(m["role"] == "tool" for m in messages):
            os.kill(current_sandbox.get().host_pid(), signal.SIGKILL)
        return await super().act(messages, tools)


async def test_a_killed_sandbox_fails_only_its_episode(tasks, pool):
    victim = next(t for t in tasks if len(t.gold_actions) >= 2)
    batch = [victim] + [t for t in tasks if t is not victim][:7]
    trajs = await run_episodes(
        batch, lambda t: KillerAgent(t) if t is victim else ScriptedAgent(t), lambda t: ScriptedUser(),
        RecordingPool(pool), concurrency=8, progress=False)
    dead, rest = trajs[0], trajs[1:]
    assert dead.termination == "sandbox_dead" and dead.error and dead.final_state_hash is None
    assert len(dead.tool_calls) == 1
    assert all(t.termination == "user_stop" and t.reached_expected_state for t in rest)
    assert pool.leased == 0
    # the pool replaced the dead sandbox and still works
    again = await run_episode(victim, ScriptedAgent(victim), ScriptedUser(), pool)
    assert again.reached_expected_state


async def test_cancellation_releases_the_sandbox(pool):
    task = retail_task(needs_user_info=False)

    async def slow(messages, tools):
        await anyio.sleep(30)

    with anyio.move_on_after(0.5):
        await run_episode(task, CallableAgent(slow), ScriptedUser(), pool)
    assert pool.leased == 0
    traj = await run_episode(task, ScriptedAgent(task), ScriptedUser(), pool)
    assert traj.termination == "user_stop"


async def test_bad_task_is_a_setup_error(pool):
    traj = await run_episode(retail_task(tools=["no_such_tool"]), ScriptedAgent(retail_task()), ScriptedUser(), pool)
    assert traj.termination == "setup_error" and "no_such_tool" in traj.error
    assert pool.leased == 0


# ------------------------------------------------------------------- export to TRL
def test_export_feeds_trl_sft_trainer(tasks, docker, tmp_path):
    pytest.importorskip("trl")
    import datasets
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from rl.tiny import build_tiny_model
    from synth.sft_data import read_trajectories, write_trajectories

    async def go():
        async with SandboxPool(SandboxConfig(backend=docker), size=4) as p:
            return await run_episodes(tasks[:6], ScriptedAgent, lambda t: ScriptedUser(), p, concurrency=4,
                                      progress=False)

    trajs = anyio.run(go)
    report = write_trajectories(trajs, tmp_path / "out")
    assert report.rows == 6 and report.skipped == 0
    assert [t.task_id for t in read_trajectories(report.jsonl)] == [t.id for t in tasks[:6]]

    ds = datasets.load_from_disk(report.dataset)
    row = ds[0]
    assert {"messages", "tools"} <= set(ds.column_names)
    roles = [m["role"] for m in row["messages"]]
    assert roles[0] == "system" and roles[1] == "user" and roles[-1] == "assistant" and "tool" in roles
    call = next(m for m in row["messages"] if m.get("tool_calls"))["tool_calls"][0]
    assert isinstance(call["function"]["arguments"], dict) and call["function"]["arguments"] == tasks[0].gold_actions[0].arguments
    tool_msg = next(m for m in row["messages"] if m["role"] == "tool")
    assert tool_msg["name"] == call["function"]["name"] and tool_msg["tool_call_id"] == call["id"]
    assert {t["function"]["name"] for t in row["tools"]} == set(tasks[0].tools)
    # no key of another tool's arguments leaks into this call (Json columns, not merged structs)
    assert set(call["function"]["arguments"]) == set(tasks[0].gold_actions[0].arguments)

    model = build_tiny_model()  # the shared cached build
    tok = AutoTokenizer.from_pretrained(model)
    args = SFTConfig(output_dir=str(tmp_path / "sft"), max_steps=1, per_device_train_batch_size=2, use_cpu=True,
                     report_to=[], save_strategy="no", logging_steps=1, max_length=2048, dataloader_num_workers=0)
    trainer = SFTTrainer(model=str(model), args=args, train_dataset=ds, processing_class=tok)
    text = tok.decode(trainer.train_dataset[0]["input_ids"])
    assert "<tools>" in text and f'"name": "{tasks[0].tools[-1]}"' in text  # the tools column reached the template
    assert "<tool_call>" in text and "<tool_response>" in text
    out = trainer.train()
    assert out.global_step == 1 and out.training_loss > 0


def test_cli_writes_trajectories_and_dataset(tasks, docker, tmp_path):
    from typer.testing import CliRunner

    from synth.tasks import export_tasks
    from tooldojo.cli import app

    export_tasks(tasks[:5], tmp_path / "tasks")
    r = CliRunner().invoke(app, ["synth", "trajectories", "--tasks", str(tmp_path / "tasks"), "--out",
                                 str(tmp_path / "traj"), "--concurrency", "3", "--backend", docker])
    assert r.exit_code == 0, r.output
    lines = (tmp_path / "traj" / "trajectories.jsonl").read_text().splitlines()
    trajs = [Trajectory.model_validate_json(x) for x in lines]
    assert len(trajs) == 5 and all(t.reached_expected_state for t in trajs)
    assert (tmp_path / "traj" / "sft" / "dataset_info.json").exists()
    assert "5 episodes" in r.output
    bad = CliRunner().invoke(app, ["synth", "trajectories", "--tasks", str(tmp_path / "tasks"), "--out",
                                   str(tmp_path / "x"), "--agent", "endpoint"])
    assert bad.exit_code != 0 and "--base-url" in bad.output and "Traceback" not in bad.output


# ------------------------------------------------------------- the real vLLM server
async def test_llm_agent_and_llm_user_against_vllm(vllm_server, pool):
    server = vllm_server  # a parameter, not getfixturevalue: tests/conftest.py groups its users by it
    from synth.llm import LLMClient, LLMConfig

    task = await hashed(retail_task(), pool)
    async with LLMClient(LLMConfig(base_url=server.base_url, model=server.model)) as client:
        user = LLMUser(client, best_of_n=2, critique=True, max_tokens=48)
        agent = LLMAgent(client, max_tokens=48, temperature=1.0)
        traj = await run_episode(task, agent, user, pool, limits=EpisodeLimits(max_turns=4, max_tool_calls=6))
    # random weights: the text is garbage, but the episode ends cleanly with a recorded reason
    assert traj.termination in ("user_stop", "transfer", "max_turns", "max_tool_calls", "max_tokens"), traj.error
    assert traj.stats.agent_turns >= 1 and traj.usage.agent_calls == traj.stats.agent_turns
    assert traj.usage.completion_tokens > 0
    assert traj.stats.user["llm_calls"] >= 1
    # garbage user texts are retried once, then replaced by the scripted user's
    assert traj.stats.user["fallbacks"] >= 1 and traj.stats.user["retries"] >= 1
    assert traj.messages[1]["content"] == ScriptedUser.opening(task)
    assert traj.final_state_hash is not None
    assert pool.leased == 0
