"""Behaviour priming traces (synth.behaviours) as real episodes in sandboxes, in every condition."""

from __future__ import annotations

import json
import random
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from rewards.verifiable import CommunicationReward, WorldStateReward
from sandboxes import SandboxConfig, SandboxPool
from synth.behaviours import (
    CORRECT_CONDITIONS,
    FILLER,
    LLM_PRESCRIPTION,
    PLAIN_SENTENCE,
    PRESCRIPTIONS,
    BehaviourAgent,
    agenerate_traces,
    generate_traces,
    id_like,
    mistype,
    wrong_value,
)
from synth.episode import brief_system_prompt
from synth.llm import LLMClient, LLMConfig
from synth.sft_data import to_dataset
from synth.tasks import Task, export_tasks, synthesize_tasks
from tests.conftest import any_backend
from tests.openai_server import ChatServer, completion
from toolzoo.domains import load_domain

DOMAINS = ["retail_orders", "library_loans", "issue_tracker"]


@pytest.fixture(scope="module")
def backend() -> str:
    return any_backend()


@pytest.fixture(scope="module")
def tasks(backend) -> list[Task]:
    result = synthesize_tasks(9, seed=11, domains=DOMAINS, backend=backend, sandboxes=3)
    assert len(result.tasks) == 9
    assert len({t.domain for t in result.tasks}) >= 2
    return result.tasks


def run(tasks, condition, backend, **kw):
    return anyio.run(lambda: agenerate_traces(tasks, condition, backend=backend, concurrency=3, **kw))


def reasoning_texts(traj) -> list[str | None]:
    return [m.get("content") for m in traj.messages if m.get("role") == "assistant" and m.get("tool_calls")]


# ------------------------------------------------------------------------------ units
def test_mistype_and_wrong_value():
    assert mistype("O-1000") == "O-100099" and mistype("WEB-3") == "WEB-399"
    assert wrong_value("2999") == "3000" and wrong_value("L-3007") == "L-3008"
    assert wrong_value("2024-06-24") == "2024-06-25"
    dom = load_domain("retail_orders")
    assert wrong_value("found_cheaper", dom) not in ("found_cheaper", "unknown")
    assert wrong_value("Goran Silva") == "unknown"


def test_unknown_condition_is_an_error(tasks):
    with pytest.raises(ValueError, match="unknown condition"):
        BehaviourAgent(tasks[0], load_domain(tasks[0].domain), "most", random.Random(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs an LLM client"):
        generate_traces(tasks[:1], "all", mode="llm")


# ------------------------------------------------------------------ real sandboxes
def test_correct_conditions_reach_the_expected_state(tasks, backend):
    for condition in CORRECT_CONDITIONS:
        trajs = generate_traces(tasks, condition, backend=backend, concurrency=3)
        assert [t.task_id for t in trajs] == [t.id for t in tasks], condition
        bad = [(t.task_id, t.termination, t.error) for t in trajs if not t.reached_expected_state]
        assert not bad, (condition, bad)
        assert all(t.termination == "user_stop" for t in trajs), condition
        assert all(t.messages[0] == {"role": "system", "content": brief_system_prompt(task, load_domain(task.domain))}
                   for t, task in zip(trajs, tasks, strict=True))


def test_all_traces_show_every_behaviour_with_varying_mixes(tasks, backend):
    ts = run(tasks, "all", backend)
    total = {b: sum(u.get(b, 0) for u in ts.used) for b in ("subgoal", "verification", "backtracking",
                                                               "backward_chaining")}
    assert all(v > 0 for v in total.values()), total
    assert len({tuple(sorted(u)) for u in ts.used}) > 1  # not every trace shows the same behaviours
    texts = [x for t in ts.trajectories for x in reasoning_texts(t) if x]
    assert any(x.startswith(("Plan:", "To ")) for x in texts)
    assert any("Check:" in x for t in ts.trajectories for x in [m.get("content") or "" for m in t.messages])
    assert any("Back to" in x for x in texts)
    # short, templated text: no sentence is long
    assert max(len(s) for x in texts for s in x.split(". ")) < 200
    # backtracking calls are reads that fail or show another record: they leave the state alone
    by_id = {t.id: t for t in tasks}
    for t in ts.trajectories:
        typos = {mistype(v) for a in by_id[t.task_id].gold_actions for v in a.arguments.values() if id_like(v)}
        before = t.initial_state_hash
        for rec in t.tool_calls:
            if isinstance(rec.arguments, dict) and typos & {v for v in rec.arguments.values() if isinstance(v, str)}:
                assert load_domain(t.domain).tool(rec.name).effect == "read"
                assert rec.state_hash == before  # the mistyped read left the state alone
            before = rec.state_hash
    assert sum(1 for t in ts.trajectories for r in t.tool_calls
               if isinstance(r.arguments, dict) and any(isinstance(v, str) and v.endswith("99")
                                                        for v in r.arguments.values())) > 0
    # deterministic in the seed, different across seeds
    again = run(tasks, "all", backend)
    assert [t.messages for t in again.trajectories] == [t.messages for t in ts.trajectories]
    other = run(tasks, "all", backend, seed=1)
    assert [t.messages for t in other.trajectories] != [t.messages for t in ts.trajectories]


def test_no_backtracking_keeps_the_other_habits_and_calls_no_mistyped_id(tasks, backend):
    ts = run(tasks, "no_backtracking", backend)
    total = {b: sum(u.get(b, 0) for u in ts.used) for b in ("subgoal", "verification", "backtracking",
                                                               "backward_chaining")}
    assert total["backtracking"] == 0 and total["subgoal"] > 0 and total["verification"] > 0, total
    by_id = {t.id: t for t in tasks}
    for t in ts.trajectories:
        typos = {mistype(v) for a in by_id[t.task_id].gold_actions for v in a.arguments.values() if id_like(v)}
        called = {v for r in t.tool_calls if isinstance(r.arguments, dict) for v in r.arguments.values()
                  if isinstance(v, str)}
        assert not typos & called, t.task_id
        assert t.reached_expected_state and all(r.ok for r in t.tool_calls), t.task_id
    assert LLM_PRESCRIPTION["no_backtracking"] in PRESCRIPTIONS
    assert "backtracking" not in PRESCRIPTIONS[LLM_PRESCRIPTION["no_backtracking"]]


def test_controls_have_no_reasoning_and_length_matched_matches_all(tasks, backend):
    full = run(tasks, "all", backend)
    for name, check in (("empty", lambda x: x is None),
                        ("none", lambda x: x in (None, PLAIN_SENTENCE))):
        trajs = run(tasks, name, backend).trajectories
        assert all(check(x) for t in trajs for x in reasoning_texts(t)), name
        assert all(len(t.tool_calls) == len(task.gold_actions) for t, task in zip(trajs, tasks, strict=True))
    lm = run(tasks, "length_matched", backend)
    assert lm.reasoning == full.reasoning and sum(lm.reasoning) > 0
    for t, n in zip(lm.trajectories, full.reasoning, strict=True):
        fill = "".join(x or "" for x in reasoning_texts(t))
        assert set(fill) <= {FILLER} and len(fill) == n


def test_single_behaviour_conditions_show_only_theirs(tasks, backend):
    for b in ("subgoal", "backward_chaining", "verification", "backtracking"):
        ts = run(tasks, b, backend)
        assert all(set(u) <= {b} for u in ts.used), (b, ts.used)
        assert sum(u.get(b, 0) for u in ts.used) > 0, b


def test_incorrect_traces_are_wrong_by_the_verifiable_rewards(tasks, backend):
    ts = run(tasks, "incorrect", backend)
    assert len(ts.trajectories) + ts.dropped_not_wrong == len(tasks)
    assert len(ts.trajectories) >= len(tasks) - 1
    assert sum(sum(u.values()) for u in ts.used) > 0   # behaviour-rich all the same
    by_id = {t.id: t for t in tasks}

    async def score() -> list[tuple[float, float]]:
        async with SandboxPool(SandboxConfig(backend=backend), size=2, max_concurrency=2) as pool:
            world, comm = WorldStateReward(pool), CommunicationReward()
            return [((await world.score(by_id[t.task_id], t)).score, (await comm.score(by_id[t.task_id], t)).score)
                    for t in ts.trajectories]

    scores = anyio.run(score)
    assert all(w is not None and c is not None for w, c in scores)
    assert all(min(w, c) < 1.0 for w, c in scores), scores
    assert any(w == 0.0 for w, _ in scores)   # some are wrong in the world, not only in what they say


def test_traces_export_to_trl_with_reasoning_before_tool_calls(tasks, backend):
    seen: list[tuple[int, int]] = []
    trajs = generate_traces(tasks[:4], "all", backend=backend, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(i, 4) for i in range(1, 5)]  # issue 33 #4: the demo's priming-traces progress
    ds = to_dataset(trajs)
    assert len(ds) == 4
    rows = [m for msgs in ds["messages"] for m in msgs if m["role"] == "assistant" and m.get("tool_calls")]
    assert any(m["content"] for m in rows)


def test_cli_writes_traces_dataset_and_summary(tasks, backend, tmp_path):
    from tooldojo.cli import app

    export_tasks(tasks[:3], tmp_path / "tasks")
    res = CliRunner().invoke(app, ["synth", "behaviours", "--tasks", str(tmp_path / "tasks"), "--condition",
                                   "incorrect", "--out", str(tmp_path / "out"), "--backend", backend])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["condition"] == "incorrect" and summary["tasks"] == 3
    assert summary["trajectories"] + summary["dropped_not_wrong"] == 3
    assert (tmp_path / "out" / "trajectories.jsonl").is_file() and (tmp_path / "out" / "sft").is_dir()
    bad = CliRunner().invoke(app, ["synth", "behaviours", "--tasks", str(tmp_path / "tasks"), "--condition",
                                   "some", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 1 and "unknown condition" in bad.output and "Traceback" not in bad.output


# ----------------------------------------------------------------------- LLM mode
class GoldAgentServer(ChatServer):
    """An endpoint that acts like an agent: the task's gold calls (with a sentence before each), then the
    expected outputs."""

    def __init__(self, task: Task) -> None:
        self.task = task
        super().__init__()

    def handle(self, body: dict[str, Any]) -> tuple[Any, ...]:
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if done < len(self.task.gold_actions):
            a = self.task.gold_actions[done]
            call = {"id": f"c{done}", "type": "function",
                    "function": {"name": a.name, "arguments": json.dumps(a.arguments)}}
            return 200, completion(f"Step {done + 1}: {a.name}.", tool_calls=[call], model=body.get("model"))
        return 200, completion("Done: " + ", ".join(self.task.expected_outputs), model=body.get("model"))


def client(url: str, model: str = "agent") -> LLMClient:
    return LLMClient(LLMConfig(base_url=url, model=model, api_key_env="TOOLDOJO_TEST_NO_KEY", max_retries=0,
                               temperature=0.0, max_tokens=64))


def test_llm_mode_prescribes_behaviours_but_saves_the_normal_system_prompt(tasks, backend):
    task = next(t for t in tasks if not t.needs_user_info)
    with GoldAgentServer(task) as server:
        for condition in ("all", "none", "empty", "length_matched"):
            server.requests.clear()

            async def go(condition=condition):
                async with client(server.base_url) as llm:
                    return await agenerate_traces([task], condition, mode="llm", llm=llm, backend=backend)

            (traj,) = anyio.run(go).trajectories
            assert traj.reached_expected_state, (condition, traj.termination, traj.error)
            normal = brief_system_prompt(task, load_domain(task.domain))
            assert traj.messages[0] == {"role": "system", "content": normal}
            wanted = PRESCRIPTIONS["negative_control" if condition == "none" else "all_strategies"]
            seen = [r["messages"][0]["content"] for r in server.requests]
            assert seen and all(s == f"{normal}\n\n{wanted}" for s in seen), condition
            texts = reasoning_texts(traj)
            if condition == "empty":
                assert all(x is None for x in texts)
            elif condition == "length_matched":
                expected = sum(len(f"Step {i + 1}: {a.name}.") for i, a in enumerate(task.gold_actions))
                assert "".join(x or "" for x in texts) == FILLER * expected
            else:
                assert texts[0] == f"Step 1: {task.gold_actions[0].name}."


def test_llm_mode_against_the_session_vllm_server(tasks, backend, vllm_server):
    """The tiny random model: only the plumbing can be asserted."""
    async def go():
        async with client(vllm_server.base_url, vllm_server.model) as llm:
            return await agenerate_traces(tasks[:2], "all", mode="llm", llm=llm, backend=backend)

    trajs = anyio.run(go).trajectories
    assert len(trajs) == 2
    for t, task in zip(trajs, tasks[:2], strict=True):
        assert t.messages[0]["content"] == brief_system_prompt(task, load_domain(task.domain))
        assert t.termination not in ("setup_error", "sandbox_dead"), t.error
        assert t.stats.agent_turns >= 1


def test_quoted_answers_say_the_outputs_as_a_json_tool_output_writes_them(tasks, backend):
    """answers="quoted" (issue 28): the final answer quotes each expected output, so a value keeps the
    token ids it has inside a JSON tool output; the trace still reaches the expected state and the
    communication reward still finds every output in it."""
    with pytest.raises(ValueError, match="unknown answer style"):
        BehaviourAgent(tasks[0], load_domain(tasks[0].domain), "all", random.Random(0),
                       answers="bold")  # type: ignore[arg-type]
    with_outputs = [t for t in tasks if t.expected_outputs] or tasks
    plain = generate_traces(with_outputs, "all", backend=backend, concurrency=3)
    quoted = generate_traces(with_outputs, "all", backend=backend, concurrency=3, answers="quoted")
    comm = CommunicationReward()
    for p, q, task in zip(plain, quoted, with_outputs, strict=True):
        assert q.reached_expected_state, (task.id, q.termination, q.error)
        last_p = [m["content"] for m in p.messages if m["role"] == "assistant" and m.get("content")][-1]
        last_q = [m["content"] for m in q.messages if m["role"] == "assistant" and m.get("content")][-1]
        outs = [str(o) for o in task.expected_outputs]
        # (a closing check may come first: "Check: WEB-6 has assignee chidi, as asked. All done. ...")
        assert last_q.endswith(f"All done. {', '.join(json.dumps(o) for o in outs)}" if outs else "All done.")
        assert last_p.endswith(f"All done. {', '.join(outs)}" if outs else "All done.")
        assert last_q.removesuffix(last_q.split("All done.")[-1]) == last_p.removesuffix(last_p.split("All done.")[-1])
        assert anyio.run(comm.score, task, q).score == anyio.run(comm.score, task, p).score == 1.0


def test_keyed_answers_say_each_output_as_the_tool_output_writes_its_pair(tasks, backend):
    """answers="keyed" (issue 28): the final answer says each expected output with the key it stands under,
    as the JSON tool output writes the pair (`"name": "Porch light"`, the same characters, so the same
    tokens); where no output holds a value under a key it is quoted; the reward still finds every output."""
    from synth.behaviours import keyed_value

    msgs = [{"role": "tool", "content": json.dumps({"id": "LT-1", "name": "Porch light", "n": 3,
                                                   "log": [{"state": "on"}]}, ensure_ascii=False)},
            {"role": "assistant", "content": "Plan."}]
    assert keyed_value("Porch light", msgs) == '"name": "Porch light"'
    assert keyed_value("on", msgs) == '"state": "on"'  # nested records too
    assert keyed_value("3", msgs) == '"n": 3'  # as the output writes a number
    assert keyed_value("Attic", msgs) == '"Attic"'  # in no output: quoted
    assert keyed_value("Porch light", [{"role": "tool", "content": "Error: not found"}]) == '"Porch light"'
    reads = [t for t in tasks if t.expected_outputs] or tasks
    keyed = generate_traces(reads, "all", backend=backend, concurrency=3, answers="keyed")
    comm = CommunicationReward()
    paired = 0
    for k, task in zip(keyed, reads, strict=True):
        assert k.reached_expected_state, (task.id, k.termination, k.error)
        last = [m["content"] for m in k.messages if m["role"] == "assistant" and m.get("content")][-1]
        outputs = " ".join(m["content"] for m in k.messages if m["role"] == "tool")
        for o in task.expected_outputs:
            said = keyed_value(str(o), k.messages)
            assert said in last, (said, last)
            paired += said in outputs and ": " in said  # the pair is the output's own text
        assert anyio.run(comm.score, task, k).score == 1.0
    assert paired >= 1


def test_keyed_plan_answers_plan_the_asked_keys_then_say_them_keyed(backend):
    """answers="keyed_plan" (issue 28, reader_gpu.md section 23): the plan ends with the keys the request asks
    for, in its order, so the answer turn can copy the key from the assistant's own plan; the answer is keyed
    as with "keyed" and still scores. A request that names no key gets the plain plan."""
    from synth.behaviours import keyed_value
    from synth.task_families import synthesize_family_tasks
    from synth.task_values import asked_fields

    made = synthesize_family_tasks({"read_report": 3}, seed=5, domains=["home_devices"], backend=backend,
                                   sandboxes=2, quote_values=True, quote_fields=True, domain_seeds=4)["read_report"]
    assert made
    comm = CommunicationReward()
    traces = generate_traces(made, "subgoal", backend=backend, concurrency=2, answers="keyed_plan")
    for task, tr in zip(made, traces, strict=True):
        asked = asked_fields(task.instruction)
        assert asked and all(f'"{f}"' in task.instruction for f in asked)
        first = next(m["content"] for m in tr.messages if m["role"] == "assistant")
        assert first.endswith(f"{len(task.gold_actions) + 1}) tell the " + " and the ".join(f'"{f}"' for f in asked) + ".")
        last = [m["content"] for m in tr.messages if m["role"] == "assistant" and m.get("content")][-1]
        assert all(keyed_value(str(o), tr.messages) in last for o in task.expected_outputs)
        assert anyio.run(comm.score, task, tr).score == 1.0
    keyed = generate_traces(made[:1], "subgoal", backend=backend, concurrency=1, answers="keyed")
    assert "tell the" not in next(m["content"] for m in keyed[0].messages if m["role"] == "assistant")
    assert asked_fields("Show me the front door's state.") == []
    assert asked_fields('Tell me the "name", the "room" and the "name" (room: "office").') == ["name", "room"]


def test_output_pairs_walk_nested_records_in_the_outputs_order() -> None:
    from synth.task_values import output_pairs

    out = {"device_id": "LT-1", "recent": [{"seq": 1, "device_id": "LT-1"}], "on": True}
    assert list(output_pairs(out)) == [("device_id", "LT-1"), ("recent", [{"seq": 1, "device_id": "LT-1"}]),
                                       ("seq", 1), ("device_id", "LT-1"), ("on", True)]
    assert list(output_pairs([{"a": 1}, "x"])) == [("a", 1)]
    assert list(output_pairs("not a record")) == []
