"""The test suite's wall time and its slowest files, from pytest's JUnit XML (scripts/test.sh).

Per-file minutes are the files' own test times (setup, call and teardown), whichever xdist worker ran
them; the wall time is the whole run's, so with 2 workers the files add up to more than it."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

WARN_MINUTES = 40  # CI allows 90; issue 31: a loud warning well before that (the target is 30), never a failure


def main(path: str, wall_seconds: str) -> int:
    per_file: dict[str, float] = defaultdict(float)
    count = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        parts = (case.get("classname") or "?").split(".")  # tests.rl.test_demo[.TestClass]
        mod = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        per_file["/".join(parts[: mod + 1]) + ".py"] += float(case.get("time") or 0)
        count += 1
    minutes = int(wall_seconds) / 60
    summed = sum(per_file.values()) / 60
    print(f"\ntests: {count} ran in {minutes:.1f} min ({summed:.1f} min of test time, "
          f"x{summed / max(minutes, 1e-9):.1f}); slowest files:")
    for f, t in sorted(per_file.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {t / 60:6.1f} min  {f}")
    if minutes > WARN_MINUTES:
        print(f"\n\033[1;33mWARNING: the suite took {minutes:.1f} min, over {WARN_MINUTES} (CI allows 90): "
              f"share expensive fixtures or merge end-to-end runs before adding more\033[0m")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
