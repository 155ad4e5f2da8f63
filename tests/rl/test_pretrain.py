"""rl.pretrain: a shortened pretraining run on the CPU reaches its recorded quality; the shipped base verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl.pretrain import MANIFEST, PretrainSettings, pretrain, verify_base

SHIPPED = Path(__file__).resolve().parents[2] / "rl" / "base"

# The shortened budget: 3 domains x 10 tasks, a 0.23M-parameter model, 60 steps of 8 x 256 tokens
# (about a minute on 2 cores). Measured on the CPU: held-back loss 5.65, tool-call token accuracy
# 0.205 (the random init: loss ~7.6, accuracy ~0). The thresholds leave room for the CPU's numerics.
SHORT = PretrainSettings(hidden=64, heads=2, layers=2, steps=60, seq_len=256, batch_size=8, eval_every=20,
                         corpus={"domains": ["retail_orders", "library_loans", "calendar_app"],
                                 "tasks_per_domain": 10, "backend": "local"})
MAX_VAL_LOSS, MIN_TOOL_CALL_ACCURACY = 6.2, 0.12


@pytest.mark.local
def test_a_shortened_pretraining_reaches_the_recorded_quality_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLDOJO_CACHE", str(tmp_path / "cache"))
    res = pretrain(SHORT, tmp_path / "base", device="cpu")
    assert not res.cached and res.steps == 60
    vals = [p["val_loss"] for p in res.curve if "val_loss" in p]
    assert len(vals) == 3 and vals[-1] < vals[0]
    assert res.val_loss < MAX_VAL_LOSS and res.tool_call_accuracy >= MIN_TOOL_CALL_ACCURACY
    # issue 23: the copy-from-tool-output accuracy is measured beside it (two-action transcripts copy ids)
    assert res.copy_accuracy is not None and 0.0 <= res.copy_accuracy <= 1.0
    assert all("copy_accuracy" in p for p in res.curve if "val_loss" in p)
    manifest = verify_base(tmp_path / "base")
    assert manifest["hash"] == res.hash and (tmp_path / "base" / "loss_curve.png").is_file()
    # same inputs: found, not retrained
    again = pretrain(SHORT, tmp_path / "base", device="cpu")
    assert again.cached and again.hash == res.hash and again.val_loss == res.val_loss
    # another setting: another hash
    from rl.pretrain import settings_hash

    assert settings_hash(SHORT.model_copy(update={"steps": 61})) != res.hash


def test_verify_base_names_a_changed_file(tmp_path):
    import shutil

    shutil.copytree(SHIPPED, tmp_path / "b")
    verify_base(tmp_path / "b")
    with open(tmp_path / "b" / "model.safetensors", "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\0\0\0\1")
    with pytest.raises(ValueError, match="model.safetensors does not match"):
        verify_base(tmp_path / "b")


def test_the_shipped_base_is_small_verified_and_of_the_recorded_quality():
    manifest = verify_base(SHIPPED)
    assert sum(f.stat().st_size for f in SHIPPED.iterdir()) <= 20 * 2**20
    r = manifest["result"]
    assert r["val_loss"] < 0.1 and r["tool_call_accuracy"] > 0.95
    assert manifest["settings"]["corpus"]["exclude_domains"] == ["home_devices"]
    # issue 28: the reader base, pretrained on the multi-step families and keyed copy drills, and able to copy
    corpus = manifest["settings"]["corpus"]
    assert corpus["multistep_per_family"] > 0 and corpus["copy_drills_per_length"] > 0
    assert corpus["drill_style"] == "keyed" and r["copy_accuracy"] > 0.8
    assert json.loads((SHIPPED / MANIFEST).read_text())["files"].keys() >= {"model.safetensors", "tokenizer.json"}
