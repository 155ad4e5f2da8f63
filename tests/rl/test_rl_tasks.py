"""Fresh multi-step tasks for Dr. GRPO alone (rl.demo.rl_tasks, issue 28): never primed on, unseen by the
held-out set."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.config import ConfigError
from rl.demo import load_demo_config, make_tasks, rl_tasks, train_config
from synth.task_families import entities, family_of, is_multistep, signature
from synth.tasks import load_tasks

pytestmark = pytest.mark.local

SMALL = ["tasks=30", "held_out=5", "multistep={lookup_act: 24, read_report: 24}", "multistep_held_out=4",
         "domain_seeds=8"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("rltasks")
    cfg = load_demo_config(None, [*SMALL, f"out_dir={out}", "rl_multistep={lookup_act: 16, read_report: 16}"])
    train, held = make_tasks(cfg, out, "local")
    path, fresh = rl_tasks(cfg, out, "local", train, held)
    return cfg, out, train, held, path, fresh


def test_dr_grpo_trains_on_the_priming_tasks_plus_fresh_multistep_ones(made) -> None:
    cfg, out, train, held, path, fresh = made
    assert path == out / "tasks" / "rl" and Path(train_config(cfg, out).data.tasks) == path
    rl = load_tasks(path)
    assert fresh > 0 and len(rl) == len(train) + fresh
    primed = {t.id for t in train}
    assert primed <= {t.id for t in rl}
    new = [t for t in rl if t.id not in primed]
    assert len(new) == fresh and all(is_multistep(family_of(t)) for t in new)
    assert {family_of(t) for t in new} <= {"lookup_act", "read_report"}


def test_no_fresh_task_names_a_held_out_entity_or_repeats_a_task(made) -> None:
    _cfg, _out, train, held, path, _fresh = made
    primed = {t.id for t in train}
    new = [t for t in load_tasks(path) if t.id not in primed]
    banned = {e for t in held if is_multistep(family_of(t)) for e in entities(t)}
    assert banned, "the held-out multi-step tasks name no entity: the check below would be empty"
    assert all(not entities(t) & banned for t in new)
    known = {signature(t) for t in [*train, *held]}
    assert all(signature(t) not in known for t in new)


def test_without_rl_multistep_dr_grpo_trains_on_the_priming_tasks(tmp_path) -> None:
    cfg = load_demo_config(None, [*SMALL, f"out_dir={tmp_path}"])
    assert Path(train_config(cfg, tmp_path).data.tasks) == tmp_path / "tasks" / "train"
    assert rl_tasks(cfg, tmp_path, "local", [], []) == (tmp_path / "tasks" / "train", 0)
    assert not (tmp_path / "tasks").exists()


@pytest.mark.parametrize("bad", ["rl_multistep={ask_user: 10}", "rl_multistep={lookup_act: 0}"])
def test_fresh_tasks_come_from_the_demos_own_families(bad) -> None:
    with pytest.raises(ConfigError) as e:
        load_demo_config(None, [*SMALL, bad])
    assert e.value.problems[0][0] == "rl_multistep"


def test_fresh_tasks_are_kept_by_what_makes_them(made, monkeypatch) -> None:
    import synth.task_families

    cfg, out, train, held, path, fresh = made

    def no_synthesis(*a, **k):
        raise AssertionError("made again")

    monkeypatch.setattr(synth.task_families, "synthesize_family_tasks", no_synthesis)
    assert rl_tasks(cfg, out, "local", train, held) == (path, fresh)  # the same key: read back
    other = cfg.model_copy(update={"rl_multistep": {"lookup_act": 17, "read_report": 16}})
    with pytest.raises(AssertionError, match="made again"):  # another key: made anew
        rl_tasks(other, out, "local", train, held)


def test_priming_tasks_are_kept_by_what_makes_them(made, monkeypatch) -> None:
    # a study makes them on the 2-core machine and carries them to the GPU (section 38 of reader_gpu.md)
    import synth.task_families
    import synth.tasks

    cfg, out, train, held, _path, _fresh = made

    def no_synthesis(*a, **k):
        raise AssertionError("made again")

    monkeypatch.setattr(synth.tasks, "synthesize_tasks", no_synthesis)
    monkeypatch.setattr(synth.task_families, "synthesize_family_tasks", no_synthesis)
    again_train, again_held = make_tasks(cfg, out, "local")  # the same key: read back
    assert [t.id for t in again_train] == [t.id for t in train] and [t.id for t in again_held] == [t.id for t in held]
    assert [t.tools for t in again_train] == [t.tools for t in train]  # the tool picks too
    other = cfg.model_copy(update={"multistep": {"lookup_act": 24, "read_report": 25}})
    with pytest.raises(AssertionError, match="made again"):  # another key: made anew
        make_tasks(other, out, "local")
