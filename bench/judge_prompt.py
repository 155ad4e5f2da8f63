"""Benchmark the judge's prompt: its size and build time under the prompt budget, and the cost of escaping.

    python bench/judge_prompt.py [--quick]

No model, no sandbox: it times rewards.judge.RubricJudge.messages (render, escape, budget) on
* long: a transcript of --steps tool results of 4,000 characters (issue 22: 400 of them made a
  1.68M-character prompt): prompt_chars and build_ms with the budget (MAX_PROMPT_CHARS), against the
  baseline measured in the same run, the same transcript rendered without a budget;
* escape: escape_data on ~1 MB of JSON text full of characters it must escape (TAG characters,
  variation selectors, bidi controls, brackets, lone surrogates): escape_mb_per_s with today's
  escape table, against the baseline of the table before issue 22 (rebuilt here from its definition).
Progress goes to stderr; the LAST line on stdout is one JSON object with every number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from rich.console import Console

import _common  # noqa: E402  (first: fixes sys.path)

console = Console(stderr=True)

# the escape set before issue 22: look-alikes, C1 controls, zero-width/bidi, separators
_OLD = ("<>&\uff1c\uff1e\ufe64\ufe65\u2039\u203a\u3008\u3009\u27e8\u27e9\u2329\u232a\u276c\u276d\u29fc\u29fd"
        "\u02c2\u02c3\u1438\u1433\uff06")
_OLD_INVISIBLE = ([chr(c) for c in range(0x80, 0xA0)] + [chr(c) for c in range(0x200B, 0x2010)]
                  + [chr(c) for c in range(0x2028, 0x202F)] + [chr(c) for c in range(0x2060, 0x2070)]
                  + ["\ufeff", "\u00ad", "\u061c", "\u180e"])
OLD_ESCAPES = {ord(c): f"\\u{ord(c):04x}" for c in list(_OLD) + _OLD_INVISIBLE}


def timed(fn: Any, repeat: int) -> tuple[Any, float]:
    """(last result, median milliseconds of `repeat` runs)."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1000)
    return out, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--steps", type=int, default=400, help="tool results of 4,000 characters in the long transcript")
    args = ap.parse_args()
    repeat = 3 if args.quick else 10

    from rewards.judge import MAX_PROMPT_CHARS, RubricJudge, render_transcript, rubric_criteria
    from rewards.judge_transcript import escape_data
    from synth.episode import Trajectory
    from synth.llm import LLMClient, LLMConfig
    from synth.tasks import Rubric, Task, UserScenario

    task = Task(id="bench", domain="retail_orders", seed=0, instruction="Refund order O-1.", persona="p",
                user_scenario=UserScenario(persona="p", reason_for_call="r", task_instructions="-"),
                gold_actions=[], expected_outputs=[], rubric=Rubric(success_criteria=["the refund is made"]),
                tools=["get_order"], difficulty="easy")
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Please refund order O-1."}]
    for i in range(args.steps):
        msgs += [{"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {
                     "name": "get_order", "arguments": json.dumps({"order_id": f"O-{i}"})}}]},
                 {"role": "tool", "tool_call_id": f"c{i}", "name": "get_order", "content": f"{i:04d}" + "x" * 3996}]
    msgs.append({"role": "assistant", "content": "Done."})
    traj = Trajectory(task_id="bench", domain="retail_orders", messages=msgs)
    judge = RubricJudge(LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1", model="none")))
    criteria = rubric_criteria(task)
    result: dict[str, Any] = {"quick": args.quick, "steps": len(msgs), "max_prompt_chars": MAX_PROMPT_CHARS}

    console.print(f"[long] {len(msgs)} steps, budget {MAX_PROMPT_CHARS} characters")
    prompt, ms = timed(lambda: judge.messages(task, traj), repeat)
    result["prompt_chars"] = sum(len(m["content"]) for m in prompt)
    result["build_ms"] = round(ms, 2)
    whole, base_ms = timed(lambda: judge._messages(task, criteria, render_transcript(msgs, max_step_chars=4000)), repeat)
    result["baseline_prompt_chars"] = sum(len(m["content"]) for m in whole)
    result["baseline_build_ms"] = round(base_ms, 2)
    result["prompt_size_ratio"] = round(result["prompt_chars"] / result["baseline_prompt_chars"], 4)

    hostile = ("\U000e0073\U000e0063\ufe0f\U000e0100\u202e\u200b\u276e\u276f\u2770\u2771<>&\ud800 plain text " * 20)
    text = json.dumps([{"content": hostile}] * 400, ensure_ascii=False)
    mb = len(text.encode("utf-8", "surrogatepass")) / 1e6
    console.print(f"[escape] {mb:.2f} MB of JSON text")
    _, new_ms = timed(lambda: escape_data(text), repeat)
    _, old_ms = timed(lambda: text.translate(OLD_ESCAPES), repeat)
    result["escape_mb_per_s"] = round(mb / (new_ms / 1000), 1)
    result["baseline_escape_mb_per_s"] = round(mb / (old_ms / 1000), 1)
    leaked = [c for c in "\U000e0073\ufe0f\u276e\ud800" if c in text.translate(OLD_ESCAPES)]
    result["baseline_leaked_characters"] = len(leaked)
    result["leaked_characters"] = len([c for c in "\U000e0073\ufe0f\u276e\ud800" if c in escape_data(text)])
    console.print(f"prompt {result['baseline_prompt_chars']} -> {result['prompt_chars']} characters; escape "
                  f"{result['baseline_escape_mb_per_s']} -> {result['escape_mb_per_s']} MB/s")
    _common.emit(result, head=("quick", "prompt_chars", "baseline_prompt_chars"))


if __name__ == "__main__":
    main()
