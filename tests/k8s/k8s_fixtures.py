"""Fixtures of the Kubernetes tests: a FAKE API server (k8s/fake_apiserver.py) per test.

Imported by each test module (`from k8s_fixtures import ...`), not a conftest.py: the suite's other
modules import the top-level `conftest` by name, and a second conftest.py would shadow it.

No test here talks to a real cluster; those live in test_live.py, marked `k8s`, and run only
with TOOLDOJO_K8S_LIVE=1 and a kubeconfig.
"""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("kubernetes", reason="the k8s extra is not installed (pip install 'tooldojo[k8s]')")

from k8s.fake_apiserver import FakeApiServer  # noqa: E402


def _serve(auto_start_pods: bool):
    from sandboxes import kubernetes_backend

    server = FakeApiServer(auto_start_pods=auto_start_pods).start()
    try:
        yield server
    finally:
        kubernetes_backend.forget_clusters()
        server.stop()


@pytest.fixture
def fake():
    yield from _serve(auto_start_pods=True)


@pytest.fixture
def fake_manual():
    """Pods stay Pending until the test moves them."""
    yield from _serve(auto_start_pods=False)


@pytest.fixture
def need_bwrap() -> None:
    """The fake runs exec'd commands under bubblewrap (to bind the pod's volumes at their paths)."""
    if shutil.which("bwrap") is None:
        if "local" in os.environ.get("TOOLDOJO_REQUIRE_BACKENDS", ""):
            pytest.fail("bubblewrap is required here but missing")
        pytest.skip("bubblewrap is not installed: the fake API server cannot exec")
