"""evals.evaluators on known-good and known-bad outputs: text checks and composites on a plain
pydantic-evals task function; code run in real sandboxes (one per case, through the case
lifecycle); tool episodes scored with rewards; the rubric judge. The whole example suite passes
on known-good answers."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import yaml
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected, Evaluator, EvaluatorContext

from evals.context import case_resources
from evals.evaluators import AllOf, AnyOf, Not, Regex, register_evaluator
from evals.inputs import EvalInputs
from evals.models import FunctionModel
from evals.runner import RunOptions, run_suite_sync
from evals.suite import load_suite
from evals_helpers import EXAMPLE, GoodModel, ScriptedJudge, sandbox_backend


def _verdicts(report) -> dict[str, dict[str, tuple[bool, str | None]]]:
    return {c.name: {k: (a.value, a.reason) for k, a in c.assertions.items()} for c in report.cases}


def test_text_evaluators_and_composites_on_a_plain_task_function():
    ds = Dataset(name="plain", cases=[
        Case(name="yes", inputs="q1", expected_output="Yes, 42."),
        Case(name="no", inputs="q2", expected_output="nope"),
    ], evaluators=[
        Regex(r"\b42\b"),
        Regex("yes", ignore_case=True, evaluation_name="says_yes"),
        Regex(r"Yes, \d+\.", full=True, evaluation_name="full"),
        AllOf([{"Regex": "Yes"}, {"Contains": "42"}], evaluation_name="all"),
        AnyOf([{"Regex": "nope"}, {"Regex": "42"}], evaluation_name="any"),
        Not({"Contains": "sorry"}, evaluation_name="not_sorry"),
        EqualsExpected(),
    ])
    answers = {"q1": "Yes, 42.", "q2": "sorry, 41"}
    report = ds.evaluate_sync(lambda q: answers[q], progress=False)
    v = _verdicts(report)
    assert {k: ok for k, (ok, _) in v["yes"].items()} == {
        "Regex": True, "says_yes": True, "full": True, "all": True, "any": True, "not_sorry": True, "EqualsExpected": True}
    assert {k: ok for k, (ok, _) in v["no"].items()} == {
        "Regex": False, "says_yes": False, "full": False, "all": False, "any": False, "not_sorry": False,
        "EqualsExpected": False}
    assert "no match for /\\b42\\b/" in v["no"]["Regex"][1]
    assert v["no"]["all"][1].startswith("2 of 2 failed")
    assert v["no"]["any"][1].startswith("none passed")
    assert v["no"]["not_sorry"][1].startswith("the negated evaluator passed: ")


@register_evaluator
@dataclass(repr=False)
class Explodes(Evaluator):
    def evaluate(self, ctx: EvaluatorContext) -> bool:
        raise RuntimeError("kaboom")


def test_a_child_that_raises_fails_its_composite_with_the_reason():
    ds = Dataset(name="x", cases=[Case(name="c", inputs="q")],
                 evaluators=[AnyOf([{"Explodes": {}}, {"Regex": "zzz"}], evaluation_name="any"),
                             Not("Explodes", evaluation_name="not")])
    v = _verdicts(ds.evaluate_sync(lambda q: "hello", progress=False))["c"]
    assert v["any"][0] is False and "Explodes raised RuntimeError: kaboom" in v["any"][1]
    assert v["not"][0] is True     # Not(a failing child) passes


# ---------------------------------------------------------------------------------- sandboxes
SEEN: list[tuple[str, int, int]] = []


@register_evaluator
@dataclass(repr=False)
class SandboxProbe(Evaluator):
    """Records which sandbox (and which case resources) each evaluator of a case gets."""

    needs_sandbox = True
    tag: str = "p"

    async def evaluate(self, ctx: EvaluatorContext) -> bool:
        res = case_resources()
        sb = await res.sandbox()
        SEEN.append((ctx.name, id(res), id(sb)))
        r = await sb.exec("echo probe > /workspace/probe && ls /workspace", timeout=10)
        return r.exit_code == 0


CODE_SUITE = {"name": "code", "cases": [
    {"name": "prints", "inputs": {"prompt": "PRINT"}, "expected_output": "hello",
     "evaluators": ["RunCode", {"RunCode": {"contains": "hel", "evaluation_name": "contains"}},
                    {"SandboxProbe": {"tag": "a"}}, {"SandboxProbe": {"tag": "b"}}]},
    {"name": "stdin-args-files", "inputs": {"prompt": "ECHO"}, "evaluators": [
        {"RunCode": {"stdin": "abc", "args": ["x"], "files": {"data.txt": "from a file"},
                     "equals": "abc x from a file"}}]},
    {"name": "bash", "inputs": {"prompt": "BASH"}, "evaluators": [{"RunCode": {"language": "bash", "equals": "1,2"}}]},
    {"name": "loops", "inputs": {"prompt": "LOOP"}, "evaluators": [{"RunCode": {"timeout_s": 1}}]},
    {"name": "crashes", "inputs": {"prompt": "CRASH"}, "evaluators": ["RunCode"]},
    {"name": "no-code", "inputs": {"prompt": "PROSE"}, "evaluators": ["RunCode"]},
    {"name": "unit", "inputs": {"prompt": "FUNC"}, "evaluators": [{"UnitTests": {"tests": (
        "import unittest\nfrom solution import add\n"
        "class T(unittest.TestCase):\n"
        "    def test_a(self):\n        self.assertEqual(add(1, 2), 3)\n"
        "    def test_b(self):\n        self.assertEqual(add(-1, 1), 0)\n")}}]},
]}
CODE_ANSWERS = {
    "PRINT": "Sure:\n```python\nprint('hello')\n```",
    "ECHO": "```python\nimport sys\nprint(sys.stdin.read(), sys.argv[1], open('data.txt').read())\n```",
    "BASH": "```bash\necho 1,2\n```",
    "LOOP": "```python\nwhile True:\n    pass\n```",
    "CRASH": "```python\nraise SystemExit(3)\n```",
    "PROSE": "I would print hello.",
}


def _answer(good: bool):
    def respond(messages, tools, task):
        p = messages[-1]["content"]
        if p == "FUNC":
            return "```python\ndef add(a, b):\n    return a + b\n```" if good else "```python\ndef add(a, b):\n    return a - b\n```"
        return CODE_ANSWERS[p]
    return respond


def test_code_runs_in_one_sandbox_per_case(tmp_path):
    backend = sandbox_backend()
    (tmp_path / "code.yaml").write_text(yaml.safe_dump(CODE_SUITE))
    SEEN.clear()
    (rec,) = run_suite_sync(load_suite(tmp_path / "code.yaml"), [FunctionModel("m", _answer(True))],
                            RunOptions(history_dir=tmp_path / "h", backend=backend, progress=False, concurrency=3))
    res = {c.name: c for c in rec.cases}
    assert res["prints"].all_passed, res["prints"].reasons
    assert res["stdin-args-files"].all_passed, res["stdin-args-files"].reasons
    assert res["bash"].all_passed, res["bash"].reasons
    assert res["unit"].all_passed, res["unit"].reasons
    assert "timed out after 1 s" in res["loops"].reasons[0]
    assert "exit code 3, expected 0" in res["crashes"].reasons[0]
    assert "no fenced python code block" in res["no-code"].reasons[0]
    # both probes of the case got the case's one sandbox (the RunCode evaluators used it too)
    assert len(SEEN) == 2 and SEEN[0][1:] == SEEN[1][1:]
    assert rec.options["backend"] == backend

    (bad,) = run_suite_sync(load_suite(tmp_path / "code.yaml"),
                            [FunctionModel("bad", _answer(False))],
                            RunOptions(history_dir=tmp_path / "h", backend=backend, progress=False, cases=["unit"]))
    (unit,) = bad.cases
    assert not unit.all_passed and "0.00 of the tests pass" in unit.reasons[0]


def test_the_case_lifecycle_gives_every_sandbox_back(tmp_path, monkeypatch):
    from evals import context

    backend = sandbox_backend()
    made: list[context.CaseResources] = []
    orig_setup = context.CaseSandboxLifecycle.setup

    async def setup(self):
        await orig_setup(self)
        made.append(self.resources)

    monkeypatch.setattr(context.CaseSandboxLifecycle, "setup", setup)
    (tmp_path / "code.yaml").write_text(yaml.safe_dump(CODE_SUITE))
    run_suite_sync(load_suite(tmp_path / "code.yaml"), [FunctionModel("m", _answer(True))],
                   RunOptions(history_dir=tmp_path / "h", backend=backend, progress=False, repeat=2, save=False))
    assert len(made) == 2 * len(CODE_SUITE["cases"])           # one lifecycle per case run
    assert all(r._sandbox is None for r in made)                # every lease given back
    used = [r for r in made if r.sandbox_leases]
    assert used and all(r.sandbox_leases == 1 for r in used)    # at most one sandbox per case run


# ---------------------------------------------------------------------------------- the example suite
def test_the_example_suite_passes_on_known_good_answers(tmp_path):
    backend = sandbox_backend()
    model = GoodModel()
    judge = ScriptedJudge("Rayleigh")
    (rec,) = run_suite_sync(load_suite(EXAMPLE), [model],
                            RunOptions(history_dir=tmp_path, backend=backend, progress=False, judge_client=judge))
    bad = {c.name: c.reasons for c in rec.cases if not c.all_passed}
    assert not bad, bad
    assert rec.summary.cases >= 20 and rec.summary.pass_rate == 1.0
    assert model.episodes == 6 and judge.calls >= 1
    scores = {c.name: c.scores for c in rec.cases if c.name.startswith("tool_use/")}
    assert scores["tool_use/refund-and-move"]["EpisodeReward_score"] == 1.0


def test_episode_rewards_and_the_judge_fail_bad_answers_with_reasons(tmp_path):
    backend = sandbox_backend()
    wrong = FunctionModel("wrong", lambda messages, tools, task: "I cannot help with that.")
    (rec,) = run_suite_sync(load_suite(EXAMPLE), [wrong],
                            RunOptions(history_dir=tmp_path, backend=backend, progress=False,
                                       judge_client=ScriptedJudge("Rayleigh"),
                                       cases=["tool_use/*", "reasoning/why-sky-blue"]))
    res = {c.name: c for c in rec.cases}
    assert len(res) == 7 and not any(c.all_passed for c in res.values())
    assert res["tool_use/refund-and-move"].scores["EpisodeReward_score"] < 1.0
    assert "world_state" in res["tool_use/fees-and-return"].reasons[0]
    assert "communication" in res["tool_use/search-catalogue-inline"].reasons[0]
    assert "negated evaluator passed: Regex: matched 'I cannot help'" in res["tool_use/refund-by-email"].reasons[0]
    assert "0.00 of the criteria met" in res["reasoning/why-sky-blue"].reasons[0]


def test_judge_problems_fail_the_case_with_the_reason(tmp_path):
    suite = tmp_path / "j.yaml"
    suite.write_text(yaml.safe_dump({"cases": [{"name": "j", "inputs": {"prompt": "sky"},
                                                "evaluators": [{"RubricJudge": {"criteria": ["names Rayleigh"]}}]},
                                               {"name": "no-criteria", "inputs": {"prompt": "sky"},
                                                "evaluators": ["RubricJudge", "EpisodeReward"]}]}))
    model = FunctionModel("m", lambda m, t, task: "Rayleigh scattering.")
    (down,) = run_suite_sync(load_suite(suite), [model], RunOptions(
        history_dir=tmp_path, progress=False, judge_client=ScriptedJudge("Rayleigh", fail=True), save=False,
        backend=sandbox_backend()))
    res = {c.name: c for c in down.cases}
    assert "no verdict" in res["j"].reasons[0] and "cannot connect" in res["j"].reasons[0]
    assert any("needs `criteria`" in r for r in res["no-criteria"].reasons)
    assert any("EpisodeReward scores tool episodes" in r for r in res["no-criteria"].reasons)
    (nojudge,) = run_suite_sync(load_suite(suite), [model], RunOptions(
        history_dir=tmp_path, progress=False, save=False, cases=["j"], backend=sandbox_backend()))
    assert "no judge model: run with --judge MODEL" in nojudge.cases[0].reasons[0]


def test_inputs_are_what_a_plain_function_sees():
    seen = []
    ds = Dataset(name="x", cases=[Case(name="c", inputs=EvalInputs(prompt="p", system="s"))])
    ds.evaluate_sync(lambda i: seen.append(i.chat_messages()) or "ok", progress=False)
    assert seen == [[{"role": "system", "content": "s"}, {"role": "user", "content": "p"}]]


@pytest.mark.parametrize("spec, match", [({"Regex": "("}, "invalid regex"), ({"RunCode": {"language": "cobol"}},
                                          "language must be"), ({"AllOf": []}, "non-empty list"),
                                         ({"Not": {"A": 1, "B": 2}}, "Not takes one evaluator"),
                                         ({"AllOf": [{"Nope": 1}]}, "unknown evaluator 'Nope'")])
def test_bad_evaluator_specs_say_why(spec, match):
    from evals.evaluators import build_evaluator

    with pytest.raises(ValueError, match=match):
        build_evaluator(spec)
