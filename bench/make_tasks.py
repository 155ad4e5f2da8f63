"""Make a study's tasks on the 2-core machine, to carry to the GPU (rl.demo.make_tasks reads tasks back by the
settings that made them, so the device call does not spend its minutes on synthesis; section 38 of
bench/results/reader_gpu.md: 1,000 read_report tasks take 5.5 minutes a seed).

    PYTHONPATH=. python bench/make_tasks.py --seeds 0,1,2 --out /tmp/rq/NAME --set multistep.read_report=1000 ...
    (cd / && tar czf $REPO/.carry/tasks/rq_NAME_tasks.tgz tmp/rq/NAME/seed-*/tasks)

``--set`` takes the arm's demo overrides (as bench/reader_gpu.sh's ARMS give them); each seed's tasks go to
``OUT/seed-S/tasks``, where bench/rl_budget.py's workers look. One JSON line last.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench import _stages  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", required=True, help="the arm's work folder (seed-S/tasks under it)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    made = {}
    for s in [int(x) for x in args.seeds.split(",") if x]:
        out = Path(args.out) / f"seed-{s}"
        cfg = _stages.demo_config([*args.overrides, *_stages.seed_overrides(s), f"out_dir={out}"])
        t0 = time.perf_counter()
        train, held = _stages.make_tasks(cfg, out, _stages.backend_of(cfg, out))
        made[s] = {"train": len(train), "held_out": len(held), "seconds": round(time.perf_counter() - t0, 1)}
        print(f"[make_tasks] seed {s}: {made[s]}", file=sys.stderr, flush=True)
    _stages.report({"bench": "make_tasks", "out": args.out, "overrides": args.overrides, "seeds": made}, None,
                   head=("bench", "out"))


if __name__ == "__main__":
    main()
