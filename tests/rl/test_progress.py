"""Progress of the demo's long stages (issue 33 #4): rl.progress.StageProgress on a terminal and off
one, and the episode counts the held-out evaluation and the learning curve report (per policy, per
point) through their callbacks. No model, sandbox or engine here: a fake rollout plays the episodes
(tests/rl/test_rollout.py checks the real rollout's per-episode hook)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from rl.progress import StageProgress

TASKS = [SimpleNamespace(id=f"t{i}") for i in range(3)]


class FakeRollout:
    """Plays every task at once, solved; tells ``on_episode`` as each episode ends, like MultiTurnRollout."""

    def __init__(self):
        self.on_episode = None
        self.last = []
        self.runs = 0

    def run(self, tasks, generator, step=0):
        self.runs += 1
        self.last = []
        for t in tasks:
            self.last.append(SimpleNamespace(task_id=t.id, reward=1.0, components={"world_state": 1.0},
                                             env_mask=[1, 1, 0]))
            if self.on_episode is not None:
                self.on_episode()


def test_off_a_terminal_a_line_per_quarter_and_at_the_end():
    buf = io.StringIO()
    with StageProgress(Console(file=buf, width=200)) as bars:
        assert bars.progress is None  # no live display when the output is captured
        for done in range(9):
            bars("held-out evaluation: primed", done, 8)
        bars("held-out evaluation: Dr. GRPO", 0, 0)
    assert buf.getvalue().splitlines() == [
        "held-out evaluation: primed: 0/8 episodes", "held-out evaluation: primed: 2/8 episodes",
        "held-out evaluation: primed: 4/8 episodes", "held-out evaluation: primed: 6/8 episodes",
        "held-out evaluation: primed: 8/8 episodes", "held-out evaluation: Dr. GRPO: 0/0 episodes"]


def test_a_new_total_under_the_same_key_starts_over():
    buf = io.StringIO()
    bars = StageProgress(Console(file=buf, width=200), unit="")
    for total in (4, 6):
        for done in range(total + 1):
            bars("tasks: generate", done, total)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "tasks: generate: 0/4" and lines[4] == "tasks: generate: 4/4"
    assert lines[5] == "tasks: generate: 0/6" and lines[-1] == "tasks: generate: 6/6"


def test_on_a_terminal_one_live_display_the_trainer_bar_joins():
    from rl.run import RichProgressCallback

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with StageProgress(console) as bars:
        assert bars.progress is not None and bars.progress.live.is_started
        cb = RichProgressCallback(progress=bars.progress)
        state = SimpleNamespace(is_world_process_zero=True, max_steps=4, global_step=0)
        cb.on_train_begin(None, state, None)  # a second live display on one console would fail here
        state.global_step = 4
        cb.on_step_end(None, state, None)
        bars("held-out evaluation: base", 5, 5)
        cb.on_train_end(None, state, None)
        assert bars.progress.live.is_started  # the trainer's bar leaves the shared display running
        assert {t.description for t in bars.progress.tasks} == {"train", "held-out evaluation: base"}
    assert not bars.progress.live.is_started
    out = buf.getvalue()
    assert "held-out evaluation: base" in out and "5/5" in out and "4/4" in out


def test_run_episodes_reports_done_of_total_and_unhooks():
    from rl.evaluate import run_episodes

    ro, seen = FakeRollout(), []
    sampled, greedy = run_episodes(ro, TASKS, lambda temp: None, samples=2, temperature=1.0,
                                   progress=lambda d, t: seen.append((d, t)))
    assert len(sampled) == 6 and len(greedy) == 3
    assert seen == [(i, 9) for i in range(10)] and ro.on_episode is None


def test_the_held_out_evaluation_reports_episodes_per_policy(monkeypatch, tmp_path):
    import transformers

    import rl.evaluate as ev
    import rl.vllm_sync
    from rl.evaluate import EvalSettings, HeldOutEval

    ro = FakeRollout()
    monkeypatch.setattr(ev, "colocated_engine", lambda trainer: "engine")
    monkeypatch.setattr(ev, "engine_generators", lambda llm: (lambda temp: None))
    monkeypatch.setattr(rl.vllm_sync, "sync_weights", lambda llm, model: None)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: SimpleNamespace(pad_token="p"))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: object())
    monkeypatch.setattr(EvalSettings, "rollout", lambda self, tasks, tok: contextlib.nullcontext(ro))
    seen: dict[str, list[tuple[int, int]]] = {}
    settings = EvalSettings(samples=2)
    cb = HeldOutEval(TASKS, settings, trained="grpo", checkpoints={"base": tmp_path, "sft": tmp_path},
                     tokenizer_path=tmp_path, settings_for={"base": settings.model_copy(update={"samples": 1})},
                     progress=lambda name, d, t: seen.setdefault(name, []).append((d, t)))
    cb.bind(object())
    cb.on_train_end(SimpleNamespace(output_dir=str(tmp_path)), None, None, model=object())
    assert set(cb.results) == {"grpo", "base", "sft"}
    # per policy, from 0 to all its episodes: (samples + greedy) x tasks
    assert seen["grpo"] == [(i, 9) for i in range(10)] and seen["sft"] == seen["grpo"]
    assert seen["base"] == [(i, 6) for i in range(7)]


def test_each_learning_curve_point_reports_its_episodes(monkeypatch):
    from rl.curve import HeldOutCurve

    seen = []
    curve = HeldOutCurve(TASKS, every=1, samples=2, tokenizer_path=Path("."),
                         progress=lambda step, d, t: seen.append((step, d, t)))
    curve._rollout = FakeRollout()
    monkeypatch.setattr(HeldOutCurve, "_generators", lambda self, model: ((lambda temp: None), "fake"))
    monkeypatch.setattr("rl.curve.curve_family", lambda t: "single-action")
    curve.measure(object(), 0)
    curve.measure(object(), 5)
    assert seen == [(0, i, 6) for i in range(7)] + [(5, i, 6) for i in range(7)]
    assert [p.success for p in curve.points] == [1.0, 1.0]
