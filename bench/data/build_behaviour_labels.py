"""Builds bench/data/behaviour_labels.jsonl, the labelled set bench/behaviour_counter.py measures the behaviour
counter (rl.behaviours.HeuristicCounter) on (issue 33 #2). Kept for provenance; the JSONL is what is committed.

Two kinds of rows, each with its messages, a label per behaviour (present / absent) and a one-line reason:

- priming traces (synth.behaviours, procedural) of the conditions all, none and each single behaviour, for the
  train tasks of a demo run: labelled by the generator itself (BehaviourAgent.used: what it inserted);
- held-out episodes of that demo run's base, primed and Dr. GRPO policies (sampled), labelled by reading.

Reading rubric (what a person means by the behaviour, whatever the counter does):
- subgoal: the agent states a plan for the request ("Plan: 1) ...", "first X, then Y", "Step 2: ...") whose steps
  are actions of the task's domain (right or wrong for the task); a garbled plan, or one made of another domain's
  tools (the base hallucinating tools of other domains), is absent;
- verification: the agent checks a result: reads back what it changed with words about it, or states a check of a
  named entity against the request ("Check: SC-1 looks right, as asked.", hollow or not); "as asked" inside
  garbled text is absent;
- backtracking: after a failed or unexpected result the agent says so and goes back, or retries the same call
  with changed arguments (or, after an unknown-tool error, a tool the error named); calling another, unrelated
  tool after an error without a word (flailing), or echoing "I mistyped it" after no such error, is absent;
- backward chaining: a statement from the goal to what it needs first ("To delete scene SC-1 I need device id
  LT-1; first ...", muddled entities allowed); a garbled or other-domain sentence is absent.

    PYTHONPATH=. .venv/bin/python bench/data/build_behaviour_labels.py /path/to/demo_out
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

B = ("subgoal", "verification", "backtracking", "backward_chaining")
S, V, K, C = B   # short names for the hand labels below

# (policy, index in the sampled episodes of eval/<policy>/trajectories.jsonl) -> (behaviours present, reason)
READ: dict[tuple[str, int], tuple[set[str], str]] = {
    ("base", 0): (set(), "unknown tool, then a garbled call with no word about the error; no plan, no check"),
    ("base", 1): (set(), "one unknown tool call, then 'All done.'"),
    ("base", 2): (set(), "'Plan: 1) therecourse. Dr pocon...' names no step: garbled"),
    ("base", 3): (set(), "'To write calendar time order, original below' is garbled, no prerequisite"),
    ("base", 4): (set(), "plan and 'I need its details' name list_parcel_shipments (another domain); two unknown "
                         "tools in a row is flailing, 'eck: AP-102' garbled"),
    ("base", 5): (set(), "garbled text and one malformed call"),
    ("base", 6): (set(), "one malformed call, 'All done.'"),
    ("base", 7): (set(), "'Plan: 1) crith setbcore' garbled; two different unknown tools without a word: flailing"),
    ("base", 8): (set(), "'Plan: 1) list assigneds 2) list clinic' names no action of the domain"),
    ("base", 9): (set(), "garbled plan; 'as asked' inside garbled text; get_dispatch_job is another domain's"),
    ("base", 10): (set(), "garbled sentences only"),
    ("base", 11): (set(), "'To get flight seat... I need flight id FL-03' is another domain's (flights); plan "
                          "garbled; 'Now verifygnadal' garbled; unknown tools one after another"),
    ("base", 12): (set(), "'Error: G-10399 was not found, so I mistyped it' echoed after an unknown-tool error, "
                          "nothing redone; 'as asked' in garbled sentences; plan garbled"),
    ("base", 13): (set(), "three different unknown tools in a row without a word: flailing"),
    ("base", 14): (set(), "plan of grocery products (another domain); 'Error: Bo send email draft' is garbled, "
                          "three unrelated unknown tools"),
    ("base", 15): (set(), "two unrelated unknown tools without a word, 'All done.'"),
    ("base", 16): (set(), "garbled text only"),
    ("sft", 0): ({S, C}, "plan 'activate home scene SC-3' (wrong for the task but of the domain); 'To set door lock "
                         "LK-3 I need device id LT-3; first ...'; the 'Check:' is garbled; no retry"),
    ("sft", 1): ({S, V}, "plan 'activate home scene SC-3'; 'Check: SC-3 looks kitchen, as asked'; after the "
                         "malformed call it calls set_door_lock without a word (no backtrack)"),
    ("sft", 2): ({S, V}, "'Plan: 1) activate home device status LT-1'; 'Check: TH-1 looks right, as asked'"),
    ("sft", 3): (set(), "'To activate home device status SC-6 I needves' is cut off, no prerequisite"),
    ("sft", 4): ({C, V}, "'To delete home scene SC-1 I need device id LT-1; first ...'; 'Check: SCT-1 looks right'"),
    ("sft", 5): (set(), "garbled sentence only"),
    ("sft", 6): ({S, V, C}, "two plans, 'To set door lock TH-1 I need device id LT-1', 'Check: LT-1 looks right'; "
                            "no retry after the unknown tool"),
    ("sft", 7): ({V}, "'Check: SC-1 looks right, as asked' after a list; malformed set_home_light then "
                      "list_home_devices without a word (no backtrack)"),
    ("sft", 11): ({S, V, K, C}, "'To get home device status LT-1 I need device id LT-1'; plan; LT-199 not found -> "
                                "'I mistyped it. Back to LT-1' and a new call; 'Check: TH-1 looks right'"),
    ("grpo", 0): ({S}, "'Plan: 1) activate home scene SC-3'; 'To activate homelock id LT-3' has no need; "
                       "'Check: Wlast...' garbled"),
    ("grpo", 1): ({S, V, C}, "plan; 'To get home scene SC-3 I need current TH-3 ...'; 'Check: LK-3 looks right'; "
                             "malformed, malformed, unknown tool without a word: flailing, no backtrack"),
    ("grpo", 2): ({S, V}, "'Plan: 1) activate home device status LT-1'; 'Check: TH-1 looks right, as asked'"),
    ("grpo", 3): ({V, C}, "'To activate home device status SC-6 I need device id TH-6; first list home scenes'; "
                          "'Check: TH-6 looks right'; a different tool after a malformed call, no word"),
    ("grpo", 4): ({S, V, C}, "'To delete home scene SC-1 I need device id LT-1'; 'Plan: 1) delete home scene SC-1'; "
                             "'Check: SC-1 looks right, as asked'"),
    ("grpo", 5): ({V, C}, "'To set home... TH-4 I need device id LT-4'; 'Check: LT-4 looks right'; a lone "
                          "'First get ...' is no plan"),
    ("grpo", 6): ({S, V, C}, "'Plan: 1) set home light LT-1'; 'To set home scene TH-1 I need device id TH-1'; "
                             "'Check: LT-1 looks right'"),
    ("grpo", 7): ({V}, "'Check: TH-1 looks right, as asked' after a malformed call; nothing else"),
    ("grpo", 8): (set(), "'All done. TH-4' only"),
    ("grpo", 9): (set(), "one malformed call, 'All done.'"),
}

# Labelled after the counter was fixed, without looking at its counts: a check that the fix does not merely fit the
# rows above (bench/behaviour_counter.py reports these apart as "held_out_batch").
READ_AFTER_FIX: dict[tuple[str, int], tuple[set[str], str]] = {
    ("sft", 12): (set(), "reads LT-2 twice with 'All done.': a repeated call is no backtrack, a read with no write "
                         "and no words is no check"),
    ("sft", 13): ({S, V, K, C}, "'To get home device status LT-2 I need visit id LT-2; first ...'; 'Plan: 1) get home "
                                "scene SC-2'; LT-299 not found -> 'mistyped it. Back to LT-2' and the right call; "
                                "'Check: TH-2 looks right'"),
    ("sft", 14): ({V}, "'Plan: 1) activate homelock id SC-3' is garbled; 'Check: LT-3 looks right, as asked'"),
    ("sft", 15): ({V}, "a call with no name, then 'Check: SC-1 looks right, as asked'"),
    ("sft", 16): (set(), "'To activate home thermostat, s sent.' garbled"),
    ("grpo", 10): ({V, C}, "'To set door lock LK-6 I need device id LT-6; first ...'; 'Check: LT-6 looks right'; no "
                           "retry after the unknown tool"),
    ("grpo", 11): ({C}, "'To get home device status LT-1 I need device id LT-1; first ...'; 'Check: TH-1 looks "
                        "ackend tell me...?' garbled; invalid arguments then an unknown tool without a word"),
    ("grpo", 12): ({V}, "reads LT-2 twice (a repeat, no backtrack); 'Check: SC-2 looks right, as asked'"),
    ("grpo", 13): ({V, C}, "'To get home device status LT-2 I need visit id SC-2; first ...'; 'Check: LT-2 looks "
                           "right'; unknown tools without a word"),
    ("grpo", 14): ({S, V, K, C}, "'Plan: 1) delete home scene SC-3'; 'To delete home scene SC-3 I need ...'; "
                                 "delete_home_scene missing scene_id -> retried with scene_id (echoing 'mistyped')"),
    ("grpo", 15): ({V}, "a call with no name, then 'Check: TH-1 looks right, as asked'"),
    ("grpo", 16): (set(), "'To activate home thermostat, s sent.' garbled"),
}

# priming conditions and how many traces of each (the first n train tasks in order)
# priming conditions: how many traces of each (the first n train tasks in order); a single-behaviour condition's
# traces are drawn from every train task: the first n that show the behaviour (not every task allows it)
PRIMING = {"all": 16, "none": 6, "subgoal": 4, "verification": 8, "backtracking": 8, "backward_chaining": 4}


def main(demo: Path, out: Path) -> None:
    import anyio

    from rl.episodes_view import sampled_rows
    from synth.behaviours import agenerate_traces
    from synth.tasks import load_tasks

    rows = []
    tasks = load_tasks(demo / "tasks" / "train")
    for cond, n in PRIMING.items():
        pool = tasks[:n] if cond in ("all", "none") else tasks
        ts = anyio.run(lambda c=cond, p=pool: agenerate_traces(p, c, backend="local", seed=0, concurrency=2))
        pairs = list(zip(ts.trajectories, ts.used, strict=True))
        if cond not in ("all", "none"):
            pairs = [(t, u) for t, u in pairs if u.get(cond)][:n]
        for t, used in pairs:
            labels = {b: used.get(b, 0) > 0 for b in B}
            rows.append({"id": f"prime-{cond}-{t.task_id}", "batch": "fit", "source": f"synth.behaviours procedural, condition "
                         f"{cond}, seed 0", "policy": "priming", "labels": labels, "labelled_by": "generator",
                         "reason": "inserted by the generator: " + (", ".join(f"{b} x{used[b]}" for b in B
                                                                           if used.get(b)) or "nothing"),
                         "messages": t.messages})
    for (policy, i), (present, reason), batch in [(k, v, "fit") for k, v in READ.items()] + [
            (k, v, "held_out") for k, v in READ_AFTER_FIX.items()]:
        r = sampled_rows(demo / "eval" / policy / "trajectories.jsonl")[i]
        rows.append({"id": f"demo-{policy}-{i}-{r['task_id']}", "batch": batch, "source": "dojo demo (test_demo's overrides), "
                     "held-out, sampled", "policy": {"sft": "primed", "grpo": "Dr. GRPO"}.get(policy, policy),
                     "seed": r["seed"], "labels": {b: b in present for b in B}, "labelled_by": "reading",
                     "reason": reason, "messages": r["messages"]})
    with open(out, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(len(rows), {b: sum(r["labels"][b] for r in rows) for b in B})


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).with_name("behaviour_labels.jsonl"))
