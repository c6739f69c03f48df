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
