"""bench/copy_probe.py: the same drills in a domain's own and foreign worlds, teacher-forced on a base."""

from __future__ import annotations

import json

from tests.bench_module import load_bench


def test_answer_values_are_the_keyed_answers_strings_and_numbers():
    probe = load_bench("copy_probe")
    text = '<|im_start|>assistant\nAll done. "room": "game room", "brightness": 74, "on": false, "x": "a"<|im_end|>\n'
    assert probe.answer_values(text) == ["game room", "74"]  # a boolean or a one-character value is no copy
    assert probe.answer_values("<|im_start|>assistant\n<tool_call>...</tool_call>") == []


def test_the_probe_scores_each_world_on_the_shipped_base():
    from rl.demo import SHIPPED_BASE

    probe = load_bench("copy_probe")
    texts = {w: probe.drills("retail_orders", w, 3) for w in probe.WORLDS}
    assert all(texts.values()) and len({json.dumps(t) for t in texts.values()}) == len(probe.WORLDS)
    out = probe.probe([str(SHIPPED_BASE)], ["retail_orders"], 3)
    res = out[str(SHIPPED_BASE)]["retail_orders"]
    assert set(res) == set(probe.WORLDS)
    for world in probe.WORLDS:
        assert res[world]["values"] > 0 and 0.0 <= res[world]["first"] <= 1.0
