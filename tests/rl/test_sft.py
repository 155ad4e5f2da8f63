"""rl.sft's batching: group_by_length batches conversations of similar lengths (less padding)."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")


def _dataset(n: int = 256):  # LengthGroupedSampler sorts within megabatches of up to 50 batches
    import datasets

    rows = [{"messages": [{"role": "user", "content": "turn on the lights " * (1 + (7 * i) % 31)},
                          {"role": "assistant", "content": "Done."}]} for i in range(n)]
    return datasets.Dataset.from_list(rows)


@pytest.mark.parametrize("grouped", [False, True])
def test_group_by_length_batches_similar_lengths(tmp_path, grouped):
    from rl.sft import SFTSettings, sft_trainer
    from rl.tiny import build_tiny_model

    s = SFTSettings(epochs=1, batch_size=4, group_by_length=grouped)
    trainer, _ = sft_trainer(build_tiny_model(), _dataset(), tmp_path, s)
    assert type(trainer._get_train_sampler()).__name__ == ("LengthGroupedSampler" if grouped else "RandomSampler")
    slots = real = 0
    for batch in trainer.get_train_dataloader():
        lengths = batch["attention_mask"].sum(-1) if "attention_mask" in batch else None
        assert lengths is not None
        slots += int(lengths.max()) * len(lengths)
        real += int(lengths.sum())
    waste = slots / real
    # the lengths spread 1x-31x: random batches of 4 pad a lot, grouped ones little
    assert (waste < 1.15) if grouped else (waste > 1.3), waste
