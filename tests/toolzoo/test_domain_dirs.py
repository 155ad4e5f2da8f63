"""Bring your own environment: domain folders outside the package, loaded by path (issue 24)."""

from __future__ import annotations

import json

import anyio
import pytest
from typer.testing import CliRunner

from sandboxes import SandboxConfig, SandboxPool
from synth.task_models import Action, Rubric, Task, UserScenario
from synth.task_replay import check_task, replay_task
from synth.tasks import task_row
from tests.byoe_domains import write_domain, write_planted_domain
from tests.conftest import any_backend
from toolzoo import domain_dirs
from toolzoo.domain_dirs import initial_state
from toolzoo.domains import load_domain
from toolzoo.spec import SpecError
from toolzoo.testing import DomainHarness


def test_arguments_named_like_the_runtime_parameters_reach_the_tool(tmp_path, clean_registry):
    # tau-bench's modify_user_address has an argument named `state`; it used to collide with the world state.
    dom = domain_dirs.load_folder(write_domain(tmp_path, "collide_desk"))
    args = {"user_id": "u1", "city": "Reno", "state": "NV", "self": "back door", "args": "apt 2", "kwargs": "ring"}
    with DomainHarness(dom, config=SandboxConfig(backend=any_backend())) as h:
        out = h.ok("modify_user_address", args)
        assert out["address"] == {"city": "Reno", "state": "NV", "note": "back door", "line2": "apt 2",
                                  "instructions": "ring"}
        assert h.state()["users"]["u1"]["address"]["state"] == "NV"
        # still validated against the schema: a wrong type is the agent's malformed call
        assert h.err("modify_user_address", {**args, "state": 7}, kind="invalid_arguments")


@pytest.mark.parametrize("jsonl", [False, True])
def test_a_folder_loads_by_path_with_json_seed_data(tmp_path, clean_registry, jsonl):
    folder = write_domain(tmp_path, "json_desk", jsonl=jsonl, users=4)
    dom = load_domain(str(folder))
    assert dom.name == "json_desk" and dom.category == "ecommerce" and dom.policy.startswith("Change an address")
    assert [t.name for t in dom.tools] == ["get_user", "modify_user_address"]
    assert dom.tool("modify_user_address").effect == "write" and dom.tool("get_user").effect == "read"
    assert initial_state(dom)["users"]["u4"]["name"] == "User 4"
    assert load_domain("json_desk") is dom  # registered under its name by the load


def test_bad_folders_say_what_is_wrong(tmp_path, clean_registry):
    folder = write_domain(tmp_path, "bad_desk")
    (folder / "data.jsonl").write_text('{"table": "users", "id": "u1"}\nnot json\n')
    with pytest.raises(SpecError, match="exactly one of data.py, data.json, data.jsonl"):
        load_domain(str(folder))
    (folder / "data.json").unlink()
    with pytest.raises(SpecError, match=r"data.jsonl:2: not JSON"):
        load_domain(str(folder))
    builtin = tmp_path / "x" / "retail_orders"
    builtin.mkdir(parents=True)
    (builtin / "tools.py").write_text("")
    with pytest.raises(SpecError, match="reserved"):
        domain_dirs.register(builtin)
    with pytest.raises(SpecError, match="no domain 'nowhere_desk'.*--domain-dir"):
        load_domain("nowhere_desk")


def _task(domain: str) -> Task:
    return Task(id="t-1", domain=domain, seed=0, instruction="Move u2 to Reno, NV.", persona="",
                user_scenario=UserScenario(persona="", reason_for_call="move", task_instructions="Move u2."),
                gold_actions=[Action(name="modify_user_address",
                                     arguments={"user_id": "u2", "city": "Reno", "state": "NV"})],
                expected_outputs=["Reno"], rubric=Rubric(), tools=["get_user", "modify_user_address"],
                difficulty="easy")


def test_replay_and_task_rows_take_the_domain_object(tmp_path, clean_registry):
    dom = domain_dirs.load_folder(write_domain(tmp_path, "unregistered_desk"))  # never registered by name
    task = _task(dom.name)
    with pytest.raises(SpecError):
        task_row(task)
    row = task_row(task, dom)
    assert row["prompt"][0]["content"] == dom.policy
    assert {t["function"]["name"] for t in json.loads(row["tools"])} == {"get_user", "modify_user_address"}

    async def go():
        async with SandboxPool(SandboxConfig(backend=any_backend()), size=1) as pool:
            r = await replay_task(task, pool, dom)
            assert r.ok and r.outputs[0]["address"]["city"] == "Reno"
            ok, why = await check_task(task.model_copy(update={"final_state_hash": r.final_state_hash}), pool, dom)
            assert ok, why

    anyio.run(go)


def test_zoo_validate_and_synth_tasks_take_domain_folders(tmp_path, clean_registry):
    from tooldojo.cli import app

    write_domain(tmp_path / "mine", "cli_desk")
    runner = CliRunner()
    r = runner.invoke(app, ["zoo", "validate", str(tmp_path / "mine"), "-b", any_backend(), "--sandboxes", "1"])
    assert r.exit_code == 0, r.output
    assert "2/2" in r.output or "2 of 2" in r.output or "ok" in r.output.lower()
    r = runner.invoke(app, ["synth", "tasks", "--n", "3", "--out", str(tmp_path / "tasks"), "--domain-dir",
                            str(tmp_path / "mine"), "-b", any_backend(), "--sandboxes", "1"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in (tmp_path / "tasks" / "tasks.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and {x["domain"] for x in rows} == {"cli_desk"}
    r = runner.invoke(app, ["synth", "tasks", "--n", "1", "--out", str(tmp_path / "t2"), "--domain-dir",
                            str(tmp_path / "nope")])
    assert r.exit_code != 0 and "no such directory" in r.output


def test_zoo_validate_is_linear_in_a_big_domain_source(tmp_path, clean_registry, monkeypatch):
    # A 1.2 MB data.py of many top-level definitions (tau-bench's retail DB as Python source took
    # 140 s: ast.get_source_segment re-split the whole source once per definition).
    import ast

    from toolzoo.validate import _top_level_defs, validate_zoo_at

    folder = write_domain(tmp_path, "big_desk")
    (folder / "data.json").unlink()
    rows = "\n".join(f'BIG_ROW_{i} = {{"id": "r{i}", "name": "row {i} \u00fc", "tags": [1, 2, 3]}}'
                     for i in range(18000))
    (folder / "data.py").write_text(rows + "\n\ndef seed(rng):\n    return {'users': {'u1': {'name': 'A', "
                                    "'address': {'city': 'Austin', 'state': 'TX'}}}}\n")
    assert len((folder / "data.py").read_text().encode()) > 1_200_000
    defs = _top_level_defs((folder / "data.py").read_text())
    assert defs["BIG_ROW_17999"] == 'BIG_ROW_17999 = {"id": "r17999", "name": "row 17999 \u00fc", "tags": [1, 2, 3]}'
    assert defs["seed"].startswith("def seed(rng):") and defs["seed"].endswith("}}}}")

    def quadratic(*a, **k):
        raise AssertionError("ast.get_source_segment rescans the whole source per definition")

    monkeypatch.setattr(ast, "get_source_segment", quadratic)
    report = validate_zoo_at(str(folder), backend=any_backend(), sandboxes=1)
    assert report.ok, report.summary()
    assert {r.name for r in report.results} == {"get_user", "modify_user_address"}


def test_zoo_call_takes_a_domain_folder(tmp_path, clean_registry):
    """`dojo zoo call DIR TOOL` on an out-of-tree folder: a sandboxed call from the folder's JSON seed data,
    with an argument named `state`; an unknown tool is one line naming close ones."""
    from tooldojo.cli import app

    write_domain(tmp_path / "mine", "call_desk")
    runner = CliRunner()
    r = runner.invoke(app, ["zoo", "call", str(tmp_path / "mine" / "call_desk"), "get_user", "--args",
                            '{"user_id": "u2"}', "-b", any_backend()])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["name"] == "User 2"
    r = runner.invoke(app, ["zoo", "call", str(tmp_path / "mine"), "modify_user_address", "--args",
                            '{"user_id": "u1", "city": "Reno", "state": "NV"}', "-b", any_backend()])
    assert r.exit_code == 0 and json.loads(r.stdout)["address"]["state"] == "NV", r.output
    r = runner.invoke(app, ["zoo", "call", str(tmp_path / "mine"), "get_usr", "--args", "{}"])
    assert r.exit_code == 1 and "did you mean get_user" in r.output, r.output


def test_no_code_of_a_domain_folder_runs_on_the_host(tmp_path, clean_registry, monkeypatch):
    """Issue 30: __init__.py, tools.py and data.py each try to write a marker holding a secret from the
    environment. The commands read the folder without running it and run seed() and the tools in sandboxes,
    so no marker appears, while the tools still work there. (`train` and `eval run` on such a folder:
    tests/test_byoe_e2e.py.)"""
    from tooldojo.cli import app

    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("TOOLDOJO_TEST_SECRET", "s3cret")
    folder = write_planted_domain(tmp_path / "mine", markers)
    runner = CliRunner()
    backend = any_backend()
    runs = {
        "validate": ["zoo", "validate", str(folder), "-b", backend, "--sandboxes", "1"],
        "stats": ["zoo", "stats", str(folder), "--json"],
        "call": ["zoo", "call", str(folder), "get_user", "--args", '{"user_id": "u3"}', "-b", backend],
        "synth tasks": ["synth", "tasks", "--n", "2", "--out", str(tmp_path / "tasks"), "--domain-dir",
                        str(tmp_path / "mine"), "-b", backend, "--sandboxes", "1"],
    }
    for what, args in runs.items():
        r = runner.invoke(app, args)
        assert r.exit_code == 0, (what, r.output)
        assert sorted(p.name for p in markers.iterdir()) == [], f"`dojo {what}` ran the folder's code on the host"
    assert json.loads(runner.invoke(app, runs["call"]).stdout)["name"] == "User 3"  # seed() ran, in the sandbox
    assert len((tmp_path / "tasks" / "tasks.jsonl").read_text().splitlines()) == 2
    # the same file run on the host does leave the marker: the plant works, so its absence above means something
    exec(compile((folder / "tools.py").read_text().split("from toolzoo.dsl")[0], "plant", "exec"), {})
    assert (markers / "tools.py").read_text() == "s3cret"


def test_reading_tools_without_running_them_gives_what_importing_them_gives(tmp_path):
    """The AST reader (toolzoo.static_domain) against the introspection of the imported functions: every
    built-in domain, and a file of the annotation forms users write."""
    import importlib.util
    import inspect
    import textwrap

    from toolzoo.domains import HERE, domain_names
    from toolzoo.introspect import spec_from_function
    from toolzoo.static_domain import read_tools

    for name in domain_names():
        live = load_domain(name)
        assert read_tools(HERE / name, domain=name, category=live.category) == live.tools, name

    (tmp_path / "tools.py").write_text(textwrap.dedent('''
        import typing
        from typing import Annotated, Any, Dict, List, Literal, Optional, Union

        from toolzoo.dsl import tool

        LIMITS = {"minimum": 1, "maximum": 9}
        Count = Annotated[int, LIMITS]
        KINDS = ("a", "b")

        @tool(effect="write", errors={"nope": "no"})
        def set_things(state, n: Count, kind: "Literal['a', 'b']", tags: List[str], extra: Dict[str, Any],
                       note: Optional[str] = None, when: Union[int, str, None] = 3, *, flag: typing.Literal[1, 2] = 1,
                       any_: Any = None, pair: list[Annotated[int, {"minimum": 0}]] | None = None) -> dict:
            """Set things.

            Args:
                n: how many.
                kind: which kind.
                tags: labels.
                extra: more.
                note: a note.
                when: a time.
                flag: a flag.
                any_: anything.
                pair: two numbers.
            """
            return {}

        @tool
        def get_thing(db, k: str | int = "x") -> list[dict]:
            """Get a thing.

            Args:
                k: the key.
            """
            return []
    '''))
    spec = importlib.util.spec_from_file_location("static_vs_live_tools", tmp_path / "tools.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the test's own file: running it here is the reference
    fns = sorted((f for f in vars(module).values() if inspect.isfunction(f) and hasattr(f, "__tool__")),
                 key=lambda f: f.__code__.co_firstlineno)
    live = [spec_from_function(f, domain="forms", category="custom") for f in fns]
    assert [t.name for t in live] == ["set_things", "get_thing"]
    assert read_tools(tmp_path, domain="forms", category="custom") == live
