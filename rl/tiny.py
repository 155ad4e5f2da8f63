"""A tiny, random-init, Qwen2-shaped chat model built offline and deterministically.

It exists so that every layer that talks to a model (the LLM client, vLLM serving, TRL
training) can be tested for real on a CPU machine with no model hub: a byte-level BPE
tokenizer trained on the tool zoo's own text, Qwen's special tokens, TRL's verbatim
``qwen2_5`` chat template (so ``trl.chat_template_utils.add_response_schema`` recognises it
and vLLM's ``hermes`` tool parser accepts its ``<tool_call>`` format) and a small
``Qwen2ForCausalLM`` with random weights, saved with safetensors.

Same parameters and seed -> byte-identical ``tokenizer.json`` and weights. A finished build
carries ``tiny-model.json`` with a hash of everything that went into it; calling
:func:`build_tiny_model` again with the same parameters returns the folder untouched.

vLLM's CPU attention only supports head sizes of 32, 64, 80, ... so ``hidden // heads`` must
be one of those (the defaults give 32).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "SPECIAL_TOKENS",
    "TOOL_TOKENS",
    "build_tiny_model",
    "default_cache_dir",
    "qwen2_5_chat_template",
    "zoo_corpus",
]

# Bump when the build recipe changes: an old cached build is then rebuilt.
_RECIPE = 1
MANIFEST = "tiny-model.json"
# Special tokens (skipped when decoding) and Qwen's tool-call tags, which, as in Qwen2.5's own
# tokenizer, are added tokens but *not* special: vLLM decodes with skip_special_tokens=True and
# its hermes parser must still see them in the text.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TOOL_TOKENS = ("<tool_call>", "</tool_call>")
# Head sizes vLLM's CPU attention backend implements (vllm.v1.attention.backends.cpu_attn).
_VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
# Qwen2's pre-tokenizer split (transformers.models.qwen2.tokenization_qwen2.PRETOKENIZE_REGEX).
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def default_cache_dir() -> Path:
    """``$TOOLDOJO_CACHE`` or ``~/.cache/tooldojo``, plus ``tiny-model``."""
    base = os.environ.get("TOOLDOJO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tooldojo")
    return Path(base) / "tiny-model"


def qwen2_5_chat_template() -> str:
    """TRL's ``trl/chat_templates/qwen2_5.jinja``, verbatim, read from the installed trl."""
    try:
        import trl
    except ImportError as e:  # pragma: no cover - trl is in the llm extra
        raise RuntimeError("the tiny model needs trl's chat templates: pip install 'tooldojo[llm]'") from e
    path = Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"
    return path.read_text(encoding="utf-8")


def _render(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """Render the chat template the way transformers does (trim/lstrip blocks, a tojson that keeps
    non-ASCII) without needing a tokenizer yet: the boilerplate becomes part of the corpus."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
    return env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=True)


def _example_args(schema: dict[str, Any]) -> dict[str, Any]:
    """Plausible-looking arguments for a tool schema (only for tokenizer training text)."""
    out: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        t = prop.get("type") if isinstance(prop, dict) else None
        if isinstance(t, list):
            t = t[0] if t else None
        if isinstance(prop, dict) and prop.get("enum"):
            out[name] = prop["enum"][0]
        elif t == "integer":
            out[name] = 3
        elif t == "number":
            out[name] = 12.5
        elif t == "boolean":
            out[name] = True
        elif t == "array":
            out[name] = []
        elif t == "object":
            out[name] = {}
        else:
            out[name] = f"{name}-1"
    return out


def zoo_corpus() -> list[str]:
    """The tool zoo's text: categories, domain descriptions and policies, tool names, descriptions
    and schemas, and conversations rendered with the chat template (system prompts, tool blocks,
    tool calls and tool responses)."""
    from toolzoo.domains import seed_zoo

    zoo = seed_zoo()
    template = qwen2_5_chat_template()
    texts: list[str] = []
    for c in zoo.categories:
        texts.append(f"{c.name}: {c.description}")
    for d in zoo.domains:
        texts += [d.name, d.description, d.policy]
        tools = [t.to_openai() for t in d.tools]
        for t in d.tools:
            texts += [t.name, t.description, json.dumps(t.parameters, ensure_ascii=False)]
            if t.returns:
                texts.append(json.dumps(t.returns, ensure_ascii=False))
            texts += [f"{code}: {why}" for code, why in t.errors.items()]
        first = d.tools[0]
        call = {"name": first.name, "arguments": _example_args(first.parameters)}
        conversation = [
            {"role": "system", "content": d.policy},
            {"role": "user", "content": d.description},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]},
            {"role": "tool", "content": json.dumps({"ok": True, "result": {}})},
            {"role": "assistant", "content": first.description},
        ]
        texts.append(_render(template, conversation, tools))
        texts.append(_render(template, [{"role": "user", "content": first.description}], None))
    return texts


def _params_hash(params: dict[str, Any], corpus: list[str], template: str) -> str:
    import tokenizers
    import transformers

    h = hashlib.sha256()
    h.update(json.dumps({**params, "recipe": _RECIPE, "tokenizers": tokenizers.__version__,
                         "transformers": transformers.__version__}, sort_keys=True).encode())
    for text in corpus:
        h.update(hashlib.sha256(text.encode()).digest())
    h.update(template.encode())
    return h.hexdigest()


def _complete(out: Path, digest: str) -> bool:
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    files = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
    return manifest.get("hash") == digest and all((out / f).is_file() for f in files)


def _train_tokenizer(corpus: list[str], vocab_size: int):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    # Exactly the pipeline transformers' Qwen2Tokenizer rebuilds around a vocab and merges (NFC,
    # Qwen's split regex, byte-level, no post-processor): AutoTokenizer (and so vLLM and TRL)
    # turns any folder whose config.json says qwen2 into a Qwen2Tokenizer whatever
    # tokenizer_config.json says (transformers 5.17 lists qwen2 among the models with an
    # "incorrect hub tokenizer class"), and must tokenize exactly as this one does.
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False,
                               continuing_subword_prefix="", end_of_word_suffix=""))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    return tok


def build_tiny_model(
    out_dir: str | os.PathLike[str] | None = None,
    *,
    seed: int = 0,
    vocab_size: int = 2048,
    hidden: int = 128,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | None = None,
    intermediate: int | None = None,
    max_positions: int = 2048,
    corpus: Iterable[str] | None = None,
) -> Path:
    """Build (or reuse) a tiny random Qwen2 chat model in ``out_dir`` and return its path.

    ``corpus`` replaces the tool zoo's text (:func:`zoo_corpus`) as tokenizer training data; the
    chat template's boilerplate is always added. ``vocab_size`` is the BPE target (a small corpus
    can stop short of it); the model's embedding has the tokenizer's size rounded up to 64.
    """
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    if hidden // heads not in _VLLM_CPU_HEAD_SIZES:
        raise ValueError(
            f"head size hidden/heads = {hidden // heads} is not one vLLM's CPU attention supports "
            f"({', '.join(map(str, _VLLM_CPU_HEAD_SIZES))}); e.g. use hidden={32 * heads}"
        )
    kv_heads = kv_heads or max(1, heads // 2)
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    if vocab_size < 256 + len(SPECIAL_TOKENS) + len(TOOL_TOKENS):
        raise ValueError("vocab_size must cover the 256 byte tokens and the special tokens")
    out = Path(out_dir) if out_dir is not None else default_cache_dir()
    template = qwen2_5_chat_template()
    texts = list(corpus) if corpus is not None else zoo_corpus()
    texts.append(_render(template, [{"role": "user", "content": "hello"}], None))
    texts.append(_render(template, [{"role": "user", "content": "hello"}], [
        {"type": "function", "function": {"name": "noop", "description": "Do nothing.",
                                          "parameters": {"type": "object", "properties": {}}}}]))
    params = {
        "seed": seed, "vocab_size": vocab_size, "hidden": hidden, "layers": layers, "heads": heads,
        "kv_heads": kv_heads, "intermediate": intermediate or 3 * hidden, "max_positions": max_positions,
    }
    digest = _params_hash(params, texts, template)
    if _complete(out, digest):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # One builder at a time per directory (pytest-xdist workers, parallel bench runs): a second one
    # waits, then finds the first one's build, instead of swapping its own in under a reader.
    with open(out.parent / f".{out.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(out, digest):
            return out
        return _build_into(out, params, texts, template, digest)


def _build_into(out: Path, params: dict[str, Any], texts: list[str], template: str, digest: str) -> Path:
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).exists():
        raise FileExistsError(f"{out} is not empty and holds no tiny model build; pick another directory")

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        _build(tmp, params, texts, template, digest)
        for f in tmp.iterdir():
            f.chmod(0o644)
        tmp.chmod(0o755)
        # Swap in atomically enough: a reader sees either the old build, none, or the new one.
        if out.exists():
            old = out.with_name(f".{out.name}-old-{os.getpid()}")
            os.replace(out, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if _complete(out, digest):  # a concurrent builder won the race
            return out
        raise
    return out


def _build(out: Path, params: dict[str, Any], texts: list[str], template: str, digest: str) -> None:
    import torch
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    raw = _train_tokenizer(texts, params["vocab_size"])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
        model_max_length=params["max_positions"],
        clean_up_tokenization_spaces=False,
        chat_template=template,
    )
    tok.save_pretrained(out)
    # AutoTokenizer would otherwise rebuild a Qwen2Tokenizer from the vocab (config.json says
    # qwen2) and drop the byte-level pre-tokenizer.
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True, ensure_ascii=False) + "\n")

    ids = {t: raw.token_to_id(t) for t in (*SPECIAL_TOKENS, *TOOL_TOKENS)}
    vocab = -(-len(tok) // 64) * 64
    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=params["hidden"],
        intermediate_size=params["intermediate"],
        num_hidden_layers=params["layers"],
        num_attention_heads=params["heads"],
        num_key_value_heads=params["kv_heads"],
        max_position_embeddings=params["max_positions"],
        max_window_layers=params["layers"],
        tie_word_embeddings=True,
        use_sliding_window=False,
        rope_theta=1_000_000.0,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(params["seed"])
        model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
    )
    model.save_pretrained(out, safe_serialization=True)
    n_params = sum(p.numel() for p in model.parameters())
    manifest = {"hash": digest, "params": params, "vocab": len(tok), "model_vocab": vocab,
                "parameters": n_params, "token_ids": ids}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
