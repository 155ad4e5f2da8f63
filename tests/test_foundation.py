"""The distribution: one package per layer, pins that matter, nothing that breaks torch."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["tooldojo", "sandboxes", "toolzoo", "synth", "rewards", "rl", "evals", "k8s"]


def test_every_layer_is_a_package_of_the_distribution():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(meta["tool"]["setuptools"]["packages"])
    for pkg in PACKAGES:
        assert pkg in listed
        assert importlib.import_module(pkg).__file__.startswith(str(ROOT / pkg))
    assert meta["project"]["scripts"]["dojo"] == "tooldojo.cli:main"
    assert meta["project"]["requires-python"] == ">=3.11"


def test_torch_pinned_to_the_cpu_build_and_vision_audio_kept_out():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = [d for group in meta["project"]["optional-dependencies"].values() for d in group]
    deps += meta["project"]["dependencies"]
    assert "torch==2.13.0" in deps
    assert not [d for d in deps if d.split("=")[0].split(">")[0].split("<")[0] in ("torchvision", "torchaudio", "torchcodec")]
    for bad in ("torchvision", "torchaudio", "torchcodec"):
        assert importlib.util.find_spec(bad) is None, f"{bad} is installed; scripts/setup.sh removes it"


def test_sandboxes_import_nothing_from_higher_layers():
    higher = {"toolzoo", "synth", "rewards", "rl", "evals", "k8s", "tooldojo"}
    for f in (ROOT / "sandboxes").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                assert name.split(".")[0] not in higher, f"{f} imports {name}"
