"""The Dr. GRPO update step with the shared-prefix forward vs TRL's repeated rows, same batch, same run.

    python bench/train_step_prefix.py [--model base|tiny|0.5b] [--prompt-len 500] [--completion-len 100]
                                      [--groups 4] [--num-generations 8] [--steps 3] [--repeats 3]
                                      [--attn sdpa|eager|flex_attention] [--gradient-checkpointing] [--save F]

What is timed is the trainer's update step on one micro-batch: ``compute_loss`` (TRL's Dr. GRPO
``_compute_loss``, whose log-prob forward is the one rl.shared_prefix replaces), the backward
through the accelerator and the optimizer step. The batch has the shape of a GRPO micro-batch:
``--groups`` prompts of ``--prompt-len`` tokens, each with ``--num-generations`` completions of
``--completion-len`` tokens at most (lengths drawn from ``--completion-min``, default half; a tool-result span
with ``tool_mask`` 0 in each), so rollout and generation are left out on purpose: they are the same
for both paths. The two paths alternate (``--repeats`` rounds of repeated, shared; ``--steps``
steps each, after one warm-up step each), so load from other processes falls on both.

Models: ``base`` is the demo's pretrained base (rl/base), ``tiny`` rl.tiny's model, ``0.5b`` the
random-init ~0.49B Qwen2 of bench/train_step_setup.py (bf16 on CUDA). Before timing, one batch's
Dr. GRPO gradients are compared in float32 (``max_rel_grad_diff``: the largest over parameters of
max|shared - repeated| / max|repeated|). Peak memory per path: CUDA's max allocated, or on the CPU
the process's peak RSS (VmHWM, reset between paths through /proc/self/clear_refs).

The last stdout line is one JSON object: ``speedup`` = repeated / shared update-step seconds
(median over all timed steps), ``fwd_bwd_speedup`` the same for forward+backward alone (the
optimizer step costs the same either way), seconds per phase, tokens/s (the batch's prompt+completion tokens as TRL counts them,
per update-step second), forward tokens per path, peak memory, the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench import _common as common  # noqa: E402
from bench import train_step_setup as setup  # noqa: E402


def log(msg: str) -> None:
    print(f"[train_step_prefix] {msg}", file=sys.stderr, flush=True)


def model_dir(name: str, work: Path, tokenizer_from: str | None) -> Path:
    if name == "base":
        from rl.demo import SHIPPED_BASE

        return SHIPPED_BASE
    if name == "tiny":
        from rl.tiny import build_tiny_model

        return build_tiny_model()
    return setup.build_05b_model(work / "model-0.5b", tokenizer_dir=Path(tokenizer_from) if tokenizer_from else None)


def make_batch(vocab: int, pad: int, groups: int, g: int, p: int, r: int, device: Any, seed: int = 0,
               r_min: int | None = None) -> dict:
    import torch

    gen = torch.Generator().manual_seed(seed)
    n = groups * g
    prompt_ids = torch.randint(300, vocab, (groups, p), generator=gen).repeat_interleave(g, 0)
    lengths = torch.randint(max(1, r // 2 if r_min is None else r_min), r + 1, (n,), generator=gen)
    cm = (torch.arange(r)[None] < lengths[:, None]).long()
    cid = torch.randint(300, vocab, (n, r), generator=gen).masked_fill(cm == 0, pad)
    tm = torch.ones(n, r, dtype=torch.long)
    tm[:, r // 4: r // 4 + max(1, r // 8)] = 0   # a tool result: attended to, not in the loss
    batch = {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": cid,
             "completion_mask": cm, "tool_mask": tm, "advantages": torch.randn(n, generator=gen),
             "old_per_token_logps": None, "num_items_in_batch": cm.sum()}
    return {k: (v.to(device) if hasattr(v, "to") else v) for k, v in batch.items()}


def build_trainer(path: Path, args: argparse.Namespace, dtype: str, work: Path):
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from rl.shared_prefix import SharedPrefixGRPOTrainer

    cuda = setup.cuda_available()
    n = args.groups * args.num_generations
    cfg = GRPOConfig(output_dir=str(work / "out"), loss_type="dr_grpo", scale_rewards="none", beta=0.0,
                     use_cpu=not cuda, bf16=cuda and dtype == "bfloat16", max_completion_length=args.completion_len,
                     num_generations=args.num_generations, per_device_train_batch_size=n,
                     gradient_accumulation_steps=1, report_to=[], max_steps=1, learning_rate=1e-5,
                     gradient_checkpointing=args.gradient_checkpointing, seed=0,
                     model_init_kwargs={"dtype": dtype, "attn_implementation": args.attn})
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    import datasets

    t = SharedPrefixGRPOTrainer(model=str(path), reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                args=cfg, train_dataset=datasets.Dataset.from_dict({"prompt": ["x"]}),
                                processing_class=tok)
    t.current_gradient_accumulation_steps = 1
    t.model.train()
    if args.gradient_checkpointing:
        t.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return t, tok


def grad_check(path: Path, args: argparse.Namespace, work: Path) -> float:
    """Largest relative gradient difference, float32, one batch (small copies of the shapes on CPU)."""
    import torch

    t, tok = build_trainer(path, args, "float32", work)
    batch = make_batch(t.model.config.vocab_size, tok.pad_token_id, args.groups, args.num_generations,
                       args.prompt_len, args.completion_len, t.model.device, seed=1, r_min=args.completion_min)
    grads = {}
    for shared in (True, False):
        t.shared_prefix = shared
        t.model.zero_grad(set_to_none=True)
        t.compute_loss(t.model, batch).backward()
        grads[shared] = {n: p.grad.detach().float().clone() for n, p in t.model.named_parameters()}
    worst = max(float((grads[True][n] - g).abs().max() / g.abs().max().clamp(min=1e-30))
                for n, g in grads[False].items())
    del t, grads
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return worst


def reset_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
        return
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_gib() -> float:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**30
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return setup.peak_mem_gb()


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from rl.shared_prefix import find_groups, pack_groups

    work = Path(args.out or tempfile.mkdtemp(prefix="train_step_prefix-"))
    path = model_dir(args.model, work, args.tokenizer_from)
    cuda = setup.cuda_available()
    if args.threads:
        torch.set_num_threads(args.threads)
    result: dict[str, Any] = {"bench": "train_step_prefix", "model": args.model, "device": "cuda" if cuda else "cpu",
                              "prompt_len": args.prompt_len, "completion_len": args.completion_len,
                              "groups": args.groups, "num_generations": args.num_generations, "attn": args.attn,
                              "gradient_checkpointing": args.gradient_checkpointing, "load_before": os.getloadavg()}
    if cuda:
        result["gpu"] = torch.cuda.get_device_name()
    if args.grad_check:
        log(f"float32 gradient check ({args.model})")
        result["max_rel_grad_diff"] = grad_check(path, args, work)
        log(f"max_rel_grad_diff {result['max_rel_grad_diff']:.2e}")
    dtype = "bfloat16" if cuda else "float32"
    t, tok = build_trainer(path, args, dtype, work)
    result["parameters"] = sum(p.numel() for p in t.model.parameters())
    result["dtype"] = dtype
    opt = torch.optim.AdamW(t.model.parameters(), lr=1e-5)
    batch = make_batch(t.model.config.vocab_size, tok.pad_token_id, args.groups, args.num_generations,
                       args.prompt_len, args.completion_len, t.model.device, r_min=args.completion_min)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    pk = pack_groups(ids, att, args.completion_len, find_groups(batch["prompt_ids"], batch["prompt_mask"]))
    tokens = int(att.sum())
    result["forward_tokens"] = {"repeated": int(ids.numel()), "shared": int(pk.input_ids.numel())}
    result["batch_tokens"] = tokens

    def sync() -> float:
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def step(name: str | None = None) -> float:
        t0 = sync()
        loss = t.compute_loss(t.model, batch)
        t1 = sync()
        t.accelerator.backward(loss)
        t2 = sync()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = sync()
        if name:
            for phase, s in (("forward", t1 - t0), ("backward", t2 - t1), ("optimizer", t3 - t2)):
                phases[name][phase].append(s)
        return t3 - t0

    phases: dict[str, dict[str, list[float]]] = {k: {"forward": [], "backward": [], "optimizer": []}
                                                 for k in ("repeated", "shared")}
    times: dict[str, list[float]] = {"repeated": [], "shared": []}
    peak: dict[str, float] = {"repeated": 0.0, "shared": 0.0}
    for r in range(args.repeats):
        for name in ("repeated", "shared"):
            t.shared_prefix = name == "shared"
            reset_peak()
            step()  # warm-up (allocator, kernels)
            for _ in range(args.steps):
                times[name].append(step(name))
            peak[name] = max(peak[name], peak_gib())
            log(f"round {r + 1}/{args.repeats} {name}: {statistics.median(times[name][-args.steps:]):.3f} s/step")
    med = {k: statistics.median(v) for k, v in times.items()}
    result.update({
        "update_step_s": {k: round(v, 4) for k, v in med.items()},
        "update_step_s_all": {k: [round(x, 4) for x in v] for k, v in times.items()},
        "tokens_per_s": {k: round(tokens / v, 1) for k, v in med.items()},
        # medians per phase (synchronised between phases): the optimizer step does not depend on the tokens
        "phase_s": {k: {ph: round(statistics.median(v), 4) for ph, v in d.items()} for k, d in phases.items()},
        "peak_mem_gib": {k: round(v, 3) for k, v in peak.items()},
        "peak_mem_kind": "cuda max_memory_allocated" if cuda else "process VmHWM (RSS)",
        "speedup": round(med["repeated"] / med["shared"], 3),
        "speedup_per_round": [round(statistics.median(times["repeated"][i:i + args.steps])
                                    / statistics.median(times["shared"][i:i + args.steps]), 3)
                              for i in range(0, len(times["shared"]), args.steps)],
        "fwd_bwd_speedup": round(
            statistics.median([f + b for f, b in zip(phases["repeated"]["forward"], phases["repeated"]["backward"],
                                                      strict=True)])
            / statistics.median([f + b for f, b in zip(phases["shared"]["forward"], phases["shared"]["backward"],
                                                       strict=True)]), 3),
        "load_after": os.getloadavg(), "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
    })
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["base", "tiny", "0.5b"], default=None,
                    help="default: 0.5b with CUDA, else base (the demo's)")
    ap.add_argument("--prompt-len", type=int, default=500, help="tokens of each group's prompt (the demo: ~500)")
    ap.add_argument("--completion-len", type=int, default=100, help="max tokens of a completion, tool results included")
    ap.add_argument("--completion-min", type=int, default=None,
                    help="min tokens of a completion (lengths are drawn in [min, max]; default max/2)")
    ap.add_argument("--groups", type=int, default=4, help="prompts per micro-batch (the demo: 4 x 8 = 32 episodes)")
    ap.add_argument("--num-generations", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per path per round")
    ap.add_argument("--repeats", type=int, default=3, help="rounds, the paths interleaved")
    ap.add_argument("--attn", choices=["sdpa", "eager", "flex_attention"], default="sdpa")
    ap.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=False)
    ap.add_argument("--grad-check", action=argparse.BooleanOptionalAction, default=True,
                    help="compare one batch's float32 gradients first (needs float32 activations' memory)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="work folder (the 0.5b model is built here)")
    ap.add_argument("--save", default=None, help="also write the JSON here")
    ap.add_argument("--tokenizer-from", default=None,
                    help="0.5b: a built tiny model's folder whose tokenizer it takes (default: rl.tiny builds one)")
    args = ap.parse_args(argv)
    args.model = args.model or ("0.5b" if setup.cuda_available() else "base")
    result = run(args)
    if args.save:
        import json

        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        Path(args.save).write_text(json.dumps(result, indent=2) + "\n")
    common.emit(result, head=("bench", "model", "device", "speedup", "max_rel_grad_diff"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
