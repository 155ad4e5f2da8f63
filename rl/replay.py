"""Priming replay: the SFT loss on the priming traces, added to Dr. GRPO's loss at every micro-step.

    cfg.replay = ReplayConfig(data="runs/demo/prime", coef=0.1)   # train.replay.* in a demo override
    trainer_cls = with_replay(GRPOTrainer)                          # rl.trainer.build_trainer does this

Why: Dr. GRPO on the multi-step families undoes what priming taught the look-ups (their groups are
nearly all flat, the difficulty filter swaps them out, and nothing holds their first call while the
other families are reinforced; bench/results/reader_gpu.md section 18). Replaying the priming traces
in the loss keeps the policy near what SFT taught where RL has no signal, as InstructGPT's PPO-ptx
keeps the pretraining distribution. Each micro-step adds

    coef x mean next-token NLL over the assistant tokens of ``batch_size`` priming traces

(the tokens rl.sft trained on: TRL's training chat template with its generation tags), divided by the
gradient accumulation steps as TRL divides its own loss. The traces cycle in a seeded order.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

__all__ = ["ReplayBatches", "ReplayError", "has_traces", "install_replay", "replay_nll", "tokenize_traces",
           "traces_folder", "with_replay"]

IGNORE = -100


class ReplayError(ValueError):
    """The replay data cannot be used (missing folder, no assistant tokens); says which and why."""


def traces_folder(path: str | Path | None) -> Path:
    """The dataset folder of the priming traces at ``path`` (the folder write_trajectories wrote, or its
    ``sft``); :class:`ReplayError` when there is none."""
    p = Path(path or "")
    if (p / "sft").is_dir():
        p = p / "sft"
    if path is None or not (p / "dataset_info.json").is_file():
        raise ReplayError(f"{path}: no priming traces here (expected a folder written by "
                          "synth.sft_data.write_trajectories, e.g. the demo's <out>/prime)")
    return p


def has_traces(path: str | Path | None) -> bool:
    try:
        traces_folder(path)
    except ReplayError:
        return False
    return True


def install_replay(trainer: Any, cfg: Any, tokenizer: Any, seed: int) -> int:
    """Give ``trainer`` (a :func:`with_replay` class) the batches of ``cfg``'s traces (a ReplayConfig);
    returns how many traces. :class:`ReplayError` when they cannot be read."""
    rows = tokenize_traces(cfg.data, tokenizer, cfg.max_length)
    trainer.replay = ReplayBatches(rows, cfg.batch_size, tokenizer.pad_token_id, seed=seed)
    trainer.replay_coef = cfg.coef
    return len(rows)


def _dataset(path: str | Path) -> Any:
    import datasets

    return datasets.load_from_disk(str(traces_folder(path)))


def tokenize_traces(path: str | Path, tokenizer: Any, max_length: int) -> list[tuple[list[int], list[int]]]:
    """Each trace as (token ids, labels): labels are the ids on assistant tokens and -100 elsewhere,
    truncated to ``max_length`` as rl.sft truncates them; traces left with no assistant token are dropped."""
    from trl.chat_template_utils import get_training_chat_template

    template = get_training_chat_template(tokenizer)
    rows = []
    for ex in _dataset(path):
        tools = ex.get("tools")
        tools = json.loads(tools) if isinstance(tools, str) else tools
        out = tokenizer.apply_chat_template(ex["messages"], tools=tools or None, chat_template=template,
                                            tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        ids, mask = list(out["input_ids"])[:max_length], list(out["assistant_masks"])[:max_length]
        labels = [t if m else IGNORE for t, m in zip(ids, mask, strict=True)]
        if any(lab != IGNORE for lab in labels):
            rows.append((ids, labels))
    if not rows:
        raise ReplayError(f"{path}: no trace has an assistant token within {max_length} tokens")
    return rows


class ReplayBatches:
    """Padded batches of priming traces, cycling through them in a seeded order (reshuffled each pass)."""

    def __init__(self, rows: list[tuple[list[int], list[int]]], batch_size: int, pad_id: int, seed: int = 0):
        self.rows, self.batch_size, self.pad_id = rows, batch_size, pad_id
        self._rng = random.Random(seed)
        self._order: list[int] = []
        self.served = 0

    def next(self, device: Any = None) -> dict[str, Any]:
        import torch

        picked = []
        while len(picked) < min(self.batch_size, len(self.rows)):
            if not self._order:
                self._order = list(range(len(self.rows)))
                self._rng.shuffle(self._order)
            picked.append(self.rows[self._order.pop()])
        self.served += len(picked)
        width = max(len(ids) for ids, _ in picked)
        ids = torch.full((len(picked), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(picked), width), IGNORE, dtype=torch.long)
        attn = torch.zeros((len(picked), width), dtype=torch.long)
        for i, (row_ids, row_labels) in enumerate(picked):
            n = len(row_ids)
            ids[i, :n], labels[i, :n], attn[i, :n] = torch.tensor(row_ids), torch.tensor(row_labels), 1
        return {"input_ids": ids.to(device), "attention_mask": attn.to(device), "labels": labels.to(device)}


def replay_nll(model: Any, batch: dict[str, Any]) -> Any:
    """The mean next-token NLL of ``batch``'s labelled tokens under ``model`` (a scalar with gradients)."""
    import torch.nn.functional as F

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    targets = batch["labels"][:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=IGNORE)


def with_replay(trainer_cls: type) -> type:
    """``trainer_cls`` (a GRPOTrainer) whose training loss adds ``replay_coef x replay_nll`` of the next
    batch of ``replay`` (a :class:`ReplayBatches`, set on the instance); logs ``replay/nll``."""

    class ReplayTrainer(trainer_cls):  # type: ignore[misc, valid-type]
        replay: ReplayBatches | None = None
        replay_coef: float = 0.0

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.replay is None or self.replay_coef <= 0 or not model.training:
                return loss
            nll = replay_nll(model, self.replay.next(loss.device))
            self._metrics["train"]["replay/nll"].append(nll.detach().item())
            return loss + self.replay_coef * nll / self.current_gradient_accumulation_steps

    ReplayTrainer.__name__ = ReplayTrainer.__qualname__ = f"Replay{trainer_cls.__name__}"
    return ReplayTrainer
