"""The OpenAI-function environment adapter: tool classes + data file + tasks -> a domain and Tasks."""

from __future__ import annotations

import json

import pytest

from sandboxes import SandboxConfig
from synth.imported_tasks import import_tasks
from tests.byoe_domains import write_openai_env
from tests.conftest import any_backend
from toolzoo.domain_dirs import initial_state
from toolzoo.domains import load_domain
from toolzoo.openai_functions import import_environment
from toolzoo.spec import SpecError
from toolzoo.testing import DomainHarness


@pytest.fixture(autouse=True)
def _forget_domain_folders(clean_registry):
    yield


def test_an_openai_function_environment_becomes_a_domain_and_tasks(tmp_path):
    env = write_openai_env(tmp_path)
    folder = import_environment(env / "tools", env / "data", name="my_env", out=tmp_path / "domains",
                                policy=env / "wiki.md")
    dom = load_domain(str(folder))
    assert [t.name for t in dom.tools] == ["get_user_details", "modify_user_address"]
    assert dom.tool("get_user_details").effect == "read" and dom.tool("modify_user_address").effect == "write"
    assert dom.tool("modify_user_address").parameters["required"] == ["user_id", "city", "state", "zip"]
    assert dom.policy.startswith("Authenticate") and initial_state(dom)["users"]["bo_2"]["name"] == "Bo"
    with DomainHarness(dom, config=SandboxConfig(backend=any_backend())) as h:
        assert h.ok("get_user_details", {"user_id": "ana_1"})["name"] == "Ana"           # JSON text decoded
        assert "not found" in h.err("get_user_details", {"user_id": "nobody"}, code="tool_error").message
        h.ok("modify_user_address", {"user_id": "ana_1", "city": "Reno", "state": "NV", "zip": "89501"})
        assert h.state()["users"]["ana_1"]["address"]["state"] == "NV"

    kept, dropped = import_tasks(env / "tasks_test.py", dom, backend=any_backend(), sandboxes=2)
    assert [t.id for t in kept] == ["my_env-00000", "my_env-00001", "my_env-00002"]
    first, second, unknown_user = kept
    assert first.gold_actions[0].arguments["state"] == "NV" and first.final_state_hash
    assert second.expected_outputs == ["73301"]
    assert first.rubric.model_dump() == {"success_criteria": [], "expected_tool_pattern": [], "checkpoints": []}
    assert first.persona == "" and first.provenance == "imported"
    # a gold call failing with the declared error is part of the gold (issue 30 finding 8); the environment
    # answered "Error: user not found", so the state is unchanged
    assert unknown_user.gold_actions[0].arguments["user_id"] == "zed_9"
    # bad arguments in the gold are not a declared error: dropped, with the reason
    assert len(dropped) == 1 and dropped[0].id == "my_env-00003" and "invalid_arguments" in dropped[0].reason


def test_effects_and_errors_of_the_adapter(tmp_path):
    env = write_openai_env(tmp_path)
    folder = import_environment(env / "tools", env / "data" / "users.json", name="env2", out=tmp_path,
                                effects={"get_user_details": "write"})
    assert json.loads((folder / "tools.json").read_text())[0]["effect"] == "write"
    with pytest.raises(SpecError, match="exists"):
        import_environment(env / "tools", env / "data", name="env2", out=tmp_path)
    with pytest.raises(SpecError, match="unknown tools: nope"):
        import_environment(env / "tools", env / "data", name="env3", out=tmp_path, effects={"nope": "read"})
    with pytest.raises(SpecError, match="no tool classes"):
        import_environment(env / "data", env / "data", name="env4", out=tmp_path)


@pytest.mark.parametrize("stem", ['q"""+str(__import__("os").system("touch X"))+"""x', 'a"""b', "c'''d\\"])
def test_hostile_tools_file_names_never_become_code(tmp_path, monkeypatch, stem):
    """Issue 30: the tools file's name went unescaped into the generated __init__.py's docstring."""
    import ast

    env = write_openai_env(tmp_path)
    hostile = env / f"{stem}.py"
    hostile.write_text((env / "tools" / "get_user_details.py").read_text())
    monkeypatch.chdir(tmp_path)
    folder = import_environment(hostile, env / "data", name="hostile_env", out=tmp_path / "domains")
    init = (folder / "__init__.py").read_text()
    assert ast.get_docstring(ast.parse(init)) == f"Imported from {stem}.py (an OpenAI-function environment)."
    exec(compile(init, "__init__.py", "exec"), {})  # what any later import of the folder would run
    assert not (tmp_path / "X").exists()
    assert [t.name for t in load_domain(str(folder)).tools] == ["get_user_details"]


def test_imported_tool_errors_are_declared(tmp_path):
    """Route 2 used to fail its own validator: `undeclared error code 'tool_error'`."""
    from toolzoo.validate import validate_zoo_at

    env = write_openai_env(tmp_path)
    folder = import_environment(env / "tools", env / "data", name="declared_env", out=tmp_path / "domains")
    assert load_domain(str(folder)).tool("get_user_details").errors.keys() == {"tool_error"}
    report = validate_zoo_at(str(folder), backend=any_backend(), sandboxes=1)
    assert report.ok, report.summary()


def test_computed_outputs_are_kept_only_when_the_import_says_so(tmp_path):
    """Issue 30 finding 8: an output the agent computes (here: how many users there are) is in no gold
    result. By default the task is dropped, and the reason names the option; with computed_outputs it is
    kept (the communication reward checks the agent's answer for it, as for every expected output)."""
    env = write_openai_env(tmp_path)
    folder = import_environment(env / "tools", env / "data", name="calc_env", out=tmp_path / "domains")
    dom = load_domain(str(folder))
    task = {"user_id": "u", "instruction": "How many letters are in Ana's name?",
            "actions": [{"name": "get_user_details", "kwargs": {"user_id": "ana_1"}}], "outputs": ["3 letters"]}
    (tmp_path / "calc.json").write_text(json.dumps([task]))
    kept, dropped = import_tasks(tmp_path / "calc.json", dom, backend=any_backend(), sandboxes=1)
    assert not kept and "is not in the gold results" in dropped[0].reason and "--computed-outputs" in dropped[0].reason
    kept, dropped = import_tasks(tmp_path / "calc.json", dom, backend=any_backend(), sandboxes=1,
                                 computed_outputs=True)
    assert not dropped and kept[0].expected_outputs == ["3 letters"] and kept[0].final_state_hash
