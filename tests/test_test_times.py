"""scripts/test_times.py: what scripts/test.sh prints after the suite (issue 31 item 4)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test_times.py"
XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.rl.test_demo" name="test_a" time="600.0"/>
<testcase classname="tests.rl.test_demo" name="test_b" time="120.0"/>
<testcase classname="tests.test_pool.TestReset" name="test_c" time="30.0"/>
</testsuite></testsuites>"""


def run(tmp_path, wall: int, xml: str = XML) -> str:
    (tmp_path / "j.xml").write_text(xml)
    return subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "j.xml"), str(wall)],
                          capture_output=True, text=True, check=True).stdout


def test_per_file_minutes_slowest_first_and_a_warning_past_40(tmp_path):
    out = run(tmp_path, 45 * 60)
    lines = [ln.split() for ln in out.splitlines() if ln.strip().endswith(".py")]
    assert [ln[-1] for ln in lines] == ["tests/rl/test_demo.py", "tests/test_pool.py"]
    assert lines[0][0] == "12.0" and lines[1][0] == "0.5"
    assert "3 ran in 45.0 min" in out and "WARNING" in out
    assert "WARNING" in run(tmp_path, 41 * 60)
    assert "WARNING" not in run(tmp_path, 31 * 60)


def test_xdist_junit_names_and_the_test_time_beside_the_wall_time(tmp_path):
    """pytest-xdist's --dist loadgroup writes the group into each test's name (test_a@vllm): the files
    are still the classnames'; their times add up to more than the wall time of 2 workers."""
    xml = XML.replace('name="test_a"', 'name="test_a@vllm"').replace('name="test_c"', 'name="test_c[x]@tests/test_pool.py"')
    out = run(tmp_path, 6 * 60, xml)
    lines = [ln.split() for ln in out.splitlines() if ln.strip().endswith(".py")]
    assert [(ln[0], ln[-1]) for ln in lines] == [("12.0", "tests/rl/test_demo.py"), ("0.5", "tests/test_pool.py")]
    assert "3 ran in 6.0 min (12.5 min of test time, x2.1)" in out and "WARNING" not in out
