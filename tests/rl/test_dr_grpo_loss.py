"""Dr. GRPO as TRL 1.16's GRPOTrainer optimises it, recomputed by hand.

Dr. GRPO (Liu et al. 2025): A_i = R_i - mean_j R_j (no std scaling), per-token clipped surrogate
-min(r A, clip(r, 1-eps, 1+eps) A), summed over each completion's tokens and divided by the
constant G * max_completion_length (TRL: ``per_token_loss.size(0) * self.max_completion_length``),
then by the gradient-accumulation steps. Plain GRPO instead divides each completion by its own
length |o_i|: short and long completions' tokens get different weights.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from rl.tiny import build_tiny_model  # noqa: E402

G = 4                      # completions per prompt
M = 8                      # max_completion_length: the Dr. GRPO normaliser
LENGTHS = [2, 5, 8, 3]     # |o_i|: different lengths, right-padded to M
REWARDS = [1.0, 0.0, 0.5, 0.25]
EPS = 0.2


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def make_trainer(tiny, tmp_path, loss_type="dr_grpo", scale_rewards="none", rewards=REWARDS):
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    calls = {"n": 0}

    def fixed_reward(prompts, completions, **kwargs):
        calls["n"] += 1
        return list(rewards)[: len(completions)]

    args = GRPOConfig(
        output_dir=str(tmp_path / f"out-{loss_type}"), loss_type=loss_type, scale_rewards=scale_rewards, beta=0.0,
        use_cpu=True, bf16=False, max_completion_length=M, num_generations=G, per_device_train_batch_size=G,
        gradient_accumulation_steps=1, report_to=[], logging_steps=1, max_steps=1, epsilon=EPS,
        gradient_checkpointing=False, seed=0, temperature=1.0,
    )
    tok = AutoTokenizer.from_pretrained(tiny)
    ds = datasets.Dataset.from_dict({"prompt": ["Look up the quote for ACME."] * G})
    trainer = GRPOTrainer(model=str(tiny), reward_funcs=fixed_reward, args=args, train_dataset=ds,
                          processing_class=tok)
    # Set by Trainer's training loop; _compute_loss divides by it in train mode.
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    return trainer, tok


def make_batch(tok, vocab: int):
    """One prompt repeated G times; G completions of LENGTHS tokens, right-padded to M."""
    gen = torch.Generator().manual_seed(0)
    prompt = tok("Look up the quote for ACME.", return_tensors="pt")["input_ids"][0]
    prompt_ids = prompt.unsqueeze(0).repeat(G, 1)
    completion_ids = torch.randint(300, vocab, (G, M), generator=gen)
    completion_mask = torch.zeros(G, M, dtype=torch.long)
    for i, n in enumerate(LENGTHS):
        completion_mask[i, :n] = 1
    completion_ids = completion_ids.masked_fill(completion_mask == 0, tok.pad_token_id)
    return prompt_ids, torch.ones_like(prompt_ids), completion_ids, completion_mask


def hand_logps(model, prompt_ids, prompt_mask, completion_ids, completion_mask):
    """log pi(o_t | q, o_<t) from the plain logits (independent of TRL's fused head)."""
    ids = torch.cat([prompt_ids, completion_ids], 1)
    att = torch.cat([prompt_mask, completion_mask], 1)
    logits = model(input_ids=ids, attention_mask=att).logits
    p = prompt_ids.size(1)
    logp = torch.log_softmax(logits[:, p - 1:-1].float(), dim=-1)
    return logp.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)


def hand_dr_grpo_loss(logps, old_logps, rewards, mask, max_len=M, eps=EPS):
    r = torch.tensor(rewards)
    adv = (r - r.mean()).unsqueeze(1)                        # Dr. GRPO: no std scaling
    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1 - eps, 1 + eps)
    per_token = -torch.min(ratio * adv, clipped * adv)
    return (per_token * mask).sum() / (logps.size(0) * max_len)   # sum over tokens / (G * L_max)


def inputs_for(prompt_ids, prompt_mask, completion_ids, completion_mask, advantages, old_logps):
    """The keys _compute_loss reads (what _generate_and_score_completions returns)."""
    return {
        "prompt_ids": prompt_ids, "prompt_mask": prompt_mask,
        "completion_ids": completion_ids, "completion_mask": completion_mask,
        "advantages": advantages, "old_per_token_logps": old_logps,
        "num_items_in_batch": completion_mask.sum(),
    }


@pytest.fixture(scope="module")
def dr(tiny, tmp_path_factory):
    return make_trainer(tiny, tmp_path_factory.mktemp("dr"))


@pytest.mark.parametrize("perturb", [0.0, 0.5], ids=["ratio=1", "clipped"])
def test_trl_dr_grpo_loss_and_gradient_match_the_hand_computation(dr, perturb):
    trainer, tok = dr
    model = trainer.model
    assert (trainer.loss_type, trainer.scale_rewards, trainer.beta, trainer.max_completion_length) == (
        "dr_grpo", "none", 0.0, M)
    prompt_ids, prompt_mask, completion_ids, completion_mask = make_batch(tok, model.config.vocab_size)
    mask = completion_mask.float()

    with torch.no_grad():
        base = hand_logps(model, prompt_ids, prompt_mask, completion_ids, completion_mask)
    noise = (torch.rand(G, M, generator=torch.Generator().manual_seed(1)) * 2 - 1) * perturb
    old = (base + noise).detach()
    r = torch.tensor(REWARDS)
    advantages = r - r.mean()

    # TRL's loss, through the trainer's compute_loss (-> _compute_loss)
    inputs = inputs_for(prompt_ids, prompt_mask, completion_ids, completion_mask, advantages, old)
    params = [p for n, p in model.named_parameters() if n.endswith("layers.1.mlp.down_proj.weight")]
    params += [model.get_input_embeddings().weight]
    trl_loss = trainer.compute_loss(model, inputs)
    trl_grads = torch.autograd.grad(trl_loss, params)

    # by hand
    logps = hand_logps(model, prompt_ids, prompt_mask, completion_ids, completion_mask)
    loss = hand_dr_grpo_loss(logps, old, REWARDS, mask)
    grads = torch.autograd.grad(loss, params)

    assert torch.allclose(trl_loss.detach(), loss.detach(), atol=1e-5, rtol=0), (trl_loss.item(), loss.item())
    for a, b in zip(trl_grads, grads, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), (a - b).abs().max()
        assert b.abs().sum() > 0

    if perturb == 0.0:
        # ratio = 1: every token contributes -A_i, so the loss is -sum_i A_i |o_i| / (G * L_max); not 0,
        # although the advantages sum to 0, because the completions' lengths differ
        expected = -sum(a * n for a, n in zip(advantages.tolist(), LENGTHS, strict=True)) / (G * M)
        assert trl_loss.item() == pytest.approx(expected, abs=1e-6) and expected != 0
    else:
        ratio = torch.exp(logps.detach() - old)
        adv = advantages.unsqueeze(1).expand(G, M)
        clipped = (((ratio > 1 + EPS) & (adv > 0)) | ((ratio < 1 - EPS) & (adv < 0))) & (mask > 0)
        assert clipped.any() and (~clipped & (mask > 0)).any()   # both regimes exercised
        assert abs(loss.item()) > 1e-4

    # the constant normaliser is G * max_completion_length, not the token count
    assert mask.sum().item() == sum(LENGTHS) != G * M

    # gradient accumulation divides the micro-batch loss
    trainer.current_gradient_accumulation_steps = 2
    try:
        halved = trainer.compute_loss(model, inputs)
    finally:
        trainer.current_gradient_accumulation_steps = 1
    assert torch.allclose(halved.detach(), trl_loss.detach() / 2, atol=1e-6)


def test_trl_advantages_are_reward_minus_group_mean(dr):
    trainer, _ = dr
    inputs = [{"prompt": "Look up the quote for ACME."} for _ in range(G)]
    torch.manual_seed(0)
    out = trainer._generate_and_score_completions(inputs)
    r = torch.tensor(REWARDS)
    assert torch.allclose(out["advantages"], r - r.mean(), atol=1e-6), out["advantages"]
    assert out["completion_ids"].shape[0] == G and out["completion_ids"].shape[1] <= M
    # and the keys our hand-built inputs used are the ones TRL produces
    assert {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages",
            "num_items_in_batch"} <= set(out)


def test_group_scaling_divides_by_the_std(tiny, tmp_path):
    trainer, _ = make_trainer(tiny, tmp_path, loss_type="grpo", scale_rewards="group")
    out = trainer._generate_and_score_completions([{"prompt": "Look up the quote for ACME."} for _ in range(G)])
    r = torch.tensor(REWARDS)
    assert torch.allclose(out["advantages"], (r - r.mean()) / (r.std() + 1e-4), atol=1e-5)


def per_token_weights(trainer, completion_mask, advantages):
    """d loss / d log pi(o_t) for every token, from TRL's own _compute_loss, with the model's
    log-probs replaced by a leaf tensor (ratio = 1). Returned divided by -A_i: the weight."""
    logps = torch.randn(G, M, generator=torch.Generator().manual_seed(2)).log_softmax(-1).requires_grad_(True)

    def fake(model, input_ids, attention_mask, logits_to_keep, **kwargs):
        return logps, torch.zeros_like(logps), None

    trainer._get_per_token_logps_and_entropies = fake
    try:
        inputs = inputs_for(torch.ones(G, 3, dtype=torch.long), torch.ones(G, 3, dtype=torch.long),
                            torch.ones(G, M, dtype=torch.long), completion_mask, advantages, logps.detach())
        loss = trainer._compute_loss(trainer.model, inputs)
    finally:
        del trainer._get_per_token_logps_and_entropies
    (grad,) = torch.autograd.grad(loss, logps)
    return grad / (-advantages.unsqueeze(1))


def test_grpo_weights_tokens_by_length_dr_grpo_does_not(tiny, tmp_path, dr):
    _, tok = dr
    completion_mask = make_batch(tok, 1000)[3]
    mask = completion_mask.bool()
    advantages = torch.tensor(REWARDS) - torch.tensor(REWARDS).mean()   # all non-zero
    assert (advantages != 0).all()

    w_dr = per_token_weights(dr[0], completion_mask, advantages)
    grpo_trainer, _ = make_trainer(tiny, tmp_path, loss_type="grpo")
    w_grpo = per_token_weights(grpo_trainer, completion_mask, advantages)

    # padding never gets gradient
    assert (w_dr[~mask] == 0).all() and (w_grpo[~mask] == 0).all()
    # Dr. GRPO: one constant weight 1/(G * L_max) for every real token, whatever its completion's length
    assert torch.allclose(w_dr[mask], torch.full_like(w_dr[mask], 1.0 / (G * M)), atol=1e-8)
    # GRPO: 1/(G * |o_i|), so a token of a 2-token completion weighs 4x one of an 8-token completion
    lengths = torch.tensor(LENGTHS, dtype=torch.float32).unsqueeze(1).expand(G, M)
    assert torch.allclose(w_grpo[mask], (1.0 / (G * lengths))[mask], atol=1e-8)
    per_seq = [w_grpo[i, 0].item() for i in range(G)]
    assert len({round(w, 8) for w in per_seq}) == len(set(LENGTHS)) == G
    assert per_seq[0] / per_seq[2] == pytest.approx(LENGTHS[2] / LENGTHS[0])
    # they agree only for a completion that uses the whole budget
    full = LENGTHS.index(M)
    assert torch.allclose(w_grpo[full], w_dr[full])
