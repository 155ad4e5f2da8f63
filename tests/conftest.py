"""Shared fixtures: which sandbox backends work here, and fresh sandboxes on each.

Set TOOLDOJO_REQUIRE_BACKENDS=docker,local (scripts/test.sh does) to turn a
missing backend into a failure instead of a skip.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
from collections.abc import Iterator

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
    the server is restarted on the same port so the tests after it still have one."""
    yield
    if "vllm_server" not in request.fixturenames:
        return
    server = request.getfixturevalue("vllm_server")
    code = server.exit_code()
    if code is None:
        return
    tail = server.log_tail(120)
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
