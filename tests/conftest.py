"""Shared fixtures: which sandbox backends work here, and fresh sandboxes on each; and how the suite is
split over pytest-xdist workers (scripts/test.sh runs ``-n 2 --dist loadgroup``; see the end of this file).

Set TOOLDOJO_REQUIRE_BACKENDS=docker,local (scripts/test.sh does) to turn a
missing backend into a failure instead of a skip.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes import SandboxConfig, open_sandbox


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# The kubernetes backend joins the conformance suite only against a live cluster (TOOLDOJO_K8S_LIVE=1,
# with TOOLDOJO_K8S_IMAGE / _NAMESPACE / _KUBECONFIG...); CI here has none, see tests/k8s/test_live.py.
CONFORMANCE_BACKENDS = ["docker", "local"] + (["kubernetes"] if os.environ.get("TOOLDOJO_K8S_LIVE") == "1" else [])


@functools.cache
def backend_status(backend: str) -> tuple[bool, str]:
    from sandboxes import docker_backend, local_backend
    from sandboxes.image import image_exists, resolve_image

    if backend == "kubernetes":
        from sandboxes import kubernetes_backend
        from sandboxes.models import KubernetesOptions

        opts = KubernetesOptions.from_env()
        try:
            client = kubernetes_backend.client_for(opts)
            client.list("Pod", opts.namespace, label_selector=kubernetes_backend.SANDBOX_LABEL)
        except Exception as e:
            return False, f"no usable cluster: {e}"
        return True, f"{client.source}, namespace {opts.namespace}"
    if backend == "docker":
        ok, why = docker_backend.engine_available()
        if ok and not image_exists(resolve_image("tooldojo-sandbox")):
            return False, "sandbox image missing: run `dojo sandbox build-image`"
        return ok, why
    return local_backend.bwrap_available()


def require(backend: str) -> None:
    ok, why = backend_status(backend)
    if ok:
        return
    required = [b for b in os.environ.get("TOOLDOJO_REQUIRE_BACKENDS", "").split(",") if b]
    if backend in required:
        pytest.fail(f"backend {backend} is required here but does not work: {why}")
    pytest.skip(f"backend {backend} unavailable: {why}")


@contextlib.contextmanager
def silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers: (port, the
    connections it holds). A hung model or API server, for timeout tests."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1], held
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


def any_backend(prefer: tuple[str, ...] = ("local", "docker")) -> str:
    """The first working backend of ``prefer`` (a test that needs some sandbox, not a given one)."""
    for b in prefer:
        if backend_status(b)[0]:
            return b
    require(prefer[0])
    return prefer[0]


@pytest.fixture(params=["docker", "local"])
def backend(request) -> str:
    require(request.param)
    return request.param


@pytest.fixture
async def sb(backend):
    sandbox = await open_sandbox(SandboxConfig(backend=backend))
    try:
        yield sandbox
    finally:
        await sandbox.close()


# --- a real vLLM server (OpenAI-compatible) on the tiny offline model ------------------------
#
# Session-scoped: at most one vLLM start per test session, and only if a test asks for it.
# Set TOOLDOJO_REQUIRE_VLLM=1 (scripts/test.sh does) to turn a missing vLLM into a failure.
# TOOLDOJO_VLLM_COMPILE=1 serves with torch.compile (faster tokens, much slower cold start).


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        why = "vllm is not installed (pip install 'tooldojo[llm]')"
        if os.environ.get("TOOLDOJO_REQUIRE_VLLM") == "1":
            pytest.fail(f"vLLM is required here (TOOLDOJO_REQUIRE_VLLM=1) but {why}")
        pytest.skip(why)

    from rl.tiny import build_tiny_model
    from synth.vllm_server import VLLMStartError, start_vllm_server

    model_dir = build_tiny_model()  # cached in ~/.cache/tooldojo/tiny-model (or $TOOLDOJO_CACHE)
    try:
        server = start_vllm_server(model_dir, log_path=tmp_path_factory.mktemp("vllm") / "server.log",
                                   deadline_s=float(os.environ.get("TOOLDOJO_VLLM_STARTUP_S", "600")))
    except VLLMStartError as e:
        pytest.fail(str(e))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _vllm_server_survives(request):
    """A test during which the session's server died fails with the server's exit code and log;
    the server is restarted on the same port so the tests after it still have one.

    After the session's last test that uses the server (this process's: all of them run on one xdist
    worker, in the "vllm" group) the server is stopped, so it holds no memory or cores for the rest of
    the session; a test that asks for it after all is given a restarted one."""
    uses = "vllm_server" in request.fixturenames
    if uses:
        server = request.getfixturevalue("vllm_server")
        if getattr(server, "released", False):
            server.restart()
            server.released = False
    yield
    if not uses:
        return
    server = request.getfixturevalue("vllm_server")
    left = request.config.stash.get(VLLM_USERS_LEFT, None)
    if left is not None:
        left.discard(id(request.node))
    last = left is not None and not left
    code = server.exit_code()
    if code is None:
        if last:
            server.stop()
            server.released = True
        return
    tail = server.log_tail(120)
    if last:
        server.stop()
        server.released = True
        again = "no test after it needs it"
    else:
        try:
            server.restart()
            again = f"restarted it on {server.base_url} for the tests that follow"
        except Exception as e:  # noqa: BLE001 - reported below with the first death
            again = f"could not restart it: {e}"
    pytest.fail(f"the session's vLLM server died during this test (exit code {code}); {again}. "
                f"Its log ({server.log_path}) ends:\n{tail}")


@pytest.fixture(scope="session")
def synth16_docker():
    """16 replay-validated tasks from the real synthesizer (seed 7, every domain, docker, 4 sandboxes), made
    once per session for the files that each made exactly these (tests/synth/test_episode.py,
    tests/rewards/test_verifiable.py; issue 31). A file takes deep copies (``tasks16``)."""
    from synth.tasks import synthesize_tasks

    require("docker")
    result = synthesize_tasks(16, seed=7, backend="docker", sandboxes=4)
    assert len(result.tasks) == 16
    return result.tasks


def tasks16(made: list) -> list:
    """Deep copies of the session's 16 tasks: no file sees another's changes to them."""
    return [t.model_copy(deep=True) for t in made]


@pytest.fixture
def clean_registry(monkeypatch):
    """Domain folders registered by a test are forgotten after it (and none come from the environment)."""
    from toolzoo import domain_dirs

    monkeypatch.delenv(domain_dirs.ENV, raising=False)
    before = dict(domain_dirs._registered)
    yield
    domain_dirs._registered.clear()
    domain_dirs._registered.update(before)


# --- the split over pytest-xdist workers (issue 31) ---------------------------------------------
#
# scripts/test.sh runs `pytest -n 2 --dist loadgroup`: xdist hands each xdist_group, whole, to one
# worker, in the order the groups are collected. Left alone, loadgroup makes every test that has no
# group a unit of its own, so a file's module fixtures would be built on both workers. Here:
#
# * every test gets the group of its file (an explicit @pytest.mark.xdist_group is kept);
# * every file with a test that uses the session's vLLM server (`vllm_server`), and every test marked
#   `vllm_engine` (it starts an engine of its own: a training run with vLLM rollouts, an in-process
#   LLM), go to the one group VLLM_GROUP: one worker starts vLLM engines, one after the other (the
#   tests with their own engines first, then those of the session's server, which is stopped after
#   the last of them: see _vllm_server_survives). A marked test leaves its file alone only if it
#   uses none of the file's module fixtures (tests/test_test_layout.py checks);
# * files that use one of SHARED_SESSION_FIXTURES share a group (so that fixture is made once);
# * the groups go out longest first (FILE_MINUTES, the serial minutes of the slow files), so the two
#   workers finish together. xdist's own reorder (by test count) is switched off for that.
#
# Without xdist (TOOLDOJO_TEST_WORKERS=1, or plain pytest) the same order is used.
#
# xdist 3.8's loadgroup passes a test's group to the scheduler by appending "@group" to its node id,
# which pytest 9.2's structured node ids silently ignore (pytest-dev/pytest-xdist#1386: every test
# becomes a unit of its own). So the groups travel another way: each worker writes {node id: group}
# to a folder the controller gave it (workerinput), and GroupScheduling, the scheduler we hand xdist
# for --dist loadgroup (pytest_xdist_make_scheduler), reads that. It works the same once xdist's own suffix works again.

VLLM_GROUP = "vllm"
# session-scoped fixtures of this file that are worth making once per run: their users share a group
SHARED_SESSION_FIXTURES = {"vllm_server": VLLM_GROUP, "synth16_docker": "synth16_docker"}
# Serial minutes of the slowest files (bash scripts/test.sh's report, 2 cores, issue 31); any other file
# counts DEFAULT_FILE_MINUTES. Only the order of the groups depends on them.
FILE_MINUTES = {
    "tests/test_bench_studies.py": 5.9, "tests/rl/test_demo.py": 4.6, "tests/rl/test_distributed.py": 3.7,
    "tests/rl/test_corpus.py": 3.7, "tests/rl/test_train.py": 3.4, "tests/test_bench.py": 2.5,
    "tests/test_bench_train_multi.py": 2.0, "tests/test_byoe_e2e.py": 1.6, "tests/synth/test_bench_synth.py": 1.3,
    "tests/toolzoo/test_evolve.py": 1.1, "tests/evals/test_evals_vllm.py": 0.8, "tests/toolzoo/test_mcp.py": 0.8,
    "tests/toolzoo/test_mcp_foreign.py": 0.7, "tests/toolzoo/test_export.py": 0.7, "tests/rl/test_continuous.py": 0.7,
    "tests/test_reward_hacking.py": 0.7, "tests/rl/test_memory_settings.py": 0.5,
}
DEFAULT_FILE_MINUTES = 0.1
VLLM_USERS_LEFT = pytest.StashKey[set]()
GROUPS_DIR_KEY = pytest.StashKey[str]()


def file_of(item: pytest.Item) -> str:
    return item.path.relative_to(item.config.rootpath).as_posix()


def file_group(item: pytest.Item) -> str:
    """A file's own group, short (xdist writes it into every test id: tests/rl/test_x.py::test_y@rl/test_x)."""
    return file_of(item).removeprefix("tests/").removesuffix(".py")


def uses_vllm(item: pytest.Item) -> str | None:
    """Why ``item`` belongs to VLLM_GROUP ('server': it uses the session's server; 'engine': it starts
    its own), or None."""
    if "vllm_server" in getattr(item, "fixturenames", ()):
        return "server"
    if item.get_closest_marker("vllm_engine") is not None:
        return "engine"
    return None


def xdist_groups(items: list[pytest.Item]) -> dict[int, str]:
    """The group of each item (by id()): see the comment above."""
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        parent.setdefault(k, k)
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:  # a named group (vllm, a shared fixture) names the union; else the first file
            if ra == VLLM_GROUP or (rb != VLLM_GROUP and ra in SHARED_SESSION_FIXTURES.values()):
                parent[rb] = ra
            elif rb == VLLM_GROUP or rb in SHARED_SESSION_FIXTURES.values():
                parent[ra] = rb
            else:
                parent[rb] = ra

    for item in items:
        f = find(file_group(item))
        for name, group in SHARED_SESSION_FIXTURES.items():
            if name in getattr(item, "fixturenames", ()):
                union(group, f)
    out = {}
    for item in items:
        explicit = [m.args[0] if m.args else m.kwargs.get("name", "default")
                    for m in item.iter_markers("xdist_group")]
        if explicit:
            out[id(item)] = "_".join(sorted(map(str, set(explicit))))
        elif uses_vllm(item) == "engine":
            out[id(item)] = find(VLLM_GROUP)
        else:
            out[id(item)] = find(file_group(item))
    return out


def order_by_group(items: list[pytest.Item], groups: dict[int, str]) -> list[pytest.Item]:
    """Items group by group, the longest groups first (collection order among equals); inside a group
    collection order, except in VLLM_GROUP, where the tests with engines of their own go first."""
    per_file: dict[str, int] = {}
    for item in items:
        per_file[file_of(item)] = per_file.get(file_of(item), 0) + 1
    cost: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        g, f = groups[id(item)], file_of(item)
        cost[g] = cost.get(g, 0.0) + FILE_MINUTES.get(f, DEFAULT_FILE_MINUTES) / per_file[f]
        first.setdefault(g, i)
    pos = {id(item): i for i, item in enumerate(items)}

    def key(item: pytest.Item) -> tuple:
        g = groups[id(item)]
        own_engine_first = 0 if g == VLLM_GROUP and uses_vllm(item) == "engine" else 1
        return (-cost[g], first[g], own_engine_first, pos[id(item)])

    return sorted(items, key=key)


GROUPS_DIR = "tooldojo_xdist_groups"  # workerinput key: where the workers write their groups


def loadgroup_controller(config: pytest.Config) -> bool:
    return (not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist")
            and config.getvalue("dist") == "loadgroup")


def pytest_configure(config: pytest.Config) -> None:
    if loadgroup_controller(config):
        import tempfile

        # our order of the groups is the schedule; xdist would re-sort them by their number of tests
        config.option.loadscopereorder = False
        config.stash[GROUPS_DIR_KEY] = tempfile.mkdtemp(prefix="tooldojo-xdist-groups-")


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    d = config.stash.get(GROUPS_DIR_KEY, None)
    if d:
        shutil.rmtree(d, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # xdist, in the controller: before each worker starts
    node.workerinput[GROUPS_DIR] = node.config.stash[GROUPS_DIR_KEY]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") == "loadgroup":
        return _group_scheduling_class()(config, log)
    return None


def _group_scheduling_class():  # built on first use: xdist is a dev dependency only
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """xdist's loadscope with our groups for scopes (tests/conftest.py: the groups the workers wrote)."""

        groups: dict[str, str] | None = None

        def schedule(self) -> None:
            if self.groups is None:
                d = Path(self.config.stash[GROUPS_DIR_KEY])
                found = sorted(d.glob("*.json"))
                assert found, f"no worker wrote its xdist groups into {d}"
                self.groups = json.loads(found[0].read_text())
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None or nodeid not in self.groups:
                return nodeid.split("::", 1)[0]  # a file is a group
            return self.groups[nodeid]

    return GroupScheduling


@pytest.hookimpl(tryfirst=True)  # before xdist's hook, which writes each item's group into its id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = xdist_groups(items)
    loadgroup = getattr(config.option, "loadgroup", False)  # set by xdist for --dist loadgroup
    for item in items:
        if loadgroup and not any(True for _ in item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    items[:] = order_by_group(items, groups)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker tells the controller its collection
def pytest_collection_finish(session: pytest.Session) -> None:
    # the tests of this session that use the vLLM server: after the last, _vllm_server_survives stops it
    session.config.stash[VLLM_USERS_LEFT] = {id(item) for item in session.items
                                             if "vllm_server" in getattr(item, "fixturenames", ())}
    workerinput = getattr(session.config, "workerinput", {})
    if workerinput.get(GROUPS_DIR):
        groups = xdist_groups(session.items)
        d = Path(workerinput[GROUPS_DIR])
        tmp = d / f".{workerinput['workerid']}.tmp"
        tmp.write_text(json.dumps({item.nodeid: groups[id(item)] for item in session.items}))
        tmp.replace(d / f"{workerinput['workerid']}.json")
