"""Copy drills (issue 28): real reads of a grown world at the lengths episodes have, with a copied value."""

from __future__ import annotations

import json
import re

import pytest

from rl.copy_drills import copy_drills
from rl.corpus import copy_spans
from toolzoo.domains import load_domain

RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)
CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from rl.demo import SHIPPED_BASE

    return AutoTokenizer.from_pretrained(str(SHIPPED_BASE))


@pytest.mark.parametrize("name", ["retail_orders", "warehouse_robots"])
def test_drills_copy_a_value_out_of_a_real_output_at_each_length(name, tok):
    domain = load_domain(name)
    texts = copy_drills(domain, per_length=3, seed=7)
    assert texts == copy_drills(domain, per_length=3, seed=7)  # deterministic: the corpus hash relies on it
    assert texts != copy_drills(domain, per_length=3, seed=8)
    lengths = []
    for text in texts:
        [out] = RESPONSE.findall(text)
        lengths.append(len(tok(out, add_special_tokens=False)["input_ids"]))
        first = json.loads(CALL.findall(text[text.index("<|im_start|>user"):])[0])
        # the read is one of the domain's own read tools, called with arguments it accepts
        spec = domain.tool(first["name"])
        assert spec.effect == "read" and set(first["arguments"]) <= set(spec.parameters.get("properties", {}))
        json.loads(out)  # a real JSON tool output
        # what the assistant says or calls after the output repeats a value of it the user never said
        assert copy_spans(text), text[-400:]
    # the three lengths (200, 500, 1000 tokens) are each there, within the drills' tolerance
    for target in (200, 500, 1000):
        assert any(0.6 * target <= n <= 1.8 * target for n in lengths), (target, sorted(lengths))


def test_the_grown_world_keeps_the_domain_tool_semantics():
    # a drill's output is the domain's own function on the grown state: its record count grows with it
    from rl.copy_drills import _collections, _grow, _namespace

    domain = load_domain("warehouse_robots")
    ns = _namespace(domain, 0)
    state = ns["INITIAL_STATE"]
    grown = _grow(state, 4, __import__("random").Random(0))
    for key in _collections(state):
        assert len(grown[key]) == 4 * len(state[key])
        assert set(state[key]) <= set(grown[key])
    small, big = ns["list_warehouse_robots"](state), ns["list_warehouse_robots"](grown)
    assert len(json.dumps(big)) > 3 * len(json.dumps(small))
    assert state == ns["INITIAL_STATE"]  # growing copies; the seeded state is untouched


@pytest.mark.local
def test_a_corpus_with_drills_and_families_is_cached_by_part(tmp_path):
    from rl.corpus import CorpusSettings, build_corpus

    s = CorpusSettings(domains=["retail_orders"], tasks_per_domain=2, multistep_per_family=1,
                       copy_drills_per_length=1, backend="local")
    first = build_corpus(s, parts_cache=tmp_path)
    parts = list((tmp_path / "parts").glob("*.json.gz"))
    assert len(parts) == 2 and first.counts["transcripts"] >= 3  # the domain's transcripts, its drills
    assert sum("<tool_response>" in t and "Which" in t or "What is the" in t for t in first.texts) >= 1
    again = build_corpus(s, parts_cache=tmp_path)  # found by its content hash, the same texts
    assert again.digest == first.digest
    # a drill setting rebuilds the drills alone: the transcripts part is found again, unchanged
    keyed = build_corpus(s.model_copy(update={"drill_style": "keyed"}), parts_cache=tmp_path)
    assert keyed.digest != first.digest and len(list((tmp_path / "parts").glob("*.json.gz"))) == 3
    assert sum('All done. "' in t for t in keyed.texts) >= 1 and not any('All done. "' in t for t in first.texts
                                                                         if "<tool_response>" in t and "I need" in t)
    other = build_corpus(s.model_copy(update={"copy_drills_per_length": 2}), parts_cache=tmp_path)
    assert other.digest != first.digest and len(list((tmp_path / "parts").glob("*.json.gz"))) == 4
    assert set(first.texts) - set(keyed.texts) and set(first.texts) & set(keyed.texts)  # transcripts shared


@pytest.mark.parametrize("name", ["retail_orders", "warehouse_robots"])
def test_keyed_drills_ask_and_answer_with_the_outputs_own_pair(name):
    # keyed (issue 28): the question quotes the key and the record's id or field pair, and the answer says
    # `"key": value` exactly as the tool output writes it, so after the key the value is a verbatim copy
    domain = load_domain(name)
    prose = copy_drills(domain, per_length=4, seed=3, lengths=(200, 500))
    keyed = copy_drills(domain, per_length=4, seed=3, lengths=(200, 500), style="keyed")
    assert len(keyed) == len(prose) and keyed != prose
    said = 0
    for text in keyed:
        [out] = RESPONSE.findall(text)
        user = text[text.index("<|im_start|>user"):].split("<|im_end|>")[0]
        final = text.rsplit("<|im_start|>assistant", 1)[1]
        assert '"' in user  # the key (or the pair) quoted as the output writes it
        if "<tool_call>" in final:  # a look-up that acts: the copied id goes into the write's arguments
            [arg] = json.loads(CALL.findall(final)[0])["arguments"].values()
            assert json.dumps(arg) in out
            continue
        pair = final.split("All done. ", 1)[1].split("<|im_end|>")[0].strip()
        key, value = pair.split(": ", 1)
        assert key in user and value in out, (pair, user)  # asked by its key; the value as the output has it
        said += pair in out  # the pair verbatim (not where the id is the key of a dict of records)
    assert said >= 2
    with pytest.raises(ValueError, match="drill style"):
        copy_drills(domain, per_length=1, seed=3, style="shouty")


@pytest.mark.parametrize(("name", "fields"), [("retail_orders", 3), ("warehouse_robots", 2)])
def test_keyed2_reads_ask_two_fields_and_the_answer_names_them_in_the_requests_order(name, fields):
    # keyed2 (issue 28, section 25): a read asks for two quoted fields drawn at random, and the answer writes
    # both pairs as the output has them, in the order asked, so the answer's keys come from the request
    domain = load_domain(name)
    drills = copy_drills(domain, per_length=6, seed=3, lengths=(200, 500), style="keyed2")
    keyed = copy_drills(domain, per_length=6, seed=3, lengths=(200, 500), style="keyed")
    assert drills != keyed
    twos, keys = 0, set()
    for text in drills:
        [out] = RESPONSE.findall(text)
        user = text[text.index("<|im_start|>user"):].split("<|im_end|>")[0]
        final = text.rsplit("<|im_start|>assistant", 1)[1].split("<|im_end|>")[0]
        if " and tell me the " not in user:
            continue
        twos += 1
        asked = re.findall(r'the ("[^"]+")', user.split(" and tell me ", 1)[1])
        pairs = re.findall(r'("[^"]+"): ("[^"]*"|[^,]+)', final.split("All done. ", 1)[1])
        assert [k for k, _v in pairs] == asked and len(set(asked)) == 2, (user, final)
        assert all(v.strip() in out for _k, v in pairs)  # each value as the output writes it
        keys.update(asked)
    # fields drawn at random: every scalar field gets asked (a robot has two besides its id)
    assert twos >= 4 and len(keys) >= fields


def test_a_foreign_world_has_the_shape_and_none_of_the_ids_words_or_numbers():
    import random

    from rl.copy_drills import _collections, _namespace, _strings, foreign

    domain = load_domain("home_devices")
    ns = _namespace(domain, 0)
    state = ns["INITIAL_STATE"]
    world = foreign(state, random.Random(3))
    assert world == foreign(state, random.Random(3)) and world != foreign(state, random.Random(4))
    for key in _collections(state):
        assert len(world[key]) == len(state[key]) and not set(world[key]) & set(state[key])
        for old, new in zip(state[key].values(), world[key].values(), strict=True):
            assert set(old) == set(new)  # the same fields: the domain's format
    ids = {i for key in _collections(state) for i in state[key]}
    words = {w.lower() for s in _strings(state) for w in s.split()} - {k.lower() for k in _strings_keys(state)}
    text = json.dumps(world)
    assert not any(f'"{i}"' in text for i in ids)
    assert not any(re.search(rf"\b{re.escape(w)}\b", text, re.I) for w in words), words
    # the domain's own read tools work on it, and say its records
    dev = next(iter(world["devices"]))
    out = ns["get_home_device_status"](world, device_id=dev)
    assert json.dumps(out).count(world["devices"][dev]["name"]) >= 1


def _strings_keys(x):
    if isinstance(x, dict):
        return [k for k, v in x.items() for k in [k, *_strings_keys(v)]]
    if isinstance(x, list):
        return [k for v in x for k in _strings_keys(v)]
    return []


def test_foreign_drills_read_the_demo_domain_with_no_held_out_id():
    domain = load_domain("home_devices")
    drills = copy_drills(domain, per_length=3, seed=5, lengths=(200, 1000), style="keyed", foreign_world=True)
    # 3 a length, then 3 one-record reads (a device's status: what read_report reads)
    assert len(drills) == 9 and drills == copy_drills(domain, per_length=3, seed=5, lengths=(200, 1000),
                                                      style="keyed", foreign_world=True)
    seeded = {f"{p}-{n}" for p, k in (("LT", 6), ("LK", 3), ("TH", 2), ("SC", 2)) for n in range(1, k + 1)}
    for i, text in enumerate(drills):
        body = text[text.index("<|im_start|>user"):]
        assert not any(f'"{i}"' in body for i in seeded), body[:300]
        assert copy_spans(text)
        # never a call without arguments: that is a held-out task's gold call word for word (list_home_devices {})
        call = json.loads(CALL.findall(body)[0])
        assert call["arguments"] and call["name"] == ("list_home_devices" if i < 6 else "get_home_device_status"), call


def test_one_record_drills_answer_the_asked_fields_with_the_outputs_pairs():
    from rl.copy_drills import DRILL_LENGTHS

    domain = load_domain("home_devices")
    drills = copy_drills(domain, per_length=12, seed=2, style="keyed", foreign_world=True)[12 * len(DRILL_LENGTHS):]
    assert len(drills) == 12
    prefixes, two = set(), 0
    for text in drills:
        body = text[text.index("<|im_start|>user"):]
        call = json.loads(CALL.findall(body)[0])
        dev = call["arguments"]["device_id"]
        prefixes.add(dev.split("-")[0])
        assert int(dev.split("-")[1]) >= 10  # past every seeded world's ids of that kind
        out = json.loads(re.search(r"<tool_response>\n(.*?)\n</tool_response>", body, re.S).group(1))
        assert out["device_id"] == dev
        asked = re.findall(r'the "([a-z_]+)"', body.split("<|im_end|>")[0])
        answer = body.rsplit("<|im_start|>assistant", 1)[1]
        assert asked and answer.strip().startswith("All done. ")
        # each asked field, in the request's order, with the output's own pair
        pairs = [json.dumps({f: out[f]})[1:-1] for f in asked]
        assert ", ".join(pairs) in answer, (asked, answer)
        two += len(asked) == 2
    assert 0 < two < len(drills) and len(prefixes) >= 2  # one field and two; lights and other kinds


def test_priming_drills_are_sft_rows_of_the_demo_domain_on_a_foreign_world():
    from rl.demo import load_demo_config, priming_drills_of
    from synth.episode import brief_system_prompt
    from synth.sft_data import to_dataset

    assert priming_drills_of(load_demo_config(None, [])) == []  # off by default: the demo primes on its traces
    drills = priming_drills_of(load_demo_config(None, ["prime_drills=4", "seed=1"]))
    assert len(drills) == 8 and len({d.task_id for d in drills}) == 8
    rows = to_dataset(drills)
    assert len(rows) == 8  # every drill is an SFT row
    domain = load_domain("home_devices")
    seeded = {f"{p}-{n}" for p, k in (("LT", 6), ("LK", 3), ("TH", 2), ("SC", 2)) for n in range(1, k + 1)}
    names = []
    for row in rows:
        m = row["messages"]
        assert m[0] == {"role": "system", "content": brief_system_prompt(None, domain)}
        assert [x["role"] for x in m] == ["system", "user", "assistant", "tool", "assistant"]
        assert not any(f'"{i}"' in json.dumps(m) for i in seeded)
        assert m[-1]["content"].startswith("All done. ")  # the keyed answer of the demo's priming
        names.append(m[2]["tool_calls"][0]["function"]["name"])
    assert names == ["list_home_devices"] * 4 + ["get_home_device_status"] * 4


def test_the_one_record_reads_are_counted_on_their_own():
    domain = load_domain("home_devices")
    drills = copy_drills(domain, per_length=2, seed=3, lengths=(200,), style="keyed", foreign_world=True, records=5)
    calls = [json.loads(CALL.findall(t[t.index("<|im_start|>user"):])[0])["name"] for t in drills]
    assert calls == ["list_home_devices"] * 2 + ["get_home_device_status"] * 5
    # unset: as many as one length's drills, the same drills as before the setting
    assert copy_drills(domain, per_length=2, seed=3, lengths=(200,), style="keyed", foreign_world=True) == \
        copy_drills(domain, per_length=2, seed=3, lengths=(200,), style="keyed", foreign_world=True, records=2)


def test_a_real_word_foreign_world_has_real_words_of_each_kind_and_none_of_the_worlds():
    import random

    from rl.copy_drills import _REAL_KINDS, _REAL_ROOMS, _collections, _namespace, _strings, foreign

    domain = load_domain("home_devices")
    ns = _namespace(domain, 0)
    state = ns["INITIAL_STATE"]
    world = foreign(state, random.Random(3), words="real")
    assert world == foreign(state, random.Random(3), words="real") != foreign(state, random.Random(3))
    values = {s.lower() for s in _strings(state)} - {k.lower() for k in _strings_keys(state)}
    for key in _collections(state):
        assert len(world[key]) == len(state[key]) and not set(world[key]) & set(state[key])
        for old, new in zip(state[key].values(), world[key].values(), strict=True):
            assert set(old) == set(new)
            for f, v in new.items():  # no string of the world's; the same type; a percentage stays one
                assert not (isinstance(v, str) and v.lower() in values), (f, v)
                assert type(v) is type(old[f]), (f, v)
                if f in ("brightness", "battery_pct"):
                    assert 1 <= v <= 100
    lights = [new for old, new in zip(state["devices"].values(), world["devices"].values(), strict=True)
              if old["type"] == "light"]  # a light is named "<Room> light": the same room, written as a name
    assert lights and all(d["room"] in _REAL_ROOMS for d in world["devices"].values())
    # a kind is another kind, the same for every record of it, and written so in the names too
    kinds = {old["type"]: new["type"] for old, new in zip(state["devices"].values(), world["devices"].values(),
                                                          strict=True)}
    assert len(set(kinds.values())) == len(kinds) and set(kinds.values()) <= set(_REAL_KINDS)
    for d in lights:
        assert d["name"] == f"{d['room'].title()} {d['type']}", d
    # the domain's own tools read it
    dev = next(iter(world["devices"]))
    assert ns["get_home_device_status"](world, device_id=dev)["room"] == world["devices"][dev]["room"]


def test_real_word_drills_meet_no_held_out_task_and_copy_the_output():
    from rl.corpus import held_out_leaks
    from synth.task_families import split_by_entity, synthesize_family_tasks

    domain = load_domain("home_devices")
    drills = copy_drills(domain, per_length=4, seed=7, lengths=(200, 500), style="keyed", foreign_world=True,
                         records=40, words="real")
    # answers copy from the output (a boolean, a one-digit number or a value the request holds is no span)
    assert len(drills) == 48 and sum(bool(copy_spans(t)) for t in drills) >= 36
    made = synthesize_family_tasks({"read_report": 24}, seed=0, domains=["home_devices"], quote_values=True,
                                   quote_fields=True, domain_seeds=32)
    held = split_by_entity(made, held_per_family=12, seed=0)[1]
    # the held-out answers are the world's rooms, names, kinds and modes ("lock" alone, for a lock's type)
    assert held and all(t.expected_outputs for t in held) and not held_out_leaks(drills, held)
    with pytest.raises(ValueError, match="foreign words"):
        copy_drills(domain, per_length=1, seed=0, lengths=(200,), foreign_world=True, words="fake")  # type: ignore[arg-type]
