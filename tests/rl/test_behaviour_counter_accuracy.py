"""The behaviour counter against its labelled set (issue 33 #2): precision and recall per behaviour may not drop
below the figures measured when it was fixed (bench/results/behaviour_counter.json, rounded down to 2 decimals)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (precision, recall) measured by bench/behaviour_counter.py on bench/data/behaviour_labels.jsonl, rounded down
FLOORS = {"subgoal": (1.00, 0.93), "verification": (0.94, 1.00), "backtracking": (1.00, 1.00),
          "backward_chaining": (0.96, 1.00)}


def test_the_labelled_set_covers_every_policy_and_behaviour_both_ways():
    rows = [json.loads(x) for x in (ROOT / "bench" / "data" / "behaviour_labels.jsonl").read_text().splitlines()]
    assert len(rows) >= 60
    assert {"priming", "base", "primed", "Dr. GRPO"} <= {r["policy"] for r in rows}
    for b in FLOORS:
        present = sum(r["labels"][b] for r in rows)
        assert present >= 5 and len(rows) - present >= 5, b
    assert all(r["reason"] and r["labelled_by"] in ("generator", "reading") for r in rows)
    assert sum(r["batch"] == "held_out" for r in rows) >= 10  # labelled after the fix, blind to its counts


def test_the_counter_keeps_its_measured_precision_and_recall(tmp_path):
    out = tmp_path / "counter.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "behaviour_counter.py"), "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    last = json.loads(r.stdout.strip().splitlines()[-1])
    got = json.loads(out.read_text())["behaviours"]
    for b, (p, rec) in FLOORS.items():
        assert got[b]["precision"] >= p and got[b]["recall"] >= rec, (b, got[b])
        assert last[f"{b}_precision"] == got[b]["precision"]
    # the committed figures are the ones this counter gives
    committed = json.loads((ROOT / "bench" / "results" / "behaviour_counter.json").read_text())["behaviours"]
    assert {b: (s["precision"], s["recall"]) for b, s in committed.items()} == \
        {b: (s["precision"], s["recall"]) for b, s in got.items()}


def test_a_base_flailing_through_unknown_tools_does_not_backtrack():
    """The bug the labelled set found: an error followed by ANY other call counted as backtracking, so a base
    calling one made-up tool after another 'backtracked' in half its episodes."""
    from rl.behaviours import HeuristicCounter

    def call(i, name, **args):
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}]}

    def err(i, text):
        return {"role": "tool", "tool_call_id": f"c{i}", "content": text}

    unknown = "Error (malformed_call): unknown tool '{}'; available tools: delete_home_scene, list_home_devices"
    flail = [{"role": "user", "content": "Delete scene SC-1."}, call(0, "list_vfs_trash"),
             err(0, unknown.format("list_vfs_trash")), call(1, "list_home_appliances"),
             err(1, unknown.format("list_home_appliances")),
             {"role": "assistant", "content": "Error: G-10399 was not found, so I mistyped it."}]
    assert HeuristicCounter().counts(flail)["backtracking"] == 0
    # a tool the error named, or the same tool with other arguments, is a repair
    hinted = flail[:3] + [call(1, "delete_home_scene", scene_id="SC-1"), err(1, '{"deleted": "SC-1"}')]
    assert HeuristicCounter().counts(hinted)["backtracking"] == 1
    retry = flail[:1] + [call(0, "delete_home_scene", scene_id="SC-19"), err(0, "Error (not_found): no scene SC-19"),
                         call(1, "delete_home_scene", scene_id="SC-1"), err(1, '{"deleted": "SC-1"}')]
    assert HeuristicCounter().counts(retry)["backtracking"] == 1
