"""Benchmark `dojo train` on N processes against 1, in the same run: DDP scaling, 1 x B vs N x B/N,
GPU memory with the generation cache sized to the work or from free memory, FSDP2 beyond one GPU.

    python bench/train_multi.py [--quick] [--nproc 2] [--steps 6] [--agreement-steps 20] [--batch 8]
                                [--fsdp] [--fsdp-shape auto] [--fsdp-steps 3]
                                [--runs one_small_free,one_small,multi,one_big,fsdp,fsdp_one]
                                [--backend auto|docker|local] [--out DIR]

On GPUs (one device call has 10 minutes, so two calls, each with its own baselines):
    python bench/train_multi.py --nproc 2 --backend local --runs one_small_free,one_small,multi
    python bench/train_multi.py --nproc 2 --backend local --fsdp --runs fsdp,fsdp_one

Every run is the real launch, ``accelerate launch --config_file examples/accelerate/{ddp,fsdp2}.yaml
--num_processes N bench/train_multi.py --worker ... train CONFIG ...``: the worker only adds a
TrainerCallback (step clock, peak memory per rank and phase) and runs the `dojo` CLI. Progress goes
to stderr; the LAST line on stdout is one JSON object. Runs, in order:

* ``one_small``: 1 process, per-process batch b (the baseline of the scaling);
* ``one_small_free``: the same as the bench ran before item 1: ``rollout.generation_memory=free`` (the
  KV cache takes half of free GPU memory) and no gradient checkpointing (GPU runs of the 0.49B
  checkpoint every ``--gc-every``-th layer): the baseline of the memory figures;
* ``multi``: N processes (DDP), per-process batch b, i.e. global batch B = N x b;
* ``one_big``: 1 process, batch B (the baseline of the agreement);
  (GPU defaults: the random 0.49B Qwen2 of bench/train_step.py, b = 8, max_completion_length 256,
  transformers generation with continuous batching, 6 scaling steps, 20 agreement steps)
* with ``--fsdp`` (CUDA only: accelerate runs FSDP on GPU backends only): ``fsdp``, N processes
  with examples/accelerate/fsdp2.yaml on a random-init model of ``--fsdp-shape`` (default auto: a
  model whose full bf16 fine-tuning with Adam needs 1.15x one card's memory), generating with the
  sharded model in lockstep (``rollout.fsdp_generation=sharded``), and ``fsdp_one``, the same on 1
  process with DDP's config (expected to run out of memory: recorded).

Figures (timed steps: all but the first, the warm-up):
  tokens_per_s         TRL's ``num_tokens`` increase over the timed steps / their wall clock
                       (rank 0's step ends), all processes together; per_gpu = / N
  scaling              multi.tokens_per_s / one_small.tokens_per_s (target >= 1.8 at N=2, 3.5 at N=4)
  scaling_episodes     N x one_small.step_s / multi.step_s (episodes per second)
  agreement            per step k, d_k = reward(one_big) - reward(multi) (and the same for loss);
                       within_noise: |mean d| <= 2 x sd(d) / sqrt(steps)
  peak_mem_gb          per rank: torch.cuda.max_memory_allocated (CPU: the process's peak RSS);
  phases_gb            per rank, the peaks of generation (the rollout) and training (forward,
                       backward, optimizer), allocated and reserved
  memory               one_small_free vs one_small: peaks and tokens/s (target: <= 12 GB per GPU at
                       >= 90% of one_small_free's tokens/s)
--quick: the tiny model on CPU (gloo), 2 steps per run (1 timed), one turn per episode; the
figures are smoke values (2 cores shared by every process), no target is judged.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)

ROOT = _common.ROOT
EXAMPLE = ROOT / "examples" / "train_tiny.yaml"
ACCELERATE_DIR = ROOT / "examples" / "accelerate"
DOMAINS = ["retail_orders", "library_loans"]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "generation_config.json")
SCALING_TARGETS = {2: 1.8, 4: 3.5}  # tokens/s of N processes over one, at equal per-process batch
MEMORY_TARGET_GB = 12.0  # item 1: the 0.49B bench at batch 8, per GPU
MEMORY_SPEED_FLOOR = 0.9  # ... at >= 90% of the tokens/s with the cache sized from free memory
SHAPES: dict[str, dict[str, int]] = {
    # bench/train_step.py's random 0.49B Qwen2
    "0.5b": {"hidden_size": 1024, "num_hidden_layers": 26, "num_attention_heads": 16, "num_key_value_heads": 8,
             "intermediate_size": 5120},
    # ~18.7B: bf16 weights + grads + Adam (8 bytes/param) = ~150 GB, above one H200's 141 GB
    "18b": {"hidden_size": 6144, "num_hidden_layers": 48, "num_attention_heads": 48, "num_key_value_heads": 8,
            "intermediate_size": 16384},
}


WIDE = {"hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8, "intermediate_size": 13824}


def shape_parameters(shape: dict[str, int], vocab: int = 2048) -> int:
    """Parameters of a Qwen2 of ``shape`` (tied embeddings, q/k/v biases)."""
    h, i, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    kv = shape["num_key_value_heads"] * (h // shape["num_attention_heads"])
    per_layer = h * h + h + 2 * (h * kv + kv) + h * h + 3 * h * i + 2 * h
    return layers * per_layer + vocab * h + h


def fsdp_shape(spec: str, card_bytes: int | None, nproc: int) -> tuple[str, dict[str, int]]:
    """``--fsdp-shape``: a named shape, explicit sizes (``hidden_size=5120,num_hidden_layers=44,...``,
    the rest of a 14B-like layer), or ``auto``: as many of those layers as make full fine-tuning in
    bf16 with Adam (weights, gradients, two moments: 8 bytes a parameter) need 1.15x the card's
    memory, so one GPU cannot hold it while ``nproc`` shards (8 / nproc bytes a parameter each)
    leave room for activations and generation."""
    if spec in SHAPES:
        return spec, SHAPES[spec]
    if spec == "auto":
        if not card_bytes:
            raise SystemExit("--fsdp-shape auto needs a GPU (it sizes the model from the card's memory)")
        per_layer = shape_parameters({**WIDE, "num_hidden_layers": 1}) - shape_parameters({**WIDE, "num_hidden_layers": 0})
        layers = math.ceil(1.15 * card_bytes / 8 / per_layer)
        if 8 * layers * per_layer / nproc > 0.8 * card_bytes:
            raise SystemExit(f"--fsdp-shape auto: {nproc} GPUs cannot hold a model one GPU cannot; use more processes")
        shape = {**WIDE, "num_hidden_layers": layers}
        return f"auto-{shape_parameters(shape) / 1e9:.1f}b", shape
    try:
        given = {k.strip(): int(v) for k, v in (part.split("=") for part in spec.split(","))}
    except ValueError:
        raise SystemExit(f"--fsdp-shape: {spec!r} is neither {sorted(SHAPES)}, auto, nor key=int,key=int") from None
    unknown = sorted(set(given) - set(WIDE) - {"num_hidden_layers"})
    if unknown or "num_hidden_layers" not in given:
        raise SystemExit(f"--fsdp-shape: give num_hidden_layers and any of {sorted(WIDE)}; unknown: {unknown}")
    shape = {**WIDE, **given}
    return f"custom-{shape_parameters(shape) / 1e9:.1f}b", shape


def log(msg: str) -> None:
    print(f"[train_multi] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ the worker (inside accelerate launch)
def worker(out: Path, dojo_args: list[str]) -> None:
    """Run the `dojo` CLI with a callback that records, per rank, the wall clock of every step's
    end and the peak memory, into ``out/rank-R.json``."""
    import rl.trainer
    from transformers import TrainerCallback

    rank = int(os.environ.get("RANK", 0))
    stamps: list[float] = []
    # peak GPU memory per phase: generation (the rollout) and training (forward, backward, optimizer)
    phases = {"generation": 0.0, "training": 0.0, "generation_reserved": 0.0, "training_reserved": 0.0}

    def close_phase(name: str) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
            phases[name] = max(phases[name], torch.cuda.max_memory_allocated() / 2**30)
            phases[f"{name}_reserved"] = max(phases[f"{name}_reserved"], torch.cuda.max_memory_reserved() / 2**30)
            torch.cuda.reset_peak_memory_stats()

    def peak_gb() -> float:
        import torch

        if torch.cuda.is_available():
            close_phase("training")
            return max(phases["generation"], phases["training"])
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    import rl.rollout

    rollout_call = rl.rollout.MultiTurnRollout.__call__

    def rollout_with_phases(self: Any, prompts: Any, trainer: Any) -> Any:
        close_phase("training")  # what came before (the last step, loading) counts as training
        out = rollout_call(self, prompts, trainer)
        close_phase("generation")
        return out

    rl.rollout.MultiTurnRollout.__call__ = rollout_with_phases

    class Clock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            stamps.append(time.time())

        def on_step_end(self, args, state, control, **kw):
            stamps.append(time.time())
            out.mkdir(parents=True, exist_ok=True)
            (out / f"rank-{rank}.json").write_text(json.dumps({"rank": rank, "stamps": stamps,
                                                               "peak_mem_gb": peak_gb(),
                                                               "phases_gb": dict(phases)}))

    build = rl.trainer.build_trainer

    def build_with_clock(*a: Any, **kw: Any) -> Any:
        trainer = build(*a, **kw)
        trainer.add_callback(Clock())
        return trainer

    rl.trainer.build_trainer = build_with_clock
    sys.stderr = tail = _Tail(sys.stderr)  # before the CLI is imported: its one-line errors go here
    from tooldojo.cli import main

    sys.argv = ["dojo", *dojo_args]
    try:
        main()
    except BaseException as e:  # noqa: BLE001 - recorded for the parent, then raised as it was
        if not (isinstance(e, SystemExit) and e.code in (0, None)):
            import traceback

            out.mkdir(parents=True, exist_ok=True)
            text = (f"exit {e.code}: {tail.text()}" if isinstance(e, SystemExit)
                    else "".join(traceback.format_exception(e)))
            (out / f"rank-{rank}-error.json").write_text(json.dumps({"rank": rank, "error": text[-4000:]}))
        raise


class _Tail:
    """A stream that passes everything on and keeps the last few thousand characters."""

    def __init__(self, inner: Any, keep: int = 4000):
        self.inner, self.keep, self.buf = inner, keep, ""

    def write(self, s: str) -> int:
        self.buf = (self.buf + s)[-self.keep:]
        return self.inner.write(s)

    def text(self) -> str:
        return self.buf

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, ...
        return getattr(self.inner, name)


def rank_errors(clock: Path) -> list[dict[str, Any]]:
    """What each failed rank raised (the worker writes ``rank-R-error.json``), by rank."""
    found = [json.loads(f.read_text()) for f in clock.glob("rank-*-error.json")]
    return sorted(found, key=lambda r: r["rank"])


def rank_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The launched processes' environment: the repository first on ``PYTHONPATH``, what the user had
    there kept (packages provided that way must reach the ranks too)."""
    env = dict(os.environ if environ is None else environ)
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


# ------------------------------------------------------------------ setup
def build_model(out: Path, shape: dict[str, int], seed: int = 0) -> Path:
    """A random-init Qwen2 of ``shape`` with the tiny model's tokenizer and chat template, built in a
    child process: its GPU memory goes with it (built in the parent, ~73 GB stayed reserved on GPU 0
    while the ranks started, and the first FSDP try ran out of memory)."""
    done = out / "bench-model.json"
    if done.exists() and json.loads(done.read_text()).get("shape") == shape:
        return out
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--build-model", str(out),
                        "--build-shape", json.dumps(shape), "--build-seed", str(seed)],
                       capture_output=True, text=True, cwd=ROOT, env=rank_env())
    if p.returncode != 0 or not done.exists():
        raise RuntimeError(f"building the {shape} model failed: {p.stderr[-2000:]}")
    return out


def _build_model_here(out: Path, shape: dict[str, int], seed: int = 0) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rl.tiny import build_tiny_model

    done = out / "bench-model.json"
    if done.exists() and json.loads(done.read_text()).get("shape") == shape:
        return out
    tiny = build_tiny_model()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        if (tiny / name).exists():
            shutil.copy2(tiny / name, out / name)
    base = json.loads((tiny / "config.json").read_text())
    config = Qwen2Config(vocab_size=base["vocab_size"], **shape, max_position_embeddings=4096,
                         max_window_layers=shape["num_hidden_layers"], tie_word_embeddings=True,
                         use_sliding_window=False, rope_theta=1_000_000.0, bos_token_id=base.get("bos_token_id"),
                         eos_token_id=base.get("eos_token_id"), pad_token_id=base.get("pad_token_id"),
                         dtype="bfloat16")
    cuda = torch.cuda.is_available()
    with torch.random.fork_rng(devices=[]), torch.device("cuda" if cuda else "cpu"):
        torch.manual_seed(seed)
        # built in its final dtype: a float32 build of the 12B shape then cast would need 75 GB
        torch.set_default_dtype(torch.bfloat16 if cuda else torch.float32)
        model = Qwen2ForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    del model
    if (tiny / "generation_config.json").exists():
        shutil.copy2(tiny / "generation_config.json", out / "generation_config.json")
    done.write_text(json.dumps({"shape": shape, "parameters": n, "seed": seed, "built_by_pid": os.getpid()},
                               indent=2) + "\n")
    return out


def common_overrides(backend: str) -> list[str]:
    """What every launch of the bench sets: transformers generation, G = 8, the two domains, no logging,
    checkpoints or episode files."""
    return ["grpo.num_generations=8", "rollout.use_vllm=false", f"rollout.sandbox_backend={backend}",
            "run.logging=[]", "run.save_steps=1000000", "rollout.save_episodes=false",
            f"data.domains={json.dumps(DOMAINS)}"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ one launch
def launch(name: str, out: Path, procs: int, overrides: list[str], *, accelerate_config: str = "ddp.yaml",
           timeout: float = 3600) -> dict[str, Any]:
    """One `dojo train` launch; returns its figures (or its error)."""
    run_dir, clock = out / name, out / f"{name}-clock"
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(clock, ignore_errors=True)
    cmd = [str(Path(sys.executable).parent / "accelerate"), "launch", "--config_file",
           str(ACCELERATE_DIR / accelerate_config), "--num_processes", str(procs), "--main_process_port",
           str(free_port()), str(Path(__file__).resolve()), "--worker", str(clock), "--",
           "train", str(EXAMPLE), f"run.output_dir={run_dir}", *overrides]
    if procs == 1:  # accelerate's single-process launcher: the same script, one process, no process group
        cmd[cmd.index("--num_processes") + 1] = "1"
    log(f"{name}: {procs} process(es): {' '.join(overrides)}")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=rank_env(), cwd=ROOT)
    res: dict[str, Any] = {"procs": procs, "wall_s": round(time.perf_counter() - t0, 1), "returncode": p.returncode}
    (out / f"{name}.log").write_text(p.stdout + "\n" + p.stderr)
    if p.returncode != 0:
        tail = [line for line in p.stderr.splitlines() if "error" in line.lower() or "Error" in line][-3:]
        res["error"] = " | ".join(tail)[-1500:] or p.stderr[-1500:]
        res["out_of_memory"] = "out of memory" in p.stderr.lower()
        res["failed_ranks"] = rank_errors(clock)
        for r in res["failed_ranks"]:
            res["out_of_memory"] = res["out_of_memory"] or "out of memory" in r["error"].lower()
            log(f"{name}: rank {r['rank']} raised: {r['error'].strip().splitlines()[-1][:300]}")
        log(f"{name}: failed ({p.returncode}): {res['error'][:300]}")
        return res
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = {r["step"]: r for r in rows if "loss" in r}
    ranks = [json.loads(f.read_text()) for f in sorted(clock.glob("rank-*.json"))]
    res.update({
        "steps": len(steps),
        "stamps": next(r["stamps"] for r in ranks if r["rank"] == 0),  # train begin, then each step's end
        "num_tokens": [steps[k]["num_tokens"] for k in sorted(steps)],
        "peak_mem_gb": [round(r["peak_mem_gb"], 3) for r in sorted(ranks, key=lambda r: r["rank"])],
        "phases_gb": [{k: round(v, 3) for k, v in r.get("phases_gb", {}).items()}
                      for r in sorted(ranks, key=lambda r: r["rank"])],
        "reward": [steps[k]["reward"] for k in sorted(steps)],
        "rollout_s_steps": [steps[k].get("rollout/rollout_s") for k in sorted(steps)],  # rank 0's, per step
        "loss": [steps[k]["loss"] for k in sorted(steps)],
    })
    res.update(throughput(res))
    log(f"{name}: {res['tokens_per_s']} tokens/s, {res['step_s']} s/step, peak {res['peak_mem_gb']} GB")
    return res


def throughput(run: dict[str, Any], upto: int | None = None) -> dict[str, Any]:
    """Tokens per second over steps 2..``upto`` (step 1 is the warm-up): TRL's ``num_tokens``
    increase over the wall clock between rank 0's step ends."""
    n = min(run.get("steps") or 0, upto or 10**9)
    if n < 2:
        return {"timed_steps": 0, "step_s": None, "tokens_per_s": None, "tokens_per_s_per_process": None}
    seconds = run["stamps"][n] - run["stamps"][1]
    tokens = run["num_tokens"][n - 1] - run["num_tokens"][0]
    out = {"timed_steps": n - 1, "step_s": round(seconds / (n - 1), 3), "tokens_per_s": round(tokens / seconds, 1),
           "tokens_per_s_per_process": round(tokens / seconds / run["procs"], 1)}
    rollout = [r for r in (run.get("rollout_s_steps") or [])[1:n] if r is not None]
    if len(rollout) == n - 1:  # the rest of a step: scoring, backward, optimizer (what checkpointing costs)
        out["rollout_s"] = round(sum(rollout) / len(rollout), 3)
        out["train_s"] = round(out["step_s"] - out["rollout_s"], 3)
    return out


def agreement(a: list[float], b: list[float]) -> dict[str, Any]:
    """Paired per-step differences of two series (a - b): mean, standard error, within 2 SE."""
    d = [x - y for x, y in zip(a, b, strict=False) if x is not None and y is not None]
    if len(d) < 2:
        return {"steps": len(d), "mean_diff": d[0] if d else None, "se": None, "within_noise": None}
    mean, se = statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d))
    return {"steps": len(d), "mean_a": statistics.fmean(a[: len(d)]), "mean_b": statistics.fmean(b[: len(d)]),
            "mean_diff": mean, "se": se, "max_abs_diff": max(abs(x) for x in d), "within_noise": abs(mean) <= 2 * se}


def scaling_target(n: int) -> float:
    return SCALING_TARGETS.get(n, 0.875 * n)


def memory_figures(free: dict[str, Any], work: dict[str, Any], multi: dict[str, Any]) -> dict[str, Any]:
    """Item 1: peak GPU memory with the cache sized from free memory (``free``, as before) and to
    the work (``work``, the default now), and the tokens/s kept."""
    speed = work["tokens_per_s"] / free["tokens_per_s"]
    peaks = [*work["peak_mem_gb"], *(multi.get("peak_mem_gb") or [])]
    return {"peak_gb_free": max(free["peak_mem_gb"]), "peak_gb_work": max(work["peak_mem_gb"]),
            "peak_gb_work_ddp": max(multi["peak_mem_gb"]) if multi.get("peak_mem_gb") else None,
            "phases_gb_free": free.get("phases_gb"), "phases_gb_work": work.get("phases_gb"),
            "tokens_per_s_free": free["tokens_per_s"], "tokens_per_s_work": work["tokens_per_s"],
            "speed_kept": round(speed, 3),
            "met": max(peaks) <= MEMORY_TARGET_GB and speed >= MEMORY_SPEED_FLOOR}


def judge(result: dict[str, Any], ran: set[str]) -> dict[str, bool]:
    """Each target whose runs all ran, met or not; a target with a run missing is not judged (an
    FSDP-only call measured no scaling, so it says nothing of it)."""
    verdicts: dict[str, bool] = {}
    if {"one_small", "multi"} <= ran:
        target = scaling_target(int(result.get("nproc") or 2))
        verdicts["scaling"] = result.get("scaling") is not None and result["scaling"] >= target
    if {"one_small_free", "one_small"} <= ran:
        verdicts["memory"] = bool((result.get("memory") or {}).get("met"))
    if {"multi", "one_big"} <= ran:
        verdicts["agreement"] = bool(result.get("agreement", {}).get("reward", {}).get("within_noise"))
    fsdp = result.get("fsdp") or {}
    if {"fsdp", "fsdp_one"} <= ran and "skipped" not in fsdp:
        verdicts["fsdp_beyond_one_gpu"] = bool(fsdp.get("trains_on_n_gpus")) and not fsdp.get("fits_one_gpu")
    return verdicts


# ------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny model on CPU, 2 steps per run (a smoke run)")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6, help="steps of the scaling runs (the first is the warm-up)")
    ap.add_argument("--agreement-steps", type=int, default=20, help="steps of the 1 x B and N x B/N runs")
    ap.add_argument("--batch", type=int, default=8, help="b: episodes per process per step in the scaling runs")
    ap.add_argument("--model", choices=["tiny", "0.5b"], default=None, help="default: 0.5b with CUDA, else tiny")
    ap.add_argument("--fsdp", action="store_true", help="also the FSDP2 memory runs (CUDA only)")
    ap.add_argument("--fsdp-shape", default="auto",
                    help=f"auto (from the card's memory), one of {sorted(SHAPES)}, or hidden_size=...,num_hidden_layers=...")
    ap.add_argument("--fsdp-steps", type=int, default=3, help="Dr. GRPO steps of the FSDP runs")
    ap.add_argument("--max-completion-length", type=int, default=None)
    ap.add_argument("--gc-every", type=int, default=1,
                    help="GPU runs: gradient checkpointing of every N-th layer (1: every layer; the baseline "
                         "one_small_free runs without, as the bench did before item 1)")
    ap.add_argument("--backend", default="auto", help="sandbox backend")
    ap.add_argument("--runs", default=None,
                    help="default: one_small_free,one_small,multi,one_big,fsdp,fsdp_one (--quick: one_small,multi,one_big); "
                         "a device call has 10 minutes: e.g. the DDP runs in one call, --fsdp --runs fsdp,fsdp_one in "
                         "another; each call's baselines are in it")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--build-model", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--build-shape", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--build-seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("dojo_args", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        worker(args.worker, args.dojo_args)
        return 0
    if args.build_model is not None:
        _build_model_here(args.build_model, json.loads(args.build_shape), args.build_seed)
        return 0

    import torch

    cuda = torch.cuda.is_available()
    model = args.model or ("0.5b" if cuda and not args.quick else "tiny")
    out = args.out or Path(os.environ.get("TMPDIR", "/tmp")) / "tooldojo-bench-train-multi"
    out.mkdir(parents=True, exist_ok=True)
    n = args.nproc
    steps, agree_steps = (2, 2) if args.quick else (args.steps, args.agreement_steps)
    b = 8 if args.quick else args.batch
    mcl = args.max_completion_length or (64 if args.quick else (128 if model == "tiny" else 256))
    wanted = set((args.runs or ("one_small,multi,one_big" if args.quick else
                                "one_small_free,one_small,multi,one_big,fsdp,fsdp_one")).split(","))
    result: dict[str, Any] = {"bench": "train_multi", "quick": args.quick, "device": "cuda" if cuda else "cpu",
                              "gpu": torch.cuda.get_device_name(0) if cuda else None,
                              "gpus": torch.cuda.device_count() if cuda else 0, "nproc": n, "model": model,
                              "batch_per_process": b, "global_batch": n * b, "max_completion_length": mcl,
                              "launch": f"accelerate launch --config_file examples/accelerate/ddp.yaml "
                                        f"--num_processes {n} -m tooldojo train ...", "runs": {}}
    base = [f"grpo.max_completion_length={mcl}", *common_overrides(args.backend)]
    if args.quick:
        base += ["rollout.max_turns=1"]
    if model != "tiny":
        base += ["model.tiny=false", f"model.name_or_path={build_model(out / 'model-0.5b', SHAPES['0.5b'])}",
                 "grpo.learning_rate=1e-6", "grpo.gradient_checkpointing=true"]  # the example turns it off
        if args.gc_every > 1:
            base += [f'grpo.gradient_checkpointing_kwargs={{"every_n_layers": {args.gc_every}}}']
    # the tasks: synthesised once by the first run, read by the others
    tasks = out / "one_small" / "tasks"
    runs = result["runs"]
    keep = out / "tasks"
    if "one_small" in wanted:
        runs["one_small"] = launch("one_small", out, 1, [*base, f"grpo.max_steps={steps}",
                                                         f"grpo.per_device_train_batch_size={b}", "data.synthesize=16"])
        if tasks.exists():
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(tasks, keep)
    data = [f"data.tasks={keep}"] if keep.exists() else ["data.synthesize=16"]
    if "one_small_free" in wanted:  # the baseline of item 1: the cache sized from free memory, as before
        runs["one_small_free"] = launch("one_small_free", out, 1, [
            *base, *data, f"grpo.max_steps={steps}", f"grpo.per_device_train_batch_size={b}",
            "rollout.generation_memory=free", "grpo.gradient_checkpointing=false"])
    if "multi" in wanted:
        runs["multi"] = launch("multi", out, n, [*base, *data, f"grpo.max_steps={max(steps, agree_steps)}",
                                                 f"grpo.per_device_train_batch_size={b}"])
    if "one_big" in wanted:
        runs["one_big"] = launch("one_big", out, 1, [*base, *data, f"grpo.max_steps={agree_steps}",
                                                     f"grpo.per_device_train_batch_size={n * b}"])
    one, multi, big = runs.get("one_small", {}), runs.get("multi", {}), runs.get("one_big", {})
    if one.get("tokens_per_s") and multi.get("tokens_per_s"):
        # over the same steps (the multi run goes on for the agreement)
        same = throughput(multi, upto=one["steps"])
        result["scaling"] = round(same["tokens_per_s"] / one["tokens_per_s"], 3)
        result["scaling_steps"] = same["timed_steps"]
        # episodes per second: N x b per multi step against b per single step (tokens/s also
        # counts how long the episodes happened to be)
        result["scaling_episodes"] = round(n * one["step_s"] / same["step_s"], 3)
    free = runs.get("one_small_free", {})
    if free.get("tokens_per_s") and one.get("tokens_per_s"):
        result["memory"] = memory_figures(free, one, multi)
    if big.get("reward") and multi.get("reward"):
        k = min(len(big["reward"]), len(multi["reward"]))
        result["agreement"] = {"reward": agreement(big["reward"][:k], multi["reward"][:k]),
                               "loss": agreement(big["loss"][:k], multi["loss"][:k]),
                               "what": f"1 x {n * b} vs {n} x {b} episodes per step"}
    if args.fsdp:
        if not cuda:
            result["fsdp"] = {"skipped": "accelerate runs FSDP on GPU backends only"}
        else:
            card = torch.cuda.get_device_properties(0).total_memory
            shape_name, shape = fsdp_shape(args.fsdp_shape, card, n)
            big_model = build_model(out / f"model-{shape_name}", shape)
            meta = json.loads((big_model / "bench-model.json").read_text())
            fsdp_over = [o for o in base if not o.startswith(("model.", "grpo.learning_rate", "grpo.gradient_checkpointing"))]
            fsdp_over += ["model.tiny=false", f"model.name_or_path={big_model}", "grpo.learning_rate=1e-6",
                          *data, f"grpo.max_steps={args.fsdp_steps}", "grpo.per_device_train_batch_size=8",
                          "grpo.max_completion_length=128", "grpo.gradient_checkpointing=true"]
            if "fsdp" in wanted:
                runs["fsdp"] = launch("fsdp", out, n, fsdp_over, accelerate_config="fsdp2.yaml")
            if "fsdp_one" in wanted:
                runs["fsdp_one"] = launch("fsdp_one", out, 1, fsdp_over)
            fsdp, fsdp_one = runs.get("fsdp", {}), runs.get("fsdp_one", {})
            result["fsdp"] = {"shape": shape_name, "sizes": shape, "parameters": meta["parameters"],
                              "card_gb": round(card / 2**30, 1), "steps_wanted": args.fsdp_steps,
                              "fits_one_gpu": fsdp_one.get("returncode") == 0 if fsdp_one else None,
                              "one_gpu_out_of_memory": fsdp_one.get("out_of_memory"),
                              "trains_on_n_gpus": (fsdp.get("returncode") == 0
                                                   and (fsdp.get("steps") or 0) >= args.fsdp_steps) if fsdp else None,
                              "steps": fsdp.get("steps"), "peak_mem_gb_per_gpu": fsdp.get("peak_mem_gb"),
                              "phases_gb": fsdp.get("phases_gb"), "tokens_per_s": fsdp.get("tokens_per_s"),
                              "step_s": fsdp.get("step_s")}
    if not args.quick and cuda:
        result["targets_judged"] = judge(result, set(runs))
        result["target_met"] = all(result["targets_judged"].values()) if result["targets_judged"] else None
    else:
        result["target_met"] = None  # smoke values: 2 shared cores, no target judged
    result["targets"] = {"scaling_min": scaling_target(n), "agreement": "|mean paired diff| <= 2 SE",
                         "memory": f"peak <= {MEMORY_TARGET_GB} GB per GPU at >= {MEMORY_SPEED_FLOOR:.0%} of the "
                                   "tokens/s with the cache sized from free memory"}
    _common.emit(result, head=("bench", "quick"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
