"""Reports: a grid of models side by side (rich table and static HTML), and run-to-run comparison.

Cells: ``✔`` passed, ``✗`` failed, ``error`` could not run (the reason says why), ``c/N`` with
repeats (c of N runs passed). Below the cases: pass rate, pass@N and pass^N (with repeats),
errors, model requests (and cache hits), wall time.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text

from evals.results import CaseResult, RunRecord

__all__ = ["Change", "compare_runs", "compare_table", "grid_html", "grid_table", "write_html"]


def _columns(records: list[RunRecord]) -> list[str]:
    labels = [r.label for r in records]
    return [r.label if labels.count(r.label) == 1 else f"{r.label} ({r.run_id[:15]})" for r in records]


def _case_order(records: list[RunRecord]) -> list[str]:
    order: list[str] = []
    for r in records:
        for c in r.cases:
            if c.name not in order:
                order.append(c.name)
    return order


def _cell(c: CaseResult | None) -> Text:
    if c is None:
        return Text("-", style="dim")
    if c.runs == 1:
        if c.errors:
            return Text("error", style="yellow")
        return Text("✔", style="green") if c.passed else Text("✗", style="red")
    style = "green" if c.passed == c.runs else ("red" if c.passed == 0 else "yellow")
    return Text(f"{c.passed}/{c.runs}" + (f" ({c.errors} err)" if c.errors else ""), style=style)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _usage(r: RunRecord) -> str:
    u = r.usage or {}
    req, cached = u.get("requests"), u.get("cached")
    if req is None:
        return "-"
    return f"{req}" + (f" (+{cached} cached)" if cached else "")


def summary_rows(records: list[RunRecord], max_tags: int | None = None) -> list[tuple[str, list[str]]]:
    """Pass rates and counts; then per-tag pass rates (the ``max_tags`` tags on the most cases)."""
    rows = [("pass rate", [_pct(r.summary.pass_rate) for r in records]),
            ("cases passed", [f"{r.summary.passed_cases}/{r.summary.cases}" for r in records])]
    n = max((max(r.summary.pass_at_k) for r in records if r.summary.pass_at_k), default=1)
    if n > 1:
        rows.append((f"pass@{n}", [_pct(r.summary.pass_at_k.get(n)) for r in records]))
        rows.append((f"pass^{n}", [_pct(r.summary.pass_hat_k.get(n)) for r in records]))
    rows += [("errors", [str(r.summary.errors) for r in records]),
             ("requests", [_usage(r) for r in records]),
             ("time", [f"{r.duration_s:.1f} s" for r in records])]
    counts: dict[str, int] = {}
    for c in {c.name: c for r in records for c in r.cases}.values():
        for t in c.tags:
            counts[t] = counts.get(t, 0) + 1
    tags = sorted(counts, key=lambda t: (-counts[t], t))[:max_tags]
    rows += [(f"tag {t}", [_pct(r.summary.by_tag.get(t)) for r in records]) for t in sorted(tags)]
    return rows


def grid_table(records: list[RunRecord], title: str | None = None) -> Table:
    """Cases down, models across."""
    suite = records[0].suite if records else ""
    version = records[0].suite_version if records else ""
    table = Table(title=title or f"suite {suite} ({version})", show_lines=False)
    table.add_column("case", no_wrap=True)
    table.add_column("tags", style="dim", max_width=24, overflow="ellipsis", no_wrap=True)
    for col in _columns(records):
        table.add_column(col, justify="center")
    by = [{c.name: c for c in r.cases} for r in records]
    tags = {c.name: c.tags for r in records for c in r.cases}
    for name in _case_order(records):
        table.add_row(name, ",".join(tags.get(name, [])), *[_cell(b.get(name)) for b in by])
    table.add_section()
    for label, cells in summary_rows(records, max_tags=5):
        table.add_row(Text(label, style="bold"), "", *cells)
    return table


def failure_lines(record: RunRecord, limit: int = 8) -> list[str]:
    bad = [c for c in record.cases if not c.all_passed]
    out = [f"{c.name}: {c.reasons[0] if c.reasons else 'failed'}" for c in bad[:limit]]
    if len(bad) > limit:
        out.append(f"... {len(bad) - limit} more (see the HTML report)")
    return out


# ============================================================================ HTML
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#1d1d1f;background:#fafafa}
h1{font-size:1.4rem;margin-bottom:.2rem} .meta{color:#666;font-size:.9rem;margin-bottom:1.2rem}
table{border-collapse:collapse;margin:1rem 0;background:#fff;box-shadow:0 1px 2px #0001}
th,td{border:1px solid #ddd;padding:.3rem .6rem;font-size:.9rem;text-align:center}
th{background:#f0f0f3} td.case{text-align:left;font-family:ui-monospace,monospace} td.tags{color:#888;text-align:left}
td.pass{background:#d9f5dd;color:#0a6b1f} td.fail{background:#fbdcdc;color:#9b1c1c}
td.part{background:#fdf1cc;color:#7a5a00} td.err{background:#fff0c2;color:#7a5a00;font-style:italic} td.none{color:#aaa}
tr.sum td{font-weight:600;background:#f6f6f8}
details{margin:.3rem 0 .3rem 1rem} summary{cursor:pointer;font-family:ui-monospace,monospace}
pre{white-space:pre-wrap;background:#f3f3f5;padding:.5rem;border-radius:4px;max-height:18rem;overflow:auto;font-size:.8rem}
li{font-size:.85rem}
"""


_CONTROL = {c: "\ufffd" for c in [*range(0, 9), 11, 12, *range(14, 32), 127]}


def _esc(text: str, quote: bool = True) -> str:
    """HTML-escaped, with control characters (not valid in HTML) shown as U+FFFD."""
    return html.escape(str(text).translate(_CONTROL), quote=quote)


def _html_cell(c: CaseResult | None) -> str:
    if c is None:
        return '<td class="none">-</td>'
    tip = _esc("\n".join(c.reasons) or ("passed" if c.all_passed else ""))
    if c.runs == 1:
        cls, text = ("err", "error") if c.errors else (("pass", "✔") if c.passed else ("fail", "✗"))
    else:
        cls = "pass" if c.passed == c.runs else ("fail" if c.passed == 0 else "part")
        text = f"{c.passed}/{c.runs}"
    return f'<td class="{cls}" title="{tip}">{_esc(text)}</td>'


def grid_html(records: list[RunRecord], title: str | None = None) -> str:
    """A self-contained HTML page: the grid, the summary rows, and each model's failures with reasons
    and the model's output."""
    esc = _esc
    suite = records[0].suite if records else ""
    title = title or f"tooldojo evals: {suite}"
    cols = _columns(records)
    by = [{c.name: c for c in r.cases} for r in records]
    tags = {c.name: c.tags for r in records for c in r.cases}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>{esc(title)}</h1>"]
    versions = sorted({r.suite_version for r in records})
    parts.append(f"<div class='meta'>suite <b>{esc(suite)}</b>, version {esc(', '.join(versions))}; "
                 + "; ".join(f"{esc(c)}: run <code>{esc(r.run_id)}</code> at {esc(r.started_at)}"
                             + (f", {r.repeat} runs per case" if r.repeat > 1 else "")
                             + (" (only the cases that failed before)" if r.only_failed else "")
                             for c, r in zip(cols, records, strict=True)) + "</div>")
    parts.append("<table><tr><th>case</th><th>tags</th>" + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr>")
    for name in _case_order(records):
        parts.append(f"<tr><td class='case'>{esc(name)}</td><td class='tags'>{esc(', '.join(tags.get(name, [])))}</td>"
                     + "".join(_html_cell(b.get(name)) for b in by) + "</tr>")
    for label, cells in summary_rows(records):
        parts.append(f"<tr class='sum'><td class='case'>{esc(label)}</td><td></td>"
                     + "".join(f"<td>{esc(x)}</td>" for x in cells) + "</tr>")
    parts.append("</table>")
    for col, r in zip(cols, records, strict=True):
        bad = [c for c in r.cases if not c.all_passed]
        parts.append(f"<h2>{esc(col)}: {len(bad)} of {len(r.cases)} cases did not pass</h2>")
        model = r.model or {}
        parts.append("<div class='meta'>" + esc(", ".join(f"{k}={v}" for k, v in model.items() if k != "label"))
                     + "</div>")
        for c in bad:
            parts.append(f"<details><summary>{esc(c.name)} ({esc(c.status)})</summary><ul>"
                         + "".join(f"<li>{esc(x)}</li>" for x in c.reasons) + "</ul>"
                         + (f"<pre>{esc(c.output)}</pre>" if c.output else "") + "</details>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(records: list[RunRecord], path: str | Path, title: str | None = None) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(grid_html(records, title), encoding="utf-8")
    return p


# ============================================================================ compare
@dataclass
class Change:
    case: str
    a: CaseResult | None
    b: CaseResult | None

    @property
    def kind(self) -> str:
        if self.a is None:
            return "new"
        if self.b is None:
            return "gone"
        ra, rb = self.a.passed / self.a.runs, self.b.passed / self.b.runs
        if self.a.all_passed and not self.b.all_passed:
            return "regressed"
        if not self.a.all_passed and self.b.all_passed:
            return "fixed"
        if ra != rb:
            return "better" if rb > ra else "worse"
        return "same"


def compare_runs(a: RunRecord, b: RunRecord) -> list[Change]:
    ba, bb = {c.name: c for c in a.cases}, {c.name: c for c in b.cases}
    return [Change(n, ba.get(n), bb.get(n)) for n in _case_order([a, b])]


_KIND_STYLE = {"fixed": "green", "better": "green", "regressed": "red", "worse": "red", "new": "cyan",
               "gone": "dim", "same": "dim"}


def compare_table(a: RunRecord, b: RunRecord, *, show_all: bool = False) -> Table:
    t = Table(title=f"{a.run_id} ({a.label}) -> {b.run_id} ({b.label})")
    t.add_column("case", overflow="fold")
    t.add_column("A", justify="center")
    t.add_column("B", justify="center")
    t.add_column("change")
    t.add_column("why (B)", overflow="fold", style="dim")
    changes = compare_runs(a, b)
    for ch in changes:
        if ch.kind == "same" and not show_all:
            continue
        why = (ch.b.reasons[0] if ch.b and ch.b.reasons and not ch.b.all_passed else "")
        t.add_row(ch.case, _cell(ch.a), _cell(ch.b), Text(ch.kind, style=_KIND_STYLE[ch.kind]), why[:200])
    t.add_section()
    t.add_row(Text("pass rate", style="bold"), _pct(a.summary.pass_rate), _pct(b.summary.pass_rate),
              f"{100 * (b.summary.pass_rate - a.summary.pass_rate):+.1f} points", "")
    for k in sorted(set(a.summary.pass_at_k) & set(b.summary.pass_at_k) - {1}):
        t.add_row(f"pass@{k}", _pct(a.summary.pass_at_k[k]), _pct(b.summary.pass_at_k[k]), "", "")
        t.add_row(f"pass^{k}", _pct(a.summary.pass_hat_k[k]), _pct(b.summary.pass_hat_k[k]), "", "")
    counts: dict[str, int] = {}
    for ch in changes:
        counts[ch.kind] = counts.get(ch.kind, 0) + 1
    t.caption = ", ".join(f"{v} {k}" for k, v in counts.items())
    return t
