"""The training config: plain data, loaded from YAML plus dotted ``key=value`` overrides.

    cfg = load_config("examples/train_tiny.yaml", ["grpo.max_steps=5", "rollout.use_vllm=false"])
    args = to_grpo_config(cfg)                      # a trl.GRPOConfig (imports trl/torch only here)

Sections: ``model`` (a hub id / path, or ``tiny: true`` for :func:`rl.tiny.build_tiny_model`),
``data`` (tasks dir, domains), ``grpo`` (the optimiser and loss), ``rollout`` (vLLM and the
multi-turn episode limits), ``reward`` (a :class:`rewards.compose.RewardConfig`) and ``run``
(output, seed, logging, checkpoints).

Defaults are Dr. GRPO as TRL 1.16 implements it (``loss_type="dr_grpo"``, ``scale_rewards="none"``,
``beta=0.0``; TRL's own defaults are DAPO with group-std scaling). Dr. GRPO divides each
micro-batch's token-summed loss by ``batch_size * max_completion_length``, so
``grpo.max_completion_length`` is the loss normaliser as well as the completion budget: it has a
default, but a config that leaves it unset is logged as a warning, and its value is logged on
every load.

Every problem is a :class:`ConfigError` whose message names the dotted field and the reason
(``grpo.loss_type: Input should be 'grpo', 'dr_grpo', ...``), raised by :func:`load_config`
before anything touches a model: this module imports neither torch nor transformers until
:func:`to_grpo_config` / :func:`resolve_model_path` are called.
"""

from __future__ import annotations

import logging
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from rewards.compose import RewardConfig

__all__ = [
    "ConfigError",
    "DataConfig",
    "DifficultyFilterConfig",
    "GRPOSection",
    "ModelConfig",
    "ReplayConfig",
    "RolloutConfig",
    "RunConfig",
    "TinyModelParams",
    "TrainConfig",
    "apply_overrides",
    "load_config",
    "resolve_model_path",
    "to_grpo_config",
]

log = logging.getLogger("tooldojo.rl")

LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
DEFAULT_MAX_COMPLETION_LENGTH = 2048
# Head sizes vLLM's CPU attention implements (the same list rl.tiny checks; kept in sync by a test).
_VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


class ConfigError(ValueError):
    """A config problem. ``problems`` is a list of ``(dotted field or None, reason)``; the message
    is one ``field: reason`` line per problem."""

    def __init__(self, problems: list[tuple[str | None, str]] | str, field: str | None = None):
        if isinstance(problems, str):
            problems = [(field, problems)]
        self.problems = problems
        self.field = problems[0][0] if problems else None
        self.reason = problems[0][1] if problems else ""
        super().__init__("\n".join(f"{f}: {r}" if f else r for f, r in problems))


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# ======================================================================= sections
class TinyModelParams(_Section):
    """Arguments of :func:`rl.tiny.build_tiny_model`."""

    out_dir: str | None = Field(None, description="where to build it; None: rl.tiny.default_cache_dir()")
    seed: int = 0
    vocab_size: int = Field(2048, ge=261)
    hidden: int = Field(128, gt=0)
    layers: int = Field(2, gt=0)
    heads: int = Field(4, gt=0)
    kv_heads: int | None = Field(None, gt=0)
    intermediate: int | None = Field(None, gt=0)
    max_positions: int = Field(2048, gt=0)

    @model_validator(mode="after")
    def _shape(self) -> TinyModelParams:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.hidden // self.heads not in _VLLM_CPU_HEAD_SIZES:
            raise ValueError(f"head size hidden/heads = {self.hidden // self.heads} is not one vLLM's CPU "
                             f"attention supports {_VLLM_CPU_HEAD_SIZES}")
        kv = self.kv_heads or max(1, self.heads // 2)
        if self.heads % kv:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({kv})")
        return self


class ModelConfig(_Section):
    """The policy: ``name_or_path`` (a hub id or a local folder) or ``tiny: true``."""

    name_or_path: str | None = None
    tiny: bool = False
    tiny_params: TinyModelParams = Field(default_factory=TinyModelParams)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if self.tiny and self.name_or_path:
            raise ValueError("set either name_or_path or tiny: true, not both")
        if not self.tiny and not self.name_or_path:
            raise ValueError("set name_or_path (a hub id or a local folder) or tiny: true")
        return self


class DataConfig(_Section):
    tasks: str | None = Field(None, description="a tasks folder written by `dojo synth tasks` / synth.export_tasks; "
                                                "None: synthesise `synthesize` tasks into the run directory")
    synthesize: int = Field(32, gt=0, le=1_000_000, description="how many tasks to synthesise when `tasks` is None")
    domains: list[str] | None = Field(None, description="train only on these domains; None: all")
    domain_dirs: list[str] = Field(default_factory=list, description="domain folders (or folders of them) outside "
                                   "the package to load; their domains are then known by name")
    families: list[str] | None = Field(None, description="train only on tasks of these families (synth.task_families."
                                       "family_of: lookup_act, read_report, ask_user, else the first gold tool's "
                                       "name); None: all")
    max_tasks: int | None = Field(None, gt=0)
    shuffle: bool = True
    balance: Literal["none", "kind"] = Field(
        "none", description="how RL draws its tasks: uniformly, or `kind`: each kind of task (its family and the "
                            "sort of record it names, rl.balance) equally often, however many tasks it has")

    @field_validator("domains", "families")
    @classmethod
    def _not_empty(cls, v: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if v is not None and not v:
            one = {"domains": "domain", "families": "family"}[info.field_name]
            raise ValueError(f"an empty {one} list selects nothing; use null for all {info.field_name}")
        return v

    @field_validator("domain_dirs")
    @classmethod
    def _domain_dirs(cls, v: list[str]) -> list[str]:
        from toolzoo.domain_dirs import use

        try:
            use(v)
        except ValueError as e:  # SpecError: a missing folder, a reserved name
            raise ValueError(str(e)) from None
        return v


class GRPOSection(_Section):
    """The loss and the optimiser. Field names are GRPOConfig's; defaults give Dr. GRPO."""

    loss_type: LossType = "dr_grpo"
    scale_rewards: Literal["group", "batch", "none"] = "none"
    beta: float = Field(0.0, ge=0.0, description="KL coefficient; 0 loads no reference model")
    num_generations: int = Field(8, ge=2, description="G: completions per prompt")
    max_completion_length: int = Field(
        DEFAULT_MAX_COMPLETION_LENGTH, gt=0,
        description="completion budget (all turns, tool output included) AND the Dr. GRPO loss normaliser")
    learning_rate: float = Field(1e-6, gt=0.0)
    lr_scheduler_type: str = "constant"
    warmup_steps: int = Field(0, ge=0)
    weight_decay: float = Field(0.0, ge=0.0)
    max_grad_norm: float = Field(1.0, gt=0.0)
    per_device_train_batch_size: int = Field(8, gt=0)
    gradient_accumulation_steps: int = Field(1, gt=0)
    steps_per_generation: int | None = Field(None, gt=0)
    num_iterations: int = Field(1, gt=0, description="PPO epochs per generation batch (mu)")
    max_steps: int = Field(100, gt=0)
    temperature: float = Field(1.0, gt=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    epsilon: float = Field(0.2, gt=0.0)
    epsilon_high: float | None = Field(None, gt=0.0)
    importance_sampling_level: Literal["token", "sequence"] = "token"
    mask_truncated_completions: bool = False
    gradient_checkpointing: bool = True
    gradient_checkpointing_kwargs: dict[str, Any] | None = Field(
        None, description="transformers' gradient checkpointing options, e.g. {every_n_layers: 2}: checkpoint every "
                          "other layer, half the activations kept at half the recompute")


class DifficultyFilterConfig(_Section):
    """Task-level difficulty filtering before rollout (rl.difficulty); off by default."""

    enabled: bool = Field(False, description="replace a task whose last `window` groups in this run all had equal "
                                             "rewards (always or never solved) by another task before rolling it out")
    window: int = Field(1, ge=1, le=16, description="how many of a task's latest groups must all be flat to mark it")
    readmit: float = Field(0.1, ge=0.0, le=1.0, description="the chance that a marked task is rolled out anyway, so a "
                                                            "task the policy has since learned or forgotten comes back")


class RolloutConfig(_Section):
    """How episodes are generated. The vLLM knobs go to GRPOConfig; the episode limits and the
    user simulator are read by the multi-turn environment."""

    use_vllm: bool = Field(True, description="generate with vLLM (colocated); where vLLM is not installed, "
                                              "transformers generates instead, with a warning")
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0.0, le=1.0)
    vllm_enable_sleep_mode: bool = False
    vllm_server_base_url: str | None = None
    vllm_importance_sampling_correction: bool = True
    max_turns: int = Field(8, gt=0, description="user/assistant turns per episode")
    max_tool_calls: int = Field(16, ge=0, description="tool calls per episode")
    user: Literal["scripted", "llm"] = "scripted"
    user_model: str | None = Field(None, description="the user simulator's model when user: llm")
    user_base_url: str | None = Field(None, description="its OpenAI-compatible endpoint when user: llm")
    user_api_key_env: str = Field("OPENAI_API_KEY", description="the environment variable holding its API key")
    sandbox_backend: Literal["auto", "docker", "local", "kubernetes"] = "auto"
    sandboxes: int | None = Field(None, gt=0, le=4096, description="warm sandboxes in the pool; None: one per rollout")
    tool_timeout_s: float = Field(10.0, gt=0.0)
    vllm_max_num_batched_tokens: int = Field(
        16384, gt=0, description="the colocated engine's tokens per step (TRL uses 4096): whole batches of "
                                 "prompts prefill in one step")
    system_prompt: Literal["policy", "brief"] = Field(
        "policy", description="the agent's system prompt: the domain policy, or one sentence (tiny models)")
    save_episodes: bool = Field(True, description="write every step's episodes to <run>/episodes/step-N.jsonl")
    dynamic_sampling: int = Field(
        0, ge=0, description="rounds of DAPO-style dynamic sampling: a group whose rewards are all equal (no "
                             "gradient) is replaced by a varying group of another task; 0: off. The logged reward "
                             "is then that of the groups trained on, not of the sampled tasks")
    difficulty_filter: DifficultyFilterConfig = Field(
        default_factory=DifficultyFilterConfig, description="skip tasks the policy lately always or never solved, "
                                                            "before rollout (rl.difficulty); off by default")
    extra_generations: int = Field(
        0, ge=0, le=16, description="rounds of G more episodes of the SAME task for a hard group (rewards all equal, "
                                    "none solved), keeping G of the pool (rl.hard_groups); 0: off")
    hf_generation: Literal["auto", "padded", "continuous", "sequential"] = Field(
        "auto", description="without vLLM: padded model.generate batches, or transformers' continuous batching "
                            "(an episode's next turn joins the running batch); auto: continuous on CUDA; "
                            "sequential: one request at a time, each from its own seed, so samples do not depend "
                            "on the number of processes (slow; for checking multi-process runs)")
    hf_continuous_batching: dict[str, Any] = Field(
        default_factory=dict, description="transformers ContinuousBatchingConfig keywords over rl.continuous's "
                                          "defaults (the cache sized to the work, CUDA graphs)")
    generation_memory: Literal["work", "free"] = Field(
        "work", description="how transformers generation sizes its KV cache on a GPU: work, from the step's episodes "
                            "(this rank's generation batch x (longest prompt + grpo.max_completion_length)); free, a "
                            "share of free GPU memory (generation_memory_cap), as transformers does")
    generation_memory_cap: float = Field(
        0.5, gt=0.0, le=1.0, description="the largest share of free GPU memory generation's KV cache may take "
                                         "(transformers' max_memory_percent; hf_continuous_batching's wins)")
    fsdp_generation: Literal["sharded", "replica"] = Field(
        "sharded", description="under FSDP: sharded, every rank generates with the sharded policy in lockstep (FSDP "
                               "gathers one layer at a time, no full copy); replica, a full unsharded copy per rank "
                               "refreshed each step (faster, but every GPU must hold the whole model)")
    vllm_streaming: bool = Field(
        False, description="stream requests into the colocated vLLM engine (rl.vllm_stream): an episode's next "
                           "turn joins the running batch instead of waiting for the turn's slowest answer; faster, "
                           "but the samples no longer reproduce exactly from their seeds")
    vllm_max_model_length: int | None = Field(None, gt=0, description="vLLM's context; None: the model's")
    vllm_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="the colocated engine's dtype; auto: the trainer's (float32 on CPU, bf16 on GPU), "
                            "so sampling log-probs match the trainer's")

    @model_validator(mode="after")
    def _user(self) -> RolloutConfig:
        if self.user == "llm" and not (self.user_model and self.user_base_url):
            raise ValueError("user: llm needs user_model and user_base_url")
        if self.hf_continuous_batching:
            from rl.continuous import check_cb_config

            check_cb_config(self.hf_continuous_batching)
        if self.use_vllm and self.vllm_mode != "colocate":
            raise ValueError("the multi-turn rollout drives vLLM in colocate mode only (vllm_mode: colocate)")
        return self


class RunConfig(_Section):
    output_dir: str = "runs/train"
    run_name: str | None = None
    seed: int = 0
    logging: list[Literal["trackio", "tensorboard"]] = Field(
        default_factory=list, description="report_to backends; [] logs to the console only")
    logging_steps: int = Field(1, gt=0)
    save_steps: int = Field(50, gt=0)
    save_total_limit: int | None = Field(None, gt=0)
    resume: bool | str = Field(False, description="true: the latest checkpoint in output_dir; a path: that checkpoint")


class TrainerConfig(_Section):
    """How the trainer computes the loss it is given (not what it optimises)."""

    # Off for `dojo train` (the demo turns it on). It computes the same log-probs as the repeated rows
    # (<= 2.9e-6 nats at every step of a 20-step run), but the tiny example (random weights, Adam at
    # lr 1e-2) is chaotic: that rounding forks its seed-0 trajectory at step 10 into one that ends
    # with every episode at the token budget, no reward variance and no gradient, as the repeated
    # path does at seed 5 (bench/results/prefix_drift_cpu.json). The tests pinned to those
    # trajectories move with the default, once the example leaves that absorbing state.
    shared_prefix: bool = Field(
        False, description="score each group's prompt once, its completions attending to it through a shared-prefix "
                          "mask (rl.shared_prefix): the same log-probs and gradients, fewer tokens; where it cannot "
                          "apply (no shared prompt, an attention function without custom masks) the repeated rows "
                          "are scored, logged once")
    shared_prefix_check_every: int = Field(
        0, ge=0, description="with shared_prefix: every N optimizer steps, also score the step's first batch on the "
                             "repeated rows (no gradients) and log shared_prefix/max_logp_diff; over "
                             "shared_prefix_tolerance, the rest of the run scores repeated rows (0: never)")
    shared_prefix_tolerance: float = Field(
        1e-3, gt=0.0, description="the largest per-token log-prob difference (nats) the check accepts; float32 "
                                  "agrees within ~1e-5 (tests/rl/test_shared_prefix.py); raise it for bfloat16")
    fsdp_fp32_master: bool = Field(
        False, description="under FSDP with bf16: accelerate's float32 master copy of the parameters (its default "
                           "under mixed precision: 16 bytes a parameter with Adam, sharded). false: parameters, "
                           "gradients and Adam state stay in the model's bf16 (8 bytes a parameter), as on one GPU")


class ReplayConfig(_Section):
    """Priming replay (rl.replay): the SFT loss on the priming traces added to Dr. GRPO's, so RL keeps
    what priming taught where its groups carry no reward variance. Off at coef 0."""

    data: str | None = Field(None, description="the priming traces: a folder written by "
                             "synth.sft_data.write_trajectories (`dojo demo` fills in its own <out>/prime)")
    coef: float = Field(0.0, ge=0.0, description="weight of the replayed traces' mean token NLL in the loss")
    batch_size: int = Field(16, gt=0, description="traces replayed per micro-step (their logits, batch_size x "
                            "max_length x vocabulary, are held for the backward pass: lower it for a large vocabulary)")
    max_length: int = Field(1024, gt=0, description="longer traces are truncated (as rl.sft truncates them)")

    @model_validator(mode="after")
    def _has_data(self) -> ReplayConfig:
        if self.coef > 0 and not self.data:
            raise ValueError("coef > 0 needs replay.data (the priming traces' folder)")
        return self


class TrainConfig(_Section):
    model: ModelConfig
    data: DataConfig = Field(default_factory=DataConfig)
    grpo: GRPOSection = Field(default_factory=GRPOSection)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig.default)
    run: RunConfig = Field(default_factory=RunConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    replay: ReplayConfig = Field(default_factory=ReplayConfig)

    @property
    def is_dr_grpo(self) -> bool:
        g = self.grpo
        return g.loss_type == "dr_grpo" and g.scale_rewards == "none" and g.beta == 0.0

    @property
    def max_completion_length_explicit(self) -> bool:
        return "max_completion_length" in self.grpo.model_fields_set

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


# ==================================================================== errors
_UNION_TAGS = {"bool", "str", "int", "float", "list", "dict", "none", "NoneType"}


def _annotation_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            m = _annotation_model(arg)
            if m is not None:
                return m
    return None


def _model_at(path: Iterable[str | int], root: type[BaseModel] | None = None) -> type[BaseModel] | None:
    """The pydantic model a dotted path leads to from `root` (TrainConfig), if any (list indices are stepped over)."""
    model: type[BaseModel] | None = root or TrainConfig
    for part in path:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        if typing.get_origin(ann) is list:
            ann = typing.get_args(ann)[0]
        model = _annotation_model(ann)
    return model


def _loc_path(loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    return tuple(p for p in loc if isinstance(p, int) or (p not in _UNION_TAGS and "[" not in str(p)))


def _translate(e: ValidationError, root: type[BaseModel] | None = None) -> ConfigError:
    """One ConfigError from a validation error of `root` (TrainConfig; the demo passes DemoConfig)."""
    merged: dict[str, list[str]] = {}
    for err in e.errors(include_url=False):
        path = _loc_path(tuple(err["loc"]))
        dotted = ".".join(map(str, path)) or None
        if err["type"] == "extra_forbidden":
            parent = _model_at(path[:-1], root)
            known = f"; known keys here: {', '.join(parent.model_fields)}" if parent is not None else ""
            reason = f"unknown key{known}"
        elif err["type"] == "missing":
            reason = "required, but not set"
        else:
            reason = err["msg"].removeprefix("Value error, ")
        msgs = merged.setdefault(dotted or "config", [])
        if reason not in msgs:
            msgs.append(reason)
    return ConfigError([(f, "; ".join(r)) for f, r in merged.items()])


# ================================================================= overrides
def _parse_override(item: str) -> tuple[list[str | int], Any]:
    import yaml

    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"an override must look like dotted.key=value, got {item!r}", field=key or None)
    parts: list[str | int] = []
    for p in key.split("."):
        if not p:
            raise ConfigError(f"empty part in the dotted key {key!r}", field=key)
        parts.append(int(p) if p.isdigit() else p)
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        raise ConfigError(f"the value {raw!r} is not valid YAML: {e}", field=key) from e
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a raw config mapping (in place; also returned).

    Values are YAML scalars or flow collections (``3``, ``1e-6``, ``true``, ``null``, ``[a, b]``,
    ``{k: v}``). Missing sections are created; a numeric part indexes a list that is already
    there (``reward.components.0.weight=0.5``). Unknown keys are left for validation to reject.
    """
    for item in overrides:
        parts, value = _parse_override(item)
        node: Any = data
        for i, part in enumerate(parts):
            here = ".".join(map(str, parts[: i + 1]))
            last = i == len(parts) - 1
            if isinstance(node, list):
                if not isinstance(part, int):
                    raise ConfigError(f"is a list; index it with a number, not {part!r}", field=".".join(map(str, parts[:i])))
                if not 0 <= part < len(node):
                    raise ConfigError(f"index out of range (the list has {len(node)} items)", field=here)
            elif isinstance(node, dict):
                if isinstance(part, int):
                    part = str(part)
            else:
                raise ConfigError(f"is a {type(node).__name__} ({node!r}), not a section",
                                  field=".".join(map(str, parts[:i])))
            if last:
                node[part] = value
            else:
                if isinstance(node, dict) and (part not in node or node[part] is None):
                    if isinstance(parts[i + 1], int):
                        raise ConfigError("no list here to index: set the whole list in the YAML or as "
                                          f"{here}=[...]", field=here)
                    node[part] = {}
                node = node[part]
    return data


# ====================================================================== load
def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """A config file's YAML mapping (an empty file: {}); :class:`ConfigError` saying what is wrong."""
    from sandboxes.cli_files import InputFileError, load_yaml

    p = Path(path)
    try:
        data = load_yaml(p, "config file")
    except InputFileError as e:
        raise ConfigError(str(e)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p} must hold a mapping of sections, not a {type(data).__name__}")
    return data


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> TrainConfig:
    """Load a YAML config (or start from nothing when ``path`` is None), apply overrides, validate.

    Raises :class:`ConfigError` naming the field on any problem. Touches no model.
    """
    data = read_yaml_mapping(path) if path is not None else {}
    data = apply_overrides(data, list(overrides))
    cfg = validate_config(data)
    check_batch(cfg)
    _log_loss_setup(cfg)
    return cfg


def check_data(cfg: TrainConfig) -> None:
    """The data section against the disk and the zoo: the domains exist, and so do ``data.tasks``' tasks
    (read and parsed here, so a bad file fails before the run directory is written) and the replayed
    priming traces."""
    from synth.tasks import check_domains, load_tasks

    d = cfg.data
    if d.domains is not None:
        try:
            check_domains(d.domains)
        except ValueError as e:
            raise ConfigError(str(e), field="data.domains") from None
    if d.tasks is not None:
        try:
            load_tasks(d.tasks)
        except (OSError, ValueError) as e:
            raise ConfigError(str(e), field="data.tasks") from None
    if cfg.replay.coef > 0:
        from rl.replay import ReplayError, traces_folder

        try:
            traces_folder(cfg.replay.data)
        except ReplayError as e:
            raise ConfigError(str(e), field="replay.data") from None


def check_batch(cfg: TrainConfig, world_size: int | None = None) -> None:
    """TRL's rule that a generation batch holds whole groups (``GRPOConfig.__post_init__``), checked
    here so that a bad ``num_generations`` fails before the run writes or synthesises anything.
    `world_size`: the processes of the run (default: $WORLD_SIZE, as torchrun and accelerate set it)."""
    import os

    g = cfg.grpo
    world = world_size if world_size is not None else int(os.environ.get("WORLD_SIZE") or 1)
    batch = g.per_device_train_batch_size * world * (g.steps_per_generation or g.gradient_accumulation_steps)
    if batch % g.num_generations:
        raise ConfigError(f"the generation batch (per_device_train_batch_size x {world} process(es) x "
                          f"steps_per_generation = {batch}) must hold whole groups of num_generations "
                          f"({g.num_generations})", field="grpo.num_generations")


def validate_config(data: Mapping[str, Any]) -> TrainConfig:
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as e:
        raise _translate(e) from None


def _log_loss_setup(cfg: TrainConfig) -> None:
    g = cfg.grpo
    if not cfg.max_completion_length_explicit:
        log.warning("grpo.max_completion_length is not set: using the default %d. It is the completion budget and "
                    "the Dr. GRPO loss normaliser; choose it deliberately.", g.max_completion_length)
    log.info("loss: %s, scale_rewards=%s, beta=%s, max_completion_length=%d (normaliser: batch x %d)",
             g.loss_type, g.scale_rewards, g.beta, g.max_completion_length, g.max_completion_length)
    if not cfg.is_dr_grpo:
        log.warning("this config is not Dr. GRPO (loss_type=%s, scale_rewards=%s, beta=%s)",
                    g.loss_type, g.scale_rewards, g.beta)


# ================================================================== to TRL
def resolve_model_path(cfg: TrainConfig) -> str:
    """``model.name_or_path``, or the tiny model's folder (built on first use)."""
    if not cfg.model.tiny:
        assert cfg.model.name_or_path is not None
        return cfg.model.name_or_path
    from rl.tiny import build_tiny_model

    return str(build_tiny_model(**cfg.model.tiny_params.model_dump()))


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def to_grpo_config(cfg: TrainConfig, **extra: Any):
    """The ``trl.GRPOConfig`` for ``cfg``: CPU (``use_cpu``) without CUDA, bf16 only on CUDA.
    ``extra`` sets further GRPOConfig fields. TRL's own checks become :class:`ConfigError`."""
    import torch
    from trl import GRPOConfig

    g, ro, run = cfg.grpo, cfg.rollout, cfg.run
    cuda = torch.cuda.is_available()
    if cfg.model.dtype == "auto":
        bf16 = cuda and torch.cuda.is_bf16_supported()
    else:
        bf16 = cuda and cfg.model.dtype == "bfloat16"
    kwargs: dict[str, Any] = dict(
        output_dir=run.output_dir,
        run_name=run.run_name,
        seed=run.seed,
        report_to=list(run.logging) or "none",
        logging_steps=run.logging_steps,
        save_steps=run.save_steps,
        save_total_limit=run.save_total_limit,
        use_cpu=not cuda,
        bf16=bf16,
        fp16=cuda and cfg.model.dtype == "float16",
        **g.model_dump(),
        use_vllm=ro.use_vllm and vllm_available(),
        vllm_mode=ro.vllm_mode,
        vllm_gpu_memory_utilization=ro.vllm_gpu_memory_utilization,
        vllm_enable_sleep_mode=ro.vllm_enable_sleep_mode,
        vllm_server_base_url=ro.vllm_server_base_url,
        vllm_importance_sampling_correction=ro.vllm_importance_sampling_correction,
        vllm_max_model_length=ro.vllm_max_model_length,
    )
    kwargs.update(extra)
    if ro.use_vllm and not kwargs["use_vllm"]:
        log.warning("rollout.use_vllm is true but vLLM is not installed: generating with transformers (slower)")
    try:
        args = GRPOConfig(**kwargs)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"TRL rejected the config: {e}") from e
    log.info("GRPOConfig: loss_type=%s scale_rewards=%s beta=%s max_completion_length=%d use_cpu=%s bf16=%s",
             args.loss_type, args.scale_rewards, args.beta, args.max_completion_length, args.use_cpu, args.bf16)
    return args
