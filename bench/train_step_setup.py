"""What bench/train_step.py's parent and its trainer subprocesses share: the example config, the
0.5B model it builds, the config overrides of a run, logging and peak memory."""

from __future__ import annotations

import json
import resource
import shutil
import sys
from pathlib import Path
from typing import Any

from bench import _common


ROOT = _common.ROOT
EXAMPLE = ROOT / "examples" / "train_tiny.yaml"
TARGETS = {"overhead_per_generated_token_max": 0.10}
DOMAINS = ["retail_orders", "library_loans"]  # examples/train_tiny.yaml's
# ~0.49B parameters, head size 64 (vLLM-CPU friendly too), the tiny tokenizer's vocabulary
QWEN_05B = {"hidden_size": 1024, "num_hidden_layers": 26, "num_attention_heads": 16, "num_key_value_heads": 8,
            "intermediate_size": 5120, "max_position_embeddings": 4096}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "generation_config.json")


def log(msg: str) -> None:
    print(f"[train_step] {msg}", file=sys.stderr, flush=True)


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def peak_mem_gb() -> float:
    import torch

    if torch.cuda.is_available():
        return round(torch.cuda.max_memory_allocated() / 2**30, 3)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)  # KiB on Linux


# ------------------------------------------------------------------ models
def build_05b_model(out: Path, seed: int = 0, tokenizer_dir: Path | None = None) -> Path:
    """A random-init ~0.5B Qwen2 with the tiny model's tokenizer and chat template (reused as is;
    ``tokenizer_dir``: a built tiny model's folder to take them from)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rl.tiny import build_tiny_model

    done = out / "bench-model.json"
    if done.exists() and json.loads(done.read_text()).get("shape") == QWEN_05B:
        return out
    tiny = Path(tokenizer_dir) if tokenizer_dir is not None else build_tiny_model()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        if (tiny / name).exists():
            shutil.copy2(tiny / name, out / name)
    base = json.loads((tiny / "config.json").read_text())
    config = Qwen2Config(
        vocab_size=base["vocab_size"], **QWEN_05B, max_window_layers=QWEN_05B["num_hidden_layers"],
        tie_word_embeddings=True, use_sliding_window=False, rope_theta=1_000_000.0,
        bos_token_id=base.get("bos_token_id"), eos_token_id=base.get("eos_token_id"),
        pad_token_id=base.get("pad_token_id"), dtype="bfloat16")
    cuda = torch.cuda.is_available()
    with torch.random.fork_rng(devices=[]), torch.device("cuda" if cuda else "cpu"):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model = model.to(torch.bfloat16 if cuda else torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    del model
    if (tiny / "generation_config.json").exists():  # save_pretrained wrote its own; keep the tiny model's eos list
        shutil.copy2(tiny / "generation_config.json", out / "generation_config.json")
    done.write_text(json.dumps({"shape": QWEN_05B, "parameters": n, "seed": seed}, indent=2) + "\n")
    return out


def count_params(model_dir: Path) -> int:
    from safetensors import safe_open

    n = 0
    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            for k in st.keys():
                shape = st.get_slice(k).get_shape()
                size = 1
                for d in shape:
                    size *= d
                n += size
    return n


# ------------------------------------------------------------------ config
def overrides(spec: dict[str, Any], use_vllm: bool, run_dir: Path) -> list[str]:
    o = ["model.tiny=false", f"model.name_or_path={spec['model_dir']}", f"data.tasks={spec['tasks_dir']}",
         f"data.domains={json.dumps(DOMAINS)}",
         f"grpo.max_steps={spec['steps_total']}", f"grpo.max_completion_length={spec['max_completion_length']}",
         f"grpo.per_device_train_batch_size={spec['batch']}", f"grpo.num_generations={spec['num_generations']}",
         f"rollout.use_vllm={'true' if use_vllm else 'false'}", f"rollout.sandbox_backend={spec['backend']}",
         f"run.output_dir={run_dir}", "run.logging=[]", "run.save_steps=1000000", f"run.seed={spec['seed']}",
         f"rollout.hf_generation={spec.get('generation', 'padded')}"]
    if spec.get("learning_rate") is not None:
        o.append(f"grpo.learning_rate={spec['learning_rate']}")
    if spec.get("gradient_checkpointing") is not None:
        o.append(f"grpo.gradient_checkpointing={'true' if spec['gradient_checkpointing'] else 'false'}")
    return o
