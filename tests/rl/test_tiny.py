"""The tiny offline Qwen2 chat model: deterministic, cached, a Qwen2.5 chat template that TRL
and vLLM's hermes parser understand, and a tokenizer that loads the same way everywhere."""

from __future__ import annotations

import hashlib
import json
import time

import pytest

pytest.importorskip("transformers")
pytest.importorskip("trl")

from rl.tiny import MANIFEST, SPECIAL_TOKENS, TOOL_TOKENS, build_tiny_model  # noqa: E402

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_quote",
        "description": "Get the latest quote for a ticker symbol.",
        "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]},
    },
}]


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def test_build_is_deterministic_and_cached(tiny, tmp_path):
    again = build_tiny_model(tmp_path / "again", seed=0)
    for name in ("tokenizer.json", "model.safetensors", "config.json", "tokenizer_config.json", "chat_template.jinja"):
        assert sha(tiny / name) == sha(again / name), name

    # Same parameters: the finished build is returned untouched.
    before = {p.name: p.stat().st_mtime_ns for p in again.iterdir()}
    t0 = time.perf_counter()
    assert build_tiny_model(again, seed=0) == again
    assert time.perf_counter() - t0 < 5
    assert {p.name: p.stat().st_mtime_ns for p in again.iterdir()} == before

    # Another seed: same tokenizer, other weights; the old build is replaced.
    build_tiny_model(again, seed=1)
    assert sha(again / "tokenizer.json") == sha(tiny / "tokenizer.json")
    assert sha(again / "model.safetensors") != sha(tiny / "model.safetensors")
    assert json.loads((again / MANIFEST).read_text())["params"]["seed"] == 1


def test_refuses_foreign_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        build_tiny_model(tmp_path, seed=0)


def test_rejects_head_size_vllm_cannot_run(tmp_path):
    with pytest.raises(ValueError, match="head size"):
        build_tiny_model(tmp_path / "m", hidden=64, heads=4)


def test_autotokenizer_loads_fast_and_tokenizes_like_the_saved_tokenizer(tiny):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    auto = AutoTokenizer.from_pretrained(tiny)
    plain = PreTrainedTokenizerFast.from_pretrained(tiny)
    assert auto.is_fast and plain.is_fast
    assert json.loads((tiny / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    # transformers may rebuild a Qwen2Tokenizer around the vocab (config.json says qwen2): the
    # pipeline must then be the same one, so vLLM, TRL and we all see the same ids.
    a, p = json.loads(auto.backend_tokenizer.to_str()), json.loads(plain.backend_tokenizer.to_str())
    for part in ("normalizer", "pre_tokenizer", "decoder"):
        assert a[part] == p[part], part
    assert a["model"]["vocab"] == p["model"]["vocab"] and a["model"]["merges"] == p["model"]["merges"]
    text = 'Héllo  wörld\n\n{"name": "get_quote", "arguments": {"symbol": "ACME"}} 12345 <tool_call>x</tool_call><|im_end|>'
    assert auto(text)["input_ids"] == plain(text)["input_ids"]
    assert auto.decode(auto(text)["input_ids"]) == text
    for t in (*SPECIAL_TOKENS, *TOOL_TOKENS):
        assert auto.convert_tokens_to_ids(t) == plain.convert_tokens_to_ids(t) is not None
        assert len(auto(t, add_special_tokens=False)["input_ids"]) == 1, t
    # <tool_call> survives skip_special_tokens (as in Qwen2.5), <|im_end|> does not.
    ids = auto("<tool_call>{}</tool_call><|im_end|>")["input_ids"]
    assert auto.decode(ids, skip_special_tokens=True) == "<tool_call>{}</tool_call>"
    assert auto.eos_token == "<|im_end|>" and auto.pad_token == "<|endoftext|>"


def test_chat_template_is_trls_and_renders_tools_and_tool_calls(tiny):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    tok = AutoTokenizer.from_pretrained(tiny)
    assert tok.chat_template == qwen2_5_chat_template
    messages = [
        {"role": "user", "content": "What is ACME at?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_quote", "arguments": {"symbol": "ACME"}}}]},
        {"role": "tool", "content": '{"price": 12.5}'},
    ]
    text = tok.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert "<tools>" in text and '"name": "get_quote"' in text
    assert '<tool_call>\n{"name": "get_quote", "arguments": {"symbol": "ACME"}}\n</tool_call>' in text
    assert "<tool_response>\n{\"price\": 12.5}\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")
    ids = tok.apply_chat_template(messages, tools=TOOLS, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    assert tok.decode(ids) == text


def test_trl_response_schema_parses_a_tool_call(tiny):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    tok = add_response_schema(AutoTokenizer.from_pretrained(tiny))
    completion = '<tool_call>\n{"name": "get_quote", "arguments": {"symbol": "ACME"}}\n</tool_call><|im_end|>'
    parsed = tok.parse_response(prefix="", response=completion)
    assert parsed["role"] == "assistant"
    assert parsed["tool_calls"] == [{"type": "function", "function": {"name": "get_quote", "arguments": {"symbol": "ACME"}}}]
    ids = tok(completion, add_special_tokens=False)["input_ids"]
    assert tok.parse_response(prefix="", response=ids)["tool_calls"][0]["function"]["name"] == "get_quote"


def test_model_is_a_small_float32_qwen2_that_runs(tiny):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny)
    tok = AutoTokenizer.from_pretrained(tiny)
    cfg = model.config
    assert cfg.model_type == "qwen2" and cfg.tie_word_embeddings and model.dtype == torch.float32
    assert cfg.vocab_size >= len(tok) and cfg.max_position_embeddings == 2048
    assert cfg.hidden_size // cfg.num_attention_heads in (32, 64, 128)
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    assert (tiny / "model.safetensors").is_file()
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    inputs = tok(prompt, return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert out.shape[1] <= inputs["input_ids"].shape[1] + 5
