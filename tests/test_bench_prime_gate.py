"""bench/prime_gate.py: its arms as written on the command line, and a primed arm kept for the next call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_module import load_bench

gate = load_bench("prime_gate")


def test_arm_is_a_name_and_its_overrides() -> None:
    assert gate.parse_arm("base:") == ("base", [])
    assert gate.parse_arm("rr1000:multistep.read_report=1000;sft.epochs=3") == (
        "rr1000", ["multistep.read_report=1000", "sft.epochs=3"])


@pytest.mark.parametrize("bad", [":multistep.read_report=1000", "rr 1000:x=1", "../up:"])
def test_arm_without_a_plain_name_is_refused(bad: str) -> None:
    with pytest.raises(SystemExit, match="NAME:key=value"):
        gate.parse_arm(bad)


def test_a_primed_arm_is_read_back_not_primed_again(tmp_path: Path) -> None:
    kept = {"seed": 0, "train_tasks": 1636, "sft_dir": str(tmp_path / "sft"), "minutes": {"tasks": 5.0}}
    (tmp_path / "primed.json").write_text(json.dumps(kept))
    # overrides no config accepts: priming would fail at once, so only the kept record can answer
    assert gate.prime_arm(["no_such_field=1"], tmp_path) == kept
