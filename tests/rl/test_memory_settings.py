"""The memory settings of issue 32 reach what they configure: gradient checkpointing of every n-th
layer reaches the model's layers during a real `dojo train` step (examples/train_tiny.yaml turns
checkpointing off, so a GPU user who needs it sets it), and the generation-memory fields reach the
rollout."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_checkpointing_every_other_layer_reaches_the_layers(tmp_path):
    pytest.importorskip("trl")
    from transformers import TrainerCallback

    import rl.trainer as trainer_mod
    from rl.config import load_config

    seen: dict[str, list[bool]] = {}

    class Look(TrainerCallback):
        def on_step_begin(self, args, state, control, model=None, **kw):
            seen["layers"] = [bool(getattr(layer, "gradient_checkpointing", False)) for layer in model.model.layers]

        def on_step_end(self, args, state, control, model=None, **kw):  # after TRL re-enabled it
            seen["after"] = [bool(getattr(layer, "gradient_checkpointing", False)) for layer in model.model.layers]

    cfg = load_config(ROOT / "examples" / "train_tiny.yaml", [
        "grpo.max_steps=1", "rollout.use_vllm=false", "run.logging=[]", "rollout.save_episodes=false",
        "rollout.max_turns=1", "data.synthesize=8", "grpo.gradient_checkpointing=true",
        'grpo.gradient_checkpointing_kwargs={"every_n_layers": 2}', "rollout.generation_memory=free",
        "rollout.generation_memory_cap=0.25"])
    built: list = []
    build = trainer_mod.build_trainer

    def build_and_look(*a, **kw):
        t = build(*a, **kw)
        t.add_callback(Look())
        built.append(t)
        return t

    trainer_mod.build_trainer = build_and_look
    try:
        trainer_mod.train(cfg, run_dir=tmp_path / "run", progress=False)
    finally:
        trainer_mod.build_trainer = build
    layers = seen["layers"]
    assert len(layers) >= 2 and layers[0] and not layers[1]  # every other layer, the first one included
    assert sum(layers) == (len(layers) + 1) // 2
    assert seen["after"] == layers  # TRL turns it off to score and back on: still every other layer
    rollout = built[0].rollout_func
    assert (rollout.generation_memory, rollout.generation_memory_cap, rollout.fsdp_generation) == ("free", 0.25,
                                                                                                   "sharded")


def test_the_vllm_cache_is_sized_to_the_work_on_a_gpu():
    """On CUDA the colocated engine gets kv_cache_memory_bytes for this rank's episodes; nothing on the
    CPU backend or with generation_memory: free (vLLM cannot run on the GPU machine here, so the
    figure is checked, not a GPU engine)."""
    from types import SimpleNamespace

    from transformers import AutoConfig

    from rl.config import load_config
    from rl.continuous import kv_bytes_per_token
    from rl.tiny import build_tiny_model
    from rl.trainer import vllm_cache_kwargs

    model = str(build_tiny_model())
    from rl.rollout import MultiTurnRollout

    # MultiTurnRollout.cache_work on a stand-in with the longest prompt and the completion budget
    fields = SimpleNamespace(longest_prompt=lambda: 900, max_completion_length=128)
    rollout = SimpleNamespace(cache_work=lambda n: MultiTurnRollout.cache_work(fields, n))
    cfg = load_config(ROOT / "examples" / "train_tiny.yaml", ["grpo.per_device_train_batch_size=8",
                                                               "grpo.max_completion_length=128"])
    kw = vllm_cache_kwargs(cfg, rollout, model, cuda=True)
    per_seq_blocks = -(-(900 + 128) // 16) + 1
    assert kw == {"kv_cache_memory_bytes": 8 * per_seq_blocks * 16 * kv_bytes_per_token(AutoConfig.from_pretrained(model))}
    assert vllm_cache_kwargs(cfg, rollout, model, cuda=False) == {}
    free = load_config(ROOT / "examples" / "train_tiny.yaml", ["rollout.generation_memory=free"])
    assert vllm_cache_kwargs(free, rollout, model, cuda=True) == {}
