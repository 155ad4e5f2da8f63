"""Continuous batching vs padded generate, one batch of prompts, same model, same run.

    python bench/continuous_batching.py [--quick] [--model tiny|0.5b] [--prompts N] [--prompt-len P] [--new T]

Why: without vLLM (the GPU machine), rl.continuous generates multi-turn episodes with
transformers' continuous batching. Whether that is fast depends on its settings; this times one
batch of N prompts (P + 13 i random tokens each, T new tokens, no end token, sampling) through:

* padded            model.generate on a left-padded batch (the baseline; rl.rollout.HFGenerator)
* cb_no_graphs      a fresh continuous-batching manager, eager
* cb_graphs         a fresh manager with CUDA graphs (captured during the session; CUDA only):
                    rl.continuous's default, one manager per rollout batch
* cb_graphs_kept    the manager kept between batches (graphs captured once; CUDA only)

Each variant runs ``--repeats`` times after one warm-up padded call; the JSON (last stdout
line) has every time, the median per variant and each median's ratio to padded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)

ROOT = _common.ROOT


def log(msg: str) -> None:
    print(f"[continuous_batching] {msg}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 prompts of 64 tokens, 16 new, 1 repeat")
    ap.add_argument("--model", choices=["tiny", "0.5b"], default=None, help="default: 0.5b with CUDA, else tiny")
    ap.add_argument("--prompts", type=int, default=None, help="default 16 (quick 4)")
    ap.add_argument("--prompt-len", type=int, default=None, help="default 1000 (quick 64)")
    ap.add_argument("--new", type=int, default=None, help="new tokens per prompt (default 128; quick 16)")
    ap.add_argument("--repeats", type=int, default=None, help="default 3 (quick 1)")
    ap.add_argument("--out", default="/tmp/tooldojo-bench-cb", help="where the 0.5b model is built")
    args = ap.parse_args()
    q = args.quick
    n, plen = args.prompts or (4 if q else 16), args.prompt_len or (64 if q else 1000)
    new, reps = args.new or (16 if q else 128), args.repeats or (1 if q else 3)

    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig
    from transformers.generation import ContinuousBatchingConfig

    from rl.continuous import CB_DEFAULTS, cb_kwargs

    cuda = torch.cuda.is_available()
    kind = args.model or ("0.5b" if cuda else "tiny")
    if kind == "0.5b":
        from bench import train_step

        model_dir = train_step.build_05b_model(Path(args.out) / "model-0.5b")
    else:
        from rl.tiny import build_tiny_model

        model_dir = build_tiny_model()
    dev = "cuda" if cuda else "cpu"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16 if cuda else torch.float32).to(dev)
    model.eval()
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, vocab - 10, (plen + 13 * i,), generator=g).tolist() for i in range(n)]
    never = [vocab + 5]  # no end token: every sequence decodes `new` tokens on every path

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def padded() -> float:
        width = max(len(p) for p in prompts)
        ids = torch.zeros((n, width), dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        t = time.perf_counter()
        model.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev), do_sample=True, max_new_tokens=new,
                       min_new_tokens=new, eos_token_id=never, pad_token_id=0, output_scores=True,
                       return_dict_in_generate=True)
        sync()
        return time.perf_counter() - t

    def continuous(graphs: bool, keep: bool) -> float:
        gen = GenerationConfig(do_sample=True, eos_token_id=never, pad_token_id=0, max_new_tokens=new)
        kw = cb_kwargs({"use_cuda_graph": graphs}, dev)
        t = time.perf_counter()
        mgr = model.init_continuous_batching(
            generation_config=gen, continuous_batching_config=ContinuousBatchingConfig(return_logprobs=True, seed=0, **kw))
        mgr.start()
        for p in prompts:
            mgr.add_request(p, max_new_tokens=new, eos_token_id=never)
        for _ in prompts:
            res = mgr.get_result(timeout=600)
            if res is None or len(res.generated_tokens) != new:
                raise RuntimeError(f"continuous batching returned {res!r}")
        mgr.stop(block=True, keep_for_next_session=keep)
        if not keep:
            mgr.destroy()
        sync()
        return time.perf_counter() - t

    variants: dict[str, Any] = {"padded": padded, "cb_no_graphs": lambda: continuous(False, False)}
    if cuda:
        variants["cb_graphs"] = lambda: continuous(True, False)
        variants["cb_graphs_kept"] = lambda: continuous(True, True)
    result: dict[str, Any] = {"device": dev, "model": kind, "prompts": n, "prompt_len": plen, "new_tokens": new,
                              "repeats": reps, "cb_defaults": CB_DEFAULTS, "times_s": {}, "median_s": {},
                              "vs_padded": {}, "errors": {}}
    with torch.no_grad():
        padded()  # warm-up: kernels, allocator
        for name, fn in variants.items():
            try:
                times = [round(fn(), 3) for _ in range(reps)]
            except Exception as e:  # noqa: BLE001
                result["errors"][name] = f"{type(e).__name__}: {e}"[:500]
                log(f"{name}: FAILED {result['errors'][name]}")
                continue
            finally:
                if name == "cb_graphs_kept":
                    model.destroy_cached_continuous_batching_manager()
            result["times_s"][name] = times
            result["median_s"][name] = round(statistics.median(times), 3)
            log(f"{name}: {times}")
    base = result["median_s"].get("padded")
    for name, s in result["median_s"].items():
        result["vs_padded"][name] = round(s / base, 3) if base else None
    result["tokens_per_s"] = {k: round(n * new / s, 1) for k, s in result["median_s"].items()}
    _common.emit(result, ("device", "model", "median_s", "vs_padded", "tokens_per_s", "errors"))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
