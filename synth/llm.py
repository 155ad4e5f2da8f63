"""An async client for OpenAI-compatible chat endpoints (a local vLLM server or a provider).

One :class:`LLMClient` per endpoint and model: it bounds the requests in flight, retries
transient failures (429, 5xx, timeouts, connection errors) with exponential backoff and
jitter, optionally caches responses on disk, counts tokens, and turns every failure into a
typed :class:`LLMError` whose message says what to do.

API keys are read from an environment variable or a file at client construction and go only
into the ``Authorization`` header: never into logs, exception messages, cache keys or cache
files (error text from a server is scrubbed of the key before it is shown).

Caching is keyed on everything that shapes the response (model, base URL, messages, tools,
tool choice, response format and all sampling parameters, seed included), so two identical
calls at temperature > 0 return the same cached sample: vary ``seed`` to draw new ones.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import time
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChatResult",
    "LLMBadResponse",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMRequestError",
    "LLMUnavailable",
    "Usage",
    "extract_json",
]

log = logging.getLogger(__name__)

_RETRY_STATUS = {408, 409, 425, 429}
_MAX_SHOWN = 500  # characters of server text / model output shown in an error


class LLMConfig(BaseModel):
    """Where and how to reach one model. Plain data: safe to log (it holds no key)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(description='e.g. "http://127.0.0.1:8000/v1" or a provider URL')
    model: str
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the key")
    api_key_file: str | None = Field(None, description="else a file whose first line is the key")
    max_concurrency: int = Field(8, ge=1)
    timeout_s: float = Field(120.0, gt=0, description="per attempt")
    max_retries: int = Field(4, ge=0, description="retries of transient failures (429/5xx/timeouts/connection)")
    cache_dir: str | None = Field(None, description="on-disk response cache; None = off")
    temperature: float = 0.7
    max_tokens: int = 512
    backoff_base_s: float = Field(0.5, ge=0, description="first retry waits up to this long (full jitter)")
    backoff_max_s: float = Field(20.0, ge=0, description="cap on one backoff wait")


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    cached: int = 0
    errors: int = 0

    def add(self, other: Usage) -> None:
        for f in type(self).model_fields:
            setattr(self, f, getattr(self, f) + getattr(other, f))


class ChatResult(BaseModel):
    message: dict[str, Any] = Field(
        description='{"role": "assistant", "content": str | None, "tool_calls": [{id, type: "function", '
        "function: {name, arguments (a JSON string)}}] (absent when none)}"
    )
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cached: bool = False
    latency_s: float = 0.0

    @property
    def text(self) -> str:
        return self.message.get("content") or ""

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return self.message.get("tool_calls") or []


class LLMError(Exception):
    """Any failure of an LLM call. The message says what to do and never holds an API key."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class LLMUnavailable(LLMError):
    """The endpoint could not answer: down, unreachable, overloaded or too slow (after retries)."""


class LLMRequestError(LLMError):
    """The endpoint refused the request (4xx other than 408/409/425/429): fix the request or the config."""


class LLMBadResponse(LLMError):
    """The endpoint answered, but not with what was asked for (no choices, invalid JSON, ...)."""

    def __init__(self, message: str, *, raw: str | None = None, status_code: int | None = None) -> None:
        super().__init__(message, status_code=status_code)
        self.raw = raw


def _truncate(text: str, limit: int = _MAX_SHOWN) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def extract_json(text: str) -> Any:
    """The whole text as JSON, else the first JSON object or array inside it (e.g. in a code fence
    or after some prose). Raises ValueError if there is none."""
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text, i)
                return value
            except ValueError:
                continue
    raise ValueError("no JSON object in the text")


def _schema_name(schema: dict[str, Any]) -> str:
    raw = str(schema.get("title") or "response")
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in raw)[:64]
    return name or "response"


def _response_format(fmt: dict[str, Any] | None) -> dict[str, Any] | None:
    """A JSON Schema becomes OpenAI's ``{"type": "json_schema", ...}``; an OpenAI response_format
    (type json_schema / json_object / text) passes through."""
    if fmt is None:
        return None
    if fmt.get("type") in ("json_schema", "json_object", "text") and (
        fmt["type"] != "json_schema" or "json_schema" in fmt
    ):
        return fmt
    return {"type": "json_schema", "json_schema": {"name": _schema_name(fmt), "schema": fmt}}


def _normalise_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies with tool-call arguments as JSON strings (what the OpenAI API expects)."""
    out = []
    for m in messages:
        if hasattr(m, "model_dump"):
            m = m.model_dump(exclude_none=True)
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                c = dict(c)
                fn = dict(c.get("function") or {})
                if not isinstance(fn.get("arguments", ""), str):
                    fn["arguments"] = json.dumps(fn["arguments"], ensure_ascii=False)
                c["function"] = fn
                c.setdefault("type", "function")
                calls.append(c)
            m["tool_calls"] = calls
        out.append(m)
    return out


def _tools(tools: list[Any] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    return [t.to_openai() if hasattr(t, "to_openai") else t for t in tools]


class LLMClient:
    """Async client for one OpenAI-compatible endpoint and model. Use as ``async with``."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.__key = self._read_key(config)
        self._client: Any = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._usage = Usage()
        self._cache = Path(config.cache_dir).expanduser() if config.cache_dir else None

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, base_url={self.config.base_url!r})"

    # -- key handling ---------------------------------------------------------------------

    @staticmethod
    def _read_key(config: LLMConfig) -> str:
        key = os.environ.get(config.api_key_env, "").strip() if config.api_key_env else ""
        if key:
            return key
        if config.api_key_file:
            path = Path(config.api_key_file).expanduser()
            try:
                lines = path.read_text().splitlines()
            except OSError as e:
                raise LLMError(
                    f"cannot read the API key file {path} ({e.strerror or type(e).__name__}): "
                    f"fix api_key_file or set ${config.api_key_env}"
                ) from None
            key = lines[0].strip() if lines else ""
            if not key:
                raise LLMError(f"the API key file {path} is empty: put the key on its first line")
            return key
        return "EMPTY"  # a local vLLM server takes any key

    def _scrub(self, text: str) -> str:
        key = self.__key
        if key and key != "EMPTY" and len(key) >= 4:
            text = text.replace(key, "[redacted]")
        return text

    # -- plumbing -------------------------------------------------------------------------

    def _openai(self) -> Any:
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                base_url=self.config.base_url,
                api_key=self.__key,
                timeout=self.config.timeout_s,
                max_retries=0,  # retries are ours: typed errors, jitter, one semaphore slot per attempt
            )
        return self._client

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.config.max_concurrency)
        return self._limiter

    @property
    def usage(self) -> Usage:
        """Running totals over this client's life (a copy)."""
        return self._usage.model_copy()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- cache ----------------------------------------------------------------------------

    def _cache_key(self, body: dict[str, Any]) -> str:
        payload = {"model": self.config.model, "base_url": self.config.base_url.rstrip("/"), **body}
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _cache_path(self, key: str) -> Path:
        assert self._cache is not None
        return self._cache / key[:2] / f"{key}.json"

    def _cache_get(self, key: str) -> dict[str, Any] | None:
        if self._cache is None:
            return None
        try:
            return json.loads(self._cache_path(key).read_text())["response"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _cache_put(self, key: str, response: dict[str, Any]) -> None:
        if self._cache is None:
            return
        path = self._cache_path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{random.getrandbits(32):08x}.tmp")
            tmp.write_text(json.dumps({"response": response}, ensure_ascii=False))
            os.replace(tmp, path)
        except OSError as e:  # a cache that cannot be written is not a failed call
            log.warning("could not write LLM cache entry %s: %s", path, e)

    # -- one request, with retries ----------------------------------------------------------

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cap = min(self.config.backoff_max_s, self.config.backoff_base_s * (2**attempt))
        wait = random.uniform(0, cap)
        if retry_after is not None and math.isfinite(retry_after):
            wait = max(wait, min(retry_after, self.config.backoff_max_s))
        return wait

    def _where(self) -> str:
        return f"{self.config.base_url.rstrip('/')}/chat/completions (model {self.config.model!r})"

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST one chat completion; returns the response as a dict. Retries transient failures."""
        import openai

        client = self._openai()
        attempts = self.config.max_retries + 1
        last = ""
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                async with self.limiter:
                    with anyio.fail_after(self.config.timeout_s):
                        resp = await client.chat.completions.create(**body)
                return resp.model_dump(mode="json", exclude_unset=False)
            except TimeoutError:
                last = f"no answer within {self.config.timeout_s:g} s"
            except openai.APITimeoutError:
                last = f"no answer within {self.config.timeout_s:g} s"
            except openai.APIConnectionError as e:
                cause = e.__cause__ or e
                last = f"cannot connect ({type(cause).__name__}: {self._scrub(str(cause)) or 'connection failed'})"
            except openai.APIStatusError as e:
                status = e.status_code
                detail = self._scrub(_truncate(self._status_detail(e)))
                if status in (401, 403):
                    raise LLMRequestError(
                        f"{self._where()} refused the credentials (HTTP {status}): put a valid key in "
                        f"${self.config.api_key_env}" + (f" or {self.config.api_key_file}" if self.config.api_key_file else "")
                        + " (the key is not shown)",
                        status_code=status,
                    ) from None
                if status in _RETRY_STATUS or status >= 500:
                    last = f"HTTP {status}: {detail}"
                    retry_after = self._retry_after(e)
                else:
                    hint = ""
                    if status == 404:
                        hint = " Check base_url (it usually ends in /v1) and that the model name is served there."
                    elif status in (400, 422):
                        hint = " Check the request: messages, tools, response_format and max_tokens vs. the context length."
                    raise LLMRequestError(
                        f"{self._where()} rejected the request (HTTP {status}): {detail}.{hint}", status_code=status
                    ) from None
            except openai.OpenAIError as e:  # anything else the SDK raises (e.g. an undecodable body)
                raise LLMBadResponse(
                    f"{self._where()} gave an unusable answer: {self._scrub(_truncate(str(e)))}"
                ) from None
            if attempt + 1 < attempts:
                wait = self._backoff(attempt, retry_after)
                log.debug("LLM call to %s failed (%s); retry %d/%d in %.2f s", self._where(), last, attempt + 1,
                          self.config.max_retries, wait)
                await anyio.sleep(wait)
        raise LLMUnavailable(
            f"{self._where()} failed after {attempts} attempt(s): {last}. Check that the server is up and "
            f"reachable (for a local vLLM: that it finished loading and /v1/models answers), or raise "
            f"timeout_s / max_retries / lower max_concurrency."
        )

    @staticmethod
    def _status_detail(e: Any) -> str:
        body = getattr(e, "body", None)
        if isinstance(body, dict):
            err = body.get("error", body)
            if isinstance(err, dict) and err.get("message"):
                return str(err["message"])
            if isinstance(body.get("message"), str):
                return body["message"]
        return str(getattr(e, "message", "") or e)

    @staticmethod
    def _retry_after(e: Any) -> float | None:
        try:
            value = e.response.headers.get("retry-after")
            return float(value) if value is not None else None
        except (AttributeError, TypeError, ValueError):
            return None

    # -- public API -----------------------------------------------------------------------

    def _body(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[Any] | None,
        tool_choice: Any,
        response_format: dict[str, Any] | None,
        temperature: float | None,
        max_tokens: int | None,
        seed: int | None,
        n: int,
        stop: list[str] | None,
        extra_body: dict[str, Any] | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": _normalise_messages(messages),
            "temperature": self.config.temperature if temperature is None else temperature,
            "max_tokens": self.config.max_tokens if max_tokens is None else max_tokens,
            "n": n,
        }
        optional = {
            "tools": _tools(tools),
            "tool_choice": tool_choice,
            "response_format": _response_format(response_format),
            "seed": seed,
            "stop": stop,
            "extra_body": extra_body,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        return body

    def _results(self, response: dict[str, Any], *, cached: bool, latency: float) -> list[ChatResult]:
        choices = response.get("choices") or []
        if not choices:
            raise LLMBadResponse(
                f"{self._where()} answered without choices: {_truncate(json.dumps(response)[:2000])}",
                raw=json.dumps(response)[:2000],
            )
        u = response.get("usage") or {}
        if cached:
            usage = Usage(cached=1)
        else:
            usage = Usage(prompt_tokens=int(u.get("prompt_tokens") or 0),
                          completion_tokens=int(u.get("completion_tokens") or 0), requests=1)
        results = []
        for i, choice in enumerate(sorted(choices, key=lambda c: c.get("index") or 0)):
            msg = choice.get("message") or {}
            message: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
            calls = []
            for j, c in enumerate(msg.get("tool_calls") or []):
                fn = c.get("function") or {}
                args = fn.get("arguments")
                calls.append({
                    "id": c.get("id") or f"call_{i}_{j}",
                    "type": "function",
                    "function": {"name": fn.get("name") or "",
                                 "arguments": args if isinstance(args, str) else json.dumps(args or {})},
                })
            if calls:
                message["tool_calls"] = calls
            if msg.get("reasoning_content"):
                message["reasoning_content"] = msg["reasoning_content"]
            results.append(ChatResult(
                message=message,
                finish_reason=choice.get("finish_reason"),
                usage=usage if i == 0 else Usage(),  # the request's usage rides on the first choice
                cached=cached,
                latency_s=latency,
            ))
        return results

    async def _call(self, body: dict[str, Any]) -> list[ChatResult]:
        key = self._cache_key(body)
        start = time.perf_counter()
        hit = self._cache_get(key)
        if hit is not None:
            results = self._results(hit, cached=True, latency=time.perf_counter() - start)
            self._usage.cached += 1
            log.debug("LLM cache hit %s (model %s)", key[:12], self.config.model)
            return results
        try:
            response = await self._post(body)
            results = self._results(response, cached=False, latency=time.perf_counter() - start)
        except LLMError:
            self._usage.errors += 1
            raise
        self._usage.add(results[0].usage)
        self._cache_put(key, response)
        log.debug("LLM call model=%s messages=%d n=%d latency=%.2fs tokens=%d+%d", self.config.model,
                  len(body["messages"]), body["n"], results[0].latency_s, results[0].usage.prompt_tokens,
                  results[0].usage.completion_tokens)
        return results

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[Any] | None = None,
        tool_choice: Any = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        n: int = 1,
        stop: list[str] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> ChatResult:
        """One chat completion. ``tools``: OpenAI tool dicts (or objects with ``to_openai()``);
        ``response_format``: a JSON Schema (sent as ``json_schema``) or an OpenAI response_format.
        For several samples of one prompt use :meth:`chat_many`."""
        if n != 1:
            raise ValueError("chat() returns one completion; use chat_many(messages, n=...) for several")
        body = self._body(messages, tools=tools, tool_choice=tool_choice, response_format=response_format,
                          temperature=temperature, max_tokens=max_tokens, seed=seed, n=1, stop=stop,
                          extra_body=extra_body)
        return (await self._call(body))[0]

    async def chat_many(self, messages: list[dict[str, Any]], *, n: int, **kw: Any) -> list[ChatResult]:
        """``n`` completions of one prompt, asked for in one request (``n=``); if the server returns
        fewer choices, the rest are asked for in further requests (with the seed bumped when one is
        given). The request's token usage is carried by the first result of each request."""
        if n < 1:
            raise ValueError("n must be at least 1")
        kw.pop("n", None)
        allowed = {"tools", "tool_choice", "response_format", "temperature", "max_tokens", "seed", "stop", "extra_body"}
        unknown = set(kw) - allowed
        if unknown:
            raise TypeError(f"chat_many() got unexpected keyword arguments: {sorted(unknown)}")
        results: list[ChatResult] = []
        rounds = 0
        while len(results) < n:
            seed = kw.get("seed")
            round_kw = dict(kw)
            if rounds and seed is not None:
                round_kw["seed"] = seed + rounds
            body = self._body(messages, n=n - len(results), **{k: round_kw.get(k) for k in allowed})
            got = await self._call(body)
            results.extend(got)
            rounds += 1
            if rounds >= n and len(results) < n:
                raise LLMBadResponse(f"{self._where()} returned {len(results)} of {n} completions")
        return results[:n]

    async def json(
        self,
        messages: list[dict[str, Any]],
        schema: dict[str, Any],
        *,
        attempts: int = 1,
        **kw: Any,
    ) -> Any:
        """A JSON value valid against ``schema``: asks for constrained output (``response_format``
        json_schema, which vLLM enforces with guided decoding), parses the text (the first JSON value
        in it if the server ignored the format) and validates it. ``attempts`` > 1 asks again on an
        invalid answer (seed bumped). Raises :class:`LLMBadResponse` with the raw text otherwise."""
        import jsonschema

        validator_cls = jsonschema.validators.validator_for(schema)
        validator_cls.check_schema(schema)
        validator = validator_cls(schema)
        kw.setdefault("response_format", schema)
        seed = kw.pop("seed", None)
        problem = ""
        text = ""
        for attempt in range(max(1, attempts)):
            s = seed if attempt == 0 else (seed or 0) + attempt
            result = await self.chat(messages, seed=s, **kw)
            text = result.text
            try:
                value = extract_json(text)
            except ValueError:
                problem = "the answer holds no JSON"
                continue
            errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
            if not errors:
                return value
            where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
            problem = f"the JSON does not match the schema at {where}: {_truncate(errors[0].message, 200)}"
        raise LLMBadResponse(
            f"{self._where()}: {problem} (finish_reason={result.finish_reason!r}; raise max_tokens if it is "
            f"'length'). Raw answer: {_truncate(text)!r}",
            raw=_truncate(text, 4000),
        )
