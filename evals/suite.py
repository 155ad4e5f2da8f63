"""Suites: pydantic-evals datasets in YAML / JSON files and Python modules; a directory is one suite.

    suite = load_suite("examples/evals/personal")       # a file or a directory
    suite.dataset                                       # pydantic_evals.Dataset[EvalInputs, str, CaseMeta]
    suite.version                                       # hash of every file of the suite

A **YAML / JSON file** is a pydantic-evals dataset file (``name``, ``cases``, ``evaluators``,
``report_evaluators``); tooldojo's evaluators (:mod:`evals.evaluators`) are known by name. Write
``# yaml-language-server: $schema=evals_schema.json`` on its first line and ``dojo eval schema
DIR`` writes that schema next to it, so editors complete inputs and evaluators.

A **Python module** defines ``dataset`` (a ``pydantic_evals.Dataset``), or ``cases`` (a list of
``pydantic_evals.Case``; inputs may be an ``EvalInputs``, a dict or a plain prompt string) with an
optional ``evaluators`` list. Evaluator classes it defines are registered, so YAML files of the
same directory can use them by name (modules load first).

A **directory** is discovered whole: every ``*.yaml`` / ``*.yml`` / ``*.json`` / ``*.py`` under it
(not ``*_schema.json``, not names starting with ``_`` or ``.``), in path order. Case names become
``<file stem>/<case name>`` (the path below the directory, without its suffix), and a file's
dataset-level evaluators apply to its own cases only.

A case that cannot be loaded (a bad evaluator spec, invalid inputs) does not stop the suite: it is
kept as a case whose run fails with the reason; so is a file that cannot be parsed, a file whose
evaluators do not load, and a case whose tasks file does not load. Each such file is listed once in
``Suite.broken_files`` with its error (`dojo eval run` prints them first and exits non-zero).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import Evaluator

from evals.context import EvalError
from evals.evaluators import EVALUATORS, evaluator_types, register_evaluator
from evals.inputs import CaseMeta, EvalInputs, InlineTask

__all__ = ["SCHEMA_FILE", "SUITE_SUFFIXES", "Suite", "SuiteDataset", "load_suite", "suite_schema", "write_schema"]

SuiteDataset = Dataset[EvalInputs, str, CaseMeta]
SUITE_SUFFIXES = (".yaml", ".yml", ".json", ".py")
SCHEMA_FILE = "evals_schema.json"


@dataclass
class Suite:
    name: str
    path: Path                     # the file or directory given
    version: str                   # sha256 (12 hex) of every suite file's path and bytes
    dataset: SuiteDataset
    files: list[Path] = field(default_factory=list)
    evaluator_types: list[type[Evaluator]] = field(default_factory=list)   # defined by the suite's modules
    broken_files: dict[Path, str] = field(default_factory=dict)            # a file that does not load -> why
    cases_of_broken_files: set[str] = field(default_factory=set)          # names of the cases they took down

    @property
    def unloadable_cases(self) -> list[str]:
        """Names of the cases that could not be loaded (they fail with the reason when run)."""
        return [c.name or "" for c in self.dataset.cases if c.inputs.load_error]

    @property
    def case_names(self) -> list[str]:
        return [c.name or "" for c in self.dataset.cases]

    def subset(self, names: list[str] | set[str]) -> SuiteDataset:
        """The suite's dataset with only these cases (in suite order)."""
        keep = set(names)
        return SuiteDataset(name=self.dataset.name, cases=[c for c in self.dataset.cases if c.name in keep],
                            evaluators=list(self.dataset.evaluators),
                            report_evaluators=list(self.dataset.report_evaluators))


# ============================================================================ errors in one line
def _one_line(e: BaseException) -> str:
    if isinstance(e, ValidationError):
        parts = []
        for err in e.errors()[:3]:
            where = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-after"))
            parts.append(f"{where}: {err['msg']}" if where else err["msg"])
        more = f" (+{e.error_count() - 3} more)" if e.error_count() > 3 else ""
        return "; ".join(parts) + more
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(_one_line(x) for x in e.exceptions[:3])
    text = " ".join(str(e).split())
    return text if len(text) <= 400 else text[:400] + "..."


# ============================================================================ files
def _files(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part.startswith((".", "_")) for part in rel.parts) or not p.is_file():
            continue
        if p.suffix in SUITE_SUFFIXES and not p.name.endswith("_schema.json"):
            out.append(p)
    return out


def _version(root: Path, files: list[Path]) -> str:
    """Every file under the suite's directory that could change a result (suite files, tasks, data)."""
    h = hashlib.sha256()
    base = root if root.is_dir() else root.parent
    extra = [p for p in (sorted(base.rglob("*")) if root.is_dir() else [])
             if p.is_file() and p not in files and "__pycache__" not in p.parts and not p.name.endswith("_schema.json")
             and not any(part.startswith(".") for part in p.relative_to(base).parts)]
    for p in sorted(set(files) | set(extra)):
        h.update(str(p.relative_to(base)).encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:12]


def _coerce_inputs(inputs: Any) -> EvalInputs:
    if isinstance(inputs, EvalInputs):
        return inputs
    if isinstance(inputs, str):
        return EvalInputs(prompt=inputs)
    return EvalInputs.model_validate(inputs)


def _broken(name: str, reason: str, base_dir: Path, metadata: Any = None) -> Case:
    meta = metadata if isinstance(metadata, CaseMeta) else CaseMeta()
    return Case(name=name, inputs=EvalInputs.broken(reason, base_dir), metadata=meta)


_Loaded = tuple[str | None, list[Case], list, list, str | None]


def _load_data(data: Any, source: Path, custom: list[type[Evaluator]]) -> _Loaded:
    """(name, cases, dataset evaluators, report evaluators, the file's own error) of one parsed dataset
    file; each case loads on its own so that one bad case does not take the file down."""
    base = source.parent
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise EvalError("not a dataset: expected a mapping with a `cases` list")
    unknown = set(data) - {"$schema", "name", "cases", "evaluators", "report_evaluators"}
    if unknown:
        raise EvalError(f"unknown top-level keys {sorted(unknown)} (allowed: name, cases, evaluators, report_evaluators)")
    head = {"name": data.get("name") or source.stem, "cases": [],
            "evaluators": data.get("evaluators") or [], "report_evaluators": data.get("report_evaluators") or []}
    head_error = None
    try:
        shell = SuiteDataset.from_dict(head, custom_evaluator_types=custom)
        evaluators, report_evaluators = list(shell.evaluators), list(shell.report_evaluators)
    except (ValidationError, ValueError, TypeError, BaseExceptionGroup) as e:
        head_error = f"the file's evaluators do not load: {_one_line(e)}"
        evaluators, report_evaluators = [], []
    cases: list[Case] = []
    for i, raw in enumerate(data["cases"], 1):
        name = raw.get("name") if isinstance(raw, dict) and isinstance(raw.get("name"), str) else f"case {i}"
        if head_error:
            cases.append(_broken(name, head_error, base))
            continue
        try:
            one = SuiteDataset.from_dict({"name": head["name"], "cases": [raw]}, custom_evaluator_types=custom)
            case = one.cases[0]
            case.name = case.name or name
        except (ValidationError, ValueError, TypeError, BaseExceptionGroup) as e:
            cases.append(_broken(name, f"case {name!r} does not load: {_one_line(e)}", base))
            continue
        case.inputs._base_dir = base
        if case.metadata is None:
            case.metadata = CaseMeta()
        cases.append(case)
    return data.get("name"), cases, evaluators, report_evaluators, head_error


def _load_module(path: Path) -> _Loaded:
    mod_name = "tooldojo_suite_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise EvalError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    for obj in vars(module).values():
        if (inspect.isclass(obj) and issubclass(obj, Evaluator) and obj.__module__ == mod_name
                and not inspect.isabstract(obj)):
            register_evaluator(obj)
            _DEFINED.append(obj)
    ds = getattr(module, "dataset", None)
    if isinstance(ds, Dataset):
        name, raw_cases = ds.name, list(ds.cases)
        evaluators, report_evaluators = list(ds.evaluators), list(ds.report_evaluators)
    elif isinstance(getattr(module, "cases", None), (list, tuple)):
        name, raw_cases = getattr(module, "name", None), list(module.cases)
        evaluators, report_evaluators = list(getattr(module, "evaluators", [])), list(getattr(module, "report_evaluators", []))
    else:
        raise EvalError("a suite module defines `dataset` (a pydantic_evals.Dataset) or `cases` (a list of Case)")
    cases = []
    for i, c in enumerate(raw_cases, 1):
        name_i = getattr(c, "name", None) or f"case {i}"
        if not isinstance(c, Case):
            cases.append(_broken(name_i, f"case {i} is a {type(c).__name__}, not a pydantic_evals.Case", path.parent))
            continue
        try:
            inputs = _coerce_inputs(c.inputs)
            meta = c.metadata if isinstance(c.metadata, CaseMeta) else CaseMeta.model_validate(c.metadata or {})
        except (ValidationError, ValueError) as e:
            cases.append(_broken(name_i, f"case {name_i!r} does not load: {_one_line(e)}", path.parent))
            continue
        if inputs._base_dir is None:
            inputs._base_dir = path.parent
        cases.append(Case(name=name_i, inputs=inputs, metadata=meta, expected_output=c.expected_output,
                          evaluators=list(c.evaluators)))
    return name, cases, evaluators, report_evaluators, None


_DEFINED: list[type[Evaluator]] = []   # evaluator classes of the modules loaded by the current load_suite


def _load_file(path: Path) -> _Loaded:
    if path.suffix == ".py":
        return _load_module(path)
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except (yaml.YAMLError, ValueError) as e:
        raise EvalError(f"cannot parse {path.name}: {_one_line(e)}") from None
    return _load_data(data, path, evaluator_types())


# ============================================================================ the suite
def load_suite(path: str | Path) -> Suite:
    """A suite from a dataset file (YAML/JSON), a Python module, or a directory of them."""
    root = Path(path).expanduser()
    if not root.exists():
        raise EvalError(f"no suite at {path}: give a suite file (.yaml, .yml, .json, .py) or a directory of them")
    if root.is_dir():
        files = _files(root)
        files.sort(key=lambda p: (p.suffix != ".py", str(p)))   # modules first: they may register evaluators
        if not files:
            raise EvalError(f"{root} holds no suite files ({', '.join(SUITE_SUFFIXES)})")
    elif root.suffix in SUITE_SUFFIXES:
        files = [root]
    else:
        raise EvalError(f"{root} is not a suite file: use .yaml, .yml, .json or .py")

    cases: list[Case] = []
    dataset_evaluators: list = []
    report_evaluators: list = []
    single_name: str | None = None
    broken_files: dict[Path, str] = {}
    by_file: set[int] = set()                    # ids of the cases a broken file took down
    _DEFINED.clear()
    for f in files:
        prefix = str(f.relative_to(root).with_suffix("")) + "/" if root.is_dir() else ""
        try:
            name, file_cases, evs, revs, file_error = _load_file(f)
        except Exception as e:  # noqa: BLE001 - one broken file fails as a case of its own
            why = f"{type(e).__name__}: {_one_line(e)}"
            broken_files[f] = why
            cases.append(_broken(f"{prefix}(file)" if prefix else "(file)", f"{f.name} does not load: {why}", f.parent))
            by_file.add(id(cases[-1]))
            continue
        if file_error:
            broken_files[f] = file_error
            by_file.update(id(c) for c in file_cases)
        single_name = name
        for c in file_cases:
            c.name = prefix + (c.name or "")
            if root.is_dir():
                c.evaluators = list(c.evaluators) + evs   # a file's dataset evaluators: its own cases only
        if not root.is_dir():
            dataset_evaluators = evs
        report_evaluators.extend(revs)
        cases.extend(file_cases)

    for c in cases:
        task = getattr(c.inputs, "task", None)
        if isinstance(task, InlineTask) and not task.id:
            task.id = c.name                     # an inline task is known by its case's name
    by_file.update(_check_tasks_files(cases, broken_files))
    counts: dict[str, int] = {}
    for c in cases:
        counts[c.name or ""] = n = counts.get(c.name or "", 0) + 1
        if n > 1:
            c.inputs = EvalInputs.broken(f"duplicate case name {c.name!r}: case names must be unique", c.inputs.base_dir)
            c.name = f"{c.name} #{n}"
    suite_name = root.name if root.is_dir() else (single_name or root.stem)
    ds = SuiteDataset(name=suite_name, cases=cases, evaluators=dataset_evaluators, report_evaluators=report_evaluators)
    return Suite(name=suite_name, path=root, version=_version(root, files), dataset=ds, files=files,
                 evaluator_types=list(_DEFINED), broken_files=broken_files,
                 cases_of_broken_files={c.name or "" for c in cases if id(c) in by_file})


def _check_tasks_files(cases: list[Case], broken_files: dict[Path, str]) -> set[int]:
    """Load every tasks file a case names once: a file that does not load (truncated, missing) is a
    broken file, and its cases do not load (a task id missing from a good file fails at run time)."""
    from synth.tasks import load_tasks

    seen: dict[Path, str | None] = {}
    taken: set[int] = set()
    for c in cases:
        inputs = c.inputs
        if inputs.load_error or not isinstance(inputs.task, str):
            continue
        path = inputs.base_dir / (inputs.tasks or "tasks.jsonl")
        key = path.resolve()
        if key not in seen:
            try:
                load_tasks(path)
                seen[key] = None
            except Exception as e:  # noqa: BLE001 - whatever is wrong with it, the file is reported once
                seen[key] = why = f"{type(e).__name__}: {_one_line(e)}"
                broken_files[path] = why
        if seen[key] is not None:
            c.inputs = EvalInputs.broken(f"cannot read tasks from {path}: {seen[key]}", inputs.base_dir)
            taken.add(id(c))
    return taken


# ============================================================================ schema
def suite_schema(custom: list[type[Evaluator]] | tuple[type[Evaluator], ...] = ()) -> dict[str, Any]:
    """JSON Schema of a suite file: pydantic-evals' dataset schema with tooldojo's inputs, metadata and
    evaluators (plus ``custom`` ones); composites (AllOf, AnyOf, Not) take the same evaluator entries,
    recursively."""
    schema = SuiteDataset.model_json_schema_with_evaluators([*EVALUATORS, *custom])
    defs = schema.setdefault("$defs", {})
    items = defs["Case"]["properties"]["evaluators"]["items"]
    defs["EvaluatorEntry"] = items
    ref = {"$ref": "#/$defs/EvaluatorEntry"}
    defs["Case"]["properties"]["evaluators"]["items"] = ref
    if "evaluators" in schema["properties"]:
        schema["properties"]["evaluators"]["items"] = ref
    composites = {
        "AllOf": ({"type": "array", "minItems": 1, "items": ref}, "passes when every evaluator passes"),
        "AnyOf": ({"type": "array", "minItems": 1, "items": ref}, "passes when at least one evaluator passes"),
        "Not": (ref, "passes when its one evaluator fails"),
    }
    for name in composites:
        for key in [k for k in defs if k.endswith(f"_{name}")]:
            defs.pop(key)
    entries = [x for x in items["anyOf"] if not any(
        str(x.get("$ref", "")).endswith(f"_{n}") or x.get("const") == n for n in composites)]
    for name, (arg, doc) in composites.items():
        field_name = "evaluator" if name == "Not" else "evaluators"
        defs[f"short_spec_{name}"] = {"type": "object", "additionalProperties": False, "required": [name],
                                      "properties": {name: arg}, "description": doc}
        defs[f"spec_{name}"] = {"type": "object", "additionalProperties": False, "required": [name], "description": doc,
                                "properties": {name: {"type": "object", "additionalProperties": False,
                                                      "required": [field_name],
                                                      "properties": {field_name: arg,
                                                                     "evaluation_name": {"type": "string"}}}}}
        entries += [{"$ref": f"#/$defs/short_spec_{name}"}, {"$ref": f"#/$defs/spec_{name}"}]
    items["anyOf"] = entries
    schema["title"] = "tooldojo eval suite"
    return schema


def write_schema(directory: str | Path) -> Path:
    """Write ``evals_schema.json`` into ``directory``; returns its path. Evaluators defined by the
    Python modules of a suite in ``directory`` are in it too."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    custom = load_suite(d).evaluator_types if _files(d) else []
    out = d / SCHEMA_FILE
    out.write_text(json.dumps(suite_schema(custom), indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return out
