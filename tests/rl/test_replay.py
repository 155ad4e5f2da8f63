"""rl.replay: the priming traces replayed in Dr. GRPO's loss. Which tokens are trained on (the
assistant's, as rl.sft trains them), the batches' order, the loss term's arithmetic on a real model,
the config's checks, and a real `dojo train` run whose replayed traces' NLL falls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip("trl")

from tests.conftest import any_backend  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_tiny.yaml"
DOJO = [str(Path(sys.executable).parent / "dojo")]


def _trace(i: int):
    from synth.episode import Trajectory

    call = {"id": f"c{i}", "type": "function",
            "function": {"name": "get_robot", "arguments": json.dumps({"robot_id": f"R-{i}"})}}
    return Trajectory(task_id=f"t{i}", domain="robots", termination="user_stop", messages=[
        {"role": "system", "content": "You are the robots assistant."},
        {"role": "user", "content": f"What is the status of robot R-{i}? zebra"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "get_robot", "tool_call_id": f"c{i}", "content": '{"status": "quokka"}'},
        {"role": "assistant", "content": 'All done. "status": "quokka"'},
    ], tools=[{"type": "function", "function": {"name": "get_robot", "description": "a robot",
               "parameters": {"type": "object", "properties": {"robot_id": {"type": "string"}}}}}])


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    from synth.sft_data import write_trajectories

    out = tmp_path_factory.mktemp("replay") / "prime"
    write_trajectories([_trace(i) for i in range(5)], out)
    return out


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.tiny import build_tiny_model

    path = build_tiny_model()
    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return AutoModelForCausalLM.from_pretrained(str(path)), tok


def test_only_the_assistant_tokens_are_labelled(traces, tiny):
    from rl.replay import IGNORE, tokenize_traces

    _, tok = tiny
    rows = tokenize_traces(traces, tok, 1024)
    assert len(rows) == 5
    ids, labels = rows[0]
    said = tok.decode([t for t, lab in zip(ids, labels, strict=True) if lab != IGNORE])
    unsaid = tok.decode([t for t, lab in zip(ids, labels, strict=True) if lab == IGNORE])
    assert "get_robot" in said and 'All done. "status": "quokka"' in said
    assert "zebra" in unsaid and "zebra" not in said          # the user's turn is context
    assert said.count("quokka") == 1 and "quokka" in unsaid   # so is the tool's output


def test_traces_cut_before_any_assistant_token_are_an_error(traces, tiny):
    from rl.replay import ReplayError, tokenize_traces

    with pytest.raises(ReplayError, match="no trace has an assistant token within 8 tokens"):
        tokenize_traces(traces, tiny[1], 8)
    with pytest.raises(ReplayError, match="no priming traces here"):
        tokenize_traces(traces.parent / "nowhere", tiny[1], 1024)


def test_batches_serve_every_trace_once_a_pass_in_a_seeded_order():
    from rl.replay import IGNORE, ReplayBatches

    rows = [([10 + i] * (i + 2), [IGNORE] + [10 + i] * (i + 1)) for i in range(5)]

    def firsts(seed: int) -> list[int]:
        b = ReplayBatches(rows, 2, pad_id=0, seed=seed)
        return [int(x) for _ in range(5) for x in b.next()["input_ids"][:, 0]]

    got = firsts(3)
    assert sorted(got[:5]) == [10, 11, 12, 13, 14] and sorted(got[5:10]) == [10, 11, 12, 13, 14]
    assert got == firsts(3) and got != firsts(4)
    batch = ReplayBatches(rows, 5, pad_id=0).next()
    lengths = batch["attention_mask"].sum(-1).tolist()
    assert sorted(lengths) == [2, 3, 4, 5, 6] and batch["input_ids"].shape == (5, 6)
    pads = batch["attention_mask"] == 0
    assert (batch["input_ids"][pads] == 0).all() and (batch["labels"][pads] == IGNORE).all()


def test_the_nll_is_the_models_own_causal_lm_loss(traces, tiny):
    import torch

    from rl.replay import ReplayBatches, replay_nll, tokenize_traces

    model, tok = tiny
    batch = ReplayBatches(tokenize_traces(traces, tok, 1024), 3, tok.pad_token_id).next()
    with torch.no_grad():
        want = model(**batch).loss  # transformers shifts the labels itself
        got = replay_nll(model, batch)
    assert torch.allclose(got, want, atol=1e-5) and got.item() > 1.0


def test_the_trainer_adds_coef_times_the_nll_over_the_accumulation_steps(traces, tiny):
    import torch

    from rl.replay import ReplayBatches, replay_nll, tokenize_traces, with_replay

    class Policy:  # stands in for GRPOTrainer's own loss: only the added term is under test
        current_gradient_accumulation_steps = 4

        def __init__(self):
            self._metrics = {"train": defaultdict(list)}

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return torch.tensor(0.25)

    model, tok = tiny
    rows = tokenize_traces(traces, tok, 1024)
    trainer = with_replay(Policy)()
    trainer.replay, trainer.replay_coef = ReplayBatches(rows, 2, tok.pad_token_id, seed=1), 0.5
    model.train()
    loss = trainer.compute_loss(model, {})
    nll = replay_nll(model, ReplayBatches(rows, 2, tok.pad_token_id, seed=1).next())
    assert loss.requires_grad and torch.allclose(loss, 0.25 + 0.5 * nll / 4, atol=1e-5)
    assert trainer._metrics["train"]["replay/nll"] == [pytest.approx(nll.item(), abs=1e-5)]
    model.eval()  # evaluation adds nothing
    assert trainer.compute_loss(model, {}).item() == 0.25 and trainer.replay.served == 2


def test_replay_needs_its_traces_and_the_demo_points_at_its_own(tmp_path):
    from rl.config import ConfigError, load_config
    from rl.demo import load_demo_config, train_config

    with pytest.raises(ConfigError) as e:
        load_config(EXAMPLE, ["replay.coef=0.1"])
    assert e.value.problems[0][0] == "replay" and "replay.data" in e.value.problems[0][1]
    assert load_config(EXAMPLE, []).replay.coef == 0.0
    demo = load_demo_config(None, ["train.replay.coef=0.1", f"out_dir={tmp_path}"])
    assert train_config(demo, tmp_path).replay.data == str(tmp_path / "prime")
    mine = load_demo_config(None, ["train.replay.coef=0.1", "train.replay.data=/x/prime", f"out_dir={tmp_path}"])
    assert train_config(mine, tmp_path).replay.data == "/x/prime"


def test_dojo_train_replays_the_traces_and_their_nll_falls(traces, tmp_path):
    """Four real Dr. GRPO steps of the tiny model (random weights) with a heavy replay term: the
    replayed traces' NLL is logged every step and falls, so its gradient reaches the policy."""
    cmd = [*DOJO, "train", str(EXAMPLE), f"run.output_dir={tmp_path / 'run'}", "data.synthesize=4",
           f"rollout.sandbox_backend={any_backend()}", "run.logging=[]", "rollout.use_vllm=false",
           "grpo.max_steps=4", "grpo.per_device_train_batch_size=8", "grpo.num_generations=4",
           "grpo.max_completion_length=64", "grpo.learning_rate=3e-3", f"replay.data={traces}", "replay.coef=20",
           "replay.batch_size=5"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=dict(os.environ))
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if x.strip()]
    nll = [r["replay/nll"] for r in rows if "replay/nll" in r]
    assert len(nll) == 4 and nll[3] < nll[0] - 0.5, nll


def test_dojo_train_says_what_is_wrong_with_the_replay_folder(tmp_path):
    cmd = [*DOJO, "train", str(EXAMPLE), f"run.output_dir={tmp_path / 'run'}", "data.synthesize=2",
           f"rollout.sandbox_backend={any_backend()}", "run.logging=[]", "rollout.use_vllm=false",
           "grpo.max_steps=1", "grpo.per_device_train_batch_size=4", "grpo.num_generations=4",
           f"replay.data={tmp_path / 'missing'}", "replay.coef=0.1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=dict(os.environ))
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "replay.data" in p.stderr and "no priming traces here" in p.stderr
