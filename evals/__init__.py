"""tooldojo.evals: personal eval suites on pydantic-evals.

    from evals import load_suite, parse_model, run_suite_sync, RunOptions
    records = run_suite_sync(load_suite("examples/evals/personal"),
                             [parse_model("tiny@http://127.0.0.1:8000/v1")], RunOptions(repeat=3))

Suites are pydantic-evals datasets (YAML/JSON files with a JSON Schema, Python modules, or a
directory of them: evals.suite); tooldojo adds evaluators (sandboxed code, tool episodes scored
with rewards, regex, the rubric judge, AllOf/AnyOf/Not: evals.evaluators), models (endpoints,
local checkpoints served by vLLM, Python functions: evals.models), a response cache, repeats with
pass@k / pass^k, --only-failed, run history and comparison (evals.runner, evals.history), and
grid reports in rich and HTML (evals.report). `dojo eval` is the CLI (evals.cli).

Nothing imports this package but the root CLI; it imports sandboxes, toolzoo, synth and rewards.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "load_suite": "evals.suite", "Suite": "evals.suite", "suite_schema": "evals.suite", "write_schema": "evals.suite",
    "EvalInputs": "evals.inputs", "CaseMeta": "evals.inputs", "InlineTask": "evals.inputs",
    "parse_model": "evals.models", "EndpointModel": "evals.models", "LocalModel": "evals.models",
    "FunctionModel": "evals.models",
    "RunOptions": "evals.runner", "run_suite": "evals.runner", "run_suite_sync": "evals.runner",
    "RunRecord": "evals.results", "pass_at_k": "evals.results", "pass_hat_k": "evals.results",
    "register_evaluator": "evals.evaluators",
    "EvalError": "evals.context",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'evals' has no attribute {name!r}")
