"""bench/reader_curve.py: a Dr. GRPO chain's evaluated points at their step counts (from= followed across files),
gains over one primed policy, and the refusals that keep two chains from being drawn as one curve."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import reader_curve  # noqa: E402


def rec(x: float, prefix: str) -> dict[str, Any]:
    return {f"{prefix}multistep_success": x, f"{prefix}success": x + 0.1, f"{prefix}multistep_greedy_success": x,
            f"{prefix}greedy_success": x + 0.2,
            "by_tool": {"read_report": {"success": x}, "ask_user": {"success": 2 * x}, "lookup_act": {"success": 0.0}}}


def run(primed: list[float], variants: dict[str, tuple[str | None, int, list[float] | None]]) -> dict[str, Any]:
    """An rl_budget JSON: primed success per seed, and per variant (from, steps, success per seed or None:
    trained with eval=false)."""
    out: dict[str, Any] = {"primed": {"per_seed": {str(s): rec(x, "sft_") for s, x in enumerate(primed)}},
                           "variants": {}}
    for name, (start, steps, xs) in variants.items():
        per_seed = {str(s): ({"grpo_steps": steps, "by_tool": None} if xs is None
                             else {"grpo_steps": steps, **rec(xs[s], "grpo_")}) for s in range(len(primed))}
        out["variants"][name] = {"from": start, "per_seed": per_seed}
    return out


def test_chain_across_files_places_each_point_at_its_steps() -> None:
    primed = [0.2, 0.4]
    runs = [run(primed, {"a": (None, 32, [0.3, 0.4])}), run(primed, {"b": ("a", 48, None)}),
            run(primed, {"c": ("b", 24, [0.5, 0.6])})]
    res = reader_curve.curve(runs)
    assert [(p["variant"], p["steps"]) for p in res["points"]] == [
        ("primed", {"0": 0, "1": 0}), ("a", {"0": 32, "1": 32}), ("c", {"0": 104, "1": 104})]
    c = res["points"][2]
    assert c["mean"]["multistep"] == pytest.approx(0.55)
    assert c["gain"]["multistep"] == pytest.approx(0.25)  # over the primed mean 0.3
    assert c["gain"]["ask_user"] == pytest.approx(0.5)
    assert res["points"][1]["gain"]["multistep"] == pytest.approx(0.05)


def test_refuses_what_is_not_one_chain() -> None:
    with pytest.raises(reader_curve.CurveError, match="from=b"):  # the call that trained b not given
        reader_curve.curve([run([0.2], {"c": ("b", 24, [0.5])})])
    with pytest.raises(reader_curve.CurveError, match="different primed"):
        reader_curve.curve([run([0.2], {"a": (None, 32, [0.3])}), run([0.25], {"c": ("a", 8, [0.5])})])
    with pytest.raises(reader_curve.CurveError, match="not|none"):
        reader_curve.curve([run([0.2], {"a": (None, 32, None)})])
    with pytest.raises(reader_curve.CurveError, match="loops"):
        reader_curve.curve([run([0.2], {"a": ("b", 8, [0.3]), "b": ("a", 8, None)})])


def test_cli_writes_the_plot_and_one_json_line(tmp_path: Path) -> None:
    files = []
    for i, r in enumerate([run([0.2, 0.4], {"a": (None, 32, [0.3, 0.4])}),
                           run([0.2, 0.4], {"c": ("a", 24, [0.5, 0.6])})]):
        files.append(tmp_path / f"r{i}.json")
        files[-1].write_text(json.dumps(r))
    png = tmp_path / "curve.png"
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "reader_curve.py"), *map(str, files), "--png", str(png)],
                         check=True, capture_output=True, text=True).stdout
    last = json.loads(out.strip().splitlines()[-1])
    assert [p["variant"] for p in last["points"]] == ["primed", "a", "c"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = subprocess.run([sys.executable, str(ROOT / "bench" / "reader_curve.py"), str(files[1])],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: from=a") and "Traceback" not in bad.stderr
