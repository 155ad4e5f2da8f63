"""rewards.code.UnitTestReward: the agent's code + the task's unit tests in a fresh Docker sandbox."""

from __future__ import annotations

import json

import pytest

from conftest import require
from rewards.code import UNIT_TESTS_MARKER, UnitTestReward, expected_tests, extract_code
from sandboxes import SandboxConfig, SandboxPool
from synth.episode import CallableAgent, ToolCallRecord, Trajectory, run_episode
from synth.tasks import Rubric, Task, UserScenario
from synth.usersim import ScriptedUser

pytestmark = pytest.mark.docker

TESTS = '''
import unittest
from solution import add, fib


class TestAdd(unittest.TestCase):
    def test_small(self):
        self.assertEqual(add(1, 2), 3)

    def test_negative(self):
        self.assertEqual(add(-1, -2), -3)


class TestFib(unittest.TestCase):
    def test_base(self):
        self.assertEqual(fib(0), 0)
        self.assertEqual(fib(1), 1)

    def test_ten(self):
        self.assertEqual(fib(10), 55)
'''

GOOD = '''
def add(a, b):
    return a + b


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
'''


def code_task(**overrides) -> Task:
    fields = dict(
        id="code-add-fib", domain="file_manager", seed=0,
        instruction="Write solution.py with add(a, b) and fib(n).", persona="a developer",
        user_scenario=UserScenario(persona="a developer", reason_for_call="needs two functions",
                                   task_instructions="ask for add and fib"),
        gold_actions=[], rubric=Rubric(), tools=["write_vfs_file"], difficulty="easy",
    )
    fields.update(overrides)
    return Task(**fields)


def answer_traj(text: str, task_id: str = "code-add-fib") -> Trajectory:
    return Trajectory(task_id=task_id, domain="file_manager", messages=[
        {"role": "user", "content": "write the code"}, {"role": "assistant", "content": text}])


def fenced(code: str) -> str:
    return f"Here it is:\n```python\n{code}\n```\nDone."


@pytest.fixture(scope="module")
def docker() -> str:
    require("docker")
    return "docker"


@pytest.fixture
async def pool(docker):
    async with SandboxPool(SandboxConfig(backend=docker), size=2, max_concurrency=4) as p:
        yield p


@pytest.fixture
def reward(pool) -> UnitTestReward:
    return UnitTestReward(pool, tests=TESTS, timeout_s=8)


# ------------------------------------------------------------------- scoring
async def test_passing_code_scores_one(reward, pool):
    r = await reward.score(code_task(), answer_traj(fenced(GOOD)))
    assert r.score == 1.0 and r.passed, r.reason
    assert r.details["tests_passed"] == r.details["tests_total"] == 4
    assert "all 4 unit tests pass" in r.reason and not r.flags
    assert pool.leased == 0


async def test_failing_code_scores_the_fraction(reward):
    bad_fib = GOOD.replace("return a\n", "return b\n")    # fib(0) == 1, fib(10) == 89
    r = await reward.score(code_task(), answer_traj(fenced(bad_fib)))
    assert r.score == 0.5, r.reason
    assert r.details["tests"]["test_solution.TestFib.test_ten"] == "fail"
    assert "2/4 unit tests pass" in r.reason and "AssertionError" in r.reason
    assert "55" in r.details["failures"]["test_solution.TestFib.test_ten"]
    only_add = "def add(a, b):\n    return a + b\n"         # the import of fib fails: nothing runs
    r = await reward.score(code_task(), answer_traj(fenced(only_add)))
    assert r.score == 0.0 and "could not be loaded" in r.reason and "fib" in r.reason
    raising = GOOD.replace("return a + b", "raise RuntimeError('boom')")
    r = await reward.score(code_task(), answer_traj(fenced(raising)))
    assert r.score == 0.5 and r.details["tests"]["test_solution.TestAdd.test_small"] == "error"


async def test_infinite_loop_times_out(pool):
    reward = UnitTestReward(pool, tests=TESTS, timeout_s=2)
    looping = GOOD.replace("    return a + b", "    while True:\n        pass")
    r = await reward.score(code_task(), answer_traj(fenced(looping)))
    assert r.score == 0.0 and "timed out" in r.reason and "timeout" in r.flags
    # the pool's sandbox came back clean: the next run works
    r = await reward.score(code_task(), answer_traj(fenced(GOOD)))
    assert r.score == 1.0, r.reason


async def test_output_flood_is_truncated_but_scored(pool):
    reward = UnitTestReward(pool, tests=TESTS, timeout_s=8, max_output_bytes=2048)
    flood = "import sys\nfor _ in range(20000):\n    print('x' * 200)\n    print('y' * 200, file=sys.stderr)\n" + GOOD
    r = await reward.score(code_task(), answer_traj(fenced(flood)))
    assert r.score == 1.0, r.reason
    assert r.details["output_truncated"] is True
    assert len(r.details["stdout"].encode()) < 2048 + 100 and len(r.details["stderr"].encode()) < 2048 + 100


# ------------------------------------------------------------------- tampering
TAMPERS = {
    "os._exit(0) at import": ("import os\nos._exit(0)\n", "hack:early_exit"),
    "sys.exit(0) at import": ("import sys\nsys.exit(0)\n", None),
    "assertEqual stubbed": ("import unittest\nunittest.TestCase.assertEqual = lambda self, a, b, msg=None: None\n",
                            "hack:tamper_tests"),
    "TestCase.run stubbed": ("import unittest\n"
                             "def run(self, result=None):\n    result.addSuccess(self)\n"
                             "unittest.TestCase.run = run\n", "hack:tamper_tests"),
    "result file forged then exit": (
        "import glob, json, os\n"
        "for f in glob.glob('/workspace/ut-*/_tooldojo_runner.py'):\n"
        "    d = os.path.dirname(f)\n"
        "    body = json.dumps({'nonce': 'x', 'tests': [], 'load_error': None, 'tamper': []})\n"
        "    for name in os.listdir(d):\n        pass\n"
        "    open(os.path.join(d, '.result-forged.json'), 'w').write(json.dumps({'body': body, 'mac': '0'}))\n"
        "os._exit(0)\n", "hack:early_exit"),
    "stdout claims success": ("print('Ran 4 tests\\n\\nOK')\nimport os\nos._exit(0)\n", "hack:early_exit"),
    "fake unittest shadowing": ("class _T:\n    pass\nclass unittest:\n    TestCase = _T\n", None),
}


STAR_TESTS = TESTS.replace("from solution import add, fib", "from solution import *")


@pytest.mark.parametrize("name", list(TAMPERS))
async def test_tampering_is_not_rewarded(pool, name):
    prefix, flag = TAMPERS[name]
    reward = UnitTestReward(pool, tests=STAR_TESTS if "shadowing" in name else TESTS)
    r = await reward.score(code_task(), answer_traj(fenced(prefix + GOOD)))
    assert r.score == 0.0, (name, r.reason, r.details.get("tests"))
    if flag:
        assert flag in r.flags, (name, r.flags, r.reason)
        assert "not rewarded" in r.reason


async def test_a_smuggled_load_tests_hook_cannot_hide_failures(pool):
    hook = "import unittest\ndef load_tests(loader, tests, pattern):\n    return unittest.TestSuite()\n"
    r = await UnitTestReward(pool, tests=STAR_TESTS).score(
        code_task(), answer_traj(fenced(hook + GOOD.replace("return a\n", "return b\n"))))
    assert r.score == 0.5 and r.details["tests_total"] == 4, r.reason


async def test_a_later_test_rewritten_during_the_run_is_caught(pool):
    tests = TESTS.replace("from solution import add, fib", "import solution\nfrom solution import add, fib")
    sneaky = GOOD.replace("    return a + b", "    import sys\n    m = sys.modules.get('test_solution')\n"
                          "    if m: m.TestFib.test_ten = lambda self: None\n    return a + b")
    sneaky = sneaky.replace("return a\n", "return 0\n")
    r = await UnitTestReward(pool, tests=tests).score(code_task(), answer_traj(fenced(sneaky)))
    assert r.score == 0.0 and "hack:tamper_tests" in r.flags and "test_ten" in r.reason


# --------------------------------------------------------------- conventions
def test_extraction_conventions():
    rec = lambda args, ok=True: ToolCallRecord(turn=0, id="c", name="write_vfs_file", arguments=args, ok=ok,
                                               state_hash="h")
    traj = answer_traj(fenced("x = 1"))
    traj.tool_calls = [rec({"path": "/home/a.py", "content": "A = 1\n"}),
                       rec({"path": "/home/notes.txt", "content": "not code"}),
                       rec({"path": "/home/a.py", "content": "B = 2\n", "mode": "append"}),
                       rec({"path": "/home/b.py", "content": "broken"}, ok=False)]
    assert extract_code(traj) == ("A = 1\nB = 2\n", "tool call writing /home/a.py")
    assert extract_code(traj, "message")[0] == "x = 1\n"
    assert extract_code(traj, code_path="notes.txt")[0] == "not code"
    plain = answer_traj("```js\nno()\n```\n```\ny = 2\n```")
    assert extract_code(plain)[0] == "y = 2\n" and extract_code(plain, "tool") is None
    assert extract_code(answer_traj("no code here")) is None
    assert expected_tests(TESTS, "test_solution") == [
        "test_solution.TestAdd.test_small", "test_solution.TestAdd.test_negative",
        "test_solution.TestFib.test_base", "test_solution.TestFib.test_ten"]


async def test_tests_from_the_rubric_missing_tests_and_missing_code(pool):
    reward = UnitTestReward(pool)
    task = code_task(rubric=Rubric(success_criteria=["solution.py defines add and fib", UNIT_TESTS_MARKER + "\n" + TESTS]))
    assert (await reward.score(task, answer_traj(fenced(GOOD)))).score == 1.0
    r = await reward.score(code_task(), answer_traj(fenced(GOOD)))
    assert r.score is None and "no unit tests" in r.reason
    r = await reward.score(task, answer_traj("I wrote it in my head."))
    assert r.score == 0.0 and "no code" in r.reason
    r = await reward.score(task, answer_traj(fenced("def add(a, b):\n  return a +")))
    assert r.score == 0.0 and "does not parse" in r.reason
    by_id = UnitTestReward(pool, tests={"code-add-fib": TESTS})
    assert (await by_id.score(code_task(), answer_traj(fenced(GOOD)))).score == 1.0
    assert (await by_id.score(code_task(id="other"), answer_traj(fenced(GOOD)))).score is None


async def test_code_written_through_a_tool_in_an_episode(pool):
    """A real episode: the agent writes solution.py with file_manager's write_vfs_file, then says so."""
    short = "def add(a, b):\n    return a + b\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"

    def agent(messages, tools):
        if not any(m["role"] == "tool" for m in messages):
            return {"role": "assistant", "content": None, "tool_calls": [{
                "id": "w1", "type": "function",
                "function": {"name": "write_vfs_file",
                             "arguments": json.dumps({"path": "/home/projects/solution.py", "content": short})}}]}
        return {"role": "assistant", "content": "Saved /home/projects/solution.py."}

    task = code_task()
    traj = await run_episode(task, CallableAgent(agent), ScriptedUser(), pool)
    assert traj.tool_calls and traj.tool_calls[0].ok, traj.tool_calls
    r = await UnitTestReward(pool, tests=TESTS).score(task, traj)
    assert r.score == 1.0 and r.details["code_from"] == "tool call writing /home/projects/solution.py", r.reason
