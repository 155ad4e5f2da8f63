"""Reading fails where? Choosing the value, or writing it out (issue 28, section 9 of
bench/results/reader_gpu.md). CPU, teacher-forced, no sampling.

Every held-out ``read_report`` task of the demo (seed 0, ``rl.demo.make_tasks``) is played as its gold
episode (``synth.behaviours.generate_traces``, condition ``none``), with the final answer plain
(``All done. Porch light, lock``) or quoted as the tool output writes it (``All done. "Porch light",
"lock"``: the same token ids as the output, bench/reader_tokens.py), rendered with the model's chat
template. At each token of each reported value in the final answer, the model's argmax given everything
before it (the tool output included) is compared with the gold token:

- forms: ``plain``, ``quoted`` and ``keyed`` (``"name": "Porch light"``, synth.behaviours.ANSWER_STYLES);
- ``first``: the value's first token, i.e. which of the output's strings is said;
- ``rest``: the value's other tokens, given its first (copying a string once it is chosen);
- ``whole``: every token of the value right;
- a wrong first token is sorted by its text (a leading space or quote dropped, case ignored) into
  ``value_other_tokens`` (it starts the right value, tokenized otherwise, e.g. ``Living`` for ``L iving``),
  ``another_output_string`` (it starts another string of the tool outputs, a key or another field's or
  record's value: a wrong choice) or ``not_in_output`` (no output string starts so: not read at all);
  ``candidates`` is the mean number of distinct strings the outputs hold (1 / candidates is what a
  uniform pick among them would get right);
- ``upstream``: the same argmax hits at the two choices before the copy: ``read_id``, the record id the
  first tool call names (copied from the user's message), and ``key`` (keyed answers), the key said before
  each value (which field the user asked for).
- ``lookup``: on the held-out ``lookup_act`` tasks, the record id the write names, picked from the listing's
  records (every token right, and what a wrong one started: ``another_record`` or ``not_in_output``).

    PYTHONPATH=. python bench/reader_choice.py --models /tmp/bases/0.66M,/tmp/bases/4M,rl/base \\
        [--tasks-dir DEMO_OUT] [--out bench/results/reader_choice_cpu.json]

DEMO_OUT is a folder whose ``tasks/`` a demo run (or ``rl.demo.make_tasks``) wrote; without it the tasks
are made here (~4 min). One JSON line last.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# bench/ holds rewards.py and synth.py: keep the packages of those names importable
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TOOL = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)
ANSWER = re.compile(r"<\|im_start\|>assistant\n(.*?)(?=<tool_call>|<\|im_end\|>)", re.S)
JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)+)"')


def value_spans(text: str, values: list[str]) -> list[tuple[int, int]]:
    """Where each value stands in the episode's LAST assistant answer (the report), as char spans."""
    answers = [m.span(1) for m in ANSWER.finditer(text) if m.group(1).strip()]
    if not answers:
        return []
    s, e = answers[-1]
    low, out = text.lower(), []
    for v in values:
        i = low.find(v.lower(), s, e)
        if i >= 0:
            out.append((i, i + len(v)))
    return out


def miss_kind(said: str, value: str, strings: set[str]) -> str:
    """What a wrong first token started: the right value in other tokens, another output string, neither."""
    head = said.lstrip(' "').lower()
    if head and value.lower().startswith(head):
        return "value_other_tokens"
    if head and any(x.startswith(head) for x in strings if x != value.lower()):
        return "another_output_string"
    return "not_in_output"


def predict(model: Any, tok: Any, text: str) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """(token ids, their char offsets, the model's argmax after each token)."""
    import torch

    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offs = enc["input_ids"], enc["offset_mapping"]
    with torch.no_grad():
        pred = model(input_ids=torch.tensor([ids])).logits[0].argmax(-1).tolist()
    return ids, offs, pred


def span_ok(ids: list[int], offs: list[tuple[int, int]], pred: list[int], s: int, e: int) -> list[bool]:
    """Whether the argmax before each token overlapping chars [s, e) is that token."""
    return [pred[i - 1] == ids[i] for i, (a, b) in enumerate(offs) if a < e and b > s and i > 0]


READ_CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)
KEY_BEFORE = re.compile(r'"([^"]+)": "?$')


def user_text(text: str, *, tool_results: bool) -> str:
    """The user turns of a rendered chat, joined; with ``tool_results``, also the user turns that carry them."""
    turns = (m.group(1) for m in re.finditer(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", text, re.S))
    return " ".join(t for t in turns if tool_results or "<tool_response>" not in t)


def score_upstream(text: str, values: list[str], ids: list[int], offs: list[tuple[int, int]],
                   pred: list[int]) -> dict[str, list[list[bool]]]:
    """The two choices before a value is copied: ``read_id``, each string argument of the episode's first
    tool call that the user's messages hold (the record to read), and ``key``, in a keyed answer the key
    before each reported value (which field to report). Per span, the per-token argmax hits."""
    out: dict[str, list[list[bool]]] = {"read_id": [], "key": []}
    user = user_text(text, tool_results=True)
    call = READ_CALL.search(text, max(0, text.find("<|im_start|>assistant")))  # not the system prompt's example
    if call:
        for m in JSON_STRING.finditer(call.group(1)):
            v = m.group(1)
            if len(v) > 1 and v in user and not call.group(1)[m.end():].lstrip().startswith(":"):
                a = call.start(1) + m.start(1)
                out["read_id"].append(span_ok(ids, offs, pred, a, a + len(v)))
    for s, _e in value_spans(text, values):
        k = KEY_BEFORE.search(text[max(0, s - 60):s])
        if k:
            a = max(0, s - 60) + k.start(1)
            out["key"].append(span_ok(ids, offs, pred, a, a + len(k.group(1))))
    return out


def score_lookup(tok: Any, text: str, ids: list[int], offs: list[tuple[int, int]],
                 pred: list[int]) -> list[dict[str, Any]]:
    """A look-up's choice (lookup_act): each string argument of the second tool call (the write) that the first
    tool output holds under the same key and the user's messages do not: the record's id, picked from a list.
    Per id: every token right (``whole``), how many values the list holds under its key (``candidates``), and
    what a wrong id started (the gold prefix up to the first wrong token, then the argmax there): the right id
    in other tokens, ``another_record``'s id of the list, or one ``not_in_output``."""
    start = max(0, text.find("<|im_start|>assistant"))  # not the system prompt's example
    calls, outs = list(READ_CALL.finditer(text, start)), list(TOOL.finditer(text, start))
    if len(calls) < 2 or not outs:
        return []
    user = user_text(text, tool_results=False)
    listed, args = outs[0].group(1), calls[1].group(1)
    out = []
    for m in re.finditer(r'"([^"]+)": "((?:[^"\\]|\\.)+)"', args):
        key, v = m.group(1), m.group(2)
        same_key = set(re.findall(rf'"{re.escape(key)}": "([^"]+)"', listed))
        if v not in same_key or v in user:
            continue
        a = calls[1].start(1) + m.start(2)
        e = a + len(v)
        ok = span_ok(ids, offs, pred, a, e)
        miss = None
        if not all(ok):
            j = [i for i, (x, y) in enumerate(offs) if x < e and y > a and i > 0][ok.index(False)]
            said = (text[a:max(a, offs[j][0])] + tok.decode([pred[j - 1]])).lstrip(' "')
            miss = ("value_other_tokens" if said and v.startswith(said) else
                    "another_record" if said and any(x.startswith(said) for x in same_key - {v}) else "not_in_output")
        out.append({"whole": all(ok), "candidates": len(same_key), "miss": miss, "value": v})
    return out


def summarise_lookup(records: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(records)
    misses = [r["miss"] for r in records if r["miss"]]
    return {"ids": n, "whole": round(sum(r["whole"] for r in records) / n, 4) if n else None,
            "misses": {k: misses.count(k) for k in ("value_other_tokens", "another_record", "not_in_output")},
            "candidates": round(sum(r["candidates"] for r in records) / n, 1) if n else None}


def score_episode(model: Any, tok: Any, text: str, values: list[str],
                  predicted: tuple[list[int], list[tuple[int, int]], list[int]] | None = None) -> list[dict[str, Any]]:
    """Teacher-forced argmax at each reported value's tokens; one record per value found in the answer."""
    ids, offs, pred = predicted or predict(model, tok, text)
    strings = {m.group(1).lower() for a, b in (m0.span(1) for m0 in TOOL.finditer(text))
               for m in JSON_STRING.finditer(text[a:b])}
    out = []
    for s, e in value_spans(text, values):
        pos = [i for i, (a, b) in enumerate(offs) if a < e and b > s and i > 0]
        if not pos:
            continue
        ok = span_ok(ids, offs, pred, s, e)
        said = tok.decode([pred[pos[0] - 1]])
        value = text[s:e]
        out.append({"first": ok[0], "rest": ok[1:], "whole": all(ok), "candidates": len(strings),
                    "miss": None if ok[0] else miss_kind(said, value, strings), "value": value, "said_first": said})
    return out


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(records)
    rest = [r for rec in records for r in rec["rest"]]
    misses = [r["miss"] for r in records if r["miss"]]
    return {"values": n,
            "first": round(sum(r["first"] for r in records) / n, 4) if n else None,
            "rest": round(sum(rest) / len(rest), 4) if rest else None,
            "whole": round(sum(r["whole"] for r in records) / n, 4) if n else None,
            "first_misses": {k: misses.count(k) for k in ("value_other_tokens", "another_output_string",
                                                           "not_in_output")},
            "candidates": round(sum(r["candidates"] for r in records) / n, 1) if n else None}


def _reader_tokens():
    """bench/reader_tokens.py (a sibling script, not a package): its demo_tasks."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_reader_tokens", Path(__file__).with_name("reader_tokens.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def domain_tasks(domain: str, n: int, seed: int = 7) -> list[Any]:
    """``n`` read_report tasks of a zoo domain, quoted as the demo's are (seed 7: no corpus part's seed,
    rl.corpus gives its domains 1000 + i), to ask whether a base copies in a domain its corpus holds."""
    from synth.task_families import synthesize_family_tasks

    return synthesize_family_tasks({"read_report": n}, seed=seed, domains=[domain], rounds=3,
                                   quote_values=True, quote_fields=True)["read_report"]


def score(paths: list[str], tasks: list[Any], backend: str, system_prompt: str, seed: int,
          examples: int, lookups: list[Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each model's teacher-forced hits on the gold episodes of ``tasks`` in the three answer forms, and the
    first ``examples`` misses of each model and form. Given ``lookups`` (lookup_act tasks), each model's pick of
    the record id on their gold episodes too, as its ``lookup`` (each model loaded once)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from synth.behaviours import generate_traces
    from synth.sft_data import trl_messages

    def texts(tok: Any, trajs: list[Any]) -> list[str | None]:
        return [None if (m := trl_messages(t)) is None else tok.apply_chat_template(m, tools=t.tools, tokenize=False)
                for t in trajs]

    gold = {form: generate_traces(tasks, "none", backend=backend, system_prompt=system_prompt, seed=seed,
                                  answers=form) for form in ("plain", "quoted", "keyed")}
    gold_lookups = generate_traces(lookups, "none", backend=backend, system_prompt=system_prompt, seed=seed,
                                   answers="keyed") if lookups else []
    models: dict[str, Any] = {}
    misses: dict[str, Any] = {}
    for path in paths:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        res: dict[str, Any] = {"parameters": sum(p.numel() for p in model.parameters())}
        for form, trajs in gold.items():
            records, up = [], {"read_id": [], "key": []}
            for task, text in zip(tasks, texts(tok, trajs), strict=True):
                if text is None:
                    continue
                values = [str(v) for v in task.expected_outputs]
                predicted = predict(model, tok, text)
                records += score_episode(model, tok, text, values, predicted)
                for k, spans in score_upstream(text, values, *predicted).items():
                    up[k] += spans
            res[form] = summarise(records)
            res[form]["upstream"] = {k: {"spans": len(v), "first": round(sum(x[0] for x in v if x) / len(v), 4),
                                         "whole": round(sum(all(x) for x in v) / len(v), 4)}
                                     for k, v in up.items() if v}
            misses[f"{Path(path).name}/{form}"] = [
                {"value": r["value"], "said_first": r["said_first"], "miss": r["miss"]}
                for r in records if r["miss"]][:examples]
        if lookups is not None:
            picks = [r for text in texts(tok, gold_lookups) if text is not None
                     for r in score_lookup(tok, text, *predict(model, tok, text))]
            res["lookup"] = summarise_lookup(picks)
        models[str(path)] = res
        print(f"[reader_choice] {path}: {json.dumps(res)}", file=sys.stderr, flush=True)
    return models, misses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="comma-separated model folders (a base or a primed policy)")
    ap.add_argument("--tasks-dir", default="", help="a folder with tasks/ from a demo run (else made here)")
    ap.add_argument("--domains", default="", help="comma-separated zoo domains whose read_report tasks are scored "
                                                  "too (section 28 of bench/results/reader_gpu.md), beside the demo's")
    ap.add_argument("--domain-tasks", type=int, default=30, help="read_report tasks per --domains domain (at most)")
    ap.add_argument("--work", default="/tmp/reader_choice")
    ap.add_argument("--examples", type=int, default=6)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    t0 = time.time()

    from synth.task_families import family_of

    cfg, backend, system_prompt, _train, held = _reader_tokens().demo_tasks(args.tasks_dir, args.work)
    tasks = [t for t in held if family_of(t) == "read_report"]
    paths = [p for p in args.models.split(",") if p]
    lookups = [t for t in held if family_of(t) == "lookup_act"]
    models, examples = score(paths, tasks, backend, system_prompt, cfg.seed, args.examples, lookups)
    picks = {p: m.pop("lookup") for p, m in models.items()}
    result: dict[str, Any] = {"bench": "reader_choice", "tasks": len(tasks),
                              "tasks_from": args.tasks_dir or "rl.demo.make_tasks(DemoConfig(), seed 0)",
                              "models": models, "examples": examples, "lookup_tasks": len(lookups), "lookup": picks}
    if args.domains:
        result["domains"] = {}
        for d in [d for d in args.domains.split(",") if d]:
            dtasks = domain_tasks(d, args.domain_tasks)
            dmodels, _ = score(paths, dtasks, backend, system_prompt, cfg.seed, 0)
            result["domains"][d] = {"tasks": len(dtasks), "models": dmodels}
    result["seconds"] = round(time.time() - t0, 1)
    if args.out:
        Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
