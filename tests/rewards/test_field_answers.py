"""A reported value counts only for the field it was asked for (rewards.field_answers)."""

import copy
import json
import pickle

import anyio
import pytest

from rewards.field_answers import check_fields, keyed, names_field, records_named
from rewards.field_answers import told_outputs
from rewards.verifiable import CommunicationReward, agent_texts
from synth.episode import Trajectory
from synth.task_models import FieldValue as F
from synth.tasks import Rubric, Task, UserScenario, task_row

PORCH = {"device_id": "LT-2", "type": "light", "name": "Porch light", "room": "porch", "online": True, "on": False}
THERMO = {"device_id": "TH-1", "type": "thermostat", "name": "Main thermostat", "room": "hallway", "mode": "auto"}
LIGHT3 = {"device_id": "LT-3", "type": "light", "name": "Hallway light", "room": "hallway", "on": True}


def task(outputs, tid="read_report-t200-00158"):
    return Task(id=tid, domain="home_devices", seed=1, instruction='Please tell me the "type" and the "room".',
                persona="p", user_scenario=UserScenario(persona="p", reason_for_call="r", task_instructions="t"),
                gold_actions=[{"name": "get_home_device_status", "arguments": {"device_id": "LT-2"}}],
                expected_outputs=outputs, rubric=Rubric(), tools=["get_home_device_status"], difficulty="easy")


def episode(record, *answers):
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {
                "name": "get_home_device_status", "arguments": json.dumps({"device_id": record["device_id"]})}}]},
            {"role": "tool", "tool_call_id": "c0", "name": "get_home_device_status", "content": json.dumps(record)}]
    msgs += [{"role": "assistant", "content": a} for a in answers]
    return Trajectory(task_id="x", domain="home_devices", seed=1, messages=msgs)


def score(t, traj, **kw):
    return anyio.run(lambda: CommunicationReward(**kw).score(t, traj))


# the three held-out episodes of the fresh-clone demo that the old rule called solved
FIXTURES = [
    ([F("light", "type"), F("porch", "room")], PORCH, 'All done. "type": "lock", "name": "Porch light"'),
    ([F("light", "type"), F("Porch light", "name")], PORCH, 'All done. "type": "lock", "name": "Porch light"'),
    ([F("thermostat", "type"), F("Main thermostat", "name")], LIGHT3 | {"name": "Main thermostat"},
     'All done. "type": "light", "name": "Main thermostat"'),
]


@pytest.mark.parametrize("outputs,record,answer", FIXTURES)
def test_a_wrong_value_for_an_asked_field_fails_though_the_right_word_is_elsewhere(outputs, record, answer):
    traj = episode(record, answer)
    assert score(task(outputs), traj, by_field=False).score == 1.0  # the old rule: solved
    r = score(task(outputs), traj)
    assert r.score == 0.0 and 'type: said "' in r.reason
    assert [c["told"] for c in r.details["fields"]].count(False) >= 1


def test_saying_the_name_alone_does_not_tell_the_type_or_the_room():
    r = score(task([F("light", "type"), F("porch", "room")]), episode(PORCH, "It is the Porch light."))
    assert r.score == 0.0 and r.details["missing"] == ["light", "porch"]


@pytest.mark.parametrize("answer", [
    '{"type": "light", "room": "porch"}', "type: light, room: porch", "type = light; room = porch",
    "The type is light and the room is porch.", "The Porch light is a light on the porch.",
    "{'device_type': 'light', 'room': 'porch'}",
])
def test_each_keyed_form_and_free_prose_tell_the_fields(answer):
    assert score(task([F("light", "type"), F("porch", "room")]), episode(PORCH, answer)).score == 1.0


def test_a_hedge_fails_the_field_and_a_correction_after_a_new_read_stands():
    t = task([F("light", "type")])
    assert score(t, episode(PORCH, '"type": "lock", "type": "light"')).score == 0.0
    assert score(t, episode(PORCH, '"type": "lock"', '"type": "light"')).score == 0.0  # no new read between
    traj = episode(THERMO, '"type": "thermostat"')
    traj.messages += episode(PORCH, '"type": "light"').messages[1:]
    assert score(t, traj).score == 1.0
    traj = episode(PORCH, '"type": "light"')
    traj.messages += episode(THERMO, '"type": "thermostat"').messages[1:]
    assert score(t, traj).score == 0.0  # the last word counts


def test_a_list_field_is_keyed_once_per_value_and_plain_outputs_keep_the_old_rule():
    ids = [F("SC-1", "scene_id"), F("SC-2", "scene_id")]
    rec = {"device_id": "x", "scenes": [{"scene_id": "SC-1"}, {"scene_id": "SC-2"}]}
    assert score(task(ids), episode(rec, '"scene_id": "SC-1", "scene_id": "SC-2"')).score == 1.0
    assert score(task(ids), episode(rec, '"scene_id": "SC-1", "scene_id": "SC-3"')).score == 0.0
    # a plain output is tau-bench's: found anywhere at word boundaries
    assert score(task(["light"]), episode(PORCH, '"type": "lock", "name": "Porch light"')).score == 1.0


def test_keys_name_fields_by_their_last_words():
    assert names_field("device type", "type") and names_field("Device_Type", "type") and names_field("id", "device_id")
    assert not names_field("name", "type") and not names_field("note", "name")
    assert [k for k, _v, _s in keyed("Note: all done", ["name"])] == []


def test_field_values_survive_json_copies_and_the_dataset_row():
    t = task([F("light", "type"), "plain"])
    back = Task.model_validate_json(t.model_dump_json())
    assert back.expected_outputs == ["light", "plain"] and back.expected_outputs[0].field == "type"
    assert not isinstance(back.expected_outputs[1], F)
    assert copy.deepcopy(back).expected_outputs[0].field == "type" == pickle.loads(pickle.dumps(back)).expected_outputs[0].field
    assert json.loads(task_row(t)["expected_outputs"]) == [{"field": "type", "value": "light"}, "plain"]
    with pytest.raises(ValueError, match="field"):
        task([{"value": "light"}])


def test_the_claims_check_counts_told_outputs_by_the_same_rule():
    t = task([F("light", "type")])
    for answer, told in [('"type": "lock", "name": "Porch light"', []), ('"type": "light"', ["light"])]:
        traj = episode(PORCH, answer)
        assert told_outputs(t.expected_outputs, agent_texts(traj), traj.messages) == told


def test_check_fields_reports_what_was_said():
    [c] = check_fields(['"type": "lock"'], [F("light", "type")])
    assert c.line() == 'type: said "lock", expected "light" ✗'


def test_prose_about_a_record_the_task_does_not_name_tells_nothing():
    # the held-out episode the first cut of the rule called solved (read_report-t202-00159): asked the
    # mode of TH-2 (the guest annex thermostat), the agent listed both thermostats and spoke of TH-1
    listing = {"devices": [THERMO | {"mode": "off"},
                           {"device_id": "TH-2", "type": "thermostat", "name": "Guest annex thermostat",
                            "room": "annex", "mode": "off"}]}
    t = Task.model_validate(task([F("off", "mode")]).model_dump() | {
        "instruction": 'Tell me the "mode" of the device whose name is Guest annex thermostat.',
        "gold_actions": [{"name": "get_home_device_status", "arguments": {"device_id": "TH-2"}}]})

    def ep(answer):
        traj = episode(THERMO, answer)
        traj.messages[2]["content"] = json.dumps(listing)
        return traj

    assert score(t, ep("Check: TH-1 has mode off, as asked. All done."), by_field=False).score == 1.0
    assert score(t, ep("Check: TH-1 has mode off, as asked. All done.")).score == 0.0
    assert score(t, ep("The Main thermostat is off.")).score == 0.0
    # the asked record, by id or by name, or a sentence naming both, tells it; so does a keyed answer
    for told in ("Check: TH-2 has mode off.", "The Guest annex thermostat is off.",
                 "TH-1 is auto but TH-2 is off.", 'Check: TH-1 listed. "mode": "off"'):
        assert score(t, ep(told)).score == 1.0, told
    # with nothing to say which records are the task's, prose is not told apart (the rule as before)
    assert check_fields(["Check: TH-1 has mode off."], [F("off", "mode")],
                        tool_results=[("device_id", "TH-1"), ("device_id", "TH-2")])[0].told
    assert records_named(ep("").messages, [t.instruction, "TH-2"]) == (
        ["TH-2", "Guest annex thermostat"], ["TH-1", "Main thermostat"])
