"""Writing a task from its gold actions (step 5 of synth/tasks.py): the instruction, persona and
user-simulator scenario from templates, the rubric, and the optional LLM rewrite (checked: it
must keep every fact and leak none of the withheld ones)."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from synth.task_gold import Binding, Step, describe
from synth.task_models import JsonLLM, Rubric, UserScenario
from synth.task_values import _dumps, _norm, fmt, humanize, names_match
from toolzoo.spec import Domain, ToolSpec


def goal_phrase(tool: ToolSpec) -> str:
    """The first sentence of the description, as a verb phrase: 'cancel a pending order and refund it in full'."""
    first = re.split(r"(?<=[.!?])\s", tool.description.strip(), maxsplit=1)[0]
    first = re.sub(r"\s*\([^)]*\)", "", first).strip().rstrip(".!?:;")
    first = re.sub(r"\s*[;:]\s.*$", "", first)
    if not first:
        return humanize(tool.name)
    first = first[0].lower() + first[1:]
    if first.split()[0].rstrip(",") not in _VERBS:
        first = "get " + first
    return first


_VERBS = set("""list show move cancel create find add search record set assign book put send remove change place withdraw
identify open estimate save delete hold release pay return apply reserve switch check have get deposit invite enrol
enroll drop post log plan load disarm arm launch land bring swap write mark transfer refund read copy permanently take
lock unlock schedule lend renew archive restore install uninstall upgrade buy void file refill hand submit drive charge
update edit reply forward compose join pick reroute request respond reschedule retag complete issue activate empty make
borrow clear track view lookup look""".split())


FIRST_NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena",
               "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yara"]
ROLES = ["a small-business owner", "a graduate student", "a retired engineer", "a busy parent of two",
         "an operations manager", "a freelance designer", "a nurse on night shifts", "a high-school teacher",
         "a software developer", "a sales representative who travels a lot", "a first-time user of the service",
         "an office administrator"]
STYLES = ["writes short, direct messages", "is polite and a little chatty", "is in a hurry and slightly impatient",
          "double-checks every detail", "is not very technical and wants clear explanations",
          "is friendly but gets confused by jargon", "prefers to give information only when asked",
          "is precise and expects precise answers"]
OPENERS = ["Hi.", "Hello!", "Hey there.", "Good morning.", "Good afternoon.", "Hi there!", ""]
INTROS = ["This is {name}.", "My name is {name}.", "{name} here.", ""]
FRAMES = ["I'd like to {goal}", "Please {goal}", "I need to {goal}", "Could you {goal}?", "Can you help me {goal}?",
          "I want to {goal}"]
THEN = ["Then", "After that,", "Also,", "Once that's done,"]
ASK = ["When you're done, please tell me the {fields}.", "Please let me know the {fields} afterwards.",
       "Could you also tell me the {fields}?", "And tell me the {fields}, please."]
IDENTITY_WORDS = ("email", "name", "_id", "phone", "birth", "dob", "account", "member", "passenger", "customer",
                  "user", "patient", "student", "card", "tracking")


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!" else text + "."


@dataclass
class Draft:
    instruction: str
    persona: str
    scenario: UserScenario
    mentioned: list[str]       # values the instruction must keep (an LLM rewrite is checked against them)
    withheld: list[str]        # values the instruction must not contain (needs_user_info)
    body: str = ""             # the instruction without the request to report the outputs


_SELF = ("customer", "user", "patient", "member", "account", "applicant", "student", "passenger", "owner",
         "tenant", "holder", "email", "instructor", "reporter", "actor", "author")


def _entity(p: str) -> str:
    h = humanize(p)
    for suffix in (" ids", " id"):
        if h.endswith(suffix) and len(h) > len(suffix):
            return h[: -len(suffix)]
    return h


def reference(p: str, bs: list[Binding], steps: list[Step]) -> tuple[str | None, bool]:
    """How the user refers to a derived value: (phrase or None, whether to say the value itself)."""
    if any(not names_match(b.key, p) and b.kind == "output" for b in bs):
        return None, True
    ent = _entity(p)
    if all(b.kind == "root" for b in bs):
        return f"the same {ent}", False
    if any(b.rows and len(b.rows) > 1 for b in bs):
        descs = [describe(b) for b in bs if b.kind == "output"]
        if not descs or not all(descs):
            return None, True
        phrases = []
        for entity, f, v in descs:  # type: ignore[misc]
            same = _norm(p).startswith(_norm(entity).replace(" ", "_")) or names_match(p, entity.replace(" ", "_") + "_id")
            phrases.append(f"the {entity} whose {f} is {v}" if same else f"{humanize(p)} as in the {entity} whose {f} is {v}")
        return ("for " if phrases[0].startswith("the ") else "") + " and ".join(phrases), False
    if any(steps[b.step].tool.effect == "write" for b in bs if b.kind == "output"):
        return f"the new {ent}", False
    if not p.endswith(("_id", "_ids")):
        return None, True
    if any(w in p for w in _SELF):
        return None, False
    return f"my {ent}", False


def write_task(steps: list[Step], outputs: list[tuple[str, str, int]], rng: random.Random,
               needs_user_info: bool, quote_values: bool = False, quote_fields: bool = False) -> Draft:
    name = f"{rng.choice(FIRST_NAMES)}"
    persona = f"{name}, {rng.choice(ROLES)}, {rng.choice(STYLES)}."
    # The facts the user knows: every root argument.
    facts: list[tuple[int, str, Any]] = [(i, p, v) for i, st in enumerate(steps) for p, v in st.root.items()]
    withheld_keys: set[tuple[int, str]] = set()
    if needs_user_info:
        pool = [(i, p) for i, p, v in facts if isinstance(v, str) and len(v) >= 2]
        pool.sort(key=lambda ip: (0 if any(w in ip[1] for w in IDENTITY_WORDS) else 1, ip[0]))
        k = 1 if len(pool) < 3 or rng.random() < 0.6 else 2
        withheld_keys = set(pool[:k])
    withheld_vals = [fmt(steps[i].root[p]) for i, p in withheld_keys]

    mentioned: list[str] = []
    parts: list[str] = []
    opener = rng.choice(OPENERS)
    intro = rng.choice(INTROS).format(name=name)
    if opener:
        parts.append(opener)
    if intro:
        parts.append(intro)

    def clause(p: str, v: Any) -> str:
        mentioned.append(fmt(v))
        # Quoted, a string value is split into the same tokens as inside the call's JSON arguments
        # (Qwen2's pre-tokenizer glues a leading space to a word: ' LT' here, 'LT' after '"' there).
        return f'{humanize(p)}: "{v}"' if quote_values and isinstance(v, str) else f"{humanize(p)}: {fmt(v)}"

    # Facts needed by reads (identity first), then one goal sentence per write (and a final read).
    final = len(steps) - 1
    for i, st in enumerate(steps):
        if st.tool.effect == "write" or i == final:
            continue
        for p, bs in st.derived.items():
            phrase, say = reference(p, bs, steps)
            if say:
                parts.append(_sentence(f"the {humanize(p)} is {fmt(st.args[p])}"))
                mentioned.append(fmt(st.args[p]))
            elif phrase and " whose " in phrase:
                parts.append(_sentence(f"it's about {phrase.removeprefix('for ')}"))
        for p, v in st.root.items():
            if (i, p) in withheld_keys:
                continue
            mentioned.append(fmt(v))
            if any(w in p for w in IDENTITY_WORDS):
                parts.append(_sentence(rng.choice(["my {p} is {v}", "my {p}: {v}", "you can find me under {p} {v}"])
                                       .format(p=humanize(p), v=fmt(v))))
            else:
                parts.append(_sentence(f"use {humanize(p)} {fmt(v)} when you look it up"))
    goals = [i for i, st in enumerate(steps) if st.tool.effect == "write" or i == final]
    reasons: list[str] = []
    for n, i in enumerate(goals):
        st = steps[i]
        goal = goal_phrase(st.tool)
        reasons.append(goal)
        details = [clause(p, v) for p, v in st.root.items() if (i, p) not in withheld_keys]
        for p, bs in st.derived.items():
            phrase, say = reference(p, bs, steps)
            if say:
                details.append(clause(p, st.args[p]))
            elif phrase and phrase not in details:
                details.append(phrase)
        frame = rng.choice(FRAMES).format(goal=goal)
        q = frame.endswith("?")
        body = frame.rstrip("?")
        if details:
            body += " (" + "; ".join(details) + ")"
        body += "?" if q else "."
        if n > 0:
            keep_case = body.startswith(("I ", "I'"))
            body = f"{rng.choice(THEN)} {body if keep_case else body[0].lower() + body[1:]}"
        parts.append(_sentence(body))
    body = " ".join(p for p in parts if p)
    if outputs:
        # Quoted, a field is asked for by the key the tool output writes it under (`"type"`), the tokens the
        # keyed answer repeats (`"type": "light"`); in prose it takes a leading space (`Ġtype`)
        fields = " and the ".join(dict.fromkeys(json.dumps(k) if quote_fields else humanize(k)
                                                for k, _v, _j in outputs))
        parts.append(rng.choice(ASK).format(fields=fields))
    instruction = " ".join(p for p in parts if p)

    known: dict[str, str] = {}
    for _i, p, v in facts:
        key, n = humanize(p), 2
        while key in known and known[key] != fmt(v):
            key, n = f"{humanize(p)} ({n})", n + 1
        known[key] = fmt(v)
    unknown = sorted({f"the {humanize(p)}" for st in steps for p in st.derived})
    reason = "You want to " + "; then ".join(reasons) + "."
    hold = ", ".join(humanize(p) for _i, p in sorted(withheld_keys))
    how = ("Open with your first message as written. Answer the agent's questions with the facts you know; "
           "never invent other facts. ")
    if hold:
        how += f"You did not mention your {hold} at first: give it only when the agent asks for it. "
    if unknown:
        how += f"You do not know {', '.join(unknown)}; the agent has to look that up. "
    how += "Confirm when the agent asks before making a change. When the task is done, end with ###STOP###."
    scenario = UserScenario(persona=persona, reason_for_call=reason, known_info=known, unknown_info=unknown,
                            task_instructions=how)
    return Draft(instruction, persona, scenario, [m for m in dict.fromkeys(mentioned) if m], withheld_vals, body)


def make_rubric(steps: list[Step], outputs: list[tuple[str, str, int]], withheld: list[str]) -> Rubric:
    success = [f"{st.tool.name} is called with {_dumps(st.args)}" for st in steps if st.tool.effect == "write"]
    success.append("the final state equals the state after replaying the gold actions")
    success += [f"the agent tells the user the {humanize(k)}: {v}" for k, v, _j in outputs]
    checkpoints: list[str] = []
    for st in steps:
        for p, bs in st.derived.items():
            src = sorted({steps[b.step].tool.name for b in bs if b.kind == "output"})
            if not src:
                continue
            checkpoints.append(f"looks up {humanize(p)} with {', '.join(src)} before calling {st.tool.name}")
        if st.tool.effect == "write":
            checkpoints.append(f"confirms the change with the user before calling {st.tool.name}")
    for v in withheld:
        checkpoints.append(f"asks the user for the missing detail ({v}) instead of guessing it")
    return Rubric(success_criteria=success, expected_tool_pattern=[st.tool.name for st in steps],
                  checkpoints=checkpoints)


async def llm_rewrite(llm: JsonLLM, draft: Draft, domain: Domain) -> tuple[str, str]:
    """Rewrite instruction and persona; raises ValueError if the result drops or leaks a fact."""
    schema = {"type": "object", "properties": {"instruction": {"type": "string"}, "persona": {"type": "string"}},
              "required": ["instruction", "persona"], "additionalProperties": False}
    messages = [
        {"role": "system", "content": (
            "You rewrite the opening message a customer sends to a support agent, and a one-line persona of that "
            "customer, so they read naturally and vary in tone. Keep every fact: each string in must_keep must "
            "appear verbatim in the new instruction. Never add facts, and never mention any string in must_not_say. "
            "Answer with JSON {\"instruction\": ..., \"persona\": ...}.")},
        {"role": "user", "content": json.dumps({
            "domain": domain.description, "instruction": draft.instruction, "persona": draft.persona,
            "must_keep": draft.mentioned, "must_not_say": draft.withheld}, ensure_ascii=False)},
    ]
    out = await llm.json(messages, schema)
    if not isinstance(out, dict):
        raise ValueError("the LLM did not answer with an object")
    instruction, persona = out.get("instruction"), out.get("persona")
    if not isinstance(instruction, str) or not isinstance(persona, str) or not instruction.strip() or not persona.strip():
        raise ValueError("the LLM left instruction or persona empty")
    missing = [m for m in draft.mentioned if m not in instruction]
    if missing:
        raise ValueError(f"the rewrite dropped {missing[:3]}")
    if any(w in instruction for w in draft.withheld):
        raise ValueError("the rewrite leaks withheld information")
    return instruction.strip(), persona.strip()
