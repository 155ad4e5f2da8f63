"""The README's "Scripting an agent and scoring an episode" block runs as written."""

from __future__ import annotations

import re
from pathlib import Path


from synth.tasks import Action, Rubric, Task, UserScenario

ROOT = Path(__file__).resolve().parents[1]


def _snippet() -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- scripting-example -->\n```python\n(.*?)```\n<!-- /scripting-example -->", text, re.S)
    assert m, "the README lost its scripting example"
    return m.group(1)


def test_the_readme_scripting_example_runs_and_scores(tmp_path, monkeypatch, capsys):
    from conftest import require

    require("local")
    task = Task(id="cancel", domain="retail_orders", seed=3, instruction="Please cancel order O-1005.",
                persona="Dara.", user_scenario=UserScenario(persona="Dara.", reason_for_call="Cancel an order.",
                                                            task_instructions="-"),
                gold_actions=[Action(name="cancel_order", arguments={"order_id": "O-1005", "reason": "changed_mind"})],
                rubric=Rubric(), tools=["get_order", "cancel_order"], difficulty="easy")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tasks.jsonl").write_text(task.model_dump_json() + "\n")
    monkeypatch.chdir(tmp_path)
    exec(compile(_snippet(), "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    termination, score, _reason = out.split(" ", 2)
    assert termination != "agent_error" and score != "None" and float(score) > 0.5, out
