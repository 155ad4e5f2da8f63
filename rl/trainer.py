"""Dr. GRPO training, top to bottom: config -> tasks -> model -> sandboxed multi-turn rollouts -> TRL.

    cfg = load_config("examples/train_tiny.yaml", ["grpo.max_steps=5"])
    result = train(cfg, run_dir=Path("runs/x"))

1. Tasks: ``data.tasks`` (a folder from ``dojo synth tasks``), or ``data.synthesize`` fresh ones
   from the seed zoo, written into the run directory.
2. The policy: ``model.name_or_path`` or the offline tiny model (:mod:`rl.tiny`).
3. Rollouts: :class:`rl.rollout.MultiTurnRollout` is TRL's ``rollout_func``: each prompt is one
   sandboxed episode (scripted or LLM user, the task's tools, the :mod:`rewards` composite).
   With ``rollout.use_vllm`` TRL's colocated vLLM engine generates; TRL's weight sync into it is
   replaced by :mod:`rl.vllm_sync` (vLLM's CPU backend cannot take TRL's ``load_weights``).
4. ``GRPOTrainer`` with Dr. GRPO's settings (``rl.config.to_grpo_config``) optimises; with
   ``trainer.shared_prefix`` (default) it scores each group's prompt once (:mod:`rl.shared_prefix`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rl.config import ConfigError, TrainConfig, resolve_model_path, to_grpo_config

log = logging.getLogger("tooldojo.rl")

__all__ = ["TrainResult", "build_trainer", "load_train_tasks", "train"]


@dataclass
class TrainResult:
    run_dir: Path
    steps: int
    final_reward_mean: float | None
    first_reward_mean: float | None
    metrics: dict[str, Any] = field(default_factory=dict)
    log_history: list[dict[str, Any]] = field(default_factory=list)


def load_train_tasks(cfg: TrainConfig, run_dir: Path) -> list:
    """The training tasks: from ``data.tasks``, or synthesised into ``run_dir/tasks`` (reused on resume)."""
    from synth.tasks import export_tasks, load_tasks, synthesize_tasks

    d = cfg.data
    if d.tasks is not None:
        try:
            tasks = load_tasks(d.tasks)
        except FileNotFoundError as e:
            raise ConfigError(str(e), field="data.tasks") from e
    elif (run_dir / "tasks" / "tasks.jsonl").exists():
        tasks = load_tasks(run_dir / "tasks")
    else:
        from toolzoo.domain_dirs import use

        mine = use(d.domain_dirs)
        made = synthesize_tasks(d.synthesize, seed=cfg.run.seed, domains=d.domains or mine or None,
                                backend=cfg.rollout.sandbox_backend, sandboxes=min(4, d.synthesize))
        export_tasks(made, run_dir / "tasks")
        tasks = made.tasks
    if d.domains is not None:
        tasks = [t for t in tasks if t.domain in d.domains]
    if d.families is not None:
        from synth.task_families import family_of

        # RL learns only from groups with reward variance; tasks the primed policy always solves add none
        tasks = [t for t in tasks if family_of(t) in d.families]
        if not tasks:
            raise ConfigError(f"no training task is of the families {d.families}", field="data.families")
    if d.max_tasks is not None:
        tasks = tasks[: d.max_tasks]
    if not tasks:
        raise ConfigError("no training tasks left after the domain filter", field="data.domains")
    return tasks


def _user_factory(cfg: TrainConfig):
    from synth.usersim import LLMUser, ScriptedUser

    ro = cfg.rollout
    if ro.user == "scripted":
        return lambda task: ScriptedUser(max_turns=ro.max_turns)
    from synth.llm import LLMClient, LLMConfig

    client = LLMClient(LLMConfig(base_url=ro.user_base_url, model=ro.user_model, api_key_env=ro.user_api_key_env))
    return lambda task: LLMUser(client, max_turns=ro.max_turns, seed=cfg.run.seed)


def _load_tokenizer(path: str):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def _keep_checkpointing_every_n(model: Any, kwargs: dict[str, Any] | None) -> None:
    """Make ``every_n_layers`` (and ``offload``) in ``grpo.gradient_checkpointing_kwargs`` hold for the
    whole run. transformers' Trainer takes them out before enabling checkpointing, but TRL re-enables
    it after each scoring pass with the raw kwargs, which torch's checkpoint then refuses ("Unexpected
    keyword arguments: every_n_layers"); here every enable gets them as transformers' own keywords."""
    extra = {k: v for k, v in (kwargs or {}).items() if k in ("every_n_layers", "offload")}
    if not extra or not hasattr(model, "gradient_checkpointing_enable"):
        return
    enable = model.gradient_checkpointing_enable

    def enable_every_n(gradient_checkpointing_kwargs: dict[str, Any] | None = None, **kw: Any) -> Any:
        rest = {k: v for k, v in (gradient_checkpointing_kwargs or {}).items() if k not in extra}
        return enable(gradient_checkpointing_kwargs=rest or None, **{**kw, **extra})

    model.gradient_checkpointing_enable = enable_every_n


def vllm_cache_kwargs(cfg: TrainConfig, rollout: Any, model_path: str, *, cuda: bool | None = None) -> dict[str, Any]:
    """The colocated vLLM engine's KV cache on a GPU, sized to the work as transformers generation's
    is (rl.continuous.work_sized): this rank's generation batch x (longest prompt + completion
    budget) tokens, as ``kv_cache_memory_bytes``, instead of what ``vllm_gpu_memory_utilization``
    leaves. Nothing on the CPU backend (its cache is VLLM_CPU_KVCACHE_SPACE) or with
    ``rollout.generation_memory: free``."""
    import torch

    cuda = torch.cuda.is_available() if cuda is None else cuda
    if not cuda or cfg.rollout.generation_memory != "work":
        return {}
    from transformers import AutoConfig

    from rl.continuous import kv_bytes_per_token, work_sized

    g = cfg.grpo
    work = rollout.cache_work(g.per_device_train_batch_size * (g.steps_per_generation or g.gradient_accumulation_steps))
    blocks = work_sized(work, 16)["num_blocks"]  # vLLM's default block size
    return {"kv_cache_memory_bytes": blocks * 16 * kv_bytes_per_token(AutoConfig.from_pretrained(model_path))}


def fsdp_requested() -> bool:
    """Whether the launch asks for FSDP (accelerate's config sets this for every process)."""
    return os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"


def build_trainer(cfg: TrainConfig, run_dir: Path, rollout: Any, tokenizer: Any, model_path: str,
                  callbacks: list[Any] | None = None, **grpo_extra: Any):
    """The ``GRPOTrainer`` for ``cfg`` whose ``rollout_func`` is ``rollout`` (entered)."""
    from rl.run import configure_logging, trainer_kwargs
    from rl.shared_prefix import trainer_class

    configure_logging(cfg, run_dir)  # trackio and tensorboard write under run_dir, trackio stays local
    # The dataset comes in our own seeded order (MultiTurnRollout.dataset): a prefix that does not
    # depend on the run's length, so a resumed run sees the same rows; TRL must not re-shuffle it.
    # (every parameter of a causal LM takes part in the loss: DDP need not search for unused ones)
    args = to_grpo_config(cfg, **{**trainer_kwargs(cfg, run_dir), "shuffle_dataset": False,
                                  "ddp_find_unused_parameters": False, **grpo_extra})
    dtype = cfg.model.dtype if cfg.model.dtype != "auto" else ("bfloat16" if args.bf16 else "float32")
    if fsdp_requested() and args.bf16 and dtype == "bfloat16" and not cfg.trainer.fsdp_fp32_master:
        # Under mixed precision accelerate's FSDP2 upcasts every parameter to a float32 master copy
        # (16 bytes a parameter with Adam): sharded over 2 GPUs that is what one GPU holds in bf16,
        # so FSDP would train nothing larger. Without it the weights, gradients and Adam state stay
        # bf16, as on one GPU, and compute is bf16 anyway.
        args.bf16, args.mixed_precision = False, "no"
    if args.use_vllm:
        from rl.vllm_sync import patch_trl_colocate_sync, set_colocate_engine_kwargs

        patch_trl_colocate_sync()
        ro_dtype = cfg.rollout.vllm_dtype
        # TRL caps a step's prefill at 4096 tokens; a batch of long multi-turn prompts would then be
        # prefilled in chunks, which seeded sampling cannot survive on CPU (see VLLMGenerator.waves).
        set_colocate_engine_kwargs(dtype=dtype if ro_dtype == "auto" else ro_dtype,
                                   max_num_batched_tokens=cfg.rollout.vllm_max_num_batched_tokens,
                                   **vllm_cache_kwargs(cfg, rollout, model_path))
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB; the CPU engine's default is larger
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL 1.16; we own it
    args.model_init_kwargs = {**(args.model_init_kwargs or {}), "dtype": dtype}
    # one epoch for the whole run: prompts per optimizer step (all processes) x steps (see MultiTurnRollout.dataset)
    prompts = args.max_steps * args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
    dataset = rollout.dataset(prompts // args.num_generations + 1, seed=cfg.run.seed, shuffle=cfg.data.shuffle)
    cls = trainer_class(cfg.trainer.shared_prefix)
    if cfg.replay.coef > 0:
        from rl.replay import with_replay

        cls = with_replay(cls)
    trainer = cls(model=model_path, reward_funcs=[rollout.reward_func], args=args, train_dataset=dataset,
                  processing_class=tokenizer, rollout_func=rollout, callbacks=callbacks or [])
    if cfg.replay.coef > 0:
        from rl.replay import ReplayError, install_replay

        try:  # each rank its own order: the ranks' replayed traces differ, as their episodes do
            n = install_replay(trainer, cfg.replay, tokenizer, seed=cfg.run.seed * 1009 + args.process_index)
        except ReplayError as e:
            raise ConfigError(str(e), field="replay.data") from None
        log.info("priming replay: %d traces, %d a micro-step, coef %g", n, cfg.replay.batch_size, cfg.replay.coef)
    _keep_checkpointing_every_n(trainer.model, args.gradient_checkpointing_kwargs)
    if cfg.trainer.shared_prefix:
        trainer.check_every = cfg.trainer.shared_prefix_check_every
        trainer.check_tolerance = cfg.trainer.shared_prefix_tolerance
    if args.world_size > 1 and args.device.type == "cpu":
        from rl.distributed import allow_indexed_cpu_restore

        allow_indexed_cpu_restore()  # resuming loads the optimizer onto cpu:<rank>
    if fsdp_requested() and not trainer.is_fsdp_enabled:
        # accelerate turns FSDP on for GPU backends only; on CPU (gloo) the launch trains as DDP
        log.warning("the accelerate config asks for FSDP, but accelerate runs FSDP on GPUs only: this run trains "
                    "with DDP (%s)", trainer.accelerator.distributed_type)
    return trainer



def context_limit(model_path: str, vllm_max_model_length: int | None = None) -> int:
    """The model's context in tokens, as generation will see it (vLLM's max_model_len when set)."""
    from transformers import AutoConfig

    limit = int(getattr(AutoConfig.from_pretrained(model_path), "max_position_embeddings", 0) or 0)
    if vllm_max_model_length:
        limit = min(limit, vllm_max_model_length) if limit else vllm_max_model_length
    return limit or 10**9


def train(cfg: TrainConfig, *, run_dir: Path | None = None, resume_from: str | None = None,
          callbacks: list[Any] | None = None, progress: Any = True, **grpo_extra: Any) -> TrainResult:
    """Train ``cfg`` into ``run_dir`` (default: ``run.output_dir``); resume from a checkpoint path.
    ``progress``: a rich bar of the steps on stderr (True), none (False), or a bar joining a started
    rich Progress (rl.run.attach_callbacks)."""
    from transformers import set_seed

    from rl.distributed import Ranks, main_first, sandbox_share
    from rl.rollout import MultiTurnRollout
    from sandboxes import SandboxConfig
    from synth.episode import EpisodeLimits

    run_dir = Path(run_dir or cfg.run.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    set_seed(cfg.run.seed)
    ranks = Ranks.from_env()
    with main_first(ranks):  # rank 0 synthesises the tasks into the run dir; the others read them
        tasks = load_train_tasks(cfg, run_dir)
    with main_first(ranks, per_node=True):  # the tiny model is built into each node's cache
        model_path = resolve_model_path(cfg)
    tokenizer = _load_tokenizer(model_path)
    g, ro = cfg.grpo, cfg.rollout
    # this process's share of a generation batch (per_device_* is per process)
    generation_batch = g.per_device_train_batch_size * (g.steps_per_generation or g.gradient_accumulation_steps)
    rollout = MultiTurnRollout(
        tasks, tokenizer=tokenizer, reward=cfg.reward,
        limits=EpisodeLimits(max_turns=ro.max_turns, max_tool_calls=ro.max_tool_calls, max_tokens=10**9),
        max_completion_length=g.max_completion_length, user_factory=_user_factory(cfg),
        sandbox_config=SandboxConfig(backend=ro.sandbox_backend),
        pool_size=sandbox_share(ro.sandboxes, generation_batch, ranks),
        tool_timeout=ro.tool_timeout_s, seed=cfg.run.seed, system_prompt=ro.system_prompt,
        episodes_dir=run_dir / "episodes" if ro.save_episodes else None, hf_generation=ro.hf_generation,
        hf_continuous_batching=ro.hf_continuous_batching, dynamic_sampling=ro.dynamic_sampling,
        vllm_streaming=ro.vllm_streaming, difficulty_filter=ro.difficulty_filter,
        extra_generations=ro.extra_generations, generation_memory=ro.generation_memory,
        generation_memory_cap=ro.generation_memory_cap, fsdp_generation=ro.fsdp_generation,
        balance=cfg.data.balance)
    rollout.check_prompts_fit(context_limit(model_path, ro.vllm_max_model_length if ro.use_vllm else None))
    with rollout:
        trainer = build_trainer(cfg, run_dir, rollout, tokenizer, model_path, callbacks, **grpo_extra)
        for cb in callbacks or []:  # callbacks that generate use the trainer's vLLM engine (rl.evaluate)
            if hasattr(cb, "bind"):
                cb.bind(trainer)
        from rl.run import attach_callbacks

        attached = attach_callbacks(trainer, run_dir, progress=progress)
        log.info("training on %d tasks; max_completion_length=%d (the Dr. GRPO normaliser); loss_type=%s",
                 len(tasks), trainer.args.max_completion_length, trainer.args.loss_type)
        try:
            out = trainer.train(resume_from_checkpoint=resume_from)
        finally:
            for cb in attached:
                if hasattr(cb, "close"):
                    cb.close()
        trainer.save_model(str(run_dir / "final"))  # every rank: under FSDP it gathers the weights
        if ranks.is_main:
            tokenizer.save_pretrained(str(run_dir / "final"))
    history = list(trainer.state.log_history)
    rewards = [h["reward"] for h in history if "reward" in h]
    return TrainResult(run_dir=run_dir, steps=trainer.state.global_step,
                       final_reward_mean=rewards[-1] if rewards else None,
                       first_reward_mean=rewards[0] if rewards else None,
                       metrics=dict(out.metrics), log_history=history)
