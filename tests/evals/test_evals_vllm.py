"""The example suite end to end on the tiny model served by a real vLLM (the session's one server):
real model calls, real sandboxes, real tool episodes, the judge; the response cache proven by the
server's own request counter; --only-failed, --repeat, compare, the HTML report; a local
checkpoint folder served for the run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.history import find_run, list_runs, load_report
from evals.suite import load_suite
from evals_helpers import EXAMPLE, sandbox_backend, server_requests
from tooldojo.cli import app

runner = CliRunner()
ARGS = ["--max-tokens", "32", "--max-turns", "2", "-q", "--concurrency", "4"]


def _run(*args: str) -> tuple[str, list[str]]:
    r = runner.invoke(app, ["eval", "run", *args])
    if r.exit_code != 0:
        import traceback

        tb = "".join(traceback.format_exception(*r.exc_info)) if r.exc_info and r.exc_info[1] else ""
        pytest.fail(f"dojo eval run exited {r.exit_code}:\n{r.output[-3000:]}\n{tb[-3000:]}")
    return r.output, re.findall(r"saved run (\S+)", r.output)


@pytest.fixture(scope="module")
def runs(vllm_server, tmp_path_factory):
    """The example suite twice, unchanged, on the tiny model (model and judge), counting requests at the server."""
    hist = tmp_path_factory.mktemp("evals-history")
    model = f"tiny@{vllm_server.base_url}"
    common = [str(EXAMPLE), "--model", model, "--judge", model, "--history", str(hist),
              "--backend", sandbox_backend(), *ARGS]
    n0 = server_requests(vllm_server.base_url)
    out1, (id1,) = _run(*common)
    n1 = server_requests(vllm_server.base_url)
    out2, (id2,) = _run(*common)
    n2 = server_requests(vllm_server.base_url)
    return {"hist": hist, "model": model, "common": common, "ids": (id1, id2), "requests": (n1 - n0, n2 - n1),
            "out": (out1, out2)}


def test_the_example_suite_runs_end_to_end(runs):
    rec, d = find_run(runs["hist"], runs["ids"][0])
    assert rec.summary.cases == len(load_suite(EXAMPLE).dataset.cases) >= 20
    assert rec.usage["requests"] > 0 and runs["requests"][0] >= rec.usage["requests"]
    # every case ran and was judged by its evaluators (the random model fails most of them, with reasons)
    assert all(c.reasons for c in rec.cases if not c.all_passed)
    assert rec.summary.errors == 0, [c.reasons for c in rec.cases if c.errors]
    report = load_report(d)
    episodes = [c for c in report.cases if "episode" in c.attributes]
    assert len(episodes) == 6 and all(c.attributes["episode"]["agent_turns"] >= 1 for c in episodes)
    judged = next(c for c in rec.cases if c.name == "reasoning/why-sky-blue")
    assert "RubricJudge" in judged.reasons[0]
    code = next(c for c in rec.cases if c.name == "code/fizzbuzz")
    assert code.output and "RunCode" in code.reasons[0]
    html = Path(re.search(r"HTML report: (\S+)", runs["out"][0]).group(1)).read_text()
    assert all(c.name in html for c in rec.cases)


def test_an_unchanged_rerun_makes_no_model_calls(runs):
    first, _ = find_run(runs["hist"], runs["ids"][0])
    second, _ = find_run(runs["hist"], runs["ids"][1])
    assert runs["requests"][0] > 0 and runs["requests"][1] == 0     # counted by the vLLM server itself
    assert second.usage["requests"] == 0 and second.usage["cached"] == first.usage["requests"]
    assert [(c.name, c.status, c.output) for c in second.cases] == [(c.name, c.status, c.output) for c in first.cases]
    r = runner.invoke(app, ["eval", "compare", *runs["ids"], "--history", str(runs["hist"])])
    assert r.exit_code == 0 and f"{first.summary.cases} same" in r.output, r.output


def test_only_failed_reruns_the_failures_from_the_cache(runs, vllm_server):
    first, _ = find_run(runs["hist"], runs["ids"][0])
    failed = {c.name for c in first.cases if not c.all_passed}
    n0 = server_requests(vllm_server.base_url)
    out, (rid,) = _run(*runs["common"], "--only-failed")
    rec, _ = find_run(runs["hist"], rid)
    assert rec.only_failed and {c.name for c in rec.cases} == failed
    assert server_requests(vllm_server.base_url) == n0
    assert f"{len(failed)} of {first.summary.cases} cases failed last time" in out


def test_repeats_draw_new_samples_and_report_pass_at_k(runs, vllm_server):
    n0 = server_requests(vllm_server.base_url)
    out, (rid,) = _run(str(EXAMPLE), "--model", runs["model"], "--history", str(runs["hist"]), *ARGS,
                       "--repeat", "2", "--case", "reasoning/multiply", "--case", "extras/*")
    rec, _ = find_run(runs["hist"], rid)
    assert rec.repeat == 2 and all(c.runs == 2 for c in rec.cases) and len(rec.cases) == 5
    assert 2 in rec.summary.pass_at_k and 2 in rec.summary.pass_hat_k and "pass@2" in out
    # run 1 of each case was cached by the full runs; run 2 (seed + 1) is a new sample
    assert server_requests(vllm_server.base_url) - n0 == len(rec.cases) == rec.usage["requests"]


def test_a_local_checkpoint_is_served_for_the_run(runs, vllm_server, monkeypatch):
    """A model folder given as --model is served by synth.vllm_server for the run and stopped after it.
    (The test stands the session's server in for a fresh one: one vLLM engine per test session.)"""
    from synth import vllm_server as vs

    calls = []

    class Borrowed:
        base_url = vllm_server.base_url

        def stop(self):
            calls.append("stop")

    def start(model_dir, *, log_path, served_name="tiny", **kw):
        calls.append(("start", Path(model_dir), served_name))
        return Borrowed()

    monkeypatch.setattr(vs, "start_vllm_server", start)
    args = [str(EXAMPLE), "--model", f"tiny={vllm_server.model_dir}", "--history", str(runs["hist"]), *ARGS,
            "--case", "reasoning/multiply"]
    n0 = server_requests(vllm_server.base_url)
    _, (rid,) = _run(*args)
    n1 = server_requests(vllm_server.base_url)
    _run(*args)
    assert calls == [("start", Path(vllm_server.model_dir).resolve(), "tiny"), "stop"] * 2
    rec, _ = find_run(runs["hist"], rid)
    assert rec.model["kind"] == "local" and rec.usage["requests"] == 1 == n1 - n0
    assert server_requests(vllm_server.base_url) == n1        # the checkpoint's cache survives a new server
    assert len(list_runs(runs["hist"])) >= 4
