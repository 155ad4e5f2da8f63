"""Do values keep their tokens between a tool output and the agent's answer? (issue 28, section 7 of
bench/results/reader_gpu.md). CPU only, no model run: the policy's tokenizer and the demo's tasks.

For every held-out read_report and lookup_act task of the demo (seed 0; `rl.demo.make_tasks`), the gold
episode is played (`synth.behaviours.generate_traces`, condition ``none``: the gold calls, the tool
outputs exactly as an episode renders them, `json.dumps(output, ensure_ascii=False)`), rendered with the
policy's chat template and tokenized with its tokenizer (rl/base/tokenizer.json, the same file as the
reader bases in .carry/bases). For each value the policy must copy (read_report: the task's
expected outputs, which the communication reward looks for in the agent's text; lookup_act: the string
arguments of the gold write that appear in an earlier gold output, e.g. the record id) it asks whether
the token ids that cover the value

- in a natural answer sentence ("The answer is {v}."),
- in the tool-call arguments JSON ({"key": "v"}, as the template's tojson writes it),
- in the priming traces' own final answers (condition ``all``, the demo's; its train tasks),

appear as one contiguous run inside the token ids of the tool outputs before it. ``core`` drops a
first token that starts before the value (a space or quote glued to the first letter run) and asks
the same of the rest.

    PYTHONPATH=. python bench/reader_tokens.py [--tasks-dir DIR] [--prime-sample 30] [--out FILE]

Prints one JSON line last (also written to --out).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# bench/ holds rewards.py and synth.py: keep the packages of those names importable
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
FAMILIES = ("read_report", "lookup_act")
# the fix to measure: Qwen2's regex with a letter run taking no preceding char (a space stays its own token)
SPLIT_SPACE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def sub_in(needle: list[int], hay: list[int]) -> bool:
    n = len(needle)
    return n > 0 and any(hay[i:i + n] == needle for i in range(len(hay) - n + 1))


class Tok:
    def __init__(self, base: Path, regex: str | None = None):
        from tokenizers import Tokenizer
        from transformers import AutoTokenizer

        self.hf = AutoTokenizer.from_pretrained(str(base))
        spec = json.loads((base / "tokenizer.json").read_text())
        if regex is not None:  # the same vocabulary and merges under another split regex (no retraining)
            spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = regex
        self.raw = Tokenizer.from_str(json.dumps(spec))

    def enc(self, text: str) -> tuple[list[int], list[tuple[int, int]], list[str]]:
        e = self.raw.encode(text, add_special_tokens=False)
        return e.ids, e.offsets, e.tokens

    def span(self, text: str, s: int, e: int) -> dict[str, Any]:
        """Tokens of `text` that overlap chars [s, e)."""
        ids, offs, toks = self.enc(text)
        idx = [i for i, (a, b) in enumerate(offs) if a < e and b > s]
        return {"ids": [ids[i] for i in idx], "tokens": [toks[i] for i in idx],
                "glued": bool(idx) and offs[idx[0]][0] < s, "clean_end": bool(idx) and offs[idx[-1]][1] == e}

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return self.hf.apply_chat_template(messages, tools=tools, tokenize=False)


def regions(text: str) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {"tool": [], "call": [], "answer": []}
    for m in re.finditer(r"<tool_response>\n(.*?)\n</tool_response>", text, re.S):
        out["tool"].append(m.span(1))
    for m in re.finditer(r"<tool_call>\n(.*?)\n</tool_call>", text, re.S):
        out["call"].append(m.span(1))
    for m in re.finditer(r"<\|im_start\|>assistant\n(.*?)(?=<tool_call>|<\|im_end\|>)", text, re.S):
        if m.group(1).strip():
            out["answer"].append(m.span(1))
    return out


def tool_ids(tok: Tok, text: str, spans: list[tuple[int, int]]) -> list[list[int]]:
    ids, offs, _ = tok.enc(text)
    return [[i for i, (a, b) in zip(ids, offs, strict=True) if a >= s and b <= e] for s, e in spans]


def copied_values(task: Any, traj: Any) -> list[tuple[str, Any]]:
    """(value as a string, the raw value) the policy must copy out of a tool output."""
    fam = family(task)
    if fam == "read_report":
        return [(str(v), v) for v in task.expected_outputs]
    outs = [m.get("content") or "" for m in traj.messages if m.get("role") == "tool"]
    vals: list[tuple[str, Any]] = []
    for a in task.gold_actions[1:]:
        for v in a.arguments.values():
            if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v) and any(
                    str(v) in o for o in outs[:1]) and str(v) not in task.instruction:
                vals.append((str(v), v))
    return vals + [(str(v), v) for v in task.expected_outputs if str(v) not in {x for x, _ in vals}]


def family(task: Any) -> str:
    from synth.task_families import family_of

    return family_of(task)


def check_value(tok: Tok, v: str, raw: Any, tids: list[int], key: str = "value",
                srcs: list[dict[str, Any]] = ()) -> dict[str, Any]:
    sent = f"The answer is {v}."
    a = tok.span(sent, len("The answer is "), len("The answer is ") + len(v))
    q = f'The answer is "{v}".'
    qa = tok.span(q, len('The answer is "'), len('The answer is "') + len(v))
    arg_text = json.dumps({key: raw}, ensure_ascii=False)
    s = arg_text.index(str(raw) if not isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)[1:-1])
    g = tok.span(arg_text, s, s + len(v))
    core = lambda d: d["ids"][1:] if d["glued"] else d["ids"]  # noqa: E731
    return {"value": v, "answer_tokens": a["tokens"], "arg_tokens": g["tokens"],
            "answer_in_tool": sub_in(a["ids"], tids), "arg_in_tool": sub_in(g["ids"], tids),
            "answer_core_in_tool": sub_in(core(a), tids), "arg_core_in_tool": sub_in(core(g), tids),
            "quoted_answer_tokens": qa["tokens"], "quoted_answer_in_tool": sub_in(qa["ids"], tids),
            "answer_glued": a["glued"], "arg_glued": g["glued"],
            "answer_same_at_source": same_at_source(a, srcs)[0], "answer_same_but_first": same_at_source(a, srcs)[1],
            "arg_same_at_source": same_at_source(g, srcs)[0],
            "quoted_answer_same_at_source": same_at_source(qa, srcs)[0]}


def tool_spans_of(tok: Tok, text: str, spans: list[tuple[int, int]], v: str) -> list[dict[str, Any]]:
    """The tool outputs' tokens at each occurrence of the value as a whole JSON string ("v"), else at any
    occurrence: what the policy copies from."""
    low, q = text.lower(), json.dumps(v, ensure_ascii=False).lower()
    hits = [(i + 1, i + 1 + len(v)) for s, e in spans for i in _finds(low, q, s, e)]
    hits = hits or [(i, i + len(v)) for s, e in spans for i in _finds(low, v.lower(), s, e)]
    return [tok.span(text, a, b) for a, b in hits]


def _finds(text: str, sub: str, s: int, e: int) -> list[int]:
    out, i = [], text.find(sub, s, e)
    while i >= 0:
        out.append(i)
        i = text.find(sub, i + 1, e)
    return out


def same_at_source(ctx: dict[str, Any], srcs: list[dict[str, Any]]) -> tuple[bool, bool]:
    """(the ids equal the tool output's ids at an occurrence of the value, equal but for the first token)."""
    exact = any(ctx["ids"] == d["ids"] for d in srcs)
    tail = any(len(ctx["ids"]) == len(d["ids"]) and ctx["ids"][1:] == d["ids"][1:] for d in srcs)
    return exact, tail


def category(same: bool, tail: bool, n: int) -> str:
    if same:
        return "same ids"
    if not tail:
        return "split differently (another token count)"
    return "one token, another id" if n == 1 else "first token differs, rest same"


def tool_tokens_of(tok: Tok, text: str, spans: list[tuple[int, int]], v: str) -> list[str]:
    """How the value is tokenized at its first occurrence in a tool output."""
    low = text.lower()
    for s, e in spans:
        i = low.find(v.lower(), s, e)
        if i >= 0:
            return tok.span(text, i, i + len(v))["tokens"]
    return []


def demo_tasks(tasks_dir: str, work: str) -> tuple[Any, str, str, list[Any], list[Any]]:
    """The demo's config (seed 0), sandbox backend, system prompt, train and held-out tasks: read from
    ``tasks_dir/tasks`` when given, else made by ``rl.demo.make_tasks`` in ``work``."""
    from rl.demo import make_tasks, sandbox_backend, train_config
    from rl.demo_config import DemoConfig
    from synth.tasks import load_tasks

    cfg = DemoConfig(out_dir=work)
    backend = sandbox_backend(cfg)
    if tasks_dir:
        train = load_tasks(Path(tasks_dir) / "tasks" / "train")
        held = load_tasks(Path(tasks_dir) / "tasks" / "held_out")
    else:
        train, held = make_tasks(cfg, Path(work), backend)
    return cfg, backend, train_config(cfg, Path(work)).rollout.system_prompt, train, held


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks-dir", default="", help="a demo folder whose tasks/ to reuse (else make_tasks)")
    ap.add_argument("--work", default="/tmp/reader_tokens")
    ap.add_argument("--prime-sample", type=int, default=30, help="read_report train tasks for the priming traces")
    ap.add_argument("--out", default=str(ROOT / "bench/results/reader_tokens_cpu.json"))
    args = ap.parse_args()
    t0 = time.time()

    from synth.behaviours import generate_traces

    cfg, backend, system_prompt, train, held = demo_tasks(args.tasks_dir, args.work)
    t_tasks = time.time() - t0
    base = ROOT / "rl" / "base"
    tok = Tok(base)

    held_fam = [t for t in held if family(t) in FAMILIES]
    rng = random.Random(0)
    prime_tasks = [t for t in train if family(t) == "read_report"]
    prime_tasks = rng.sample(prime_tasks, min(args.prime_sample, len(prime_tasks)))
    gold = generate_traces(held_fam, "none", backend=backend, system_prompt=system_prompt, seed=cfg.seed)
    primed = generate_traces(prime_tasks, cfg.condition, backend=backend, system_prompt=system_prompt,
                             seed=cfg.seed)
    t_traces = time.time() - t0 - t_tasks

    result: dict[str, Any] = {"tokenizer": "rl/base/tokenizer.json (= .carry/bases/base_*.tgz)",
                              "tasks_from": f"load_tasks({args.tasks_dir}/tasks)" if args.tasks_dir else
                              "rl.demo.make_tasks(DemoConfig(), seed 0)",
                              "tasks": {f: sum(family(t) == f for t in held_fam) for f in FAMILIES},
                              "families": {}, "examples": {}}
    result["families"], result["examples"] = held_out_stats(tok, gold, held_fam)
    alt = Tok(base, SPLIT_SPACE_REGEX)
    fams, _ = held_out_stats(alt, gold, held_fam)
    result["split_space_variant"] = {
        "regex": SPLIT_SPACE_REGEX, "note": "same vocab/merges, no retraining: what the split alone changes",
        "families": {f: {k: v for k, v in d.items() if k in ("answer_ids_equal_tool_ids_at_value", "answer_vs_source",
                                                              "arg_ids_equal_tool_ids_at_value")}
                     for f, d in fams.items()},
        "tokens_per_gold_episode": token_growth(tok, alt, gold)}
    pr = priming_stats(tok, primed, prime_tasks)
    result["priming_read_report"] = pr
    result["seconds"] = {"tasks": round(t_tasks, 1), "traces": round(t_traces, 1),
                         "total": round(time.time() - t0, 1)}
    line = json.dumps(result, ensure_ascii=False)
    Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")
    print(line)


def token_growth(tok: Tok, alt: Tok, trajs: list[Any]) -> dict[str, float]:
    """Mean tokens of a rendered gold episode under each split (what the fix costs in context)."""
    from synth.sft_data import trl_messages

    a = b = 0
    for traj in trajs:
        msgs = trl_messages(traj)
        if msgs is None:
            continue
        text = tok.render(msgs, traj.tools)
        a += len(tok.enc(text)[0])
        b += len(alt.enc(text)[0])
    n = max(1, len(trajs))
    return {"shipped": round(a / n, 1), "split_space": round(b / n, 1), "ratio": round(b / max(a, 1), 3)}


def render_trajectory(tok: Tok, traj: Any) -> tuple[str, dict[str, Any], list[int]] | None:
    """The episode's text as the policy sees it, its regions, and the token ids of its tool outputs
    (None for a trajectory with no trainable messages)."""
    from synth.sft_data import trl_messages

    msgs = trl_messages(traj)
    if msgs is None:
        return None
    text = tok.render(msgs, traj.tools)
    reg = regions(text)
    return text, reg, [i for ids in tool_ids(tok, text, reg["tool"]) for i in ids]


def held_out_stats(tok: Tok, gold: list[Any], held_fam: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    families: dict[str, Any] = {}
    examples: dict[str, Any] = {}
    rows: dict[str, list[dict[str, Any]]] = {f: [] for f in FAMILIES}
    by_id = {t.id: t for t in held_fam}
    for traj in gold:
        task = by_id[traj.task_id]
        if (rendered := render_trajectory(tok, traj)) is None:
            continue
        text, reg, tids = rendered
        key_of = {str(v): k for a in task.gold_actions[1:] for k, v in a.arguments.items()}
        for v, raw in copied_values(task, traj):
            in_out = any(v.lower() in text[s:e].lower() for s, e in reg["tool"])
            r = check_value(tok, v, raw, tids, key_of.get(v, "value"), tool_spans_of(tok, text, reg["tool"], v))
            r.update(task=task.id, in_tool_text=in_out, tool_tokens=tool_tokens_of(tok, text, reg["tool"], v))
            rows[family(task)].append(r)

    for f, rs in rows.items():
        rs_in = [r for r in rs if r["in_tool_text"]]
        n = len(rs_in)
        share = lambda k, rs_in=rs_in, n=n: round(sum(r[k] for r in rs_in) / n, 3) if n else None  # noqa: E731
        families[f] = {
            "values": len(rs), "values_in_tool_text": n,
            "answer_ids_equal_tool_ids_at_value": share("answer_same_at_source"),
            "answer_ids_equal_but_first_token": share("answer_same_but_first"),
            "arg_ids_equal_tool_ids_at_value": share("arg_same_at_source"),
            "quoted_answer_ids_equal_tool_ids_at_value": share("quoted_answer_same_at_source"),
            "single_token_values_in_answer": sum(len(r["answer_tokens"]) == 1 for r in rs_in),
            "answer_ids_contiguous_in_tool_ids": share("answer_in_tool"),
            "arg_ids_contiguous_in_tool_ids": share("arg_in_tool"),
            "answer_ids_without_glued_first_token": share("answer_core_in_tool"),
            "arg_ids_without_glued_first_token": share("arg_core_in_tool"),
            "answer_first_token_glued": share("answer_glued"),
            "quoted_answer_ids_contiguous_in_tool_ids": share("quoted_answer_in_tool"),
            "answer_vs_source": dict(Counter(category(r["answer_same_at_source"], r["answer_same_but_first"],
                                                      len(r["answer_tokens"])) for r in rs_in)),
            "value_kinds": dict(Counter("number" if re.fullmatch(r"[\d.,-]+", r["value"]) else
                                        "has letters" for r in rs_in)),
        }
        mism = [r for r in rs_in if not r["answer_same_at_source"]]
        mism = sorted(mism, key=lambda r: -len(r["answer_tokens"]) * (not r["answer_same_but_first"]))
        examples[f] = [{k: r[k] for k in ("value", "tool_tokens", "answer_tokens", "arg_tokens",
                                                     "arg_in_tool")} for r in mism[:4]]
        match = [r for r in rs_in if r["answer_same_at_source"] or r["answer_in_tool"]]
        examples[f + "_matching"] = [{k: r[k] for k in ("value", "tool_tokens", "answer_tokens",
                                                                                "answer_same_at_source")}
                                               for r in match[:3]]

    return families, examples


def priming_stats(tok: Tok, primed: list[Any], prime_tasks: list[Any]) -> dict[str, Any]:
    """The priming traces (the demo's condition, its read_report train tasks): is the value said, and how."""
    pr = {"traces": len(primed), "values": 0, "said_in_final_answer": 0, "said_anywhere": 0,
          "said_ids_contiguous_in_tool_ids": 0, "said_ids_equal_tool_ids_at_value": 0, "said_ids_without_glued_first_token": 0,
          "char_before_value": Counter(), "said_vs_source": Counter(), "examples": []}
    by_pid = {t.id: t for t in prime_tasks}
    for traj in primed:
        task = by_pid[traj.task_id]
        if (rendered := render_trajectory(tok, traj)) is None:
            continue
        text, reg, tids = rendered
        final = reg["answer"][-1] if reg["answer"] else (0, 0)
        for v in map(str, task.expected_outputs):
            pr["values"] += 1
            said = [(s, e) for s, e in reg["answer"] if v.lower() in text[s:e].lower()]
            pr["said_anywhere"] += bool(said)
            i = text.lower().find(v.lower(), final[0], final[1])
            if i < 0:
                continue
            pr["said_in_final_answer"] += 1
            d = tok.span(text, i, i + len(v))
            pr["char_before_value"][repr(text[i - 1])] += 1
            pr["said_ids_contiguous_in_tool_ids"] += sub_in(d["ids"], tids)
            ok, tail = same_at_source(d, tool_spans_of(tok, text, reg["tool"], v))
            pr["said_vs_source"][category(ok, tail, len(d["ids"]))] += 1
            pr["said_ids_equal_tool_ids_at_value"] += ok
            pr["said_ids_without_glued_first_token"] += sub_in(d["ids"][1:] if d["glued"] else d["ids"], tids)
            if len(pr["examples"]) < 4 and not ok:
                pr["examples"].append({"value": v, "answer": text[final[0]:final[1]][:200],
                                       "answer_tokens": d["tokens"],
                                       "tool_tokens": tool_tokens_of(tok, text, reg["tool"], v)})
    pr["char_before_value"] = dict(pr["char_before_value"])
    pr["said_vs_source"] = dict(pr["said_vs_source"])
    return pr


if __name__ == "__main__":
    sys.exit(main())
