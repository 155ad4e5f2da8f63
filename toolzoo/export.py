"""Export a zoo as a Hugging Face dataset, and rebuild the zoo from it.

    out = export_dataset(zoo, "zoo_ds")     # zoo_ds/{hf,hf_domains,hf_categories}/  (save_to_disk)
                                            # zoo_ds/{tools,domains,categories}.parquet
                                            # zoo_ds/README.md  (dataset card)
    zoo2 = load_exported("zoo_ds")          # == zoo, tool for tool

One row per tool in `tools` (every ToolSpec field, plus `external`: whether it
sits outside a domain), one row per domain in `domains` (policy, source,
state_schema, failure_modes, and the names of its tools in order), one row per
category in `categories`.

Columns whose values are JSON documents of varying shape (parameters, returns,
errors, mcp, state_schema, failure_modes) use the `datasets.Json` feature
(Arrow's `arrow.json` extension type: JSON text underneath), so tools with
different parameter schemas share one column without breaking Arrow's type
inference. We write that JSON text ourselves with the standard library and read
it back the same way: `datasets`' own Json encoder goes through pandas' ujson,
which rounds floats to 10 digits and rejects integers above 2**64, and a round
trip must be exact.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from toolzoo.spec import Category, Domain, SpecError, ToolSpec, Zoo

# ToolSpec fields stored as plain Arrow strings / list of strings; every other field is a Json column.
STRING_FIELDS = {"name", "description", "effect", "category", "domain", "provenance", "function",
                 "implementation", "operator", "mcp_name"}
LIST_FIELDS = {"parents"}
DOMAIN_JSON = ("state_schema", "failure_modes")
TABLES = ("tools", "domains", "categories")
HF_DIRS = {"tools": "hf", "domains": "hf_domains", "categories": "hf_categories"}


def tool_json_fields() -> list[str]:
    return [f for f in ToolSpec.model_fields if f not in STRING_FIELDS and f not in LIST_FIELDS]


def _features(table: str) -> Any:
    from datasets import Features, Json, List, Value

    if table == "tools":
        cols: dict[str, Any] = {}
        for f in ToolSpec.model_fields:
            cols[f] = Value("string") if f in STRING_FIELDS else List(Value("string")) if f in LIST_FIELDS else Json()
        cols["external"] = Value("bool")
        return Features(cols)
    if table == "domains":
        return Features({
            "name": Value("string"), "category": Value("string"), "description": Value("string"),
            "policy": Value("string"), "source": Value("string"), "state_schema": Json(),
            "failure_modes": Json(), "tools": List(Value("string")),
        })
    return Features({"name": Value("string"), "description": Value("string")})


def _dump(value: Any, where: str) -> str | None:
    if value is None:
        return None
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise SpecError(f"{where}: not exportable as JSON: {e}") from None


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def tool_rows(zoo: Zoo) -> list[dict[str, Any]]:
    rows = []
    external = {id(t) for t in zoo.external}
    for t in zoo.tools:
        d = t.model_dump(mode="json")
        row = {}
        for f in ToolSpec.model_fields:
            row[f] = d[f] if f in STRING_FIELDS or f in LIST_FIELDS else _dump(d[f], f"tool {t.name} {f}")
        row["external"] = id(t) in external
        rows.append(row)
    return rows


def domain_rows(zoo: Zoo) -> list[dict[str, Any]]:
    rows = []
    for d in zoo.domains:
        dd = d.model_dump(mode="json")
        rows.append({
            "name": d.name, "category": d.category, "description": d.description, "policy": d.policy,
            "source": d.source, **{k: _dump(dd[k], f"domain {d.name} {k}") for k in DOMAIN_JSON},
            "tools": [t.name for t in d.tools],
        })
    return rows


def category_rows(zoo: Zoo) -> list[dict[str, Any]]:
    return [{"name": c.name, "description": c.description} for c in zoo.categories]


def _dataset(rows: list[dict[str, Any]], table: str) -> Any:
    """A Dataset over an Arrow table built directly (JSON text is already encoded, exactly)."""
    import pyarrow as pa
    from datasets import Dataset, DatasetInfo
    from datasets.table import InMemoryTable

    features = _features(table)
    schema = features.arrow_schema
    cols = {name: pa.array([r[name] for r in rows], type=schema.field(name).type) for name in features}
    arrow = pa.Table.from_pydict(cols, schema=schema)
    return Dataset(InMemoryTable(arrow), info=DatasetInfo(features=features, description=f"tooldojo zoo: {table}"))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    import datasets

    was = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was:
            datasets.enable_progress_bars()


def export_dataset(zoo: Zoo, out_dir: str | Path) -> Path:
    """Write the zoo as datasets (save_to_disk + parquet) and a dataset card; returns out_dir."""
    zoo.check_names()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = {"tools": tool_rows(zoo), "domains": domain_rows(zoo), "categories": category_rows(zoo)}
    nbytes: dict[str, int] = {}
    with _quiet():
        for table in TABLES:
            ds = _dataset(rows[table], table)
            nbytes[table] = int(ds.data.nbytes)
            ds.save_to_disk(str(out / HF_DIRS[table]))
            ds.to_parquet(str(out / f"{table}.parquet"))
    (out / "README.md").write_text(dataset_card(zoo, nbytes))
    return out


# ------------------------------------------------------------------ loading back
def _read_rows(out: Path, table: str, source: str) -> list[dict[str, Any]]:
    if source == "parquet":
        import pyarrow.parquet as pq

        f = out / f"{table}.parquet"
        if not f.exists():
            raise SpecError(f"no exported zoo at {out}: {f.name} is missing")
        return pq.read_table(f).to_pylist()
    if source == "hf":
        import datasets

        d = out / HF_DIRS[table]
        if not d.exists():
            raise SpecError(f"no exported zoo at {out}: {d.name}/ is missing")
        state = json.loads((d / "state.json").read_text()) if (d / "state.json").exists() else {}
        if state.get("_data_files") == []:
            return []  # datasets 5.2.0 saves an empty dataset with no shards, then fails to load it
        with _quiet():
            ds = datasets.load_from_disk(str(d))
        return ds.with_format("arrow")[:].to_pylist()
    raise ValueError(f"source must be 'hf' or 'parquet', not {source!r}")


def tool_from_row(row: dict[str, Any]) -> ToolSpec:
    data = {f: (row[f] if f in STRING_FIELDS or f in LIST_FIELDS else _load(row[f]))
            for f in ToolSpec.model_fields if f in row}
    return ToolSpec.model_validate(data)


def load_exported(out_dir: str | Path, source: str = "hf") -> Zoo:
    """Rebuild the zoo from an export: source='hf' (save_to_disk copies) or 'parquet'."""
    out = Path(out_dir)
    tools = [(tool_from_row(r), bool(r["external"])) for r in _read_rows(out, "tools", source)]
    by_domain: dict[str, list[ToolSpec]] = {}
    for t, ext in tools:
        if not ext:
            by_domain.setdefault(t.domain, []).append(t)
    domains = []
    for r in _read_rows(out, "domains", source):
        own = {t.name: t for t in by_domain.pop(r["name"], [])}
        missing = [n for n in r["tools"] if n not in own]
        if missing or len(own) != len(r["tools"]):
            raise SpecError(f"export at {out}: domain {r['name']} lists tools {r['tools']} but the tools table has {sorted(own)}")
        domains.append(Domain(
            name=r["name"], category=r["category"], description=r["description"], policy=r["policy"],
            source=r["source"], state_schema=_load(r["state_schema"]),
            failure_modes=_load(r["failure_modes"]), tools=[own[n] for n in r["tools"]],
        ))
    if by_domain:
        raise SpecError(f"export at {out}: tools of unknown domains {sorted(by_domain)}")
    categories = [Category(**r) for r in _read_rows(out, "categories", source)]
    return Zoo(categories=categories, domains=domains, external=[t for t, ext in tools if ext])


def is_export(path: str | Path) -> bool:
    p = Path(path)
    return (p / "tools.parquet").exists() and (p / "domains.parquet").exists()


# ------------------------------------------------------------------ dataset card
def _count_table(title: str, counts: Counter[str]) -> str:
    lines = [f"| {title} | tools |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(lines)


COLUMN_DOCS = {
    "name": "tool name (OpenAI function name rules)",
    "description": "what the agent reads about the tool",
    "parameters": "Json: JSON Schema (type object) of the arguments",
    "returns": "Json: JSON Schema of the result, or null",
    "errors": "Json: declared error code -> meaning",
    "effect": "`read` or `write`",
    "category": "top-level category (see the `categories` config)",
    "domain": "domain the tool belongs to (see the `domains` config)",
    "provenance": "`seed` (hand-written), `evolved`, `mcp` (imported) or `llm`",
    "function": "name of the implementing function in the domain source",
    "implementation": "source of the function for tools not in the domain file (evolved tools)",
    "parents": "tools this one was evolved from",
    "operator": "evolution operator that made it",
    "mcp": "Json: where an imported MCP tool lives (command or url), or null",
    "mcp_name": "an imported MCP tool's name on its server (called by it; `name` is the model's), or null",
    "external": "true for tools outside any domain (MCP imports)",
}


def dataset_card(zoo: Zoo, nbytes: dict[str, int] | None = None) -> str:
    """The README.md of an export: YAML header (configs, dataset_info, counts) and a schema description."""
    tools = zoo.tools
    per_cat = Counter(t.category for t in tools)
    per_dom = Counter(t.domain for t in tools)
    per_prov = Counter(t.provenance for t in tools)
    per_eff = Counter(t.effect for t in tools)
    n_rows = {"tools": len(tools), "domains": len(zoo.domains), "categories": len(zoo.categories)}
    header = {
        "pretty_name": "tooldojo tool zoo",
        "tags": ["tool-use", "function-calling", "agents", "synthetic"],
        "configs": [
            {"config_name": t, "data_files": [{"split": "train", "path": f"{t}.parquet"}], **({"default": True} if t == "tools" else {})}
            for t in TABLES
        ],
        "dataset_info": [
            {"config_name": t, "features": _features(t)._to_yaml_list(),
             "splits": [{"name": "train", "num_bytes": (nbytes or {}).get(t, 0), "num_examples": n_rows[t]}],
             "dataset_size": (nbytes or {}).get(t, 0)}
            for t in TABLES
        ],
        "tooldojo": {
            "tools": len(tools), "domains": len(zoo.domains), "categories": len(per_cat),
            "per_category": dict(sorted(per_cat.items())), "per_domain": dict(sorted(per_dom.items())),
            "per_provenance": dict(sorted(per_prov.items())), "per_effect": dict(sorted(per_eff.items())),
        },
    }
    cols = "\n".join(f"| `{c}` | {COLUMN_DOCS.get(c, '')} |" for c in _features("tools"))
    body = f"""# tooldojo tool zoo

{len(tools)} tools in {len(zoo.domains)} domains and {len(per_cat)} categories
({', '.join(f'{v} {k}' for k, v in sorted(per_prov.items()))}; {', '.join(f'{v} {k}' for k, v in sorted(per_eff.items()))}).
Each zoo tool is executable: its domain's `source` (stdlib-only Python) seeds a state and implements the
tools, and `toolzoo.runtime.bundle` runs them inside a tooldojo sandbox.

## Configs

- `tools` (default): one row per tool.
- `domains`: one row per domain: `name`, `category`, `description`, `policy` (rules the agent must follow),
  `source`, `state_schema` (Json: JSON Schema of the seeded state), `failure_modes` (Json: list of injected
  failures), `tools` (names of its tools, in order).
- `categories`: `name`, `description`.

Rebuild the zoo with `toolzoo.export.load_exported(path)` (from the `save_to_disk` copies in `hf*/`) or
`load_exported(path, source="parquet")`.

## Schema of `tools`

| column | meaning |
|---|---|
{cols}

Json columns use the `datasets.Json` feature (Arrow `arrow.json` extension, JSON text underneath), so
heterogeneous schemas share one column.

## Counts

{_count_table("category", per_cat)}

{_count_table("domain", per_dom)}

{_count_table("provenance", per_prov)}

{_count_table("effect", per_eff)}
"""
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n\n" + body
