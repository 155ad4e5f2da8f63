"""Shared fixtures: which sandbox backends work here, and fresh sandboxes on each.

Set TOOLDOJO_REQUIRE_BACKENDS=docker,local (scripts/test.sh does) to turn a
missing backend into a failure instead of a skip.
"""

from __future__ import annotations

import functools
import os

import pytest

from sandboxes import SandboxConfig, open_sandbox


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@functools.cache
def backend_status(backend: str) -> tuple[bool, str]:
    from sandboxes import docker_backend, local_backend
    from sandboxes.image import image_exists, resolve_image

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


class VLLMServer:
    def __init__(self, base_url: str, model: str, model_dir, process, log_path, startup_s: float) -> None:
        self.base_url = base_url
        self.model = model
        self.model_dir = model_dir
        self.process = process
        self.log_path = log_path
        self.startup_s = startup_s

    def log_tail(self, lines: int = 60) -> str:
        return _tail(self.log_path, lines)

    def __repr__(self) -> str:
        return f"VLLMServer({self.base_url!r}, model={self.model!r}, pid={self.process.pid})"


def _tail(path, lines: int = 60) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"(no log: {e})"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child before exec
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _stop_group(proc, grace_s: float = 20.0) -> None:
    import signal
    import subprocess

    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # and any engine process left in the group
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    import importlib.util
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    if importlib.util.find_spec("vllm") is None:
        why = "vllm is not installed (pip install 'tooldojo[llm]')"
        if os.environ.get("TOOLDOJO_REQUIRE_VLLM") == "1":
            pytest.fail(f"vLLM is required here (TOOLDOJO_REQUIRE_VLLM=1) but {why}")
        pytest.skip(why)

    from rl.tiny import build_tiny_model

    model_dir = build_tiny_model()  # cached in ~/.cache/tooldojo/tiny-model (or $TOOLDOJO_CACHE)
    port = _free_port()
    log_path = tmp_path_factory.mktemp("vllm") / "server.log"
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        "--max-model-len", "2048", "--dtype", "float32",
        # Guided JSON without free whitespace: a random model would otherwise fill max_tokens with it.
        "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
    ]
    if os.environ.get("TOOLDOJO_VLLM_COMPILE") != "1":
        cmd.append("--enforce-eager")  # skips ~80 s of torch.compile warm-up on a cold cache
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),  # GiB
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env.pop("OPENAI_API_KEY", None)
    env.pop("VLLM_API_KEY", None)
    deadline_s = float(os.environ.get("TOOLDOJO_VLLM_STARTUP_S", "600"))
    url = f"http://127.0.0.1:{port}/v1"
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, preexec_fn=_die_with_parent)
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with code {proc.returncode} while starting; log {log_path}:\n{_tail(log_path)}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() - start > deadline_s:
                pytest.fail(f"vLLM did not answer {url}/models within {deadline_s:.0f} s; log {log_path}:\n{_tail(log_path)}")
            time.sleep(1.0)
        server = VLLMServer(url, "tiny", model_dir, proc, log_path, time.monotonic() - start)
        yield server
    finally:
        _stop_group(proc)
