"""How much of a policy's held-out success is hedging: its evaluation episodes scored again with the
communication check as tau-bench has it (any expected output anywhere in what the agent said) and with the hedge
guard (rewards.mentions.without_hedges: a message's pairs for a key it gives several values, one unexpected,
tell nothing) and with the guard over everything told between two tool results (``read``: a value changed with
no new read in between is a guess, rewards.mentions.told_between_reads), all in this run; the world-state
component is the recorded one (the guard does not touch it).

    python bench/hedge_rescore.py EVAL_DIR TASKS_DIR [EVAL_DIR TASKS_DIR ...] --names a,b --save out.json

EVAL_DIR holds ``trajectories.jsonl`` as the demo's evaluation writes it (sampled episodes, then one greedy
episode per task); TASKS_DIR the held-out tasks. Per run: success and multi-step success (sampled, greedy)
under each rule, per family, how many episodes hedged, and how many recorded communication scores each rule
reproduces (episodes evaluated before the guard: all of them by the tau rule). One JSON line last.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench._stages import report  # noqa: E402


async def rescore(eval_dir: Path, tasks_dir: Path) -> dict[str, Any]:
    from rewards.verifiable import CommunicationReward
    from rl.rollout import solved
    from synth.episode import Trajectory
    from synth.task_families import MULTISTEP, family_of
    from synth.tasks import load_tasks

    tasks = {t.id: t for t in load_tasks(tasks_dir)}
    rows = [json.loads(line) for line in (eval_dir / "trajectories.jsonl").read_text().splitlines() if line.strip()]
    greedy_from = len(rows) - len({r["task_id"] for r in rows})  # one greedy episode per task, last
    rules = {"tau": CommunicationReward(hedges=True), "guard": CommunicationReward(hedge_scope="message"),
             "read": CommunicationReward(hedge_scope="read")}
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    agree: Counter[str] = Counter()
    hedged: Counter[str] = Counter()
    for i, row in enumerate(rows):
        task = tasks[row["task_id"]]
        traj = Trajectory.model_validate({k: v for k, v in row.items() if k in Trajectory.model_fields})
        recorded = dict(row.get("components") or {})
        mode = "greedy" if i >= greedy_from else "sampled"
        fam = family_of(task)
        groups = [f"{mode}:{g}" for g in ("all", *(("multistep", fam) if fam in MULTISTEP else ()))]
        for g in groups:
            tally[g]["episodes"] += 1
        for rule, reward in rules.items():
            r = await reward.score(task, traj)
            agree[rule] += recorded.get("communication") == r.score
            hedged[rule] += bool(r.details.get("hedged_keys"))
            ok = solved({**recorded, "communication": r.score if recorded.get("communication") is not None else None})
            for g in groups:
                tally[g][f"{rule}_solved"] += ok
    return {"episodes": len(rows), **{f"{r}_reproduces_recorded": agree[r] for r in rules},
            "hedged_episodes": hedged["guard"], "hedged_episodes_read": hedged["read"],
            "success": {k: {"episodes": c["episodes"],
                            **{r: round(100 * c[f"{r}_solved"] / c["episodes"], 1) for r in rules}}
                        for k, c in sorted(tally.items())}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="EVAL_DIR TASKS_DIR, repeated")
    ap.add_argument("--names", default="", help="a name per pair, comma-separated")
    ap.add_argument("--save", default=None)
    args = ap.parse_args()
    if len(args.pairs) % 2:
        print("error: give EVAL_DIR TASKS_DIR pairs", file=sys.stderr)
        return 2
    import anyio

    pairs = list(zip(args.pairs[::2], args.pairs[1::2], strict=True))
    names = args.names.split(",") if args.names else [str(i) for i in range(len(pairs))]
    if len(names) != len(pairs):
        print(f"error: --names gives {len(names)} names for {len(pairs)} EVAL_DIR TASKS_DIR pairs", file=sys.stderr)
        return 2
    result = {"bench": "hedge_rescore", "runs": {n: anyio.run(rescore, Path(e), Path(t))
                                                 for n, (e, t) in zip(names, pairs, strict=True)}}
    report(result, args.save, ("runs",))
    return 0


if __name__ == "__main__":
    sys.exit(main())
