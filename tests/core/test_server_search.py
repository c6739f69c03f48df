"""Relevance search against a real `chroma run` server: no vectors, no neighbour fetch, and the
same hits as the exact scan of a mirror-backed memory on the same server."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from scrubjay import ScrubJayConfig, ScrubJayError, ScrubJayMemory, SearchConfig
from scrubjay.embedding import CallableEmbedder
from scrubjay.testing import FrozenClock

DIM = 32
N = 300
K_VALUES = (1, 5, 10)


class Lookup:
    """Clustered random unit vectors by text (no ties, unlike a bag-of-words hash)."""

    def __init__(self, seed: int = 3) -> None:
        rng = np.random.default_rng(seed)
        centres = rng.standard_normal((12, DIM))
        self.lut: dict[str, np.ndarray] = {"": np.zeros(DIM, np.float32)}
        for i in range(N):
            self.lut[f"m{i}"] = self._unit(centres[i % 12] + 0.4 * rng.standard_normal(DIM))
        for j in range(6):
            self.lut[f"ctx {j}"] = self._unit(rng.standard_normal(DIM))
        for i in range(N):  # a context of its own, near a shared one
            self.lut[f"ctx {i % 6} #{i}"] = self._unit(self.lut[f"ctx {i % 6}"]
                                                       + 0.3 * rng.standard_normal(DIM))
        for q in range(8):
            self.lut[f"q{q}"] = self._unit(centres[q] + 0.4 * rng.standard_normal(DIM))

    @staticmethod
    def _unit(v: np.ndarray) -> np.ndarray:
        return (v / np.linalg.norm(v)).astype(np.float32)

    def __call__(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.lut[t] for t in texts])


QUERIES = [(f"q{q}", "" if q % 2 else f"ctx {q % 6}") for q in range(8)]


@pytest.fixture
def stores(chroma_server, request) -> Iterator[tuple[ScrubJayMemory, Any, Any]]:
    """A server memory of N memories (a third without context), and a factory of
    mirror-backed exact references (scan of every memory) on the same namespace."""
    import chromadb

    client = chromadb.HttpClient(host=chroma_server[0], port=chroma_server[1])
    lookup = Lookup()
    clock = FrozenClock(1_764_000_000.0)
    ns = f"srv-{request.node.name[:40]}".replace("[", "-").replace("]", "")

    def make(**search: Any) -> ScrubJayMemory:
        return ScrubJayMemory(client=client, namespace=ns, clock=clock,
                              embedder=CallableEmbedder(lookup, name="callable:lookup"),
                              config=ScrubJayConfig(search=SearchConfig(**search)))

    mem = make()
    mem.forget_namespace()
    t0 = clock()
    contexts = ["", "ctx {j}", "ctx {j} #{i}"]  # none, shared (ties on where), its own
    mem.add_many([{"text": f"m{i}", "context": contexts[i % 3].format(i=i, j=i % 6),
                   "at": t0 - (N - i) * 7_200.0, "id": f"m{i:03d}"} for i in range(N)])
    made = [mem]

    def exact() -> ScrubJayMemory:
        ref = make(mirror=True, scan_max=None)
        made.append(ref)
        return ref

    yield mem, exact, client
    mem.forget_namespace()
    for m in made:
        m.close()


def _spy(obj: Any, name: str, note: Any) -> None:
    """Wrap ``obj.name`` so that ``note(*args, **kwargs)`` sees every call first."""
    real = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        note(*args, **kwargs)
        return real(*args, **kwargs)
    setattr(obj, name, wrapper)


def _same_hits(got: list, want: list) -> None:
    assert [h.id for h in got] == [h.id for h in want]
    for g, w in zip(got, want, strict=True):
        for name in ("score", "utility", "what", "where", "when", "graph", "paper_score"):
            assert getattr(g, name) == pytest.approx(getattr(w, name), abs=1e-5), name
        assert (g.stale, g.weights) == (w.stale, w.weights)
        assert g.paper_score == pytest.approx(
            sum(x * y for x, y in zip(g.weights, (g.what, g.where, g.when, g.graph),
                                      strict=True)), abs=1e-9)


def test_server_hits_equal_the_exact_scan(stores) -> None:
    mem, exact, _ = stores
    ref = exact()
    for query, ctx in QUERIES:
        for k in K_VALUES:
            _same_hits(mem.search(query, context=ctx, k=k), ref.search(query, context=ctx, k=k))
            _same_hits(mem.search(query, context=ctx, k=k, exclude_stale=True),
                       ref.search(query, context=ctx, k=k, exclude_stale=True))


def test_lowered_values_widen_the_candidates_until_exact(stores) -> None:
    mem, exact, _ = stores
    query = "q0"
    nearest = [h.id for h in mem.search(query, k=40)]
    # the 30 nearest lose most of their value (as RCI would do): the top 5 by the key now lie
    # beyond the first 2k candidates by similarity
    mem._store.update_meta(nearest[:30], [{"sj_value": 0.05}] * 30)
    ref = exact()
    asked: list[int] = []
    _spy(mem._store, "query_scored", lambda which, v, n, **kw: asked.append(n))
    hits = mem.search(query, k=5)
    assert len(asked) > 1 and asked[0] == 10 and asked == sorted(asked)
    _same_hits(hits, ref.search(query, k=5))
    assert not set(nearest[:30]) & {h.id for h in hits}


def test_a_server_search_transfers_no_vector_and_fetches_no_neighbour(stores) -> None:
    mem, exact, _ = stores
    calls: list[str] = []
    store = mem._store
    for name in ("get", "where_vectors", "query_rows", "query", "query_many", "iter_all"):
        _spy(store, name, lambda *a, name=name, **kw: calls.append(name))
    scored: list[str] = []
    _spy(store, "query_scored", lambda which, *a, **kw: scored.append(which))
    hits = mem.search("q1", k=10)
    assert scored == ["what"] and calls == []  # one query, distances and metadata only
    graphs = [h.graph for h in hits]              # first access: one batched fetch at most
    assert calls in ([], ["get"])
    assert [h.graph for h in hits] == graphs and len(calls) <= 1   # computed once
    assert any(g != 0.0 for g in graphs)
    scored.clear()
    calls.clear()
    mem.search("q0", context="ctx 0", k=10)
    rounds = len(scored) // 2              # a query of each collection per round (at once),
    assert rounds >= 1 and sorted(scored) == ["what"] * rounds + ["where"] * rounds
    assert set(calls) <= {"get", "where_vectors"} and len(calls) <= 2 * rounds
    _same_hits(mem.search("q1", k=10), exact().search("q1", k=10))


def test_deferred_hits_pickle_compare_and_refuse_a_closed_memory(stores) -> None:
    mem, _, client = stores
    hit = mem.search("q3", k=3)[0]
    copy = pickle.loads(pickle.dumps(hit))            # computes graph and paper_score first
    assert copy == hit and copy.graph == hit.graph and copy.paper_score == hit.paper_score
    assert replace(hit, score=0.0).graph == hit.graph
    other = ScrubJayMemory(client=client, namespace=mem.namespace, clock=mem._clock,
                           embedder=mem.embedder)
    late = other.search("q3", k=3)
    other.close()
    with pytest.raises(ScrubJayError):
        late[0].graph  # noqa: B018 - the access is the test


def test_server_hits_stay_exact_after_rci_with_deferred_index_rewrites(stores) -> None:
    """RCI moves what-vectors but defers rewriting Chroma's index vectors (up to
    ``INDEX_DRIFT_MAX_RAD``): the server search must score with the exact vectors and values
    and widen its candidate cut by the drift, so it still equals the exact scan."""
    import json as _json

    from scrubjay.config import LLMConfig, RCIConfig
    from scrubjay.testing import ScriptedLLM

    mem, exact, client = stores
    deltas = _json.dumps({"delta_value": -0.6, "delta_pi": 0.2,
                          "delta_tau": -0.3, "summary": "superseded"})
    writer = ScrubJayMemory(client=client, namespace=mem.namespace, clock=mem._clock,
                            embedder=mem.embedder, llm=ScriptedLLM([deltas]),
                            config=ScrubJayConfig(llm=LLMConfig(annotate=False),
                                                  rci=RCIConfig(eta_what=0.03)))
    try:
        moved = {m for q in ("q0", "q2") for m, _ in writer.integrate(q, store=False).affected}
    finally:
        writer.close()
    rows = mem._store.get(sorted(moved), vectors=True, where_vectors=False)
    assert moved and any(0.0 < r.drift_rad for r in rows)  # some index vectors lag behind
    ref = exact()
    for query, ctx in QUERIES:
        for k in K_VALUES:
            _same_hits(mem.search(query, context=ctx, k=k), ref.search(query, context=ctx, k=k))


# -------------------------------------------------------------------- the lexical channel
def _tagged_lookup() -> tuple[CallableEmbedder, list[dict[str, Any]], list[tuple[str, str]]]:
    """N memories whose texts carry a shared tag (one of 23) and, for every tenth, a code of
    its own; their vectors ignore those words, so only the lexical channel sees them."""
    base = Lookup()
    lut = dict(base.lut)
    items = []
    contexts = ["", "ctx {j}", "ctx {j} #{i}"]
    for i in range(N):
        text = f"m{i} tag{i % 23}" + (f" code{i}" if i % 10 == 0 else "")
        lut[text] = base.lut[f"m{i}"]
        items.append({"text": text, "context": contexts[i % 3].format(i=i, j=i % 6),
                      "at": 1_764_000_000.0 - (N - i) * 7_200.0, "id": f"m{i:03d}"})
    queries = []
    for q in range(8):
        for words in (f"q{q} tag{(5 * q) % 23}", f"q{q} code{40 * q}", f"q{q} tag{q} tag{q + 1}"):
            lut[words] = base.lut[f"q{q}"]
            queries.append((words, "" if q % 2 else f"ctx {q % 6}"))
    return (CallableEmbedder(lambda ts: np.stack([lut[t] for t in ts]), name="callable:tags"),
            items, queries)


def test_server_hits_with_the_lexical_channel_equal_the_exact_scan(chroma_server,
                                                                   request) -> None:
    """A server without a mirror fuses the lexical channel as a mirror's exact scan does:
    the same hits, scores and lexical shares, with and without context, stale memories
    excluded or not, and at an earlier time (fewer memories visible, values as they were)."""
    import chromadb

    client = chromadb.HttpClient(host=chroma_server[0], port=chroma_server[1])
    emb, items, queries = _tagged_lookup()
    clock = FrozenClock(1_764_000_000.0)
    ns = f"srv-lex-{request.node.name[:30]}"

    def make(**search: Any) -> ScrubJayMemory:
        return ScrubJayMemory(client=client, namespace=ns, clock=clock, embedder=emb,
                              config=ScrubJayConfig(search=SearchConfig(**search)))

    mem = make()
    mem.forget_namespace()
    mem.add_many(items)
    ref = make(mirror=True, scan_max=None)
    try:
        fused = 0
        for query, ctx in queries:
            for k in K_VALUES:
                for kw in ({}, {"exclude_stale": True}, {"at": clock() - 200 * 7_200.0}):
                    got = mem.search(query, context=ctx, k=k, **kw)
                    want = ref.search(query, context=ctx, k=k, **kw)
                    _same_hits(got, want)
                    assert [(round(h.lexical, 6), h.lexical_weight) for h in got] == \
                        [(round(h.lexical, 6), h.lexical_weight) for h in want]
                    fused += any(h.lexical > 0 for h in got)
        assert fused > len(queries) * len(K_VALUES)  # the channel decided many answers
        # a code far from the query's dense neighbours comes first, as only BM25 can place it
        hit = mem.search("q1 code40", k=1)[0]
        assert hit.id == "m040" and hit.lexical > 0.3
        dense = make(lexical=False)
        assert dense.search("q1 code40", k=1)[0].id != "m040"
        dense.close()
    finally:
        mem.forget_namespace()
        mem.close()
        ref.close()
