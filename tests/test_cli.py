"""The dojo CLI: sub-commands mounted, one-line errors, a real doctor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DOJO = str(Path(sys.executable).with_name("dojo"))


def dojo(*args: str, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("env", {**os.environ, "COLUMNS": "250"})
    return subprocess.run([DOJO, *args], capture_output=True, text=True, timeout=300, **kw)


def test_root_mounts_sandbox_app():
    r = dojo("--help")
    assert r.returncode == 0 and "sandbox" in r.stdout


def test_bad_input_is_one_line_error():
    for args, needle in (
        (["sandbox", "exec", "true", "--memory-mb", "2"], "memory_mb"),
        (["sandbox", "exec", "true", "--backend", "vm"], "unknown backend"),
    ):
        r = dojo(*args)
        assert r.returncode != 0
        assert "Traceback" not in r.stderr
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], r.stderr


def test_exec_runs_in_a_sandbox(backend):
    r = dojo("sandbox", "exec", "id -u; exit 3", "--backend", backend)
    assert r.returncode == 3 and r.stdout.strip() == "65534"


def test_doctor_reports_each_backend(backend):
    r = dojo("sandbox", "doctor", "--json")
    assert r.returncode == 0, r.stderr
    report = {x["backend"]: x for x in json.loads(r.stdout.strip().splitlines()[-1])}
    assert set(report) == {"docker", "local"}
    assert report[backend]["works"] is True and "sandbox up in" in report[backend]["detail"]


def test_doctor_says_why_docker_fails():
    env = {**os.environ, "COLUMNS": "250", "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    r = dojo("sandbox", "doctor", "--json", env=env)
    report = {x["backend"]: x for x in json.loads(r.stdout.strip().splitlines()[-1])}
    assert report["docker"]["works"] is False
    assert "no Docker engine answers" in report["docker"]["detail"]


def test_demo_runs_an_episode(backend):
    r = dojo("sandbox", "demo", "--backend", backend)
    assert r.returncode == 0, r.stderr
    assert "kv_set" in r.stdout and "not_found" in r.stdout
    assert "Read-only" in r.stdout or "Permission denied" in r.stdout


def test_gc_runs():
    r = dojo("sandbox", "gc")
    assert r.returncode == 0 and "removed" in r.stdout


def test_auto_falls_back_to_local_and_says_why():
    from conftest import require

    require("local")
    env = {**os.environ, "COLUMNS": "250", "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    r = dojo("sandbox", "demo", env=env)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("backend: local (auto: no Docker engine"), first
    assert "kv_set" in r.stdout


def test_auto_prefers_docker_when_an_engine_answers():
    from conftest import require

    require("docker")
    r = dojo("sandbox", "demo")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("backend: docker (auto: Docker engine")
