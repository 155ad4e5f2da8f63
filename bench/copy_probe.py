"""Does a base copy a value out of a tool output, or recall it? (issue 28, section 33 of
bench/results/reader_gpu.md). CPU, teacher-forced, no sampling.

The same copy drills (rl.copy_drills, keyed, reads of a ~200-token list, seed 4242: no corpus part's seed)
are played in three worlds of each domain, and at each token of the answer's values the model's
argmax given everything before it is compared with the gold token (bench/reader_choice.score_episode):

- ``own``: the domain's seeded worlds, whose values the corpus's transcripts of that domain hold: a base can
  answer from memory (the baseline, measured in the same run);
- ``made_up``: a foreign world of made-up words (rl.copy_drills.foreign), whose values no corpus text holds
  outside the demo domain's own drills;
- ``real``: a foreign world of real words of the same kinds, none of the world's (``foreign(words="real")``).

Where ``own`` is high and the foreign worlds are near 0, the base recalls values and does not copy them.

    PYTHONPATH=. python bench/copy_probe.py --models /tmp/bases/0.66M_kdx,rl/base \\
        [--domains retail_orders,library_loans,home_devices] [--drills 20] [--out bench/results/copy_probe_cpu.json]

One JSON line last.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WORLDS = ("own", "made_up", "real")
PAIR = re.compile(r'"[^"]+": ("(?:[^"\\]|\\.)*"|[-\d.]+)')


def _reader_choice():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_reader_choice", Path(__file__).with_name("reader_choice.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def answer_values(text: str) -> list[str]:
    """The values of the drill's keyed answer (`All done. "room": "porch", "on": false` -> ["porch"]): strings
    and numbers of 2+ characters; booleans are no copy. A look-up that ends in a call with the id has none."""
    if "All done. " not in text:
        return []
    tail = text[text.rindex("All done. "):]
    out = []
    for m in PAIR.finditer(tail):
        v = json.loads(m.group(1))
        if len(str(v)) >= 2:
            out.append(str(v))
    return out


def drills(domain: str, world: str, n: int, seed: int = 4242) -> list[str]:
    """``n`` reads of a ~200-token list of ``domain`` in ``world`` (one-record reads are drilled on foreign worlds
    only, so the worlds are compared on list reads)."""
    from rl.copy_drills import copy_drills
    from toolzoo.domains import load_domain

    d = load_domain(domain)
    if world == "own":
        return copy_drills(d, n, seed, (200,), style="keyed")
    return copy_drills(d, n, seed, (200,), style="keyed", foreign_world=True, records=0, words=world)


def probe(paths: list[str], domains: list[str], n: int) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rc = _reader_choice()
    texts = {(d, w): drills(d, w, n) for d in domains for w in WORLDS}
    out: dict[str, Any] = {}
    for path in paths:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        res: dict[str, Any] = {}
        for (d, w), ts in texts.items():
            records = [r for t in ts for r in rc.score_episode(model, tok, t, answer_values(t))]
            res.setdefault(d, {})[w] = {k: v for k, v in rc.summarise(records).items() if k != "candidates"}
        out[path] = res
        print(f"[copy_probe] {path}: {json.dumps(res)}", file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="comma-separated model folders")
    ap.add_argument("--domains", default="retail_orders,library_loans,home_devices")
    ap.add_argument("--drills", type=int, default=30, help="list reads per domain and world")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    t0 = time.time()
    models = probe([p for p in args.models.split(",") if p], [d for d in args.domains.split(",") if d], args.drills)
    result = {"bench": "copy_probe", "worlds": list(WORLDS), "drills": args.drills, "models": models,
              "seconds": round(time.time() - t0, 1)}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
