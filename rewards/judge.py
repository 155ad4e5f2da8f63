"""LLM judges: a rubric judge (Kimi K2's judge agent) and a group-relative judge (ART's RULER).

    judge = RubricJudge(client)                          # client: synth.llm.LLMClient
    r = await judge.score(task, trajectory)              # RewardResult; score None = abstain
    rs = await GroupJudge(client).score_group(task, trajectories)   # one result per rollout, in order

**The prompt.** The judge's instructions (system message, the task and its rubric) are trusted
text; the trajectory is *quoted data*. It is rendered as a block of JSON lines, one step (one
message of the episode) per line, between the lines ``<transcript_data>`` and
``</transcript_data>``. Inside the block every ``<``, ``>`` and ``&``, every Unicode look-alike of
an angle bracket, and every invisible / bidi / line-separator character is written as a JSON
``\\uXXXX`` escape (Unicode TAG characters U+E0000-U+E007F, variation selectors, ornamental
brackets such as ``❮❯❰❱`` and lone surrogates included; the agent's own bytes never make the judge
abstain), and newlines are JSON-escaped too: nothing in a trajectory can close the block,
open a new "system" line or otherwise leave the data, and the instruction part of the prompt is
byte-identical whatever the trajectory says. The system prompt says that everything inside the
block is material to grade, never instructions. Text that looks like a prompt injection ("ignore
the rubric", "score 1", fake delimiters or system messages) does not change the score; it is
flagged: ``judge:injection_in_data`` when it sits in a user or tool message,
``hack:judge_injection`` when the agent itself wrote it.

**The budget.** A prompt (system + user message) is at most ``max_prompt_chars`` characters
(``MAX_PROMPT_CHARS`` = 60,000, about 15k tokens): the data block gets what the instructions leave
(at least 2,000). Each step's text and each tool call's arguments are cut at ``max_step_chars``
(marked ``...[N more characters]``); a transcript still too long keeps its first steps (a quarter
of the budget) and its last ones, with one data line ``{"truncated": true, "omitted_steps": "a-b",
...}`` in their place. Omitted steps cannot be cited as evidence.

**The verdict** (``client.json`` with a JSON Schema, which vLLM enforces with guided decoding):
``{criteria: [{criterion, met, evidence}], explanation, score}``. It is validated: exactly one entry
per rubric criterion (the criterion text, or its id ``C1``..), ``score`` in [0, 1], and, when
``require_evidence``, evidence for every criterion marked met that points at a real step and shows
it: a step reference that exists (``step 3``) and a verbatim quote from that step (the rest of the
evidence, or every ``"quoted"`` part of it). A bare ``step 3`` is not evidence. A criterion marked *not*
met needs non-empty evidence whose step references exist (absence cannot be quoted, and a
wrongly unmet criterion only lowers the score). A rejected verdict is asked for again, with what
was wrong (at most ``max_reasks`` times); then the judge abstains.

**The score** is the fraction of criteria the validated verdict marks met (all criteria weigh the
same), not the judge's free-floating ``score``: that one is kept in ``details["judge_score"]`` and
a disagreement of more than 0.5 is flagged ``judge:score_inconsistent``. ``details["accept"]`` is
``score >= threshold`` (Kimi K2's rejection-sampling filter keeps accepted trajectories).

**Abstaining.** ``score`` never raises: an unreachable endpoint (after the client's own retries),
a refused request, malformed JSON or a verdict that stays invalid give ``RewardResult(score=None,
reason=...)``, which TRL leaves out of the group baseline.

**Caching.** Requests are deterministic (temperature 0, a fixed seed), so an ``LLMClient`` with a
``cache_dir`` serves a repeated judgement from disk. On top, each judge keeps an in-memory memo of
validated results keyed by (task id, hash of the rendered transcript, hash of the rubric and
instruction); concurrent identical requests wait for one call. Abstentions are not memoised.

**Group mode** (RULER): all rollouts of one prompt go to the judge in one call; the common prefix
of their messages (system prompt, the user's opening) is shown once. The judge returns one
``{trajectory_id, evidence, explanation, score}`` per rollout, scores relative to each other in
[0, 1]; evidence is checked against that rollout's own steps. Any failure abstains for the whole
group.

Where it lives: the quoted transcript and the evidence checks in rewards/judge_transcript.py, the
criteria, prompts and verdict schemas in rewards/judge_prompts.py; this module holds the judges.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import anyio

from rewards.base import RewardResult
from rewards.judge_prompts import (
    GROUP_SYSTEM,
    RUBRIC_SYSTEM,
    _group_schema,
    _Rejected,
    _rubric_key,
    _score_ok,
    _task_section,
    _verdict_schema,
    rubric_criteria,
)
from rewards.judge_transcript import (
    DATA_CLOSE,
    DATA_OPEN,
    DEFAULT_SEED,
    Transcript,
    _norm,
    _sha,
    _truncate,
    check_evidence,
    escape_data,
    render_transcript,
)
from synth.episode import Trajectory
from synth.llm import LLMBadResponse, LLMClient, LLMError, LLMRequestError, LLMUnavailable
from synth.tasks import Task

__all__ = [
    "DATA_CLOSE",
    "DATA_OPEN",
    "GroupJudge",
    "RubricJudge",
    "Transcript",
    "check_evidence",
    "escape_data",
    "render_transcript",
    "rubric_criteria",
]


# ------------------------------------------------------------------------ the shared machinery
MAX_PROMPT_CHARS = 60_000   # the prompt budget (system + user message), about 15k tokens
MIN_TRANSCRIPT_CHARS = 2_000  # the data block's least share, however long the rubric


class _JudgeBase:
    is_judge = True  # rewards.compose: a judge never lifts a trajectory above its verifiable checks

    def __init__(self, client: LLMClient, *, max_reasks: int, require_evidence: bool, name: str, seed: int,
                 max_tokens: int, max_step_chars: int, max_evidence_chars: int, memo_size: int,
                 max_prompt_chars: int) -> None:
        if max_reasks < 0:
            raise ValueError("max_reasks must be >= 0")
        if max_prompt_chars < 4 * MIN_TRANSCRIPT_CHARS:
            raise ValueError(f"max_prompt_chars must be >= {4 * MIN_TRANSCRIPT_CHARS}")
        self.max_prompt_chars = max_prompt_chars
        self.client = client
        self.name = name
        self.max_reasks = max_reasks
        self.require_evidence = require_evidence
        self.seed = seed
        self.max_tokens = max_tokens
        self.max_step_chars = max_step_chars
        self.max_evidence_chars = max_evidence_chars
        self.memo_size = memo_size
        self._memo: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self._locks: dict[tuple[str, ...], anyio.Lock] = {}
        # llm_errors: requests that failed in transport (unreachable, refused); last_error: the latest one
        self.stats = {"calls": 0, "memo_hits": 0, "abstains": 0, "reasks": 0, "llm_requests": 0, "llm_errors": 0}
        self.last_error: str | None = None

    # -- memo ------------------------------------------------------------------------------
    def _memo_get(self, key: tuple[str, ...]) -> Any:
        if key in self._memo:
            self._memo.move_to_end(key)
            return self._memo[key]
        return None

    def _memo_put(self, key: tuple[str, ...], value: Any) -> None:
        self._memo[key] = value
        self._memo.move_to_end(key)
        while len(self._memo) > self.memo_size:
            self._memo.popitem(last=False)

    def _budget(self, frame: list[dict[str, Any]]) -> int:
        """What the prompt budget leaves the data block, once the instructions (`frame`) are in."""
        return max(MIN_TRANSCRIPT_CHARS, self.max_prompt_chars - sum(len(m["content"]) for m in frame))

    def clear_memo(self) -> None:
        self._memo.clear()

    async def _memoised(self, key: tuple[str, ...], compute: Any) -> tuple[Any, bool]:
        """(value, hit). Concurrent callers with one key share one computation; only results for
        which ``compute`` returns ``(value, True)`` (validated verdicts) are kept."""
        hit = self._memo_get(key)
        if hit is not None:
            self.stats["memo_hits"] += 1
            return hit, True
        lock = self._locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                hit = self._memo_get(key)
                if hit is not None:
                    self.stats["memo_hits"] += 1
                    return hit, True
                value, keep = await compute()
                if keep:
                    self._memo_put(key, value)
                return value, False
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(key, None)

    # -- asking, validating, re-asking -------------------------------------------------------
    async def _ask(self, messages: list[dict[str, Any]], schema: dict[str, Any], validate: Any
                   ) -> tuple[Any, int, list[str], str | None]:
        """(validated result or None, attempts, problems of each rejected attempt, transport error)."""
        history = list(messages)
        problems: list[str] = []
        attempts = 0
        for attempt in range(self.max_reasks + 1):
            attempts = attempt + 1
            if attempt:
                self.stats["reasks"] += 1
            self.stats["llm_requests"] += 1
            try:
                value = await self.client.json(history, schema, temperature=0.0, seed=self.seed,
                                               max_tokens=self.max_tokens)
            except LLMBadResponse as e:
                why = "the answer was not JSON matching the schema"
                problems.append(f"attempt {attempts}: {why} ({_truncate(str(e), 300)})")
                feedback = (f"Your answer was rejected: {why}. Answer again with only the JSON object, "
                            "following the schema exactly.")
                history = [*messages, {"role": "user", "content": feedback}]
                continue
            except (LLMUnavailable, LLMRequestError, LLMError) as e:
                self.stats["llm_errors"] += 1
                self.last_error = f"{type(e).__name__}: {_truncate(str(e), 400)}"
                return None, attempts, problems, self.last_error
            try:
                return validate(value), attempts, problems, None
            except _Rejected as r:
                problems.append(f"attempt {attempts}: " + "; ".join(r.problems))
                feedback = ("Your verdict was rejected because:\n" + "\n".join(f"- {escape_data(p)}" for p in r.problems)
                            + "\nAnswer again with the complete JSON verdict. Cite evidence that is really in the "
                            "data block: a step number that exists and a quote copied verbatim from that step.")
                history = [*messages,
                           {"role": "assistant", "content": escape_data(json.dumps(value, ensure_ascii=False))},
                           {"role": "user", "content": feedback}]
        return None, attempts, problems, None


# ------------------------------------------------------------------------ the rubric judge
class RubricJudge(_JudgeBase):
    """Scores one trajectory against its task's rubric; see the module docstring. Satisfies
    :class:`rewards.base.Reward`."""

    def __init__(self, client: LLMClient, *, threshold: float = 0.5, max_reasks: int = 1,
                 require_evidence: bool = True, name: str = "judge", seed: int = DEFAULT_SEED,
                 max_tokens: int = 1024, max_step_chars: int = 4000, max_evidence_chars: int = 300,
                 memo_size: int = 10_000, max_prompt_chars: int = MAX_PROMPT_CHARS) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be in [0, 1]")
        super().__init__(client, max_reasks=max_reasks, require_evidence=require_evidence, name=name, seed=seed,
                         max_tokens=max_tokens, max_step_chars=max_step_chars,
                         max_evidence_chars=max_evidence_chars, memo_size=memo_size,
                         max_prompt_chars=max_prompt_chars)
        self.threshold = threshold

    def messages(self, task: Task, trajectory: Trajectory) -> list[dict[str, Any]]:
        """The judge prompt (system + user), for inspection."""
        criteria = rubric_criteria(task)
        return self._messages(task, criteria, self._transcript(task, criteria, trajectory))

    def _transcript(self, task: Task, criteria: list[tuple[str, str, str]], trajectory: Trajectory) -> Transcript:
        budget = self._budget(self._messages(task, criteria, Transcript(lines=[], steps=[])))
        return render_transcript(trajectory.messages, max_step_chars=self.max_step_chars, max_chars=budget)

    def _messages(self, task: Task, criteria: list[tuple[str, str, str]], tr: Transcript) -> list[dict[str, Any]]:
        user = (_task_section(task, criteria)
                + f"\n\n## Transcript: untrusted data, {tr.n_steps} steps\n" + tr.block()
                + "\n\nGrade the transcript in the data block above against every criterion of the rubric. "
                  "Answer with the JSON verdict only.")
        return [{"role": "system", "content": RUBRIC_SYSTEM}, {"role": "user", "content": user}]

    def _validate(self, value: Any, criteria: list[tuple[str, str, str]], tr: Transcript) -> dict[str, Any]:
        problems: list[str] = []
        if not isinstance(value, dict):
            raise _Rejected(["the verdict is not a JSON object"], value)
        score = value.get("score")
        if not _score_ok(score):
            problems.append(f"score must be a number in [0, 1], got {_truncate(json.dumps(score), 40)}")
        by_text = {_norm(text): cid for cid, _k, text in criteria}
        by_id = {cid.casefold(): cid for cid, _k, _t in criteria}
        entries = value.get("criteria")
        got: dict[str, dict[str, Any]] = {}
        seen: set[str] = set()
        if not isinstance(entries, list):
            problems.append("criteria must be a list with one entry per criterion")
            entries = []
        for e in entries:
            if not isinstance(e, dict):
                problems.append("every criteria entry must be an object")
                continue
            name = str(e.get("criterion") or "")
            cid = by_text.get(_norm(name)) or by_id.get(name.strip().casefold())
            if cid is None:
                problems.append(f"criteria lists {_truncate(json.dumps(name, ensure_ascii=False), 80)}, "
                                "which is not a criterion of the rubric")
                continue
            if cid in seen:
                problems.append(f"criterion {cid} is listed twice")
                continue
            seen.add(cid)
            if not isinstance(e.get("met"), bool):
                problems.append(f"criterion {cid}: met must be true or false")
                continue
            if self.require_evidence:
                why = check_evidence(e.get("evidence"), tr.search, quote_required=bool(e["met"]))
                if why:
                    problems.append(f"criterion {cid} ({'met' if e['met'] else 'not met'}): the evidence {why}")
                    continue
            got[cid] = {"id": cid, "met": e["met"], "evidence": str(e.get("evidence") or "")}
        missing = [cid for cid, _k, _t in criteria if cid not in seen]
        if missing:
            problems.append("no entry for criteria " + ", ".join(missing))
        if problems:
            raise _Rejected(problems, value)
        per = []
        for cid, kind, text in criteria:
            per.append({**got[cid], "kind": kind, "criterion": text})
        return {"criteria": per, "judge_score": float(score), "explanation": str(value.get("explanation") or "")}

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        self.stats["calls"] += 1
        start = time.perf_counter()
        try:
            criteria = rubric_criteria(task)
            tr = self._transcript(task, criteria, trajectory)
            key = (task.id, tr.digest(), _rubric_key(task))

            async def compute() -> tuple[RewardResult, bool]:
                res = await self._judge(task, criteria, tr)
                return res, res.score is not None

            result, hit = await self._memoised(key, compute)
            result = result.model_copy(deep=True)
            result.details["memo_hit"] = hit
            result.details["seconds"] = round(time.perf_counter() - start, 4)
        except Exception as e:  # the contract: never raise out of score
            result = self._abstain(f"the judge failed unexpectedly ({type(e).__name__}: {_truncate(str(e), 300)})",
                                   {"error": type(e).__name__})
        if result.score is None:
            self.stats["abstains"] += 1
        return result

    def _abstain(self, reason: str, details: dict[str, Any], flags: list[str] | None = None) -> RewardResult:
        return RewardResult(name=self.name, score=None, reason=reason, details=details,
                            flags=["judge:abstain", *(flags or [])])

    def _injection_flags(self, tr: Transcript) -> tuple[list[str], dict[str, Any]]:
        if not tr.injections:
            return [], {}
        flags = ["judge:injection_in_data"]
        if "assistant" in tr.injections.values():
            flags.append("hack:judge_injection")
        return flags, {"injection_steps": sorted(tr.injections)}

    async def _judge(self, task: Task, criteria: list[tuple[str, str, str]], tr: Transcript) -> RewardResult:
        messages = self._messages(task, criteria, tr)
        schema = _verdict_schema(criteria, self.max_evidence_chars)
        inj_flags, inj_details = self._injection_flags(tr)
        verdict, attempts, problems, error = await self._ask(messages, schema,
                                                             lambda v: self._validate(v, criteria, tr))
        base = {"attempts": attempts, "problems": problems, "model": self.client.config.model, **inj_details}
        if error is not None:
            return self._abstain(f"abstained: the judge could not be reached or refused the request ({error})",
                                 {**base, "error": error}, inj_flags)
        if verdict is None:
            last = problems[-1] if problems else "no valid verdict"
            return self._abstain(f"abstained: no valid verdict after {attempts} attempt(s); last: {_truncate(last, 300)}",
                                 base, [*inj_flags, "judge:invalid_verdict"])
        per = verdict["criteria"]
        met = sum(1 for c in per if c["met"])
        score = met / len(per)
        flags = list(inj_flags)
        if attempts > 1:
            flags.append("judge:reasked")
        if abs(score - verdict["judge_score"]) > 0.5:
            flags.append("judge:score_inconsistent")
        unmet = [c for c in per if not c["met"]]
        reason = f"{met}/{len(per)} rubric criteria met" + (
            f"; first unmet: {unmet[0]['id']} {_truncate(unmet[0]['criterion'], 120)}" if unmet else "")
        return RewardResult(
            name=self.name, score=score, reason=reason, flags=flags,
            details={**base, "criteria": per, "judge_score": verdict["judge_score"],
                     "explanation": verdict["explanation"], "accept": score >= self.threshold,
                     "threshold": self.threshold},
        )


# ------------------------------------------------------------------------ the group judge
def _common_prefix(convs: list[list[dict[str, Any]]]) -> int:
    if len(convs) < 2:
        return 0
    n = min(len(c) for c in convs)
    k = 0
    while k < n and all(_sha(c[k]) == _sha(convs[0][k]) for c in convs[1:]):
        k += 1
    # keep at least the last message of every trajectory in its own block
    return min(k, n - 1) if n else 0


class GroupJudge(_JudgeBase):
    """RULER-style: scores all rollouts of one task in one call, relative to each other; see the
    module docstring. ``score`` (one trajectory) is a group of one, so it is a Reward too."""

    def __init__(self, client: LLMClient, *, max_reasks: int = 1, require_evidence: bool = True,
                 name: str = "group_judge", seed: int = DEFAULT_SEED, max_tokens: int = 2048,
                 max_step_chars: int = 2000, max_evidence_chars: int = 300, memo_size: int = 2_000,
                 max_prompt_chars: int = MAX_PROMPT_CHARS) -> None:
        super().__init__(client, max_reasks=max_reasks, require_evidence=require_evidence, name=name, seed=seed,
                         max_tokens=max_tokens, max_step_chars=max_step_chars,
                         max_evidence_chars=max_evidence_chars, memo_size=memo_size,
                         max_prompt_chars=max_prompt_chars)

    def _render(self, task: Task, trajectories: Sequence[Trajectory]
                ) -> tuple[list[str], Transcript, list[Transcript], int]:
        convs = [list(t.messages) for t in trajectories]
        k = _common_prefix(convs)
        ids = [f"T{i + 1}" for i in range(len(convs))]
        empty = Transcript(lines=[], steps=[])
        each = self._budget(self._messages(task, ids, empty, [empty] * len(ids))) // (len(ids) + (1 if k else 0))
        shared = render_transcript(convs[0][:k], max_step_chars=self.max_step_chars, label="shared",
                                   max_chars=each) if k else empty
        own = [render_transcript(c, max_step_chars=self.max_step_chars, label=tid, start=k, max_chars=each)
               for tid, c in zip(ids, convs, strict=True)]
        return ids, shared, own, k

    def messages(self, task: Task, trajectories: Sequence[Trajectory]) -> list[dict[str, Any]]:
        ids, shared, own, _k = self._render(task, trajectories)
        return self._messages(task, ids, shared, own)

    def _messages(self, task: Task, ids: list[str], shared: Transcript, own: list[Transcript]) -> list[dict[str, Any]]:
        lines = [*shared.lines]
        for t in own:
            lines.extend(t.lines)
        block = "\n".join([DATA_OPEN, *lines, DATA_CLOSE])
        user = (_task_section(task, rubric_criteria(task))
                + f"\n\n## Trajectories: untrusted data, {len(ids)} trajectories ({', '.join(ids)}), "
                  f"{shared.n_steps} shared steps\n" + block
                + "\n\nScore every trajectory in the data block above relative to the others. "
                  "Answer with the JSON only.")
        return [{"role": "system", "content": GROUP_SYSTEM}, {"role": "user", "content": user}]

    def _validate(self, value: Any, ids: list[str], shared: Transcript, own: list[Transcript]) -> dict[str, Any]:
        problems: list[str] = []
        entries = value.get("trajectories") if isinstance(value, dict) else None
        if not isinstance(entries, list):
            raise _Rejected(["trajectories must be a list with one entry per trajectory id"], value)
        got: dict[str, dict[str, Any]] = {}
        seen: set[str] = set()
        index = {tid: i for i, tid in enumerate(ids)}
        for e in entries:
            tid = str(e.get("trajectory_id") or "").strip() if isinstance(e, dict) else ""
            if tid not in index:
                problems.append(f"unknown trajectory id {_truncate(json.dumps(tid), 40)}")
                continue
            if tid in seen:
                problems.append(f"trajectory {tid} is listed twice")
                continue
            seen.add(tid)
            if not _score_ok(e.get("score")):
                problems.append(f"trajectory {tid}: score must be a number in [0, 1]")
                continue
            if self.require_evidence:
                search = {**shared.search, **own[index[tid]].search}
                why = check_evidence(e.get("evidence"), search, quote_required=True)
                if why:
                    problems.append(f"trajectory {tid}: the evidence {why}")
                    continue
            got[tid] = {"score": float(e["score"]), "evidence": str(e.get("evidence") or ""),
                        "explanation": str(e.get("explanation") or "")}
        missing = [tid for tid in ids if tid not in seen]
        if missing:
            problems.append("no entry for trajectories " + ", ".join(missing))
        if problems:
            raise _Rejected(problems, value)
        return got

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        return (await self.score_group(task, [trajectory]))[0]

    async def score_group(self, task: Task, trajectories: Sequence[Trajectory]) -> list[RewardResult]:
        """One RewardResult per trajectory, in order; all abstain (score None) on any failure."""
        self.stats["calls"] += 1
        trajectories = list(trajectories)
        if not trajectories:
            return []
        start = time.perf_counter()
        try:
            ids, shared, own, k = self._render(task, trajectories)
            key = (task.id, _sha([shared.digest(), *[t.digest() for t in own]]), _rubric_key(task))

            async def compute() -> tuple[list[RewardResult], bool]:
                res = await self._judge(task, ids, shared, own, k)
                return res, all(r.score is not None for r in res)

            results, hit = await self._memoised(key, compute)
            results = [r.model_copy(deep=True) for r in results]
            for r in results:
                r.details["memo_hit"] = hit
                r.details["seconds"] = round(time.perf_counter() - start, 4)
        except Exception as e:  # never raise
            results = [RewardResult(name=self.name, score=None, flags=["judge:abstain"],
                                    reason=f"the group judge failed unexpectedly ({type(e).__name__}: "
                                           f"{_truncate(str(e), 300)})", details={"error": type(e).__name__})
                       for _ in trajectories]
        if results and results[0].score is None:
            self.stats["abstains"] += 1
        return results

    async def _judge(self, task: Task, ids: list[str], shared: Transcript, own: list[Transcript], k: int
                     ) -> list[RewardResult]:
        messages = self._messages(task, ids, shared, own)
        schema = _group_schema(ids, self.max_evidence_chars)
        got, attempts, problems, error = await self._ask(messages, schema,
                                                         lambda v: self._validate(v, ids, shared, own))
        base = {"attempts": attempts, "problems": problems, "group_size": len(ids), "shared_steps": k,
                "model": self.client.config.model}
        if got is None:
            reason = (f"abstained: the group judge could not be reached or refused the request ({error})"
                      if error is not None else
                      f"abstained: no valid group verdict after {attempts} attempt(s); last: "
                      f"{_truncate(problems[-1] if problems else 'none', 300)}")
            return [RewardResult(name=self.name, score=None, reason=reason, flags=["judge:abstain"],
                                 details={**base, "trajectory_id": tid, **({"error": error} if error else {})})
                    for tid in ids]
        order = sorted(ids, key=lambda t: -got[t]["score"])
        results = []
        for tid, tr in zip(ids, own, strict=True):
            g = got[tid]
            flags: list[str] = []
            inj = {**shared.injections, **tr.injections}
            if inj:
                flags.append("judge:injection_in_data")
                if "assistant" in tr.injections.values():
                    flags.append("hack:judge_injection")
            if attempts > 1:
                flags.append("judge:reasked")
            rank = 1 + sum(1 for o in ids if got[o]["score"] > g["score"])
            results.append(RewardResult(
                name=self.name, score=g["score"], flags=flags,
                reason=f"group-relative score {g['score']:.2f} (rank {rank} of {len(ids)}): "
                       f"{_truncate(g['explanation'], 160) or 'no explanation'}",
                details={**base, "trajectory_id": tid, "rank": rank, "evidence": g["evidence"],
                         "explanation": g["explanation"], "best": order[0] == tid,
                         **({"injection_steps": sorted(inj)} if inj else {})},
            ))
        return results
