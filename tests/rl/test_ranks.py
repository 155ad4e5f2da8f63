"""rl.distributed's pieces in one process: shares, failure records, the run-dir checks, episode
numbering across ranks, and sequential generation (samples independent of batching)."""

from __future__ import annotations

import json

import pytest

from pathlib import Path

from rl.config import ConfigError, load_config
from rl.distributed import Ranks, sandbox_share
from rl.run import check_run_dir, prepare_run_dir, record_rank_failure

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "train_tiny.yaml")


def test_ranks_and_sandbox_shares(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    r = Ranks.from_env()
    assert (r.rank, r.world_size, r.local_rank, r.is_main, r.distributed, str(r)) == (3, 4, 1, False, True, "rank 3/4")
    assert sandbox_share(None, 8, r) == 8          # one per episode of this rank's slice
    assert sandbox_share(10, 8, r) == 3            # rollout.sandboxes is the run's total
    assert sandbox_share(2, 8, r) == 1
    assert sandbox_share(10, 8, Ranks()) == 10


def test_first_failed_rank_is_the_error_every_one_is_listed(tmp_path):
    cfg = load_config(EXAMPLE, [f"run.output_dir={tmp_path / 'run'}"])
    run = prepare_run_dir(cfg, config_path=None, overrides=[])
    record_rank_failure(run, "rank 1/2", "failed", "RuntimeError: boom")
    rec = record_rank_failure(run, "rank 0/2", "failed", "RuntimeError: connection closed by peer")
    assert rec["status"] == "failed" and rec["error"] == "rank 1/2: RuntimeError: boom"
    assert [e["rank"] for e in rec["rank_errors"]] == ["rank 1/2", "rank 0/2"]
    assert json.loads((run / "run.json").read_text())["error"] == rec["error"]


def test_check_run_dir_refuses_what_prepare_refuses_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    (out / "checkpoint-3").mkdir(parents=True)
    with pytest.raises(ConfigError, match="already holds checkpoints"):
        check_run_dir(load_config(EXAMPLE, [f"run.output_dir={out}"]))
    run_dir, ck = check_run_dir(load_config(EXAMPLE, [f"run.output_dir={out}", "run.resume=true"]))
    assert run_dir == out.resolve() and ck == str(out / "checkpoint-3")
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-3"]


# ------------------------------------------------------------------ episodes across ranks
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.tiny import build_tiny_model

    d = build_tiny_model()
    return AutoTokenizer.from_pretrained(d), AutoModelForCausalLM.from_pretrained(d)


class SeedRecorder:
    """Ends every turn at once, recording each request's sampling seed."""

    context_limit = 4096

    def __init__(self, tok):
        self.eot = tok.convert_tokens_to_ids("<|im_end|>")
        self.seeds: list[int] = []

    def generate(self, requests):
        from rl.rollout import GenResult

        self.seeds += [r.seed for r in requests]
        return [GenResult(ids=[self.eot], logprobs=[-0.1]) for _ in requests]


def test_a_ranks_episodes_are_numbered_in_the_global_batch(tiny):
    from rl.rollout import MultiTurnRollout
    from sandboxes import SandboxConfig
    from synth.tasks import synthesize_tasks
    from tests.conftest import any_backend

    tok, _ = tiny
    backend = any_backend()
    tasks = synthesize_tasks(2, seed=5, domains=["retail_orders"], backend=backend, sandboxes=1).tasks
    batch = [tasks[0]] * 2 + [tasks[1]] * 2
    with MultiTurnRollout(tasks, tokenizer=tok, sandbox_config=SandboxConfig(backend=backend), pool_size=2,
                          max_completion_length=64) as ro:
        whole, rank1 = SeedRecorder(tok), SeedRecorder(tok)
        ro.run(batch, whole, step=3)
        ro.rank, ro.world_size = 1, 2
        ro.run(batch[2:], rank1, step=3, first=2)  # rank 1 of 2 holds the second half
    def first_turn(i: int) -> int:  # TokenAgent's seed for episode i's first turn
        return ro.episode_seed(3, i) * 1009 % 2**31

    # rank 1 samples episodes 2 and 3 of the step exactly as one process running all four does
    assert set(whole.seeds) >= {first_turn(i) for i in range(4)}
    assert set(rank1.seeds) == {first_turn(2), first_turn(3)}


def test_sequential_generation_does_not_depend_on_the_batch(tiny):
    from rl.distributed import SequentialHFGenerator
    from rl.rollout import GenRequest, HFGenerator, Sampling

    tok, model = tiny
    eos = [tok.convert_tokens_to_ids("<|im_end|>")]
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ("hello", "list the orders", "a", "b c")]
    reqs = [GenRequest(p, 12, seed=40 + i) for i, p in enumerate(prompts)]
    seq = SequentialHFGenerator(HFGenerator(lambda: model, tok, Sampling(), eos_ids=eos, context_limit=512))
    together = seq.generate(reqs)
    split = seq.generate(reqs[:1]) + seq.generate(reqs[1:3]) + seq.generate(reqs[3:])
    assert [r.ids for r in together] == [r.ids for r in split]
    assert [x for r in together for x in r.logprobs] == pytest.approx([x for r in split for x in r.logprobs])
