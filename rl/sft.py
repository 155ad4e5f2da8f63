"""SFT priming: TRL's ``SFTTrainer`` on conversational tool trajectories, assistant tokens only.

    ds = write_trajectories(traces, "data/prime").dataset      # synth.sft_data / synth.behaviours
    out = prime("models/tiny", ds, "runs/x/sft", SFTSettings(epochs=8))
    # out.model_dir is a checkpoint `dojo train` takes as model.name_or_path

The dataset is the one ``synth.sft_data.write_trajectories`` writes: a ``messages`` column (system,
user, assistant turns with tool calls, tool results) and a ``tools`` column. Only the assistant's
tokens are trained on (``assistant_only_loss``): TRL swaps the tiny model's Qwen2.5 template for its
``{% generation %}``-tagged training twin, so tool results, user turns and the system prompt shape
the context but are never predicted.

CPU defaults matter: TRL's ``SFTConfig`` defaults to bf16 and gradient checkpointing, each several
times slower than float32 without checkpointing on a CPU.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger("tooldojo.rl.sft")

__all__ = ["SFTResult", "SFTSettings", "prime"]


class SFTSettings(BaseModel):
    """Plain data; the defaults suit the offline tiny model on a CPU."""

    model_config = ConfigDict(extra="forbid")

    epochs: float = Field(8.0, gt=0)
    learning_rate: float = Field(2e-3, gt=0)
    batch_size: int = Field(16, gt=0)
    max_length: int = Field(1024, gt=0, description="longer conversations are truncated")
    warmup_steps: int = Field(10, ge=0)
    weight_decay: float = Field(0.0, ge=0)
    seed: int = 0
    bf16: bool | None = Field(None, description="None: bf16 on a GPU, float32 on a CPU")
    logging_steps: int = Field(10, gt=0)
    group_by_length: bool = Field(False, description="batch conversations of similar length together "
                                  "(transformers' LengthGroupedSampler: less padding, same epochs)")


class SFTResult(BaseModel):
    model_dir: str
    rows: int
    steps: int
    epochs: float
    seconds: float
    first_loss: float | None
    final_loss: float | None
    mean_token_accuracy: float | None


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def prime(model_path: str | os.PathLike[str], dataset: Any, out_dir: str | os.PathLike[str],
          settings: SFTSettings | None = None, *, callbacks: list[Any] | None = None) -> SFTResult:
    """Fine-tune ``model_path`` on ``dataset`` (a ``datasets.Dataset`` or a folder saved by
    ``write_trajectories``) and save the primed model (with its tokenizer) in ``out_dir``."""
    s = settings or SFTSettings()
    out = Path(out_dir)
    start = time.perf_counter()
    trainer, tok = sft_trainer(model_path, dataset, out, s, callbacks=callbacks)
    trainer.train()
    seconds = time.perf_counter() - start
    trainer.save_model(str(out))
    # The saved tokenizer keeps the plain (inference) template: generation must not see the
    # training template's generation tags.
    tok.save_pretrained(str(out))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    accs = [h["mean_token_accuracy"] for h in trainer.state.log_history if "mean_token_accuracy" in h]
    return SFTResult(model_dir=str(out), rows=len(trainer.train_dataset), steps=trainer.state.global_step,
                     epochs=s.epochs, seconds=seconds, first_loss=losses[0] if losses else None,
                     final_loss=losses[-1] if losses else None, mean_token_accuracy=accs[-1] if accs else None)


def sft_trainer(model_path: str | os.PathLike[str], dataset: Any, out: Path, s: SFTSettings, *,
                callbacks: list[Any] | None = None) -> tuple[Any, Any]:
    """TRL's ``SFTTrainer`` for :func:`prime`, and the tokenizer it uses."""
    import datasets
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    if not isinstance(dataset, datasets.Dataset):
        path = Path(dataset)
        if (path / "sft").is_dir():
            path = path / "sft"
        if not path.is_dir():
            raise FileNotFoundError(f"{dataset}: no SFT dataset (expected a folder written by write_trajectories)")
        dataset = datasets.load_from_disk(str(path))
    if len(dataset) == 0:
        raise ValueError("the SFT dataset is empty: nothing to prime on")
    bf16 = _cuda() if s.bf16 is None else s.bf16
    tok = AutoTokenizer.from_pretrained(str(model_path))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    steps_per_epoch = math.ceil(len(dataset) / s.batch_size)
    args = SFTConfig(
        output_dir=str(out / "trainer"), num_train_epochs=s.epochs, learning_rate=s.learning_rate,
        per_device_train_batch_size=s.batch_size, max_length=s.max_length, warmup_steps=s.warmup_steps,
        weight_decay=s.weight_decay, lr_scheduler_type="cosine", seed=s.seed, data_seed=s.seed,
        assistant_only_loss=True, bf16=bf16, gradient_checkpointing=False,
        logging_steps=min(s.logging_steps, steps_per_epoch), save_strategy="no", report_to=[],
        disable_tqdm=True, dataloader_num_workers=0,
        train_sampling_strategy="group_by_length" if s.group_by_length else "random", model_init_kwargs={"dtype": "bfloat16" if bf16 else "float32"},
    )
    trainer = SFTTrainer(model=str(model_path), args=args, train_dataset=dataset, processing_class=tok,
                         callbacks=callbacks or [])
    # Without tqdm, transformers prints every log dict to stdout, where `dojo demo` keeps one JSON line.
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer, tok
