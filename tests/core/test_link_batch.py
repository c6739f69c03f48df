"""Batch linking (numpy over blocks of the batch) against one ``add`` at a time (the reference).

One ``add`` links a memory to the strongest ``4 * max_neighbors`` candidates of the whole store
under the degree caps; on the exact-scan path (stores up to ``SearchConfig.scan_max``)
``add_many`` must build the same graph, whatever the batch and block sizes. (Above
``scan_max`` the existing candidates come from Chroma's approximate index, so a batch, whose
earlier items are scanned exactly, may link differently from single adds by design.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scrubjay.graph as graph_module
from scrubjay import ScrubJayConfig, ScrubJayMemory, SearchConfig
from scrubjay.config import GraphConfig, LLMConfig
from scrubjay.embedding import CallableEmbedder
from scrubjay.graph import EpisodicGraph, strongest_columns

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


def _ranked_calls(rng: np.random.Generator, n_nodes: int, n_new: int, cap: int
                  ) -> tuple[EpisodicGraph, list[tuple[str, list[str], list[float]]]]:
    """A random degree-capped graph and a sequence of link_ranked calls for new nodes, with
    weights close together (so that full nodes refuse most candidates and evictions free
    nodes that later calls, or later candidates of the same call, rank)."""
    g = EpisodicGraph(GraphConfig(max_neighbors=cap))
    nodes = [f"n{i}" for i in range(n_nodes)]
    for i, node in enumerate(nodes):
        others = [nodes[j] for j in rng.permutation(i)[:2 * cap]]
        weights = sorted(rng.uniform(0.3, 0.6, len(others)).round(3).tolist(), reverse=True)
        g.link_ranked(node, others, weights, weights, [0.0] * len(weights),
                      [0.0] * len(weights))
    calls = []
    for i in range(n_new):
        pool = nodes + [f"x{j}" for j in range(i)]
        others = [pool[j] for j in rng.permutation(len(pool))[:4 * cap]]
        weights = sorted(rng.uniform(0.3, 0.6, len(others)).round(3).tolist(), reverse=True)
        calls.append((f"x{i}", others, weights))
    return g, calls


def _adjacency(g: EpisodicGraph) -> dict[str, dict[str, float]]:
    return {u: {v: d["weight"] for v, d in nbrs.items()} for u, nbrs in g.g.adjacency()}


@pytest.mark.parametrize("seed", range(6))
def test_link_ranked_passing_over_refusing_nodes_builds_the_same_graph(seed: int) -> None:
    """The ``floor`` (and ``weakest``) caches of a batch let link_ranked pass over the full
    nodes that would refuse a candidate edge; the graph must be the one the plain rule builds
    (every candidate looked at, nothing cached)."""
    rng = np.random.default_rng(seed)
    cap = int(rng.integers(1, 5))
    g, calls = _ranked_calls(rng, 40, 60, cap)
    ref = EpisodicGraph(g.cfg)
    ref.g = g.g.copy()
    weakest: dict[str, tuple[float, str]] = {}
    floor: dict[str, float] = {}
    for node, others, w in calls:
        zeros = [0.0] * len(w)
        got = g.link_ranked(node, others, w, w, zeros, zeros, weakest, floor)
        want = ref.link_ranked(node, others, w, w, zeros, zeros)
        assert got == want  # the same changed nodes, call by call
    assert floor  # the caches were used
    assert _adjacency(g) == _adjacency(ref)


def test_a_node_freed_by_an_eviction_is_not_passed_over_later_in_the_call() -> None:
    """A full node, known to refuse weak edges, loses an edge to an eviction made earlier in
    the same call: it has room now, and the call must link to it."""
    g = EpisodicGraph(GraphConfig(max_neighbors=2))
    for u, v, w in (("a", "b", 0.5), ("a", "c", 0.7), ("b", "d", 0.8)):
        for node in (u, v):
            g.add_node(node)
        g.link_ranked(u, [v], [w], [w], [0.0], [0.0])
    assert g.degree("a") == g.degree("b") == 2  # both full; a -- b (0.5) is the weakest
    weakest: dict[str, tuple[float, str]] = {}
    floor: dict[str, float] = {}
    g.link_ranked("x", ["a"], [0.4], [0.4], [0.0], [0.0], weakest, floor)  # a refuses
    assert floor == {"a": 0.5} and g.degree("x") == 0
    # y replaces b's weakest edge (to a), then a has room for y's weaker edge
    g.link_ranked("y", ["b", "a"], [0.6, 0.45], [0.6, 0.45], [0.0] * 2, [0.0] * 2, weakest,
                  floor)
    assert {j for j, _ in g.neighbors("y")} == {"a", "b"}
    assert "a" not in floor


def _selection_case(rng: np.random.Generator) -> tuple[Any, ...]:
    n, rows, dim = int(rng.integers(30, 700)), int(rng.integers(1, 16)), 16
    width = int(rng.integers(1, min(n - 1, 24) + 1))
    centres = rng.standard_normal((5, dim))

    def vectors(m: int) -> np.ndarray:
        v = centres[rng.integers(0, 5, m)] + rng.uniform(0.2, 1.5) * rng.standard_normal((m, dim))
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    sim_s = vectors(rows) @ vectors(n).T
    sim_c = vectors(rows) @ vectors(n).T if rng.random() < 0.5 else None
    scale = float(rng.choice([10.0, 1e3, 1e5]))
    t_old = rng.uniform(0, scale, n)
    if rng.random() < 0.3:  # many equal times
        t_old = np.round(t_old / (scale / 10)) * (scale / 10)
    cfg = GraphConfig(theta_semantic=float(rng.choice([0.75, 0.3, 0.95, -0.2, 0.0])),
                      theta_contextual=float(rng.choice([0.75, 0.5, -0.5])),
                      lambda_temporal_per_s=float(rng.choice([1 / 3600, 0.0, 1e-2])),
                      delta_temporal_s=float(rng.choice([86_400.0, 50.0, 0.0])),
                      weight_semantic=float(rng.choice([0.4, 0.0])),
                      weight_temporal=float(rng.choice([0.3, 0.0])))
    return (sim_s, sim_c, t_old.astype(np.float32),
            rng.uniform(0, scale, rows).astype(np.float32), cfg, width)


def test_strongest_columns_are_those_of_a_full_selection(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """The link scan computes e_ij only for the columns over a threshold and the nearest in
    time; the weights it keeps must be the ``width`` largest of the whole row (the columns
    may differ only between equal weights), with thresholds on and off, equal times, no
    temporal term."""
    widths: list[int] = []
    real = graph_module.edge_weight_from_similarity

    def spy(sim_s: np.ndarray, *args: Any) -> np.ndarray:
        widths.append(sim_s.shape[1])
        return real(sim_s, *args)

    monkeypatch.setattr(graph_module, "edge_weight_from_similarity", spy)
    rng = np.random.default_rng(11)
    narrow = 0
    for _ in range(300):
        sim_s, sim_c, t_old, t_new, cfg, width = _selection_case(rng)
        widths.clear()
        cols = strongest_columns(sim_s, sim_c, t_old, t_new, np.argsort(t_old, kind="stable"),
                                 cfg, width)
        narrow += widths[0] < sim_s.shape[1]
        e = real(sim_s, sim_c, np.abs(t_old[None, :] - t_new[:, None]), cfg)
        assert cols.shape == (len(sim_s), width)
        for i in range(len(sim_s)):
            assert len(set(cols[i].tolist())) == width
            np.testing.assert_array_equal(np.sort(e[i, cols[i]]), np.sort(e[i])[-width:])
    assert narrow > 100  # most cases computed e on the candidates only


@pytest.mark.parametrize("seed", range(4))
def test_rank_orders_by_weight_then_id_with_no_candidate_last(seed: int) -> None:
    """The batch's candidate order: what ``np.lexsort`` by ``(-e, id)`` gives, on rows with
    ties between finite weights (few values, so that many tie) and rows without."""
    from scrubjay.linking import rank_columns as _rank

    rng = np.random.default_rng(seed)
    e = rng.choice([0.2, 0.3, 0.45, -np.inf], size=(40, 12)) if seed % 2 \
        else rng.uniform(0.0, 1.0, (40, 12))
    e[rng.random(e.shape) < 0.2] = -np.inf  # padding: no candidate
    ids = np.array([[f"m{rng.integers(1000)}" for _ in range(12)] for _ in range(40)],
                   dtype=object)
    order = _rank(e, ids)
    want = np.lexsort((ids.astype(str), -e), axis=1)
    finite = np.isfinite(np.take_along_axis(e, want, axis=1))
    assert (np.take_along_axis(e, order, axis=1)[finite]
            == np.take_along_axis(e, want, axis=1)[finite]).all()
    assert (np.take_along_axis(ids, order, axis=1)[finite]
            == np.take_along_axis(ids, want, axis=1)[finite]).all()
