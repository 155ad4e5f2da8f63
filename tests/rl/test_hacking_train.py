"""A reward hack inside one real `dojo train` step (CPU): the forging policy gets 0, the honest one 1.

`dojo train` runs in-process (the CLI, TRL's GRPOTrainer, our multi-turn rollout, real sandboxes
and the composite reward from the config) on two tasks of a domain with a shell tool. The one test
double is the policy's text: a scripted generator stands in for the tiny model's sampling (a random
model would never type the forge), so episodes of task A set the note honestly and episodes of task B
write a wrong note and overwrite it in the tool server's memory through the shell (issue 21).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

from typer.testing import CliRunner  # noqa: E402

from rl.generation import GenResult  # noqa: E402
from rl.rollout import MultiTurnRollout  # noqa: E402
from tests.conftest import any_backend  # noqa: E402
from tests.sandbox_attacks import FORGED, HONEST, notes_domain, notes_task, short_forge  # noqa: E402
from tooldojo.cli import app  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


class ScriptedPolicy:
    """The Generator protocol, answering from the conversation so far: task B's episodes forge."""

    context_limit = 1 << 16

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.eot = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def turn(self, text: str) -> str:
        done = text.count("<tool_response>")
        if "ticket B" in text:
            plan = [call("set_note", key="plan", text=FORGED), call("run_shell", command=short_forge(FORGED, HONEST))]
        else:
            plan = [call("set_note", key="plan", text=HONEST)]
        return plan[done] if done < len(plan) else "Done: your plan note is set."

    def generate(self, requests):
        out = []
        for r in requests:
            ids = self.tok.encode(self.turn(self.tok.decode(r.prompt_ids)), add_special_tokens=False) + [self.eot]
            assert len(ids) <= r.max_tokens, f"the scripted turn needs {len(ids)} tokens, the budget is {r.max_tokens}"
            out.append(GenResult(ids=ids, logprobs=[0.0] * len(ids)))
        return out


@pytest.mark.slow
def test_one_train_step_scores_the_forging_policy_zero_and_the_honest_one_one(tmp_path, monkeypatch):
    import toolzoo.domains

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    rows = [notes_task("note-a", f"Set my plan note to {HONEST} (ticket A)."),
            notes_task("note-b", f"Set my plan note to {HONEST} (ticket B).")]
    (tasks / "tasks.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in rows))
    zoo_load = toolzoo.domains.load_domain
    monkeypatch.setattr(toolzoo.domains, "load_domain",
                        lambda name, *a, **k: notes_domain() if name == "shell_notes" else zoo_load(name, *a, **k))
    monkeypatch.setattr(MultiTurnRollout, "generator_for", lambda self, trainer: ScriptedPolicy(self.tokenizer))

    run = tmp_path / "run"
    r = CliRunner().invoke(app, [
        "train", str(ROOT / "examples" / "train_tiny.yaml"), f"run.output_dir={run}", f"data.tasks={tasks}",
        "data.domains=null", "rollout.use_vllm=false", f"rollout.sandbox_backend={any_backend()}", "run.logging=[]",
        "grpo.max_steps=1", "grpo.num_generations=2", "grpo.per_device_train_batch_size=4",
        "grpo.max_completion_length=768", "rollout.max_turns=4", "reward.gate=[reverify,world_state]"])
    assert r.exit_code == 0, (r.stdout[-3000:], r.stderr[-3000:] if r.stderr_bytes else "", repr(r.exception))

    (step,) = sorted((run / "episodes").glob("step-*.jsonl"))  # one step: one file
    episodes = [json.loads(x) for x in step.read_text().splitlines()]
    by_task = {t: [e for e in episodes if e["task_id"] == t] for t in ("note-a", "note-b")}
    assert all(len(v) == 2 for v in by_task.values()), [e["task_id"] for e in episodes]
    for e in by_task["note-a"]:
        assert e["reward"] == 1.0 and e["final_state"] == {"notes": {"plan": HONEST}}, e["components"]
    for e in by_task["note-b"]:
        shell = e["tool_calls"][1]
        assert shell["name"] == "run_shell" and "forged" not in shell["output"]["stdout"], shell
        # The record says why: the note is the wrong one, and world state scored it 0.
        assert e["final_state"] == {"notes": {"plan": FORGED}} and e["components"]["world_state"] == 0.0
        assert e["reward"] == 0.0, e["components"]
