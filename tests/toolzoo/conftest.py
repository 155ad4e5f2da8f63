"""Fixtures of the tool-zoo tests."""

from __future__ import annotations

import pytest

from toolzoo import domain_dirs


@pytest.fixture
def clean_registry(monkeypatch):
    """Domain folders registered by a test are forgotten after it (and none come from the environment)."""
    monkeypatch.delenv(domain_dirs.ENV, raising=False)
    before = dict(domain_dirs._registered)
    yield
    domain_dirs._registered.clear()
    domain_dirs._registered.update(before)
