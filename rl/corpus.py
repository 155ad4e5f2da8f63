"""The pretraining corpus of the tiny base policy, built from the tool zoo alone.

    texts = build_corpus(CorpusSettings(exclude_domains=["home_devices"], tasks_per_domain=400)).texts

Three kinds of documents, each a plain string:

1. Docs: every domain's description and policy, every tool's name, description, JSON schema,
   return schema and error codes.
2. Data: each domain's seeded state (``seed(random.Random(s))`` for the task synthesiser's domain
   seeds), rendered as one ``key: value`` line per record, so ids, names and values appear next to
   each other the way a tool's output shows them.
3. Transcripts: replay-validated single- and two-action tasks (synth.tasks), and with
   ``multistep_per_family`` tasks of the multi-step families (synth.task_families), run as real priming
   episodes (synth.behaviours, the gold-call ``none`` condition and the behaviour-rich ``all``
   condition) and rendered with the policy's chat template: system prompt, tool block, the user's
   request, the assistant's ``<tool_call>`` JSON, the tool's answer and the final reply. This is
   where the copy skill comes from: ids and values from the user's text reappear in the JSON
   arguments, and values from the tool's output reappear in the answer.

What the demo evaluates on must not be here. The demo's held-out tasks come from its ``domains``
(home_devices by default), so those domains give docs only (the tool schemas the policy sees in
every prompt anyway): no seeded data, no transcripts; with ``drill_excluded``, copy drills on a foreign
world (rl.copy_drills.foreign: none of their ids, words or numbers). ``tests/rl/test_corpus.py`` proves that no
held-out task's instruction, gold call or expected outputs occurs in the corpus.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rl.chat_render import render_transcript
from rl.copy_drills import DrillStyle, ForeignWords

__all__ = ["CorpusSettings", "Corpus", "build_corpus", "cached_corpus", "copy_spans", "domain_docs", "domain_data"]


class CorpusSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    exclude_domains: list[str] = Field(default_factory=lambda: ["home_devices"],
                                       description="domains the demo evaluates on: docs only, no data, no transcripts")
    domains: list[str] | None = Field(None, description="the transcript domains (None: every other zoo domain)")
    tasks_per_domain: int = Field(400, ge=0)
    conditions: list[str] = Field(default_factory=lambda: ["none", "all"],
                                  description="priming conditions each task is run as (synth.behaviours)")
    lengths: dict[int, float] = Field(default_factory=lambda: {1: 0.7, 2: 0.3},
                                      description="gold actions per task and their weights")
    multistep_per_family: int = Field(0, ge=0, description="per domain, tasks of each multi-step family "
                                                           "(synth.task_families: look up then act, read and "
                                                           "report, ask the user), run like the others")
    family_rounds: int = Field(2, ge=1, description="synthesis rounds per multi-step family and domain: a domain "
                                                    "where a shape is rare gives fewer tasks instead of 8 rounds of "
                                                    "mostly discarded synthesis (the slow part of the build)")
    copy_drills_per_length: int = Field(0, ge=0, description="per domain and tool-output length, copy drills "
                                                              "(rl.copy_drills: a value read out of a long real "
                                                              "tool output)")
    drill_lengths: list[int] = Field(default_factory=lambda: [200, 500, 1000],
                                     description="tool-output lengths of the copy drills, in tokens")
    drill_excluded: bool = Field(False, description="drill the excluded domains too, on a foreign world "
                                                     "(rl.copy_drills.foreign: fresh ids, made-up words and "
                                                     "numbers), so the base learns their outputs' format")
    record_drills: int | None = Field(None, ge=0, description="one-record reads per foreign-world domain "
                                                             "(default: copy_drills_per_length)")
    foreign_all: bool | None = Field(None, description="drill every domain on a foreign world, not its own: its own "
                                                       "world's values are in its transcripts, so a base can recall "
                                                       "them instead of copying (bench/copy_probe.py)")
    foreign_words: ForeignWords | None = Field(None, description="a foreign world's strings: made-up words "
                                                                 "(default) or real ones of the same kind, none of the "
                                                                 "world's (rl.copy_drills.foreign)")
    drill_style: DrillStyle = Field(
        "prose", description="how a drill's question and answer name the field and value (rl.copy_drills): prose, "
                             "or keyed as the output writes the pair (the demo's keyed priming, issue 28)")
    seed: int = 1000
    system_prompt: str = "brief"
    backend: str = "auto"
    workers: int = Field(1, ge=1, description="domains built in parallel processes (not part of the content)")


class Corpus(BaseModel):
    texts: list[str]
    counts: dict[str, int]
    digest: str = Field(description="sha256 over the texts, in order")


def _zoo():
    from toolzoo.domains import seed_zoo

    return seed_zoo()


def domain_docs(domain: Any) -> list[str]:
    """A domain's description, policy and tools as text."""
    out = [f"{domain.name}: {domain.description}", domain.policy]
    for t in domain.tools:
        out.append(f"{t.name}: {t.description}\nparameters: {json.dumps(t.parameters, ensure_ascii=False)}")
        if t.returns:
            out.append(f"{t.name} returns: {json.dumps(t.returns, ensure_ascii=False)}")
        out += [f"{t.name} error {code}: {why}" for code, why in t.errors.items()]
    return out


def _records(obj: Any, path: str = "") -> list[str]:
    """One line per record (a dict of scalars) in a nested state, with the path that leads to it."""
    if isinstance(obj, dict):
        scalars = {k: v for k, v in obj.items() if not isinstance(v, (dict, list))}
        lines = []
        if scalars:
            lines.append((f"{path}: " if path else "") + "; ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}"
                                                                    for k, v in scalars.items()))
        for k, v in obj.items():
            if isinstance(v, (dict, list)):
                lines += _records(v, f"{path}.{k}" if path else str(k))
        return lines
    if isinstance(obj, list):
        return [line for i, v in enumerate(obj) for line in _records(v, f"{path}[{i}]")]
    return [f"{path}: {json.dumps(obj, ensure_ascii=False)}"]


def domain_data(domain: Any, seeds: range) -> list[str]:
    """The domain's seeded state for each seed, rendered as text (the zoo's own stdlib-only code)."""
    from sandboxes.toolserver import InvalidArguments, ToolFailure
    from toolzoo.runtime import bundle

    out = []
    for s in seeds:
        ns: dict[str, Any] = {"ToolFailure": ToolFailure, "InvalidArguments": InvalidArguments,
                              "__name__": f"corpus_{domain.name}"}
        exec(compile(bundle(domain, seed=s).source, f"<{domain.name}>", "exec"), ns)  # noqa: S102 - the zoo's code
        lines = _records(ns["INITIAL_STATE"])
        out.append(f"{domain.name} data (seed {s}):\n" + "\n".join(lines))
    return out


_DRILL_FIELDS = {"copy_drills_per_length", "drill_lengths", "drill_style", "drill_excluded", "record_drills",
                 "foreign_words", "foreign_all"}
_FOREIGN_FIELDS = {"record_drills", "foreign_words"}  # what a domain drilled on its own world ignores


def _part_key(s: CorpusSettings, name: str, seed: int, kind: str = "transcripts") -> str:
    """What one domain's part of the corpus depends on: the settings that shape it, the domain, the seed,
    the code that writes it and the zoo (a part is rebuilt when any of them changes, and found again when
    none did). Transcripts and drills are separate parts, so a drill setting rebuilds only the drills
    (the transcripts are the slow part: synthesis and a sandboxed replay)."""
    from toolzoo.domains import load_domain

    # unset: keys as before; a domain with tasks is drilled on its own world, which no foreign-world field touches
    ignored = set() if name in s.exclude_domains or s.foreign_all else _FOREIGN_FIELDS
    shaped = (s.model_dump(include=_DRILL_FIELDS - ignored, exclude_none=True) if kind == "drills"
              else s.model_dump(exclude={"workers", "backend", *_DRILL_FIELDS}))
    h = hashlib.sha256(json.dumps({"s": shaped, "d": name, "seed": seed, "kind": kind}, sort_keys=True).encode())
    h.update((Path(__file__).parent / ("copy_drills.py" if kind == "drills" else "corpus.py")).read_bytes())
    h.update(load_domain(name).model_dump_json().encode())
    return h.hexdigest()


def _cached(cache: str | None, key: str, build: Callable[[], list[str]]) -> list[str]:
    """``build()``'s texts, kept in ``cache``/parts under ``key`` (gzipped JSON) and read back from there."""
    import gzip
    import os

    path = Path(cache) / "parts" / f"{key}.json.gz" if cache else None
    if path is not None and path.is_file():
        try:
            return json.loads(gzip.decompress(path.read_bytes()))
        except (OSError, ValueError):
            pass
    texts = build()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(gzip.compress(json.dumps(texts).encode(), 6))
        os.replace(tmp, path)
    return texts


def _part(job: tuple[CorpusSettings, str, int, str | None]) -> list[str]:
    """One domain's transcripts, then its drills, each from the part cache (``cache``/parts, gzipped JSON)
    or built; an excluded domain's part is its foreign-world drills alone."""
    s, name, seed, cache = job
    excluded = name in s.exclude_domains
    foreign = excluded or bool(s.foreign_all)
    texts = [] if excluded else _cached(cache, _part_key(s, name, seed), lambda: _transcripts(s, name, seed))
    if s.copy_drills_per_length:
        from rl.copy_drills import copy_drills
        from toolzoo.domains import load_domain

        texts = texts + _cached(cache, _part_key(s, name, seed, "drills"),
                                lambda: copy_drills(load_domain(name), s.copy_drills_per_length, seed,
                                                    tuple(s.drill_lengths), style=s.drill_style,
                                                    foreign_world=foreign, records=s.record_drills,
                                                    words=s.foreign_words or "made_up"))
    return texts


def _transcripts(s: CorpusSettings, name: str, seed: int) -> list[str]:
    """One domain's tasks, run as priming episodes under each condition, rendered."""
    from synth.behaviours import generate_traces
    from synth.sft_data import trl_row
    from synth.tasks import synthesize_tasks

    tasks = list(synthesize_tasks(s.tasks_per_domain, seed=seed, domains=[name], backend=s.backend,
                                  lengths=s.lengths, user_info_rate=0.0).tasks) if s.tasks_per_domain else []
    if s.multistep_per_family:
        from synth.task_families import MULTISTEP, synthesize_family_tasks

        fams = synthesize_family_tasks({f: s.multistep_per_family for f in MULTISTEP}, seed=seed, domains=[name],
                                       backend=s.backend, rounds=s.family_rounds)
        tasks += [t for f in MULTISTEP for t in fams[f]]
    out = []
    for condition in s.conditions:
        for traj in generate_traces(tasks, condition, backend=s.backend, system_prompt=s.system_prompt,
                                    seed=seed):
            row = trl_row(traj)
            if row is not None:
                out.append(render_transcript(row["messages"], row["tools"]))
    return out


def build_corpus(settings: CorpusSettings | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 parts_cache: str | Path | None = None) -> Corpus:
    """Docs, data, transcripts and copy drills (module docstring); same settings -> the same texts.
    Each domain's part is built in its own process (``settings.workers``) and, with ``parts_cache``,
    kept there by content hash, so a change to one setting rebuilds only what it touches."""
    from synth.tasks import DOMAIN_SEEDS

    s = settings or CorpusSettings()
    zoo = _zoo()
    names = [d.name for d in zoo.domains]
    unknown = [d for d in [*s.exclude_domains, *(s.domains or [])] if d not in names]
    if unknown:
        raise ValueError(f"unknown domains {unknown}; the zoo has {', '.join(names)}")
    talk = [d for d in (s.domains or names) if d not in s.exclude_domains]
    docs: list[str] = []
    data: list[str] = []
    for d in zoo.domains:
        docs += domain_docs(d)
        if d.name in talk:
            data += domain_data(d, range(DOMAIN_SEEDS))
    transcripts: list[str] = []
    cache = str(parts_cache) if parts_cache else None
    jobs = [(s, name, s.seed + i, cache) for i, name in enumerate(talk)] \
        if s.tasks_per_domain or s.multistep_per_family or s.copy_drills_per_length else []
    if s.drill_excluded and s.copy_drills_per_length:  # after the others: their parts' seeds stay as they were
        jobs += [(s, name, s.seed + len(talk) + i, cache) for i, name in enumerate(s.exclude_domains)]
    if s.workers > 1 and len(jobs) > 1:
        import concurrent.futures as cf
        import multiprocessing as mp

        with cf.ProcessPoolExecutor(s.workers, mp_context=mp.get_context("spawn")) as pool:
            for i, texts in enumerate(pool.map(_part, jobs)):  # in order: the corpus is deterministic
                transcripts += texts
                if progress:
                    progress(jobs[i][1], i + 1, len(jobs))
    else:
        for i, job in enumerate(jobs):
            transcripts += _part(job)
            if progress:
                progress(job[1], i + 1, len(jobs))
    texts = docs + data + transcripts
    random.Random(s.seed).shuffle(texts)
    h = hashlib.sha256()
    for t in texts:
        h.update(hashlib.sha256(t.encode()).digest())
    return Corpus(texts=texts, counts={"docs": len(docs), "data": len(data), "transcripts": len(transcripts)},
                  digest=h.hexdigest())


def cached_corpus(settings: CorpusSettings, key: str, cache_dir: str | Path | None = None,
                  progress: Callable[[str, int, int], None] | None = None) -> Corpus:
    """:func:`build_corpus`, kept in ``cache_dir`` (default ``$TOOLDOJO_CACHE/corpus``) under ``key``
    (a hash of the settings and the code that builds it: rl.pretrain.settings_hash's inputs)."""
    import os

    base = Path(cache_dir) if cache_dir else Path(os.environ.get("TOOLDOJO_CACHE") or
                                                  Path.home() / ".cache" / "tooldojo") / "corpus"
    import gzip

    path = base / f"{key}.json.gz"  # gzipped: the multi-step corpus is ~10x smaller so (it travels to GPUs)
    for found in (path, base / f"{key}.json"):
        if found.is_file():
            try:
                raw = found.read_bytes()
                return Corpus.model_validate_json(gzip.decompress(raw) if found.suffix == ".gz" else raw)
            except (OSError, ValueError):
                pass
    corpus = build_corpus(settings, progress, parts_cache=base)
    base.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(gzip.compress(corpus.model_dump_json().encode(), 6))
    os.replace(tmp, path)
    return corpus


def held_out_leaks(texts: list[str], tasks: list[Any]) -> list[tuple[str, str]]:
    """Where held-out ``tasks`` show up in corpus ``texts``: (task id, what) for each instruction found
    verbatim, each gold call found as the chat template writes it (``{"name": ..., "arguments": ...}``),
    and each document that holds the gold tool's name together with every expected output as a word of its
    own (`lock` is not in `"locked"`) outside its ``<tools>`` block (the domain's tool schemas, in every prompt
    the policy sees, the held-out ones too: `"off"` and `"thermostat"` are words of home_devices' schemas)."""
    found: list[tuple[str, str]] = []
    bodies = [_TOOLS_BLOCK.sub("", doc) for doc in texts]
    for t in tasks:
        calls = [json.dumps({"name": a.name, "arguments": a.arguments}, ensure_ascii=False) for a in t.gold_actions]
        gold = t.gold_actions[0].name if t.gold_actions else None
        for doc, body in zip(texts, bodies, strict=True):
            if t.instruction in doc:
                found.append((t.id, "instruction"))
            found += [(t.id, f"gold call {c}") for c in calls if c in doc]
            if t.expected_outputs and gold and f'"name": "{gold}"' in doc and all(
                    re.search(rf"(?<!\w){re.escape(str(o))}(?!\w)", body) for o in t.expected_outputs):
                found.append((t.id, f"expected outputs {t.expected_outputs}"))
    return found


_TOOLS_BLOCK = re.compile(r"<tools>\n.*?\n</tools>", re.S)
_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)
_ASSISTANT = re.compile(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", re.S)
_USER = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.S)


def _scalars(obj: Any) -> list[str]:
    if isinstance(obj, dict):
        return [v for x in obj.values() for v in _scalars(x)]
    if isinstance(obj, list):
        return [v for x in obj for v in _scalars(x)]
    if isinstance(obj, bool) or obj is None:
        return []
    return [str(obj)]


def copy_spans(text: str) -> list[tuple[int, int]]:
    """Where a rendered transcript's assistant copies from a tool's output: the character spans, in
    the assistant turn right after a tool response, of values of that response (JSON scalars of 2+
    characters) that no user request holds. What the copy-from-tool-output accuracy is measured on
    (rl.pretrain), as the tool-call token accuracy is measured inside ``<tool_call>`` blocks."""
    said = " ".join(m.group(1) for m in _USER.finditer(text) if "<tool_response>" not in m.group(1))
    spans: list[tuple[int, int]] = []
    for r in _RESPONSE.finditer(text):
        try:
            values = {v for v in _scalars(json.loads(r.group(1))) if len(v) >= 2 and v not in said}
        except ValueError:
            continue
        turn = _ASSISTANT.search(text, r.end())
        if not turn or not values:
            continue
        body, base = turn.group(1), turn.start(1)
        for v in sorted(values, key=len, reverse=True):
            for m in re.finditer(re.escape(v), body):
                span = (base + m.start(), base + m.end())
                if not any(a < span[1] and span[0] < b for a, b in spans):
                    spans.append(span)
    return sorted(spans)
