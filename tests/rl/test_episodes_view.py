"""The report's episodes side by side (rl.episodes_view), on made-up trajectories: no demo runs here."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rl.episodes_view import (BOTH_FAIL, FOLD_CHARS, PRIMED_FAILED_GRPO_SOLVED, episodes_section, pick_episodes,
                              render_chat, render_episodes, sampled_rows, write_episodes_jsonl)

EVIL = "<script>alert(1)</script>"


def _row(task, solved, seed, *, out="ok", text="Done."):
    comps = {"world_state": 1.0 if solved else 0.0, "communication": None}
    return {"task_id": task, "seed": seed, "solved": solved, "reward": 1.0 if solved else 0.0, "components": comps,
            "termination": "agent_done", "reward_reason": f"world state {'matches' if solved else 'differs'}",
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": f"please {task}"},
                         {"role": "assistant", "content": "",
                          "tool_calls": [{"id": "c1", "type": "function",
                                          "function": {"name": "get_order", "arguments": '{"order_id": "O-1"}'}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": out},
                         {"role": "assistant", "content": text}]}


def _tasks(*spec):
    return [SimpleNamespace(id=i, instruction=f"do {i}", fam=f) for i, f in spec]


def _fam(t):
    return t.fam


def test_prefers_primed_failed_grpo_solved_and_shows_one_both_fail():
    tasks = _tasks(("a1", "A"), ("a2", "A"), ("a3", "A"), ("b1", "B"), ("b2", "B"))
    rows = {
        "base": [_row(t, False, 7) for t in ("a1", "a2", "a3", "b1", "b2")],
        # a1: both solve; a2: primed fails once, Dr. GRPO solves once; a3: both fail; b1 both solve; b2 primed only
        "sft": [_row("a1", True, 7), _row("a2", True, 7), _row("a2", False, 8), _row("a3", False, 7),
                _row("b1", True, 7), _row("b2", True, 7)],
        "grpo": [_row("a1", True, 7), _row("a2", False, 7), _row("a2", True, 8), _row("a3", False, 7),
                 _row("b1", True, 7), _row("b2", False, 7)],
    }
    picks = pick_episodes(tasks, rows, family=_fam)
    assert [(p.family, p.task_id, p.why) for p in picks] == [
        ("A", "a2", PRIMED_FAILED_GRPO_SOLVED), ("B", "b1", "both solved"), ("A", "a3", BOTH_FAIL)]
    a2 = picks[0].episodes
    # the episodes shown make the point: the primed one that failed, the Dr. GRPO one that solved
    assert a2["sft"]["solved"] is False and a2["sft"]["seed"] == 8
    assert a2["grpo"]["solved"] is True and a2["grpo"]["seed"] == 8 and a2["base"]["seed"] == 7
    # a family whose own pick is a both-fail one needs no extra task
    only = pick_episodes(_tasks(("a3", "A")), {k: [r for r in v if r["task_id"] == "a3"] for k, v in rows.items()},
                         family=_fam)
    assert [(p.task_id, p.why) for p in only] == [("a3", BOTH_FAIL)]


def test_the_chat_escapes_everything_and_folds_long_tool_outputs(tmp_path):
    long_out = json.dumps({"rows": [{"id": f"O-{i}", "note": "x" * 20} for i in range(30)]})
    row = _row("t<1>", False, 3, out=long_out, text=EVIL)
    row["messages"][1]["content"] = EVIL
    row["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"q": EVIL})
    row["reward_reason"] = EVIL
    short = _row("t<1>", True, 4, out='{"status": "cancelled"}')
    chat = render_chat(row)
    assert EVIL not in chat and chat.count("&lt;script&gt;") >= 4
    assert len(long_out) > FOLD_CHARS and "<details><summary>output (" in chat  # the long output folded
    assert "&#10007; world_state: failed (0.00)" in chat and "communication: not scored" in chat
    assert "seed 3" in chat and "get_order" in chat and "failed</b>, reward 0.00" in chat
    short_chat = render_chat(short)
    assert "<details><summary>output" not in short_chat and "&quot;status&quot;: &quot;cancelled&quot;" in short_chat
    assert "&#10003; world_state: passed (1.00)" in short_chat
    page = render_episodes(pick_episodes(
        [SimpleNamespace(id="t<1>", instruction=EVIL, fam=EVIL)], {"base": [row], "sft": [row], "grpo": [short]},
        family=_fam))
    assert EVIL not in page and "<h4>base</h4>" in page and "<h4>primed</h4>" in page and "<h4>Dr. GRPO</h4>" in page


def test_jsonl_and_section_from_a_demo_folder(tmp_path):
    from synth.tasks import Action, Rubric, Task, UserScenario

    def task(i, tool):
        return Task(id=i, domain="retail_orders", seed=0, instruction=f"do {i}", persona="p",
                    user_scenario=UserScenario(persona="p", reason_for_call="r", task_instructions="i"),
                    gold_actions=[Action(name=tool, arguments={"order_id": "O-1"})], rubric=Rubric(), tools=[tool], difficulty="easy")

    (tmp_path / "tasks" / "held_out").mkdir(parents=True)
    (tmp_path / "tasks" / "held_out" / "tasks.jsonl").write_text(
        "".join(task(i, t).model_dump_json() + "\n" for i, t in (("t1", "cancel_order"), ("t2", "cancel_order"))))
    for key, res in (("base", [False, False]), ("sft", [False, False]), ("grpo", [True, False])):
        d = tmp_path / "eval" / key
        d.mkdir(parents=True)
        sampled = [_row(t, s, 1) for t, s in zip(("t1", "t2"), res, strict=True)]
        greedy = [_row(t, True, 99) for t in ("t1", "t2")]  # after the sampled ones: never shown
        (d / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sampled + greedy))
        (d / "summary.json").write_text(json.dumps({"samples": 1, "tasks": 2}))
    assert len(sampled_rows(tmp_path / "eval" / "sft" / "trajectories.jsonl")) == 2
    html_text = episodes_section(tmp_path)
    assert "cancel_order: task <code>t1</code> (primed failed, Dr. GRPO solved)" in html_text
    assert f"task <code>t2</code> ({BOTH_FAIL})" in html_text and "seed 99" not in html_text
    lines = [json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [(x["task_id"], x["policy"]) for x in lines] == [(t, p) for t in ("t1", "t2") for p in ("base", "sft", "grpo")]
    assert all({"messages", "reward", "components", "solved", "seed", "picked", "family"} <= x.keys() for x in lines)
    assert episodes_section(tmp_path / "nothing") == "<p>No held-out episodes to show.</p>"
    write_episodes_jsonl([], tmp_path / "empty.jsonl")
    assert (tmp_path / "empty.jsonl").read_text() == ""


def test_each_asked_field_gets_its_verdict_in_the_chat_and_the_jsonl(tmp_path):
    from synth.task_models import FieldValue
    from synth.tasks import Rubric, Task, UserScenario

    t = Task(id="read_report-t200-00158", domain="home_devices", seed=1, persona="p",
             instruction='Please tell me the "type" and the "room" of LT-2.',
             user_scenario=UserScenario(persona="p", reason_for_call="r", task_instructions="t"),
             gold_actions=[{"name": "get_home_device_status", "arguments": {"device_id": "LT-2"}}],
             expected_outputs=[FieldValue("light", "type"), FieldValue("porch", "room")], rubric=Rubric(),
             tools=["get_home_device_status"], difficulty="easy")
    record = json.dumps({"device_id": "LT-2", "type": "light", "name": "Porch light", "room": "porch"})
    wrong = _row(t.id, True, 7, out=record, text='All done. "type": "lock", "name": "Porch light"')
    right = _row(t.id, True, 8, out=record, text='"type": "light", "room": "porch"')
    picks = pick_episodes([t], {"sft": [wrong], "grpo": [right]}, family=lambda _t: "read_report")
    assert picks[0].fields["sft"] == ['type: said "lock", expected "light" ✗', 'room: not said, expected "porch" ✗']
    assert picks[0].fields["grpo"] == ['type: said "light", expected "light" ✓', 'room: said "porch", expected "porch" ✓']
    html_text = render_episodes(picks)
    assert "type: said &quot;lock&quot;, expected &quot;light&quot; ✗" in html_text
    lines = [json.loads(x) for x in write_episodes_jsonl(picks, tmp_path / "e.jsonl").read_text().splitlines()]
    assert {x["policy"]: x["fields"][0] for x in lines} == {"sft": 'type: said "lock", expected "light" ✗',
                                                            "grpo": 'type: said "light", expected "light" ✓'}
    # a task that asks no field shows none
    assert render_chat(wrong) == render_chat(wrong, [])
