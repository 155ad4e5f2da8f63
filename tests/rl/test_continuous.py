"""Continuous-batching generation (rl.continuous) on the tiny model, through the rollout's batcher.

The property that matters for multi-turn training: an episode's next turn joins the running
batch as soon as its previous turn ended, instead of waiting for the slowest sequence of a
padded batch. Checked with real decoding on the CPU (the GPU machine runs the same code)."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("transformers")

from rl.config import ConfigError, load_config  # noqa: E402
from rl.continuous import ContinuousHFGenerator  # noqa: E402
from rl.rollout import GenerationBatcher, GenRequest, HFGenerator, MultiTurnRollout, RolloutError, Sampling  # noqa: E402
from sandboxes import SandboxConfig  # noqa: E402
from tests.conftest import any_backend  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.tiny import build_tiny_model

    d = build_tiny_model()
    model = AutoModelForCausalLM.from_pretrained(d)
    model.train()
    return AutoTokenizer.from_pretrained(d), model


def _prompt(tok, text: str) -> list[int]:
    s = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
    return tok(s, add_special_tokens=False)["input_ids"]


def _eos(tok) -> list[int]:
    return [tok.convert_tokens_to_ids("<|im_end|>")]


def test_logprobs_are_the_models_and_the_model_is_put_back(tiny):
    import torch

    tok, model = tiny
    attn = model.config._attn_implementation
    gen = ContinuousHFGenerator(lambda: model, tok, Sampling(temperature=1.0), eos_ids=_eos(tok), context_limit=2048)
    reqs = [GenRequest(_prompt(tok, f"Cancel order O-{i} please."), 6 + 3 * i, seed=i) for i in range(4)]
    out = gen.generate(reqs)
    assert model.training and model.config._attn_implementation == attn  # as it was before the session
    with torch.no_grad():
        for req, res in zip(reqs, out, strict=True):
            assert 0 < len(res.ids) <= req.max_tokens
            assert len(res.ids) == req.max_tokens or res.ids[-1] in gen.eos_ids
            full = torch.tensor([req.prompt_ids + res.ids])
            logits = model(full).logits[0, len(req.prompt_ids) - 1: -1].float()
            want = logits.log_softmax(-1).gather(-1, torch.tensor(res.ids)[:, None])[:, 0]
            assert torch.allclose(torch.tensor(res.logprobs), want, atol=1e-4)


def test_greedy_matches_padded_generate(tiny):
    tok, model = tiny
    reqs = [GenRequest(_prompt(tok, t), 16) for t in ("Return B-12.", "Where is my order O-7?", "hi")]
    cont = ContinuousHFGenerator(lambda: model, tok, Sampling(temperature=0.0), eos_ids=_eos(tok), context_limit=2048)
    padded = HFGenerator(lambda: model, tok, Sampling(temperature=0.0), eos_ids=_eos(tok), context_limit=2048)
    assert [r.ids for r in cont.generate(reqs)] == [r.ids for r in padded.generate(reqs)]


def _episodes_through_batcher(generator, tok, long_tokens: int) -> dict[str, float]:
    """Episode A: two 3-token turns, one after the other. Episode B: one long turn. Returns when
    each finished (seconds from the start)."""
    from anyio.from_thread import start_blocking_portal

    batcher = GenerationBatcher(generator, max_wait_s=5.0, seed=0)
    done_at: dict[str, float] = {}
    t0 = time.perf_counter()

    async def episode_a():
        try:
            for turn in (1, 2):
                r = await batcher.generate(GenRequest(_prompt(tok, f"turn {turn}"), 3, seed=turn))
                assert len(r.ids) == 3
            done_at["a"] = time.perf_counter() - t0
        finally:
            batcher.leave()

    async def episode_b():
        try:
            r = await batcher.generate(GenRequest(_prompt(tok, "a long answer"), long_tokens, seed=3))
            assert len(r.ids) == long_tokens
            done_at["b"] = time.perf_counter() - t0
        finally:
            batcher.leave()

    async def both():
        import anyio

        async with anyio.create_task_group() as tg:
            tg.start_soon(episode_a)
            tg.start_soon(episode_b)

    with start_blocking_portal("asyncio") as portal:
        batcher.enter()
        batcher.enter()
        fut = portal.start_task_soon(both)
        batcher.serve(fut)
        fut.result(timeout=120)
    return done_at


def test_a_next_turn_joins_the_running_batch(tiny):
    tok, model = tiny
    never = [len(tok) + 7]  # an id the model cannot emit: every request decodes its max_tokens
    cont = ContinuousHFGenerator(lambda: model, tok, Sampling(), eos_ids=never, context_limit=4096)
    t = _episodes_through_batcher(cont, tok, long_tokens=400)
    assert t["a"] < t["b"]  # A's second turn ran while B was still decoding
    # the padded path (the control): A's second turn waits for B's whole batch
    padded = HFGenerator(lambda: model, tok, Sampling(), eos_ids=never, context_limit=4096)
    t = _episodes_through_batcher(padded, tok, long_tokens=400)
    assert t["a"] > t["b"]


def test_a_dead_generation_thread_fails_the_waiting_episodes_without_hanging(tiny):
    tok, model = tiny
    calls = {"n": 0}
    real_forward = model.forward

    def flaky_forward(*a, **kw):
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("device lost")
        return real_forward(*a, **kw)

    gen = ContinuousHFGenerator(lambda: model, tok, Sampling(), eos_ids=[len(tok) + 7], context_limit=4096)
    result: dict[str, BaseException] = {}

    def run():
        try:
            gen.generate([GenRequest(_prompt(tok, "x"), 50, seed=1), GenRequest(_prompt(tok, "y"), 50, seed=2)])
        except BaseException as e:  # noqa: BLE001
            result["error"] = e

    model.forward = flaky_forward
    try:
        th = threading.Thread(target=run)
        th.start()
        th.join(timeout=120)
        assert not th.is_alive(), "generation hung after its thread died"
    finally:
        del model.forward
    assert isinstance(result.get("error"), RolloutError)
    assert "device lost" in str(result["error"]) or "stopped" in str(result["error"])
    assert model.training  # put back even after the failure


def test_multi_turn_rollout_runs_on_continuous_batching(tiny):
    from synth.tasks import synthesize_tasks

    tok, model = tiny
    backend = any_backend()
    tasks = synthesize_tasks(4, seed=3, domains=["home_devices"], backend=backend, sandboxes=2).tasks
    gen = ContinuousHFGenerator(lambda: model, tok, Sampling(), eos_ids=_eos(tok), context_limit=2048)
    with MultiTurnRollout(tasks, tokenizer=tok, max_completion_length=48, sandbox_config=SandboxConfig(backend=backend),
                          pool_size=len(tasks)) as ro:
        out = ro.run(tasks, gen, step=0)
        assert ro.pool.leased == 0
    assert len(out["completion_ids"]) == len(tasks)
    for ids, mask, lps in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
        assert 0 < sum(mask) <= 48 and len(ids) == len(mask) == len(lps)
    assert ro.stats["sampled_tokens"] == sum(sum(m) for m in out["env_mask"])
    assert ro.stats["generate_s"] > 0


def test_config_picks_and_checks_continuous_batching(tmp_path):
    cfg = load_config("examples/train_tiny.yaml", ["rollout.hf_generation=continuous",
                                                    'rollout.hf_continuous_batching={"block_size": 64}'])
    assert cfg.rollout.hf_generation == "continuous" and cfg.rollout.hf_continuous_batching == {"block_size": 64}
    with pytest.raises(ConfigError, match="hf_continuous_batching"):
        load_config("examples/train_tiny.yaml", ['rollout.hf_continuous_batching={"blok_size": 64}'])
    with pytest.raises(ConfigError, match="hf_continuous_batching"):
        load_config("examples/train_tiny.yaml", ['rollout.hf_continuous_batching={"seed": 1}'])
    with pytest.raises(ConfigError, match="hf_generation"):
        load_config("examples/train_tiny.yaml", ["rollout.hf_generation=paged"])


def test_unsupported_sampling_is_refused(tiny):
    tok, model = tiny
    with pytest.raises(RolloutError, match="repetition_penalty"):
        ContinuousHFGenerator(lambda: model, tok, Sampling(repetition_penalty=1.1), eos_ids=_eos(tok),
                              context_limit=2048)


def test_dojo_train_steps_with_continuous_batching(tmp_path, caplog):
    """The trainer end to end on the path the GPU machine takes (no vLLM): TRL's GRPOTrainer with our
    rollout_func generating through continuous batching."""
    import json
    import logging

    pytest.importorskip("trl")
    from rl.trainer import train

    cfg = load_config("examples/train_tiny.yaml", [
        f"run.output_dir={tmp_path}", "data.synthesize=4", "rollout.use_vllm=false", "rollout.hf_generation=continuous",
        "grpo.max_steps=2", "grpo.per_device_train_batch_size=8", "grpo.num_generations=4",
        "grpo.max_completion_length=48", f"rollout.sandbox_backend={any_backend()}", "run.logging=[]",
        "rollout.dynamic_sampling=1"])
    with caplog.at_level(logging.INFO, logger="tooldojo.rl"):
        res = train(cfg, run_dir=tmp_path, progress=False)
    assert res.steps == 2
    assert any("continuous batches" in r.getMessage() for r in caplog.records)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if x.strip()]
    steps = [r for r in rows if "reward" in r]
    assert len(steps) == 2 and all(r["rollout/generate_s"] > 0 and r["completions/mean_length"] > 0 for r in steps)
    # dynamic sampling ran inside TRL's step: its counts are logged (2 groups of 4 per step)
    assert all(0 <= r["rollout/refilled_groups"] <= r["rollout/flat_groups"] <= 2 for r in steps)


def test_the_cache_is_sized_to_the_work_under_the_cap():
    """On a GPU the KV cache holds the step's episodes (8 x 1,400 tokens of a 0.49B Qwen2: ~0.6 GB)
    instead of half of free memory; work beyond the cap falls back to transformers' sizing in it."""
    from types import SimpleNamespace

    from rl.continuous import CacheWork, cb_kwargs, kv_bytes_per_token, work_sized

    cfg = SimpleNamespace(num_hidden_layers=26, num_attention_heads=16, num_key_value_heads=8, hidden_size=1024)
    assert kv_bytes_per_token(cfg) == 2 * 26 * 8 * 64 * 2
    work = CacheWork(sequences=8, tokens=1400)
    sized = work_sized(work, 256)
    assert sized["num_blocks"] == 8 * (6 + 1) and sized["max_batch_tokens"] == min(8192, 56 * 256)
    kw = cb_kwargs({}, "cuda", work=work, model_config=cfg, free_bytes=60 * 2**30)
    assert kw["num_blocks"] == 56 and kw["max_batch_tokens"] == 8192 and kw["max_memory_percent"] == 0.5
    need = 56 * 256 * kv_bytes_per_token(cfg)
    capped = cb_kwargs({}, "cuda", work=work, model_config=cfg, memory_cap=0.5, free_bytes=need)  # half too small
    assert "num_blocks" not in capped and capped["max_memory_percent"] == 0.5
    assert "num_blocks" not in cb_kwargs({}, "cuda", work=None, model_config=cfg, free_bytes=60 * 2**30)
    own = cb_kwargs({"num_blocks": 10}, "cuda", work=work, model_config=cfg, free_bytes=60 * 2**30)
    assert own["num_blocks"] == 10 and "max_batch_tokens" not in own  # the config's own sizing wins
    assert cb_kwargs({}, "cuda", memory_cap=0.2)["max_memory_percent"] == 0.2
    assert cb_kwargs({"max_memory_percent": 0.3}, "cuda", memory_cap=0.2)["max_memory_percent"] == 0.3
    cpu = cb_kwargs({}, "cpu", work=work, model_config=cfg)
    assert cpu["num_blocks"] == 256 and "max_memory_percent" not in cpu  # a fixed cache without CUDA
