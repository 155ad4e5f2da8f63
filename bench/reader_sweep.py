"""Reader sweep (issue 28): bases of several sizes pretrained on the multi-step corpus, and what each can read.

    python bench/reader_sweep.py --gpu --shapes 0.66M:128x2x4,4M:256x4x4,8M:384x4x6,27M:512x8x8 \\
        --set corpus.multistep_per_family=100 --set corpus.copy_drills_per_length=100 --max-minutes 5 \\
        --prime --save bench/results/reader_sweep_gpu.json

Per shape (NAME:HIDDENxLAYERSxHEADS), one ``python -m rl.pretrain`` process (all at once: on a GPU they
share it) on the same corpus (rl.corpus with the three multi-step families' transcripts and the copy
drills of rl.copy_drills, built once and found by its content hash), reporting held-back loss, tool-call
token accuracy and copy accuracy per tool-output length. With ``--prime``, each base then goes through
the demo's own stages as bench/rl_budget.py's ``prepare`` job runs them (tasks, priming traces, SFT,
held-out evaluation with ``eval_samples`` samples): sampled success and pass@k per task family.

The LAST stdout line is one JSON object: per shape the pretraining result and the primed policy's
figures, the settings and the machine. ``--keep-bases DIR`` copies each base there (weights out of git).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench import _stages  # noqa: E402

# lr falls with width (the earlier sweep's values: bench/results/pretrained_base_h100.md)
LR = {128: 3e-3, 256: 2e-3, 384: 1.5e-3, 512: 1e-3, 640: 8e-4, 768: 6e-4}
QUICK_PRETRAIN = ["corpus.tasks_per_domain=2", "corpus.multistep_per_family=1", "corpus.copy_drills_per_length=1",
                  "corpus.domains=[\"retail_orders\",\"notes_app\"]", "steps=6", "eval_every=3", "seq_len=256",
                  "batch_size=4"]
QUICK_PRIME = ["multistep={\"lookup_act\": 12, \"read_report\": 12, \"ask_user\": 12}", "multistep_held_out=3",
               "tasks=24", "held_out=6", "sft.epochs=1", "eval_samples=2", "train.grpo.max_completion_length=64",
               "train.rollout.use_vllm=false"]


def log(msg: str) -> None:
    print(f"[reader_sweep] {msg}", file=sys.stderr, flush=True)


def parse_shapes(text: str) -> list[dict[str, Any]]:
    out = []
    for item in text.split(","):
        name, sep, dims = item.partition(":")
        try:
            hidden, layers, heads = (int(x) for x in dims.split("x"))
        except ValueError:
            raise SystemExit(f"--shapes {item!r}: write NAME:HIDDENxLAYERSxHEADS, e.g. 4M:256x4x4") from None
        if not sep or hidden % heads:
            raise SystemExit(f"--shapes {item!r}: write NAME:HIDDENxLAYERSxHEADS with HIDDEN divisible by HEADS")
        out.append({"name": name, "hidden": hidden, "layers": layers, "heads": heads})
    return out


def pretrain_job(shape: dict[str, Any], out: Path, sets: list[str], device: str | None, timeout: float) -> dict[str, Any]:
    """``python -m rl.pretrain`` for one shape; its JSON line, or the error and the log's tail."""
    args = [sys.executable, "-m", "rl.pretrain", "--out", str(out / shape["name"] / "base")]
    if device:
        args += ["--device", device]
    lr = LR.get(shape["hidden"], 1e-3)
    for s in [f"hidden={shape['hidden']}", f"layers={shape['layers']}", f"heads={shape['heads']}",
              f"learning_rate={lr}", *sets]:
        args += ["--set", s]
    logf = out / f"{shape['name']}.pretrain.log"
    logf.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(logf, "w") as f:
        try:
            rc = subprocess.run(args, stdout=subprocess.PIPE, stderr=f, text=True, timeout=timeout,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=_common.ROOT)
            lines = [ln for ln in rc.stdout.splitlines() if ln.startswith("{")]
            res = json.loads(lines[-1]) if rc.returncode == 0 and lines else {"error": f"exit {rc.returncode}"}
        except subprocess.TimeoutExpired:
            res = {"error": f"timed out after {timeout:.0f} s"}
    if "error" in res:
        res["log_tail"] = logf.read_text(errors="replace")[-1500:]
    res.update(shape, lr=lr, wall_seconds=round(time.perf_counter() - t0, 1))
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="0.66M:128x2x4,4M:256x4x4,8M:384x4x6,27M:512x8x8")
    ap.add_argument("--pretrain-set", dest="pretrain_sets", action="append", default=[], metavar="KEY=VALUE",
                    help="an rl.pretrain setting for every shape (e.g. corpus.copy_drills_per_length=100)")
    ap.add_argument("--max-minutes", type=float, default=None, help="pretraining wall-clock cap per shape")
    ap.add_argument("--device", default=None)
    ap.add_argument("--prime", action="store_true", help="also prime each base and evaluate it (the demo's stages)")
    ap.add_argument("--prime-timeout", type=float, default=None, help="seconds per priming job (default: --job-timeout)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny corpus and settings (a CPU smoke run)")
    ap.add_argument("--keep-bases", default=None, help="copy each pretrained base to DIR/NAME")
    ap.add_argument("--bases", default=None, help="no pretraining: the bases in DIR/NAME (an earlier sweep's "
                                                  "--keep-bases), their figures from each pretrain.json")
    _stages.add_run_options(ap, workers_help="priming jobs at a time (default: one per shape)",
                            save_help="also write the JSON here (e.g. bench/results/reader_sweep_gpu.json)")
    args = ap.parse_args()
    if args.bases:
        shapes = [{"name": p.name} for p in sorted(Path(args.bases).iterdir()) if (p / "pretrain.json").is_file()]
        if not shapes:
            raise SystemExit(f"--bases {args.bases}: no folder with a pretrain.json in it")
    else:
        shapes = parse_shapes(args.shapes)
    prime_sets = _stages.run_overrides(args, QUICK_PRIME)
    pre_sets = [*(QUICK_PRETRAIN if args.quick else []), *args.pretrain_sets,
                *([f"max_minutes={args.max_minutes}"] if args.max_minutes else [])]
    tmp = args.out is None
    work = Path(args.out or tempfile.mkdtemp(prefix="reader_sweep-"))
    start = time.perf_counter()
    result: dict[str, Any] = {"quick": args.quick, "shapes": [s["name"] for s in shapes], "errors": {}}
    try:
        if args.bases:
            done = []
            for s in shapes:
                m = json.loads((Path(args.bases) / s["name"] / "pretrain.json").read_text())
                st = m["settings"]
                done.append({**m["result"], "name": s["name"], "hidden": st["hidden"], "layers": st["layers"],
                             "heads": st["heads"], "lr": st["learning_rate"], "from": "an earlier sweep"})
                (work / s["name"]).mkdir(parents=True, exist_ok=True)
                shutil.rmtree(work / s["name"] / "base", ignore_errors=True)
                shutil.copytree(Path(args.bases) / s["name"], work / s["name"] / "base")
        else:
            log(f"pretraining {len(shapes)} shapes at once in {work}")
            with cf.ThreadPoolExecutor(len(shapes)) as pool:
                done = list(pool.map(lambda s: pretrain_job(s, work, pre_sets, args.device, args.job_timeout), shapes))
        result["pretrain"] = {r["name"]: {k: v for k, v in r.items() if k != "curve"} for r in done}
        for r in done:
            log(f"{r['name']}: " + (f"FAILED {r['error']}" if "error" in r else
                                    f"{r['parameters'] / 1e6:.2f}M params, {r['steps']} steps, held-back loss "
                                    f"{r['val_loss']}, copy acc {r.get('copy_accuracy')} by length "
                                    f"{r.get('copy_accuracy_by_length')}"))
            if "error" in r:
                result["errors"][f"pretrain/{r['name']}"] = r["error"]
            elif args.keep_bases and not args.bases:
                dst = Path(args.keep_bases) / r["name"]
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(work / r["name"] / "base", dst)
        if args.prime:
            ok = [s for s in shapes if "error" not in result["pretrain"][s["name"]]]
            specs = [{"kind": "prepare", "seed": args.seed, "dir": str(work / s["name"] / "prime"),
                      "threads": args.threads or max(1, (os.cpu_count() or 1) // max(1, len(ok))),
                      "overrides": [*prime_sets, *_stages.seed_overrides(args.seed),
                                    f"base={work / s['name'] / 'base'}"]} for s in ok]
            script = str(Path(__file__).with_name("rl_budget.py"))
            if args.save:  # the pretraining figures are kept even if priming runs out of time
                Path(args.save).parent.mkdir(parents=True, exist_ok=True)
                Path(args.save).write_text(json.dumps(result, indent=2) + "\n")
            primed = _stages.run_all(script, specs, args.workers or len(specs) or 1,
                                     args.prime_timeout or args.job_timeout,
                                     lambda sp: f"prime {Path(sp['dir']).parent.name}", log)
            result["primed"] = {}
            for s, p in zip(ok, primed, strict=True):
                if not p.get("ok"):
                    result["errors"][f"prime/{s['name']}"] = p.get("error")
                    continue
                result["primed"][s["name"]] = {k: p.get(k) for k in (
                    "sft_success", "sft_greedy_success", "sft_pass_at_k", "sft_multistep_success",
                    "sft_multistep_pass_at_k", "sft_final_loss", "by_tool", "minutes")}
        result["settings"] = {"pretrain": pre_sets, "prime": prime_sets if args.prime else None, "seed": args.seed}
        result["machine"] = _stages.machine()
        result["minutes"] = round((time.perf_counter() - start) / 60, 2)
    finally:
        if tmp and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    _stages.report(result, args.save, head=("quick", "shapes", "minutes"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
