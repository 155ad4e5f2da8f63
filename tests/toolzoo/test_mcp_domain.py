"""MCP servers as first-class domains: import with state hooks, episodes, rewards (issue 24)."""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from typer.testing import CliRunner

from rewards.verifiable import ReverifyReward, WorldStateReward
from sandboxes import SandboxConfig, SandboxPool
from synth.episode import ScriptedAgent, run_episode
from synth.task_models import Action, Rubric, Task, UserScenario
from synth.usersim import ScriptedUser
from tests.byoe_domains import write_mcp_server
from tests.conftest import any_backend
from toolzoo.domains import load_domain


@pytest.fixture(autouse=True)
def _forget_domain_folders(clean_registry):
    yield


def _import(tmp_path, name, *hooks):
    from tooldojo.cli import app

    server = write_mcp_server(tmp_path, hook_extras=name == "dotted")
    r = CliRunner().invoke(app, ["zoo", "import-mcp", "--command", f"{sys.executable} {server}", "--out",
                                 str(tmp_path / "domains"), "--name", name, "--domain", *hooks])
    assert r.exit_code == 0, r.output
    return load_domain(str(tmp_path / "domains" / name))


def _task(domain: str, city: str) -> Task:
    return Task(id=f"{domain}-{city}", domain=domain, seed=0, instruction=f"Move u2 to {city}, NV.", persona="",
                user_scenario=UserScenario(persona="", reason_for_call="move", task_instructions="Move u2."),
                gold_actions=[Action(name="modify_user_address", arguments={"user_id": "u2", "city": city, "state": "NV"})],
                expected_outputs=[city], rubric=Rubric(), tools=["get_user", "modify_user_address"], difficulty="easy")


def test_an_mcp_domain_runs_episodes_and_earns_world_state_rewards(tmp_path):
    dom = _import(tmp_path, "ship_mcp", "--state-read", "get_state", "--state-reset", "tool:reset_state")
    assert [t.name for t in dom.tools] == ["get_user", "modify_user_address"]       # hooks are not offered
    assert dom.tool("get_user").effect == "read" and dom.tool("modify_user_address").effect == "write"
    assert dom.mcp_state is not None and dom.mcp_state.read == "tool:get_state"

    async def go():
        async with SandboxPool(SandboxConfig(backend=any_backend()), size=1) as pool:
            good, other = _task(dom.name, "Reno"), _task(dom.name, "Elko")
            traj = await run_episode(good, ScriptedAgent(good), ScriptedUser(), pool, domain=dom)
            assert traj.termination == "user_stop", traj.error
            assert traj.final_state["users"]["u2"]["address"] == {"city": "Reno", "state": "NV"}
            assert traj.tool_calls[0].state_hash == traj.final_state_hash != traj.initial_state_hash
            # a second episode starts from the reset state, not from the first one's
            traj2 = await run_episode(other, ScriptedAgent(other), ScriptedUser(), pool, domain=dom)
            assert traj2.final_state["users"]["u2"]["address"]["city"] == "Elko"
            ws = WorldStateReward(pool, domain=dom)
            assert (await ws.score(good, traj)).score == 1.0
            assert (await ws.score(good, traj2)).score == 0.0       # Elko is not the gold Reno
            assert (await ReverifyReward(pool, domain=dom).score(good, traj)).score == 1.0

    anyio.run(go)


def test_without_a_state_hook_world_state_rewards_abstain(tmp_path):
    dom = _import(tmp_path, "ship_nostate")
    assert dom.mcp_state is None
    assert {t.name for t in dom.tools} == {"get_user", "modify_user_address", "get_state", "reset_state"}

    async def go():
        async with SandboxPool(SandboxConfig(backend=any_backend()), size=1) as pool:
            task = _task(dom.name, "Reno")
            traj = await run_episode(task, ScriptedAgent(task), ScriptedUser(), pool, domain=dom)
            assert traj.termination == "user_stop" and traj.tool_calls[0].ok
            r = await WorldStateReward(pool, domain=dom).score(task, traj)
            assert r.score is None and "no state hook" in r.reason

    anyio.run(go)


def test_import_mcp_domain_errors(tmp_path):
    from tooldojo.cli import app

    server = write_mcp_server(tmp_path)
    base = ["zoo", "import-mcp", "--command", f"{sys.executable} {server}", "--out", str(tmp_path), "--name", "x"]
    r = CliRunner().invoke(app, [*base, "--state-read", "get_state"])
    assert r.exit_code != 0 and "go with --domain" in r.output
    r = CliRunner().invoke(app, [*base, "--domain", "--state-read", "read_everything"])
    assert r.exit_code != 0 and "no tool 'read_everything'" in r.output
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "mcp.json").write_text(json.dumps({"tools": [{"name": "t"}]}))
    with pytest.raises(ValueError, match="mcp.json"):
        load_domain(str(tmp_path / "bad"))


@pytest.mark.parametrize("hook,needle", [
    (["--state-read", "describe_state"], "returned text that is not JSON: 'three users, all in Austin'"),
    (["--state-read", "resource:state://nowhere"], "the state read hook resource:state://nowhere of MCP domain"),
    (["--state-read", ""], "--state-read is empty"),
    (["--state-read", "get_state", "--state-reset", ""], "--state-reset is empty"),
    (["--state-read", "get_state", "--name", "retail_orders"], "--name 'retail_orders' is a built-in domain's name"),
], ids=["import-mcp-hook-not-json", "import-mcp-missing-resource-hook", "import-mcp-empty-state-read",
        "import-mcp-empty-state-reset", "import-mcp-reserved-name"])
def test_import_mcp_refuses_state_hooks_that_cannot_work(tmp_path, hook, needle):
    """Issue 30 finding 5: each of these was accepted and failed (or silently abstained) in every episode."""
    from tooldojo.cli import app

    server = write_mcp_server(tmp_path, hook_extras=True)
    r = CliRunner().invoke(app, ["zoo", "import-mcp", "--command", f"{sys.executable} {server}", "--out",
                                 str(tmp_path / "domains"), "--name", "hooked", "--domain", *hook],
                           env={"COLUMNS": "300"})
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.exit_code == 1 and len(lines) == 1 and needle in lines[0], r.output
    assert not (tmp_path / "domains").exists()


@pytest.mark.parametrize("ref", ["db.dump", "db_dump", "tool:db.dump"])
def test_a_state_hook_with_a_dotted_server_name_works_by_either_name(tmp_path, ref):
    """Issue 30 finding 5: `db.dump` (model name `db_dump`) was accepted by one name and then called by it."""
    dom = _import(tmp_path, "dotted", "--state-read", ref)
    assert dom.mcp_state.read == "tool:db.dump"
    assert "db_dump" not in {t.name for t in dom.tools}  # a hook is hidden from the agent

    async def go():
        from toolzoo.mcp_domain import McpPool

        async with McpPool(dom).sandbox() as s:
            await s.load_domain(None)
            return (await s.snapshot()).state

    assert anyio.run(go)["users"]["u1"]["name"] == "User 1"
