"""bench/reader_choice.py: which tokens of a reported value are scored, and how a wrong first token is
sorted (issue 28: choosing the value vs writing it)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.bench_module import load_bench

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
TEXT = ('<|im_start|>user\nShow LT-1, then tell me its name and type.<|im_end|>\n'
        '<|im_start|>assistant\n<tool_call>\n{"name": "get", "arguments": {"id": "LT-1"}}\n</tool_call><|im_end|>\n'
        '<|im_start|>user\n<tool_response>\n{"name": "Porch light", "type": "lock", "room": "Hallway"}\n'
        '</tool_response><|im_end|>\n<|im_start|>assistant\nAll done. "Porch light", "lock"<|im_end|>\n')


def _bench():
    return load_bench("reader_choice")


class Oracle(torch.nn.Module):
    """Predicts the gold next token everywhere except at the given positions, where it says `say`."""

    def __init__(self, ids: list[int], vocab: int, wrong: dict[int, int]):
        super().__init__()
        self.ids, self.vocab, self.wrong = ids, vocab, wrong

    def forward(self, input_ids):
        n = input_ids.shape[1]
        logits = torch.zeros(1, n, self.vocab)
        for i in range(n):
            nxt = self.wrong.get(i + 1, self.ids[i + 1] if i + 1 < n else 0)
            logits[0, i, nxt] = 1.0
        return SimpleNamespace(logits=logits)


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(ROOT / "rl" / "base"))


def _positions(tok, text, value):
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    s = text.rindex(value)
    return enc["input_ids"], [i for i, (a, b) in enumerate(enc["offset_mapping"]) if a < s + len(value) and b > s]


def test_the_report_values_are_found_in_the_last_answer_and_a_wrong_start_is_sorted():
    rc = _bench()
    spans = rc.value_spans(TEXT, ["Porch light", "lock", "Attic"])
    assert [TEXT[a:b] for a, b in spans] == ["Porch light", "lock"]
    assert all(a > TEXT.rindex("All done.") for a, _ in spans)  # not the tool output's occurrences
    strings = {"name", "porch light", "type", "lock", "room", "hallway"}
    assert rc.miss_kind(" Porch", "Porch light", strings) == "value_other_tokens"  # prose form of the value
    assert rc.miss_kind(' "Hall', "Porch light", strings) == "another_output_string"
    assert rc.miss_kind(" Kitchen", "Porch light", strings) == "not_in_output"
    assert rc.miss_kind(" ", "Porch light", strings) == "not_in_output"


def test_a_copier_gets_every_token_and_a_wrong_first_token_is_sorted(tok):
    rc = _bench()
    ids, pos = _positions(tok, TEXT, "Porch light")
    vocab = len(tok)
    perfect = rc.score_episode(Oracle(ids, vocab, {}), tok, TEXT, ["Porch light", "lock"])
    assert [r["first"] and r["whole"] for r in perfect] == [True, True]
    # the first token of "Porch light" replaced by the first token of "Hallway" (another output string)
    hall = tok(TEXT, add_special_tokens=False, return_offsets_mapping=True)
    h = next(i for i, (a, b) in enumerate(hall["offset_mapping"]) if a <= TEXT.index("Hallway") < b)
    chose = rc.score_episode(Oracle(ids, vocab, {pos[0]: ids[h]}), tok, TEXT, ["Porch light"])
    assert chose[0]["first"] is False and chose[0]["miss"] == "another_output_string"
    assert all(chose[0]["rest"])  # the rest is scored given the gold first token
    # a token no output string starts with
    other = tok.convert_tokens_to_ids("Ġthe") if "Ġthe" in tok.get_vocab() else 0
    made_up = rc.score_episode(Oracle(ids, vocab, {pos[0]: other}), tok, TEXT, ["Porch light"])
    assert made_up[0]["miss"] == "not_in_output"
    s = rc.summarise(perfect + chose + made_up)
    assert s["values"] == 4 and s["first"] == 0.5
    assert s["first_misses"] == {"value_other_tokens": 0, "another_output_string": 1, "not_in_output": 1}


def test_the_choices_upstream_of_the_copy_are_scored_where_they_stand(tok):
    """read_id: the id the first call names, copied from the user's message (not the tool's name, not a key);
    key: in a keyed answer, the key before each value."""
    rc = _bench()
    keyed = TEXT.replace('All done. "Porch light", "lock"', 'All done. "name": "Porch light", "type": "lock"')
    ids, offs, _ = rc.predict(Oracle(*_positions(tok, keyed, "Porch light")[:1], len(tok), {}), tok, keyed)
    perfect = [ids[i + 1] if i + 1 < len(ids) else 0 for i in range(len(ids))]
    up = rc.score_upstream(keyed, ["Porch light", "lock"], ids, offs, perfect)
    assert len(up["read_id"]) == 1 and all(up["read_id"][0])  # "LT-1", once
    assert len(up["key"]) == 2 and all(all(k) for k in up["key"])  # "name", "type"
    # a policy that says another key: the key's first token is wrong
    k = keyed.rindex('"name"') + 1
    at = next(i for i, (a, b) in enumerate(offs) if a <= k < b)
    wrong = list(perfect)
    wrong[at - 1] = tok.convert_tokens_to_ids("room") if "room" in tok.get_vocab() else 0
    assert up["key"][0][0] and not rc.score_upstream(keyed, ["Porch light"], ids, offs, wrong)["key"][0][0]
    # plain answers have no keys to score
    assert rc.score_upstream(TEXT, ["Porch light"], *rc.predict(Oracle(ids, len(tok), {}), tok, TEXT)[:2],
                             perfect)["key"] == []


def test_domain_tasks_are_quoted_read_reports_of_that_domain():
    from synth.task_families import family_of

    tasks = _bench().domain_tasks("library_loans", 4)
    assert 0 < len(tasks) <= 4
    assert all(t.domain == "library_loans" and family_of(t) == "read_report" for t in tasks)
    # quoted as the demo's requests are: every asked field in double quotes, every expected value in the gold output
    assert all(t.expected_outputs and '"' in t.instruction for t in tasks)


LOOKUP = ('<|im_start|>system\nExample: <tool_call>\n{"name": "x", "arguments": {}}\n</tool_call><|im_end|>\n'
          '<|im_start|>user\nSwitch on the device whose name is Hallway light.<|im_end|>\n'
          '<|im_start|>assistant\n<tool_call>\n{"name": "list_home_devices", "arguments": {}}\n</tool_call><|im_end|>\n'
          '<|im_start|>user\n<tool_response>\n{"devices": [{"device_id": "LT-2", "name": "Office light"}, '
          '{"device_id": "LT-5", "name": "Hallway light"}, {"device_id": "LT-6", "name": "Kitchen light"}]}\n'
          '</tool_response><|im_end|>\n<|im_start|>assistant\n<tool_call>\n'
          '{"name": "set_home_light", "arguments": {"device_id": "LT-5", "on": true}}\n</tool_call><|im_end|>\n')


def test_a_lookup_scores_the_id_the_write_picks_from_the_listing(tok):
    rc = _bench()
    ids, offs, _ = rc.predict(Oracle(*_positions(tok, LOOKUP, "LT-5")[:1], len(tok), {}), tok, LOOKUP)
    perfect = [ids[i + 1] if i + 1 < len(ids) else 0 for i in range(len(ids))]
    got = rc.score_lookup(tok, LOOKUP, ids, offs, perfect)
    # only the id: not the tool's name (no listing key holds it), not "on" (not a string)
    assert [(r["value"], r["whole"], r["candidates"], r["miss"]) for r in got] == [("LT-5", True, 3, None)]
    # the id's tokens after the shared prefix said as another record's: "LT-6"
    s = LOOKUP.rindex("LT-5")
    pos = [i for i, (a, b) in enumerate(offs) if a < s + 4 and b > s and i > 0]
    last = pos[-1]
    other = tok(LOOKUP[:s] + "LT-6", add_special_tokens=False)["input_ids"][last]
    assert other != ids[last]
    wrong = list(perfect)
    wrong[last - 1] = other
    [r] = rc.score_lookup(tok, LOOKUP, ids, offs, wrong)
    assert not r["whole"] and r["miss"] == "another_record"
    made_up = list(perfect)
    made_up[pos[0] - 1] = tok.convert_tokens_to_ids("Ġthe") if "Ġthe" in tok.get_vocab() else 0
    assert rc.score_lookup(tok, LOOKUP, ids, offs, made_up)[0]["miss"] == "not_in_output"
    # an id the user's message gives is no pick from the listing; an episode without a write has none
    assert rc.score_lookup(tok, LOOKUP.replace("Hallway light.", "LT-5."), ids, offs, perfect) == []
    assert rc.score_lookup(tok, LOOKUP[:LOOKUP.rindex("<|im_start|>assistant")], ids, offs, perfect) == []
    s = rc.summarise_lookup([*got, r])
    assert s == {"ids": 2, "whole": 0.5, "misses": {"value_other_tokens": 0, "another_record": 1, "not_in_output": 0},
                 "candidates": 3.0}


def test_score_loads_each_model_once_and_scores_read_reports_and_lookups(monkeypatch):
    """One pass per model: the read_report forms and, given look-up tasks, the record id's pick beside them."""
    from synth.task_families import synthesize_family_tasks

    rc = _bench()
    made = synthesize_family_tasks({"read_report": 2, "lookup_act": 2}, seed=3, domains=["home_devices"],
                                   backend="local", sandboxes=2, quote_values=True, quote_fields=True)
    loads = []
    real = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: loads.append(a[0]) or real(*a, **k))
    base = str(ROOT / "rl" / "base")
    models, _ = rc.score([base], made["read_report"], "local", "brief", 0, 0, made["lookup_act"])
    assert loads == [base]
    res = models[base]
    assert {"plain", "quoted", "keyed"} <= set(res) and res["keyed"]["values"] > 0
    assert res["lookup"]["ids"] >= 2 and 0.0 <= res["lookup"]["whole"] <= 1.0
    # without look-up tasks there is no pick to report; with none made, an empty one
    assert "lookup" not in rc.score([base], made["read_report"], "local", "brief", 0, 0)[0][base]
    assert rc.score([base], made["read_report"], "local", "brief", 0, 0, [])[0][base]["lookup"]["ids"] == 0
