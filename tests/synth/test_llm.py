"""synth.llm: the async OpenAI-compatible client.

(a) against a local test double of an OpenAI endpoint (http.server in a thread): retries,
timeouts, the concurrency limit, the cache, usage accounting, and that the API key never leaks;
(b) against a real vLLM server on the tiny offline model (the session's one `vllm_server`).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import anyio
import jsonschema
import pytest

from tests.openai_server import ChatServer
from synth.llm import (
    ChatResult,
    LLMBadResponse,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMRequestError,
    LLMUnavailable,
    Usage,
    extract_json,
)

FAKE_KEY = "sk-tooldojo-LEAKCHECK-7f3a9c1e5b"
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_quote",
        "description": "Get the latest quote for a ticker symbol.",
        "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]},
    },
}]
USER = [{"role": "user", "content": "hello"}]


# --- a tiny OpenAI chat-completions double --------------------------------------------------


class FakeOpenAI(ChatServer):
    """POST /v1/chat/completions. ``script`` holds one action per coming request, then "ok":
    an int (answer with that HTTP status), ("sleep", s) (sleep, then answer ok), "ok"."""

    def __init__(self) -> None:
        self.script: list[Any] = []
        self.delay_s = 0.0
        self.reply_text: str | None = None
        self.reply_tool_calls: list[dict[str, Any]] | None = None
        self.ignore_n = False
        self.error_message = "boom"
        super().__init__()

    def handle(self, body: dict[str, Any]) -> tuple[Any, ...]:
        with self._lock:
            action = self.script.pop(0) if self.script else "ok"
        if isinstance(action, tuple) and action[0] == "sleep":
            time.sleep(action[1])
        elif self.delay_s:
            time.sleep(self.delay_s)
        if isinstance(action, int):
            payload = {"error": {"message": self.error_message, "type": "test", "code": action}}
            return action, payload, ({"retry-after": "0"} if action == 429 else {})
        return 200, self.completion(body)

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        n = 1 if self.ignore_n else int(body.get("n") or 1)
        last = body["messages"][-1].get("content") or ""
        choices = []
        for i in range(n):
            msg: dict[str, Any] = {"role": "assistant", "content": self.reply_text if self.reply_text is not None else f"echo {i}: {last}"}
            if self.reply_tool_calls:
                msg["content"] = None
                msg["tool_calls"] = self.reply_tool_calls
            choices.append({"index": i, "message": msg, "finish_reason": "tool_calls" if self.reply_tool_calls else "stop"})
        return {
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": choices, "usage": {"prompt_tokens": 7, "completion_tokens": 3 * n, "total_tokens": 7 + 3 * n},
        }


@pytest.fixture
def fake():
    server = FakeOpenAI()
    try:
        yield server
    finally:
        server.close()


def config(fake: FakeOpenAI, **kw: Any) -> LLMConfig:
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return LLMConfig(base_url=fake.base_url, model="test-model", api_key_env="TOOLDOJO_TEST_NO_KEY", **kw)


# --- (a) unit level -----------------------------------------------------------------------


async def test_plain_chat_shape_and_usage(fake):
    async with LLMClient(config(fake)) as llm:
        r = await llm.chat(USER)
    assert isinstance(r, ChatResult)
    assert r.message == {"role": "assistant", "content": "echo 0: hello"}
    assert r.finish_reason == "stop" and not r.cached and r.latency_s > 0
    assert r.usage == Usage(prompt_tokens=7, completion_tokens=3, requests=1)
    assert llm.usage == Usage(prompt_tokens=7, completion_tokens=3, requests=1)
    body = fake.requests[0]
    assert body["model"] == "test-model" and body["temperature"] == 0.7 and body["max_tokens"] == 512
    assert fake.auth_headers[0] == "Bearer EMPTY"  # no key configured: a local vLLM takes any


async def test_retries_500_and_429_then_succeeds(fake):
    fake.script = [500, 429, 503]
    async with LLMClient(config(fake, max_retries=3)) as llm:
        r = await llm.chat(USER)
    assert r.text == "echo 0: hello"
    assert len(fake.requests) == 4
    assert llm.usage.requests == 1 and llm.usage.errors == 0


async def test_gives_up_after_max_retries(fake):
    fake.script = [500] * 10
    async with LLMClient(config(fake, max_retries=2)) as llm:
        with pytest.raises(LLMUnavailable, match=r"after 3 attempt\(s\): HTTP 500"):
            await llm.chat(USER)
        assert llm.usage.errors == 1 and llm.usage.requests == 0
    assert len(fake.requests) == 3


async def test_client_errors_are_not_retried(fake):
    fake.script = [400]
    async with LLMClient(config(fake, max_retries=3)) as llm:
        with pytest.raises(LLMRequestError, match="HTTP 400") as info:
            await llm.chat(USER)
    assert info.value.status_code == 400 and len(fake.requests) == 1
    assert not isinstance(info.value, LLMUnavailable) and isinstance(info.value, LLMError)


async def test_timeout_becomes_llm_unavailable(fake):
    fake.script = [("sleep", 3.0), ("sleep", 3.0)]
    async with LLMClient(config(fake, timeout_s=0.3, max_retries=1)) as llm:
        t0 = time.perf_counter()
        with pytest.raises(LLMUnavailable, match="no answer within 0.3 s"):
            await llm.chat(USER)
        assert time.perf_counter() - t0 < 2.5
    assert len(fake.requests) == 2


async def test_connection_refused_becomes_llm_unavailable():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key_env="TOOLDOJO_TEST_NO_KEY",
                    max_retries=1, backoff_base_s=0.01)
    async with LLMClient(cfg) as llm:
        with pytest.raises(LLMUnavailable, match="cannot connect"):
            await llm.chat(USER)


async def test_concurrency_limit_is_honoured(fake):
    fake.delay_s = 0.25
    async with LLMClient(config(fake, max_concurrency=2)) as llm:
        results: list[ChatResult] = []

        async def one(i: int) -> None:
            results.append(await llm.chat([{"role": "user", "content": f"q{i}"}]))

        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(one, i)
    assert len(results) == 6 and len(fake.requests) == 6
    assert fake.max_in_flight == 2
    assert llm.usage.requests == 6 and llm.usage.prompt_tokens == 42


async def test_cache_hit_and_misses(fake, tmp_path):
    cfg = config(fake, cache_dir=str(tmp_path / "cache"))
    async with LLMClient(cfg) as llm:
        first = await llm.chat(USER, seed=1)
        second = await llm.chat(USER, seed=1)
        assert len(fake.requests) == 1, "the second identical call must not reach the server"
        assert second.cached and not first.cached and second.message == first.message
        assert second.usage == Usage(cached=1)
        for variant in ({"seed": 2}, {"seed": 1, "temperature": 0.1}, {"seed": 1, "max_tokens": 5},
                        {"seed": 1, "stop": ["x"]}, {"seed": 1, "extra_body": {"top_k": 3}},
                        {"seed": 1, "tools": TOOLS}, {"seed": 1, "response_format": {"type": "object"}}):
            r = await llm.chat(USER, **variant)
            assert not r.cached, variant
        assert len(fake.requests) == 8
        assert llm.usage == Usage(prompt_tokens=56, completion_tokens=24, requests=8, cached=1)
    # A new client (same model and endpoint) reads the same on-disk cache.
    async with LLMClient(cfg) as again:
        assert (await again.chat(USER, seed=1)).cached
    # ...another model does not.
    async with LLMClient(cfg.model_copy(update={"model": "other"})) as other:
        assert not (await other.chat(USER, seed=1)).cached
    assert len(fake.requests) == 9
    assert {p.name for p in (tmp_path / "cache").rglob("*.tmp")} == set()


async def test_chat_many_uses_n_and_falls_back_when_the_server_ignores_it(fake, tmp_path):
    async with LLMClient(config(fake)) as llm:
        rs = await llm.chat_many(USER, n=3, seed=5)
        assert [r.text for r in rs] == ["echo 0: hello", "echo 1: hello", "echo 2: hello"]
        assert len(fake.requests) == 1 and fake.requests[0]["n"] == 3
        assert sum(r.usage.requests for r in rs) == 1 and llm.usage.completion_tokens == 9
        fake.ignore_n = True
        rs = await llm.chat_many(USER, n=3, seed=5, temperature=1.0)
        assert len(rs) == 3 and len(fake.requests) == 4
        assert [b["seed"] for b in fake.requests[1:]] == [5, 6, 7]
        with pytest.raises(ValueError, match="chat_many"):
            await llm.chat(USER, n=2)


async def test_tool_calls_are_normalised_both_ways(fake):
    fake.reply_tool_calls = [{"id": "call_1", "type": "function",
                              "function": {"name": "get_quote", "arguments": "{\"symbol\": \"ACME\"}"}}]
    history = [
        {"role": "user", "content": "quote ACME"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c0", "function": {"name": "get_quote", "arguments": {"symbol": "ACME"}}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "{\"price\": 3}"},
    ]
    async with LLMClient(config(fake)) as llm:
        r = await llm.chat(history, tools=TOOLS, tool_choice="auto")
    assert r.message == {"role": "assistant", "content": None, "tool_calls": fake.reply_tool_calls}
    assert r.tool_calls[0]["function"]["name"] == "get_quote" and r.finish_reason == "tool_calls"
    sent = fake.requests[0]
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "auto"
    call = sent["messages"][1]["tool_calls"][0]
    assert call["type"] == "function" and json.loads(call["function"]["arguments"]) == {"symbol": "ACME"}
    assert history[1]["tool_calls"][0]["function"]["arguments"] == {"symbol": "ACME"}  # caller's copy untouched


async def test_json_sends_the_schema_and_parses_loose_text(fake):
    schema = {"title": "Answer", "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    fake.reply_text = 'Sure! Here it is:\n```json\n{"a": 1}\n```'
    async with LLMClient(config(fake)) as llm:
        assert await llm.json(USER, schema) == {"a": 1}
        sent = fake.requests[0]["response_format"]
        assert sent == {"type": "json_schema", "json_schema": {"name": "Answer", "schema": schema}}

        fake.reply_text = '{"a": "not a number"}'
        with pytest.raises(LLMBadResponse, match="does not match the schema at a") as info:
            await llm.json(USER, schema, seed=3)
        assert "not a number" in str(info.value) and info.value.raw == '{"a": "not a number"}'

        fake.reply_text = "x" * 5000
        with pytest.raises(LLMBadResponse, match="holds no JSON") as info:
            await llm.json(USER, schema, seed=4)
        assert len(str(info.value)) < 1000  # the raw text is truncated

        # attempts: asks again (a new seed) after an invalid answer
        fake.script = []
        fake.reply_text = '{"a": "bad"}'
        n_before = len(fake.requests)
        with pytest.raises(LLMBadResponse):
            await llm.json(USER, schema, seed=10, attempts=3)
        assert [b["seed"] for b in fake.requests[n_before:]] == [10, 11, 12]


def test_extract_json():
    assert extract_json(' {"a": [1, 2]} ') == {"a": [1, 2]}
    assert extract_json('noise {bad} then {"b": true} and {"c": 1}') == {"b": True}
    assert extract_json("list: [1, 2]") == [1, 2]
    with pytest.raises(ValueError):
        extract_json("no json here")


def test_key_from_file_and_missing_file(tmp_path, monkeypatch):
    monkeypatch.delenv("TOOLDOJO_TEST_NO_KEY", raising=False)
    key_file = tmp_path / "key"
    key_file.write_text(FAKE_KEY + "\nsecond line\n")
    cfg = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="TOOLDOJO_TEST_NO_KEY",
                    api_key_file=str(key_file))
    assert LLMClient._read_key(cfg) == FAKE_KEY
    with pytest.raises(LLMError, match="cannot read the API key file") as info:
        LLMClient(cfg.model_copy(update={"api_key_file": str(tmp_path / "missing")}))
    assert FAKE_KEY not in str(info.value)
    monkeypatch.setenv("TOOLDOJO_TEST_NO_KEY", "from-env")
    assert LLMClient._read_key(cfg) == "from-env"  # the env var wins over the file


async def test_api_key_never_leaks(fake, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("TOOLDOJO_TEST_KEY", FAKE_KEY)
    for name in ("", "openai", "openai._base_client", "httpx", "httpx2", "httpcore", "httpcore2", "synth.llm"):
        caplog.set_level(logging.DEBUG, logger=name)
    cache = tmp_path / "cache"
    cfg = LLMConfig(base_url=fake.base_url, model="test-model", api_key_env="TOOLDOJO_TEST_KEY",
                    cache_dir=str(cache), max_retries=1, backoff_base_s=0.01, timeout_s=0.5)
    errors: list[BaseException] = []
    async with LLMClient(cfg) as llm:
        await llm.chat(USER, seed=1)
        await llm.chat(USER, seed=1)  # cache hit
        await llm.chat_many(USER, n=2, seed=2)
        fake.script = [500, 500]
        fake.error_message = f"internal error for key {FAKE_KEY}"  # a server that echoes the key
        for call in (lambda: llm.chat(USER, seed=3),):
            with pytest.raises(LLMUnavailable) as info:
                await call()
            errors.append(info.value)
        fake.script = [400]
        with pytest.raises(LLMRequestError) as info:
            await llm.chat(USER, seed=4)
        errors.append(info.value)
        fake.script = [401]
        with pytest.raises(LLMRequestError, match="refused the credentials") as info:
            await llm.chat(USER, seed=5)
        errors.append(info.value)
        fake.script = [("sleep", 2.0), ("sleep", 2.0)]
        with pytest.raises(LLMUnavailable) as info:
            await llm.chat(USER, seed=6)
        errors.append(info.value)
        fake.script = []
        fake.reply_text = "not json"
        with pytest.raises(LLMBadResponse) as info:
            await llm.json(USER, {"type": "object"}, seed=7)
        errors.append(info.value)
        text_of_client = repr(llm) + repr(llm.config) + llm.config.model_dump_json() + repr(llm.usage)
    # The key did go where it belongs: the Authorization header.
    assert fake.auth_headers and all(h == f"Bearer {FAKE_KEY}" for h in fake.auth_headers)
    assert caplog.records, "debug logging was captured"
    assert FAKE_KEY not in caplog.text
    for e in errors:
        for text in (str(e), repr(e), str(e.__cause__ or ""), str(e.__context__ or "") if e.__suppress_context__ is False else ""):
            assert FAKE_KEY not in text
    assert "[redacted]" in str(errors[0])  # the echoed key was scrubbed, the rest kept
    assert FAKE_KEY not in text_of_client
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert files
    for p in files:
        assert FAKE_KEY.encode() not in p.read_bytes()
        assert set(json.loads(p.read_text())) == {"response"}


# --- (b) against the real vLLM server (one per session) --------------------------------------


def vllm_config(server, **kw: Any) -> LLMConfig:
    return LLMConfig(base_url=server.base_url, model=server.model, api_key_env="TOOLDOJO_TEST_NO_KEY",
                     timeout_s=120, max_retries=1, **kw)


@pytest.mark.slow
async def test_vllm_plain_chat(vllm_server):
    async with LLMClient(vllm_config(vllm_server)) as llm:
        r = await llm.chat([{"role": "system", "content": "Be brief."}, *USER], max_tokens=32, temperature=1.0, seed=0)
        assert r.message["role"] == "assistant" and isinstance(r.message["content"], str)
        assert r.finish_reason in ("stop", "length")
        assert r.usage.prompt_tokens > 5 and 0 < r.usage.completion_tokens <= 32 and r.usage.requests == 1
        # seeded sampling is reproducible on the server too
        again = await llm.chat([{"role": "system", "content": "Be brief."}, *USER], max_tokens=32, temperature=1.0, seed=0)
        assert again.text == r.text
        rs = await llm.chat_many(USER, n=3, max_tokens=8, temperature=1.0, seed=1)
        assert len(rs) == 3 and all(isinstance(x.text, str) for x in rs)
        assert llm.usage.requests == 3 and llm.usage.errors == 0


@pytest.mark.slow
async def test_vllm_serves_concurrent_long_seeded_prompts(vllm_server):
    """More seeded prompt tokens at once than one engine step takes (2048): with chunked prefill
    vLLM's CPU backend dies rewinding a seeded request's RNG ("CPU Generator does not use
    offset"); synth.vllm_server serves without it, so every request is answered and the server
    lives on (the fixture fails any test during which it dies)."""
    words = " ".join(f"item{i}" for i in range(470))
    msgs = [[{"role": "user", "content": f"{k}: {words}"}] for k in range(4)]
    async with LLMClient(vllm_config(vllm_server, max_concurrency=4)) as llm:
        rs = await llm.chat_many(msgs[0], n=1, max_tokens=4, temperature=1.0, seed=0)  # warm
        async with anyio.create_task_group() as tg:
            out: list[Any] = [None] * 4
            for k in range(4):
                async def one(k: int = k) -> None:
                    out[k] = await llm.chat(msgs[k], max_tokens=8, temperature=1.0, seed=100 + k)
                tg.start_soon(one)
        assert rs and all(r is not None and r.usage.prompt_tokens > 800 for r in out)
        assert sum(r.usage.prompt_tokens for r in out) > 2048
    assert vllm_server.exit_code() is None


@pytest.mark.slow
async def test_vllm_chat_with_tools(vllm_server):
    async with LLMClient(vllm_config(vllm_server)) as llm:
        r = await llm.chat([{"role": "user", "content": "What is ACME trading at?"}], tools=TOOLS, max_tokens=48, seed=0)
        assert r.message["role"] == "assistant"
        assert r.message["content"] is None or isinstance(r.message["content"], str)
        for call in r.message.get("tool_calls", []):  # the random model rarely makes a valid one
            assert call["type"] == "function" and isinstance(call["function"]["arguments"], str)
        # A named tool choice on a `strict` tool makes vLLM constrain the output to a call of that tool
        # with schema-valid arguments (whitespace inside the tag is still free, so allow a few tries).
        strict = [{"type": "function", "function": {
            "name": "get_quote", "description": "Get a quote.", "strict": True,
            "parameters": {"type": "object", "properties": {"symbol": {"type": "string", "enum": ["ACME", "INIT"]}},
                           "required": ["symbol"], "additionalProperties": False}}}]
        calls = []
        for seed in range(4):
            forced = await llm.chat([{"role": "user", "content": "quote ACME"}], tools=strict, max_tokens=128,
                                    temperature=1.0, seed=seed,
                                    tool_choice={"type": "function", "function": {"name": "get_quote"}})
            assert forced.message["role"] == "assistant"
            calls = forced.message.get("tool_calls", [])
            if calls:
                break
        assert len(calls) == 1, forced
        assert calls[0]["function"]["name"] == "get_quote" and calls[0]["id"] and calls[0]["type"] == "function"
        assert json.loads(calls[0]["function"]["arguments"])["symbol"] in ("ACME", "INIT")
        # A history with a tool call and a tool answer (rendered by the qwen2_5 template) is accepted.
        history = [
            {"role": "user", "content": "quote ACME"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_quote", "arguments": {"symbol": "ACME"}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"price\": 12.5}"},
        ]
        after = await llm.chat(history, tools=TOOLS, max_tokens=8, seed=0)
        assert after.usage.prompt_tokens > forced.usage.prompt_tokens


@pytest.mark.slow
async def test_vllm_guided_json(vllm_server):
    schema = {
        "title": "Verdict",
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "color": {"type": "string", "enum": ["red", "green", "blue"]},
            "count": {"type": "integer"},
        },
        "required": ["ok", "color", "count"],
        "additionalProperties": False,
    }
    async with LLMClient(vllm_config(vllm_server)) as llm:
        for seed in range(3):
            value = await llm.json([{"role": "user", "content": "Judge it. Answer in JSON."}], schema,
                                   max_tokens=96, temperature=1.0, seed=seed)
            jsonschema.validate(value, schema)
