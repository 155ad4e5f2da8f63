"""The shared-prefix forward (rl.shared_prefix) against TRL's repeated rows, on the same batch.

Equivalence is checked in float32 as a relative difference, max|shared - repeated| / max|repeated|,
at most TOL = 1e-5, for the per-token log-probs and entropies, the Dr. GRPO loss and every
parameter's gradient. The batch has what a training micro-batch can have: groups of unequal
completion lengths (right padding), prompts of different lengths (left padding), multi-turn
completions whose tool-result tokens have ``tool_mask`` 0, a token masked out inside a completion,
rows shuffled as TRL shuffles them, and a dynamic-sampling refill: a second group of a task already
in the batch. A mask that lets completions see each other must fail the same comparison.
"""

from __future__ import annotations

import functools

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from rl.shared_prefix import SharedPrefixGRPOTrainer, segment_mask  # noqa: E402
from rl.tiny import build_tiny_model  # noqa: E402

TOL = 1e-5
G = 4
M = 16   # max_completion_length (the Dr. GRPO normaliser)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="module")
def trainer(tiny, tmp_path_factory):
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("out")), loss_type="dr_grpo", scale_rewards="none", beta=0.0,
        use_cpu=True, bf16=False, max_completion_length=M, num_generations=G, per_device_train_batch_size=3 * G,
        gradient_accumulation_steps=1, report_to=[], max_steps=1, gradient_checkpointing=False, seed=0)
    tok = AutoTokenizer.from_pretrained(tiny)
    ds = datasets.Dataset.from_dict({"prompt": ["x"] * G})
    t = SharedPrefixGRPOTrainer(model=str(tiny), reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                args=args, train_dataset=ds, processing_class=tok)
    t.current_gradient_accumulation_steps = 1
    t.model.train()
    return t


def make_batch(vocab: int, pad: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Three groups of G: prompts A (20 tokens), B (13 tokens, left-padded), and A again (a refilled
    group of the same task); completions of unequal lengths, right-padded to M, with tool spans."""
    gen = torch.Generator().manual_seed(seed)
    prompts = {"A": torch.randint(300, vocab, (20,), generator=gen), "B": torch.randint(300, vocab, (13,), generator=gen)}
    lengths = [[16, 5, 11, 1], [9, 16, 2, 7], [3, 12, 16, 6]]
    rows = []
    for name, lens in zip("ABA", lengths, strict=True):
        for n in lens:
            p = prompts[name]
            pid = torch.cat([torch.full((20 - len(p),), pad), p])
            pm = torch.cat([torch.zeros(20 - len(p), dtype=torch.long), torch.ones(len(p), dtype=torch.long)])
            cid = torch.randint(300, vocab, (M,), generator=gen)
            cm = (torch.arange(M) < n).long()
            cid = cid.masked_fill(cm == 0, pad)
            tm = torch.ones(M, dtype=torch.long)
            if n > 8:
                tm[3:7] = 0      # a tool result inside the completion: scored by no loss, attended to
            rows.append((pid, pm, cid, cm, tm))
    batch = {k: torch.stack([r[i] for r in rows]) for i, k in enumerate(
        ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask"))}
    batch["completion_mask"][1 + G, 10] = 0   # a token masked out inside a completion
    perm = torch.randperm(3 * G, generator=gen)  # TRL shuffles a generation batch before splitting it
    return {k: v[perm] for k, v in batch.items()}


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))


def logps_both(t, batch, **kw):
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    out = {}
    for shared in (True, False):
        t.shared_prefix = shared
        out[shared] = t._get_per_token_logps_and_entropies(t.model, ids, att, M, compute_entropy=True, **kw)
    t.shared_prefix = True
    return out[True], out[False], batch["completion_mask"].bool()


@pytest.fixture(params=["sdpa", "eager"])
def attn(trainer, request):
    before = trainer.model.config._attn_implementation
    trainer.model.set_attn_implementation(request.param)
    yield request.param
    trainer.model.set_attn_implementation(before)


def test_log_probs_and_entropies_match_the_repeated_rows(trainer, attn):
    batch = make_batch(trainer.model.config.vocab_size, trainer.processing_class.pad_token_id)
    (lp_s, ent_s, _), (lp_r, ent_r, _), mask = logps_both(trainer, batch)
    assert lp_s.shape == lp_r.shape == (3 * G, M)
    assert rel(lp_s[mask], lp_r[mask]) <= TOL and rel(ent_s[mask], ent_r[mask]) <= TOL
    # where the attention mask is 0, TRL's fused head returns 0, and so does the shared path
    assert (lp_s[~mask] == 0).all() and (lp_r[~mask] == 0).all()
    # chunked (the old-policy forward passes batch_size): whole groups per forward, same values
    (lp_c, _, _), _, _ = logps_both(trainer, batch, batch_size=G)
    assert rel(lp_c[mask], lp_r[mask]) <= TOL


def loss_and_grads(t, inputs, shared: bool):
    t.shared_prefix = shared
    t.model.zero_grad(set_to_none=True)
    loss = t.compute_loss(t.model, inputs)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in t.model.named_parameters()}
    t.model.zero_grad(set_to_none=True)
    t.shared_prefix = True
    return loss.detach(), grads


def test_dr_grpo_loss_and_every_gradient_match(trainer, attn):
    batch = make_batch(trainer.model.config.vocab_size, trainer.processing_class.pad_token_id, seed=1)
    with torch.no_grad():
        (_, _, _), (lp_r, _, _), _ = logps_both(trainer, batch)
    gen = torch.Generator().manual_seed(3)
    inputs = {**batch, "advantages": torch.randn(3 * G, generator=gen),
              # an older policy: some ratios leave the clip range, so both regimes are in the gradient
              "old_per_token_logps": lp_r + (torch.rand(lp_r.shape, generator=gen) - 0.5) * 0.6,
              "num_items_in_batch": batch["completion_mask"].sum()}
    loss_s, g_s = loss_and_grads(trainer, inputs, shared=True)
    loss_r, g_r = loss_and_grads(trainer, inputs, shared=False)
    assert abs(loss_r.item()) > 1e-4
    assert rel(loss_s, loss_r) <= TOL, (loss_s.item(), loss_r.item())
    assert set(g_s) == set(g_r) and len(g_r) == len(list(trainer.model.parameters()))
    worst = max(rel(g_s[n], g_r[n]) for n in g_r)
    assert worst <= TOL, worst
    assert all(g_r[n].abs().sum() > 0 for n in g_r)


def test_a_mask_letting_completions_see_each_other_fails_the_comparison(trainer):
    """The comparison can fail: with a plain causal mask over the packed sequence a completion also
    attends to the group's earlier completions, and its log-probs move far beyond TOL."""
    from rl.shared_prefix import find_groups, shared_prefix_logps

    def leaky(segment, key_valid):
        allowed = segment_mask(segment, key_valid)
        T = segment.size(1)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        return allowed | (causal & key_valid[:, None, :] & (segment >= 0)[:, :, None])[:, None]

    batch = make_batch(trainer.model.config.vocab_size, trainer.processing_class.pad_token_id)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    groups = find_groups(batch["prompt_ids"], batch["prompt_mask"])
    with torch.no_grad():
        (_, _, _), (lp_r, _, _), mask = logps_both(trainer, batch)
        good, _ = shared_prefix_logps(trainer.model, ids, att, M, groups, attn_impl="sdpa")
        bad, _ = shared_prefix_logps(trainer.model, ids, att, M, groups, attn_impl="sdpa", mask_fn=leaky)
    assert rel(good[mask], lp_r[mask]) <= TOL
    assert rel(bad[mask], lp_r[mask]) > 100 * TOL


def test_groups_pack_the_prompt_once(trainer):
    from rl.shared_prefix import find_groups, pack_groups

    batch = make_batch(trainer.model.config.vocab_size, trainer.processing_class.pad_token_id)
    groups = find_groups(batch["prompt_ids"], batch["prompt_mask"])
    assert sorted(len(g) for g in groups) == [G, 2 * G]   # the refilled group joins its task's group
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    pk = pack_groups(ids, att, M, groups)
    kept = int(pk.extent.sum())
    prompts = int(batch["prompt_mask"][[g[0] for g in groups]].sum())
    # P - 1 prompt tokens per group, plus each completion with its copy of the prompt's last token
    assert pk.tokens == prompts - len(groups) + kept + 3 * G
    assert pk.tokens < int(att.sum())


def test_falls_back_and_says_so_once(trainer, caplog, monkeypatch):
    batch = make_batch(trainer.model.config.vocab_size, trainer.processing_class.pad_token_id)
    distinct = {k: v[[0]] for k, v in batch.items()}    # no two rows share a prompt
    caplog.set_level(logging.INFO, logger="tooldojo.rl.shared_prefix")
    trainer.__dict__.pop("_shared_prefix_said", None)
    for _ in range(2):
        (lp_s, _, _), (lp_r, _, _), _ = logps_both(trainer, distinct)
        assert torch.equal(lp_s, lp_r)
    said = [r.message for r in caplog.records if "not applied" in r.message]
    assert len(said) == 1 and "share a prompt" in said[0]
    # an attention function that takes no custom mask: the repeated rows, said once
    monkeypatch.setattr("rl.shared_prefix.SUPPORTED_ATTENTION", ("flex_attention",))
    for _ in range(2):
        (lp_s, _, _), (lp_r, _, _), _ = logps_both(trainer, batch)
        assert torch.equal(lp_s, lp_r)
    said = [r.message for r in caplog.records if "not applied" in r.message]
    assert len(said) == 2 and "'sdpa'" in said[1]


def test_two_process_ddp_gradients_match(tiny, tmp_path):
    """2 processes, gloo, torch DDP: each rank packs its own groups; the all-reduced gradients of
    the shared and the repeated forward agree (tests/rl/ddp_shared_prefix.py)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [str(Path(sys.executable).parent / "torchrun"), "--nproc_per_node", "2", "--master_port", str(port),
           str(Path(__file__).with_name("ddp_shared_prefix.py")), str(tiny), str(tmp_path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-4000:]
    ranks = {r["rank"]: r for r in (json.loads(f.read_text()) for f in tmp_path.glob("rank*.json"))}
    assert sorted(ranks) == [0, 1]
    for r in ranks.values():
        assert r["params"] > 0 and r["max_rel_grad_diff"] <= TOL and r["rel_loss_diff"] <= TOL
        assert r["ranks_differ"]   # each rank saw its own data, so the all-reduce mattered


def test_the_switch_picks_the_trainer_and_is_off_by_default(tmp_path):
    from trl import GRPOTrainer

    from rl.config import load_config
    from rl.shared_prefix import trainer_class

    cfg = load_config(ROOT / "examples" / "train_tiny.yaml", [])
    assert cfg.trainer.shared_prefix is False
    on = load_config(ROOT / "examples" / "train_tiny.yaml", ["trainer.shared_prefix=true"])
    assert on.trainer.shared_prefix is True
    assert trainer_class(True) is SharedPrefixGRPOTrainer and trainer_class(False) is GRPOTrainer


def test_an_applied_forward_is_logged_once_and_metered(trainer, caplog):
    batch = make_batch(trainer.model.config.vocab_size, trainer.processing_class.pad_token_id)
    caplog.set_level(logging.INFO, logger="tooldojo.rl.shared_prefix")
    trainer.__dict__.pop("_shared_prefix_applied", None)
    trainer._metrics["train"].pop("shared_prefix/forward_token_fraction", None)
    for _ in range(2):
        logps_both(trainer, batch)
    said = [r.message for r in caplog.records if r.message.startswith("shared-prefix forward:")]
    assert len(said) == 1 and f"{3 * G} rows in 2 groups" in said[0]
    fractions = trainer._metrics["train"]["shared_prefix/forward_token_fraction"]
    assert len(fractions) == 2 and 0 < fractions[0] < 1


def test_a_generation_batch_is_shuffled_in_whole_groups():
    """Micro-batches split from a generation batch keep whole groups (TRL shuffles single rows)."""
    import trl.trainer.grpo_trainer as grpo_module

    from rl.shared_prefix import _group_shuffle, shuffle_whole_groups

    rows = torch.arange(24).reshape(24, 1)
    batch = {"prompt_ids": rows // G, "names": [f"r{i}" for i in range(24)], "none": None,
             "num_items_in_batch": torch.tensor(7)}
    torch.manual_seed(0)
    out = shuffle_whole_groups(batch, G)
    order = out["prompt_ids"].reshape(-1)
    assert sorted(order.tolist()) == sorted((rows // G).reshape(-1).tolist())
    assert order.tolist() != (rows // G).reshape(-1).tolist()          # it did shuffle
    for chunk in order.split(G):                                          # ...in whole groups
        assert len(set(chunk.tolist())) == 1
    assert out["names"][0] == f"r{int(order[0]) * G}" and out["none"] is None and int(out["num_items_in_batch"]) == 7
    before = grpo_module.shuffle_sequence_dict
    with _group_shuffle(G):
        assert grpo_module.shuffle_sequence_dict is not before
    assert grpo_module.shuffle_sequence_dict is before


def test_in_float64_the_difference_is_rounding_only(trainer):
    """The float32 differences above are summation order: with the model in float64 the two paths'
    log-probs (which TRL's fused head returns in float32) agree to 1e-12 (here: exactly)."""
    batch = make_batch(trainer.model.config.vocab_size, trainer.processing_class.pad_token_id, seed=2)
    trainer.model.double()
    try:
        with torch.no_grad():
            (lp_s, ent_s, _), (lp_r, ent_r, _), mask = logps_both(trainer, batch)
    finally:
        trainer.model.float()
    assert rel(lp_s[mask], lp_r[mask]) <= 1e-12 and rel(ent_s[mask], ent_r[mask]) <= 1e-12


def test_the_periodic_check_logs_agreement_and_falls_back_on_a_wrong_mask(trainer, monkeypatch, caplog):
    """trainer.shared_prefix_check_every: the step's first forward is also scored on the repeated
    rows; with a correct mask the difference is logged and small, with a leaky one the check turns
    the shared path off and the forward returns the repeated rows' log-probs."""
    import rl.shared_prefix as sp

    batch = make_batch(trainer.model.config.vocab_size, trainer.processing_class.pad_token_id)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    mask = batch["completion_mask"].bool()
    metric = trainer._metrics["train"]["shared_prefix/max_logp_diff"]
    metric.clear()
    trainer.check_every, trainer.check_tolerance = 1, 1e-4
    trainer.state.global_step = 5
    try:
        with torch.no_grad():
            _, (want, _, _), _ = logps_both(trainer, batch)  # the repeated rows, and the check's first call
            assert len(metric) == 1 and metric[0] <= 1e-5
            trainer.__dict__.pop("_checked_step", None)

            def leaky(segment, key_valid):
                allowed = segment_mask(segment, key_valid)
                T = segment.size(1)
                causal = torch.ones(T, T, dtype=torch.bool).tril()
                return allowed | (causal & key_valid[:, None, :] & (segment >= 0)[:, :, None])[:, None]

            monkeypatch.setattr(sp, "shared_prefix_logps", functools.partial(sp.shared_prefix_logps, mask_fn=leaky))
            caplog.set_level(logging.WARNING, logger="tooldojo.rl.shared_prefix")
            got, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, att, M)
        assert len(metric) == 2 and metric[1] > 1e-2
        assert trainer.shared_prefix is False
        assert rel(got[mask], want[mask]) == 0.0   # the repeated rows' values, not the leaky ones
        assert any("for the rest of the run" in r.message for r in caplog.records)
        # once per step: a second forward of step 5 is not checked again
        trainer.shared_prefix = True
        monkeypatch.undo()
        with torch.no_grad():
            trainer._get_per_token_logps_and_entropies(trainer.model, ids, att, M)
        assert len(metric) == 2
    finally:
        trainer.shared_prefix, trainer.check_every = True, 0
        trainer.state.global_step = 0
        trainer.__dict__.pop("_checked_step", None)


def test_split_groups_follows_the_cost_of_dense_attention():
    from rl.shared_prefix import split_groups

    g = [[0, 1, 2, 3, 4, 5, 6, 7]]
    # a long prompt and short completions: one packed row (the whole group) costs least
    assert split_groups(g, [500], [50] * 8, per_token=1000.0, per_pair=1.0) == g
    # long completions (tool outputs) behind a short prompt: the dense mask's (P + G*R)^2 pairs lose
    assert split_groups(g, [100], [900] * 8, per_token=1000.0, per_pair=1.0) == [[b] for b in g[0]]
    # in between: rows of a few completions, every row keeps its group's order
    mid = split_groups(g, [1000], [400] * 8, per_token=1000.0, per_pair=1.0)
    assert 1 < len(mid) < 8 and [b for r in mid for b in r] == g[0]
    # with no attention cost nothing is cut
    assert split_groups(g + [[8, 9]], [10, 10], [900] * 10, per_token=1.0, per_pair=0.0) == g + [[8, 9]]


def test_split_packed_rows_give_the_same_log_probs(trainer, monkeypatch, caplog):
    """Groups cut into packed rows of fewer completions (what split_groups picks for long
    completions) score the same values as the repeated rows; all-singleton cuts fall back, saying why."""
    import rl.shared_prefix as sp

    batch = make_batch(trainer.model.config.vocab_size, trainer.processing_class.pad_token_id, seed=2)
    calls = []
    real = sp.split_groups

    def cut_in_two(groups, prompts, extent, per_token, per_pair):
        calls.append(len(groups))
        return [g[i:i + 2] for g in groups for i in range(0, len(g), 2)]

    monkeypatch.setattr(sp, "split_groups", cut_in_two)
    with torch.no_grad():
        (lp_s, ent_s, _), (lp_r, ent_r, _), mask = logps_both(trainer, batch)
    assert calls and rel(lp_s[mask], lp_r[mask]) <= TOL and rel(ent_s[mask], ent_r[mask]) <= TOL
    monkeypatch.setattr(sp, "split_groups", lambda groups, *a, **k: [[b] for g in groups for b in g])
    caplog.set_level(logging.INFO, logger="tooldojo.rl.shared_prefix")
    trainer.__dict__.pop("_shared_prefix_said", None)
    with torch.no_grad():
        (lp_1, _, _), _, _ = logps_both(trainer, batch)
    assert rel(lp_1[mask], lp_r[mask]) == 0.0
    assert any("repeated rows cost less" in r.message for r in caplog.records)
    monkeypatch.setattr(sp, "split_groups", real)
