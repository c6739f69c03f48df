"""The fast paths against slow references (the networkx manner: ``pagerank`` beside
``_pagerank_python``): the ranking maths, the link selection, and every backend's search."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scrubjay import ScrubJayConfig, ScrubJayMemory
from scrubjay.backends import EmbeddedBackend, ServerBackend, ServerMirrorBackend
from scrubjay.clients import http_client
from scrubjay.config import GraphConfig, LLMConfig, SearchConfig
from scrubjay.embedding import CallableEmbedder
from scrubjay.graph import EpisodicGraph
from scrubjay.linking import link_batch, link_batch_reference
from scrubjay.mirror import Rows
from scrubjay.ranking import (
    Query,
    partial_scores,
    rank_paper,
    rank_paper_reference,
    time_factors,
)
from scrubjay.scoring import relevance_key
from scrubjay.testing import FrozenClock
from scrubjay.types import MemoryRecord

T0 = 1_764_000_000.0
DIM = 24


def _unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(np.float32)


def _records(rng: np.random.Generator, n: int) -> list[MemoryRecord]:
    return [MemoryRecord(id=f"m{i:03d}", text=f"m{i:03d}", context="", label="factual",
                         pi=float(rng.uniform(0.05, 0.95)), tau_s=float(rng.uniform(600, 9e5)),
                         value=float(rng.uniform(0.2, 1.5)),
                         created_at_s=T0 + float(rng.uniform(0, 5e5)), metadata={},
                         annotation="", source="keyword") for i in range(n)]


def _graph(rng: np.random.Generator, ids: list[str]) -> EpisodicGraph:
    graph = EpisodicGraph(GraphConfig())
    for i, mid in enumerate(ids):
        graph.add_node(mid)
        for j in rng.choice(len(ids), size=3, replace=False).tolist():
            if j != i:
                w = float(rng.uniform(0.1, 0.9))
                graph.g.add_edge(mid, ids[j], weight=w, semantic=w, contextual=0.0,
                                 temporal=0.0)
    return graph


@pytest.mark.parametrize("seed", range(6))
def test_rank_paper_equals_its_reference(seed: int) -> None:
    """Eq. 5 with the Eq. 8 bonus, exhaustive (every memory, the widening bound) and not
    (a subset, neighbours outside read back), against the obvious double loop."""
    rng = np.random.default_rng(seed)
    n = 40 + 30 * seed
    records = _records(rng, n)
    rows = Rows.build(records, _unit(rng.standard_normal((n, DIM))),
                      _unit(rng.standard_normal((n, DIM))) * (seed % 2))
    graph = _graph(rng, rows.ids)
    weights = rng.dirichlet(np.ones(4))
    q = Query(e_q=_unit(rng.standard_normal(DIM)),
              c_q=_unit(rng.standard_normal(DIM)) * (seed % 2), weights=weights,
              k=int(rng.integers(1, 12)), t_q=T0 + 6e5)
    reference = rank_paper_reference(rows, q, neighbours=graph.neighbors, stale_ratio=0.05)
    index = {mid: i for i, mid in enumerate(rows.ids)}
    wdeg = np.array([sum(w for _, w in graph.neighbors(mid)) for mid in rows.ids])
    fast = rank_paper(rows, q, neighbours=graph.neighbors, stale_ratio=0.05, index=index,
                      wdeg=wdeg)
    assert [h.id for h in fast] == [h.id for h in reference]
    for f, r in zip(fast, reference, strict=True):
        assert f.score == pytest.approx(r.score, abs=1e-6)
        assert (f.graph, f.utility, f.stale) == (pytest.approx(r.graph, abs=1e-6),
                                                  pytest.approx(r.utility), r.stale)
    # not exhaustive: the candidates are a subset; their neighbours' S'U read from `outside`
    subset = np.sort(rng.choice(n, size=n // 2, replace=False))
    part = rows.take(subset)
    via_outside = rank_paper(part, q, neighbours=graph.neighbors, stale_ratio=0.05,
                             outside=lambda ids: rows.take([index[i] for i in ids]))
    expect = [h for h in reference if index[h.id] in set(subset.tolist())]
    got = {h.id: h.score for h in via_outside}
    for h in expect:  # any reference hit of the subset that makes its top k scores the same
        if h.id in got:
            assert got[h.id] == pytest.approx(h.score, abs=1e-6)


def test_partial_scores_are_eq5_without_the_graph() -> None:
    """S' = a*what + b*where + g*U, with hand-computed values: what 0.6, where 0.8 and
    U = 1 * exp(-0.5 * 3600 / 3600) = 0.60653 give 0.4*0.6 + 0.2*0.8 + 0.2*0.60653."""
    rec = MemoryRecord(id="a", text="a", context="c", label="factual", pi=0.5, tau_s=3600.0,
                       value=1.0, created_at_s=T0, metadata={}, annotation="", source="keyword")
    rows = Rows.build([rec], np.array([[0.6, 0.8]], np.float32),
                      np.array([[0.8, 0.6]], np.float32))
    what, where, u, s_prime = partial_scores(rows, np.array([1.0, 0.0], np.float32),
                                             np.array([1.0, 0.0], np.float32),
                                             np.array([0.4, 0.2, 0.2, 0.2]), T0 + 3600.0)
    assert float(what[0]) == pytest.approx(0.6) and float(where[0]) == pytest.approx(0.8)
    assert float(u[0]) == pytest.approx(np.exp(-0.5))
    assert float(s_prime[0]) == pytest.approx(0.24 + 0.16 + 0.2 * np.exp(-0.5))


@pytest.mark.parametrize("seed", range(4))
def test_link_batch_equals_its_reference(seed: int) -> None:
    """§3.4's selection over arrays (float32 selection, blocks, the batch's own triangle)
    links as the obvious per-memory loop over every earlier memory does."""
    rng = np.random.default_rng(100 + seed)
    cfg = GraphConfig(max_neighbors=3 + seed)
    n_old, n_new = 60, 45
    centres = rng.standard_normal((5, DIM))
    vecs = _unit(centres[rng.integers(0, 5, n_old + n_new)]
                 + 0.4 * rng.standard_normal((n_old + n_new, DIM)))
    where = np.zeros_like(vecs) if seed % 2 else _unit(rng.standard_normal(vecs.shape))
    times = T0 + np.sort(rng.uniform(0, 40_000, n_old + n_new))
    records = [MemoryRecord(id=f"n{i:03d}", text="x", context="", label="factual", pi=0.1,
                            tau_s=1e5, value=1.0, created_at_s=float(times[n_old + i]),
                            metadata={}, annotation="", source="keyword")
               for i in range(n_new)]
    old_ids = [f"o{i:03d}" for i in range(n_old)]

    def prepared() -> EpisodicGraph:
        graph = EpisodicGraph(cfg)
        link_batch_reference(
            [MemoryRecord(id=m, text="x", context="", label="factual", pi=0.1, tau_s=1e5,
                          value=1.0, created_at_s=float(times[i]), metadata={},
                          annotation="", source="keyword") for i, m in enumerate(old_ids)],
            vecs[:n_old], where[:n_old], graph, ([], np.zeros((0, DIM)), np.zeros((0, DIM)),
                                                 np.zeros(0)), cfg)
        return graph

    slow, fast = prepared(), prepared()
    link_batch_reference(records, vecs[n_old:], where[n_old:], slow,
                         (old_ids, vecs[:n_old], where[:n_old], times[:n_old]), cfg)
    # the fast path's existing candidates: what a mirror scan gives (every old memory)
    from scrubjay.backends.mirrored import MirroredBackend
    from scrubjay.mirror import Mirror

    backend = MirroredBackend.__new__(MirroredBackend)
    backend.config = ScrubJayConfig(graph=cfg)
    backend._mirror = Mirror(DIM)
    backend._mirror.append([MemoryRecord(id=m, text="x", context="", label="factual", pi=0.1,
                                         tau_s=1e5, value=1.0, created_at_s=float(times[i]),
                                         metadata={}, annotation="", source="keyword")
                            for i, m in enumerate(old_ids)], vecs[:n_old], where[:n_old])
    existing = backend._link_candidates_scan(records, vecs[n_old:], where[n_old:])
    link_batch(records, vecs[n_old:], where[n_old:], fast, existing, cfg)

    def edges(g: EpisodicGraph) -> dict[tuple[str, str], float]:
        return {tuple(sorted((u, v))): d["weight"] for u, v, d in g.g.edges(data=True)}

    assert edges(fast).keys() == edges(slow).keys()
    for key, w in edges(slow).items():
        assert edges(fast)[key] == pytest.approx(w, abs=1e-6)


# -------------------------------------------------------------------- every backend
def _corpus() -> tuple[list[dict[str, Any]], CallableEmbedder]:
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((8, DIM))
    lut: dict[str, np.ndarray] = {"": np.zeros(DIM, np.float32)}
    items = []
    for i in range(120):
        lut[f"m{i}"] = _unit(centres[i % 8] + 0.45 * rng.standard_normal(DIM))
        items.append({"text": f"m{i}", "context": ("", "c0", "c1")[i % 3],
                      "at": T0 + 97.0 * i, "id": f"m{i}"})
    for c in ("c0", "c1", "q0", "q1", "q2", "q3"):
        lut[c] = _unit(centres[hash(c) % 8] + 0.6 * rng.standard_normal(DIM))
    return items, CallableEmbedder(lambda ts: np.stack([lut[t] for t in ts]),
                                   name="callable:parity")


def _reference(mem: ScrubJayMemory, query: str, context: str, k: int,
               t_q: float) -> list[str]:
    """The exact answer over every memory, read back from the store."""
    backend = mem._backend
    rows = backend.rows([r.id for r in mem])
    emb = mem.embedder
    e_q, c_q = emb.embed([query], query=True)[0], emb.embed([context], query=True)[0]
    hits = mem.search(query, context=context, k=1, at=t_q)
    weights = np.array(hits[0].weights)
    if mem.config.search.ranking == "relevance":
        key = relevance_key(weights, rows.what @ e_q, rows.where @ c_q if c_q.any()
                            else np.zeros(len(rows)), rows.value, mem.config.decay.default_value)
        key = key * time_factors(rows, t_q, mem.config.decay.stale_ratio, mem.config.search)
        order = sorted(range(len(rows)), key=lambda i: (-key[i], rows.ids[i]))
        return [rows.ids[i] for i in order[:k]]
    graph = EpisodicGraph(mem.config.graph)
    for row in backend.store.iter_all(vectors=False):
        graph.loads(row.id, row.meta.get("sj_edges"))
    ref = rank_paper_reference(rows, Query(e_q=e_q, c_q=c_q, weights=weights, k=k, t_q=t_q),
                               neighbours=graph.neighbors,
                               stale_ratio=mem.config.decay.stale_ratio)
    return [h.id for h in ref]


@pytest.mark.server
@pytest.mark.parametrize("ranking", ["relevance", "paper"])
@pytest.mark.parametrize("kind", ["embedded", "server", "server_mirror"])
def test_every_backend_answers_as_the_exact_reference(kind: str, ranking: str,
                                                      tmp_path: Path, chroma_server) -> None:
    """The same memories behind each backend: every search equals the exact ranking over all
    memories (scan, HNSW candidates with bounds, Chroma's distances, deferred graph)."""
    items, emb = _corpus()
    search = SearchConfig(ranking=ranking, mirror=None if kind != "server_mirror" else True)
    cfg = ScrubJayConfig(llm=LLMConfig(annotate=False), search=search)
    clock = FrozenClock(T0 + 200_000)
    if kind == "embedded":
        mem = ScrubJayMemory(path=tmp_path / "store", embedder=emb, config=cfg, clock=clock)
        expected = EmbeddedBackend
    else:
        host, port = chroma_server
        mem = ScrubJayMemory(client=http_client(host, port), namespace=uuid.uuid4().hex[:10],
                             embedder=emb, config=cfg, clock=clock)
        expected = ServerMirrorBackend if kind == "server_mirror" else ServerBackend
    try:
        assert type(mem._backend) is expected
        mem.add_many(items)
        for query, context, k in (("q0", "", 5), ("q1", "c0", 7), ("q2", "c1", 3),
                                  ("q3", "", 10)):
            got = [h.id for h in mem.search(query, context=context, k=k, at=clock())]
            assert got == _reference(mem, query, context, k, clock())
    finally:
        mem.close()
