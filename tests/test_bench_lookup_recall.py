"""bench/lookup_recall.py: which training look-ups a policy can pass by recall (the name always gives
the same id), and how the held-out look-ups' write tools differ from training's (issue 28, section 19)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.bench_module import load_bench

ROOT = Path(__file__).resolve().parents[1]


def _lookup(name: str, rid: str, tool: str = "delete_home_scene", quoted: bool = False) -> SimpleNamespace:
    said = f'the scene with "name": "{name}"' if quoted else f"for the scene whose name is {name}"
    return SimpleNamespace(instruction=f"Please do it ({said}).", gold_actions=[
        SimpleNamespace(name="list_home_scenes", arguments={}),
        SimpleNamespace(name=tool, arguments={"scene_id": rid})])


def test_a_name_that_always_gives_one_id_is_recallable_and_one_that_varies_is_not():
    report = load_bench("lookup_recall").recall_report
    train = ([_lookup("Good night", "SC-1")] * 3 + [_lookup("Good night", "SC-1", quoted=True)]
             + [_lookup("Movie time", "SC-1"), _lookup("Movie time", "SC-2"), _lookup("Movie time", "SC-2")]
             + [_lookup("Reading", "SC-3")] * 2)   # always SC-3, but named twice only: below min_count
    held = [_lookup("Dinner", "SC-4", tool="activate_home_scene")] * 2
    r = report(train, held, min_count=3, share=0.9)
    assert r["recallable"] == 4 and r["recallable_names"] == {"Good night": 4}
    assert r["recallable_share"] == round(4 / 9, 4) and r["train_lookups"] == 9 and r["held_out_lookups"] == 2
    assert r["write_tools"]["held_out"] == {"activate_home_scene": 2} and r["write_tool_distance"] == 1.0
    # Movie time gives SC-2 in 2 of 3: recallable at a share of 0.6, not at 0.9
    assert report(train, held, min_count=3, share=0.6)["recallable_names"] == {"Good night": 4, "Movie time": 2}
    same = report(train, train)
    assert same["write_tool_distance"] == 0.0


def test_the_cli_reads_a_demo_split_and_prints_one_json_line(tmp_path):
    from synth.task_families import synthesize_family_tasks
    from synth.tasks import export_tasks
    from tests.conftest import any_backend

    made = synthesize_family_tasks({"lookup_act": 8}, seed=1, domains=["home_devices"], backend=any_backend(),
                                   sandboxes=2, domain_seeds=2)["lookup_act"]
    export_tasks(made[:6], tmp_path / "tasks" / "train")
    export_tasks(made[6:], tmp_path / "tasks" / "held_out")
    p = subprocess.run([sys.executable, "bench/lookup_recall.py", str(tmp_path), "--save", str(tmp_path / "r.json")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    rep = out["splits"][str(tmp_path)]
    assert rep["train_lookups"] == 6 and rep["held_out_lookups"] == len(made) - 6
    assert sum(rep["write_tools"]["train"].values()) == 6 and out == json.loads((tmp_path / "r.json").read_text())
