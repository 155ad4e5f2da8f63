"""Does a change to priming make the primed policy copy? A gate on the 2-core machine before device time is spent
(issue 28, section 38 of bench/results/reader_gpu.md).

Each arm (demo overrides on top of the shared ``--set`` ones) primes one seed here: base, tasks, traces, SFT
(bench/_stages, as bench/rl_budget.py's workers do), with no held-out episodes (a 4M policy's evaluation takes
14-19 minutes a seed here). Then every primed policy is scored teacher-forced by bench/reader_choice.py on every
arm's held-out read_report tasks, and on its lookup_act ones for the record id the write picks from a listing,
so each policy meets the others' held-out entities too (an arm's split depends on how many tasks it makes). The
first arm is the baseline; it runs in the same call.

    PYTHONPATH=. python bench/prime_gate.py --arm base: --arm rr1000:multistep.read_report=1000 \\
        --set base=/tmp/bases/4M_kdx_r1000_w_fa --set answers=keyed --work /tmp/gate --save out.json

An arm's folder with ``primed.json`` is kept: a second call scores again without priming again. One JSON line last.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench import _stages  # noqa: E402


def parse_arm(text: str) -> tuple[str, list[str]]:
    """``NAME:k=v;k=v`` as (name, overrides); ``NAME:`` has none."""
    name, _, rest = text.partition(":")
    if not name or not name.replace("_", "").isalnum():
        raise SystemExit(f"error: arm {text!r}: write NAME:key=value;key=value (NAME letters, digits, _)")
    return name, [kv for kv in rest.split(";") if kv]


def prime_arm(overrides: list[str], out: Path) -> dict[str, Any]:
    """One seed primed with ``overrides`` into ``out`` (kept: ``out/primed.json``)."""
    done = out / "primed.json"
    if done.is_file():
        return json.loads(done.read_text())
    cfg = _stages.demo_config([*overrides, f"out_dir={out}"])
    backend = _stages.backend_of(cfg, out)
    t0 = time.perf_counter()
    base = _stages.build_base(cfg, out)
    train, held = _stages.make_tasks(cfg, out, backend)
    t1 = time.perf_counter()
    res: dict[str, Any] = {"seed": cfg.seed, "train_tasks": len(train), "held_out_tasks": len(held)}
    res.update(_stages.prime_condition(cfg, base, train, out, backend))
    res["minutes"] = {"tasks": round((t1 - t0) / 60, 2), "prime_and_sft": round((time.perf_counter() - t1) / 60, 2)}
    res["sft_dir"] = str(res["sft_dir"])
    done.write_text(json.dumps(res))
    return res


def _reader_choice() -> Any:
    """bench/reader_choice.py (a sibling script, not a package)."""
    spec = importlib.util.spec_from_file_location("bench_reader_choice", Path(__file__).with_name("reader_choice.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arm", action="append", required=True, help="NAME:key=value;key=value (repeatable; the "
                                                                   "first is the baseline)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a demo config override every arm takes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", required=True, help="one folder per arm under it (kept)")
    ap.add_argument("--save", default=None)
    args = ap.parse_args()
    arms = dict(parse_arm(a) for a in args.arm)
    if len(arms) != len(args.arm):
        raise SystemExit("error: two arms share a name")

    from synth.task_families import family_of

    rc = _reader_choice()
    demo_tasks = rc._reader_tokens().demo_tasks
    common = [*args.overrides, *_stages.seed_overrides(args.seed)]
    primed = {name: prime_arm([*common, *sets], Path(args.work) / name) for name, sets in arms.items()}
    paths = [primed[name]["sft_dir"] for name in arms]
    scores: dict[str, Any] = {}
    for name in arms:  # every policy on this arm's held-out read_report tasks
        cfg, backend, system_prompt, _train, held = demo_tasks(str(Path(args.work) / name), "")
        tasks = [t for t in held if family_of(t) == "read_report"]
        lookups = [t for t in held if family_of(t) == "lookup_act"]
        models, _ = rc.score(paths, tasks, backend, system_prompt, cfg.seed, 0, lookups)
        picks = {p: m.pop("lookup") for p, m in models.items()}
        scores[name] = {"tasks": len(tasks), "policies": {n: models[p] for n, p in zip(arms, paths, strict=True)},
                        "lookup_tasks": len(lookups), "lookup": {n: picks[p] for n, p in zip(arms, paths, strict=True)}}
    keyed = {n: {t: {k: scores[t]["policies"][n]["keyed"][k] for k in ("values", "first", "whole")} for t in arms}
             for n in arms}
    lookup = {n: {t: {k: scores[t]["lookup"][n][k] for k in ("ids", "whole")} for t in arms} for n in arms}
    result = {"bench": "prime_gate", "seed": args.seed, "overrides": args.overrides, "arms": arms,
              "baseline": next(iter(arms)), "primed": primed, "keyed": keyed, "lookup": lookup, "scores": scores}
    _stages.report(result, args.save, head=("bench", "seed", "baseline", "keyed", "lookup"))


if __name__ == "__main__":
    main()
