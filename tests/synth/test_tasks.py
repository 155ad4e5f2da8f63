"""Task synthesis: APIGen-MT blueprints, validated by gold replay in fresh sandboxes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from synth.tasks import (
    Action,
    Task,
    TaskSynthesis,
    check_task,
    export_tasks,
    load_tasks,
    replay_tasks,
    synthesize_tasks,
    validate_tasks,
)
from tests.conftest import backend_status

DOMAINS = ["retail_orders", "flight_booking", "event_tickets", "library_loans", "crypto_wallet", "issue_tracker"]
N = 36
DOJO = shutil.which("dojo") or str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "dojo")


def _need_docker() -> None:
    ok, why = backend_status("docker")
    if not ok:
        pytest.skip(f"docker backend unavailable: {why}")


@pytest.fixture(scope="module")
def made() -> TaskSynthesis:
    _need_docker()
    return synthesize_tasks(N, seed=7, domains=DOMAINS, backend="docker", sandboxes=4)


@pytest.fixture(scope="module")
def exported(made: TaskSynthesis, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_tasks(made, tmp_path_factory.mktemp("tasks"))


def test_makes_n_tasks_over_several_domains(made: TaskSynthesis) -> None:
    s = made.stats
    assert s.kept == N == len(made.tasks)
    assert s.replay_pass_rate == 1.0 and s.replayed >= N
    assert set(s.per_domain) == set(DOMAINS)
    assert len({t.id for t in made.tasks}) == N
    for t in made.tasks:
        assert 1 <= len(t.gold_actions) <= 5
        gold = [a.name for a in t.gold_actions]
        assert set(gold) <= set(t.tools)
        assert t.rubric.expected_tool_pattern == gold
        assert len(t.final_state_hash) == 64 and t.provenance == "template"
        assert t.instruction and t.persona and t.user_scenario.persona == t.persona


def test_exported_tasks_pass_gold_replay_with_the_same_hash(exported: Path) -> None:
    tasks = load_tasks(exported)
    results = replay_tasks(tasks, backend="docker", sandboxes=4)
    for t, r in zip(tasks, results, strict=True):
        assert r.ok, (t.id, r.reason)
        assert r.final_state_hash == t.final_state_hash, t.id


def test_expected_outputs_appear_in_gold_results(made: TaskSynthesis) -> None:
    results = replay_tasks(made.tasks, backend="docker", sandboxes=4)
    with_outputs = 0
    for t, r in zip(made.tasks, results, strict=True):
        blob = json.dumps(r.outputs, ensure_ascii=False, sort_keys=True)
        for v in t.expected_outputs:
            assert v in blob, (t.id, v)
            assert v not in t.instruction, (t.id, v)  # something the agent finds out, not an echo
        with_outputs += bool(t.expected_outputs)
    assert with_outputs >= N // 2


def test_difficulty_tiers_and_user_info(made: TaskSynthesis) -> None:
    tiers = {t.difficulty for t in made.tasks}
    assert tiers == {"easy", "medium", "hard"}
    for t in made.tasks:
        n = len(t.gold_actions)
        base = 0 if n == 1 else 1 if n <= 3 else 2
        assert t.difficulty == ("easy", "medium", "hard")[min(2, base + t.needs_user_info)]
    assert any(len(t.gold_actions) >= 2 for t in made.tasks)
    needs = [t for t in made.tasks if t.needs_user_info]
    assert needs and len(needs) < N
    for t in needs:
        # Some fact the user knows is held back from the opening message: the agent must ask.
        held = [v for v in t.user_scenario.known_info.values() if v not in t.instruction]
        assert held, t.id
    for t in made.tasks:
        if not t.needs_user_info:
            # Every fact the user gives is in the instruction.
            for v in t.user_scenario.known_info.values():
                if len(v) >= 2 and not v.startswith(("[", "{")):
                    assert v in t.instruction, (t.id, v)


def test_same_seed_same_tasks_and_other_seed_differs(made: TaskSynthesis, tmp_path: Path) -> None:
    again = synthesize_tasks(12, seed=7, domains=DOMAINS, backend="docker", sandboxes=2)
    ids = {x.id for x in again.tasks}
    a = export_tasks([t for t in made.tasks if t.id in ids], tmp_path / "a")
    b = export_tasks(again, tmp_path / "b")
    first = (a / "tasks.jsonl").read_text()
    assert first and first == (b / "tasks.jsonl").read_text()
    other = synthesize_tasks(12, seed=8, domains=DOMAINS, backend="docker", sandboxes=2)
    assert [t.model_dump(exclude={"id"}) for t in other.tasks] != [t.model_dump(exclude={"id"}) for t in again.tasks]


def test_tampered_task_is_dropped_with_a_reason(made: TaskSynthesis) -> None:
    from sandboxes import SandboxConfig, SandboxPool

    good = made.tasks[0]
    broken_id = good.model_copy(deep=True)
    broken_id.id = "tampered-id"
    a = broken_id.gold_actions[-1]
    key = next(iter(a.arguments), None)
    if key is None:
        broken_id.gold_actions[-1] = Action(name="no_such_tool", arguments={})
    else:
        broken_id.gold_actions[-1] = Action(name=a.name, arguments={**a.arguments, key: "ZZ-NOT-THERE-999"})
    # The recorded final state does not match what the gold actions reach.
    other_state = good.model_copy(deep=True)
    other_state.id = "tampered-hash"
    other_state.final_state_hash = "0" * 64
    missing = good.model_copy(deep=True)
    missing.id = "tampered-output"
    missing.expected_outputs = ["no such output 12345"]

    async def go():
        async with SandboxPool(SandboxConfig(backend="docker"), size=2) as pool:
            return await validate_tasks([good, broken_id, other_state, missing], pool)

    kept, dropped = anyio.run(go)
    assert [t.id for t in kept] == [good.id]
    reasons = {d.id: d.reason for d in dropped}
    assert reasons["tampered-id"].startswith("action failed:")
    assert broken_id.gold_actions[-1].name in reasons["tampered-id"]
    assert reasons["tampered-hash"].startswith("state mismatch")
    assert reasons["tampered-output"].startswith("output missing")
    assert all(d.stage == "replay" for d in dropped)


def test_check_task_accepts_every_made_task(made: TaskSynthesis) -> None:
    from sandboxes import SandboxConfig, SandboxPool

    async def go():
        async with SandboxPool(SandboxConfig(backend="docker"), size=2) as pool:
            return [await check_task(t, pool) for t in made.tasks[:6]]

    assert all(ok for ok, _ in anyio.run(go))


def test_dataset_loads_with_prompt_and_tools(exported: Path, made: TaskSynthesis) -> None:
    import datasets

    from toolzoo.domains import load_domain

    ds = datasets.load_from_disk(str(exported / "hf"))
    assert len(ds) == N
    for col in ("id", "domain", "seed", "prompt", "tools", "instruction", "persona", "user_scenario", "gold_actions",
                "expected_outputs", "rubric", "difficulty", "needs_user_info", "final_state_hash", "provenance"):
        assert col in ds.column_names, col
    row = ds[0]
    task = next(t for t in made.tasks if t.id == row["id"])
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["prompt"][0]["content"] == load_domain(task.domain).policy
    assert row["prompt"][1]["content"] == task.instruction
    tools = json.loads(row["tools"])
    assert [t["function"]["name"] for t in tools] == task.tools
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in tools)
    assert [Action(**a) for a in json.loads(row["gold_actions"])] == task.gold_actions
    from synth.task_models import output_json, output_of

    assert json.loads(row["expected_outputs"]) == [output_json(o) for o in task.expected_outputs]
    # the field travels: read back, each output is bound to the same field
    back = [output_of(o) for o in json.loads(row["expected_outputs"])]
    assert [getattr(o, "field", None) for o in back] == [getattr(o, "field", None) for o in task.expected_outputs]
    pq = datasets.Dataset.from_parquet(str(exported / "tasks.parquet"))
    assert pq["id"] == ds["id"]
    summary = json.loads((exported / "summary.json").read_text())
    assert summary["kept"] == N and summary["replay_pass_rate"] == 1.0
    assert set(summary["per_difficulty"]) == {"easy", "medium", "hard"}
    assert [t.id for t in load_tasks(exported / "tasks.jsonl")] == [t.id for t in made.tasks]


class FakeLLM:
    def __init__(self, fail: bool):
        self.fail = fail
        self.calls = 0

    async def json(self, messages, schema):
        self.calls += 1
        if self.fail:
            raise RuntimeError("endpoint down")
        doc = json.loads(messages[-1]["content"])
        return {"instruction": "Hello from the LLM. " + doc["instruction"], "persona": "LLM: " + doc["persona"]}


@pytest.mark.parametrize("fail", [False, True])
def test_llm_rewrite_and_fallback(fail: bool) -> None:
    _need_docker()
    llm = FakeLLM(fail)
    r = synthesize_tasks(4, seed=1, domains=["retail_orders"], backend="docker", sandboxes=2, llm=llm)
    assert llm.calls >= 4 and r.stats.kept == 4
    if fail:
        assert r.stats.llm_errors >= 4 and all(t.provenance == "template" for t in r.tasks)
    else:
        assert r.stats.llm_rewrites >= 4 and all(t.provenance == "llm" for t in r.tasks)
        assert all(t.instruction.startswith("Hello from the LLM.") for t in r.tasks)


def test_cli_end_to_end(tmp_path: Path) -> None:
    _need_docker()
    env = {**os.environ, "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "cli"
    r = subprocess.run([DOJO, "synth", "tasks", "--n", "6", "--out", str(out), "--seed", "2",
                        "--domains", "retail_orders,pharmacy", "--backend", "docker"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert "6/6 tasks" in r.stdout and "replay pass rate 100.0%" in r.stdout
    tasks = load_tasks(out)
    assert len(tasks) == 6 and {t.domain for t in tasks} == {"retail_orders", "pharmacy"}
    assert all(isinstance(t, Task) for t in tasks)
    import datasets

    assert len(datasets.load_from_disk(str(out / "hf"))) == 6

    bad = subprocess.run([DOJO, "synth", "tasks", "--n", "2", "--out", str(tmp_path / "x"), "--domains", "nope"],
                         capture_output=True, text=True, timeout=120, env=env)
    lines = [x for x in bad.stderr.splitlines() if x.strip()]
    assert bad.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: unknown domain")


def test_quote_values_quotes_the_string_values_and_changes_nothing_else() -> None:
    """quote_values: the same tasks (same seed), with each string value of the request in double
    quotes, so a byte-level BPE splits it as inside the JSON arguments of the gold call."""
    ok, why = backend_status("local")
    if not ok:
        pytest.skip(f"local backend unavailable: {why}")
    kw = dict(seed=3, domains=["home_devices"], backend="local", sandboxes=2, lengths={1: 1.0}, user_info_rate=0.0)
    plain, quoted = synthesize_tasks(12, **kw).tasks, synthesize_tasks(12, quote_values=True, **kw).tasks
    assert [t.gold_actions for t in plain] == [t.gold_actions for t in quoted]
    assert [t.final_state_hash for t in plain] == [t.final_state_hash for t in quoted]
    n_quoted = 0
    for p, q in zip(plain, quoted, strict=True):
        strings = [v for a in q.gold_actions for v in a.arguments.values() if isinstance(v, str)]
        for v in strings:
            assert f'"{v}"' in q.instruction and f'"{v}"' not in p.instruction
            n_quoted += 1
        assert q.instruction.replace('"', "") == p.instruction  # only the quotes differ
    assert n_quoted > 0
