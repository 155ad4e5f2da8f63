"""The trainers bench/train_step.py times, each in a subprocess of its own (`train_step.py --worker
KIND`): ours (rl.trainer.train, its generate calls and rollouts recorded), bare TRL on the same
config and prompts, and the paired mode in which they take their steps in turn."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.train_step_setup import EXAMPLE, ROOT, log, overrides, peak_mem_gb


TRAIN_STEP = Path(__file__).resolve().with_name("train_step.py")  # the script a worker subprocess runs
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
        p = subprocess.run([sys.executable, str(TRAIN_STEP), "--worker", kind, "--spec", str(spec_path)],
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
        procs[kind] = subprocess.Popen([sys.executable, str(TRAIN_STEP), "--worker", kind, "--spec",
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
