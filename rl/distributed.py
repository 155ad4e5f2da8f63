"""`dojo train` across processes (``accelerate launch`` / ``torchrun``): who does what, and failing fast.

    accelerate launch --config_file examples/accelerate/ddp.yaml --num_processes 2 \\
        -m tooldojo train examples/train_tiny.yaml

TRL's ``GRPOTrainer`` already splits each generation batch across processes: every rank's
dataloader yields its own contiguous slice of the global batch, and with a ``rollout_func`` each
rank rolls out only that slice; rewards are gathered before advantages are computed, so groups
may straddle ranks. On top of that, tooldojo needs:

- **Episode identity.** An episode is numbered by its place in the step's *global* batch
  (``rank * per_rank + i``), and its sampling seed derives from (run seed, step, that number):
  so seeds differ across ranks, a resumed run samples what the uninterrupted one did, and the
  seeds do not depend on how many processes share the batch.
- **One writer.** Rank 0 alone prepares the run directory, synthesises tasks, builds the tiny
  model (the others wait, then read), writes metrics, checkpoints' trainer state, the episode
  files (every rank's episodes, gathered), the progress bar and the report.
- **A sandbox pool per rank**: ``rollout.sandboxes`` is the run's total, each rank gets its share.
- **Generation under FSDP** (``rollout.fsdp_generation``): each forward of a sharded model
  all-gathers one layer at a time, a collective, while ranks run different episodes. With
  ``sharded`` (default) every rank generates with the sharded model itself in lockstep
  (:class:`LockstepHFGenerator`): a generation round starts on every rank at once, a rank with
  nothing to generate joins with a one-token dummy, and transformers' ``synced_gpus`` keeps every
  rank's decode loop running until all are done. No rank ever holds more than its shards and one
  gathered layer, so FSDP can train (and sample from) a policy no single GPU can hold. With
  ``replica`` :class:`PolicyForGeneration` gathers the full parameters once per step into a plain
  copy that generates alone (faster decoding, a whole model per GPU). vLLM's weight sync gathers
  them too (TRL's ``_iter_named_params``, used by ``rl.vllm_sync``).
- **Failing fast.** A rank that raises prints one ``error: rank R/W: ...`` line, records the
  reason in torchelastic's error file (the launcher's summary then names the rank and the
  reason) and exits non-zero; the launcher then stops the other ranks instead of letting them
  wait in a collective.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("tooldojo.rl")

__all__ = [
    "LockstepHFGenerator",
    "PolicyForGeneration",
    "Ranks",
    "allow_indexed_cpu_restore",
    "SequentialHFGenerator",
    "barrier",
    "gather_rows",
    "init_distributed",
    "is_fsdp",
    "main_first",
    "record_failure",
    "sandbox_share",
]


@dataclass(frozen=True)
class Ranks:
    """This process's place in the launch (from the variables torchrun and accelerate launch set)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def from_env(cls) -> Ranks:
        env = os.environ
        return cls(rank=int(env.get("RANK", 0)), world_size=int(env.get("WORLD_SIZE", 1)),
                   local_rank=int(env.get("LOCAL_RANK", 0)))

    @classmethod
    def of(cls, trainer: Any) -> Ranks:
        acc = getattr(trainer, "accelerator", None)
        if acc is None:
            return cls()
        return cls(rank=acc.process_index, world_size=acc.num_processes, local_rank=acc.local_process_index)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def __str__(self) -> str:
        return f"rank {self.rank}/{self.world_size}"


def sandbox_share(total: int | None, per_rank_batch: int, ranks: Ranks) -> int:
    """Warm sandboxes for this rank: its share of ``total`` (``rollout.sandboxes``, the run's), or
    one per episode of its own generation batch."""
    if total is None:
        return per_rank_batch
    return max(1, math.ceil(total / ranks.world_size))


# ------------------------------------------------------------------ the process group
def init_distributed() -> None:
    """Start the process group (accelerate's ``PartialState``) before the trainer does, so the run
    directory can be prepared by rank 0 while the others wait. The trainer reuses the group."""
    import torch
    from accelerate import PartialState

    # as TrainingArguments will (use_cpu without CUDA): gloo on CPU, NCCL on GPUs
    PartialState(cpu=not torch.cuda.is_available())


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


@contextlib.contextmanager
def main_first(ranks: Ranks, *, per_node: bool = False) -> Iterator[None]:
    """Rank 0 (``per_node``: each node's local rank 0) runs the block first, it writes (tasks,
    the tiny model's cache); the others run it after it has finished, they read what it wrote."""
    if not ranks.distributed:
        yield
        return
    first = ranks.local_rank == 0 if per_node else ranks.is_main
    if not first:
        barrier()
    yield
    if first:
        barrier()


def gather_rows(rows: list[Any], ranks: Ranks) -> list[Any]:
    """Every rank's ``rows``, rank 0's first (all ranks must call it; each gets the whole list)."""
    if not ranks.distributed:
        return list(rows)
    import torch.distributed as dist

    out: list[Any] = [None] * ranks.world_size
    dist.all_gather_object(out, list(rows))
    return [r for part in out for r in part]


_CPU_INDEX_RESTORE = False


def allow_indexed_cpu_restore() -> None:
    """Let ``torch.load(..., map_location=torch.device("cpu", i))`` work.

    On CPU, multi-process transformers' ``args.device`` is ``cpu:<local rank>``, and a resumed run
    loads ``optimizer.pt`` with that as ``map_location``; torch knows how to restore storages to
    ``cpu`` only ("don't know how to restore data location ... (tagged with cpu:0)"). CPU memory has
    no index, so such a storage stays as it is."""
    global _CPU_INDEX_RESTORE
    if _CPU_INDEX_RESTORE:
        return
    import torch.serialization

    def restore(storage: Any, location: str) -> Any:
        return storage if location.startswith("cpu:") else None

    torch.serialization.register_package(99, lambda storage: None, restore)
    _CPU_INDEX_RESTORE = True


# ------------------------------------------------------------------ failures
def record_failure(e: BaseException, ranks: Ranks) -> str:
    """The one-line reason of a failed rank, also written to torchelastic's error file (when the
    launcher set one) so that its failure summary names this rank and the reason."""
    reason = " ".join(f"{type(e).__name__}: {e}".split())[:500]
    line = f"{ranks} ({socket.gethostname()}): {reason}"
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if path:
        import time

        data = {"message": {"message": line, "extraInfo": {"py_callstack": line, "timestamp": str(int(time.time()))}}}
        try:
            with open(path, "w") as f:
                json.dump(data, f)
        except OSError as err:
            log.warning("could not write the error file %s: %s", path, err)
    return line


# ------------------------------------------------------------------ generation under FSDP
def is_fsdp(model: Any) -> bool:
    """Whether ``model`` (or a submodule) is sharded by FSDP2 (``fully_shard``) or FSDP1."""
    try:
        from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel
    except ImportError:  # pragma: no cover - torch without FSDP2
        return False
    return any(isinstance(m, (FSDPModule, FullyShardedDataParallel)) for m in model.modules())


class PolicyForGeneration:
    """The policy as generation sees it: the training model itself (unwrapped from DDP); when it is
    sharded by FSDP, either the sharded model itself (``mode="sharded"``: generation must then run
    in lockstep on every rank, :attr:`lockstep`) or an unsharded replica on this rank
    (``mode="replica"``).

    A replica is refreshed by :meth:`refresh` (a collective: every rank calls it at the same point,
    once per rollout), which gathers the full parameters with
    ``get_model_state_dict(full_state_dict=True)``; it then generates without any collective. It
    costs one full model per rank in the training dtype (bf16 with ``bf16``), without gradients or
    optimizer state: for a policy no single GPU can hold, use ``sharded``."""

    def __init__(self, trainer: Any, mode: str = "replica"):
        if mode not in ("sharded", "replica"):
            raise ValueError(f"FSDP generation mode must be sharded or replica, not {mode!r}")
        self.trainer = trainer
        self.sharded = is_fsdp(trainer.model_wrapped if trainer.model_wrapped is not None else trainer.model)
        self.mode = mode
        self.replica: Any = None
        self.step: int | None = None

    @property
    def lockstep(self) -> bool:
        """Whether generation runs the sharded model, so every rank must generate in lockstep."""
        return self.sharded and self.mode == "sharded"

    def __call__(self) -> Any:
        if not self.sharded or self.lockstep:
            return self.trainer.accelerator.unwrap_model(self.trainer.model)
        if self.replica is None:
            raise RuntimeError("the FSDP generation replica was not refreshed before generating")
        return self.replica

    def refresh(self) -> None:
        if not self.sharded or self.lockstep or self.step == self.trainer.state.global_step:
            return
        import torch
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        wrapped = self.trainer.model_wrapped if self.trainer.model_wrapped is not None else self.trainer.model
        full = get_model_state_dict(wrapped, options=StateDictOptions(full_state_dict=True))
        if self.replica is None:
            from transformers import AutoModelForCausalLM

            source = self.trainer.accelerator.unwrap_model(self.trainer.model)
            dtype = torch.bfloat16 if self.trainer.args.bf16 else next(iter(full.values())).dtype
            with torch.device(self.trainer.accelerator.device):
                self.replica = AutoModelForCausalLM.from_config(source.config, dtype=dtype)
            self.replica.generation_config = source.generation_config
            self.replica.requires_grad_(False)
            self.replica.eval()
        missing, unexpected = self.replica.load_state_dict(full, strict=False)
        tied = getattr(self.replica, "_tied_weights_keys", None) or []
        missing = [k for k in missing if k not in set(tied.keys() if isinstance(tied, dict) else tied)]
        if missing or unexpected:
            raise RuntimeError(f"the FSDP generation replica does not match the policy: missing {missing[:5]}, "
                               f"unexpected {unexpected[:5]}")
        if getattr(self.replica.config, "tie_word_embeddings", False):
            self.replica.tie_weights()
        self.step = self.trainer.state.global_step


# ------------------------------------------------------------------ layout-independent sampling
class SequentialHFGenerator:
    """transformers generation, one request at a time, each sampled from its own seed.

    Padded batches sample a whole batch from one seed, so what an episode samples depends on
    which episodes share its batch, i.e. on how many processes split the step.  Here it does not:
    an episode samples the same tokens whatever the launch (1 x B or 2 x B/2), which is what
    ``rollout.hf_generation: sequential`` is for (checking multi-process runs against one
    process); it is slow (no batching)."""

    def __init__(self, inner: Any):
        self.inner = inner  # an rl.rollout.HFGenerator: its model, tokenizer, sampling and limits
        self.context_limit = inner.context_limit

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        return [self.inner.generate([r])[0] for r in requests]


# ------------------------------------------------------------------ generation with a sharded policy
class LockstepHFGenerator:
    """transformers generation with an FSDP-sharded policy, every rank in step with the others.

    Each forward of the sharded model all-gathers its layers one at a time, a collective, so every
    rank must run the same number of forwards. :meth:`sync` (called by the batcher before each
    round, :class:`rl.batcher.GenerationBatcher`) tells every rank whether any rank still has work;
    a rank with none this round runs :meth:`idle` (a one-token dummy) while the others generate, and
    ``synced_gpus`` keeps each ``generate`` stepping until every rank's sequences are done. A rank
    that fails raises and exits; the launcher then stops the others (see :func:`record_failure`)."""

    lockstep = True

    def __init__(self, inner: Any):
        self.inner = inner  # an rl.generators.HFGenerator on the sharded model
        self.inner.synced_gpus = True
        self.context_limit = inner.context_limit
        self.rounds = 0
        self.idle_rounds = 0

    def _device(self) -> Any:
        import torch
        import torch.distributed as dist

        if dist.get_backend() == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def sync(self, busy: bool) -> bool:
        """Whether any rank has requests to generate this round (every rank must call it)."""
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return busy
        flag = torch.tensor([1.0 if busy else 0.0], device=self._device())
        dist.all_reduce(flag, op=dist.ReduceOp.SUM)
        return bool(flag.item() > 0)

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        self.rounds += 1
        return self.inner.generate(requests)

    def idle(self) -> None:
        """Join a round with nothing to generate: one token from a one-token prompt, kept stepping by
        ``synced_gpus`` as long as another rank decodes."""
        from rl.generation import GenRequest

        self.rounds += 1
        self.idle_rounds += 1
        pad = self.inner.tokenizer.pad_token_id
        self.inner.generate([GenRequest(prompt_ids=[pad if pad is not None else self.inner.eos_ids[0]], max_tokens=1)])
