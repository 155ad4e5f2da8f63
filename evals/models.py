"""The models a suite runs against.

``--model`` takes, optionally prefixed with ``LABEL=`` (the name in reports and history):

* ``MODEL@URL``: an OpenAI-compatible endpoint, e.g. ``qwen@http://127.0.0.1:8000/v1`` (the key,
  if any, from ``$OPENAI_API_KEY``);
* ``PROVIDER:MODEL``: a known provider (``openai``, ``openrouter``, ``together``, ``groq``,
  ``deepseek``, ``fireworks``, ``mistral``), its key from the provider's usual variable;
* a local path: a model folder (``config.json``), a ``dojo train`` run directory (its ``final/``,
  else its latest ``checkpoint-N``): served with ``vllm serve`` (synth.vllm_server) on 127.0.0.1
  for the run, stopped afterwards.

In Python, :class:`FunctionModel` wraps a callable (known-good answers, a scripted agent).

Every model is used as an *agent* (synth.episode's ``act(messages, tools)``): a chat case is one
``act`` without tools, a tool episode is synth.episode.run_episode. Endpoint calls go through
synth.llm.LLMClient with its on-disk response cache: an unchanged re-run makes no requests.
The cache key of a local checkpoint is the checkpoint's content, not the port it happens to be
served on.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from evals.context import EvalError
from synth.llm import LLMClient, LLMConfig

if TYPE_CHECKING:
    from synth.episode import Agent
    from synth.tasks import Task

log = logging.getLogger("tooldojo.evals")

__all__ = ["EndpointModel", "EvalModel", "FunctionModel", "LocalModel", "PROVIDERS", "parse_model"]

PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "together": ("https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "deepseek": ("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "fireworks": ("https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY"),
    "mistral": ("https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
}
_LABEL = re.compile(r"^[A-Za-z0-9_.\-]+$")


def slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.\-]+", "-", text).strip("-.")
    return s[:80] or "model"


class EvalModel:
    """A model under evaluation. ``start``/``stop`` bracket a run; ``agent`` makes one case's agent."""

    kind = "model"

    def __init__(self, label: str, spec: str | None = None) -> None:
        self.label = label
        self.spec = spec or label

    async def start(self, *, cache_dir: Path | None, log_dir: Path | None = None, **client: Any) -> None:
        """Get ready for a run (start a server, open a client)."""

    async def stop(self) -> None:
        """Undo ``start``."""

    def agent(self, *, task: Task | None, seed: int | None, temperature: float | None,
              max_tokens: int | None) -> Agent:
        raise NotImplementedError

    def usage(self) -> dict[str, int]:
        return {}

    def describe(self) -> dict[str, Any]:
        return {"label": self.label, "spec": self.spec, "kind": self.kind}


class _EvalClient(LLMClient):
    """LLMClient whose cache key names the model by ``identity`` (stable across ports/restarts)."""

    def __init__(self, config: LLMConfig, identity: str | None = None) -> None:
        super().__init__(config)
        self.identity = identity

    def _cache_key(self, body: dict[str, Any]) -> str:
        if self.identity is None:
            return super()._cache_key(body)
        import json

        blob = json.dumps({"model_identity": self.identity, **body}, sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


class EndpointModel(EvalModel):
    """An OpenAI-compatible endpoint, through synth.llm.LLMClient (retries, typed errors, cache)."""

    kind = "endpoint"

    def __init__(self, label: str, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
                 spec: str | None = None, identity: str | None = None) -> None:
        super().__init__(label, spec)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.identity = identity
        self.client: _EvalClient | None = None
        self._usage: dict[str, int] = {}

    async def start(self, *, cache_dir: Path | None, log_dir: Path | None = None, max_retries: int = 2,
                    timeout_s: float = 120.0, max_concurrency: int = 8, **_: Any) -> None:
        cfg = LLMConfig(base_url=self.base_url, model=self.model, api_key_env=self.api_key_env,
                        cache_dir=str(cache_dir) if cache_dir else None, max_retries=max_retries,
                        timeout_s=timeout_s, max_concurrency=max_concurrency, backoff_base_s=0.25, backoff_max_s=4.0)
        self.client = _EvalClient(cfg, self.identity)

    async def stop(self) -> None:
        if self.client is not None:
            self._usage = self.client.usage.model_dump()
            await self.client.aclose()
            self.client = None

    def agent(self, *, task: Task | None, seed: int | None, temperature: float | None,
              max_tokens: int | None) -> Agent:
        from synth.episode import LLMAgent

        if self.client is None:
            raise EvalError(f"model {self.label} is not started")
        sampling = {k: v for k, v in {"seed": seed, "temperature": temperature, "max_tokens": max_tokens}.items()
                    if v is not None}
        return LLMAgent(self.client, **sampling)

    def usage(self) -> dict[str, int]:
        return self.client.usage.model_dump() if self.client is not None else dict(self._usage)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url, "model": self.model}


def resolve_checkpoint(path: Path) -> Path:
    """The model folder to serve for ``path``: itself, a run's ``final/``, or its latest ``checkpoint-N``."""
    path = path.expanduser().resolve()
    if (path / "config.json").is_file():
        return path
    if (path / "final" / "config.json").is_file():
        return path / "final"
    ckpts = sorted((int(m.group(1)), p) for p in path.glob("checkpoint-*")
                   if (m := re.fullmatch(r"checkpoint-(\d+)", p.name)) and (p / "config.json").is_file())
    if ckpts:
        return ckpts[-1][1]
    raise EvalError(f"{path} holds no model: expected config.json in it, in final/, or in a checkpoint-N folder")


def checkpoint_identity(path: Path) -> str:
    """Content identity of a model folder: file names, sizes and bytes of the config and tokenizer
    files, sizes and mtimes of the weights (a re-trained checkpoint in the same folder is new)."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.iterdir() if p.is_file()):
        st = f.stat()
        h.update(f.name.encode() + b"\0" + str(st.st_size).encode())
        if f.suffix in (".json", ".jinja", ".txt", ".model") and st.st_size < 50_000_000:
            h.update(hashlib.sha256(f.read_bytes()).digest())
        else:
            h.update(str(st.st_mtime_ns).encode())
    return "local:" + h.hexdigest()[:16]


class LocalModel(EndpointModel):
    """A local checkpoint, served by vLLM (synth.vllm_server) for the run and stopped afterwards."""

    kind = "local"

    def __init__(self, label: str, path: Path, *, spec: str | None = None) -> None:
        self.path = resolve_checkpoint(path)
        super().__init__(label, "http://127.0.0.1:0/v1", label, spec=spec, identity=checkpoint_identity(self.path))
        self.server: Any = None
        self.start_error: str | None = None

    async def start(self, *, cache_dir: Path | None, log_dir: Path | None = None, **client: Any) -> None:
        from synth import vllm_server

        log_path = (log_dir or Path(".")) / f"vllm-{slug(self.label)}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.server = await anyio.to_thread.run_sync(
                lambda: vllm_server.start_vllm_server(self.path, log_path=log_path, served_name=self.label))
        except Exception as e:  # noqa: BLE001 - every case then fails with this reason, the run goes on
            self.start_error = f"could not serve {self.path} with vLLM: {' '.join(str(e).split())[:600]}"
            log.warning("%s", self.start_error)
            self.base_url = "http://127.0.0.1:9/v1"
        else:
            self.base_url = self.server.base_url
        await super().start(cache_dir=cache_dir, log_dir=log_dir, **client)

    async def stop(self) -> None:
        await super().stop()
        server, self.server = self.server, None
        if server is not None:
            await anyio.to_thread.run_sync(server.stop)

    def agent(self, **kw: Any) -> Agent:
        if self.start_error:
            raise EvalError(self.start_error)
        return super().agent(**kw)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "path": str(self.path), "identity": self.identity}


class FunctionModel(EvalModel):
    """A Python callable as the model: ``respond(messages, tools, task)`` returns the assistant's text or
    message dict (sync or async; it also gets ``seed=`` when it takes a ``seed`` argument); or
    ``agent_factory(task)`` returns a synth.episode agent (e.g. ``ScriptedAgent``)."""

    kind = "function"

    def __init__(self, label: str, respond: Callable[..., Any] | None = None, *,
                 agent_factory: Callable[[Task | None], Agent] | None = None) -> None:
        if (respond is None) == (agent_factory is None):
            raise ValueError("give FunctionModel either respond or agent_factory")
        super().__init__(label, f"function:{label}")
        self.respond = respond
        self.agent_factory = agent_factory
        self.calls = 0

    def agent(self, *, task: Task | None, seed: int | None, temperature: float | None,
              max_tokens: int | None) -> Agent:
        if self.agent_factory is not None:
            return self.agent_factory(task)
        model = self
        extra = {"seed": seed} if "seed" in inspect.signature(self.respond).parameters else {}

        class _Agent:
            async def act(self, messages: list[dict], tools: list[dict]) -> dict:
                model.calls += 1
                out = model.respond(messages, tools, task, **extra)
                if inspect.isawaitable(out):
                    out = await out
                return out if isinstance(out, dict) else {"role": "assistant", "content": str(out)}

        return _Agent()

    def usage(self) -> dict[str, int]:
        return {"requests": self.calls}


def parse_model(spec: str) -> EvalModel:
    """A model from a ``--model`` string (see the module doc)."""
    raw = spec.strip()
    label = None
    head, sep, rest = raw.partition("=")
    if sep and _LABEL.match(head) and rest:
        label, raw = head, rest
    path = Path(raw).expanduser()
    if "://" not in raw and path.exists():
        if not path.is_dir():
            raise EvalError(f"{raw} is a file; a local model is a folder (with config.json, or a `dojo train` run)")
        ckpt = resolve_checkpoint(path)
        name = label or slug(ckpt.parent.name if ckpt.name in ("final",) or ckpt.name.startswith("checkpoint-")
                             else ckpt.name)
        if ckpt.name.startswith("checkpoint-") and not label:
            name = f"{name}-{ckpt.name}"
        return LocalModel(name, ckpt, spec=spec)
    if "@" in raw:
        model, _, url = raw.rpartition("@")
        if model and url.startswith(("http://", "https://")):
            return EndpointModel(label or slug(model), url, model, spec=spec)
    provider, sep, model = raw.partition(":")
    if sep and provider in PROVIDERS and model and "//" not in model:
        base, key_env = PROVIDERS[provider]
        return EndpointModel(label or slug(f"{provider}-{model}"), base, model, api_key_env=key_env, spec=spec)
    raise EvalError(f"cannot read --model {spec!r}: use MODEL@URL (e.g. qwen@http://127.0.0.1:8000/v1), "
                    f"PROVIDER:MODEL ({', '.join(PROVIDERS)}), or a local model folder / `dojo train` run dir")
