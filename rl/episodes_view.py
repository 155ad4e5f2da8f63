"""Held-out episodes side by side for the demo report (issue 33 #1).

Per task family (the grouping the report's per-family table uses: a multi-step family, or the gold tool
of a single-action task) one held-out task, played by the base, the primed and the Dr. GRPO policy
(one sampled episode each, its seed shown), rendered as chat columns: the user's turns, the agent's
messages, each tool call with its arguments, each tool output (long ones folded), and the reward with
the check behind it (each reward component passed or failed, and each asked field's verdict:
`type: said "lock", expected "light" ✗`).

Which task a family shows (`pick_episodes`): one the primed policy failed and Dr. GRPO solved if there
is one (the episodes shown are then a failed primed one and a solved Dr. GRPO one), else any other;
one task where both fail is shown as well (a family's own pick when it is one, else an extra task).

    picks = pick_episodes(tasks, {"base": rows, "sft": rows, "grpo": rows})
    html_text = render_episodes(picks)
    write_episodes_jsonl(picks, out / "episodes.jsonl")
    html_text = episodes_section(out)   # all three from a demo's folder: eval/*/trajectories.jsonl
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

POLICIES: tuple[tuple[str, str], ...] = (("base", "base"), ("sft", "primed"), ("grpo", "Dr. GRPO"))
FOLD_CHARS = 240     # tool outputs (and system prompts) longer than this, or of more lines, are folded
FOLD_LINES = 6

PRIMED_FAILED_GRPO_SOLVED = "primed failed, Dr. GRPO solved"
BOTH_FAIL = "primed and Dr. GRPO both fail"
OTHER = "other"


class Pick(BaseModel):
    family: str
    task_id: str
    why: str                          # one of the three labels above, or e.g. "both solved"
    instruction: str = ""
    episodes: dict[str, dict[str, Any] | None]   # policy key -> trajectory row (None: no episode)
    fields: dict[str, list[str]] = {}            # policy key -> each asked field's verdict line


def field_lines(task: Any, row: Mapping[str, Any] | None) -> list[str]:
    """Each asked field's verdict in an episode, as the communication reward decides it
    (rewards.field_answers: `type: said "lock", expected "light" ✗`); none for a task that asks no field."""
    if row is None or not hasattr(task, "expected_outputs"):
        return []
    from rewards.field_answers import field_verdicts

    return [c.line() for c in field_verdicts(task, row.get("messages") or [])]


def _solved(row: Mapping[str, Any]) -> bool:
    if "solved" in row:
        return bool(row["solved"])
    from rl.rollout import solved

    return solved(row.get("components") or {})


def sampled_rows(path: Path) -> list[dict[str, Any]]:
    """The sampled episodes of an eval folder's trajectories.jsonl: it holds the sampled episodes (summary's
    `samples` x `tasks`), then the greedy ones; without a summary every row counts as sampled."""
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    summary = path.parent / "summary.json"
    if summary.is_file():
        s = json.loads(summary.read_text())
        if isinstance(s.get("samples"), int) and isinstance(s.get("tasks"), int):
            return rows[: s["samples"] * s["tasks"]]
    return rows


def _label(primed: Sequence[dict[str, Any]], grpo: Sequence[dict[str, Any]]) -> str:
    p_fail = any(not _solved(r) for r in primed)
    g_ok = any(_solved(r) for r in grpo)
    if p_fail and g_ok:
        return PRIMED_FAILED_GRPO_SOLVED
    if primed and grpo and p_fail and not g_ok:
        return BOTH_FAIL
    if primed and grpo and not p_fail and g_ok:
        return "both solved"
    if primed and grpo:
        return "primed solved, Dr. GRPO failed"
    return OTHER


_RANK = {PRIMED_FAILED_GRPO_SOLVED: 0, "both solved": 1, "primed solved, Dr. GRPO failed": 2, BOTH_FAIL: 3, OTHER: 4}


def _choose(rows: Sequence[dict[str, Any]], want: bool | None) -> dict[str, Any] | None:
    """The first episode solved (want=True) / failed (False) / any (None), else the first."""
    if not rows:
        return None
    return next((r for r in rows if want is None or _solved(r) == want), rows[0])


def _pick(family: str, task: Any, eps: Mapping[str, Sequence[dict[str, Any]]], why: str) -> Pick:
    want = {PRIMED_FAILED_GRPO_SOLVED: {"sft": False, "grpo": True}, BOTH_FAIL: {"sft": False, "grpo": False}}
    w = want.get(why, {})
    episodes = {k: _choose(eps.get(k, []), w.get(k)) for k, _ in POLICIES}
    return Pick(family=family, task_id=task.id, why=why, instruction=getattr(task, "instruction", "") or "",
                episodes=episodes, fields={k: field_lines(task, r) for k, r in episodes.items() if r is not None})


def pick_episodes(tasks: Sequence[Any], rows: Mapping[str, Sequence[dict[str, Any]]],
                  family: Callable[[Any], str] | None = None) -> list[Pick]:
    """One task per family (primed failed & Dr. GRPO solved first), plus one both-fail task when no family's
    pick is one. `rows`: sampled trajectory rows per policy key (base, sft, grpo); `family`: a task's family
    (default synth.task_families.family_of). Families in the order of their first task."""
    if family is None:
        from synth.task_families import family_of as family
    by_task: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for key, rs in rows.items():
        for r in rs:
            by_task.setdefault(str(r.get("task_id")), {}).setdefault(key, []).append(r)
    fams: dict[str, list[Any]] = {}
    for t in tasks:
        if t.id in by_task:
            fams.setdefault(family(t), []).append(t)
    picks: list[Pick] = []
    both_fail: list[tuple[str, Any]] = []
    for fam, ts in fams.items():
        labelled = [(_label(by_task[t.id].get("sft", []), by_task[t.id].get("grpo", [])), i, t)
                    for i, t in enumerate(ts)]
        why, _, best = min(labelled, key=lambda x: (_RANK[x[0]], x[1]))
        picks.append(_pick(fam, best, by_task[best.id], why))
        both_fail += [(fam, t) for w, _, t in labelled if w == BOTH_FAIL and t is not best]
    if both_fail and not any(p.why == BOTH_FAIL for p in picks):
        fam, t = both_fail[0]
        picks.append(_pick(fam, t, by_task[t.id], BOTH_FAIL))
    return picks


# ============================================================================== HTML
def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fold(text: str, summary: str) -> str:
    """Text in a <pre>, in a closed <details> when long."""
    body = f"<pre>{_e(text)}</pre>"
    if len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES:
        return f"<details><summary>{_e(summary)} ({len(text)} characters)</summary>{body}</details>"
    return body


def _args(raw: Any) -> str:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return raw
    return json.dumps(raw, ensure_ascii=False, sort_keys=True)


def _components(row: Mapping[str, Any]) -> str:
    items = []
    for k, v in (row.get("components") or {}).items():
        if v is None:
            items.append(f"<li class=na>{_e(k)}: not scored</li>")
        else:
            ok = float(v) >= 1.0
            items.append(f"<li class={'pass' if ok else 'fail'}>{'&#10003;' if ok else '&#10007;'} {_e(k)}: "
                         f"{'passed' if ok else 'failed'} ({float(v):.2f})</li>")
    return f"<ul class=checks>{''.join(items)}</ul>" if items else ""


def _fields(lines: Sequence[str]) -> str:
    items = "".join(f"<li class={'pass' if x.endswith('✓') else 'fail'}>{_e(x)}</li>" for x in lines)
    return f"<ul class=checks>{items}</ul>" if items else ""


def render_chat(row: Mapping[str, Any] | None, fields: Sequence[str] = ()) -> str:
    """One episode as chat bubbles with its outcome first (and each asked field's verdict, `fields`)."""
    if row is None:
        return "<p>no episode</p>"
    ok = _solved(row)
    reward = row.get("reward")
    head = (f"<p class=outcome><b class={'pass' if ok else 'fail'}>{'solved' if ok else 'failed'}</b>, reward "
            f"{'-' if reward is None else f'{float(reward):.2f}'}, seed {_e(row.get('seed'))}, "
            f"ended: {_e(row.get('termination', ''))}</p>" + _components(row) + _fields(fields))
    if row.get("reward_reason"):
        head += f"<p class=why>{_e(row['reward_reason'])}</p>"
    names = {}
    parts = []
    for m in row.get("messages") or []:
        role = m.get("role")
        content = m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
        if role == "system":
            parts.append(f"<div class='msg system'>{_fold(content or '', 'system prompt')}</div>")
        elif role == "user":
            parts.append(f"<div class='msg user'><b>user</b><pre>{_e(content or '')}</pre></div>")
        elif role == "assistant":
            calls = ""
            for c in m.get("tool_calls") or []:
                fn = (c or {}).get("function") or {}
                names[str((c or {}).get("id"))] = fn.get("name")
                calls += (f"<div class=call>&#8594; <code>{_e(fn.get('name'))}</code>"
                          f"<code>{_e(_args(fn.get('arguments')))}</code></div>")
            text = f"<pre>{_e(content)}</pre>" if content else ""
            parts.append(f"<div class='msg agent'><b>agent</b>{text}{calls}</div>")
        elif role == "tool":
            name = m.get("name") or names.get(str(m.get("tool_call_id"))) or "tool"
            parts.append(f"<div class='msg tool'><b>{_e(name)} output</b>{_fold(content or '', 'output')}</div>")
    return head + "".join(parts)


STYLE = """<style>.episodes{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:.5rem;margin:.5rem 0 2rem}
.episodes>div{border:1px solid #ccc;padding:.4rem;font-size:.85rem;overflow-wrap:anywhere}
.msg{margin:.3rem 0;padding:.3rem;border-radius:.4rem}.msg pre{white-space:pre-wrap;margin:.2rem 0;background:none}
.user{background:#eef3ff}.agent{background:#f1f8ee}.tool{background:#f6f6f6}.system{background:#fffbe6}
.call code{display:block;white-space:pre-wrap}.pass{color:#1a7f37}.fail{color:#c62828}.na{color:#777}
ul.checks{margin:.2rem 0;padding-left:1.2rem}</style>"""


def render_episodes(picks: Sequence[Pick]) -> str:
    if not picks:
        return "<p>No held-out episodes to show.</p>"
    out = [STYLE]
    for p in picks:
        out.append(f"<h3>{_e(p.family)}: task <code>{_e(p.task_id)}</code> ({_e(p.why)})</h3>")
        if p.instruction:
            out.append(f"<p>Instruction: {_e(p.instruction)}</p>")
        cols = "".join(f"<div><h4>{_e(name)}</h4>{render_chat(p.episodes.get(key), p.fields.get(key, []))}</div>"
                       for key, name in POLICIES)
        out.append(f"<div class=episodes>{cols}</div>")
    return "".join(out)


def write_episodes_jsonl(picks: Sequence[Pick], path: Path) -> Path:
    """One line per episode shown: family, task, why picked, policy, then the trajectory row's fields."""
    with open(path, "w", encoding="utf-8") as f:
        for p in picks:
            for key, name in POLICIES:
                row = p.episodes.get(key)
                if row is None:
                    continue
                head = {"family": p.family, "task_id": p.task_id, "picked": p.why, "policy": key, "policy_name": name,
                        "fields": p.fields.get(key, [])}
                f.write(json.dumps({**row, **head}, ensure_ascii=False) + "\n")
    return path


def episodes_section(out: Path) -> str:
    """The report's episodes section from a demo folder (tasks/held_out/tasks.jsonl, eval/<policy>/
    trajectories.jsonl); writes episodes.jsonl beside the report. Empty-handed: a line saying so."""
    from synth.tasks import load_tasks

    held = out / "tasks" / "held_out" / "tasks.jsonl"
    files = {k: out / "eval" / k / "trajectories.jsonl" for k, _ in POLICIES}
    if not held.is_file() or not any(f.is_file() for f in files.values()):
        return "<p>No held-out episodes to show.</p>"
    rows = {k: sampled_rows(f) for k, f in files.items() if f.is_file()}
    picks = pick_episodes(load_tasks(held), rows)
    write_episodes_jsonl(picks, out / "episodes.jsonl")
    intro = ("<p>Per task family one held-out task played by each policy (one sampled episode each, its seed "
             "shown): a task the primed policy failed and Dr. GRPO solved where there is one, and one where both "
             "fail. Long tool outputs are folded. The same episodes are in <code>episodes.jsonl</code> beside this "
             "report.</p>")
    return intro + render_episodes(picks)
