"""export_dataset / load_exported: exact round trips, Json columns, the dataset card, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("datasets")

import pyarrow.parquet as pq  # noqa: E402

from toolzoo.domains import seed_zoo  # noqa: E402
from toolzoo.export import export_dataset, load_exported  # noqa: E402
from toolzoo.spec import Domain, FailureMode, McpSource, ToolSpec, Zoo  # noqa: E402

DOJO = str(Path(sys.executable).with_name("dojo"))


def hetero_zoo(big: int = 2**70) -> Zoo:
    """Tools whose JSON-valued fields differ in shape, nesting and scalar types from row to row."""
    tools = [
        ToolSpec(name="plain", description="No arguments.", domain="d1", category="c1", function="plain"),
        ToolSpec(
            name="nested", description="Deep schema, floats and big integers.", domain="d1", category="c1",
            function="nested", effect="write",
            parameters={
                "type": "object",
                "properties": {
                    "items": {"type": "array", "minItems": 1, "items": {
                        "type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]-\\d+$"},
                                                         "qty": {"type": "integer", "maximum": big}},
                        "required": ["sku"]}},
                    "ratio": {"type": "number", "minimum": 1 / 3, "exclusiveMaximum": 1e-300 + 1},
                    "mode": {"enum": ["a", 1, None, True, 2.5]},
                    "either": {"oneOf": [{"type": "string"}, {"type": "null"}]},
                    "ünï": {"type": "string", "description": "naïve — 東京 / \"quoted\" \\ back"},
                },
                "required": ["items"], "additionalProperties": False,
            },
            returns={"type": "array", "items": {"type": "object"}},
            errors={"out_of_stock": "no stock", "e2": "ünïcode"},
        ),
        ToolSpec(
            name="evolved_one", description="Evolved.", domain="d1", category="c1", function="evolved_one",
            provenance="evolved", implementation="def evolved_one(state):\n    return {'x': 1}\n",
            parents=["plain", "nested"], operator="compose", returns={"type": "string"},
        ),
    ]
    other = [ToolSpec(name="solo", description="Other domain.", domain="d2", category="c2", function="solo",
                      parameters={"type": "object", "properties": {"flag": {"type": "boolean", "default": False}}})]
    mcp = [
        ToolSpec.from_mcp({"name": "remote", "description": "Imported.", "inputSchema": {
            "type": "object", "properties": {"q": {"type": "string"}}}, "outputSchema": {"type": "object"}},
            McpSource(url="http://127.0.0.1:1/mcp", server_name="srv"), domain="srv", category="c2"),
        ToolSpec.from_mcp({"name": "remote2", "description": "Imported, stdio.", "annotations": {"readOnlyHint": True}},
                          McpSource(command=["python", "-m", "x"]), domain="d1"),
    ]
    return Zoo(
        domains=[
            Domain(name="d1", category="c1", description="one", policy="rule 1", source="def seed(rng):\n    return {}\n",
                   state_schema={"type": "object", "properties": {"n": {"type": "integer"}}}, tools=tools,
                   failure_modes=[FailureMode(kind="timeout", tools=["nested"], message="slow"),
                                  FailureMode(kind="partial")]),
            Domain(name="d2", category="c2", description="two", policy="", source="", tools=other),
        ],
        external=mcp,
    )


def assert_same(a: Zoo, b: Zoo) -> None:
    assert [t.name for t in a.tools] == [t.name for t in b.tools]
    for x, y in zip(a.tools, b.tools, strict=True):
        assert x == y, x.name
        assert x.model_dump_json() == y.model_dump_json(), x.name
    assert [d.name for d in a.domains] == [d.name for d in b.domains]
    for x, y in zip(a.domains, b.domains, strict=True):
        assert x == y, x.name
    assert a.categories == b.categories
    assert [t.name for t in a.external] == [t.name for t in b.external]
    assert a == b


@pytest.mark.parametrize("make", [seed_zoo, hetero_zoo], ids=["seed", "hetero"])
@pytest.mark.parametrize("source", ["hf", "parquet"])
def test_round_trip_identical(tmp_path: Path, make, source: str) -> None:
    zoo = make()
    out = export_dataset(zoo, tmp_path / "ds")
    assert (out / "hf").is_dir() and (out / "tools.parquet").exists() and (out / "domains.parquet").exists()
    assert_same(zoo, load_exported(out, source=source))


def test_json_columns(tmp_path: Path) -> None:
    import datasets

    # datasets decodes Json cells with pandas' ujson, which rejects integers above 2**64
    # (load_exported does not use it); keep this zoo's integers small for the datasets-side checks.
    zoo = hetero_zoo(big=10**12)
    out = export_dataset(zoo, tmp_path / "ds")
    ds = datasets.load_from_disk(str(out / "hf"))
    for col in ("parameters", "returns", "errors", "mcp"):
        assert isinstance(ds.features[col], datasets.Json), (col, ds.features[col])
    assert isinstance(ds.features["parents"], datasets.List)
    assert ds.num_rows == len(zoo.tools)
    # Decoded by datasets itself, heterogeneous shapes side by side.
    rows = {r["name"]: r for r in ds}
    assert rows["plain"]["returns"] is None and rows["plain"]["errors"] == {}
    assert rows["nested"]["parameters"]["properties"]["items"]["items"]["required"] == ["sku"]
    assert rows["nested"]["parameters"]["properties"]["mode"]["enum"] == ["a", 1, None, True, 2.5]
    assert rows["remote"]["mcp"]["url"] == "http://127.0.0.1:1/mcp" and rows["plain"]["mcp"] is None
    assert rows["remote"]["external"] and not rows["nested"]["external"]
    assert rows["evolved_one"]["parents"] == ["plain", "nested"]
    # The parquet copy carries the Arrow JSON extension type and the exact JSON text.
    table = pq.read_table(out / "tools.parquet")
    assert "json" in str(table.schema.field("parameters").type)
    text = table.column("parameters").to_pylist()[1]
    assert json.loads(text)["properties"]["ratio"]["minimum"] == 1 / 3
    assert json.loads(text)["properties"]["items"]["items"]["properties"]["qty"]["maximum"] == 10**12
    assert text == json.dumps(zoo.tools[1].parameters, ensure_ascii=False)
    dom = datasets.load_from_disk(str(out / "hf_domains"))
    assert isinstance(dom.features["state_schema"], datasets.Json)
    assert dom[0]["failure_modes"][0] == {"kind": "timeout", "tools": ["nested"], "message": "slow"}
    # The exported folder also loads as a plain Hugging Face dataset, per the card's configs.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    loaded = datasets.load_dataset(str(out), "domains", split="train", cache_dir=str(tmp_path / "cache"))
    assert loaded.num_rows == 2 and loaded[0]["policy"] == "rule 1"


def _card(out: Path) -> tuple[dict, str]:
    text = (out / "README.md").read_text()
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


def test_card_has_counts(tmp_path: Path) -> None:
    zoo = seed_zoo()
    out = export_dataset(zoo, tmp_path / "ds")
    meta, body = _card(out)
    counts = meta["tooldojo"]
    assert counts["tools"] == len(zoo.tools)
    assert counts["domains"] == len(zoo.domains)
    for d in zoo.domains:
        assert counts["per_domain"][d.name] == len(d.tools)
        assert f"| {d.name} | {len(d.tools)} |" in body
    per_cat: dict[str, int] = {}
    for t in zoo.tools:
        per_cat[t.category] = per_cat.get(t.category, 0) + 1
    assert counts["per_category"] == per_cat
    assert counts["per_provenance"] == {"seed": len(zoo.tools)}
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert set(configs) == {"tools", "domains", "categories"} and configs["tools"]["default"]
    info = {i["config_name"]: i for i in meta["dataset_info"]}
    assert info["tools"]["splits"][0]["num_examples"] == len(zoo.tools)
    assert {"name": "parameters", "dtype": "json"} in info["tools"]["features"]
    assert "## Schema of `tools`" in body and "`parameters`" in body


def dojo(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([DOJO, *args], capture_output=True, text=True, timeout=300, env=env)


def test_cli_export_and_stats_plot(tmp_path: Path) -> None:
    zoo = seed_zoo()
    out = tmp_path / "export"
    r = dojo("zoo", "export", "seed", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert_same(zoo, load_exported(out))
    assert_same(zoo, load_exported(out, source="parquet"))

    png = tmp_path / "map.png"
    r = dojo("zoo", "stats", "seed", "--plot", str(png), "--json")
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout.strip().splitlines()[-1])
    assert stats["tools"] == len(zoo.tools) and stats["domains_total"] == len(zoo.domains)
    assert 0.0 < stats["diversity"]["mean_distance"] < 2.0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000

    # Stats of a saved zoo and of the export agree; the table output names every domain.
    saved = zoo.save(tmp_path / "saved")
    r = dojo("zoo", "stats", str(saved))
    assert r.returncode == 0, r.stderr
    for d in zoo.domains:
        assert d.name in r.stdout
    assert "diversity" in r.stdout
    r = dojo("zoo", "stats", str(out), "--json")
    assert r.returncode == 0 and json.loads(r.stdout.strip().splitlines()[-1])["per_domain"] == stats["per_domain"]


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    r = dojo("zoo", "stats", str(tmp_path / "nowhere"))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
