"""Copy drills: transcripts that teach a tiny base to read a value out of a long tool output.

    texts = copy_drills(load_domain("retail_orders"), per_length=40, seed=3)

The multi-step families need one skill the zoo's own episodes show too rarely: the value the next
call or the final answer needs sits somewhere in a tool output of hundreds of tokens (home_devices'
device list is 400-1,000), and the model has to find its record and copy it. Most domains' seeded
states are small (their list outputs are 20-200 tokens), so their transcripts never show that at
length.

A drill is a real read of a real domain on a larger world: the domain's seeded state with each
collection grown by clones of its records (fresh ids in the collection's own pattern, names made
distinct), a read tool of the domain called on it in-process (the zoo's own stdlib-only code, as
rl.corpus.domain_data runs it), and a question about one record of that output:

- ``lookup``: the user names a record by a field other than its id; the assistant answers with the id
  or, where a write tool of the domain takes that id alone, calls it with the copied id;
- ``read``: the user names a record by its id and asks for one of its fields; the assistant answers
  with the value.

``style`` says how the question and the answer name fields and values. ``prose``: `What is the status
of robot R-3?` / `The status of robot R-3 is idle.` ``keyed``: as the demo's keyed priming writes them
(issue 28, answers=keyed with quote_fields and quote_values): the key and value quoted as the output writes
the pair, `What is the "status" of robot "R-3"?` / `All done. "status": "idle"`, so the answer repeats the
output's own tokens after the key (a copy an induction head can make) instead of mapping prose to a key.
``keyed2``: keyed, except that a read asks for two of the record's fields, drawn at random, as the demo's
read_report requests do (`Show robot "R-3" and tell me the "status" and the "zone".` / `All done. "status":
"idle", "zone": "B"`): the answer's keys are then the request's, in its order, and no key is the usual one
(bench/results/reader_gpu.md section 25: trained policies write an asked "name" in 90-97% of their answers and an
asked "room" in 20-50%, whatever the request says).

``foreign_world=True`` drills a domain on a world none of its tasks names (``foreign``): every record under
a fresh id past the world's, every string value (names, rooms, types, modes) a made-up word of consonant-vowel
syllables (which spells none of the world's words: they all hold two consonants or two vowels in a row) and
every number another; and a read tool that takes no argument is called with a free-text filter set to one
of the world's values (`list_home_devices {"room": "saka riniso"}`), since its bare call is a held-out task's
gold call word for word. A foreign world's one-record reads are drilled too (`get_home_device_status` of a
foreign device, asked one or two of its fields), since that is the read a read_report task makes. It is how
the demo's own domain gets drills (rl.corpus ``drill_excluded``): the base learns that domain's outputs and where a value sits in them, and sees no held-out entity, name, value or call
(bench/results/reader_gpu.md section 28: a 0.66M base copies in the domains its corpus holds, 34-64% first
tokens, and not in the demo's, 0-6%).

``drill_messages`` gives the drills as chat messages; ``priming_drills`` as priming trajectories (rl.demo
``prime_drills``; measured worse, bench/results/reader_gpu.md section 30).

Outputs are drawn at ``lengths`` (tool-output tokens, estimated from characters with
``CHARS_PER_TOKEN``, measured on the base's tokenizer for JSON), so the copy skill is seen at 200,
500 and 1,000+ tokens. Rendered with the policy's chat template, like every corpus transcript.
The demo's domains are drilled only ``foreign`` (rl.corpus), and a drill names no held-out task.
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any, Callable, Literal, get_args

from rl.chat_render import render_transcript
from synth.task_values import humanize, id_like, json_pair

__all__ = ["CHARS_PER_TOKEN", "copy_drills", "DRILL_LENGTHS", "DRILL_STYLES", "DrillStyle", "drill_messages", "foreign",
           "ForeignWords", "priming_drills"]

CHARS_PER_TOKEN = 1.75  # JSON tool outputs on the base's 2,048-token BPE (rl/base): 1.6-1.9, measured
DRILL_LENGTHS: tuple[int, ...] = (200, 500, 1000)
DrillStyle = Literal["prose", "keyed", "keyed2"]
ForeignWords = Literal["made_up", "real"]
DRILL_STYLES: tuple[str, ...] = get_args(DrillStyle)
_FACTORS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32)
_TAIL_NUMBER = re.compile(r"^(.*?)(\d+)$")
_MARKS = ("North", "South", "Blue", "Red", "Alpha", "Beta", "Prime", "Lite", "Max", "Mini", "East", "West",
          "Gold", "Green", "Nova", "Echo", "Delta", "Omega", "Pro", "Plus")


def _namespace(domain: Any, seed: int) -> dict[str, Any]:
    from sandboxes.toolserver import InvalidArguments, ToolFailure
    from toolzoo.runtime import bundle

    ns: dict[str, Any] = {"ToolFailure": ToolFailure, "InvalidArguments": InvalidArguments,
                          "__name__": f"drill_{domain.name}"}
    exec(compile(bundle(domain, seed=seed).source, f"<{domain.name}>", "exec"), ns)  # noqa: S102 - the zoo's code
    return ns


def _collections(state: dict[str, Any]) -> list[str]:
    """Top-level keys holding records keyed by id (the zoo's convention for entities)."""
    return [k for k, v in state.items()
            if isinstance(v, dict) and len(v) >= 1 and all(isinstance(r, dict) for r in v.values())]


def _fresh_ids(existing: list[str], n: int, rng: random.Random, skip: int = 0) -> list[str]:
    taken = set(existing)
    out: list[str] = []
    m = _TAIL_NUMBER.match(existing[0]) if existing else None
    prefix, width = (m.group(1), len(m.group(2))) if m else (f"{existing[0]}-" if existing else "X-", 1)
    top = skip + max((int(x.group(2)) for x in map(_TAIL_NUMBER.match, existing) if x), default=0)
    while len(out) < n:
        top += rng.randint(1, 3)
        new = f"{prefix}{top:0{width}d}"
        if new not in taken:
            taken.add(new)
            out.append(new)
    return out


def _grow(state: dict[str, Any], factor: int, rng: random.Random) -> dict[str, Any]:
    """The state with each collection ``factor`` times as large: clones of its records under fresh ids,
    with string fields that name a record (name, title, label...) made distinct by a word."""
    grown = copy.deepcopy(state)
    for key in _collections(state):
        records = grown[key]
        ids = list(records)
        for new in _fresh_ids(ids, len(ids) * (factor - 1), rng):
            rec = copy.deepcopy(records[rng.choice(ids)])
            for f, v in rec.items():
                if isinstance(v, str) and not id_like(f, v) and f.lower() in ("name", "title", "label", "nickname",
                                                                             "subject", "display_name", "item"):
                    rec[f] = f"{v} {rng.choice(_MARKS)} {new.split('-')[-1]}"
                elif f.lower() == "id" or (f.lower().endswith("_id") and v in ids and v == rec.get(f)
                                           and f.lower().startswith(key.rstrip("s")[:4])):
                    rec[f] = new
            records[new] = rec
    return grown


_CONSONANTS, _VOWELS = "bdfgkmnprstvz", "aeiou"


def foreign(state: dict[str, Any], rng: random.Random, words: ForeignWords = "made_up") -> dict[str, Any]:
    """``state`` with no id, string or number of its own (module docstring): the same shape and keys, every
    record under a fresh id of its own prefix, ten or more past the world's (references follow; the worlds of
    other seeds hold a few more records, and a held-out task may name one), each distinct string one made-up word per word, each
    number another of its type. The domain's tools read it as they read the seeded world.

    ``words="real"``: real words of the same kind instead (:func:`_real_swap`), none of them the world's."""
    ids: dict[str, str] = {}
    for key in _collections(state):
        kinds: dict[str, list[str]] = {}  # by prefix: a thermostat stays a TH-, ten past the world's last
        for rid in state[key]:
            kinds.setdefault(m.group(1) if (m := _TAIL_NUMBER.match(rid)) else "", []).append(rid)
        for old in kinds.values():
            ids.update(zip(old, _fresh_ids(old, len(old), rng, skip=9), strict=True))
    if words == "real":
        return _real_swap(state, ids, rng)
    taken = {w.lower() for v in _strings(state) for w in v.split()}
    words: dict[str, str] = {}

    def word(w: str) -> str:
        if w not in words:
            while True:
                new = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(rng.randint(2, 3)))
                if new not in taken:
                    break
            taken.add(new)
            words[w] = new.title() if w[:1].isupper() else new
        return words[w]

    def number(v: int | float) -> int | float:
        return rng.randint(1000, 9999) if isinstance(v, int) else round(rng.uniform(100.0, 999.0), 1)

    return _swap(state, ids, number, lambda x: ids.get(x) or " ".join(word(w) for w in x.split()))


def _swap(x: Any, ids: dict[str, str], number: Callable[[int | float], int | float], text: Callable[[str], str]) -> Any:
    """``x`` with its dict keys that are ids swapped by ``ids``, each number by ``number`` and each string by
    ``text``, booleans and None kept (the walk both forms of :func:`foreign` share)."""
    if isinstance(x, dict):
        return {ids.get(k, k): _swap(v, ids, number, text) for k, v in x.items()}
    if isinstance(x, list):
        return [_swap(v, ids, number, text) for v in x]
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, (int, float)):
        return number(x)
    return text(x) if isinstance(x, str) else x


# Real words a foreign world's strings become with words="real": rooms for the values of a room-like field, any
# other word from the second list; an entry that is one of the world's values or words is never drawn
_REAL_ROOMS = ("attic", "basement", "cellar", "den", "library", "loft", "nursery", "pantry", "studio", "sunroom",
               "terrace", "veranda", "workshop", "laundry", "lobby", "foyer", "gym", "playroom", "balcony", "patio",
               "study", "closet", "mudroom", "gallery", "bathroom", "lounge", "parlor", "shed", "greenhouse",
               "atrium", "dining room", "guest room", "game room", "utility room", "boot room", "sitting room")
_REAL_WORDS = ("amber", "cedar", "maple", "willow", "harbor", "meadow", "river", "stone", "silver", "copper",
               "summit", "canyon", "coral", "ember", "frost", "glacier", "island", "jasper", "lagoon", "marble",
               "orchid", "pebble", "quartz", "raven", "sable", "timber", "violet", "cobalt", "dune", "fern",
               "granite", "hazel", "ivory", "juniper", "lantern", "mosaic", "nectar", "olive", "pine", "ridge",
               "saffron", "tulip", "valley", "walnut", "birch", "breeze", "cliff", "daisy", "falcon", "garnet",
               "heron", "indigo", "lilac", "mist", "oak", "plum", "rose", "sparrow", "thistle", "umber", "wren",
               "aspen", "bramble", "clover", "dawn", "elm", "flint", "grove", "hollow", "iris", "kestrel",
               "linen", "moss", "north", "opal", "prairie", "reed", "shore", "tide", "vale", "wave", "cozy", "early",
               "late", "quiet", "bright", "calm", "eco", "cool", "away", "manual", "sleep", "boost", "party")
_REAL_KINDS = ("lamp", "latch", "heater", "sensor", "camera", "speaker", "plug", "fan", "blind", "valve", "alarm",
               "switch", "bulb", "socket", "router", "doorbell", "sprinkler", "purifier", "humidifier", "kettle")
_ROOM_FIELDS = ("room", "location", "zone", "area", "place")
_KIND_FIELDS = ("type", "kind", "category")


def _real_swap(state: dict[str, Any], ids: dict[str, str], rng: random.Random) -> dict[str, Any]:
    """``state`` with its ids swapped by ``ids`` and every other value a real one of its kind, none of the world's:
    a room (the value of a room-like field, `"living room"`) another room wherever it is written (`"Living Room
    light"` becomes `"Attic lamp"`), a kind (the value of a `type` field) another kind (`"light"` -> `"lamp"`: with
    the kinds kept, a held-out task that asks a lock's type has its answer beside the read in every lock's drill),
    every other word another real word (`"Good night"`, `"heat"`), digits other digits, an int of 0-100 another of
    1-100 (percentages), a larger one another near it at its own rounding (`color_temp_k` 2700 -> 3500), a float
    another near it. Section 32 of bench/results/reader_gpu.md: made-up words teach a base to copy made-up words,
    not the room a real output writes (section 33 measures this form)."""
    values = {v.lower() for v in _strings(state)}
    taken = values | {w for v in values for w in v.split()}
    kinds: set[str] = set()
    rooms: set[str] = set()

    def scan(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if isinstance(v, str) and k.lower() in _ROOM_FIELDS:
                    rooms.add(v.lower())
                elif isinstance(v, str) and k.lower() in _KIND_FIELDS:
                    kinds.add(v.lower())
                scan(v)
        elif isinstance(x, list):
            for v in x:
                scan(v)

    scan(state)
    room_pool, kind_pool, word_pool = ([w for w in pool if w not in taken] for pool in (_REAL_ROOMS, _REAL_KINDS,
                                                                                       _REAL_WORDS))
    for pool in (room_pool, kind_pool, word_pool):
        rng.shuffle(pool)
    # a phrase of the world that is a room or a kind becomes another of its kind wherever it is written
    phrases = {r: room_pool.pop() if room_pool else f"{r} wing" for r in sorted(rooms)}
    phrases |= {k: kind_pool.pop() if kind_pool else f"{k} unit" for k in sorted(kinds - rooms)}
    word_map: dict[str, str] = {}

    def cased(new: str, old: str) -> str:
        return new.title() if old[:1].isupper() else new

    def text(s: str) -> str:
        if s in ids:
            return ids[s]
        parts, out, i = s.split(), [], 0
        while i < len(parts):  # the longest phrase written here first: "Living Room light" holds "living room"
            hit = next((r for r in sorted(phrases, key=len, reverse=True)
                        if [p.lower() for p in parts[i:i + len(r.split())]] == r.split()), None)
            if hit is not None:
                out.append(cased(phrases[hit], parts[i]))
                i += len(hit.split())
                continue
            w = parts[i].lower()
            if w.isdigit():
                out.append("".join(rng.choice("0123456789") for _ in w))
            else:
                if w not in word_map:
                    word_map[w] = word_pool.pop() if word_pool else f"{w}x"
                out.append(cased(word_map[w], parts[i]))
            i += 1
        return " ".join(out)

    def number(v: int | float) -> int | float:
        if isinstance(v, float):
            return round(v * rng.uniform(0.7, 1.3), 1)
        if 0 <= v <= 100:
            return rng.randint(1, 100)
        step = 100 if v % 100 == 0 else 1
        return max(step, round(v * rng.uniform(0.6, 1.4) / step) * step)

    return _swap(state, ids, number, text)


def _strings(x: Any) -> list[str]:
    if isinstance(x, dict):
        return [s for k, v in x.items() for s in [k, *_strings(v)] if isinstance(s, str)]
    if isinstance(x, list):
        return [s for v in x for s in _strings(v)]
    return [x] if isinstance(x, str) else []


def _records(output: Any) -> tuple[str, list[dict[str, Any]]]:
    """The largest list of records (dicts) anywhere in a tool output, with the key that holds it (what
    a record is called: "items", "robots"); ids folded in for dicts keyed by id."""
    best: list[dict[str, Any]] = []
    where = ""

    def walk(x: Any, key: str) -> None:
        nonlocal best, where
        if isinstance(x, list):
            recs = [r for r in x if isinstance(r, dict)]
            if len(recs) > len(best):
                best, where = recs, key
            for r in x:
                walk(r, key)
        elif isinstance(x, dict):
            vals = list(x.values())
            if vals and all(isinstance(v, dict) for v in vals) and len(vals) > len(best):
                best, where = [{"id": k, **v} if "id" not in v else v for k, v in x.items()], key
            for k, v in x.items():
                walk(v, k)

    walk(output, "")
    return where, best


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float)) and not isinstance(v, bool) and len(str(v)) >= 2


def _reads(domain: Any, state: dict[str, Any], filtered: bool = False) -> list[tuple[Any, dict[str, Any]]]:
    """(read tool, arguments) pairs callable on ``state``: no required argument, or one that names a record.
    ``filtered`` (a foreign world): a call without arguments is a held-out task's gold call word for word
    (`list_home_devices {}`), so such a tool is called with one free-text filter instead, set to a value of the
    record field of that name (`{"room": "saka riniso"}`; enum filters are left out: a made-up word breaks them)."""
    out = []
    for t in domain.tools:
        if t.effect != "read":
            continue
        req = t.parameters.get("required") or []
        if not req and filtered:
            for p, spec in (t.parameters.get("properties") or {}).items():
                if "enum" in spec or "string" not in (spec.get("type") if isinstance(spec.get("type"), list)
                                                      else [spec.get("type")]):
                    continue
                vals = sorted({r[p] for key in _collections(state) for r in state[key].values()
                               if isinstance(r.get(p), str)})
                out += [(t, {p: v}) for v in vals[:3]]
        elif not req:
            out.append((t, {}))
        elif len(req) == 1:
            for key in _collections(state):
                if req[0].lower().startswith(key.rstrip("s")[:4]) or req[0].lower() == "id":
                    out += [(t, {req[0]: rid}) for rid in list(state[key])[:3]]
    return out


def _one(domain: Any, ns: dict[str, Any], state: dict[str, Any], target: int, rng: random.Random,
         system: str, style: DrillStyle = "prose", filtered: bool = False) -> list[dict[str, Any]] | None:
    reads = _reads(domain, state, filtered)
    rng.shuffle(reads)
    for tool, args in reads:
        fn = ns.get(tool.function)
        if fn is None:
            continue
        out_text, holder, recs = "", "", []
        for factor in _FACTORS:
            try:
                output = fn(_grow(state, factor, random.Random(rng.random())) if factor > 1 else state, **args)
            except Exception:  # noqa: BLE001 - a tool that refuses these arguments: try another
                break
            out_text = json.dumps(output, ensure_ascii=False, default=str)
            holder, recs = _records(output)
            if len(out_text) >= target * CHARS_PER_TOKEN or len(recs) < 2:
                break
        if len(recs) < 3 or not 0.8 <= len(out_text) / (target * CHARS_PER_TOKEN) <= 1.5:
            continue
        rec = rng.choice(recs)
        ids = [(f, v) for f, v in rec.items() if id_like(f, v) and sum(r.get(f) == v for r in recs) == 1]
        if not ids:
            continue
        id_field, rid = ids[0]
        fields = [(f, v) for f, v in rec.items() if f != id_field and _scalar(v)]
        unique = [(f, v) for f, v in fields if isinstance(v, str) and sum(r.get(f) == v for r in recs) == 1
                  and not id_like(f, v)]
        noun = humanize(id_field[:-3] if id_field.lower().endswith("_id") and len(id_field) > 3
                        else holder[:-1] if holder.endswith("s") else holder or "record")
        call = {"role": "assistant", "content": "",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": tool.name, "arguments": args}}]}
        answer = {"role": "tool", "name": tool.name, "tool_call_id": "c1", "content": out_text}
        keyed = style in ("keyed", "keyed2")
        if unique and rng.random() < 0.5:
            kf, kv = rng.choice(unique)
            user = (f"Which {noun} has {json_pair(kf, kv)}? I need its {json.dumps(id_field)}." if keyed
                    else f"Which {noun} has {humanize(kf)} {kv}? I need its id.")
            writes = [t for t in domain.tools if t.effect == "write"
                      and (t.parameters.get("required") or []) == [id_field]]
            if writes and rng.random() < 0.5:
                w = rng.choice(writes)
                user = (f"Please {humanize(w.name)} for the {noun} with {json_pair(kf, kv)}." if keyed
                        else f"Please {humanize(w.name)} for the {noun} whose {humanize(kf)} is {kv}.")
                final = {"role": "assistant", "content": "",
                         "tool_calls": [{"id": "c2", "type": "function",
                                         "function": {"name": w.name, "arguments": {id_field: rid}}}]}
            else:
                final = {"role": "assistant", "content": f"All done. {json_pair(id_field, rid)}" if keyed
                         else f"The {noun} with {humanize(kf)} {kv} is {rid}."}
        elif style == "keyed2" and len(fields) >= 2:
            asked = rng.sample(fields, 2)
            user = (f"Show {noun} {json.dumps(rid)} and tell me the {json.dumps(asked[0][0])} and the "
                    f"{json.dumps(asked[1][0])}.")
            final = {"role": "assistant", "content": "All done. " + ", ".join(json_pair(f, v) for f, v in asked)}
        elif fields:
            f, v = rng.choice(fields)
            user = (f"What is the {json.dumps(f)} of {noun} {json.dumps(rid)}?" if keyed
                    else f"What is the {humanize(f)} of {noun} {rid}?")
            final = {"role": "assistant", "content": f"All done. {json_pair(f, v)}" if keyed
                     else f"The {humanize(f)} of {noun} {rid} is {v}."}
        else:
            continue
        return [{"role": "system", "content": system}, {"role": "user", "content": user}, call, answer, final]
    return None


def _record_one(domain: Any, ns: dict[str, Any], state: dict[str, Any], rng: random.Random,
                system: str, style: DrillStyle = "prose") -> list[dict[str, Any]] | None:
    """A read of one record by its id (`get_home_device_status {"device_id": "LT-2"}`) and a question about
    one or two of its top-level fields: the read a read_report task makes, whose output holds one record
    (``_one`` needs a list of them)."""
    reads = [(t, {req[0]: rid}) for t in domain.tools if t.effect == "read"
             and len(req := t.parameters.get("required") or []) == 1
             for key in _collections(state) if req[0].lower().startswith(key.rstrip("s")[:4]) or req[0].lower() == "id"
             for rid in state[key]]  # every record, not _reads' first three: a kind may sit past them (TH-1)
    rng.shuffle(reads)
    reads = reads[:8]
    for tool, args in reads:
        fn = ns.get(tool.function)
        try:
            output = fn(state, **args) if fn is not None else None
        except Exception:  # noqa: BLE001 - a tool that refuses this id: try another
            continue
        if not isinstance(output, dict):
            continue
        (id_field, rid), = args.items()
        fields = [(f, v) for f, v in output.items() if f != id_field and (_scalar(v) or isinstance(v, bool))]
        if not fields:
            continue
        noun = humanize(id_field[:-3] if id_field.lower().endswith("_id") and len(id_field) > 3 else "record")
        asked = rng.sample(fields, 2 if len(fields) >= 2 and rng.random() < 0.5 else 1)
        if style == "prose":
            (f, v), = asked[:1]
            user, content = f"What is the {humanize(f)} of {noun} {rid}?", f"The {humanize(f)} of {noun} {rid} is {v}."
        else:
            user = (f"What is the {json.dumps(asked[0][0])} of {noun} {json.dumps(rid)}?" if len(asked) == 1 else
                    f"Show {noun} {json.dumps(rid)} and tell me the {json.dumps(asked[0][0])} and the "
                    f"{json.dumps(asked[1][0])}.")
            content = "All done. " + ", ".join(json_pair(f, v) for f, v in asked)
        return [{"role": "system", "content": system}, {"role": "user", "content": user},
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": tool.name, "arguments": args}}]},
                    {"role": "tool", "name": tool.name, "tool_call_id": "c1",
                     "content": json.dumps(output, ensure_ascii=False, default=str)},
                    {"role": "assistant", "content": content}]
    return None


def copy_drills(domain: Any, per_length: int, seed: int, lengths: tuple[int, ...] = DRILL_LENGTHS,
                seeds: int = 4, style: DrillStyle = "prose", foreign_world: bool = False,
                records: int | None = None, words: ForeignWords = "made_up") -> list[str]:
    """``per_length`` drills at each tool-output length (tokens) for ``domain`` (module docstring), rendered;
    with ``foreign_world``, ``records`` one-record reads too (default ``per_length``), the foreign world's
    strings made-up ``words`` or real ones (:func:`foreign`)."""
    tools = [t.to_openai() for t in domain.tools]
    return [render_transcript(m, tools) for m in drill_messages(domain, per_length, seed, lengths, seeds, style,
                                                                 foreign_world, records, words)]


def drill_messages(domain: Any, per_length: int, seed: int, lengths: tuple[int, ...] = DRILL_LENGTHS,
                   seeds: int = 4, style: DrillStyle = "prose", foreign_world: bool = False,
                   records: int | None = None, words: ForeignWords = "made_up") -> list[list[dict[str, Any]]]:
    """The drills of :func:`copy_drills` as chat messages (system, user, call, output, answer)."""
    from synth.episode import brief_system_prompt

    if style not in DRILL_STYLES:
        raise ValueError(f"drill style {style!r}: use one of {', '.join(DRILL_STYLES)}")
    if words not in get_args(ForeignWords):
        raise ValueError(f"foreign words {words!r}: use one of {', '.join(get_args(ForeignWords))}")

    rng = random.Random(f"tooldojo-drills:{domain.name}:{seed}")
    spaces = [_namespace(domain, s) for s in range(seeds)]
    system = brief_system_prompt(None, domain)  # type: ignore[arg-type]  # the prompt names only the domain
    out: list[list[dict[str, Any]]] = []
    for target in lengths:
        made = tries = 0
        while made < per_length and tries < 4 * per_length:
            tries += 1
            ns = rng.choice(spaces)
            state = foreign(ns["INITIAL_STATE"], rng, words) if foreign_world else ns["INITIAL_STATE"]
            msgs = _one(domain, ns, state, target, rng, system, style, filtered=foreign_world)
            if msgs is not None:
                out.append(msgs)
                made += 1
    # a foreign world's one-record reads too (by default as many as one length's drills): the demo's read_report
    # reads one record (bench/results/reader_gpu.md section 29: the 0.66M_kdx base copies the read's id there, not
    # its values)
    made = tries = 0
    records = per_length if records is None else records
    while foreign_world and made < records and tries < 4 * records:
        tries += 1
        ns = rng.choice(spaces)
        msgs = _record_one(domain, ns, foreign(ns["INITIAL_STATE"], rng, words), rng, system, style)
        if msgs is not None:
            out.append(msgs)
            made += 1
    return out


def priming_drills(domain: Any, per_kind: int, seed: int, style: DrillStyle = "keyed") -> list[Any]:
    """Foreign-world drills of ``domain`` as priming trajectories (rl.demo ``prime_drills``): ``per_kind``
    reads in a 200-token device list and ``per_kind`` one-record reads, whose values only a copy can give (no
    value of the foreign world is one the policy could recall). Section 30 of bench/results/reader_gpu.md: primed
    on the demo's own worlds, a policy answers read_report with the values its training worlds make frequent."""
    from synth.episode import Trajectory

    tools = [t.to_openai() for t in domain.tools]
    return [Trajectory(task_id=f"drill-{domain.name}-{seed}-{i}", domain=domain.name, seed=seed, messages=m,
                       tools=tools, termination="user_stop")
            for i, m in enumerate(drill_messages(domain, per_kind, seed, (200,), style=style, foreign_world=True))]
