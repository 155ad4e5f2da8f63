"""The pretraining corpus holds nothing of the demo's held-out tasks (issue 16)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from rl.corpus import CorpusSettings, build_corpus, held_out_leaks

pytestmark = pytest.mark.local


SEEDS = (0, 1, 2)  # the demo's and the bench's seeds


def _held_out_of(seed: int, out: str) -> list:
    """One seed's held-out tasks, as the demo splits them (run in a worker process of its own)."""
    from rl.demo import load_demo_config, make_tasks

    cfg = load_demo_config(None, [f"seed={seed}", f"out_dir={out}"])
    return make_tasks(cfg, Path(out), "local")[1]


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    """The demo's held-out tasks for seeds 0-2, as the demo splits them (the demo's full task counts: a
    held-out set depends on every task synthesised). The seeds are independent, so they are made in one
    process each, side by side (issue 31: ~80 s each, mostly the multi-step families' synthesis, which
    one core ran one after the other)."""
    outs = [str(tmp_path_factory.mktemp(f"demo{seed}")) for seed in SEEDS]
    with ProcessPoolExecutor(max_workers=len(SEEDS), mp_context=multiprocessing.get_context("spawn")) as pool:
        per_seed = list(pool.map(_held_out_of, SEEDS, outs))
    assert all(per_seed), "a seed made no held-out tasks"
    return [t for tasks in per_seed for t in tasks]


def test_the_corpus_holds_no_held_out_instruction_gold_call_or_expected_outputs(held_out):
    # every zoo domain, a few tasks each: the corpus the shipped base was built from, at 1/200 of its size
    corpus = build_corpus(CorpusSettings(tasks_per_domain=2, backend="local"))
    assert corpus.counts["transcripts"] > 50 and corpus.counts["data"] > 0
    assert any(t.startswith("set_home_light: ") for t in corpus.texts)  # the demo domain's tool docs are there
    assert held_out_leaks(corpus.texts, held_out) == []


def test_foreign_drills_of_the_demo_domain_hold_nothing_of_its_held_out_tasks(held_out):
    # the demo's domain drilled on a foreign world (rl.copy_drills.foreign): its own tools and format, none of
    # its ids, words or numbers; the corpus then reads the demo's outputs and still holds no held-out task
    s = CorpusSettings(domains=["library_loans"], tasks_per_domain=0, copy_drills_per_length=2,
                       drill_lengths=[200, 1000], drill_style="keyed", drill_excluded=True, backend="local")
    corpus = build_corpus(s)
    home = [t for t in corpus.texts if '{"name": "list_home_' in t and "<tool_response>" in t]
    # 2 reads in a device list at each of 2 lengths, then 2 reads of one device's status
    assert len(home) == 6 and corpus.counts["transcripts"] > len(home)
    assert sum('"name": "get_home_device_status", "arguments": {"device_id": ' in t for t in home) == 2
    assert held_out_leaks(corpus.texts, held_out) == []
    assert not any('{"name": "list_home_' in t for t in build_corpus(s.model_copy(update={"drill_excluded": False})).texts)
    # in real words of the world's kinds (section 33 of bench/results/reader_gpu.md), none of them the world's
    real = build_corpus(s.model_copy(update={"foreign_words": "real", "record_drills": 20})).texts
    assert sum('"name": "get_home_device_status", "arguments": {"device_id": ' in t for t in real) == 20
    assert held_out_leaks(real, held_out) == []


def test_expected_outputs_count_outside_the_tool_schemas_only():
    from types import SimpleNamespace

    task = SimpleNamespace(id="t", instruction="Show TH-2 and tell me its mode.", expected_outputs=["off", "thermostat"],
                           gold_actions=[SimpleNamespace(name="get_home_device_status", arguments={"device_id": "TH-2"})])
    tools = ('<tools>\n{"type": "function", "function": {"name": "get_home_device_status", "description": '
             '"a thermostat, a light: on or off"}}\n</tools>')
    schema_only = f"<|im_start|>system\n{tools}<|im_end|>\n<|im_start|>assistant\nAll done.<|im_end|>"
    said = schema_only.replace("All done.", 'All done. "type": "thermostat", "mode": "off"')
    assert held_out_leaks([schema_only], [task]) == []
    # a word of its own: a field named "offline" or "thermostats" is not the value
    assert held_out_leaks([schema_only.replace("All done.", '"offline": 1, "thermostats": 2')], [task]) == []
    assert held_out_leaks([said], [task]) == [("t", "expected outputs ['off', 'thermostat']")]


def test_the_check_finds_transcripts_of_the_demo_domain(held_out):
    # a corpus that does talk about home_devices: the same detector must see the overlap
    leaky = build_corpus(CorpusSettings(exclude_domains=[], domains=["home_devices"], tasks_per_domain=60,
                                        conditions=["none"], backend="local"))
    kinds = {what.split(" ")[0] for _, what in held_out_leaks(leaky.texts, held_out)}
    assert {"gold", "expected"} <= kinds


def test_the_shipped_base_left_out_the_demo_domain():
    from rl.demo import load_demo_config, shipped_base_excludes
    from rl.config import ConfigError

    assert shipped_base_excludes() == ["home_devices"]
    with pytest.raises(ConfigError) as e:
        load_demo_config(None, ["domains=[retail_orders]"])
    assert e.value.problems[0][0] == "base"
    load_demo_config(None, ["domains=[retail_orders]", "base=random"])  # a random base saw nothing


def test_copy_spans_mark_values_the_assistant_repeats_from_a_tool_output():
    """Issue 23: what the copy-from-tool-output accuracy is measured on."""
    from rl.corpus import copy_spans

    t = ('<|im_start|>user\nTurn on the Kitchen light at 40.<|im_end|>\n'
         '<|im_start|>assistant\n<tool_call>\n{"name": "list_home_devices", "arguments": {}}\n</tool_call><|im_end|>\n'
         '<|im_start|>user\n<tool_response>\n{"devices": [{"device_id": "LT-2", "name": "Kitchen light", '
         '"brightness": 40, "room": "kitchen"}]}\n</tool_response><|im_end|>\n'
         '<|im_start|>assistant\n<tool_call>\n{"name": "set_home_light", "arguments": {"device_id": "LT-2", '
         '"brightness": 40}}\n</tool_call><|im_end|>\n<|im_start|>assistant\nDone: LT-2 in the kitchen.<|im_end|>')
    # the id comes from the output; "40" and "Kitchen light" were said by the user; the later turn is not
    # the one right after the output
    assert [t[a:b] for a, b in copy_spans(t)] == ["LT-2"]
    assert copy_spans(t.replace("<tool_response>\n{", "<tool_response>\nnot json {")) == []
