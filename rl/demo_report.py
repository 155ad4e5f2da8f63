"""The demo's one-page HTML report (runs/demo/report.html): the numbers, the curves, the behaviours and
how far their counter can be trusted, episodes side by side, time per stage and the settings."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rl.demo_config import DEFAULT_TRAIN, DemoConfig, DemoResult, base_summary, merge

__all__ = ["COUNTER_ACCURACY", "counter_accuracy_row", "settings_groups", "settings_html", "stage_table", "write_report"]


def _img(path: Path | None) -> str:
    if path is None or not path.exists():
        return ""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}" style="max-width:100%">'


def _html_table(header: Iterable[str], rows: Iterable[Iterable[Any]], cls: str = "") -> str:
    """A <table> with every cell escaped."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{f' class={cls}' if cls else ''}><tr>{head}</tr>{body}</table>"


def stage_table(stage_minutes: dict[str, float], total: float) -> str:
    """Time per stage: minutes and share of the whole run, and the total."""
    rows = [(name, f"{m:.2f}", f"{m / total:.1%}" if total > 0 else "") for name, m in stage_minutes.items()]
    return _html_table(("stage", "minutes", "share of total"), rows + [("total", f"{total:.2f}", "100%" if total else "")])


# The demo's settings as the report groups them: (group, demo keys, sections of the train config).
SETTING_GROUPS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("model / base", ("base", "tiny", "seed", "out_dir"), ("model",)),
    ("tasks", ("domains", "tasks", "held_out", "distractors", "domain_seeds", "quote_values", "quote_fields",
               "multistep", "multistep_held_out"), ("data",)),
    ("priming / SFT", ("condition", "answers", "sft"), ()),
    ("Dr. GRPO", (), ("grpo", "trainer", "run")),
    ("rollout", (), ("rollout",)),
    ("reward", (), ("reward",)),
    ("evaluation", ("eval_samples", "base_eval_samples", "curve_every", "curve_tasks", "curve_samples"), ()),
)


def _flatten(prefix: str, value: Any) -> list[tuple[str, str]]:
    """Dotted keys to scalar values; a list is one value (compact JSON where it holds mappings)."""
    if isinstance(value, dict) and value:
        return [row for k, v in value.items() for row in _flatten(f"{prefix}.{k}" if prefix else str(k), v)]
    if isinstance(value, (list, tuple, dict)):
        return [(prefix, json.dumps(value, separators=(", ", ": ")))]
    return [(prefix, json.dumps(value) if value is None or isinstance(value, bool) else str(value))]


def settings_groups(cfg: DemoConfig) -> dict[str, list[tuple[str, str]]]:
    """The demo's settings by group (SETTING_GROUPS), the train section as the GRPO stage gets it
    (DEFAULT_TRAIN under the config's ``train``); a train section no group names lands in Dr. GRPO."""
    demo = cfg.model_dump(exclude={"train"})
    train = merge(DEFAULT_TRAIN, cfg.train)
    named = {s for _, _, sections in SETTING_GROUPS for s in sections}
    out: dict[str, list[tuple[str, str]]] = {}
    for group, keys, sections in SETTING_GROUPS:
        rows = [row for k in keys for row in _flatten(k, demo[k])]
        rows += [row for sec in sections if sec in train for row in _flatten(f"train.{sec}", train[sec])]
        if group == "Dr. GRPO":
            rows += [row for sec in train if sec not in named for row in _flatten(f"train.{sec}", train[sec])]
        if rows:
            out[group] = rows
    return out


def settings_html(cfg: DemoConfig) -> str:
    """The settings as a table per group, then the full config as YAML in a fold."""
    import yaml

    parts = [f"<h3>{html.escape(group)}</h3>" + _html_table(("setting", "value"), rows, cls="kv")
             for group, rows in settings_groups(cfg).items()]
    full = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, default_flow_style=False)
    parts.append(f"<details><summary>full configuration (YAML: <code>dojo demo</code> reads it back)</summary>"
                 f"<pre>{html.escape(full)}</pre></details>")
    return "\n".join(parts)


COUNTER_ACCURACY = Path(__file__).resolve().parents[1] / "bench" / "results" / "behaviour_counter.json"


def counter_accuracy_row(names: list[str], path: Path = COUNTER_ACCURACY) -> str:
    """The behaviour table's last row: the heuristic counter's precision / recall per behaviour on its labelled
    set (bench/behaviour_counter.py); empty where that measurement is not at hand."""
    try:
        res = json.loads(path.read_text())
        acc = res["behaviours"]
    except (OSError, ValueError, KeyError):
        return ""

    def cell(n: str) -> str:
        s = acc.get(n) or {}
        f = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        return f"<td>{f(s.get('precision'))} / {f(s.get('recall'))}</td>"

    return (f"<tr><td><i>counter precision / recall</i> (labelled set, {int(res.get('trajectories', 0))} "
            f"trajectories)</td><td></td>{''.join(cell(n) for n in names)}</tr>")


def write_report(out: Path, result: DemoResult, evals: dict[str, Any], behaviours: Any, cfg: DemoConfig) -> Path:
    """One self-contained HTML page: the numbers, the reward curve, the behaviours, episodes side by side
    (rl.episodes_view, which also writes episodes.jsonl beside it), the settings."""
    from rl.episodes_view import episodes_section

    rows = "".join(
        f"<tr><td>{name}</td><td>{ev.success:.1%}</td><td>{'' if ev.greedy_success is None else f'{ev.greedy_success:.1%}'}"
        f"</td><td>{'' if ev.mean_reward is None else f'{ev.mean_reward:.3f}'}</td><td>{ev.mean_sampled_tokens:.0f}</td></tr>"
        for name, ev in evals.items())
    brows = ""
    if behaviours is not None:
        for g in behaviours.groups:
            cells = "".join("<td>-</td>" if s.mean is None else f"<td>{s.mean:.2f} ({s.frac or 0:.0%})</td>"
                            for s in g.behaviours.values())
            brows += f"<tr><td>{html.escape(g.group)}</td><td>{g.n}</td>{cells}</tr>"
        names = next(iter(behaviours.groups)).behaviours.keys() if behaviours.groups else []
        bhead = "".join(f"<th>{html.escape(n)}</th>" for n in names)
        brows += counter_accuracy_row(list(names))
    else:
        bhead = ""
    verdict = "met" if result.target_met else "not met"
    frows = "".join(
        f"<tr><td>{'<b>' + html.escape(f) + '</b>' if row.get('multistep') else html.escape(f)}</td><td>{row['tasks']}</td>"
        + "".join(f"<td>{row[p]['success']:.1%}</td>" if p in row else "<td></td>" for p in ("base", "sft", "grpo"))
        + (f"<td>{row['sft']['pass_at_k']:.1%}</td>" if "pass_at_k" in row.get("sft", {}) else "<td></td>")
        + "</tr>" for f, row in result.families.items())

    def pct(v: float | None) -> str:
        return "" if v is None else f"{v:.1%}"

    mrow = ("" if result.multistep_sft_success is None else
            f"<tr><td><b>multi-step, pooled</b></td><td>{result.multistep_held_out_tasks}</td>"
            f"<td>{pct(result.multistep_base_success)}</td><td>{pct(result.multistep_sft_success)}</td>"
            f"<td>{pct(result.multistep_grpo_success)}</td><td>{pct(result.multistep_sft_pass_at_k)}</td></tr>")
    curve_html = ("<p>No learning curve (curve_every=0).</p>" if not result.learning_curve else
                  "<p>Every few Dr. GRPO steps the policy in training plays the same held-out slice (sampled, "
                  "per family; the multi-step families pooled in black); beside it, the training reward.</p>"
                  + _img(Path(result.learning_curve)))
    summary = base_summary(out / "base")
    base_html = "" if summary is None else (
        f"<pre>{html.escape(json.dumps(summary, indent=1))}</pre>" + _img(out / "base_loss_curve.png"))
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>tooldojo demo</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}}
table{{border-collapse:collapse;margin:1rem 0}}td,th{{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}}
td:first-child,th:first-child,table.kv td{{text-align:left}}code,pre{{background:#f4f4f4}}</style></head><body>
<h1>tooldojo demo</h1>
<p>{result.held_out_tasks} held-out tasks ({result.multistep_held_out_tasks} of them multi-step: look up then act,
read and report, ask the user) from {', '.join(map(html.escape, cfg.domains))};
{result.train_tasks} train tasks primed with the <b>{html.escape(result.condition)}</b> condition, then
{result.grpo_steps} Dr. GRPO steps ({html.escape(result.rollout_engine)} rollouts, {html.escape(result.sandbox_backend)}
sandboxes). {result.minutes:.1f} minutes in all. Target ({html.escape(result.target)}): <b>{verdict}</b>.</p>
<h2>Learning curve</h2>{curve_html}
<h2>Held-out success</h2>
<p>Success: the final world state equals the gold replay's and every expected output was reported. Sampled:
{result.eval_samples} episodes per task at temperature 1 ({result.base_eval_samples or result.eval_samples} for the base, which has never seen a tool call answered); greedy: one per task{'' if result.base_greedy_success is not None else ' (none for the base)'}.</p>
<table><tr><th>policy</th><th>success (sampled)</th><th>success (greedy)</th><th>mean reward</th><th>policy tokens</th></tr>{rows}</table>
<h2>Held-out success per task family (sampled)</h2>
<p>Multi-step families in bold (synth.task_families); the others are single-action tasks named by their
tool. A multi-step family's held-out tasks name no entity its training tasks name.</p>
<table><tr><th>family</th><th>tasks</th><th>base</th><th>primed</th><th>Dr. GRPO</th><th>primed pass@{result.eval_samples}</th></tr>{frows}{mrow}</table>
<p>Primed policy pass@{result.eval_samples} (tasks solved in at least one sample):
{'' if result.sft_pass_at_k is None else f'{result.sft_pass_at_k:.1%}'}.</p>
<h2>Base model</h2><p>{html.escape(result.base_model)}</p>{base_html}
<h2>Dr. GRPO reward, groups with reward variance, entropy, episode length</h2>{_img(out / "grpo" / "reward_curve.png")}
<h2>Behaviours (heuristic counter: mean per trajectory, share with at least one)</h2>
<p>The last row: how right the counter is, as precision / recall of "shows the behaviour" on a labelled set of
base, primed, Dr. GRPO and priming trajectories (<code>bench/behaviour_counter.py</code>).</p>
<table><tr><th>trajectories</th><th>n</th>{bhead}</tr>{brows}</table>
<h2>Episodes: base, primed and Dr. GRPO side by side</h2>{episodes_section(out)}
<h2>Time per stage</h2>{stage_table(result.stage_minutes, result.minutes)}
<h2>Settings</h2>{settings_html(cfg)}
</body></html>"""
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
