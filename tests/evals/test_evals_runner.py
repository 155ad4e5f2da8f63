"""evals.runner / results / history / report / models without a model server: pass@k and pass^k,
repeats, --only-failed, history and comparison, grid and HTML, model specs, local checkpoints
served for the run, and an unreachable model failing its cases (not the run)."""

from __future__ import annotations

import itertools
import json
import re
import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from evals.context import EvalError
from evals.history import current_view, find_run, list_runs, load_report
from evals.models import EndpointModel, FunctionModel, LocalModel, _EvalClient, checkpoint_identity, parse_model
from evals.report import compare_runs, compare_table, grid_html, grid_table
from evals.results import CaseResult, RunRecord, pass_at_k, pass_hat_k, summarize
from evals.runner import RunOptions, run_suite_sync
from evals.suite import load_suite
from evals_helpers import sandbox_backend
from synth.llm import LLMConfig
from tooldojo.cli import app

runner = CliRunner()


@pytest.mark.parametrize("n", range(1, 7))
def test_pass_at_k_and_pass_hat_k_match_enumeration(n):
    for c in range(n + 1):
        runs = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            draws = list(itertools.combinations(runs, k))
            assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws))
            assert pass_hat_k(n, c, k) == pytest.approx(sum(all(d) for d in draws) / len(draws))
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def _suite(tmp_path: Path, cases: dict[str, str], name: str = "s") -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump({"name": name, "cases": [
        {"name": n, "inputs": {"prompt": p}, "metadata": {"tags": ["t"]}, "evaluators": [{"Regex": "^yes$"}]}
        for n, p in cases.items()]}))
    return f


def test_repeats_sample_new_seeds_and_report_pass_at_k(tmp_path):
    seeds: dict[str, list[int]] = {}

    def respond(messages, tools, task, seed):
        p = messages[-1]["content"]
        seeds.setdefault(p, []).append(seed)
        ok = {"always": True, "even": seed % 2 == 0, "never": False}[p]
        return "yes" if ok else "no"

    f = _suite(tmp_path, {"A": "always", "B": "even", "C": "never"})
    (rec,) = run_suite_sync(load_suite(f), [FunctionModel("m", respond)],
                            RunOptions(history_dir=tmp_path / "h", repeat=4, seed=10, progress=False))
    assert all(sorted(s) == [10, 11, 12, 13] for s in seeds.values())       # run k samples with seed + k
    got = {c.name: (c.passed, c.runs) for c in rec.cases}
    assert got == {"A": (4, 4), "B": (2, 4), "C": (0, 4)}
    s = rec.summary
    assert s.pass_rate == pytest.approx(0.5) and s.pass_at_k[1] == pytest.approx(0.5)
    assert s.pass_at_k[2] == pytest.approx((1 + 5 / 6 + 0) / 3)
    assert s.pass_hat_k[2] == pytest.approx((1 + 1 / 6 + 0) / 3)
    assert s.pass_at_k[4] == pytest.approx(2 / 3) and s.pass_hat_k[4] == pytest.approx(1 / 3)
    # the pydantic-evals report carries the PassAtK report evaluator's analyses
    _, d = find_run(tmp_path / "h", rec.run_id)
    report = load_report(d)
    assert {c.name for c in report.cases} >= {"A [1/4]", "B [4/4]"}
    table = next(a for a in report.analyses if a.type == "table")
    assert table.rows[1] == [2, round((1 + 5 / 6) / 3, 4), round((1 + 1 / 6) / 3, 4)]
    text = _render(grid_table([rec]))
    assert "2/4" in text and "pass@4" in text and "pass^4" in text


def _render(table) -> str:
    from rich.console import Console

    c = Console(width=200, record=True)
    c.print(table)
    return c.export_text()


def test_only_failed_reruns_what_did_not_pass_and_views_overlay(tmp_path):
    f = _suite(tmp_path, {"A": "a", "B": "b", "C": "c", "D": "d"})
    hist = tmp_path / "h"
    opts = dict(history_dir=hist, progress=False)
    calls: list[str] = []

    def model(answers: dict[str, str]) -> FunctionModel:
        def respond(messages, tools, task):
            p = messages[-1]["content"]
            calls.append(p)
            if answers[p] == "raise":
                raise ConnectionError("model down")
            return answers[p]
        return FunctionModel("m", respond)

    with pytest.raises(EvalError, match="no earlier run"):
        run_suite_sync(load_suite(f), [model({})], RunOptions(only_failed=True, **opts))
    (r1,) = run_suite_sync(load_suite(f), [model({"a": "yes", "b": "no", "c": "raise", "d": "yes"})], RunOptions(**opts))
    assert {c.name: c.status for c in r1.cases} == {"A": "pass", "B": "fail", "C": "error", "D": "pass"}
    assert "model down" in r1.case("C").reasons[0]

    calls.clear()
    (r2,) = run_suite_sync(load_suite(f), [model({"b": "yes", "c": "no"})], RunOptions(only_failed=True, **opts))
    assert sorted(calls) == ["b", "c"] and r2.only_failed and [c.name for c in r2.cases] == ["B", "C"]
    view = current_view(hist, "s", "m")
    assert {c.name: c.status for c in view.cases} == {"A": "pass", "B": "pass", "C": "fail", "D": "pass"}
    assert view.summary.pass_rate == 0.75 and view.options["overlaid_runs"] == [r2.run_id]

    calls.clear()
    (r3,) = run_suite_sync(load_suite(f), [model({"c": "yes"})], RunOptions(only_failed=True, **opts))
    assert calls == ["c"] and current_view(hist, "s", "m").summary.pass_rate == 1.0
    assert run_suite_sync(load_suite(f), [model({})], RunOptions(only_failed=True, **opts)) == []   # nothing left
    assert [r.run_id for r, _ in list_runs(hist, "s")] == [r1.run_id, r2.run_id, r3.run_id]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_model_fails_its_cases_not_the_run(tmp_path):
    (tmp_path / "tasks.jsonl").write_text("")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"cases": [
        {"name": "chat", "inputs": {"prompt": "hi"}, "evaluators": [{"Regex": "x"}]},
        {"name": "episode", "inputs": {"task": {"domain": "library_loans", "instruction": "find Okafor's books",
                                                 "tools": ["search_library_catalogue"]}, "max_turns": 2},
         "evaluators": ["EpisodeReward"]},
        {"name": "missing-task", "inputs": {"task": "nope"}, "evaluators": ["EpisodeReward"]},
    ]}))
    down = EndpointModel("down", f"http://127.0.0.1:{_closed_port()}/v1", "x")
    (rec,) = run_suite_sync(load_suite(tmp_path / "s.yaml"), [down],
                            RunOptions(history_dir=tmp_path / "h", progress=False, max_retries=0,
                                       backend=sandbox_backend()))
    res = {c.name: c for c in rec.cases}
    assert all(c.errors == 1 for c in res.values()) and rec.summary.errors == 3
    assert "cannot connect" in res["chat"].reasons[0]
    assert "agent_error" in res["episode"].reasons[0] and "cannot connect" in res["episode"].reasons[0]
    # an empty tasks.jsonl is itself the reason (issue 22: empty inputs are errors, named with their file)
    assert "no tasks in" in res["missing-task"].reasons[0] and "tasks.jsonl" in res["missing-task"].reasons[0]
    assert rec.usage["errors"] == 2 and rec.usage["requests"] == 0
    assert find_run(tmp_path / "h", rec.run_id)[0].summary.errors == 3     # the run was saved


class FakeServer:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def _fake_checkpoint(d: Path) -> Path:
    d.mkdir(parents=True)
    (d / "config.json").write_text('{"model_type": "qwen2"}')
    (d / "model.safetensors").write_bytes(b"\0" * 64)
    return d


def test_local_checkpoints_are_served_for_the_run_and_stopped(tmp_path, monkeypatch):
    from synth import vllm_server

    run_dir = tmp_path / "runs" / "exp1"
    ckpt = _fake_checkpoint(run_dir / "final")
    started: list[tuple[Path, str]] = []
    servers: list[FakeServer] = []

    def fake_start(model_dir, *, log_path, served_name="tiny", **kw):
        started.append((Path(model_dir), served_name))
        servers.append(FakeServer(f"http://127.0.0.1:{_closed_port()}/v1"))
        return servers[-1]

    monkeypatch.setattr(vllm_server, "start_vllm_server", fake_start)
    m = parse_model(str(run_dir))
    assert isinstance(m, LocalModel) and m.label == "exp1" and m.path == ckpt.resolve()
    f = _suite(tmp_path, {"A": "a"})
    (rec,) = run_suite_sync(load_suite(f), [m], RunOptions(history_dir=tmp_path / "h", progress=False, max_retries=0))
    assert started == [(ckpt.resolve(), "exp1")] and servers[0].stopped == 1
    assert rec.model["kind"] == "local" and rec.model["identity"].startswith("local:")
    assert "cannot connect" in rec.cases[0].reasons[0]

    def broken_start(*a, **kw):
        raise vllm_server.VLLMStartError("vLLM exited with code 1 while starting")

    monkeypatch.setattr(vllm_server, "start_vllm_server", broken_start)
    (rec2,) = run_suite_sync(load_suite(f), [parse_model(f"mine={ckpt}")],
                             RunOptions(history_dir=tmp_path / "h", progress=False))
    assert rec2.label == "mine" and "could not serve" in rec2.cases[0].reasons[0]


def test_checkpoint_resolution_and_cache_identity(tmp_path):
    _fake_checkpoint(tmp_path / "run" / "checkpoint-2")
    c10 = _fake_checkpoint(tmp_path / "run" / "checkpoint-10")
    m = parse_model(str(tmp_path / "run"))
    assert m.path == c10.resolve() and m.label == "run-checkpoint-10"
    ident = checkpoint_identity(c10)
    assert checkpoint_identity(c10) == ident
    (c10 / "config.json").write_text('{"model_type": "qwen2", "x": 1}')
    assert checkpoint_identity(c10) != ident
    with pytest.raises(EvalError, match="holds no model"):
        parse_model(str(tmp_path))
    # the cache key of a local model ignores where it is served
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    a = _EvalClient(LLMConfig(base_url="http://127.0.0.1:1111/v1", model="m"), identity=ident)
    b = _EvalClient(LLMConfig(base_url="http://127.0.0.1:2222/v1", model="m"), identity=ident)
    plain = _EvalClient(LLMConfig(base_url="http://127.0.0.1:2222/v1", model="m"))
    assert a._cache_key(body) == b._cache_key(body) != plain._cache_key(body)


def test_model_specs():
    m = parse_model("qwen@http://127.0.0.1:8000/v1")
    assert isinstance(m, EndpointModel) and (m.label, m.model, m.base_url) == ("qwen", "qwen", "http://127.0.0.1:8000/v1")
    m = parse_model("mine=org/model-7b@https://host/v1/")
    assert (m.label, m.model, m.base_url) == ("mine", "org/model-7b", "https://host/v1")
    m = parse_model("openrouter:meta/llama-3")
    assert m.base_url == "https://openrouter.ai/api/v1" and m.api_key_env == "OPENROUTER_API_KEY"
    for bad in ("nonsense", "foo:bar", "x@ftp://h"):
        with pytest.raises(EvalError, match="cannot read --model"):
            parse_model(bad)


def _rec(run_id: str, statuses: dict[str, tuple[int, int]], **kw) -> RunRecord:
    cases = [CaseResult(name=n, runs=r, passed=p, reasons=[] if p == r else ["nope <b>bold</b>"],
                        output="<script>alert(1)</script>\x1e") for n, (p, r) in statuses.items()]
    return RunRecord(run_id=run_id, suite="s", suite_version="v1", suite_path="s.yaml", model={"label": "m"},
                     label=kw.pop("label", "m"), started_at="2026-01-01T00:00:00+00:00", cases=cases,
                     summary=summarize(cases), **kw)


def test_compare_and_reports():
    a = _rec("ra", {"fixed": (0, 1), "broke": (1, 1), "same": (1, 1), "gone": (1, 1)})
    b = _rec("rb", {"fixed": (1, 1), "broke": (0, 1), "same": (1, 1), "new": (0, 1)})
    kinds = {c.case: c.kind for c in compare_runs(a, b)}
    assert kinds == {"fixed": "fixed", "broke": "regressed", "same": "same", "gone": "gone", "new": "new"}
    text = _render(compare_table(a, b))
    assert "regressed" in text and "fixed" in text and "same" not in text.split("pass rate")[0].replace("1 same", "")
    assert "1 fixed" in text and "+" in text or "-" in text
    page = grid_html([a, _rec("rc", {"fixed": (2, 3)}, label="other", repeat=3)])
    assert page.startswith("<!doctype html>") and "<script>alert" not in page and "&lt;script&gt;" in page
    assert "nope &lt;b&gt;bold&lt;/b&gt;" in page and "2/3" in page and page.count("<tr>") >= 5
    assert "\x1e" not in page and "&lt;/script&gt;\ufffd" in page


def test_cli_runs_reports_and_compares(tmp_path):
    f = _suite(tmp_path, {"A": "a", "B": "b"})
    hist = tmp_path / "h"
    url = f"down@http://127.0.0.1:{_closed_port()}/v1"
    r = runner.invoke(app, ["eval", "run", str(f), "--model", url, "--history", str(hist), "-q"])
    assert r.exit_code == 0, r.output
    assert "error" in r.output and "HTML report:" in r.output
    html = Path(re.search(r"HTML report: (\S+)", r.output).group(1))
    assert html.is_file() and "<td class='case'>A</td>" in html.read_text()
    r = runner.invoke(app, ["eval", "run", str(f), "--model", url, "--history", str(hist), "-q", "--only-failed"])
    assert r.exit_code == 0 and "2 of 2 cases failed last time" in r.output, r.output
    ids = [rec.run_id for rec, _ in list_runs(hist)]
    assert len(ids) == 2
    r = runner.invoke(app, ["eval", "runs", "--history", str(hist)])
    assert r.exit_code == 0 and ids[0] in r.output
    run2_dir = find_run(hist, ids[1])[1]
    r = runner.invoke(app, ["eval", "compare", ids[0], str(run2_dir), "--history", str(hist), "--all", "--details"])
    assert r.exit_code == 0 and "same" in r.output and "Evaluation Diff" in r.output, r.output
    r = runner.invoke(app, ["eval", "compare", ids[0][:9], ids[1], "--history", str(hist)])
    assert r.exit_code == 1 and "matches 2 runs" in r.output
    r = runner.invoke(app, ["eval", "report", "--history", str(hist), "--html", str(tmp_path / "r.html")])
    assert r.exit_code == 0 and (tmp_path / "r.html").is_file(), r.output
    r = runner.invoke(app, ["eval", "schema", str(tmp_path / "schema")])
    assert r.exit_code == 0 and (tmp_path / "schema" / "evals_schema.json").is_file(), r.output
    # bad input: one line, non-zero exit
    for args in (["eval", "run", str(tmp_path / "none.yaml"), "--model", url],
                 ["eval", "run", str(f), "--model", "what"],
                 ["eval", "compare", "nope", "nada", "--history", str(hist)],
                 ["eval", "run", str(f), "--model", url, "--history", str(tmp_path / "empty"), "--only-failed"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, (args, r.output)


def test_a_suite_without_runnable_cases_needs_no_sandbox(tmp_path, monkeypatch):
    from sandboxes import pool

    def no_pool(*a, **kw):
        raise AssertionError("a pool was opened")

    monkeypatch.setattr(pool.SandboxPool, "__aenter__", no_pool)
    f = _suite(tmp_path, {"A": "a"})
    (rec,) = run_suite_sync(load_suite(f), [FunctionModel("m", lambda m, t, task: "yes")],
                            RunOptions(history_dir=tmp_path, progress=False, save=False))
    assert rec.summary.pass_rate == 1.0
    assert json.loads(rec.model_dump_json())["summary"]["pass_at_k"] == {"1": 1.0}


def test_without_any_sandbox_only_the_cases_that_need_one_fail(tmp_path, monkeypatch):
    from sandboxes import BackendUnavailable, pool

    async def no_backend(self):
        raise BackendUnavailable("neither docker nor bubblewrap works here")

    monkeypatch.setattr(pool.SandboxPool, "__aenter__", no_backend)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"cases": [
        {"name": "chat", "inputs": {"prompt": "p"}, "evaluators": [{"Regex": "yes"}]},
        {"name": "code", "inputs": {"prompt": "p"}, "evaluators": [{"RunCode": {"contains": "yes"}}]},
        {"name": "episode", "inputs": {"task": {"domain": "notes_app", "instruction": "x"}}}]}))
    (rec,) = run_suite_sync(load_suite(tmp_path / "s.yaml"),
                            [FunctionModel("m", lambda m, t, task: "yes\n```python\nprint('yes')\n```")],
                            RunOptions(history_dir=tmp_path, progress=False, save=False))
    res = {c.name: c for c in rec.cases}
    assert res["chat"].all_passed
    for name in ("code", "episode"):
        assert "none could be started: BackendUnavailable: neither docker" in res[name].reasons[0], res[name].reasons


def _broken_suite(root: Path) -> Path:
    """A suite directory with every kind of file that does not load, next to good cases."""
    (root / "ep").mkdir(parents=True)
    (root / "good.yaml").write_text(yaml.safe_dump({"cases": [
        {"name": "a", "inputs": {"prompt": "say yes"}, "evaluators": [{"Regex": "^yes$"}]},
        {"name": "no-prompt", "inputs": {}}]}))
    (root / "unclosed.yaml").write_text("cases:\n  - {name: a, inputs: {prompt: p}\n")
    (root / "trunc.json").write_text('{"cases": [{"name": "x", "inputs": {"prompt"')
    (root / "unknown_eval.yaml").write_text(yaml.safe_dump({"evaluators": [{"Nope": 1}], "cases": [
        {"name": f"c{i}", "inputs": {"prompt": "p"}} for i in range(12)]}))
    (root / "ep" / "episodes.yaml").write_text(yaml.safe_dump({"cases": [
        {"name": "t1", "inputs": {"task": "T-1"}}, {"name": "t2", "inputs": {"task": "T-2"}}]}))
    (root / "ep" / "tasks.jsonl").write_text('{"id": "T-1", "domain": "retail_')
    return root


def test_cli_run_lists_broken_files_first_runs_the_rest_and_exits_non_zero(tmp_path):
    """Issue 18 #4: each broken file once, up front, with its error; the rest runs; exit 1 unless --allow-broken."""
    suite = _broken_suite(tmp_path / "suite")
    hist = tmp_path / "h"
    url = f"down@http://127.0.0.1:{_closed_port()}/v1"
    r = runner.invoke(app, ["eval", "run", str(suite), "--model", url, "--history", str(hist), "-q"])
    assert r.exit_code == 1, r.output
    out = r.output
    head = out[:out.index("suite suite (")]
    for f in ("unclosed.yaml", "trunc.json", "unknown_eval.yaml", "ep/tasks.jsonl"):
        assert head.count(f"broken file {suite / f}: ") == 1, (f, head)
    assert "expected ',' or '}'" in head and "Expecting ':' delimiter" in head and "'Nope'" in head
    assert "case good/no-prompt does not load" in head and "unknown_eval/c" not in head   # not once per case
    assert "HTML report:" in out and "good/a" in out           # the rest of the suite ran
    assert "17 case(s) could not be loaded (4 broken file(s)" in out and "--allow-broken" in out
    (rec, _), = list_runs(hist)
    assert len(rec.cases) == 18

    s = load_suite(suite)
    assert {p.name for p in s.broken_files} == {"unclosed.yaml", "trunc.json", "unknown_eval.yaml", "tasks.jsonl"}
    assert "Nope" in s.broken_files[suite / "unknown_eval.yaml"]
    assert "EOF while parsing" in s.broken_files[suite / "ep" / "tasks.jsonl"]
    assert "good/no-prompt" not in s.cases_of_broken_files and "ep/episodes/t1" in s.cases_of_broken_files
    assert len(s.unloadable_cases) == 1 + 1 + 1 + 12 + 2

    r = runner.invoke(app, ["eval", "run", str(suite), "--model", url, "--history", str(hist), "-q", "--allow-broken"])
    assert r.exit_code == 0, r.output
    assert "broken file" in r.output and "could not be loaded" not in r.output
    # only cases that were selected count: a --case filter that leaves the broken ones out exits 0
    r = runner.invoke(app, ["eval", "run", str(suite), "--model", url, "--history", str(hist), "-q", "--case", "good/a"])
    assert r.exit_code == 0, r.output


def test_a_hung_model_costs_one_timeout_per_try_not_minutes(tmp_path):
    """Issue 22 item 16: a model that accepts and never answers. `--timeout` bounds each try and
    `--retries` their number: with --retries 0 the case fails once, naming the timeout, and the run
    goes on (before: 3 x 120 s per case and no option)."""
    from tests.conftest import silent_server

    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"cases": [
        {"name": "chat", "inputs": {"prompt": "hi"}, "evaluators": [{"Regex": "x"}]}]}))
    with silent_server() as (port, accepted):
        r = runner.invoke(app, ["eval", "run", str(tmp_path / "s.yaml"), "--model", f"hung@http://127.0.0.1:{port}/v1",
                                "--timeout", "1", "--retries", "0", "--history", str(tmp_path / "h"), "-q"])
        connections = len(accepted)
    ((rec, _),) = list_runs(tmp_path / "h")
    assert r.exit_code == 0, r.output  # a failed case is a result, not a crash
    (case,) = rec.cases
    assert case.errors == 1 and re.search(r"time(d)? ?out", case.reasons[0], re.I), case.reasons
    assert connections == 1  # one try: no retry, no reconnect


def test_report_names_a_truncated_run_instead_of_dropping_the_model(tmp_path):
    """Like `eval runs`: a run.json that does not load is named (exit 1), and no report is written without it."""
    f = _suite(tmp_path, {"A": "a"})
    hist = tmp_path / "h"
    run_suite_sync(load_suite(f), [FunctionModel("good", lambda m, t, task: "a"),
                                   FunctionModel("cut", lambda m, t, task: "b")],
                   RunOptions(history_dir=hist, progress=False))
    (cut,) = [d / "run.json" for r, d in list_runs(hist) if r.label == "cut"]
    cut.write_text(cut.read_text()[:40])
    html = tmp_path / "r.html"
    r = runner.invoke(app, ["eval", "report", "--history", str(hist), "--html", str(html)])
    assert r.exit_code == 1 and r.output.startswith(f"error: {cut} does not load"), r.output
    assert r.output.count("\n") == 1 and not html.exists(), r.output


def test_a_prompt_that_does_not_fit_the_context_is_an_error_naming_the_cause(tmp_path):
    """The model never answers (its first prompt overflows its context): the case is an error (counted in
    summary.errors) whose reason says so, not an ordinary failed case."""
    from synth.episode import BudgetExhausted

    def overflow(messages, tools, task):
        raise BudgetExhausted("no room left to generate (6030 tokens in context, limit 2048)")

    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"cases": [
        {"name": "episode", "inputs": {"task": {"domain": "notes_app", "instruction": "x"}}}]}))
    (rec,) = run_suite_sync(load_suite(tmp_path / "s.yaml"), [FunctionModel("m", overflow)],
                            RunOptions(history_dir=tmp_path, progress=False, save=False))
    (case,) = rec.cases
    assert case.errors == 1 and rec.summary.errors == 1, case
    assert "does not fit the model's context" in case.reasons[0] and "6030 tokens" in case.reasons[0], case.reasons
