"""Bad input to every sub-command (issue 22, second probe): a usage error (exit 2) or one `error:` line
naming the culprit (exit 1, or 2 where the command uses 2), no traceback, nothing written.

Most cases run in-process through the CLI's test runner; a hung server and SIGTERM need a real process.
Every numeric option of every command must have an upper bound (`sandboxes.cli_options`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from tooldojo.cli import app

ROOT = Path(__file__).resolve().parents[1]
TRAIN = str(ROOT / "examples" / "train_tiny.yaml")
SUBMIT = str(ROOT / "examples" / "k8s" / "train_job.yaml")
GOOD_TASK = (ROOT / "examples" / "evals" / "personal" / "tasks.jsonl").read_text().splitlines()[0]
HUGE = "99999999999999999999"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})


def flat(text: str) -> str:
    """The text without rich's panel borders, on one line."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def assert_usage_error(r, needle: str) -> None:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr, r.exception)
    assert "Traceback" not in r.stderr and needle in flat(r.stderr), r.stderr


def assert_one_line_error(r, needle: str, code: int = 1) -> None:
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr, r.exception)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    assert lines[0].startswith("error:") and needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("bad")
    made = {
        "broken.yaml": "a: [b\n",
        "latin1.yaml": b"model: caf\xe9\n",
        "empty/tasks.jsonl": "",
        "empty/trajectories.jsonl": "",
        "one/tasks.jsonl": GOOD_TASK + "\n",
        "truncated/tasks.jsonl": "\n" + GOOD_TASK[:700] + "\n",
        "yaml_tasks.jsonl": "id: t1\ninstruction: cancel O-1000\n",
        "latin1_traj.jsonl": b'{"messages": []}\n{"messages": [{"content": "caf\xe9"}]}\n',
        "typo_zoo/zoo.json": json.dumps({"extrnal": []}),
        "history/s/v1/m/r1/run.json": '{"run_id": "r1"',
        "a_file": "not a folder\n",
        "cap_high.yaml": json.dumps({"job": {"kind": "train", "config_file": TRAIN},
                                     "k8s": {"image": "i", "nodes": 2, "gpus": 2, "generation_memory_cap": 1.5}}),
        "cap_synth.yaml": json.dumps({"job": {"kind": "synth", "args": ["tasks"]},
                                      "k8s": {"image": "i", "generation_memory_cap": 0.3}}),
    }
    for name, content in made.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return {k.split("/")[0].split(".")[0]: str(d / k.split("/")[0]) for k in made} | {"dir": str(d)}


# (id, args with {placeholders} from `files`, needle in the usage error)
USAGE = [
    ("zoo-validate-sandboxes", ["zoo", "validate", "seed", "--sandboxes", HUGE], "--sandboxes"),
    ("filter-sandboxes", ["synth", "filter", "--tasks", "{one}", "--trajectories", "{empty}", "--out", "{dir}/o",
                          "--sandboxes", HUGE], "--sandboxes"),
    ("tasks-n", ["synth", "tasks", "--n", HUGE, "--out", "{dir}/o"], "--n"),
    ("trajectories-concurrency", ["synth", "trajectories", "--tasks", "{one}", "--out", "{dir}/o", "--concurrency",
                                  HUGE], "--concurrency"),
    ("eval-repeat", ["eval", "run", "{broken}", "-m", "x", "--repeat", HUGE], "--repeat"),
    ("serve-mcp-port-high", ["zoo", "serve-mcp", "retail_orders", "--http", "--port", "99999999"], "--port"),
    ("serve-mcp-port-negative", ["zoo", "serve-mcp", "retail_orders", "--http", "--port", "-5"], "--port"),
    ("import-mcp-timeout-0", ["zoo", "import-mcp", "--url", "http://127.0.0.1:9/mcp", "--out", "{dir}/o",
                              "--timeout", "0"], "--timeout"),
    ("import-mcp-timeout-negative", ["zoo", "import-mcp", "--url", "http://127.0.0.1:9/mcp", "--out", "{dir}/o",
                                     "--timeout", "-1"], "--timeout"),
    ("import-mcp-timeout-nan", ["zoo", "import-mcp", "--url", "http://127.0.0.1:9/mcp", "--out", "{dir}/o",
                                "--timeout", "nan"], "--timeout"),
    ("exec-timeout-inf", ["sandbox", "exec", "true", "--timeout", "inf"], "--timeout"),
    ("eval-temperature", ["eval", "run", "{broken}", "-m", "x", "--temperature", "1e308"], "--temperature"),
    ("k8s-version-abc", ["submit", SUBMIT, "--dry-run", "--k8s-version", "abc"], "is not MAJOR.MINOR"),
    ("k8s-version-future", ["submit", SUBMIT, "--dry-run", "--k8s-version", "9.99"], "no schemas for Kubernetes 9.99"),
    ("trainer-version-old", ["submit", SUBMIT, "--dry-run", "--trainer-version", "2.0"],
     "no TrainJob schema for Kubeflow Trainer '2.0': tooldojo has 2.1, 2.2, 2.3"),
    ("trainer-version-abc", ["submit", SUBMIT, "--dry-run", "--trainer-version", "abc"],
     "no TrainJob schema for Kubeflow Trainer 'abc'"),
    ("tools-base-url", ["synth", "tools", "--base-url", "notaurl", "--model", "m", "--out", "{dir}/o"], "--base-url"),
    ("jobs-server", ["jobs", "list", "--server", "notaurl"], "--server"),
    ("judge-url", ["rewards", "agreement", "--tasks", "{one}", "--trajectories", "{empty}", "--judge-base-url",
                   "127.0.0.1:9/v1", "--judge-model", "m"], "--judge-base-url"),
]


@pytest.mark.parametrize("args,needle", [c[1:] for c in USAGE], ids=[c[0] for c in USAGE])
def test_usage_errors(files, args, needle):
    r = invoke(*(a.format(**files) for a in args))
    assert_usage_error(r, needle)
    assert not Path(files["dir"], "o").exists()


# (id, args, needle in the one error line, exit code)
ERRORS = [
    ("filter-config-yaml", ["synth", "filter", "--tasks", "{one}", "--trajectories", "{one}/tasks.jsonl",
                            "--out", "{dir}/o", "--config", "{broken}"], "broken.yaml is not valid YAML: line 2", 1),
    ("submit-kubeconfig-yaml", ["submit", SUBMIT, "--kubeconfig", "{broken}"], "cannot load kubeconfig", 1),
    ("trajectories-no-tasks", ["synth", "trajectories", "--tasks", "{empty}", "--out", "{dir}/o"],
     "no tasks in {empty}/tasks.jsonl", 1),
    ("filter-no-trajectories", ["synth", "filter", "--tasks", "{one}", "--trajectories", "{empty}", "--out",
                                "{dir}/o"], "no trajectories in {empty}/trajectories.jsonl", 1),
    ("zoo-unknown-key", ["zoo", "validate", "{typo_zoo}"], "extrnal", 1),
    ("train-latin1", ["train", "{latin1}"], "latin1.yaml is not UTF-8 text", 2),
    ("demo-latin1", ["demo", "{latin1}"], "latin1.yaml is not UTF-8 text", 2),
    ("submit-latin1", ["submit", "{latin1}", "--dry-run"], "latin1.yaml is not UTF-8 text", 1),
    ("submit-cap-high", ["submit", "{cap_high}", "--dry-run"],
     "k8s.generation_memory_cap: 1.5 is not a share of free GPU memory in (0, 1] (e.g. 0.3)", 1),
    ("submit-cap-synth", ["submit", "{cap_synth}", "--dry-run"], "k8s.generation_memory_cap is a train job's setting",
     1),
    ("filter-config-latin1", ["synth", "filter", "--tasks", "{one}", "--trajectories", "{one}/tasks.jsonl",
                              "--out", "{dir}/o", "--config", "{latin1}"], "latin1.yaml is not UTF-8 text", 1),
    ("rl-behaviours-latin1", ["rl", "behaviours", "{latin1_traj}"],
     "latin1_traj.jsonl is not UTF-8 text: byte 0xe9 on line 2", 1),
    ("tasks-truncated", ["synth", "trajectories", "--tasks", "{truncated}", "--out", "{dir}/o"],
     "{truncated}/tasks.jsonl:2: Invalid JSON", 1),
    ("tasks-yaml", ["synth", "trajectories", "--tasks", "{yaml_tasks}", "--out", "{dir}/o"],
     "yaml_tasks.jsonl:1: Invalid JSON", 1),
    ("train-whole-groups", ["train", TRAIN, f"grpo.num_generations={HUGE}", "run.output_dir={dir}/o"],
     "grpo.num_generations", 2),
    ("train-synthesize-huge", ["train", TRAIN, f"data.synthesize={HUGE}", "run.output_dir={dir}/o"],
     "data.synthesize: Input should be less than or equal to", 2),
    ("train-unknown-domain", ["train", TRAIN, "data.domains=[nope]", "run.output_dir={dir}/o"],
     "data.domains: unknown domain(s) nope", 2),
    ("train-missing-tasks", ["train", TRAIN, "data.tasks={dir}/nowhere", "run.output_dir={dir}/o"],
     "data.tasks: no tasks at", 2),
    ("train-empty-tasks", ["train", TRAIN, "data.tasks={empty}", "run.output_dir={dir}/o"],
     "data.tasks: no tasks in {empty}/tasks.jsonl", 2),
    ("import-mcp-name", ["zoo", "import-mcp", "--url", "http://127.0.0.1:9/mcp", "--out", "{dir}/o", "--name",
                         "x ✓/../y"], "--name 'x ✓/../y'", 1),
    ("tools-categories", ["synth", "tools", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out",
                          "{dir}/o", "--categories", "../etc"], "--categories '../etc'", 1),
    ("tasks-domains-comma", ["synth", "tasks", "--n", "1", "--out", "{dir}/o", "--domains", ","],
     "--domains ',' names nothing", 1),
    ("tasks-out-under-a-file", ["synth", "tasks", "--n", "1", "--out", "{a_file}/o"], "is a file, not a folder", 1),
    ("eval-runs-missing-history", ["eval", "runs", "--history", "{dir}/nowhere"], "no eval history at", 1),
    ("eval-runs-corrupt-run", ["eval", "runs", "--history", "{history}"], "run.json does not load", 1),
]


@pytest.mark.parametrize("args,needle,code", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_one_line_errors(files, args, needle, code):
    r = invoke(*(a.format(**files) for a in args))
    assert_one_line_error(r, needle.format(**files), code)
    assert not Path(files["dir"], "o").exists()


def _numeric_options():
    def walk(cmd, path):
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            yield from walk(sub, [*path, name])
        for p in getattr(cmd, "params", []):
            ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
            if ann in (int, float) and not getattr(p, "is_flag", False):
                yield " ".join(path), p

    return list(walk(typer.main.get_command(app), []))


def test_every_numeric_option_is_bounded():
    options = _numeric_options()
    assert len(options) > 30  # the walk sees the commands
    unbounded = [f"{cmd} {p.opts[0]}" for cmd, p in options if p.max is None]
    assert not unbounded, f"numeric options without an upper bound (use sandboxes.cli_options): {unbounded}"


def test_every_command_that_reads_tasks_takes_domain_dirs():
    """Tasks name their domain; without --domain-dir an out-of-tree domain's trajectories all abstained in
    `dojo synth filter` (issue 30, finding 8)."""
    def walk(cmd, path):
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            yield from walk(sub, [*path, name])
        if not getattr(cmd, "commands", None):
            # options that take a value: import-mcp's --domain is a flag (it writes a domain, reads none)
            yield " ".join(path), {o for p in cmd.params if not getattr(p, "is_flag", False)
                                   for o in getattr(p, "opts", [])}

    commands = {path: opts for path, opts in walk(typer.main.get_command(app), [])}
    readers = [path for path, opts in commands.items() if {"--tasks", "--trajectories", "--domain"} & opts]
    assert {"synth filter", "rewards agreement", "synth trajectories", "synth import-tasks"} <= set(readers)
    assert [path for path in readers if "--domain-dir" not in commands[path]] == []


# ------------------------------------------------------------------ real processes
def _dojo(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "COLUMNS": "300", "PYTHONPATH": str(ROOT), **kw.pop("env", {})}
    return subprocess.Popen([sys.executable, "-m", "tooldojo", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def test_a_server_that_never_answers_is_a_one_line_error():
    from tests.conftest import silent_server

    with silent_server() as (port, held):
        p = _dojo("jobs", "list", "--server", f"http://127.0.0.1:{port}", env={"TOOLDOJO_K8S_REQUEST_TIMEOUT": "1"})
        out, err = p.communicate(timeout=60)
        connections = len(held)
    lines = [line for line in err.splitlines() if line.strip()]
    assert p.returncode == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert "did not answer within 1 s" in lines[0], lines[0]
    # the stated wait is the whole wait: one attempt (a retry after the timeout doubled it: 30 s took 62 s)
    assert connections == 1, connections


def test_a_kubernetes_request_has_one_total_deadline(monkeypatch):
    """Every request without its own timeout gets one number: urllib3's total deadline for connect and
    read together (a (connect, read) pair let the two add up), and the client does not retry."""
    from sandboxes.kube import K8sClient

    monkeypatch.setenv("TOOLDOJO_K8S_REQUEST_TIMEOUT", "7")
    client = K8sClient.connect(server="http://127.0.0.1:9")
    seen = {}

    def fake(**kw):
        seen.update(kw)
        return "ok"

    assert client._call(fake, what="x") == "ok"
    assert seen["_request_timeout"] == 7.0
    assert client.api_client.configuration.retries == 0


SIGTERM_SCRIPT = textwrap.dedent("""
    import sys, time, types
    from pathlib import Path

    def train(cfg, *, run_dir, resume_from=None):
        (Path(run_dir) / "started").write_text("")
        time.sleep(120)

    sys.modules["rl.trainer"] = types.SimpleNamespace(train=train)
    from tooldojo.cli import main
    sys.argv = ["dojo", "train", *sys.argv[1:]]
    main()
""")


def test_sigterm_records_an_interrupted_run(tmp_path):
    """A test double trains (sleeps): what matters is what `dojo train` does with SIGTERM around it."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"}
    p = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, TRAIN, f"run.output_dir={run_dir}",
                          "data.synthesize=2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "started").exists():
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "interrupted" and record["end_time"], record
    assert p.returncode == 143 and "Traceback" not in err, err  # 128 + SIGTERM (130 is for SIGINT)


def test_ctrl_c_before_a_command_runs_is_one_line(monkeypatch, capsys):
    """SIGINT while the commands are still being built (before one_line_errors is in charge)."""
    import tooldojo.cli

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(tooldojo.cli, "app", interrupted)
    try:
        tooldojo.cli.main()
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped dojo's main() (a traceback for the user)")
    except SystemExit as e:
        assert e.code == 130 and capsys.readouterr().err == "interrupted\n"
    else:
        pytest.fail("main() returned after an interrupt")


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_ctrl_c_during_sandbox_exec_is_one_line(backend):
    """Ctrl-C reaches the whole process group (dojo, bwrap or the docker client, the command): the
    user sees `interrupted` and exit 130, no asyncio child-watcher warning ("Unknown child process")."""
    from conftest import require

    require(backend)
    marker = f"{30 + os.getpid() % 1000 / 1000:.3f}"  # `sleep 30.NNN`: this test's command, seen in /proc

    def running() -> bool:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if cmdline.read_bytes() == f"sleep\0{marker}\0".encode():
                    return True
            except OSError:
                continue
        return False

    # A user's shell starts dojo with SIGINT at its default. An ignored SIGINT is inherited across
    # exec, and Python then never raises KeyboardInterrupt: give the child the user's disposition
    # whatever an earlier in-process test or a background launch left this process with.
    p = _dojo("sandbox", "exec", "-b", backend, f"sleep {marker}", start_new_session=True,
              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not running():
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.1)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130 and err == "interrupted\n", (p.returncode, err)


# ------------------------------------------------------------ bring your own environment (issue 30)
@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    from tests.byoe_domains import write_openai_env

    root = tmp_path_factory.mktemp("byoe")
    e = write_openai_env(root)
    (root / "bad_tools").mkdir()
    (root / "bad_tools" / "t.py").write_text(
        (e / "tools" / "get_user_details.py").read_text().replace('{"type": "string"}', '{"type": "nonsense"}'))
    (root / "bad.json").write_text('{"users": {')
    (root / "big.json").write_text(json.dumps({"users": {f"u{i}": "x" * 1000 for i in range(9 * 1024)}}))
    return {"tools": str(e / "tools"), "data": str(e / "data"), "policy": str(e / "wiki.md"), "dir": str(root),
            "bad_tools": str(root / "bad_tools"), "bad_json": str(root / "bad.json"), "big": str(root / "big.json")}


# (id, changed options, needle in the one error line); the rest is a good import into {dir}/o
IMPORT_OPENAI = [
    ("import-openai-missing-data", {"--data": "{dir}/nowhere"}, "--data {dir}/nowhere: no such file"),
    ("import-openai-bad-data-json", {"--data": "{bad_json}"}, "bad.json: not JSON"),
    ("import-openai-missing-policy", {"--policy": "{dir}/nowhere.md"}, "--policy {dir}/nowhere.md: no such file"),
    ("import-openai-nonsense-type", {"--tools": "{bad_tools}"}, "t.py: tool class GetUserDetails"),
    ("import-openai-reserved-name", {"--name": "retail_orders"}, "--name 'retail_orders' is a built-in domain's name"),
    ("import-openai-80mb-data", {"--data": "{big}"}, "over the 8 MB limit"),
    ("import-openai-data-over-max", {"--max-data-mb": "0"}, "pass --max-data-mb"),
]


@pytest.mark.parametrize("change,needle", [c[1:] for c in IMPORT_OPENAI], ids=[c[0] for c in IMPORT_OPENAI])
def test_a_failed_import_leaves_nothing(env, change, needle):
    opts = {"--tools": "{tools}", "--data": "{data}", "--policy": "{policy}", "--name": "mine", "--out": "{dir}/o",
            **change}
    r = invoke("zoo", "import-openai", *[x.format(**env) for kv in opts.items() for x in kv])
    assert_one_line_error(r, needle.format(**env))
    assert not Path(env["dir"], "o").exists()


def test_an_import_over_a_failed_one_and_its_overwrite(env, tmp_path):
    good = ["zoo", "import-openai", "--tools", env["tools"], "--data", env["data"], "--name", "mine", "--out",
            str(tmp_path / "o")]
    assert invoke(*good, "--policy", str(tmp_path / "nowhere.md")).exit_code == 1
    assert not (tmp_path / "o").exists()
    r = invoke(*good, "--max-data-mb", "0.5")
    assert r.exit_code == 0 and sorted(p.name for p in (tmp_path / "o").iterdir()) == ["mine"], r.output
    r = invoke(*good, "--policy", env["policy"])
    assert_one_line_error(r, "exists; pass --overwrite")
    r = invoke(*good, "--policy", env["policy"], "--overwrite")
    assert r.exit_code == 0 and sorted(p.name for p in (tmp_path / "o").iterdir()) == ["mine"], r.output
    assert (tmp_path / "o" / "mine" / "policy.md").read_text().startswith("Authenticate")


_GET_X = '''from toolzoo.dsl import tool

@tool
def get_x(state, a: {ann}) -> dict:
    """Get an x.

    Args:
        a: which x.
    """
    return {{"a": a}}
'''


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    """Domain folders with one thing wrong each (issue 30, finding 6)."""
    from tests.byoe_domains import SHIPPING_TOOLS, write_domain

    root = tmp_path_factory.mktemp("folders")
    variants = {
        "seed_raises": {"data.py": "def seed(rng):\n    raise RuntimeError('boom')\n"},
        "fm_str": {"__init__.py": "FAILURE_MODES = ['timeout']\n"},
        "fm_bogus": {"__init__.py": "FAILURE_MODES = [{'bogus': 1}]\n"},
        "deep_data": {"data.json": "[" * 100_000 + "]" * 100_000},
        "unresolvable": {"tools.py": _GET_X.format(ann="Foo")},
        "bare_tool": {"tools.py": _GET_X.format(ann="str")},
        "exits": {"__init__.py": "raise SystemExit(0)\n"},
        "loops": {"tools.py": "while True:\n    pass\n" + textwrap.dedent(SHIPPING_TOOLS)},
    }
    out = {"dir": str(root)}
    for name, files in variants.items():
        folder = write_domain(root / name, name)
        for fname, text in files.items():
            if fname == "data.py":
                (folder / "data.json").unlink()
            (folder / fname).write_text(text)
        out[name] = str(folder)
    return out


# (id, args, needle in the one error line)
FOLDERS = [
    ("folder-seed-raises", ["zoo", "call", "{seed_raises}", "get_user", "--args", '{{"user_id": "u1"}}'],
     "failed to load: RuntimeError: boom"),
    ("folder-failure-modes-str", ["zoo", "validate", "{fm_str}"],
     "fm_str/__init__.py:1: FAILURE_MODES[0] is 'timeout', not a dict"),
    ("folder-failure-modes-bogus", ["zoo", "validate", "{fm_bogus}"],
     "fm_bogus/__init__.py:1: FAILURE_MODES[0]: kind: Field required"),
    ("folder-deep-data-json", ["zoo", "validate", "{deep_data}"], "deep_data/data.json: nested too deeply"),
    ("zoo-call-deep-args", ["zoo", "call", "seed", "get_order", "--args", "[" * 100_000 + "]" * 100_000],
     "--args is nested too deeply"),
    ("folder-unresolvable-annotation", ["zoo", "stats", "{unresolvable}"],
     "unresolvable/tools.py:4: unresolvable.get_x(a): cannot read the annotation 'Foo'"),
    ("stale-domain-dirs-env", ["zoo", "serve-mcp", "retail_orders"], "$TOOLDOJO_DOMAIN_DIRS: domain dir"),
]


@pytest.mark.parametrize("args,needle", [c[1:] for c in FOLDERS], ids=[c[0] for c in FOLDERS])
def test_folder_loading_errors_are_one_line(folders, args, needle):
    from tests.conftest import any_backend

    backend = ["-b", any_backend()] if args[:2] == ["zoo", "call"] and args[2] != "seed" else []
    r = CliRunner().invoke(app, [a.format(**folders) for a in args] + backend,
                           env={"COLUMNS": "300",
                                "TOOLDOJO_DOMAIN_DIRS": f"{folders['dir']}/nowhere" if "DOMAIN_DIRS" in needle else ""})
    assert_one_line_error(r, needle.format(**folders))


def test_folder_code_that_exits_or_loops_is_never_run_by_reading_it(folders):
    """`raise SystemExit(0)` in __init__.py ended `zoo validate` silently with 0; a tools.py looping at import
    hung it. The folder is read, not run: the bare `@tool` README form is a read tool."""
    from tests.conftest import any_backend

    r = invoke("zoo", "call", folders["loops"], "get_usr")  # reads the tools, finds none of that name
    assert_one_line_error(r, "did you mean get_user")
    r = invoke("zoo", "validate", folders["exits"], "--sandboxes", "1", "-b", any_backend())
    assert r.exit_code == 0 and "2/2 tools pass" in r.stdout, r.output
    r = invoke("zoo", "validate", folders["bare_tool"], "--sandboxes", "1", "-b", any_backend())
    assert r.exit_code == 0 and "1/1 tools pass" in r.stdout, r.output
    from toolzoo.domain_dirs import load_folder

    assert load_folder(folders["bare_tool"]).tool("get_x").effect == "read"


@pytest.fixture(scope="module")
def task_files(tmp_path_factory) -> dict[str, str]:
    """A domain folder and task files with one thing wrong each (issue 30, finding 4)."""
    from tests.byoe_domains import write_domain

    root = tmp_path_factory.mktemp("import_tasks")
    move = {"name": "modify_user_address", "kwargs": {"user_id": "u1", "city": "Reno", "state": "NV"}}
    made: dict[str, str | bytes] = {
        "outputs_string.json": json.dumps([{"instruction": "Move u1.", "actions": [move], "outputs": "Reno"}]),
        "duplicate_ids.json": json.dumps([{"id": "t1", "instruction": "Move u1.", "actions": [move]}] * 2),
        "kwargs_5.json": json.dumps([{"instruction": "x", "actions": [{"name": "get_user", "kwargs": 5}]}]),
        "kwargs_string.json": json.dumps([{"instruction": "x", "actions": [{"name": "get_user",
                                                                            "kwargs": "user_id=u1"}]}]),
        "deep.json": '[{"instruction": "x", "outputs": ' + "[" * 100_000 + "]" * 100_000 + "}]",
        "latin1.json": b'[{"instruction": "caf\xe9"}]',
        "bad_line_2.jsonl": json.dumps({"instruction": "Move u1.", "actions": [move]}) + "\n{not json\n",
        "all_dropped.json": json.dumps([{"instruction": "Move u1.", "actions": [  # no city, state: bad arguments
            {"name": "modify_user_address", "kwargs": {"user_id": "u1"}}]}]),
    }
    out = {"dir": str(root), "domain": str(write_domain(root, "tasks_desk"))}
    for name, content in made.items():
        (root / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        out[name.split(".")[0]] = str(root / name)
    return out


# (id, task file, needle in the one error line)
IMPORT_TASKS = [
    ("import-tasks-outputs-string", "outputs_string", "outputs_string.json: task #1 (tasks_desk-00000): outputs "
                                                      "must be a list of strings"),
    ("import-tasks-duplicate-ids", "duplicate_ids", "duplicate_ids.json: task #2: task id 't1' is also the id of"),
    ("import-tasks-kwargs-5", "kwargs_5", "kwargs_5.json: task #1 (tasks_desk-00000): action #1 (get_user): "
                                          "kwargs must be an object of arguments, not int"),
    ("import-tasks-kwargs-string", "kwargs_string", "kwargs must be an object of arguments, not str 'user_id=u1'"),
    ("import-tasks-deep", "deep", "deep.json: nested too deeply"),
    ("import-tasks-latin1", "latin1", "latin1.json: not UTF-8 text (byte 0xe9"),
    ("import-tasks-jsonl-line-2", "bad_line_2", "bad_line_2.jsonl:2: not JSON"),
    ("import-tasks-all-dropped", "all_dropped", "none of the 1 task(s) was kept (first: tasks_desk-00000"),
]


@pytest.mark.parametrize("which,needle", [c[1:] for c in IMPORT_TASKS], ids=[c[0] for c in IMPORT_TASKS])
def test_import_tasks_errors_name_the_file_and_task(task_files, which, needle):
    from tests.conftest import any_backend

    out = Path(task_files["dir"], "o", which)
    r = invoke("synth", "import-tasks", task_files[which], "--domain", task_files["domain"], "--out", str(out),
               "-b", any_backend(), "--sandboxes", "1")
    assert_one_line_error(r, needle)
    if which == "all_dropped":  # the reasons are kept, and no empty task set is written
        assert sorted(p.name for p in out.iterdir()) == ["dropped.jsonl"]
        assert "invalid_arguments" in json.loads((out / "dropped.jsonl").read_text())["reason"]
    else:
        assert not out.exists()
