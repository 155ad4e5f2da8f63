"""Pretraining of the tiny base policy: a causal LM on the zoo's corpus (rl.corpus).

    python -m rl.pretrain --out rl/base --device cuda            # the shipped base (rl/base)
    python -m rl.pretrain --out /tmp/b --set steps=50 --set corpus.tasks_per_domain=5   # a quick one

A random-init policy cannot copy an id from the user's request into a tool call's JSON, so RL
on it sees all-zero groups on most task families (bench/results/efficacy_studies_h100.md). A
user runs RL on a pretrained model; with no model hub here, this module makes one: the
:mod:`rl.tiny` architecture and BPE tokenizer, trained on every token of the corpus (documents
packed into fixed-length windows, ``<|endoftext|>`` between them), AdamW with warmup and a
cosine decay. Every ``eval_every`` steps it reports the loss on held-back documents, the
token accuracy inside ``<tool_call>`` blocks (teacher-forced: the copy skill, measured) and the
copy-from-tool-output accuracy (the tokens of an answer or call that repeat a value a tool returned,
rl.corpus.copy_spans: what the multi-step families need).

The result is cached by content: ``pretrain.json`` in the output folder holds a hash of the
settings, the recipe version (RECIPE) and the zoo; a call with the same inputs finds
it and returns at once. The same manifest keeps the loss curve (``dojo demo`` plots it) and the
sha256 of each file, so a shipped copy can be verified (:func:`verify_base`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rl.corpus import CorpusSettings

__all__ = ["PretrainSettings", "PretrainResult", "pretrain", "verify_base", "MANIFEST", "plot_loss"]

MANIFEST = "pretrain.json"
FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
RECIPE = 1  # the corpus (rl.corpus) and training loop version: a cached base of another recipe is rebuilt


class PretrainSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    vocab_size: int = 2048
    # the shipped base's shape: 4x wider and 2x deeper primed no better and costs the CPU demo more
    # (bench/results/pretrained_base_h100.md)
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    corpus: CorpusSettings = Field(default_factory=CorpusSettings)
    seq_len: int = Field(1024, gt=8)
    batch_size: int = Field(32, gt=0, description="windows of seq_len tokens per step")
    steps: int = Field(4000, gt=0)
    learning_rate: float = Field(3e-3, gt=0)
    warmup_steps: int = Field(100, ge=0)
    weight_decay: float = Field(0.1, ge=0)
    val_docs: float = Field(0.02, gt=0, lt=1, description="share of documents held back for the loss/accuracy")
    eval_every: int = Field(200, gt=0)
    save_dtype: str = Field("bfloat16", pattern="^(bfloat16|float16|float32)$")
    max_minutes: float | None = Field(None, gt=0, description="stop training after this long (the steps done are recorded)")


class PretrainResult(BaseModel):
    model_dir: str
    hash: str
    cached: bool
    parameters: int
    train_tokens: int
    steps: int
    seconds: float
    final_loss: float | None
    val_loss: float | None
    tool_call_accuracy: float | None
    corpus_seconds: float | None = Field(None, description="building the corpus (0 when cached)")
    copy_accuracy: float | None = Field(None, description="teacher-forced token accuracy where the assistant "
                                                          "copies a value from a tool's output (rl.corpus.copy_spans)")
    copy_accuracy_by_length: dict[str, float] = Field(default_factory=dict, description="copy_accuracy per "
                                                      "length (tokens) of the tool output copied from")
    copy_tokens_by_length: dict[str, int] = Field(default_factory=dict, description="copied tokens measured per bucket")
    curve: list[dict[str, float]]


def _code_hash() -> str:
    """The recipe versions and the zoo: what, besides the settings, decides the corpus and the model.
    Bump RECIPE (or rl.tiny's) when a change to the corpus or the training loop changes the result."""
    from rl.tiny import _RECIPE as TINY_RECIPE
    from toolzoo.domains import seed_zoo

    h = hashlib.sha256(f"pretrain {RECIPE} tiny {TINY_RECIPE}".encode())
    h.update(seed_zoo().model_dump_json().encode())
    return h.hexdigest()


def corpus_hash(c: CorpusSettings) -> str:
    data = c.model_dump(exclude={"workers", "backend"})  # neither changes the texts
    return hashlib.sha256(json.dumps({"corpus": data, "code": _code_hash()}, sort_keys=True).encode()).hexdigest()


def settings_hash(s: PretrainSettings) -> str:
    data = s.model_dump(exclude={"max_minutes"})
    data["corpus"] = corpus_hash(s.corpus)
    return hashlib.sha256(json.dumps({"settings": data, "code": _code_hash()}, sort_keys=True).encode()).hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify_base(model_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a pretrained base, after checking every file against its recorded sha256."""
    d = Path(model_dir)
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{d}: no readable {MANIFEST} (not a pretrained base?): {e}") from None
    for name, digest in manifest.get("files", {}).items():
        if not (d / name).is_file():
            raise ValueError(f"{d}: {name} is missing")
        if _sha(d / name) != digest:
            raise ValueError(f"{d}: {name} does not match its recorded sha256 (corrupt or changed)")
    return manifest


def _cached(out: Path, digest: str) -> dict[str, Any] | None:
    try:
        manifest = verify_base(out)
    except ValueError:
        return None
    return manifest if manifest.get("hash") == digest else None


def _tokenize(tok: Any, texts: list[str]) -> list[list[int]]:
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    enc = tok(texts, add_special_tokens=False)["input_ids"]
    return [ids + [eos] for ids in enc]


def _windows(docs: list[list[int]], seq_len: int):
    import torch

    flat = [t for d in docs for t in d]
    n = (len(flat) - 1) // seq_len
    if n < 1:
        raise ValueError(f"the corpus has {len(flat)} tokens: fewer than one window of {seq_len}")
    x = torch.tensor(flat[: n * seq_len + 1], dtype=torch.long)
    return x[:-1].view(n, seq_len), x[1:].view(n, seq_len)


def _tool_mask(targets, open_id: int, close_id: int):
    """True where the target token sits inside a <tool_call> ... </tool_call> block (tags excluded)."""
    import torch

    flat = targets.reshape(-1)
    depth = torch.cumsum((flat == open_id).long() - (flat == close_id).long(), 0)
    inside = (depth > 0) & (flat != open_id)
    return inside.view_as(targets)


def _evaluate(model, xs, ys, open_id: int, close_id: int, device: str, batch: int) -> tuple[float, float | None]:
    import torch

    model.eval()
    loss_sum, n_tok, hit, n_tc = 0.0, 0, 0, 0
    with torch.no_grad():
        for i in range(0, len(xs), batch):
            x, y = xs[i:i + batch].to(device), ys[i:i + batch].to(device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda")):
                logits = model(input_ids=x).logits.float()
            loss_sum += torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1),
                                                          reduction="sum").item()
            n_tok += y.numel()
            mask = _tool_mask(y, open_id, close_id)
            hit += ((logits.argmax(-1) == y) & mask).sum().item()
            n_tc += mask.sum().item()
    model.train()
    return loss_sum / max(1, n_tok), (hit / n_tc if n_tc else None)


COPY_BUCKETS: tuple[tuple[str, int, int], ...] = (("<200", 0, 200), ("200-500", 200, 500),
                                                   ("500-1000", 500, 1000), ("1000+", 1000, 10 ** 9))


def _copy_items(tok: Any, texts: list[str], max_len: int,
                limit: int = 800) -> list[tuple[list[int], list[int], list[str]]]:
    """Held-back transcripts with copy spans: (token ids, positions of the tokens inside a span, the
    length bucket, in tokens, of the tool output each of those tokens copies from)."""
    import re

    from rl.corpus import copy_spans

    resp = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)
    items = []
    for text in texts:
        spans = copy_spans(text)
        if not spans:
            continue
        ends = [(m.end(), len(tok(m.group(1), add_special_tokens=False)["input_ids"])) for m in resp.finditer(text)]
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offs = enc["input_ids"][:max_len], enc["offset_mapping"][:max_len]
        pos, buckets = [], []
        for i, (a, b) in enumerate(offs):
            if i and b > a and any(s <= a and b <= e for s, e in spans):
                n = max((k for end, k in ends if end <= a), default=0)
                pos.append(i)
                buckets.append(next(name for name, lo, hi in COPY_BUCKETS if lo <= n < hi))
        if pos:
            items.append((ids, pos, buckets))
        if len(items) >= limit:
            break
    return items


def _copy_accuracy(model: Any, items: list[tuple[list[int], list[int], list[str]]],
                   device: str) -> tuple[float | None, dict[str, float]]:
    """Teacher-forced: the share of copied tokens the model predicts (argmax) from what precedes them,
    overall and per length bucket of the tool output copied from."""
    import torch

    hit: dict[str, int] = {}
    n: dict[str, int] = {}
    model.eval()
    with torch.no_grad():
        for ids, pos, buckets in items:
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda")):
                pred = model(input_ids=torch.tensor([ids], device=device)).logits[0].argmax(-1).tolist()
            for i, b in zip(pos, buckets, strict=True):
                hit[b] = hit.get(b, 0) + (pred[i - 1] == ids[i])
                n[b] = n.get(b, 0) + 1
    model.train()
    total = sum(n.values())
    by_len = {b: round(hit[b] / n[b], 4) for b, *_ in COPY_BUCKETS if n.get(b)}
    return (sum(hit.values()) / total if total else None), by_len


def plot_loss(curve: list[dict[str, float]], path: str | os.PathLike[str], title: str = "pretraining") -> Path | None:
    """The train loss (and held-back loss where measured) against the step, as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib comes with the train extra
        return None
    tr = [(p["step"], p["loss"]) for p in curve if "loss" in p]
    va = [(p["step"], p["val_loss"]) for p in curve if "val_loss" in p]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if tr:
        ax.plot([p[0] for p in tr], [p[1] for p in tr], label="train loss")
    if va:
        ax.plot([p[0] for p in va], [p[1] for p in va], "o-", label="held-back loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def pretrain(settings: PretrainSettings | None = None, out_dir: str | os.PathLike[str] = "runs/pretrain", *,
             device: str | None = None, console: Any = None) -> PretrainResult:
    """Build the corpus, pretrain the tiny model on it, save it in ``out_dir`` (or find it cached there)."""
    import torch
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.corpus import cached_corpus
    from rl.tiny import build_tiny_model

    s = settings or PretrainSettings()
    out = Path(out_dir)
    digest = settings_hash(s)
    hit = _cached(out, digest)
    if hit is not None:
        return PretrainResult(model_dir=str(out), hash=digest, cached=True, **hit["result"])
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).exists():
        raise FileExistsError(f"{out} is not empty and holds no pretrained base; pick another directory")
    console = console or Console(stderr=True)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    start = time.perf_counter()

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  console=console, transient=True) as bar:
        job = bar.add_task("corpus", total=None)
        t_corpus = time.perf_counter()
        corpus = cached_corpus(s.corpus, corpus_hash(s.corpus), progress=lambda name, i, n: bar.update(
            job, description=f"corpus: {name}", completed=i, total=n))
    corpus_seconds = round(time.perf_counter() - t_corpus, 1)  # ~0 when found cached
    console.print(f"corpus: {corpus.counts} documents, sha256 {corpus.digest[:12]} ({corpus_seconds} s)")

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent if out.parent.exists() else None))
    try:
        init = build_tiny_model(tmp / "init", seed=s.seed, vocab_size=s.vocab_size, hidden=s.hidden,
                                layers=s.layers, heads=s.heads, max_positions=max(2048, s.seq_len))
        tok = AutoTokenizer.from_pretrained(str(init))
        docs = _tokenize(tok, corpus.texts)
        n_val = max(1, int(len(docs) * s.val_docs))
        xs, ys = _windows(docs[n_val:], s.seq_len)
        vx, vy = _windows(docs[:n_val], s.seq_len)
        open_id, close_id = (tok.convert_tokens_to_ids(t) for t in ("<tool_call>", "</tool_call>"))
        copies = _copy_items(tok, corpus.texts[:n_val], max(2048, s.seq_len))
        console.print(f"{xs.numel():,} train tokens in {len(xs)} windows, {vx.numel():,} held back")

        torch.manual_seed(s.seed)
        model = AutoModelForCausalLM.from_pretrained(str(init), dtype=torch.float32).to(device)
        n_params = sum(p.numel() for p in model.parameters())
        decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
        rest = [p for n, p in model.named_parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": s.weight_decay},
                                 {"params": rest, "weight_decay": 0.0}], lr=s.learning_rate, betas=(0.9, 0.95),
                                fused=device.startswith("cuda"))

        def lr_at(step: int) -> float:
            if step < s.warmup_steps:
                return s.learning_rate * (step + 1) / s.warmup_steps
            frac = (step - s.warmup_steps) / max(1, s.steps - s.warmup_steps)
            return s.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))

        gen = torch.Generator().manual_seed(s.seed)
        order = torch.randperm(len(xs), generator=gen)
        pos = 0
        curve: list[dict[str, float]] = []
        running = None
        copy_by_length: dict[str, dict[str, float]] = {}
        model.train()
        with Progress(TextColumn("pretraining"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
                      TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=console) as bar:
            job = bar.add_task("pretrain", total=s.steps, info="")
            t_train = time.perf_counter()
            done = 0
            for step in range(s.steps):
                if s.max_minutes and time.perf_counter() - t_train > 60 * s.max_minutes:
                    break
                done = step + 1
                if pos + s.batch_size > len(order):
                    order, pos = torch.randperm(len(xs), generator=gen), 0
                idx = order[pos:pos + s.batch_size]
                pos += s.batch_size
                x, y = xs[idx].to(device), ys[idx].to(device)
                for g in opt.param_groups:
                    g["lr"] = lr_at(step)
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda")):
                    logits = model(input_ids=x).logits
                loss = torch.nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                li = loss.item()
                running = li if running is None else 0.9 * running + 0.1 * li
                point: dict[str, float] = {"step": step + 1, "loss": round(running, 4)}
                if (step + 1) % s.eval_every == 0 or step + 1 == s.steps or (
                        s.max_minutes and time.perf_counter() - t_train > 60 * s.max_minutes):
                    vl, acc = _evaluate(model, vx, vy, open_id, close_id, device, s.batch_size)
                    point["val_loss"] = round(vl, 4)
                    if acc is not None:
                        point["tool_call_accuracy"] = round(acc, 4)
                    copy_acc, by_len = _copy_accuracy(model, copies, device)
                    if copy_acc is not None:
                        point["copy_accuracy"] = round(copy_acc, 4)
                        copy_by_length.update({b: {"accuracy": a, "step": step + 1} for b, a in by_len.items()})
                if (step + 1) % max(1, s.steps // 200) == 0 or "val_loss" in point:
                    curve.append(point)
                bar.update(job, advance=1, info=f"loss {running:.3f}" + (
                    f" | held-back {point['val_loss']:.3f}, tool-call acc {point.get('tool_call_accuracy', 0):.3f}"
                    f", copy acc {point.get('copy_accuracy', 0):.3f}"
                    if "val_loss" in point else ""))

        last = next((p for p in reversed(curve) if "val_loss" in p), {})
        seconds = time.perf_counter() - start
        result = {"parameters": n_params, "train_tokens": int(xs.numel()), "steps": done,
                  "seconds": round(seconds, 1), "corpus_seconds": corpus_seconds, "final_loss": running, "val_loss": last.get("val_loss"),
                  "tool_call_accuracy": last.get("tool_call_accuracy"), "copy_accuracy": last.get("copy_accuracy"),
                  "copy_accuracy_by_length": {b: v["accuracy"] for b, v in copy_by_length.items()},
                  "copy_tokens_by_length": {b: sum(x == b for it in copies for x in it[2]) for b, *_ in COPY_BUCKETS},
                  "curve": curve}
        stage = tmp / "model"
        model.to(getattr(torch, s.save_dtype)).save_pretrained(stage, safe_serialization=True)
        tok.save_pretrained(stage)
        for f in ("tokenizer_config.json", "tokenizer.json"):  # the exact files rl.tiny wrote
            shutil.copy(init / f, stage / f)
        for f in stage.iterdir():
            if f.name not in FILES and f.suffix not in (".jinja",):
                f.unlink()
        manifest = {"hash": digest, "settings": s.model_dump(), "corpus": {"counts": corpus.counts,
                                                                          "sha256": corpus.digest},
                    "device": device, "result": result,
                    "files": {f.name: _sha(f) for f in sorted(stage.iterdir())}}
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        plot_loss(curve, stage / "loss_curve.png", f"pretraining ({n_params / 1e6:.1f}M parameters)")
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(stage), str(out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return PretrainResult(model_dir=str(out), hash=digest, cached=False, **result)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from rl.config import apply_overrides

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/pretrain")
    ap.add_argument("--device", default=None)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    s = PretrainSettings.model_validate(apply_overrides(PretrainSettings().model_dump(), args.overrides))
    res = pretrain(s, args.out, device=args.device)
    print(json.dumps(res.model_dump(exclude={"curve"})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
