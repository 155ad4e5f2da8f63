"""A policy evaluated again on a seed's held-out tasks, exactly as the demo evaluates (bench._stages.evaluate):
for probes after a GPU study, on any machine, from a carried seed folder (issue 28, reader_gpu.md section 23).

    python bench/policy_eval.py SEED_DIR [--policy DIR] [--set k=v ...] --out DIR [--save out.json]

SEED_DIR holds ``tasks/held_out`` (as bench/rl_budget.py writes a seed); ``--policy`` defaults to its primed
policy ``SEED_DIR/sft``; ``--set`` takes the demo config overrides the seed was made with (answers=keyed, ...),
``seed=`` included, since the evaluation's sampling seed follows it. The episodes land in ``--out``
(``trajectories.jsonl``, for bench/multistep_failures.py). One JSON line last.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402, F401  (first: fixes sys.path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seed_dir", type=Path)
    ap.add_argument("--policy", type=Path, default=None, help="default: SEED_DIR/sft")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="K=V")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--save", default=None)
    args = ap.parse_args(argv)
    policy = args.policy or args.seed_dir / "sft"
    held_dir = args.seed_dir / "tasks" / "held_out"
    for path, what in ((held_dir / "tasks.jsonl", "held-out tasks"), (policy / "config.json", "policy")):
        if not path.is_file():
            print(f"error: no {what} at {path} (a seed folder as bench/rl_budget.py writes it)", file=sys.stderr)
            return 2

    from bench import _stages
    from synth.tasks import load_tasks

    cfg = _stages.demo_config(args.sets)
    held = load_tasks(held_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"policy": str(policy), "held_out_tasks": len(held), "sets": args.sets,
              **_stages.evaluate(cfg, policy, held, args.out, _stages.backend_of(cfg, args.out))}
    _stages.report(result, args.save, head=("policy", "success", "multistep_success"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
