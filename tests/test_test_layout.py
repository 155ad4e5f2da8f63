"""How the suite is split over pytest-xdist workers (tests/conftest.py, issue 31): every test has a group,
every test that starts vLLM (the session's server or an engine of its own) is in the one vLLM group, a
file's tests stay together, and the groups go out longest first."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Collect the whole suite in a fresh process as `-n 2 --dist loadgroup` would (the marks the grouping
# hook adds), and dump each test's group, what it uses, and the order.
DUMP = r"""
import json, sys
import pytest

class Dump:
    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config):
        config.option.loadgroup = True  # what xdist sets for --dist loadgroup

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        rows = []
        for item in session.items:
            defs = getattr(item, "_fixtureinfo", None)
            wide = sorted(name for name, fds in (defs.name2fixturedefs.items() if defs else ())
                          if fds and fds[-1].scope in ("module", "class", "package"))
            rows.append({"id": item.nodeid, "file": item.path.relative_to(session.config.rootpath).as_posix(),
                         "groups": [m.args[0] if m.args else m.kwargs.get("name") for m in item.iter_markers("xdist_group")],
                         "server": "vllm_server" in getattr(item, "fixturenames", ()),
                         "engine": item.get_closest_marker("vllm_engine") is not None,
                         "synth16": "synth16_docker" in getattr(item, "fixturenames", ()),
                         "wide": wide})
        print("DUMP " + json.dumps(rows))

sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"], plugins=[Dump()]))
"""


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    r = subprocess.run([sys.executable, "-c", DUMP], cwd=ROOT, capture_output=True, text=True, timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("DUMP ")), None)
    assert r.returncode == 0 and line, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(line[5:])


def test_every_test_has_one_group(rows):
    assert len(rows) > 1000
    bad = [r["id"] for r in rows if len(r["groups"]) != 1]
    assert not bad, f"tests without exactly one xdist_group: {bad[:10]}"


def test_every_vllm_test_is_in_the_one_vllm_group(rows):
    from tests.conftest import VLLM_GROUP

    vllm = [r for r in rows if r["server"] or r["engine"]]
    assert any(r["server"] for r in vllm) and any(r["engine"] for r in vllm)
    bad = [r["id"] for r in vllm if r["groups"] != [VLLM_GROUP]]
    assert not bad, f"tests that start vLLM outside the {VLLM_GROUP!r} group: {bad}"
    # a file that uses the session's server goes whole (its module fixtures are made once)
    server_files = {r["file"] for r in rows if r["server"]}
    bad = [r["id"] for r in rows if r["file"] in server_files and r["groups"] != [VLLM_GROUP]]
    assert not bad, f"tests of files that use vllm_server left outside the {VLLM_GROUP!r} group: {bad}"


def test_a_file_stays_in_one_group_but_for_vllm_engine_tests_without_module_fixtures(rows):
    from tests.conftest import VLLM_GROUP

    per_file: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if not (r["engine"] and r["groups"] == [VLLM_GROUP]):
            per_file[r["file"]].update(r["groups"])
    split = {f: g for f, g in per_file.items() if len(g) > 1}
    assert not split, f"files whose tests are in several groups: {split}"
    # a marked test that left its file must not share the file's module fixtures (they would be made twice)
    moved = [r for r in rows if r["engine"] and per_file.get(r["file"], {VLLM_GROUP}) != {VLLM_GROUP}]
    bad = [(r["id"], r["wide"]) for r in moved if r["wide"]]
    assert not bad, f"vllm_engine tests split from their file but using its module fixtures: {bad}"


def test_shared_session_fixtures_are_made_once(rows):
    groups = {g for r in rows if r["synth16"] for g in r["groups"]}
    assert len(groups) == 1, groups


def test_groups_run_longest_first_and_vllm_engines_before_the_server(rows):
    from tests.conftest import VLLM_GROUP

    order = [r["groups"][0] for r in rows]
    seen: list[str] = []
    for g in order:
        if not seen or seen[-1] != g:
            assert g not in seen, f"group {g!r} is not contiguous in the run order"
            seen.append(g)
    assert seen[0] == VLLM_GROUP  # the longest: one worker takes it first, the other the rest
    vllm = [r for r in rows if r["groups"] == [VLLM_GROUP]]
    kinds = [r["engine"] for r in vllm]
    assert kinds == sorted(kinds, reverse=True), "a test with its own engine runs after the session's server started"


def test_no_test_asks_for_vllm_server_behind_the_grouping_hooks_back():
    """getfixturevalue("vllm_server") is invisible to the grouping (fixturenames): take it as a parameter."""
    bad = [p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("*.py")
           if re.search(r"getfixturevalue\(\s*[\"']vllm_server", p.read_text())
           and p.name not in ("conftest.py", "test_test_layout.py")]
    assert not bad, bad


def test_files_that_start_vllm_are_marked(rows):
    """A file that turns vLLM on or builds an engine itself has a test in the vLLM group (a heuristic:
    `rollout.use_vllm=true`, `from vllm import LLM`, bench/rl_speed.py; runs that take the default
    use_vllm, like the demo's, are marked by hand)."""
    from tests.conftest import VLLM_GROUP

    in_group = {r["file"] for r in rows if r["groups"] == [VLLM_GROUP]}
    starts = re.compile(r"use_vllm=true|from vllm import LLM|rl_speed\.py")
    only_parse = {"tests/rl/test_config.py"}  # reads configs that say use_vllm=true, starts nothing
    bad = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "tests").rglob("test_*.py"))
           if starts.search(p.read_text()) and p.relative_to(ROOT).as_posix() not in in_group
           and p.name != "test_test_layout.py" and p.relative_to(ROOT).as_posix() not in only_parse]
    assert not bad, f"files that seem to start vLLM but have no test in the {VLLM_GROUP!r} group: {bad}"


def test_scripts_test_sh_runs_two_workers_by_group():
    sh = (ROOT / "scripts" / "test.sh").read_text()
    assert "--dist loadgroup" in sh and "TOOLDOJO_TEST_WORKERS" in sh


def test_two_workers_keep_each_file_together():
    """A real `-n 2 --dist loadgroup` run: each file's tests on one worker. (xdist 3.8's own loadgroup
    does not group on pytest 9.2, pytest-dev/pytest-xdist#1386; tests/conftest.py's scheduler does.)"""
    pytest.importorskip("xdist")
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                        "-v", "tests/test_test_times.py", "tests/synth/test_usersim.py", "-k", "not against_vllm"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for m in re.finditer(r"\[(gw\d)\] \[ *\d+%\] PASSED (tests/[\w/]+\.py)::", r.stdout):
        workers[m.group(2)].add(m.group(1))
    assert set(workers) == {"tests/test_test_times.py", "tests/synth/test_usersim.py"}, r.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
