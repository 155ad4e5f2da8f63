"""Evaluators beyond pydantic-evals' built-ins, every one usable from a suite's YAML.

    - Regex: '^\\d+$'                                  # or {pattern: ..., ignore_case: true, full: true}
    - RunCode: {contains: "55"}                        # the answer's code, run in the case's sandbox
    - UnitTests: {tests: "import unittest ..."}        # rewards.code's signed unittest runner
    - EpisodeReward: {threshold: 1.0}                  # a tool episode scored with rewards (default config)
    - RubricJudge: {criteria: ["says the answer is 42"]}   # rewards.judge's rubric judge (--judge MODEL)
    - AllOf: [{Contains: "def "}, {RunCode: {contains: "ok"}}]
    - AnyOf: [{Regex: yes}, {Regex: "^y$"}]
    - Not: {Contains: "I cannot"}

Each returns an assertion (True/False) with a reason; EpisodeReward and RubricJudge also return
their score as ``<name>_score``. Sandboxes come from the case's lifecycle
(:mod:`evals.context`): one per case run, leased on first use, given back after the evaluators.

Composites hold other evaluators' specs (the same short forms as a case's ``evaluators`` list) and
pass when all / any / none of them pass. A child *passes* when every boolean it returns is true
(numbers without any boolean pass at 1.0 or more; labels are ignored); a child that raises fails.
"""

from __future__ import annotations

import json
import re
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext
from pydantic_evals.evaluators.common import DEFAULT_EVALUATORS
from pydantic_evals.evaluators.spec import EvaluatorSpec

from evals.context import EvalError, case_resources, run_resources

__all__ = [
    "AllOf",
    "AnyOf",
    "EVALUATORS",
    "EpisodeReward",
    "Not",
    "Regex",
    "RubricJudge",
    "RunCode",
    "UnitTests",
    "build_evaluator",
    "evaluator_types",
    "extract_code",
    "needs_sandbox",
    "register_evaluator",
]

_SHOWN = 300


def _cut(text: str, n: int = _SHOWN) -> str:
    text = text if isinstance(text, str) else str(text)
    return text if len(text) <= n else text[:n] + f"...[{len(text) - n} more]"


def _text(output: Any) -> str:
    return output if isinstance(output, str) else ("" if output is None else str(output))


class _Named:
    """evaluation_name overrides the name in reports (as for pydantic-evals' built-ins)."""

    evaluation_name: str | None

    def get_default_evaluation_name(self) -> str:
        return self.evaluation_name if isinstance(self.evaluation_name, str) else self.get_serialization_name()


# ============================================================================ text
@dataclass(repr=False)
class Regex(_Named, Evaluator):
    """The output matches ``pattern`` (``re.search``; ``full``: the whole output, stripped)."""

    pattern: str
    ignore_case: bool = False
    multiline: bool = False
    full: bool = False
    evaluation_name: str | None = None

    def __post_init__(self) -> None:
        flags = (re.I if self.ignore_case else 0) | (re.M if self.multiline else 0) | (re.S if self.full else 0)
        try:
            self._re = re.compile(self.pattern, flags)
        except re.error as e:
            raise ValueError(f"invalid regex {self.pattern!r}: {e}") from None

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        out = _text(ctx.output)
        m = self._re.fullmatch(out.strip()) if self.full else self._re.search(out)
        if m:
            return EvaluationReason(True, f"matched {_cut(m.group(0), 80)!r}")
        return EvaluationReason(False, f"{'the whole output does not match' if self.full else 'no match for'} "
                                       f"/{_cut(self.pattern, 80)}/ in {_cut(out, 120)!r}")


# ============================================================================ code
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[^\n]*\n(.*?)```", re.S)
_LANGS = {"python": {"", "python", "py", "python3"}, "bash": {"", "bash", "sh", "shell", "console"}}


def extract_code(text: str, language: Literal["python", "bash"] = "python") -> str | None:
    """The last fenced code block of ``text`` in ``language`` (or with no language tag)."""
    blocks = [body for lang, body in _FENCE.findall(text or "") if lang.lower() in _LANGS[language]]
    return blocks[-1] if blocks else None


@dataclass(repr=False)
class RunCode(_Named, Evaluator):
    """Extract the answer's code (its last fenced block; ``whole_output``: the whole answer when there is
    none), run it in the case's sandbox and check what it prints. With no ``contains`` / ``equals`` /
    ``regex``, stdout must equal the case's ``expected_output`` (stripped) when that is a string."""

    needs_sandbox = True  # (not annotated: a class attribute, not a dataclass field)

    contains: str | None = None
    equals: str | None = None
    regex: str | None = None
    exit_code: int | None = 0
    language: Literal["python", "bash"] = "python"
    stdin: str | None = None
    args: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    whole_output: bool = False
    evaluation_name: str | None = None

    def __post_init__(self) -> None:
        if self.language not in _LANGS:
            raise ValueError(f"language must be one of {sorted(_LANGS)}, got {self.language!r}")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as e:
                raise ValueError(f"invalid regex {self.regex!r}: {e}") from None

    async def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        out = _text(ctx.output)
        code = extract_code(out, self.language)
        if code is None and self.whole_output and out.strip():
            code = out
        if code is None:
            return EvaluationReason(False, f"no fenced {self.language} code block in the output {_cut(out, 120)!r}")
        sb = await case_resources().sandbox()
        for path, content in self.files.items():
            await sb.write_file(path, content)
        main = "main.py" if self.language == "python" else "main.sh"
        await sb.write_file(main, code)
        argv = (["python3", main] if self.language == "python" else ["bash", main]) + [str(a) for a in self.args]
        r = await sb.exec(argv, timeout=self.timeout_s, stdin=self.stdin, cwd="/workspace")
        stdout, stderr = r.stdout, r.stderr
        tail = f"stdout {_cut(stdout.strip(), 160)!r}" + (f", stderr {_cut(stderr.strip()[-300:], 160)!r}" if stderr.strip() else "")
        if r.timed_out:
            return EvaluationReason(False, f"timed out after {self.timeout_s:g} s; {tail}")
        if r.oom_killed:
            return EvaluationReason(False, f"killed for using too much memory; {tail}")
        if self.exit_code is not None and r.exit_code != self.exit_code:
            return EvaluationReason(False, f"exit code {r.exit_code}, expected {self.exit_code}; {tail}")
        checks: list[tuple[bool, str]] = []
        if self.contains is not None:
            checks.append((self.contains in stdout, f"stdout contains {self.contains!r}"))
        if self.equals is not None:
            checks.append((stdout.strip() == self.equals.strip(), f"stdout equals {_cut(self.equals, 60)!r}"))
        if self.regex is not None:
            checks.append((re.search(self.regex, stdout) is not None, f"stdout matches /{self.regex}/"))
        if not checks and isinstance(ctx.expected_output, str):
            exp = ctx.expected_output
            checks.append((stdout.strip() == exp.strip(), f"stdout equals the expected output {_cut(exp, 60)!r}"))
        failed = [what for ok, what in checks if not ok]
        if failed:
            return EvaluationReason(False, "not true: " + "; ".join(failed) + f" ({tail})")
        return EvaluationReason(True, ("; ".join(w for _, w in checks) or f"exited {r.exit_code}") + f" ({tail})")


@dataclass(repr=False)
class UnitTests(_Named, Evaluator):
    """The answer's code (last fenced block) as ``{module}.py`` against a stdlib ``unittest`` module,
    run by rewards.code's signed runner in a fresh sandbox; passes at ``min_score`` (fraction of
    tests passed)."""

    needs_sandbox = True  # (not annotated: a class attribute, not a dataclass field)

    tests: str
    module: str = "solution"
    min_score: float = 1.0
    timeout_s: float = 10.0
    evaluation_name: str | None = None

    async def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        from rewards.code import UnitTestReward
        from synth.episode import Trajectory

        run = run_resources()
        reward = UnitTestReward(run.require_pool("UnitTests"), tests=self.tests, module=self.module,
                                timeout_s=self.timeout_s, source="message")
        traj = Trajectory(task_id=ctx.name or "case", domain="code",
                          messages=[{"role": "assistant", "content": _text(ctx.output)}])
        r = await reward.score(_chat_task(ctx, []), traj)
        if r.score is None:
            return EvaluationReason(False, f"unit tests could not score: {r.reason}")
        return EvaluationReason(r.score >= self.min_score, f"{r.score:.2f} of the tests pass: {_cut(r.reason)}")


# ============================================================================ episodes, judges
def _chat_task(ctx: EvaluatorContext, criteria: list[str]) -> Any:
    """A Task standing for a chat case (for rewards that need one)."""
    from evals.inputs import InlineTask

    inputs = ctx.inputs
    prompt = getattr(inputs, "prompt", None) or _text(inputs)
    return InlineTask(domain="chat", instruction=prompt or "(no prompt)",
                      rubric={"success_criteria": list(criteria)}).to_task(ctx.name or "case")


def _with_score(name: str, passed: bool, reason: str, score: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {name: EvaluationReason(passed, reason)}
    if score is not None:
        out[f"{name}_score"] = float(score)
    return out


@dataclass(repr=False)
class EpisodeReward(_Named, Evaluator):
    """Score a tool-episode case's trajectory with rewards (``reward``: a rewards.compose config, as
    in YAML: ``{components: [...], gate: [...], threshold: ...}``; default RewardConfig.default():
    world state, communication, tool validity, the re-verification gate). Passes when the total is
    at least ``threshold`` (default: the config's own threshold)."""

    needs_sandbox = True  # (not annotated: a class attribute, not a dataclass field)

    reward: dict[str, Any] | None = None
    threshold: float | None = None
    evaluation_name: str | None = None

    def __post_init__(self) -> None:
        from rewards.compose import RewardConfig

        self._config = RewardConfig.model_validate(self.reward) if self.reward is not None else RewardConfig.default()

    async def evaluate(self, ctx: EvaluatorContext) -> dict[str, Any]:
        from rewards.compose import build_reward

        case = case_resources()
        if case.trajectory is None or case.task is None:
            raise EvalError("EpisodeReward scores tool episodes: give the case `task` (a task id or an inline task)")
        run = case.run
        key = ("reward", self._config.model_dump_json())
        reward = run.cache.get(key)
        if reward is None:
            reward = run.cache[key] = build_reward(self._config, pool=run.require_pool("EpisodeReward"),
                                                     llm_client=run.judge)
        r = await reward.score(case.task, case.trajectory)
        name = self.get_default_evaluation_name()
        threshold = self._config.threshold if self.threshold is None else self.threshold
        if r.score is None:
            return _with_score(name, False, f"the reward abstained: {_cut(r.reason)}", None)
        ok = r.score >= threshold - 1e-12
        return _with_score(name, ok, f"reward {r.score:.2f} ({'>=' if ok else '<'} {threshold:g}): {_cut(r.reason)}",
                           r.score)


@dataclass(repr=False)
class RubricJudge(_Named, Evaluator):
    """rewards.judge's rubric judge (evidence-checked, injection-resistant; --judge MODEL). A chat
    case is judged on ``criteria``; a tool episode on its task's rubric, or on ``criteria`` when
    given. Passes when the fraction of criteria met is at least ``threshold``; an abstaining judge
    (unreachable, garbage) fails with the reason."""

    criteria: list[str] = field(default_factory=list)
    threshold: float = 1.0
    require_evidence: bool = True
    max_tokens: int = 1024
    evaluation_name: str | None = None

    async def evaluate(self, ctx: EvaluatorContext) -> dict[str, Any]:
        from synth.episode import Trajectory

        case = case_resources()
        judge = case.run.rubric_judge(require_evidence=self.require_evidence, max_tokens=self.max_tokens)
        if case.trajectory is not None and case.task is not None:
            task, traj = case.task, case.trajectory
            if self.criteria:
                task = task.model_copy(update={"rubric": task.rubric.model_copy(
                    update={"success_criteria": list(self.criteria), "checkpoints": []})})
        else:
            if not self.criteria:
                raise EvalError("RubricJudge on a chat case needs `criteria`")
            task = _chat_task(ctx, self.criteria)
            msgs = case.conversation or [{"role": "user", "content": task.instruction},
                                         {"role": "assistant", "content": _text(ctx.output)}]
            traj = Trajectory(task_id=task.id, domain="chat", messages=msgs)
        r = await judge.score(task, traj)
        name = self.get_default_evaluation_name()
        if r.score is None:
            return _with_score(name, False, f"no verdict ({_cut(r.reason)})", None)
        ok = r.score >= self.threshold - 1e-12
        return _with_score(name, ok, f"{r.score:.2f} of the criteria met: {_cut(r.reason)}", r.score)


# ============================================================================ composites
_REGISTERED: dict[str, type[Evaluator]] = {}


def register_evaluator(cls: type[Evaluator]) -> type[Evaluator]:
    """Make a custom evaluator class usable by name in suites and composites (a decorator too)."""
    _REGISTERED[cls.get_serialization_name()] = cls
    return cls


def evaluator_types() -> list[type[Evaluator]]:
    """tooldojo's evaluators and every registered one (pass as pydantic-evals' custom_evaluator_types)."""
    return list(_REGISTERED.values())


def _registry() -> dict[str, type[Evaluator]]:
    reg = {c.get_serialization_name(): c for c in DEFAULT_EVALUATORS}
    reg.update(_REGISTERED)
    return reg


def build_evaluator(spec: Any) -> Evaluator:
    """An evaluator from its short form (``"Name"``, ``{Name: arg}``, ``{Name: {k: v}}``) or an instance."""
    if isinstance(spec, Evaluator):
        return spec
    try:
        named = EvaluatorSpec.model_validate(spec)
    except Exception:
        raise ValueError(f"not an evaluator spec: {_cut(json.dumps(spec, default=str), 120)} "
                         "(use \"Name\", {Name: argument} or {Name: {key: value}})") from None
    cls = _registry().get(named.name)
    if cls is None:
        raise ValueError(f"unknown evaluator {named.name!r}; known: {', '.join(sorted(_registry()))}")
    try:
        return cls(*named.args, **named.kwargs)
    except Exception as e:
        raise ValueError(f"evaluator {named.name}: {e}") from None


def _spec_of(ev: Evaluator) -> Any:
    return ev.as_spec().model_dump(mode="json", context={"use_short_form": True})


def needs_sandbox(ev: Any) -> bool:
    """Does this evaluator (or a child of a composite) run anything in a sandbox?"""
    if getattr(ev, "needs_sandbox", False):
        return True
    return any(needs_sandbox(c) for c in getattr(ev, "children", ()))


async def _child_verdict(ev: Evaluator, ctx: EvaluatorContext) -> tuple[bool, str]:
    name = ev.get_default_evaluation_name()
    try:
        out = await ev.evaluate_async(ctx)
    except Exception as e:  # noqa: BLE001 - a failing child fails the composite, with why
        return False, f"{name} raised {type(e).__name__}: {_cut(str(e), 160)}"
    items = list(out.items()) if isinstance(out, Mapping) else [(name, out)]
    bools: list[tuple[str, bool, str | None]] = []
    nums: list[tuple[str, float]] = []
    for key, v in items:
        value, why = (v.value, v.reason) if isinstance(v, EvaluationReason) else (v, None)
        if isinstance(value, bool):
            bools.append((key, value, why))
        elif isinstance(value, (int, float)):
            nums.append((key, float(value)))
    if bools:
        bad = [(k, why) for k, ok, why in bools if not ok]
        if bad:
            return False, "; ".join(f"{k}: {why or 'false'}" for k, why in bad)
        return True, "; ".join(f"{k}: {why or 'true'}" for k, _ok, why in bools)
    if nums:
        bad_n = [(k, x) for k, x in nums if x < 1.0]
        if bad_n:
            return False, "; ".join(f"{k} = {x:g} < 1" for k, x in bad_n)
        return True, "; ".join(f"{k} = {x:g}" for k, x in nums)
    return True, f"{name}: nothing to check"


@dataclass(repr=False)
class _Composite(_Named, Evaluator):
    evaluators: list[Any]
    evaluation_name: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.evaluators, (list, tuple)) or not self.evaluators:
            raise ValueError(f"{self.get_serialization_name()} takes a non-empty list of evaluators")
        self.children = [build_evaluator(s) for s in self.evaluators]

    @abstractmethod
    def evaluate(self, ctx: EvaluatorContext) -> Any: ...

    def build_serialization_arguments(self) -> dict[str, Any]:
        args: dict[str, Any] = {"evaluators": [_spec_of(c) for c in self.children]}
        if self.evaluation_name is not None:
            args["evaluation_name"] = self.evaluation_name
        return args


@dataclass(repr=False)
class AllOf(_Composite):
    """Passes when every child evaluator passes (all are run; the reason lists the failures)."""

    async def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        verdicts = [(c.get_default_evaluation_name(), *await _child_verdict(c, ctx)) for c in self.children]
        bad = [why for _n, ok, why in verdicts if not ok]
        if bad:
            return EvaluationReason(False, f"{len(bad)} of {len(verdicts)} failed: " + _cut(" | ".join(bad), 600))
        return EvaluationReason(True, f"all {len(verdicts)} passed")


@dataclass(repr=False)
class AnyOf(_Composite):
    """Passes when at least one child evaluator passes (children run in order; the first pass stops)."""

    async def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        reasons = []
        for c in self.children:
            ok, why = await _child_verdict(c, ctx)
            if ok:
                return EvaluationReason(True, f"passed: {_cut(why, 200)}")
            reasons.append(why)
        return EvaluationReason(False, "none passed: " + _cut(" | ".join(reasons), 600))


@dataclass(repr=False, init=False)
class Not(_Named, Evaluator):
    """Passes when its one child evaluator fails. YAML: ``Not: {Contains: "sorry"}``."""

    evaluator: Any
    evaluation_name: str | None = None

    def __init__(self, evaluator: Any = None, evaluation_name: str | None = None, **spec: Any) -> None:
        if evaluator is None and len(spec) == 1:
            evaluator, spec = dict(spec), {}
        if spec or evaluator is None:
            raise ValueError("Not takes one evaluator, e.g. Not: {Contains: sorry}")
        self.evaluator = evaluator
        self.evaluation_name = evaluation_name
        self.children = [build_evaluator(evaluator)]

    def build_serialization_arguments(self) -> dict[str, Any]:
        args: dict[str, Any] = {"evaluator": _spec_of(self.children[0])}
        if self.evaluation_name is not None:
            args["evaluation_name"] = self.evaluation_name
        return args

    async def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        child = self.children[0]
        ok, why = await _child_verdict(child, ctx)
        return EvaluationReason(not ok, f"the negated evaluator {'passed' if ok else 'failed'}: {_cut(why, 300)}")


EVALUATORS: tuple[type[Evaluator], ...] = (Regex, RunCode, UnitTests, EpisodeReward, RubricJudge, AllOf, AnyOf, Not)
for _cls in EVALUATORS:
    register_evaluator(_cls)
