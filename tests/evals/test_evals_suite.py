"""evals.suite: suites as pydantic-evals dataset files (YAML/JSON + schema) and Python modules,
directories discovered whole, broken cases kept as failing cases, the suite version."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic_evals import Case

from evals.context import EvalError
from evals.evaluators import AllOf, AnyOf, Not, Regex, RunCode, evaluator_types
from evals.inputs import CaseMeta, EvalInputs, InlineTask
from evals.suite import SCHEMA_FILE, SuiteDataset, load_suite, suite_schema, write_schema
from evals_helpers import EXAMPLE


def test_example_suite_has_twenty_cases_across_code_tools_and_reasoning():
    s = load_suite(EXAMPLE)
    assert s.name == "personal" and len(s.dataset.cases) >= 20
    assert not [c.name for c in s.dataset.cases if c.inputs.load_error]
    tags = [set(c.metadata.tags) for c in s.dataset.cases]
    for tag in ("code", "tool-use", "reasoning"):
        assert sum(tag in t for t in tags) >= 5, tag
    names = s.case_names
    assert "code/fizzbuzz" in names and "extras/capital-france" in names      # <file stem>/<case>
    episodes = [c for c in s.dataset.cases if c.inputs.task is not None]
    assert any(isinstance(c.inputs.task, str) for c in episodes)                # by task id
    inline = [c for c in episodes if isinstance(c.inputs.task, InlineTask)]
    assert inline and all(c.inputs.task.id == c.name for c in inline)           # inline: known by its case name
    assert all(c.inputs.base_dir == EXAMPLE for c in s.dataset.cases)


def test_committed_schema_is_current_and_every_example_file_validates():
    schema = suite_schema(load_suite(EXAMPLE).evaluator_types)      # + extras.py's MaxWords
    assert "spec_MaxWords" in json.dumps(schema) or "short_spec_MaxWords" in json.dumps(schema)
    assert json.loads((EXAMPLE / SCHEMA_FILE).read_text()) == schema, "run `dojo eval schema examples/evals/personal`"
    validator = jsonschema.Draft202012Validator(schema)
    files = sorted(EXAMPLE.glob("*.yaml"))
    assert len(files) >= 3
    for f in files:
        assert f.read_text().splitlines()[0] == f"# yaml-language-server: $schema={SCHEMA_FILE}"
        errors = list(validator.iter_errors(yaml.safe_load(f.read_text())))
        assert not errors, (f.name, errors[0].message[:300])


def test_schema_completes_nested_composites_and_rejects_unknown_evaluators():
    v = jsonschema.Draft202012Validator(suite_schema())
    good = {"name": "x", "cases": [{"name": "a", "inputs": {"prompt": "hi"}, "evaluators": [
        {"AllOf": [{"Regex": "h"}, {"Not": {"AnyOf": [{"Contains": "x"}, "EqualsExpected"]}}]},
        {"RunCode": {"contains": "1", "language": "bash"}}, "EpisodeReward", {"UnitTests": "import unittest"}]}]}
    assert not list(v.iter_errors(good))
    for bad_eval in ({"Nope": 1}, {"AllOf": [{"Nope": 1}]}, {"Not": {"Regex": 3}}, {"RunCode": {"language": "cobol"}}):
        bad = {"cases": [{"inputs": {"prompt": "hi"}, "evaluators": [bad_eval]}]}
        assert list(v.iter_errors(bad)), bad_eval
    assert list(v.iter_errors({"cases": [{"inputs": {"promt": "typo"}}]}))      # inputs are typed too


def test_write_schema(tmp_path):
    p = write_schema(tmp_path / "s")
    assert p.name == SCHEMA_FILE and json.loads(p.read_text())["title"] == "tooldojo eval suite"


def test_composites_round_trip_through_a_dataset_file(tmp_path):
    ev = AllOf([Regex("^a", ignore_case=True), Not({"Contains": "z"}), AnyOf([{"Regex": "b"}, RunCode(contains="1")])])
    ds = SuiteDataset(name="rt", cases=[Case(name="c", inputs=EvalInputs(prompt="p"), metadata=CaseMeta(tags=["t"]),
                                             evaluators=[ev])])
    ds.to_file(tmp_path / "rt.yaml", custom_evaluator_types=evaluator_types())
    text = (tmp_path / "rt.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=rt_schema.json")
    back = load_suite(tmp_path / "rt.yaml")
    (case,) = back.dataset.cases
    assert case.inputs.load_error is None and case.metadata.tags == ["t"]
    assert case.evaluators[0].as_spec() == ev.as_spec()
    assert [type(c).__name__ for c in case.evaluators[0].children] == ["Regex", "Not", "AnyOf"]


def test_broken_cases_and_files_fail_alone(tmp_path):
    (tmp_path / "good.yaml").write_text(yaml.safe_dump({"cases": [
        {"name": "ok", "inputs": {"prompt": "p"}, "evaluators": [{"Contains": "x"}]},
        {"name": "unknown-evaluator", "inputs": {"prompt": "p"}, "evaluators": [{"Nope": 1}]},
        {"name": "bad-regex", "inputs": {"prompt": "p"}, "evaluators": [{"Regex": "("}]},
        {"name": "no-prompt", "inputs": {}},
        {"name": "ok", "inputs": {"prompt": "again"}},
    ]}))
    (tmp_path / "syntax.yaml").write_text("cases: [\n  - {name: a\n")
    (tmp_path / "mod.py").write_text("raise RuntimeError('boom at import')\n")
    s = load_suite(tmp_path)
    errors = {c.name: c.inputs.load_error for c in s.dataset.cases}
    assert errors["good/ok"] is None
    assert "Nope" in errors["good/unknown-evaluator"]
    assert "invalid regex" in errors["good/bad-regex"]
    assert "prompt" in errors["good/no-prompt"]
    assert "duplicate case name" in errors["good/ok #2"]
    assert "cannot parse syntax.yaml" in errors["syntax/(file)"]
    assert "boom at import" in errors["mod/(file)"]


def test_python_module_suite_registers_its_evaluators_for_yaml(tmp_path):
    (tmp_path / "checks.py").write_text(
        "from dataclasses import dataclass\n"
        "from pydantic_evals import Case\n"
        "from pydantic_evals.evaluators import Evaluator\n"
        "@dataclass(repr=False)\n"
        "class Shouts(Evaluator):\n"
        "    def evaluate(self, ctx):\n"
        "        return str(ctx.output).isupper()\n"
        "cases = [Case(name='py', inputs='say hi', evaluators=[Shouts()]), Case(name='d', inputs={'prompt': 'x'})]\n"
        "evaluators = [Shouts()]\n")
    (tmp_path / "yaml_cases.yaml").write_text(yaml.safe_dump({"cases": [
        {"name": "y", "inputs": {"prompt": "p"}, "evaluators": ["Shouts", {"Not": "Shouts"}]}]}))
    s = load_suite(tmp_path)
    cases = {c.name: c for c in s.dataset.cases}
    assert set(cases) == {"checks/py", "checks/d", "yaml_cases/y"}
    assert cases["checks/py"].inputs.prompt == "say hi"
    assert [type(e).__name__ for e in cases["checks/py"].evaluators] == ["Shouts", "Shouts"]   # + the module's own
    assert [type(e).__name__ for e in cases["yaml_cases/y"].evaluators] == ["Shouts", "Not"]
    assert all(c.inputs.load_error is None for c in cases.values())


def test_single_file_suite_keeps_its_names_and_dataset_evaluators(tmp_path):
    f = tmp_path / "mine.json"
    f.write_text(json.dumps({"name": "mine", "cases": [{"name": "a", "inputs": {"prompt": "p"}}],
                             "evaluators": [{"Regex": "x"}]}))
    s = load_suite(f)
    assert s.name == "mine" and s.case_names == ["a"]
    assert [type(e).__name__ for e in s.dataset.evaluators] == ["Regex"]


def test_version_follows_content(tmp_path):
    (tmp_path / "a.yaml").write_text("cases: [{name: a, inputs: {prompt: p}}]\n")
    v1 = load_suite(tmp_path).version
    assert load_suite(tmp_path).version == v1
    (tmp_path / "tasks.jsonl").write_text("")                  # data next to the suite counts too
    v2 = load_suite(tmp_path).version
    (tmp_path / "a.yaml").write_text("cases: [{name: a, inputs: {prompt: q}}]\n")
    assert len({v1, v2, load_suite(tmp_path).version}) == 3
    write_schema(tmp_path)                                      # the schema does not
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "__pycache__").mkdir()
    assert load_suite(tmp_path).version == load_suite(tmp_path).version


def test_no_suite_errors(tmp_path):
    with pytest.raises(EvalError, match="no suite at"):
        load_suite(tmp_path / "missing")
    with pytest.raises(EvalError, match="holds no suite files"):
        load_suite(tmp_path)
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(EvalError, match="not a suite file"):
        load_suite(tmp_path / "x.txt")


def test_inputs_validation():
    with pytest.raises(ValueError, match="prompt"):
        EvalInputs()
    with pytest.raises(ValueError, match="takes no"):
        EvalInputs(task="t1", prompt="x")
    i = EvalInputs(messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], prompt="more")
    assert [m["role"] for m in i.chat_messages()] == ["system", "user", "user"]
    t = InlineTask(domain="notes_app", instruction="do it").to_task("case-1")
    assert t.id == "case-1" and t.user_scenario.reason_for_call == "do it" and t.tools == []


def test_example_dir_names_are_stable_across_loads():
    assert load_suite(EXAMPLE).case_names == load_suite(Path(str(EXAMPLE) + "/")).case_names
