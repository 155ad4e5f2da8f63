"""Which domains the corpus drills on a foreign world, and what a drill part's cache key depends on."""

from __future__ import annotations

import json
import re

from rl.corpus import CorpusSettings, _part_key, build_corpus


def _ids(domain: str) -> set[str]:
    from rl.copy_drills import _collections, _namespace
    from toolzoo.domains import load_domain

    state = _namespace(load_domain(domain), 0)["INITIAL_STATE"]
    return {rid for key in _collections(state) for rid in state[key]}


def test_foreign_all_drills_every_domain_on_a_world_none_of_its_ids_are_in():
    s = CorpusSettings(domains=["retail_orders"], tasks_per_domain=0, copy_drills_per_length=3, drill_lengths=[200],
                       drill_style="keyed", record_drills=4, backend="local")
    ids = _ids("retail_orders")

    def answers(texts: list[str]) -> list[str]:
        return [t[t.index("<|im_start|>user"):] for t in texts if "<tool_response>" in t]

    own = answers(build_corpus(s).texts)
    assert own and any(re.search(rf'"{re.escape(i)}"', "".join(own)) for i in ids)
    foreign = answers(build_corpus(s.model_copy(update={"foreign_all": True})).texts)
    # the list reads, then the one-record reads a foreign world is drilled with
    assert len(foreign) > 4 and sum(t.count("<tool_call>") == 1 and "All done." in t for t in foreign[-4:]) == 4
    assert not any(f'"{i}"' in t for t in foreign for i in ids)
    assert all(json.loads(re.search(r"<tool_call>\n(.*?)\n</tool_call>", t, re.S).group(1))["arguments"]
               for t in foreign)


def test_a_domain_drilled_on_its_own_world_keys_on_no_foreign_setting():
    s = CorpusSettings(copy_drills_per_length=100, drill_style="keyed", drill_excluded=True)
    other = s.model_copy(update={"record_drills": 1000, "foreign_words": "real"})
    # retail_orders is drilled on its own world: the foreign-world fields do not touch its part
    assert _part_key(s, "retail_orders", 1000, "drills") == _part_key(other, "retail_orders", 1000, "drills")
    assert _part_key(s, "home_devices", 1024, "drills") != _part_key(other, "home_devices", 1024, "drills")
    every = other.model_copy(update={"foreign_all": True})
    assert _part_key(every, "retail_orders", 1000, "drills") != _part_key(other, "retail_orders", 1000, "drills")
    # the transcripts never key on a drill setting
    assert _part_key(s, "retail_orders", 1000) == _part_key(every, "retail_orders", 1000)
