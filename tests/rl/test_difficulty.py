"""Task-level difficulty filtering before rollout (rl.difficulty) and more generations for hard groups
(rl.hard_groups): the selection logic as plain functions, then inside the real rollout (sandboxed
episodes, a scripted token policy whose successes are known), then two real training steps."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from rl.difficulty import DifficultyFilter
from rl.hard_groups import keep

TASKS = [f"t{i}" for i in range(10)]


def _filter(**kw) -> DifficultyFilter:
    return DifficultyFilter(TASKS, **{"window": 1, "readmit": 0.0, "seed": 0, **kw})


# ------------------------------------------------------------------------ the filter, as data
def test_a_task_whose_group_was_flat_is_not_scheduled_next_step():
    f = _filter()
    f.record([("t0", True), ("t1", False)])
    sel = f.select(["t0", "t1", "t2"], step=1)
    assert sel.filtered == 1 and sel.marked == 1
    assert sel.tasks[1:] == ["t1", "t2"] and sel.tasks[0] not in ("t0", "t1", "t2")
    assert not f.marked(sel.tasks[0])


def test_window_counts_the_latest_groups_and_a_varying_group_clears_the_mark():
    f = _filter(window=2)
    f.record([("t0", True)])
    assert not f.marked("t0") and f.select(["t0"], step=1).tasks == ["t0"]
    f.record([("t0", True)])
    assert f.marked("t0") and f.select(["t0"], step=2).tasks != ["t0"]
    f.record([("t0", False)])
    assert not f.marked("t0")
    f.record([("t0", True)])  # one flat group after a varying one: the window is not all flat
    assert not f.marked("t0")


def test_selection_is_a_function_of_seed_step_and_record():
    def run(seed: int) -> list[list[str]]:
        f = _filter(seed=seed, readmit=0.3)
        f.record([(t, True) for t in TASKS[:5]])
        return [f.select(TASKS[:4], step=s).tasks for s in range(20)]

    assert run(0) == run(0)
    assert run(0) != run(1)


def test_every_rank_chooses_the_same_groups_and_replacements_are_not_reused():
    outcomes = [(t, True) for t in TASKS[:6]]
    ranks = [_filter(), _filter()]  # one filter per rank, fed the same gathered outcomes
    for f in ranks:
        f.record(outcomes)
    batch = ["t0", "t1", "t2", "t6"]
    a, b = (f.select(batch, step=3) for f in ranks)
    assert a == b
    new = a.tasks[:3]
    assert a.filtered == 3 and len(set(new)) == 3 and set(new) <= {"t7", "t8", "t9"} and a.tasks[3] == "t6"


def test_readmit_brings_marked_tasks_back_at_about_its_rate():
    f = _filter(readmit=0.25)
    f.record([("t0", True)])
    kept = [f.select(["t0"], step=s).tasks == ["t0"] for s in range(400)]
    assert 0.15 < sum(kept) / len(kept) < 0.35
    assert _filter(readmit=1.0).select(["t0"], step=0).readmitted == 0  # nothing marked yet
    g = _filter(readmit=1.0)
    g.record([("t0", True)])
    sel = g.select(["t0"], step=0)
    assert sel.tasks == ["t0"] and sel.readmitted == 1 and sel.filtered == 0
    g.record([("t0", False)])  # re-admitted, learned: no longer marked
    assert not g.marked("t0")


def test_no_replacement_left_keeps_the_task():
    f = _filter()
    f.record([(t, True) for t in TASKS])
    sel = f.select(["t0", "t1"], step=0)
    assert sel.tasks == ["t0", "t1"] and sel.filtered == 0 and sel.marked == len(TASKS)


def test_bad_settings_and_unknown_tasks_are_errors():
    with pytest.raises(ValueError, match="window"):
        DifficultyFilter(TASKS, window=0)
    with pytest.raises(ValueError, match="readmit"):
        DifficultyFilter(TASKS, readmit=1.5)
    with pytest.raises(KeyError, match="nope"):
        _filter().record([("nope", True)])


def test_config_validates_the_knobs():
    from rl.config import ConfigError, load_config

    cfg = load_config(None, ["model.tiny=true", "rollout.difficulty_filter.enabled=true",
                             "rollout.difficulty_filter.window=2", "rollout.extra_generations=3"])
    assert cfg.rollout.difficulty_filter.window == 2 and cfg.rollout.extra_generations == 3
    assert not load_config(None, ["model.tiny=true"]).rollout.difficulty_filter.enabled
    with pytest.raises(ConfigError, match="rollout.difficulty_filter.readmit"):
        load_config(None, ["model.tiny=true", "rollout.difficulty_filter.readmit=2"])
    with pytest.raises(ConfigError, match="rollout.extra_generations"):
        load_config(None, ["model.tiny=true", "rollout.extra_generations=-1"])


# ------------------------------------------------------------------------ hard groups, as data
def test_keep_takes_the_rare_successes_and_random_failures():
    rewards = [0.0] * 4 + [0.0, 1.0, 0.0, 0.0] + [1.0, 0.0, 0.0, 0.0]
    picked = keep(rewards, 4, random.Random(0))
    assert len(picked) == 4 == len(set(picked)) and {5, 8} <= set(picked)
    assert keep(rewards, 4, random.Random(0)) == picked  # seeded
    assert keep([0.0] * 12, 4, random.Random(0)) is None  # still flat: the original group stays
    many = keep([0.0] * 4 + [1.0] * 8, 4, random.Random(1))  # at most G - 1 successes: the group varies
    assert sum(i >= 4 for i in many) == 3 and len(many) == 4
    with pytest.raises(ValueError, match="not flat"):
        keep([0.0, 1.0, 0.0, 0.0, 1.0], 4, random.Random(0))


def test_keep_fills_with_abstaining_episodes_only_when_it_must():
    rewards = [None, None, None, 0.0, 1.0, 1.0, 1.0, 1.0]
    picked = keep(rewards, 4, random.Random(0))
    assert 3 in picked and sum(i >= 4 for i in picked) == 3


# ------------------------------------------------------------------------ inside the rollout
def test_rollout_filter_gives_each_rank_its_slice_of_one_global_choice(monkeypatch):
    import rl.distributed
    from rl.rollout import MultiTurnRollout

    tasks = [SimpleNamespace(id=t) for t in TASKS]
    cfg = SimpleNamespace(enabled=True, window=1, readmit=0.0)
    g, step_ids = 2, [["t0", "t0", "t1"], ["t1", "t2", "t2"]]  # group t1 spans the two ranks
    monkeypatch.setattr(rl.distributed, "gather_rows", lambda rows, ranks: [[*x] for x in step_ids])
    out = []
    for rank in (0, 1):
        ro = MultiTurnRollout(tasks, tokenizer=None, difficulty_filter=cfg, seed=0)
        ro.rank, ro.world_size = rank, 2
        ro.difficulty.record([("t1", True), ("t2", False)])
        stats: dict[str, float] = {}
        out.append([t.id for t in ro._filter([tasks[int(t[1:])] for t in step_ids[rank]], 5, g, stats)])
        assert stats["filtered_tasks"] == 1
    both = out[0] + out[1]
    assert both[:2] == ["t0", "t0"] and both[4:] == ["t2", "t2"]
    assert both[2] == both[3] and both[2] not in ("t0", "t1", "t2")


pytest.importorskip("transformers")
pytest.importorskip("trl")

from tests.conftest import any_backend  # noqa: E402
from tests.rl.test_rollout import EvenEpisodesSolve, ScriptedTokenPolicy, _gold_turns, _rollout  # noqa: E402


@pytest.fixture(scope="module")
def backend() -> str:
    return any_backend()


@pytest.fixture(scope="module")
def tasks(backend):
    from synth.tasks import synthesize_tasks

    made = synthesize_tasks(6, seed=3, domains=["retail_orders", "library_loans"], backend=backend, sandboxes=2)
    return made.tasks


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from rl.tiny import build_tiny_model

    return AutoTokenizer.from_pretrained(build_tiny_model())


def _solvable(tasks):
    out = [t for t in tasks if t.gold_actions and not t.needs_user_info]
    assert len(out) >= 3, "the fixture needs three tasks the gold turns solve"
    return out


def test_filter_then_dynamic_sampling_and_the_flat_task_is_skipped_next_step(tasks, tok, backend):
    solvable = _solvable(tasks)
    flat_task, varying = solvable[0], solvable[1]
    batch = [flat_task] * 4 + [varying] * 4
    policy = SeenTasks(tok, solvable[1:], tasks)  # flat_task: always "I cannot help"
    cfg = SimpleNamespace(enabled=True, window=1, readmit=0.0)
    with _rollout(tasks, tok, backend, pool_size=4, dynamic_sampling=len(tasks), difficulty_filter=cfg) as ro:
        ro.run(batch, policy, step=1, group_size=4)
        assert ro.stats["filtered_tasks"] == 0  # nothing seen yet
        assert ro.stats["flat_groups"] == 1 and ro.stats["refilled_groups"] == 1  # dynamic sampling caught it
        assert ro.difficulty.marked(flat_task.id) and not ro.difficulty.marked(varying.id)
        tried_flat = {t for t in ro.difficulty.task_ids if ro.difficulty.marked(t)}
        policy.seen.clear()
        ro.run(batch, policy, step=2, group_size=4)
        # not rolled out at all, not even as a dynamic-sampling candidate; nor any task marked flat
        assert not policy.seen & tried_flat, (policy.seen, tried_flat)
        ids = [e.task_id for e in ro.last]
        assert ro.stats["filtered_tasks"] == 1 and ro.stats["marked_tasks"] == len(tried_flat)
        assert flat_task.id not in ids and ids[4:] == [varying.id] * 4
        assert ro.pool.leased == 0


class SeenTasks(EvenEpisodesSolve):
    """EvenEpisodesSolve that notes the task of every request it answers."""

    def __init__(self, tok, solvable, tasks):
        super().__init__(tok, solvable)
        self.all, self.seen = tasks, set()

    def generate(self, requests):
        for r in requests:
            text = self.tok.decode(r.prompt_ids)
            self.seen |= {t.id for t in self.all if t.instruction[:40] in text}
        return super().generate(requests)


class LateSolve(ScriptedTokenPolicy):
    """Plays the gold turns in the episodes numbered ``solve`` of ``step`` (rollout seed 0), fails the
    rest: the batch's groups are flat and unsolved, an extra round holds one success."""

    def __init__(self, tok, step: int, solve: set[int], tasks):
        super().__init__(tok, ["I cannot help with that."])
        self.step, self.solve, self.by_text = step, solve, tasks

    def generate(self, requests):
        out = []
        for r in requests:
            text = self.tok.decode(r.prompt_ids)
            k = text.count("<|im_start|>assistant") - 1
            index = ((r.seed - k) * pow(1009, -1, 2**31)) % 2**31 - self.step * 10_007
            task = next(t for t in self.by_text if t.instruction[:40] in text)
            turns = _gold_turns(task) if index in self.solve else self.turns
            ids = self.tok(turns[min(k, len(turns) - 1)], add_special_tokens=False)["input_ids"] + [self.eot]
            out.append(GenResultOf(ids[: r.max_tokens]))
        return out


def GenResultOf(ids):  # noqa: N802 (reads like the type it builds)
    from rl.rollout import GenResult

    return GenResult(ids=ids, logprobs=[-0.5] * len(ids))


def test_extra_generations_rescue_a_hard_group_with_its_rare_success(tasks, tok, backend):
    from rl.rollout import solved

    solvable = _solvable(tasks)
    hard, never = solvable[0], solvable[1]
    batch = [hard] * 4 + [never] * 4
    # episodes 0-7 are the batch; the first extra round numbers the hard groups' episodes 8-15
    policy = LateSolve(tok, step=1, solve={9}, tasks=tasks)
    cfg = SimpleNamespace(enabled=True, window=1, readmit=0.0)
    with _rollout(tasks, tok, backend, pool_size=4, extra_generations=2, difficulty_filter=cfg) as ro:
        out = ro.run(batch, policy, step=1, group_size=4)
        assert ro.stats["hard_groups"] == 2 and ro.stats["rescued_groups"] == 1
        assert ro.stats["extra_episodes"] == 8 + 4  # round 1: both groups; round 2: the one still flat
        ids = [e.task_id for e in ro.last]
        assert ids == [hard.id] * 4 + [never.id] * 4  # the group size and the tasks stay
        assert [solved(e.components) for e in ro.last[:4]].count(True) == 1
        assert len(set(out["episode_reward"][:4])) == 2 and len(set(out["episode_reward"][4:])) == 1
        # the rescued task varied: it stays; the one still flat after two more rounds is marked
        assert not ro.difficulty.marked(hard.id) and ro.difficulty.marked(never.id)
        assert ro.pool.leased == 0


def test_two_training_steps_with_both_knobs_log_the_filtered_tasks(tasks, tok, tmp_path, backend):
    """Real Dr. GRPO steps on the tiny model (TRL's GRPOTrainer, our rollout_func) whose episodes a
    scripted policy plays: two tasks it solves in half the episodes, two it never solves. Four steps
    of two groups go through the four tasks twice; by the second pass the never-solved tasks are
    marked, and at least one of them is swapped for a solved one."""
    from rl.config import load_config
    from rl.rollout import MultiTurnRollout
    from rl.trainer import _load_tokenizer, build_trainer
    from sandboxes import SandboxConfig
    from synth.episode import EpisodeLimits

    solvable = _solvable(tasks)
    four = [*solvable[:2], *[t for t in tasks if t not in solvable[:2]][:2]]
    cfg = load_config("examples/train_tiny.yaml", [
        f"run.output_dir={tmp_path}", "rollout.use_vllm=false", "grpo.max_steps=4", "grpo.num_generations=4",
        "grpo.per_device_train_batch_size=8", "grpo.max_completion_length=1500", "run.logging=[]",
        f"rollout.sandbox_backend={backend}", "rollout.difficulty_filter.enabled=true",
        "rollout.difficulty_filter.readmit=0", "rollout.extra_generations=1", "run.save_steps=100"])
    from rl.config import resolve_model_path

    model_path = resolve_model_path(cfg)
    policy = EvenEpisodesSolve(tok, four[:2])
    ro_cfg = cfg.rollout
    rollout = MultiTurnRollout(four, tokenizer=_load_tokenizer(model_path), reward=cfg.reward,
                               limits=EpisodeLimits(max_turns=4, max_tool_calls=8, max_tokens=10**9),
                               max_completion_length=1500, sandbox_config=SandboxConfig(backend=backend),
                               pool_size=8, generator=policy, seed=0, difficulty_filter=ro_cfg.difficulty_filter,
                               extra_generations=ro_cfg.extra_generations, episodes_dir=tmp_path / "episodes")
    with rollout:
        trainer = build_trainer(cfg, tmp_path, rollout, rollout.tokenizer, model_path)
        from rl.run import attach_callbacks

        attached = attach_callbacks(trainer, tmp_path, progress=False)
        try:
            trainer.train()
        finally:
            for cb in attached:
                if hasattr(cb, "close"):
                    cb.close()
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if x.strip()]
    steps = [r for r in rows if "reward" in r]
    assert len(steps) == 4
    assert steps[0]["rollout/filtered_tasks"] == 0 and steps[0]["rollout/marked_tasks"] == 0
    assert sum(r["rollout/hard_groups"] for r in steps[:2]) == 2  # the never-solved tasks got an extra round
    trained = [[json.loads(x)["task_id"] for x in (tmp_path / "episodes" / f"step-{s:06d}.jsonl").read_text().splitlines()]
               for s in range(4)]
    never = {t.id for t in four[2:]}
    assert never <= set(trained[0] + trained[1])  # the first pass saw them ...
    for s in (2, 3):  # ... the second trained on none of them: every group had a gradient
        assert steps[s]["rollout/marked_tasks"] == 2 and not never & set(trained[s]), (s, trained[s])
        assert steps[s]["frac_reward_zero_std"] == 0
    assert sum(r["rollout/filtered_tasks"] for r in steps[2:]) >= 1
    from rl.metrics import rollout_totals

    totals = rollout_totals(rows)
    assert totals["filtered_tasks"] == sum(r["rollout/filtered_tasks"] for r in steps) >= 1
    assert totals["refilled_groups"] == 0 and totals["hard_groups"] >= 2
