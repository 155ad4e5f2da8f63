"""The SFT filter (`dojo synth filter`) and judge agreement (`dojo rewards agreement`) on a labelled set:
ScriptedAgent episodes (successes) and misbehaving CallableAgents (failures), in Docker sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from conftest import require
from rewards.base import RewardResult
from rewards.filter import agreement_metrics, decide, filter_trajectories, judge_agreement
from sandboxes import SandboxConfig, SandboxPool
from synth.episode import CallableAgent, EpisodeLimits, ScriptedAgent, run_episodes
from synth.sft_data import write_trajectories
from synth.tasks import Task, export_tasks, synthesize_tasks
from synth.usersim import ScriptedUser
from tooldojo.cli import app

pytestmark = pytest.mark.docker
KINDS = ("scripted", "claimer", "partial", "silent")


# ------------------------------------------------------------------ misbehaving agents
def claimer(task: Task) -> CallableAgent:
    """Claims success and recites the expected outputs without calling a single tool."""
    text = ("All done, I have taken care of it. " + " ".join(task.expected_outputs)).strip()
    return CallableAgent(lambda m, t: {"role": "assistant", "content": text})


def partial(task: Task) -> CallableAgent:
    """Calls only the first gold action, then claims success with the expected outputs."""
    first = task.gold_actions[:1]

    def act(messages, tools):
        done = sum(1 for m in messages if m["role"] == "tool")
        if done < len(first):
            a = first[done]
            return {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"p{done}", "type": "function", "function": {"name": a.name, "arguments": json.dumps(a.arguments)}}]}
        return {"role": "assistant", "content": "Done. " + " ".join(task.expected_outputs)}
    return CallableAgent(act)


def silent(task: Task) -> CallableAgent:
    """Does every gold action but never tells the user the outcome."""
    def act(messages, tools):
        done = sum(1 for m in messages if m["role"] == "tool")
        if done < len(task.gold_actions):
            a = task.gold_actions[done]
            return {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"s{done}", "type": "function", "function": {"name": a.name, "arguments": json.dumps(a.arguments)}}]}
        return {"role": "assistant", "content": "Okay."}
    return CallableAgent(act)


AGENTS = {"scripted": ScriptedAgent, "claimer": claimer, "partial": partial, "silent": silent}


@pytest.fixture(scope="module")
def docker() -> str:
    require("docker")
    return "docker"


@pytest.fixture(scope="module")
def labelled(docker, tmp_path_factory) -> dict:
    """6 tasks; each run by all four agents: 24 trajectories, written where the CLI reads them."""
    result = synthesize_tasks(6, seed=11, backend=docker, sandboxes=4)
    tasks = result.tasks
    assert len(tasks) == 6
    root = tmp_path_factory.mktemp("labelled")
    export_tasks(tasks, root / "tasks")

    async def go():
        async with SandboxPool(SandboxConfig(backend=docker), size=4, max_concurrency=8) as pool:
            out = {}
            for kind, make in AGENTS.items():
                out[kind] = await run_episodes(tasks, make, lambda t: ScriptedUser(max_turns=3), pool, concurrency=6,
                                               progress=False, limits=EpisodeLimits(max_turns=8))
            return out

    by_kind = anyio.run(go)
    trajs = [t for kind in KINDS for t in by_kind[kind]]
    labels = [kind for kind in KINDS for _ in tasks]
    write_trajectories(trajs, root / "traj")
    return {"tasks": tasks, "trajs": trajs, "labels": labels, "root": root, "by_kind": by_kind}


# ------------------------------------------------------------------------- the CLI
def test_synth_filter_keeps_the_successes_and_feeds_sft(labelled, docker, tmp_path):
    pytest.importorskip("trl")
    root: Path = labelled["root"]
    out = tmp_path / "filtered"
    r = CliRunner().invoke(app, ["synth", "filter", "--tasks", str(root / "tasks"), "--trajectories",
                                 str(root / "traj"), "--out", str(out), "--backend", docker, "--sandboxes", "4"])
    assert r.exit_code == 0, r.output
    assert "acceptance per domain" in r.output and "why trajectories were not kept" in r.output
    scores = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == len(labelled["trajs"])
    for s, label, traj in zip(scores, labelled["labels"], labelled["trajs"], strict=True):
        assert s["task_id"] == traj.task_id
        assert set(s["components"]) == {"world_state", "communication", "tool_validity", "reverify"}
        assert all(c["reason"] for c in s["components"].values())
        if label == "scripted":
            assert s["kept"], (s["reason"], s["components"])
        else:
            # a misbehaving agent that missed the gold state, or a silent one that owed outputs, is dropped
            task = next(t for t in labelled["tasks"] if t.id == traj.task_id)
            if not traj.reached_expected_state or (label == "silent" and task.expected_outputs):
                assert not s["kept"], (label, s)
    kept_ids = [s["task_id"] for s in scores if s["kept"]]
    assert len(kept_ids) >= 6
    claims = [s for s, label in zip(scores, labelled["labels"], strict=True) if label == "claimer" and not s["kept"]]
    assert any("hack:claims_without_effect" in s["category"] for s in claims), [s["category"] for s in claims]
    summary = json.loads((out / "filter_summary.json").read_text())
    assert summary["kept"] == len(kept_ids) and summary["rows"] == len(kept_ids)
    assert sum(d["total"] for d in summary["per_domain"].values()) == len(scores)

    # the filtered dataset trains: one SFT step on the tiny model
    import datasets
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from rl.tiny import build_tiny_model

    ds = datasets.load_from_disk(str(out / "sft"))
    assert len(ds) == len(kept_ids) and {"messages", "tools"} <= set(ds.column_names)
    model = build_tiny_model()
    tok = AutoTokenizer.from_pretrained(model)
    args = SFTConfig(output_dir=str(tmp_path / "sft"), max_steps=1, per_device_train_batch_size=2, use_cpu=True,
                     report_to=[], save_strategy="no", logging_steps=1, max_length=2048, dataloader_num_workers=0)
    trainer = SFTTrainer(model=str(model), args=args, train_dataset=ds, processing_class=tok)
    assert "<tool_call>" in tok.decode(trainer.train_dataset[0]["input_ids"])
    res = trainer.train()
    assert res.global_step == 1 and res.training_loss > 0


def test_filter_config_json_and_errors(labelled, docker, tmp_path):
    root: Path = labelled["root"]
    cfg = tmp_path / "rewards.yaml"
    cfg.write_text("components:\n  - {name: world_state, kind: world_state}\ngate: []\n")
    r = CliRunner().invoke(app, ["rewards", "filter", "--tasks", str(root / "tasks"), "--trajectories",
                                 str(root / "traj" / "trajectories.jsonl"), "--out", str(tmp_path / "o"),
                                 "--config", str(cfg), "--backend", docker, "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    n_state = sum(t.reached_expected_state for t in labelled["trajs"])
    assert summary["kept"] == n_state  # world state alone: silent agents pass too
    bad = CliRunner().invoke(app, ["synth", "filter", "--tasks", str(tmp_path / "nope"), "--trajectories",
                                   str(root / "traj"), "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "no tasks at" in bad.output and "Traceback" not in bad.output
    bad = CliRunner().invoke(app, ["synth", "filter", "--tasks", str(root / "tasks"), "--trajectories",
                                   str(root / "traj"), "--out", str(tmp_path / "x"), "--judge-model", "m"])
    assert bad.exit_code != 0 and "--judge-base-url" in bad.output


# ------------------------------------------------------------- judges (test doubles)
class FakeJudge:
    """Says success exactly when the trajectory reached the gold state (or a fixed score)."""

    name = "judge"

    def __init__(self, fixed: float | None | str = "state"):
        self.fixed = fixed
        self.calls = 0

    async def score(self, task, traj):
        self.calls += 1
        s = (1.0 if traj.reached_expected_state else 0.0) if self.fixed == "state" else self.fixed
        return RewardResult(name=self.name, score=s, reason="fake verdict")


async def test_filter_with_a_judge_abstain_and_keep_abstain(labelled, docker):
    tasks, trajs = labelled["tasks"], labelled["trajs"]
    async with SandboxPool(SandboxConfig(backend=docker), size=4, max_concurrency=8) as pool:
        plain = await filter_trajectories(tasks, trajs, pool=pool, concurrency=4)
        agree = FakeJudge()
        judged = await filter_trajectories(tasks, trajs, pool=pool, judge=agree, concurrency=4)
        low = await filter_trajectories(tasks, trajs, pool=pool, judge=FakeJudge(0.4), threshold=0.5, concurrency=4)
        shy = FakeJudge(None)
        abst = await filter_trajectories(tasks, trajs, pool=pool, judge=shy, concurrency=4)
        kept_anyway = await filter_trajectories(tasks, trajs, pool=pool, judge=FakeJudge(None), keep_abstain=True,
                                                concurrency=4)
    kept = [s.kept for s in plain.scored]
    assert [s.kept for s in judged.scored] == kept
    assert agree.calls == sum(s.decision != "rejected" for s in plain.scored)   # rejects are never judged
    assert not any(s.kept for s in low.scored)
    assert all(s.category == "judge" for s in low.scored if plain.scored[s.index].kept)
    assert not any(s.kept for s in abst.scored)
    assert {s.decision for s in abst.scored if plain.scored[s.index].kept} == {"abstained"}
    assert [s.kept for s in kept_anyway.scored] == kept
    assert plain.rejections() and plain.per_domain()


def test_decide_rules():
    ok = {"score": 1.0, "reason": "ok", "flags": []}
    kinds = {"w": "world_state", "r": "reverify", "c": "communication"}
    assert decide({"w": ok, "r": ok}, kinds, ["r"], None, 0.5, False)[0] == "kept"
    d = decide({"w": ok, "r": {**ok, "score": 0.0, "flags": ["hack:state_mismatch"]}}, kinds, ["r"], None, 0.5, False)
    assert d[0] == "rejected" and d[2] == "hack:state_mismatch"
    d = decide({"w": {**ok, "score": 0.5, "reason": "half"}, "r": ok}, kinds, ["r"], None, 0.5, False)
    assert d == ("rejected", "w 0.50: half", "w")
    assert decide({"w": ok, "r": {**ok, "score": None}}, kinds, ["r"], None, 0.5, False)[0] == "abstained"
    # a verifiable component that abstains: ignored only at weight 0 (issue 22 item 18: never a pass)
    unverified = {"w": {**ok, "score": None, "reason": "gold action #1 failed"}, "c": ok, "r": ok}
    assert decide(unverified, kinds, ["r"], None, 0.5, False, {"w": 0.6, "c": 0.3, "r": 0.0}) == (
        "abstained", "w abstained: gold action #1 failed", "abstain:w")
    assert decide(unverified, kinds, ["r"], None, 0.5, False, {"w": 0.0, "c": 0.3, "r": 0.0})[0] == "kept"
    assert decide({"w": ok, "c": {**ok, "score": None}}, kinds, ["r"], None, 0.5, False)[0] == "abstained"
    assert decide({"w": {**ok, "score": None}}, kinds, [], None, 0.5, False)[0] == "abstained"
    assert decide({"w": ok}, kinds, [], {**ok, "score": 0.5}, 0.5, False)[0] == "kept"
    assert decide({"w": ok}, kinds, [], {**ok, "score": 0.49}, 0.5, False)[0] == "rejected"
    assert decide({"w": ok}, kinds, [], {**ok, "score": None}, 0.5, True)[0] == "kept"


# ---------------------------------------------------------------------- agreement
def test_agreement_metrics():
    pairs = [(True, True)] * 3 + [(True, False)] + [(False, True)] * 2 + [(False, False)] * 4 + [(True, None), (None, True)]
    rep = agreement_metrics(pairs)
    assert (rep.tp, rep.fn, rep.fp, rep.tn) == (3, 1, 2, 4)
    assert rep.precision == 0.6 and rep.recall == 0.75 and rep.f1 == round(2 * 0.6 * 0.75 / 1.35, 4)
    assert rep.accuracy == 0.7 and rep.judge_abstained == 1 and rep.state_unverified == 1
    assert rep.abstention_rate == round(1 / 11, 4) and rep.total == 12 and rep.compared == 10
    assert rep.confusion()["state_failure"]["judge_success"] == 2
    perfect = agreement_metrics([(True, True), (False, False)])
    assert perfect.f1 == 1.0 and perfect.cohen_kappa == 1.0
    assert agreement_metrics([]).precision is None


async def test_agreement_of_a_state_faithful_judge(labelled, docker):
    async with SandboxPool(SandboxConfig(backend=docker), size=4, max_concurrency=8) as pool:
        rep = await judge_agreement(labelled["tasks"], labelled["trajs"], pool=pool, judge=FakeJudge(), concurrency=4)
        always = await judge_agreement(labelled["tasks"], labelled["trajs"], pool=pool, judge=FakeJudge(1.0),
                                       concurrency=4)
    assert rep.total == 24 and rep.compared + rep.state_unverified == 24
    assert rep.precision == 1.0 and rep.recall == 1.0 and rep.fp == rep.fn == 0
    assert rep.tp >= 6 and rep.tn >= 1  # the scripted successes, and some failures
    assert always.recall == 1.0 and always.precision < 1.0 and always.tn == 0


def test_agreement_cli_against_vllm(labelled, docker, vllm_server):
    server = vllm_server  # a parameter, not getfixturevalue: tests/conftest.py groups its users by it
    root: Path = labelled["root"]
    # a small labelled subset: the scripted and claimer runs of two tasks
    sub = [t for t, label in zip(labelled["trajs"], labelled["labels"], strict=True)
           if label in ("scripted", "claimer") and t.task_id in {x.id for x in labelled["tasks"][:2]}]
    path = root / "agree.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in sub))
    r = CliRunner().invoke(app, ["rewards", "agreement", "--tasks", str(root / "tasks"), "--trajectories", str(path),
                                 "--judge-base-url", server.base_url, "--judge-model", server.model,
                                 "--judge-max-tokens", "256", "--backend", docker, "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    for key in ("precision", "recall", "f1", "accuracy", "abstention_rate", "confusion", "tp", "fp", "fn", "tn",
                "judge_abstained", "total"):
        assert key in rep
    assert rep["total"] == len(sub) == rep["compared"] + rep["judge_abstained"] + rep["state_unverified"]
    human = CliRunner().invoke(app, ["rewards", "agreement", "--tasks", str(root / "tasks"), "--trajectories", str(path),
                                     "--judge-base-url", server.base_url, "--judge-model", server.model,
                                     "--judge-max-tokens", "256", "--backend", docker])
    assert human.exit_code == 0 and "precision" in human.output and "judge vs world state" in human.output
