"""Behaviour counting (rl.behaviours): the heuristic counter on real priming traces and on traces it
did not write, the LLM counter against a real HTTP server, reports of run directories, the CLI."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from rl.behaviours import (
    BehaviourReport,
    HeuristicCounter,
    LLMCounter,
    behaviour_report,
    find_groups,
    parse_count,
)
from synth.behaviours import BEHAVIOURS, agenerate_traces, generate_traces
from synth.llm import LLMClient, LLMConfig
from synth.tasks import synthesize_tasks
from tests.conftest import any_backend
from tests.openai_server import ChatServer, completion, error


@pytest.fixture(scope="module")
def traces() -> dict[str, list]:
    backend = any_backend()
    tasks = synthesize_tasks(12, seed=5, domains=["retail_orders", "library_loans", "issue_tracker"],
                             backend=backend, sandboxes=3).tasks
    assert len(tasks) == 12
    out = {c: generate_traces(tasks, c, backend=backend, concurrency=3)
           for c in ("none", "empty", "length_matched", "incorrect")}
    rich = anyio.run(lambda: agenerate_traces(tasks, "all", backend=backend, concurrency=3))
    return {**out, "all": rich.trajectories, "all_used": rich.used}


def means(trajs) -> dict[str, float]:
    counts = [HeuristicCounter().counts(t.messages) for t in trajs]
    return {b: sum(c[b] for c in counts) / len(counts) for b in BEHAVIOURS}


def test_heuristic_counts_on_priming_conditions(traces):
    rich = means(traces["all"])
    assert rich["subgoal"] >= 0.6 and rich["verification"] >= 0.6, rich
    assert rich["backtracking"] > 0.1 and rich["backward_chaining"] > 0.2, rich
    for control in ("none", "empty", "length_matched"):
        m = means(traces[control])
        assert all(v <= 0.1 for v in m.values()), (control, m)
    wrong = means(traces["incorrect"])
    assert all(v > 0 for v in wrong.values()), wrong
    # on the traces synth.behaviours wrote, the offline count is the writer's own count, trace by trace
    for t, used in zip(traces["all"], traces["all_used"], strict=True):
        assert HeuristicCounter().counts(t.messages) == {b: used.get(b, 0) for b in BEHAVIOURS}, t.task_id


def call(i: int, name: str, **args: Any) -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def assistant(text: str | None, *calls: dict[str, Any]) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        m["tool_calls"] = list(calls)
    return m


def tool(i: int, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{i}", "name": "t",
            "content": content if isinstance(content, str) else json.dumps(content)}


def test_heuristic_reads_structure_of_traces_it_did_not_write():
    counter = HeuristicCounter()
    rich = [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Cancel order 77 for jo@x.com and tell me the refund."},
        assistant("I'll first find the customer, then cancel the order. To refund it I must cancel it.",
                  call(0, "find_customer", email="jo@x.com")),
        tool(0, "Error (not_found): no customer jo@x.com"),
        assistant(None, call(1, "find_customer", email="jo@x.org")),
        tool(1, {"customer_id": "C-7", "orders": ["O-77"]}),
        assistant(None, call(2, "cancel_order", order_id="O-77")),
        tool(2, {"order_id": "O-77", "status": "cancelled", "refund": 12}),
        assistant("Let me look at O-77 again.", call(3, "get_order", order_id="O-77")),
        tool(3, {"order_id": "O-77", "status": "cancelled"}),
        assistant("Your order is cancelled and 12 is refunded."),
    ]
    c = counter.counts(rich)
    assert c == {"subgoal": 1, "verification": 1, "backtracking": 1, "backward_chaining": 1}, c
    # the same calls without words: only the structural backtrack (an error, then a changed call) is left
    plain = [m if m["role"] != "assistant" else {**m, "content": None} for m in rich]
    assert counter.counts(plain) == {"subgoal": 0, "verification": 0, "backtracking": 1, "backward_chaining": 0}
    # a re-read after a write with no words about it is not a check; a question is not one either
    quiet = rich[:8] + [assistant("Can you confirm that you want a refund?", call(3, "get_order", order_id="O-77"))]
    assert counter.counts(quiet)["verification"] == 0
    assert anyio.run(counter.count, rich).counts == c


def test_parse_count():
    assert parse_count("thinking... <count>3</count>") == 3
    assert parse_count("<count>1</count> no wait <count> 2 </count>") == 2
    assert parse_count("two") is None and parse_count(None) is None and parse_count("<count>x</count>") is None


class CountingJudge(ChatServer):
    """Answers the counter's prompts by the behaviour each asks about: a count, garbage, or an HTTP error."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        super().__init__()

    def handle(self, body: dict[str, Any]) -> tuple[Any, ...]:
        prompt = body["messages"][-1]["content"]
        what = re.search(r"instances of (\w[\w -]*?):", prompt).group(1)
        key = {"answer-verification steps": "verification", "backtracking": "backtracking",
               "subgoal setting": "subgoal", "backward chaining": "backward_chaining"}[what]
        answer = self.answers[key]
        if isinstance(answer, int):
            return error(answer, "scripted failure")
        return 200, completion(answer, model=body.get("model"))


def llm(url: str) -> LLMClient:
    return LLMClient(LLMConfig(base_url=url, model="judge", api_key_env="TOOLDOJO_TEST_NO_KEY", max_retries=0,
                               backoff_base_s=0.01, backoff_max_s=0.02))


def test_llm_counter_parses_counts_and_records_garbage_and_errors_as_uncounted(traces):
    answers = {"verification": "Two re-reads. <count>2</count>", "backtracking": "I think maybe three",
               "subgoal": 500, "backward_chaining": "<count>0</count>"}
    trace = traces["all"][0].messages
    with CountingJudge(answers) as server:
        async def go():
            async with llm(server.base_url) as client:
                return await LLMCounter(client).count(trace)

        got = anyio.run(go)
        assert len(server.requests) == 4
        prompts = [r["messages"][-1]["content"] for r in server.requests]
        first_call = next(m for m in trace if m.get("tool_calls"))["tool_calls"][0]["function"]["name"]
        assert all(first_call in p and "<count>" in p for p in prompts)
    assert got.counts == {"subgoal": None, "verification": 2, "backtracking": None, "backward_chaining": 0}
    assert "unparsed" in got.errors["backtracking"] and "maybe three" in got.errors["backtracking"]
    assert got.errors["subgoal"].startswith("LLM")
    assert set(got.errors) == {"subgoal", "backtracking"}


def write_jsonl(path, trajs, **extra) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for t in trajs:
            f.write(json.dumps({**json.loads(t.model_dump_json()), **extra}) + "\n")


def test_report_of_a_run_directory_groups_by_folder(traces, tmp_path):
    run = tmp_path / "run"
    write_jsonl(run / "eval" / "base" / "trajectories.jsonl", traces["none"])
    write_jsonl(run / "eval" / "sft" / "trajectories.jsonl", traces["all"])
    write_jsonl(run / "episodes" / "step-1.jsonl", traces["all"][:5], reward=1.0, components={}, solved=True)
    write_jsonl(run / "episodes" / "step-2.jsonl", traces["none"][:3], reward=0.0, components={}, solved=False)
    (run / "eval" / "sft" / "notes.jsonl").write_text("not a trajectory file\n")  # ignored: neither pattern
    report = behaviour_report(run, HeuristicCounter())
    assert isinstance(report, BehaviourReport) and report.counter == "heuristic"
    rows = {g.group: g for g in report.groups}
    assert list(rows) == ["episodes", "eval/base", "eval/sft"]
    assert rows["episodes"].n == 8 and rows["eval/base"].n == 12 and rows["eval/sft"].n == 12
    assert all(s.mean == 0 and s.frac == 0 for s in rows["eval/base"].behaviours.values())
    sft = rows["eval/sft"].behaviours
    assert sft["subgoal"].frac > 0.5 and sft["verification"].mean > 0.5
    assert sft["subgoal"].mean == pytest.approx(means(traces["all"])["subgoal"])
    assert all(s.counted == 12 and s.uncounted == 0 for s in sft.values())
    # one file and a write_trajectories folder are one group each
    one = behaviour_report(run / "eval" / "sft" / "trajectories.jsonl")
    assert [g.group for g in one.groups] == ["."] and one.groups[0].n == 12
    assert [g.group for g in behaviour_report(run / "eval" / "base").groups] == ["."]


def test_report_with_an_llm_counter_keeps_uncounted_apart(traces, tmp_path):
    write_jsonl(tmp_path / "d" / "trajectories.jsonl", traces["all"][:3])
    answers = {"verification": "<count>1</count>", "backtracking": "no idea", "subgoal": "<count>2</count>",
               "backward_chaining": 400}
    with CountingJudge(answers) as server:
        async def go():
            from rl.behaviours import abehaviour_report

            async with llm(server.base_url) as client:
                return await abehaviour_report(tmp_path / "d", LLMCounter(client))

        report = anyio.run(go)
    (g,) = report.groups
    assert report.counter == "llm" and g.n == 3
    assert g.behaviours["subgoal"].mean == 2 and g.behaviours["verification"].frac == 1
    for b in ("backtracking", "backward_chaining"):
        s = g.behaviours[b]
        assert s.mean is None and s.frac is None and s.counted == 0 and s.uncounted == 3


def test_missing_or_empty_sources_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        find_groups(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no trajectories.jsonl"):
        behaviour_report(tmp_path / "empty")
    (tmp_path / "e2").mkdir()
    (tmp_path / "e2" / "trajectories.jsonl").write_text("")
    with pytest.raises(ValueError, match="no trajectories"):
        behaviour_report(tmp_path / "e2")
    (tmp_path / "bad.jsonl").write_text('{"task_id": "x"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        behaviour_report(tmp_path / "bad.jsonl")


def test_cli_table_json_and_errors(traces, tmp_path):
    from tooldojo.cli import app

    write_jsonl(tmp_path / "run" / "eval" / "base" / "trajectories.jsonl", traces["none"])
    write_jsonl(tmp_path / "run" / "eval" / "grpo" / "trajectories.jsonl", traces["all"])
    r = CliRunner().invoke(app, ["rl", "behaviours", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    assert "eval/base" in r.output and "eval/grpo" in r.output and "backward_chaining" in r.output
    r = CliRunner().invoke(app, ["rl", "behaviours", str(tmp_path / "run"), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert [g["group"] for g in data["groups"]] == ["eval/base", "eval/grpo"]
    assert data["groups"][1]["behaviours"]["subgoal"]["mean"] > 0
    for args, msg in ((["rl", "behaviours", str(tmp_path / "nope")], "no such file"),
                      (["rl", "behaviours", str(tmp_path / "run"), "--counter", "llm"], "--base-url"),
                      (["rl", "behaviours", str(tmp_path / "run"), "--counter", "vibes"], "unknown counter")):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 1 and msg in r.output and "Traceback" not in r.output, r.output
    assert CliRunner().invoke(app, ["train", "--help"]).exit_code == 0


def test_cli_llm_counter_names_a_failing_endpoint(tmp_path):
    """Issue 22 item 8: `rl behaviours --counter llm` against a dead endpoint exited 0, every count missing."""
    import socket

    from tooldojo.cli import app

    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": f"Hello {i}."}]}
            for i in range(2)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    args = ["rl", "behaviours", str(tmp_path / "t.jsonl"), "--counter", "llm", "--model", "m", "--base-url"]
    r = CliRunner().invoke(app, [*args, dead])
    assert r.exit_code == 1, r.output
    assert f"error: the counting model at {dead} failed on every call (8 of 8): LLMUnavailable" in r.output
    assert "Traceback" not in r.output
    answers = {"verification": "<count>1</count>", "backtracking": "<count>0</count>", "subgoal": 400,
               "backward_chaining": "<count>0</count>"}
    with CountingJudge(answers) as server:
        r = CliRunner().invoke(app, [*args, server.base_url, "--json"])
    assert r.exit_code == 0, r.output
    assert f"warning: the counting model at {server.base_url} failed on 2 of 8 calls: LLMRequestError" in r.stderr
    assert json.loads(r.stdout)["groups"][0]["behaviours"]["subgoal"]["uncounted"] == 2
