"""The multi-turn rollout behind `dojo train`: token in/token out episodes in real sandboxes.

Policies here are real generators: the tiny model through transformers, and a scripted token
policy (`ScriptedTokenPolicy`, a test double for the model that emits fixed texts as tokens) so
that what is masked and what is rewarded can be checked exactly.
"""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("transformers")
pytest.importorskip("trl")

from rl.rollout import (  # noqa: E402
    GenRequest,
    GenResult,
    HFGenerator,
    MultiTurnRollout,
    RolloutError,
    Sampling,
    parse_assistant,
)
from sandboxes import SandboxConfig  # noqa: E402
from tests.conftest import any_backend  # noqa: E402

DOMAINS = ["retail_orders", "library_loans"]




@pytest.fixture(scope="module")
def backend() -> str:
    return any_backend()


@pytest.fixture(scope="module")
def tasks(backend):
    from synth.tasks import synthesize_tasks

    made = synthesize_tasks(6, seed=3, domains=DOMAINS, backend=backend, sandboxes=2)
    assert len(made.tasks) == 6
    return made.tasks


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.tiny import build_tiny_model

    d = build_tiny_model()
    return AutoTokenizer.from_pretrained(d), AutoModelForCausalLM.from_pretrained(d)


class ScriptedTokenPolicy:
    """Emits `turns[k]` (as tokens, then <|im_end|>) at the k-th assistant turn of each prompt."""

    def __init__(self, tok, turns: list[str], *, fail_on_call: int | None = None, end: bool = True):
        self.tok, self.turns, self.fail_on_call, self.end = tok, turns, fail_on_call, end
        self.context_limit = 4096
        self.calls = 0
        self.eot = tok.convert_tokens_to_ids("<|im_end|>")

    def generate(self, requests):
        self.calls += 1
        if self.fail_on_call is not None and self.calls >= self.fail_on_call:
            raise RuntimeError("generation backend died")
        out = []
        for r in requests:
            k = self.tok.decode(r.prompt_ids).count("<|im_start|>assistant") - 1
            text = self.turns[min(k, len(self.turns) - 1)]
            ids = self.tok(text, add_special_tokens=False)["input_ids"] + ([self.eot] if self.end else [])
            ids = ids[: r.max_tokens]
            out.append(GenResult(ids=ids, logprobs=[-0.5] * len(ids)))
        return out


def _call(name: str, args: dict) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


def _gold_turns(task) -> list[str]:
    calls = "\n".join(_call(a.name, a.arguments) for a in task.gold_actions)
    return [calls, "All done. " + " ".join(task.expected_outputs)]


def _rollout(tasks, tok, backend, **kw):
    return MultiTurnRollout(tasks, tokenizer=tok, sandbox_config=SandboxConfig(backend=backend),
                            pool_size=kw.pop("pool_size", 2), max_completion_length=kw.pop("budget", 1500), **kw)


# ------------------------------------------------------------------------------ parsing
def test_parse_assistant_reads_hermes_tool_calls_and_keeps_broken_ones():
    m = parse_assistant('Let me look. <tool_call>\n{"name": "get_order", "arguments": {"order_id": "O-1"}}\n</tool_call>')
    assert m["content"] == "Let me look."
    [c] = m["tool_calls"]
    assert c["function"]["name"] == "get_order" and json.loads(c["function"]["arguments"]) == {"order_id": "O-1"}
    # broken JSON keeps the name it can find and the raw text, so the episode answers "malformed"
    m = parse_assistant('<tool_call>{"name": "get_order", "arguments": {"order_id": </tool_call>')
    assert m["content"] is None and m["tool_calls"][0]["function"]["name"] == "get_order"
    assert m["tool_calls"][0]["function"]["arguments"].startswith('{"name"')
    # unclosed block at the end, two calls, plain text
    m = parse_assistant('a <tool_call>{"name": "x", "arguments": {}}</tool_call><tool_call>{"name": "y"')
    assert [c["function"]["name"] for c in m["tool_calls"]] == ["x", "y"] and m["content"] == "a"
    assert parse_assistant("hello") == {"role": "assistant", "content": "hello"}
    assert parse_assistant("<tool_call>[1, 2]</tool_call>")["tool_calls"][0]["function"]["name"] == ""


# ------------------------------------------------------------------------- masks + reward
def test_gold_policy_earns_the_reward_and_only_its_own_tokens_are_unmasked(tasks, tiny, backend):
    tok, _ = tiny
    task = next(t for t in tasks if t.gold_actions and not t.needs_user_info)
    policy = ScriptedTokenPolicy(tok, _gold_turns(task))
    with _rollout([task], tok, backend) as ro:
        out = ro.run([task, task], policy)
        assert ro.pool.leased == 0
    assert set(out) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask", "episode_reward"}
    for i in range(2):
        ids, mask, lps = out["completion_ids"][i], out["env_mask"][i], out["logprobs"][i]
        assert len(ids) == len(mask) == len(lps)
        ep = ro.last[i]
        assert ep.trajectory.termination == "user_stop", ep.trajectory.error
        assert ep.trajectory.reached_expected_state
        assert ep.reward == pytest.approx(1.0) and ep.components["world_state"] == 1.0, ep.reward_reason
        sampled = tok.decode([t for t, m in zip(ids, mask, strict=False) if m])
        env = tok.decode([t for t, m in zip(ids, mask, strict=False) if not m])
        turns = _gold_turns(task)
        assert sampled == turns[0] + "<|im_end|>" + turns[1] + "<|im_end|>"
        assert "<tool_response>" in env and "<tool_response>" not in sampled
        assert turns[1] not in env and "<tool_call>" not in env
        assert all(lp == 0.0 for lp, m in zip(lps, mask, strict=False) if not m) and all(lp == -0.5 for lp, m in zip(lps, mask, strict=False) if m)
        # every tool result the sandbox produced is in the masked tokens, verbatim
        for msg in ep.trajectory.messages:
            if msg["role"] == "tool":
                assert msg["content"] in env
        # prompt = system + the user's opening + the generation prompt; no completion text in it
        prompt = tok.decode(out["prompt_ids"][i])
        assert prompt.endswith("<|im_start|>assistant\n") and "<tool_response>" not in prompt


def test_a_policy_that_does_nothing_gets_no_world_state_reward(tasks, tiny, backend):
    tok, _ = tiny
    task = next(t for t in tasks if any(a.name for a in t.gold_actions))
    with _rollout([task], tok, backend) as ro:
        ro.run([task], ScriptedTokenPolicy(tok, ["I cannot help with that."]))
    ep = ro.last[0]
    assert ep.components["world_state"] == 0.0 and ep.reward < 1.0


def test_on_episode_hears_every_episode_as_it_ends(tasks, tiny, backend):
    """Issue 33 #4: the held-out evaluation's progress counts episodes through this hook."""
    from rl.evaluate import run_episodes

    tok, _ = tiny
    seen = []
    with _rollout(tasks[:2], tok, backend) as ro:
        sampled, greedy = run_episodes(ro, tasks[:2], lambda temp: ScriptedTokenPolicy(tok, ["Nothing to do."]),
                                       samples=2, temperature=1.0, progress=lambda d, t: seen.append((d, t)))
        assert ro.on_episode is None
    assert len(sampled) == 4 and len(greedy) == 2 and seen == [(i, 6) for i in range(7)]


def test_budget_ends_the_episode_and_is_never_exceeded(tasks, tiny, backend):
    tok, _ = tiny
    with _rollout(tasks[:2], tok, backend, budget=40) as ro:
        out = ro.run(tasks[:2], ScriptedTokenPolicy(tok, ["word " * 200], end=False))
    for ids, ep in zip(out["completion_ids"], ro.last, strict=False):
        assert len(ids) <= 40 and ep.trajectory.termination == "max_tokens"


def test_sandboxes_come_back_when_generation_fails(tasks, tiny, backend):
    tok, _ = tiny
    task = next(t for t in tasks if t.gold_actions)
    with _rollout([task], tok, backend) as ro:
        with pytest.raises(RolloutError, match="generation"):
            ro.run([task] * 3, ScriptedTokenPolicy(tok, _gold_turns(task), fail_on_call=2))
        assert ro.pool.leased == 0
        # the rollout is still usable afterwards
        ro.run([task], ScriptedTokenPolicy(tok, _gold_turns(task)))
        assert ro.last[0].reward == pytest.approx(1.0)
        assert ro.pool.leased == 0


def test_prompts_must_name_a_known_task(tasks, tiny, backend):
    tok, _ = tiny
    with _rollout(tasks[:1], tok, backend) as ro:
        ds = ro.dataset()
        assert ds[0]["prompt"][0]["task_id"] == tasks[0].id
        assert ro.task_of(ds[0]["prompt"]) is tasks[0]
        with pytest.raises(RolloutError, match="no 'task_id'"):
            ro.task_of([{"role": "user", "content": "hi"}])
        with pytest.raises(RolloutError, match="not among"):
            ro.task_of([{"role": "user", "content": "hi", "task_id": "nope"}])


# ----------------------------------------------------------------------- the tiny model
def test_hf_generator_logprobs_are_the_models_and_seeds_reproduce(tiny):
    import torch

    tok, model = tiny
    gen = HFGenerator(lambda: model, tok, Sampling(temperature=1.0), eos_ids=[tok.convert_tokens_to_ids("<|im_end|>")],
                      context_limit=2048)
    prompt = tok.apply_chat_template([{"role": "user", "content": "Cancel order O-1 please."}], tokenize=False,
                                     add_generation_prompt=True)
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    reqs = [GenRequest(ids, 12, seed=1), GenRequest(ids[:-3], 7, seed=2)]
    a, b = gen.generate(reqs), gen.generate(reqs)
    assert [r.ids for r in a] == [r.ids for r in b]                  # same seeds, same samples
    assert [len(r.ids) for r in a] == [12, 7] or any(r.ids[-1] in gen.eos_ids for r in a)
    with torch.no_grad():
        for req, res in zip(reqs, a, strict=False):
            full = torch.tensor([req.prompt_ids + res.ids])
            logits = model(full).logits[0, len(req.prompt_ids) - 1: -1].float()
            want = logits.log_softmax(-1).gather(-1, torch.tensor(res.ids)[:, None])[:, 0]
            assert all(math.isfinite(x) and x < 0 for x in res.logprobs)
            assert torch.allclose(torch.tensor(res.logprobs), want, atol=1e-4)


def test_tiny_model_episodes_run_end_to_end_with_rewards(tasks, tiny, backend):
    tok, model = tiny
    gen = HFGenerator(lambda: model, tok, Sampling(), eos_ids=[2, 0], context_limit=2048)
    with _rollout(tasks, tok, backend, budget=96, pool_size=len(tasks)) as ro:
        out = ro.run(tasks, gen, step=0)
        again = ro.run(tasks, gen, step=0)
        assert ro.pool.leased == 0
    assert len(out["completion_ids"]) == len(tasks)
    # seeds derive from (seed, step, episode) and batches wait for every live episode, so the same
    # step samples the same episodes (transformers draws a batch from one seed: batches must repeat)
    assert out["prompt_ids"] == again["prompt_ids"] and out["completion_ids"] == again["completion_ids"]
    for ids, mask, r in zip(out["completion_ids"], out["env_mask"], out["episode_reward"], strict=False):
        assert 0 < len(ids) <= 96 and sum(mask) > 0
        assert r is None or 0.0 <= r <= 1.0
    assert ro.stats["sampled_tokens"] == sum(sum(m) for m in again["env_mask"])  # stats of the last run


def test_solved_needs_the_world_state_and_the_outputs():
    from rl.rollout import solved

    assert solved({"world_state": 1.0, "communication": 1.0, "turn_format": 0.0})
    assert solved({"world_state": 1.0, "communication": None})  # nothing to report
    assert not solved({"world_state": 1.0, "communication": 0.5})
    assert not solved({"world_state": 0.0, "communication": 1.0})
    assert not solved({"turn_format": 1.0})  # neither scored: not a success
    assert not solved({})


def test_reward_func_logs_solved_share_and_lengths_by_outcome():
    from rl.rollout import MultiTurnRollout

    logged: dict[str, float] = {}
    comps = [{"world_state": 1.0, "communication": 1.0}, {"world_state": 0.0, "communication": 1.0},
             {"world_state": 0.0, "communication": 0.0}]
    out = MultiTurnRollout.reward_func(None, [], [], episode_reward=[1.0, 0.5, None], reward_components=comps,
                                       termination=["user_stop"] * 3, tool_calls=[1, 1, 0],
                                       sampled_tokens=[10, 30, 50], log_metric=logged.__setitem__)
    assert out == [1.0, 0.5, None]
    assert logged["episode/solved"] == pytest.approx(1 / 3)
    assert logged["episode/len_solved"] == 10 and logged["episode/len_unsolved"] == 40


# ------------------------------------------------------------------------ dynamic sampling
class EvenEpisodesSolve(ScriptedTokenPolicy):
    """Plays the gold turns of the `solvable` tasks in episodes with an even index, and fails every
    other episode: a group of consecutive episodes of a solvable task always has reward variance,
    a group of any other task never does."""

    def __init__(self, tok, solvable):
        super().__init__(tok, ["I cannot help with that."])
        self.solvable = list(solvable)

    def generate(self, requests):
        out = []
        for r in requests:
            text = self.tok.decode(r.prompt_ids)
            k = text.count("<|im_start|>assistant") - 1
            episode = ((r.seed - k) * pow(1009, -1, 2**31)) % 2**31  # TokenAgent: seed * 1009 + turn
            task = next((t for t in self.solvable if t.instruction[:40] in text), None)
            turns = _gold_turns(task) if task is not None and episode % 2 == 0 else self.turns
            ids = self.tok(turns[min(k, len(turns) - 1)], add_special_tokens=False)["input_ids"] + [self.eot]
            out.append(GenResult(ids=ids[: r.max_tokens], logprobs=[-0.5] * len(ids[: r.max_tokens])))
        return out


def test_dynamic_sampling_replaces_flat_groups_with_varying_ones(tasks, tiny, backend):
    tok, _ = tiny
    solvable = [t for t in tasks if t.gold_actions and not t.needs_user_info]
    assert len(solvable) >= 3, "the fixture needs three tasks the gold turns solve"
    flat_task, varying = solvable[0], solvable[1]
    batch = [flat_task] * 4 + [varying] * 4
    policy = EvenEpisodesSolve(tok, solvable[1:])  # flat_task: always "I cannot help", always 0
    with _rollout(tasks, tok, backend, pool_size=4, dynamic_sampling=len(tasks)) as ro:  # rounds to try every task
        plain = ro.run(batch, policy, step=1)  # no group size: nothing is resampled
        assert ro.stats["flat_groups"] == 0 and [e.task_id for e in ro.last] == [t.id for t in batch]
        out = ro.run(batch, policy, step=1, group_size=4)
        first = [e.task_id for e in ro.last]
        assert ro.stats["flat_groups"] == 1 and ro.stats["refilled_groups"] == 1
        again = ro.run(batch, policy, step=1, group_size=4)
        assert [e.task_id for e in ro.last] == first  # drawn per (seed, step, round)
        assert ro.pool.leased == 0
    assert len(set(plain["episode_reward"][:4])) == 1  # the flat group that was replaced
    new_task = first[0]
    assert len(set(first[:4])) == 1 and new_task not in (flat_task.id, varying.id)
    assert len(set(out["episode_reward"][:4])) == 2  # the replacement varies
    assert first[4:] == [varying.id] * 4 and out["episode_reward"][4:] == plain["episode_reward"][4:]
    assert out["completion_ids"] == again["completion_ids"]
