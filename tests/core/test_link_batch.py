"""Batch linking (numpy over blocks of the batch) against one ``add`` at a time (the reference).

One ``add`` links a memory to the strongest ``4 * max_neighbors`` candidates of the whole store
under the degree caps; on the exact-scan path (stores up to ``SearchConfig.scan_max``)
``add_many`` must build the same graph, whatever the batch and block sizes. (Above
``scan_max`` the existing candidates come from Chroma's approximate index, so a batch, whose
earlier items are scanned exactly, may link differently from single adds by design.)
"""

from __future__ import annotations

import numpy as np
import pytest
from scrubjay import ScrubJayConfig, ScrubJayMemory, SearchConfig
from scrubjay.config import GraphConfig, LLMConfig
from scrubjay.embedding import CallableEmbedder

T0 = 1_764_000_000.0
N = 150


def _corpus() -> tuple[list[dict[str, object]], CallableEmbedder]:
    """Clustered random vectors (no exact ties) and irregular times within Delta_T."""
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((6, 24))
    lut: dict[str, np.ndarray] = {"": np.zeros(24, np.float32)}
    items = []
    for i in range(N):
        v = centres[i % 6] + 0.35 * rng.standard_normal(24)
        lut[f"m{i}"] = (v / np.linalg.norm(v)).astype(np.float32)
        items.append({"text": f"m{i}", "context": ("", "c0", "c1")[i % 3],
                      "at": T0 + float(np.round(rng.uniform(0, 20_000))) + i / 7, "id": f"m{i}"})
    for c in ("c0", "c1"):
        v = centres[int(c[1])] + 0.5 * rng.standard_normal(24)
        lut[c] = (v / np.linalg.norm(v)).astype(np.float32)
    emb = CallableEmbedder(lambda ts: np.stack([lut[t] for t in ts]), name="callable:link")
    return items, emb


def _edges(batch: int) -> dict[tuple[str, str], float]:
    """The graph after adding the corpus in batches of ``batch``."""
    items, emb = _corpus()
    cfg = ScrubJayConfig(llm=LLMConfig(annotate=False), graph=GraphConfig(max_neighbors=4),
                         search=SearchConfig(scan_max=None))
    mem = ScrubJayMemory(embedder=emb, config=cfg, clock=lambda: T0 + 30_000)
    try:
        for lo in range(0, N, batch):
            mem.add_many(items[lo:lo + batch])
        g = mem.graph.g
        assert max(d for _, d in g.degree()) <= 4  # the degree cap holds
        return {tuple(sorted((u, v))): d["weight"] for u, v, d in g.edges(data=True)}
    finally:
        mem.close()


@pytest.mark.parametrize("batch", [N, 37])
def test_batch_linking_equals_one_add_at_a_time(batch: int) -> None:
    reference = _edges(1)
    assert len(reference) > N  # a real graph, with evictions under the cap of 4
    got = _edges(batch)
    assert got.keys() == reference.keys()
    # (a batch computes its own similarities in float64, a single add in float32)
    assert all(abs(got[k] - reference[k]) < 1e-6 for k in got)


def test_an_item_whose_first_candidates_are_full_links_to_later_ones() -> None:
    """Batch linking hands each item its candidates in two slices (the first
    ``2 * max_neighbors``, converted to lists, then the rest only when needed): an item whose
    strongest candidates all refuse it (full, with stronger edges) must still reach the
    weaker candidates ranked after them."""
    dim, hour = 12, 3600.0
    basis = np.eye(dim, dtype=np.float32)

    def unit(v: np.ndarray) -> np.ndarray:
        return (v / np.linalg.norm(v)).astype(np.float32)

    lut = {"": np.zeros(dim, np.float32), "ctx": basis[1], "x": basis[0]}
    for i in range(6):  # near x; two triangles (a day apart) of edges ~1.0 in one context
        lut[f"a{i}"] = unit(basis[0] + 0.05 * basis[5 + i])
    lut["c0"] = unit(basis[0] + 0.8 * basis[2])  # cos 0.78 to x, 0.61 to each other
    lut["c1"] = unit(basis[0] + 0.8 * basis[3])
    emb = CallableEmbedder(lambda ts: np.stack([lut[t] for t in ts]), name="callable:full")
    cfg = ScrubJayConfig(llm=LLMConfig(annotate=False), graph=GraphConfig(max_neighbors=2))
    mem = ScrubJayMemory(embedder=emb, config=cfg, clock=lambda: T0 + 30 * hour)
    try:
        for lo, at in ((0, T0), (3, T0 + 25 * hour)):
            mem.add_many([{"text": f"a{i}", "context": "ctx", "at": at, "id": f"a{i}"}
                          for i in range(lo, lo + 3)])
        mem.add_many([{"text": f"c{i}", "at": T0 - 30 * hour, "id": f"c{i}"} for i in range(2)])
        g = mem.graph
        assert all(g.degree(f"a{i}") == 2 for i in range(6))  # both triangles are full
        assert g.degree("c0") == g.degree("c1") == 1  # c0 -- c1 (same time), room left
        mem.add_many([{"text": "x", "at": T0 + 12.5 * hour, "id": "x"}])
        # x ranks the six a's first (0.4 * 0.999, refused: their edges weigh ~1.0), the c's
        # after them (0.4 * 0.78), beyond the first slice of 2 * max_neighbors = 4
        assert {j for j, _ in g.neighbors("x")} == {"c0", "c1"}
    finally:
        mem.close()
