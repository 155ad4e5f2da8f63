"""The seed zoo as a whole: size, coverage, determinism, naming, and a test for every tool."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from toolzoo.domains import domain_names, load_domain, seed_zoo

TESTS = Path(__file__).parent / "domains"


@pytest.fixture(scope="module")
def zoo():
    return seed_zoo()


def test_every_tool_is_tested(zoo):
    for d in zoo.domains:
        test_file = TESTS / f"test_{d.name}.py"
        assert test_file.exists(), f"domain {d.name} has no test file {test_file}"
        text = test_file.read_text()
        for t in d.tools:
            assert re.search(rf"[\"']{t.name}[\"']", text), f"{d.name}.{t.name} is never called in {test_file.name}"


def test_domains_are_laid_out_like_tau2(zoo):
    for d in zoo.domains:
        assert len(d.policy) > 40, f"{d.name}: policy too short"
        assert d.state_schema.get("type") == "object"
        assert any(t.effect == "write" for t in d.tools), f"{d.name} has no write tool: no state to verify"
        assert any(t.effect == "read" for t in d.tools), f"{d.name} has no read tool"
        for t in d.tools:
            assert t.provenance == "seed" and t.category == d.category


@pytest.mark.parametrize("name", domain_names())
def test_seed_data_is_deterministic(name):
    import importlib

    data = importlib.import_module(f"toolzoo.domains.{name}.data")
    a, b, c = (data.seed(random.Random(s)) for s in (7, 7, 8))
    assert a == b
    assert a != c, f"{name}: seed data ignores the seed"


def test_names_unique_across_the_zoo(zoo):
    zoo.check_names()
    assert len({t.name for t in zoo.tools}) == len(zoo.tools)


def test_load_domain_unknown():
    from toolzoo.spec import SpecError

    with pytest.raises(SpecError, match="known:"):
        load_domain("atlantis")
