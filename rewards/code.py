"""Unit-test reward for code-producing tasks: the agent's code + the task's tests, run in a fresh sandbox.

    reward = UnitTestReward(pool, tests=TESTS)              # or a {task_id: source} map, or a callable
    r = await reward.score(task, traj)                        # r.score = fraction of tests that pass

Conventions
-----------
*The agent's code* (`source="auto"`, the default) is, in this order:

1. the content of the **last successful tool call that wrote a Python file**: a call whose arguments
   hold a string under one of `CODE_KEYS` (`content`, `code`, `source`, `text`, `data`) next to a
   path under one of `PATH_KEYS` (`path`, `file_path`, `filename`, `file`, `name`) ending in `.py`
   (or equal to `code_path` when given), e.g. file_manager's `write_vfs_file(path, content)`;
   a `mode="append"` call appends to the previous write of the same path;
2. otherwise the **last fenced code block** (```python / ```py / ```) of the last assistant message
   that has one.

`source="tool"` or `source="message"` uses only one of the two.

*The unit tests* come from, in this order: the constructor's `tests` (a source string for every
task, a `{task_id: source}` mapping, or a callable `task -> source | None`); a `unit_tests` entry
of `task.metadata` when a task object carries one; a `task.rubric.success_criteria` entry that
starts with `UNIT_TESTS_MARKER` ("unit_tests:"; the rest of the entry is the source). A task with
no tests makes the reward abstain (score None): that is a data problem, not the agent's.

The tests are a stdlib `unittest` module. The agent's code is saved as `solution.py` (`module=`)
next to it, so the tests do `from solution import f` or `import solution`. Every `test*` method of
a top-level class counts as one test (counted from the source, not from what ran).

How the run resists tampering
-----------------------------
The code, the tests and a small runner are written into a reset sandbox from the pool (scratch
empty, no stray processes) and run with `python3 -I` under a wall-time cap; output beyond
`max_output_bytes` is cut (the sandbox itself caps each stream too) but the run is still scored.
The runner never trusts what the run prints:

* A per-run nonce and HMAC key arrive on stdin, which the runner reads and closes *before* any of
  the agent's code is imported; the runner's last act is to write a result file carrying the nonce
  and an HMAC over the results. A run that exits early (`os._exit(0)`, `sys.exit` at import, a
  crash) leaves no valid file and scores 0; a file written by anyone without the key fails the MAC.
* It snapshots `unittest`'s TestCase/TestResult/TestSuite/TestLoader methods, `builtins`, `os._exit`
  and `sys.exit` before importing the tests, and the test classes' methods after; anything replaced
  by the end of the run (monkeypatching an assert, a stubbed-out test) scores 0 with a `hack:` flag.
* It builds the suite itself from the test module's own classes (no `load_tests` hook, which a
  `from solution import *` could smuggle in) and checks that every test that ran has its code in
  the test file. Tests that never ran count as failed.

This defeats the usual exploits; it is not a boundary against code that reads the runner's memory
(the tests run in the same process as the code they test). The sandbox bounds the damage.
"""

from __future__ import annotations

import ast
import hashlib
import hmac
import json
import posixpath
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Literal

from rewards.base import RewardResult
from synth.episode import Trajectory
from synth.tasks import Task

UNIT_TESTS_MARKER = "unit_tests:"
CODE_KEYS = ("content", "code", "source", "text", "data")
PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "name")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[^\n]*\n(.*?)```", re.S)
_CODE_LANGS = {"", "python", "py", "python3"}

TestsSource = str | Mapping[str, str] | Callable[[Task], "str | None"]


# ------------------------------------------------------------------ extraction
def code_from_tool_calls(traj: Trajectory, code_path: str | None = None) -> tuple[str, str] | None:
    """(code, where) of the last successful tool call that wrote a Python file, or None."""
    files: dict[str, str] = {}
    last: str | None = None
    for rec in traj.tool_calls:
        if not rec.ok or not isinstance(rec.arguments, dict):
            continue
        args = rec.arguments
        code = next((args[k] for k in CODE_KEYS if isinstance(args.get(k), str)), None)
        path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str)), None)
        if code is None or path is None:
            continue
        if code_path is not None:
            if path.rstrip("/") != code_path.rstrip("/") and posixpath.basename(path) != code_path:
                continue
        elif not path.endswith(".py"):
            continue
        files[path] = files.get(path, "") + code if args.get("mode") == "append" else code
        last = path
    if last is None:
        return None
    return files[last], f"tool call writing {last}"


def code_from_messages(traj: Trajectory) -> tuple[str, str] | None:
    """(code, where) of the last fenced code block of the last assistant message that has one."""
    for i in range(len(traj.messages) - 1, -1, -1):
        m = traj.messages[i]
        if m.get("role") != "assistant" or not isinstance(m.get("content"), str):
            continue
        blocks = [body for lang, body in _FENCE.findall(m["content"]) if lang.lower() in _CODE_LANGS]
        if blocks:
            return blocks[-1], f"fenced code block in assistant message {i}"
    return None


def extract_code(traj: Trajectory, source: Literal["auto", "tool", "message"] = "auto",
                 code_path: str | None = None) -> tuple[str, str] | None:
    if source in ("auto", "tool"):
        found = code_from_tool_calls(traj, code_path)
        if found or source == "tool":
            return found
    return code_from_messages(traj)


def expected_tests(source: str, module: str) -> list[str]:
    """Test ids (`module.Class.test_x`) of every test* method of a top-level class with a base class."""
    tree = ast.parse(source)
    ids = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.bases:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    ids.append(f"{module}.{node.name}.{item.name}")
    return ids


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _cut(text: str, limit: int) -> tuple[str, bool]:
    raw = text.encode(errors="replace")
    if len(raw) <= limit:
        return text, False
    return raw[:limit].decode(errors="ignore") + f"\n... [{len(raw) - limit} more bytes cut]", True


# ---------------------------------------------------------------------- runner
# Runs inside the sandbox with python3 -I (stdlib only). argv: nothing; stdin: one JSON object.
RUNNER = r'''
import os, sys

def _main():
    import builtins, hashlib, hmac, importlib, json, traceback, unittest
    _os_read, _os_open, _os_write, _os_close, _os_exit = os.read, os.open, os.write, os.close, os._exit
    _dumps, _new_mac, _sha256, _isinstance, _issub, _getattr = json.dumps, hmac.new, hashlib.sha256, isinstance, issubclass, getattr
    chunks = []
    while True:
        b = _os_read(0, 65536)
        if not b:
            break
        chunks.append(b)
    _os_close(0)
    cfg = json.loads(b"".join(chunks))
    mac = _new_mac(cfg.pop("key").encode(), digestmod=_sha256)
    del chunks
    nonce, out_path, mod_name, test_file = cfg["nonce"], cfg["out"], cfg["module"], cfg["test_file"]
    limit = int(cfg.get("detail_bytes", 1500))
    sys.path.insert(0, cfg["dir"])
    RealTestCase = unittest.TestCase

    def targets():
        t = []
        for cls in (unittest.TestCase, unittest.TestResult, unittest.TestSuite, unittest.TestLoader,
                    unittest.case._Outcome if hasattr(unittest.case, "_Outcome") else None, Result):
            if cls is None:
                continue
            for k, v in list(vars(cls).items()):
                if callable(v) or _isinstance(v, (staticmethod, classmethod, property)):
                    t.append((cls, k))
        t += [(os, "_exit"), (sys, "exit"), (unittest, "TestCase"), (unittest.case, "TestCase")]
        t += [(builtins, k) for k in vars(builtins) if k != "_"]
        return t

    status, details, order = {}, {}, []

    def mark(test, outcome, err=None):
        tid = test.id()
        if tid not in status:
            order.append(tid)
        prev = status.get(tid)
        if prev in ("fail", "error") and outcome in ("pass", "skip"):
            return
        status[tid] = outcome
        if err is not None:
            try:
                text = "".join(traceback.format_exception(*err))
            except BaseException:
                text = "unprintable error"
            details[tid] = text[-limit:]

    class Result(unittest.TestResult):
        def addSuccess(self, test): mark(test, "pass")
        def addFailure(self, test, err): mark(test, "fail", err)
        def addError(self, test, err): mark(test, "error", err)
        def addSkip(self, test, reason): mark(test, "skip")
        def addExpectedFailure(self, test, err): mark(test, "pass")
        def addUnexpectedSuccess(self, test): mark(test, "fail")
        def addSubTest(self, test, subtest, err):
            if err is not None:
                mark(test, "fail" if _issub(err[0], test.failureException) else "error", err)

    guard = targets()
    _vars = vars
    before = [(o, k, _vars(o).get(k)) for o, k in guard]  # raw dict entries: classmethods bind anew
    tamper = []

    def check(when):
        for o, k, v in before:
            if _vars(o).get(k) is not v:
                name = _getattr(o, "__name__", type(o).__name__)
                tamper.append("%s.%s was replaced %s" % (name, k, when))

    load_error = None
    cases = []
    try:
        mod = importlib.import_module(mod_name)
        loader = unittest.TestLoader()
        for name, obj in list(vars(mod).items()):
            if _isinstance(obj, type) and _issub(obj, RealTestCase) and obj.__module__ == mod_name:
                for meth in loader.getTestCaseNames(obj):
                    cases.append(obj(meth))
    except BaseException as e:
        load_error = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-limit:]
    check("while the tests were imported")
    methods = []
    for c in cases:
        fn = vars(type(c)).get(c._testMethodName)
        code = _getattr(fn, "__code__", None)
        if code is None or code.co_filename != test_file:
            tamper.append("%s does not run the test file's code" % c.id())
        methods.append((type(c), c._testMethodName, fn))
    result = Result()
    if not tamper:
        try:
            unittest.TestSuite(cases).run(result)  # the suite runs setUpClass/setUpModule fixtures
        except BaseException as e:
            load_error = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-limit:]
        for c in cases:
            if c.id() not in status:
                status[c.id()], details[c.id()] = "error", "the test reported no outcome"
                order.append(c.id())
    check("while the tests ran")
    for cls, k, fn in methods:
        if vars(cls).get(k) is not fn:
            tamper.append("%s.%s was replaced while the tests ran" % (cls.__name__, k))
    body = {"nonce": nonce, "tests": [[t, status[t], details.get(t, "")] for t in order],
            "load_error": load_error, "tamper": tamper[:20]}
    payload = _dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    mac.update(payload)
    doc = _dumps({"body": payload.decode(), "mac": mac.hexdigest()}).encode()
    fd = _os_open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    while doc:
        doc = doc[_os_write(fd, doc):]
    _os_close(fd)
    _os_exit(0)

_main()
'''


# ----------------------------------------------------------------------- reward
class UnitTestReward:
    """Fraction of the task's unit tests that the agent's code passes, run in a fresh sandbox."""

    name = "unit_tests"

    def __init__(
        self,
        pool: Any,
        *,
        tests: TestsSource | None = None,
        timeout_s: float = 10.0,
        max_output_bytes: int = 8192,
        source: Literal["auto", "tool", "message"] = "auto",
        code_path: str | None = None,
        module: str = "solution",
        python: str = "python3",
    ):
        if source not in ("auto", "tool", "message"):
            raise ValueError(f"unknown code source {source!r}: use auto, tool or message")
        if not module.isidentifier() or module.startswith("test"):
            raise ValueError(f"module {module!r} must be a Python identifier not starting with 'test'")
        self.pool = pool
        self.tests = tests
        self.timeout_s = float(timeout_s)
        self.max_output_bytes = int(max_output_bytes)
        self.source = source
        self.code_path = code_path
        self.module = module
        self.test_module = f"test_{module}"
        self.python = python

    # ---------------------------------------------------------------- lookup
    def tests_for(self, task: Task) -> str | None:
        t = self.tests
        if isinstance(t, str):
            return t
        if isinstance(t, Mapping):
            return t.get(task.id)
        if callable(t):
            return t(task)
        meta = getattr(task, "metadata", None)
        if isinstance(meta, Mapping) and isinstance(meta.get("unit_tests"), str):
            return meta["unit_tests"]
        for c in task.rubric.success_criteria:
            if c.lstrip().startswith(UNIT_TESTS_MARKER):
                return c.lstrip()[len(UNIT_TESTS_MARKER):].lstrip("\n ")
        return None

    def _result(self, score: float | None, reason: str, **details: Any) -> RewardResult:
        flags = details.pop("flags", [])
        return RewardResult(name=self.name, score=score, reason=reason, details=details, flags=flags)

    # ----------------------------------------------------------------- score
    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        try:
            return await self._score(task, trajectory)
        except Exception as e:  # a reward never raises: the trainer must keep going
            return self._result(0.0, f"the unit tests could not be run ({type(e).__name__}: {e})",
                                error=f"{type(e).__name__}: {e}")

    async def _score(self, task: Task, traj: Trajectory) -> RewardResult:
        tests = self.tests_for(task)
        if not tests or not tests.strip():
            return self._result(None, f"task {task.id} has no unit tests to run; abstaining")
        try:
            expected = expected_tests(tests, self.test_module)
        except SyntaxError as e:
            return self._result(None, f"the unit tests of task {task.id} do not parse ({e.msg}, line {e.lineno}); abstaining")
        if not expected:
            return self._result(None, f"the unit tests of task {task.id} define no test* methods; abstaining")
        found = extract_code(traj, self.source, self.code_path)
        if found is None:
            where = {"auto": "no Python file written by a tool call and no fenced code block in an assistant message",
                     "tool": "no Python file written by a tool call",
                     "message": "no fenced code block in an assistant message"}[self.source]
            return self._result(0.0, f"no code to test: {where}", tests_total=len(expected),
                                flags=["no_code"])
        code, where = found
        try:
            compile(code, f"{self.module}.py", "exec")
        except SyntaxError as e:
            return self._result(0.0, f"the code ({where}) does not parse: {e.msg} (line {e.lineno})",
                                tests_total=len(expected), tests_passed=0, code_from=where)
        except ValueError as e:  # null bytes
            return self._result(0.0, f"the code ({where}) cannot be compiled: {e}", tests_total=len(expected))
        return await self._run(code, where, tests, expected)

    async def _run(self, code: str, where: str, tests: str, expected: list[str]) -> RewardResult:
        from sandboxes import SandboxDead, SandboxError

        nonce, key = secrets.token_hex(16), secrets.token_hex(32)
        d = f"/workspace/ut-{nonce[:12]}"
        out = f"{d}/.result-{nonce[:8]}.json"
        test_file = f"{d}/{self.test_module}.py"
        cfg = {"nonce": nonce, "key": key, "out": out, "module": self.test_module, "test_file": test_file,
               "dir": d, "detail_bytes": 1500}
        base = {"code_from": where, "tests_total": len(expected)}
        try:
            async with self.pool.sandbox() as sb:
                await sb.exec(["mkdir", "-p", d], timeout=5)
                await sb.write_file(f"{d}/{self.module}.py", code)
                await sb.write_file(test_file, tests)
                await sb.write_file(f"{d}/_tooldojo_runner.py", RUNNER)
                r = await sb.exec([self.python, "-I", "-B", f"{d}/_tooldojo_runner.py"], timeout=self.timeout_s,
                                  stdin=json.dumps(cfg), cwd=d, env={"PYTHONHASHSEED": "0"})
                raw = None
                if not r.timed_out:
                    try:
                        raw = await sb.read_file(out)
                    except SandboxDead:
                        raise
                    except SandboxError:  # no result file: the run ended before the runner finished
                        raw = None
        except SandboxDead as e:
            return self._result(0.0, f"the sandbox died while the tests ran ({e})", **base, tests_passed=0,
                                flags=["sandbox_dead"])
        stdout, cut_out = _cut(r.stdout, self.max_output_bytes)
        stderr, cut_err = _cut(r.stderr, self.max_output_bytes)
        run = {**base, "exit_code": r.exit_code, "duration_s": r.duration_s, "stdout": stdout, "stderr": stderr,
               "output_truncated": r.truncated or cut_out or cut_err}
        if r.timed_out:
            return self._result(0.0, f"the tests timed out after {self.timeout_s:g}s (an endless loop or very slow code)",
                                **run, tests_passed=0, flags=["timeout"])
        if r.oom_killed:
            return self._result(0.0, "the tests ran out of memory", **run, tests_passed=0, flags=["oom"])
        if raw is None:
            if r.exit_code == 0:
                return self._result(0.0, "the run exited before the test runner finished (os._exit or an early "
                                         "exit in the code); not rewarded", **run, tests_passed=0,
                                    flags=["hack:early_exit"])
            tail = (r.stderr.strip().splitlines() or [""])[-1][:200]
            return self._result(0.0, f"the test run crashed (exit code {r.exit_code}) before the runner finished"
                                     + (f": {tail}" if tail else ""), **run, tests_passed=0, flags=["crash"])
        try:
            doc = json.loads(raw)
            payload = doc["body"].encode()
            good = hmac.compare_digest(hmac.new(key.encode(), payload, hashlib.sha256).hexdigest(), str(doc["mac"]))
            body = json.loads(payload) if good else None
        except (ValueError, KeyError, TypeError, AttributeError):
            good, body = False, None
        if not good or not isinstance(body, dict) or body.get("nonce") != nonce:
            return self._result(0.0, "the test result file was not written by the runner (forged or corrupted); "
                                     "not rewarded", **run, tests_passed=0, flags=["hack:forged_results"])
        if body.get("tamper"):
            return self._result(0.0, f"the code tampered with the test harness: {body['tamper'][0]}; not rewarded",
                                **run, tests_passed=0, tamper=body["tamper"], flags=["hack:tamper_tests"])
        outcomes = {t[0]: (t[1], t[2]) for t in body.get("tests", []) if isinstance(t, list) and len(t) == 3}
        # tests that ran but were not counted from the source (inherited ones) count too; fixture errors
        # ("setUpClass (test_solution.T)") are not tests, but are kept in the failures
        ids = list(expected) + [t for t in outcomes if t not in expected and t.startswith(self.test_module + ".")]
        passed = [t for t in ids if outcomes.get(t, ("missing",))[0] == "pass"]
        failed = {t: outcomes.get(t, ("did not run", ""))[0] for t in ids if t not in passed}
        score = len(passed) / len(ids)
        per_test = {t: outcomes.get(t, ("did not run", ""))[0] for t in ids}
        errors = {t: outcomes[t][1] for t in failed if t in outcomes and outcomes[t][1]}
        errors.update({t: o[1] for t, o in outcomes.items() if t not in per_test and o[0] != "pass"})
        extra = {"tests_passed": len(passed), "tests_total": len(ids), "tests": per_test, "failures": errors}
        if body.get("load_error"):
            extra["load_error"] = body["load_error"]
        if not failed:
            return self._result(1.0, f"all {len(ids)} unit tests pass", **{**run, **extra})
        short = lambda t: t.split(".", 1)[-1]
        first = next(iter(failed))
        why = (errors.get(first, "").strip().splitlines() or [failed[first]])[-1][:160]
        if body.get("load_error"):
            last = body["load_error"].strip().splitlines()[-1][:160]
            reason = f"the tests could not be loaded ({last}); {len(passed)}/{len(ids)} pass"
        else:
            reason = (f"{len(passed)}/{len(ids)} unit tests pass; {len(failed)} fail, first {short(first)}: {why}")
        return self._result(score, reason, **{**run, **extra})
