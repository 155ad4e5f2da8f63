"""The files a user hands the CLI: configs (YAML) and datasets (JSONL) read with one-line errors that
name the file and the line, whatever is wrong (unreadable, not UTF-8, not YAML, a bad record, no
record at all), and output folders checked before the work rather than after it.

Every error is an :class:`InputFileError` (a ``ValueError``: ``one_line_errors`` prints it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

T = TypeVar("T")


class InputFileError(ValueError):
    """A file given to a command cannot be used; the message names it (and the line, where one is at fault)."""


def read_text(path: str | Path, what: str = "file") -> str:
    """The file's text; it must be UTF-8."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise InputFileError(f"cannot read the {what} {p}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputFileError(f"{p} is not UTF-8 text: byte 0x{data[e.start]:02x} on line {line}") from None


def load_yaml(path: str | Path, what: str = "config") -> Any:
    """The YAML document in the file (None when it is empty)."""
    import yaml

    p = Path(path)
    text = read_text(p, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise InputFileError(f"{p} is not valid YAML:{where}: {one_line(problem)}") from None


def one_line(text: Any) -> str:
    return " ".join(str(text).split())


def validation_reason(e: ValidationError) -> str:
    """The first problem of a pydantic error as ``field: reason`` (JSON syntax errors without their
    "at line 1 column N", which counts within one record)."""
    first = e.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"])
    msg = re.sub(r" at line \d+ column \d+$", "", first["msg"])
    return one_line(f"{where}: {msg}" if where else msg)


def read_jsonl(path: str | Path, parse: Callable[[str], T], what: str, *, allow_empty: bool = False) -> list[T]:
    """One record per non-blank line, each through `parse` (e.g. ``Task.model_validate_json``); an error
    names the file and its line (``FILE:LINE: reason``). `what` is the records' plural ("tasks"): with none,
    "no tasks in FILE"."""
    p = Path(path)
    out: list[T] = []
    for n, line in enumerate(read_text(p, what).splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(parse(line))
        except ValidationError as e:
            raise InputFileError(f"{p}:{n}: {validation_reason(e)}") from None
        except ValueError as e:
            raise InputFileError(f"{p}:{n}: {one_line(e)}") from None
    if not out and not allow_empty:
        raise InputFileError(f"no {what} in {p}")
    return out


def check_out_dir(path: str | Path, flag: str = "--out") -> Path:
    """`path` can become (or already is) a folder this process may write into; checked before any work,
    and nothing is created."""
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise InputFileError(f"{flag} {p} is a file, not a folder")
    existing = next(a for a in (p, *p.absolute().parents) if a.exists())
    if not existing.is_dir():
        raise InputFileError(f"{flag} {p}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputFileError(f"{flag} {p}: {existing} is not writable")
    return p
