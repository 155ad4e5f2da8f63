"""The reader corpus (issue 28): build it (or find it by its content hash), then measure and check it.

    python bench/reader_corpus.py --set multistep_per_family=100 --set copy_drills_per_length=100 \\
        --cache .carry/corpus --workers 2 --save bench/results/reader_corpus_cpu.json

Prints, with one JSON line last: the build's wall time (0 when cached) and where it went (parts found
in the part cache vs built), the counts per kind, the gzipped size (what travels to a GPU machine;
the issue's bound is 50 MB), how many copy-target tool outputs fall in each length bucket (tokens,
the base's tokenizer), and the held-out check: every demo held-out task of seeds 0-2 (the demo's and
the studies' seeds) against every document (rl.corpus.held_out_leaks, the check
tests/rl/test_corpus.py runs on a small corpus), which must find nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also in the build's spawned workers (they rerun this)
import _common  # noqa: E402, F401  (first: fixes sys.path)

from bench._common import emit  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="an rl.corpus.CorpusSettings field, e.g. copy_drills_per_length=100")
    ap.add_argument("--cache", default=None, help="corpus cache folder (default $TOOLDOJO_CACHE/corpus)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", default="0,1,2", help="demo seeds whose held-out tasks are checked ('' for none)")
    ap.add_argument("--save", default=None)
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from rl.config import apply_overrides
    from rl.corpus import CorpusSettings, cached_corpus, copy_spans, held_out_leaks
    from rl.demo import SHIPPED_BASE, load_demo_config, make_tasks
    from rl.pretrain import COPY_BUCKETS, corpus_hash

    s = CorpusSettings.model_validate(apply_overrides(CorpusSettings().model_dump(), args.overrides))
    s = s.model_copy(update={"workers": args.workers, "backend": "local"})
    key = corpus_hash(s)
    cache = Path(args.cache) if args.cache else None
    t0 = time.perf_counter()
    parts_before = len(list((cache / "parts").glob("*.json.gz"))) if cache and (cache / "parts").is_dir() else 0
    corpus = cached_corpus(s, key, cache_dir=cache, progress=lambda n, i, k: print(
        f"[reader_corpus] {time.perf_counter() - t0:.0f}s {i}/{k} {n}", file=sys.stderr, flush=True))
    seconds = round(time.perf_counter() - t0, 1)
    gz = next((p for p in ([cache] if cache else []) for p in p.glob(f"{key}.json.gz")), None)

    tok = AutoTokenizer.from_pretrained(str(SHIPPED_BASE))
    resp = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)
    buckets = {name: 0 for name, *_ in COPY_BUCKETS}
    drills = sum(t.count("<tool_response>") == 1 and ("I need its id." in t or "What is the " in t
                                                       or "Please " in t) for t in corpus.texts)
    tokens = 0
    for text in corpus.texts:
        tokens += len(text) // 3  # a cheap count; the exact one is rl.pretrain's train_tokens
        spans = copy_spans(text)
        if not spans:
            continue
        for m in resp.finditer(text):
            if any(m.end() <= a for a, _ in spans):
                n = len(tok(m.group(1), add_special_tokens=False)["input_ids"])
                buckets[next(name for name, lo, hi in COPY_BUCKETS if lo <= n < hi)] += 1
    t1 = time.perf_counter()
    held = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (int(x) for x in args.seeds.split(",") if x.strip()):
            cfg = load_demo_config(None, [f"seed={seed}", f"out_dir={tmp}/demo{seed}"])
            held += make_tasks(cfg, Path(tmp) / f"demo{seed}", "local")[1]
    leaks = held_out_leaks(corpus.texts, held)
    result = {"hash": key, "digest": corpus.digest, "settings": s.model_dump(exclude={"workers", "backend"}),
              "counts": corpus.counts, "copy_drill_transcripts": drills, "approx_tokens": tokens,
              "build_seconds": seconds, "parts_cached_before": parts_before,
              "gzip_mb": round(gz.stat().st_size / 2**20, 1) if gz else None,
              "copy_outputs_by_length": buckets, "held_out_tasks_checked": len(held), "leaks": leaks[:20],
              "leak_count": len(leaks), "check_seconds": round(time.perf_counter() - t1, 1)}
    if args.save:
        Path(args.save).write_text(json.dumps(result, indent=2) + "\n")
    emit(result, head=("counts", "gzip_mb", "leak_count"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
