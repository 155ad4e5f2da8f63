"""What a run found: per-case outcomes from a pydantic-evals report, pass@k and pass^k, the run record.

A case *run* passes when the task did not raise, no evaluator raised, and every assertion is true.
With ``--repeat N`` a case has N runs, c of which pass:

* pass@k = 1 - C(N-c, k) / C(N, k): the chance that at least one of k runs drawn from the N passes
  (Chen et al. 2021's unbiased estimator);
* pass^k = C(c, k) / C(N, k): the chance that all k drawn runs pass (tau-bench's reliability metric).

Both are averaged over cases, for k = 1..N. pass@1 = pass^1 = the mean per-run pass rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from pydantic_evals.evaluators import ReportEvaluator, ReportEvaluatorContext
from pydantic_evals.reporting import EvaluationReport, ReportCase, ReportCaseFailure
from pydantic_evals.reporting.analyses import ScalarResult, TableResult

__all__ = ["CaseResult", "PassAtK", "RunOutcome", "RunRecord", "Summary", "case_results", "pass_at_k", "pass_hat_k",
           "summarize"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k runs drawn without replacement from n, c of them passing, passes)."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"need 0 < k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """P(all k runs drawn without replacement from n, c of them passing, pass) (tau-bench's pass^k)."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"need 0 < k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    return math.comb(c, k) / math.comb(n, k)


@dataclass
class RunOutcome:
    """One run of one case."""

    case: str
    passed: bool
    error: str | None             # the task (or a lifecycle hook) raised: the case could not be run
    reasons: list[str]            # why it did not pass (failed assertions, evaluator errors)
    scores: dict[str, float]
    output: str
    duration_s: float
    attributes: dict[str, Any]


def _outcome(c: ReportCase | ReportCaseFailure) -> RunOutcome:
    name = c.source_case_name or c.name
    if isinstance(c, ReportCaseFailure):
        return RunOutcome(name, False, c.error_message, [c.error_message], {}, "", 0.0, {})
    reasons = [f"{k}: {a.reason or 'false'}" for k, a in c.assertions.items() if not a.value]
    reasons += [f"{f.name} raised {f.error_message}" for f in c.evaluator_failures]
    scores = {k: float(s.value) for k, s in c.scores.items()}
    out = c.output if isinstance(c.output, str) else ("" if c.output is None else str(c.output))
    passed = not c.evaluator_failures and all(a.value for a in c.assertions.values())
    return RunOutcome(name, passed, None, reasons, scores, out, float(c.task_duration), dict(c.attributes or {}))


def outcomes(report: EvaluationReport) -> dict[str, list[RunOutcome]]:
    """Case name -> its runs' outcomes, cases in report order."""
    out: dict[str, list[RunOutcome]] = {}
    for c in [*report.cases, *report.failures]:
        o = _outcome(c)
        out.setdefault(o.case, []).append(o)
    return out


class CaseResult(BaseModel):
    name: str
    tags: list[str] = Field(default_factory=list)
    runs: int
    passed: int
    errors: int = 0                                    # runs where the case could not run (task raised)
    reasons: list[str] = Field(default_factory=list)   # distinct reasons of the failed runs (first few)
    scores: dict[str, float] = Field(default_factory=dict)   # means over runs
    output: str = ""                                   # the first run's output (cut)
    duration_s: float = 0.0                            # mean task time

    @property
    def all_passed(self) -> bool:
        return self.runs > 0 and self.passed == self.runs

    @property
    def status(self) -> str:
        if self.runs == 1:
            return "error" if self.errors else ("pass" if self.passed else "fail")
        return f"{self.passed}/{self.runs}"


class Summary(BaseModel):
    cases: int = 0
    runs: int = 0
    passed_cases: int = 0          # cases whose every run passed
    pass_rate: float = 0.0         # mean over cases of passed runs / runs (= pass@1)
    errors: int = 0                # runs that could not run
    pass_at_k: dict[int, float] = Field(default_factory=dict)
    pass_hat_k: dict[int, float] = Field(default_factory=dict)
    by_tag: dict[str, float] = Field(default_factory=dict)   # pass rate per tag


class RunRecord(BaseModel):
    """One model's run of one suite: what history keeps (run.json; the full report is report.json)."""

    run_id: str
    suite: str
    suite_version: str
    suite_path: str
    model: dict[str, Any]
    label: str
    started_at: str
    finished_at: str = ""
    duration_s: float = 0.0
    repeat: int = 1
    only_failed: bool = False
    options: dict[str, Any] = Field(default_factory=dict)
    usage: dict[str, Any] = Field(default_factory=dict)
    cases: list[CaseResult] = Field(default_factory=list)
    summary: Summary = Field(default_factory=Summary)

    def case(self, name: str) -> CaseResult | None:
        return next((c for c in self.cases if c.name == name), None)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + f"...[{len(text) - n} more]"


def case_results(report: EvaluationReport, tags: dict[str, list[str]] | None = None) -> list[CaseResult]:
    tags = tags or {}
    out = []
    for name, runs in outcomes(report).items():
        reasons: list[str] = []
        for r in runs:
            for why in r.reasons if not r.passed else []:
                why = _cut(" ".join(why.split()), 400)
                if why not in reasons and len(reasons) < 5:
                    reasons.append(why)
        keys = {k for r in runs for k in r.scores}
        scores = {k: sum(r.scores[k] for r in runs if k in r.scores) / sum(1 for r in runs if k in r.scores) for k in keys}
        ok = [r for r in runs if r.error is None]
        out.append(CaseResult(
            name=name, tags=list(tags.get(name, [])), runs=len(runs), passed=sum(r.passed for r in runs),
            errors=sum(r.error is not None for r in runs), reasons=reasons, scores=dict(sorted(scores.items())),
            output=_cut(runs[0].output, 2000), duration_s=sum(r.duration_s for r in ok) / len(ok) if ok else 0.0))
    return out


def summarize(cases: Iterable[CaseResult]) -> Summary:
    cases = [c for c in cases if c.runs > 0]
    if not cases:
        return Summary()
    n = min(c.runs for c in cases)
    s = Summary(cases=len(cases), runs=sum(c.runs for c in cases), passed_cases=sum(c.all_passed for c in cases),
                pass_rate=sum(c.passed / c.runs for c in cases) / len(cases), errors=sum(c.errors for c in cases))
    for k in range(1, n + 1):
        s.pass_at_k[k] = sum(pass_at_k(c.runs, c.passed, k) for c in cases) / len(cases)
        s.pass_hat_k[k] = sum(pass_hat_k(c.runs, c.passed, k) for c in cases) / len(cases)
    tags = sorted({t for c in cases for t in c.tags})
    for t in tags:
        tc = [c for c in cases if t in c.tags]
        s.by_tag[t] = sum(c.passed / c.runs for c in tc) / len(tc)
    return s


@dataclass(repr=False)
class PassAtK(ReportEvaluator):
    """pydantic-evals report evaluator: pass@k and pass^k over the report's repeated cases (k = 1..N)."""

    def evaluate(self, ctx: ReportEvaluatorContext) -> list:
        s = summarize(case_results(ctx.report))
        if not s.cases:
            return []
        rows: list[list[Any]] = [[k, round(s.pass_at_k[k], 4), round(s.pass_hat_k[k], 4)] for k in sorted(s.pass_at_k)]
        n = max(s.pass_at_k)
        return [
            TableResult(title="pass@k and pass^k", columns=["k", "pass@k", "pass^k"], rows=rows,
                        description=f"over {s.cases} cases with {n} runs each"),
            ScalarResult(title=f"pass@{n}", value=round(s.pass_at_k[n], 4)),
            ScalarResult(title=f"pass^{n}", value=round(s.pass_hat_k[n], 4)),
        ]
