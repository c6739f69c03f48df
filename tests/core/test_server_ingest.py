"""Ingest at scale. Server mode ``add_many``: a batch costs a few Chroma requests whatever its
size, and its temporal link candidates are the memories nearest in time (a real ``chroma run``
server); reads by id of any size work in both modes."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import chromadb
import numpy as np
import pytest
from scrubjay import ScrubJayConfig, ScrubJayMemory
from scrubjay.config import GraphConfig, LLMConfig, SupersessionConfig
from scrubjay.embedding import CallableEmbedder
from scrubjay.graph import temporal_horizon_s

T0 = 1_764_000_000.0
DIM = 32


class _Counting:
    """A Chroma collection that counts the requests made through it."""

    def __init__(self, col: Any, counts: Counter[str]) -> None:
        self._col, self._counts = col, counts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._col, name)
        if name in ("get", "query", "add", "upsert", "update", "delete", "count"):
            def call(*args: Any, **kwargs: Any) -> Any:
                self._counts[name] += 1
                return attr(*args, **kwargs)
            return call
        return attr


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def _notes(seed: int, count: int, gap_s: float, prefix: str = "n"
           ) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """``count`` memories ``note 0``, ``note 1``, ... ``gap_s`` apart from T0, with random
    unit vectors (none near another: no semantic edge), and the embedder's lookup table."""
    rng = np.random.default_rng(seed)
    lut = {"": np.zeros(DIM, np.float32)}
    items = []
    for i in range(count):
        lut[f"note {i}"] = _unit(rng.standard_normal(DIM))
        items.append({"text": f"note {i}", "at": T0 + gap_s * i, "id": f"{prefix}{i}"})
    return lut, items


def _memory(chroma_server: tuple[str, int], lut: dict[str, np.ndarray],
            max_neighbors: int = 16) -> ScrubJayMemory:
    host, port = chroma_server
    emb = CallableEmbedder(lambda ts: np.stack([lut[t] for t in ts]), name="callable:srv-ingest")
    # the requests counted here are the linking's; supersession on add reads its own
    # candidates (one query and one read per batch, tests/core/test_supersede_on_add.py)
    cfg = ScrubJayConfig(llm=LLMConfig(annotate=False),
                         graph=GraphConfig(max_neighbors=max_neighbors),
                         supersession=SupersessionConfig(enabled=False))
    return ScrubJayMemory(client=chromadb.HttpClient(host=host, port=port),
                          namespace=f"ingest-{uuid.uuid4().hex[:8]}", embedder=emb, config=cfg,
                          clock=lambda: T0 + 10 * 3600.0)


def _requests_for_a_batch(chroma_server: tuple[str, int], size: int) -> int:
    rng = np.random.default_rng(size)
    lut = {"": np.zeros(DIM, np.float32)}
    items = []
    for i in range(size + 50):
        text = f"note {i}"
        lut[text] = _unit(rng.standard_normal(DIM))
        items.append({"text": text, "context": "desk" if i % 2 else "",
                      "at": T0 + 60.0 * i, "id": f"n{i}"})
    lut["desk"] = _unit(rng.standard_normal(DIM))
    mem = _memory(chroma_server, lut)
    try:
        mem.add_many(items[:50])  # an existing store, so that every kind of candidate exists
        counts: Counter[str] = Counter()
        store = mem._store
        store.what, store.where = _Counting(store.what, counts), _Counting(store.where, counts)
        mem.add_many(items[50:])
        assert len(mem) == size + 50
        return sum(counts.values())
    finally:
        mem.close()


def test_a_batch_costs_the_same_requests_whatever_its_size(chroma_server) -> None:
    """Within one page of what queries (``_LINK_QUERY_PAGE`` new memories)."""
    small = _requests_for_a_batch(chroma_server, 10)
    large = _requests_for_a_batch(chroma_server, 200)
    # per batch: the existence check, the what and where queries, one read by time, the
    # candidates' rows and where-vectors, the writes and the neighbours' edge updates
    # (candidates looked up per item took 4 requests per memory: 800 for the large batch),
    # and one more read when an eviction reaches a memory that was no candidate
    assert abs(large - small) <= 1
    assert max(large, small) <= 13


def test_temporal_candidates_are_the_nearest_in_time(chroma_server) -> None:
    """Forty older memories inside the window, written first, and one a minute before the new
    memory, written last: the new one links to that one (time alone makes the edge)."""
    rng = np.random.default_rng(3)
    new_vec = _unit(rng.standard_normal(DIM))
    lut = {"": np.zeros(DIM, np.float32), "new": new_vec, "recent": -new_vec}
    old = []
    for i in range(40):
        text = f"older {i}"
        # closer to the new memory than 'recent' is, but below theta_S: no semantic edge
        lut[text] = _unit(new_vec + 1.5 * rng.standard_normal(DIM))
        old.append({"text": text, "at": T0 + 3600.0 + 60.0 * i, "id": f"o{i}"})
    t_new = T0 + 5 * 3600.0
    assert t_new - old[0]["at"] < temporal_horizon_s(GraphConfig())  # all in the window
    mem = _memory(chroma_server, lut, max_neighbors=4)  # 8 temporal candidates per side
    try:
        mem.add_many(old)
        mem.add_many([{"text": "recent", "at": t_new - 60.0, "id": "recent"}])
        mem.add_many([{"text": "new", "at": t_new, "id": "new"}])
        assert max(float(new_vec @ lut[o["text"]]) for o in old) < 0.75
        edges = _stored_edges(mem, "new")
        assert "recent" in edges
        assert edges["recent"] == pytest.approx(0.3 * np.exp(-60 / 3600))
        assert "new" in _stored_edges(mem, "recent")  # persisted on both ends
    finally:
        mem.close()


class _RowCounting(_Counting):
    """:class:`_Counting` that also counts the rows its reads return (``counts["rows"]``)."""

    def __getattr__(self, name: str) -> Any:
        attr = super().__getattr__(name)
        if name != "get":
            return attr

        def get(*args: Any, **kwargs: Any) -> Any:
            got = attr(*args, **kwargs)
            self._counts["rows"] += len(got["ids"])
            return got
        return get


def _nearest_by_scan(stored: dict[str, float], t: float, horizon: float, n: int) -> list[str]:
    """The definition: the n stored memories nearest before t and the n nearest from t on,
    those within the horizon."""
    ids = sorted(stored, key=lambda m: (stored[m], m))
    at = sum(stored[m] < t for m in ids)
    return [m for m in ids[max(0, at - n):at + n] if abs(stored[m] - t) <= horizon]


def _gap_by_scan(stored: dict[str, float], t: float, horizon: float, n: int) -> float:
    """The gap a read by time gives: on each side, the n-th nearest's distance when that side
    holds n within the horizon, else the horizon; the smaller of the two."""
    before = sorted(t - x for x in stored.values() if x < t)
    after = sorted(x - t for x in stored.values() if x >= t)
    sides = [d[n - 1] if len(d) >= n and d[n - 1] <= horizon else horizon
             for d in (before, after)]
    return min(*sides, horizon)


@pytest.mark.parametrize("gap_s", [1.0, 97.0, 1500.0])
def test_reads_by_time_start_narrow_and_give_the_nearest_in_time(chroma_server,
                                                                 gap_s: float) -> None:
    """Server mode's temporal candidates are read around each new memory, widened only as
    needed: the same ids as a scan of every stored time (before, after, between and far from
    the stored memories, one time or a batch, a dense and a sparse store), and in a store
    with a memory a second, a small part of the rows within the horizon. With them come
    their times and a gap that no other stored memory is nearer than."""
    horizon, n = temporal_horizon_s(GraphConfig()), 8
    size = 3000
    stored = {f"s{i}": T0 + gap_s * i + 0.25 * (i % 3) for i in range(size)}
    rng = np.random.default_rng(int(gap_s))
    vec = _unit(rng.standard_normal((size, DIM)))
    mem = _memory(chroma_server, {"": np.zeros(DIM, np.float32)})
    try:
        store = mem._store
        ids = list(stored)
        for lo in range(0, size, 1000):
            store.add(ids[lo:lo + 1000], [f"t{i}" for i in range(lo, lo + 1000)],
                      [{"sj_t": stored[m]} for m in ids[lo:lo + 1000]],
                      vec[lo:lo + 1000], np.zeros((1000, DIM), np.float32))
        end = T0 + gap_s * (size - 1)
        near = [[end + 1.0], [end + 0.5 * gap_s, end + 3.0 * gap_s], [T0 - 5.0],
                [T0 + gap_s * 1500.5], [T0 + gap_s * 10.5, T0 + gap_s * 2500.5],
                list(T0 + gap_s * (100.5 + np.arange(40)))]
        far = [[end + 7200.0], [end + horizon + 60.0], [T0 + 7.5 * gap_s, end + 9000.0]]
        counts: Counter[str] = Counter()
        store.what = _RowCounting(store.what, counts)
        for times in near + far:
            got = store.nearest_in_time(times, horizon, n)
            assert got == [_nearest_by_scan(stored, t, horizon, n) for t in times], times
            if gap_s == 1.0 and times in near:  # 5.7 h hold all 3,000: read a few per time
                assert counts["rows"] <= 200 * len(times)
            counts.clear()
            bounded = store.nearest_in_time_bounded(times, horizon, n)
            assert bounded.ids == got
            assert bounded.times == [[stored[m] for m in mine] for mine in got]
            for t, mine, gap in zip(times, got, bounded.gaps, strict=True):
                assert gap == pytest.approx(_gap_by_scan(stored, t, horizon, n)), t
                assert all(abs(x - t) >= gap for m, x in stored.items() if m not in mine)
    finally:
        mem.close()


def _stored_edges(mem: ScrubJayMemory, mid: str) -> dict[str, float]:
    """A memory's adjacency as persisted in its Chroma metadata."""
    meta = mem._store.get([mid])[0].meta
    return {row[0]: row[1] for row in json.loads(meta["sj_edges"])}


def test_reads_of_more_ids_than_sqlite_binds(memory_factory) -> None:
    """SQLite (under both Chroma modes) refuses a statement with more than 32,766 variables;
    reads by id are split, so a large batch's candidates or existence check still read."""
    mem = memory_factory()
    kept = [mem.add(f"note {i}", context="desk" if i % 2 else "") for i in range(3)]
    ids = [f"missing-{i}" for i in range(40_000)] + [r.id for r in kept]
    rows = mem._store.get(ids, vectors=True)
    assert [r.id for r in rows] == [r.id for r in kept]
    assert rows[1].where is not None and rows[0].where is None
    assert mem._store.existing(ids) == {r.id for r in kept}


def test_a_replaced_memory_is_no_link_candidate_in_its_own_batch(chroma_server) -> None:
    """The batch's reads run while it is classified; when the batch replaces an id, the old
    row must be gone before the candidates are read: a new memory identical to the old
    version gets no semantic edge to the replacement, which says something else."""
    rng = np.random.default_rng(5)
    old_vec = _unit(rng.standard_normal(DIM))
    lut = {"": np.zeros(DIM, np.float32), "old": old_vec, "twin": old_vec,
           "replacement": _unit(rng.standard_normal(DIM))}
    assert abs(float(lut["replacement"] @ old_vec)) < 0.5
    mem = _memory(chroma_server, lut, max_neighbors=4)
    try:
        mem.add_many([{"text": "old", "at": T0, "id": "x"}])
        # far apart in time from each other: an edge between them can only be semantic
        mem.add_many([{"text": "replacement", "at": T0 + 9 * 3600.0, "id": "x"},
                      {"text": "twin", "at": T0 + 2 * 3600.0, "id": "twin"}])
        assert mem.get("x").text == "replacement"
        assert "x" not in _stored_edges(mem, "twin")
        assert "twin" not in _stored_edges(mem, "x")
    finally:
        mem.close()


def _stored_listings(mem: ScrubJayMemory) -> dict[str, dict[str, list[float]]]:
    """Each stored memory's adjacency as its row lists it: ``{id: {other: [w, s, c, t]}}``."""
    return {row.id: {e[0]: e[1:] for e in json.loads(row.meta.get("sj_edges") or "[]")}
            for row in mem._store.iter_all(vectors=False)}


def test_an_eviction_keeps_the_evicted_neighbours_other_edges(chroma_server) -> None:
    """Server mode loads only the link candidates' adjacency. When a candidate that is full
    drops its weakest edge for a new one, the other end of that edge, no candidate itself,
    must keep its edges to memories outside the batch's candidates: every edge stays listed
    by both of its ends, with the same weights (before the fix, that row was rewritten with
    only the edges the batch had loaded, and lost the others)."""
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "office", "car", "key", "tea"]
    lut = {"": np.zeros(DIM, np.float32)}
    items = []
    at = T0
    for i in range(40):
        text = " ".join(rng.choice(words, 3)) + f" #{i}"
        base = lut.setdefault(text.split(" #")[0], _unit(rng.standard_normal(DIM)))
        lut[text] = _unit(base + 0.05 * rng.standard_normal(DIM))
        at += float(rng.uniform(30.0, 900.0))
        items.append({"text": text, "at": at, "id": f"m{i}"})
    mem = _memory(chroma_server, lut, max_neighbors=2)
    try:
        evictions = 0
        for item in items:
            before = _stored_listings(mem)
            mem.add_many([item])
            after = _stored_listings(mem)
            evictions += sum(1 for i in before if set(before[i]) - set(after.get(i, {})))
        assert evictions > 0, "the scenario must evict edges"
        listed = _stored_listings(mem)
        one_sided = [(i, j) for i, nbrs in listed.items() for j in nbrs
                     if listed.get(j, {}).get(i) != nbrs[j]]
        assert one_sided == []
        assert all(len(nbrs) <= 2 for nbrs in listed.values())
    finally:
        mem.close()


def test_only_ids_the_caller_chose_are_looked_up_before_a_write(chroma_server) -> None:
    """A generated id (``add``, or an item without ``id``) is a fresh uuid4 and cannot be
    stored already: against a server its batch skips the existence read (one request of the
    few an ``add`` makes). An id the caller chose is looked up, and replaces its memory."""
    rng = np.random.default_rng(11)
    lut = {"": np.zeros(DIM, np.float32)}
    for text in ("first", "second", "third", "fourth", "fourth again"):
        lut[text] = _unit(rng.standard_normal(DIM))
    mem = _memory(chroma_server, lut, max_neighbors=4)
    looked_up: list[list[str]] = []
    existing = mem._store.existing

    def spy(ids: Any) -> Any:
        looked_up.append(list(ids))
        return existing(ids)

    mem._store.existing = spy  # type: ignore[method-assign]
    try:
        mem.add("first", at=T0)
        mem.add_many(["second", {"text": "third", "at": T0 + 60.0}])
        assert looked_up == []
        mem.add_many([{"text": "fourth", "id": "mine"}, "third"])
        assert looked_up == [["mine"]]
        mem.add_many([{"text": "fourth again", "id": "mine"}])
        assert looked_up == [["mine"], ["mine"]]
        assert mem.get("mine").text == "fourth again"
        assert len(mem) == 5
    finally:
        mem.close()


class _FilterLog(_Counting):
    """:class:`_Counting` that also keeps the ``where`` filter of each ``get``."""

    def __init__(self, col: Any, counts: Counter[str], filters: list[Any]) -> None:
        super().__init__(col, counts)
        self._filters = filters

    def __getattr__(self, name: str) -> Any:
        attr = super().__getattr__(name)
        if name != "get":
            return attr

        def get(*args: Any, **kwargs: Any) -> Any:
            self._filters.append(kwargs.get("where"))
            return attr(*args, **kwargs)
        return get


def _bounds(where: Any) -> set[str]:
    """The comparison operators on ``sj_t`` in a read's filter."""
    parts = where.get("$and", [where]) if isinstance(where, dict) else []
    return {op for part in parts for op in part.get("sj_t", {})}


def _store_by_the_second(mem: ScrubJayMemory, size: int) -> dict[str, float]:
    stored = {f"s{i}": T0 + float(i) for i in range(size)}
    vec = _unit(np.random.default_rng(size).standard_normal((size, DIM)))
    ids = list(stored)
    for lo in range(0, size, 1000):
        part = ids[lo:lo + 1000]
        mem._store.add(part, [f"t{m}" for m in part], [{"sj_t": stored[m]} for m in part],
                       vec[lo:lo + len(part)], np.zeros((len(part), DIM), np.float32))
    return stored


def test_a_read_by_time_past_the_newest_memory_has_one_bound(chroma_server) -> None:
    """A memory added now is newer than every stored one. Chroma's cost for a range with two
    bounds grows with the namespace (it matches each bound, then intersects), for a range
    with a lower bound alone it does not: the read around such a memory is upward, with no
    upper bound, and needs no probe of the later side (it read everything after). A time
    among the stored ones is read between two bounds, as before. Both give the nearest."""
    horizon, n = temporal_horizon_s(GraphConfig()), 8
    mem = _memory(chroma_server, {"": np.zeros(DIM, np.float32)})
    try:
        stored = _store_by_the_second(mem, 2000)
        end = max(stored.values())
        store = mem._store
        counts: Counter[str] = Counter()
        filters: list[Any] = []
        store.what = _FilterLog(store.what, counts, filters)
        for t in (end + 1.0, end + 2.5):  # each past the newest (the second call too)
            assert store.nearest_in_time([t], horizon, n) == [
                _nearest_by_scan(stored, t, horizon, n)]
            assert [_bounds(f) for f in filters] == [{"$gte"}]
            filters.clear()
        middle = T0 + 1000.5
        assert store.nearest_in_time([middle], horizon, n) == [
            _nearest_by_scan(stored, middle, horizon, n)]
        assert [_bounds(f) for f in filters] == [{"$gte", "$lte"}]
    finally:
        mem.close()


def test_an_upward_read_that_meets_more_memories_than_a_read_holds_reads_the_range(
        chroma_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that has neither read nor written yet takes every time for the newest; when
    its upward read stops at the read limit (newer memories, written by another process),
    the range is read again between two bounds, and the candidates are still the nearest."""
    import scrubjay.timeread as timeread_module

    monkeypatch.setattr(timeread_module, "TIME_READ_MAX", 100)
    horizon, n = temporal_horizon_s(GraphConfig()), 8
    writer = _memory(chroma_server, {"": np.zeros(DIM, np.float32)})
    host, port = chroma_server
    mem = ScrubJayMemory(client=chromadb.HttpClient(host=host, port=port),
                         namespace=writer.namespace,
                         embedder=CallableEmbedder(lambda ts: np.zeros((len(ts), DIM), np.float32),
                                                   name="callable:srv-ingest"),
                         config=ScrubJayConfig(llm=LLMConfig(annotate=False)),
                         clock=lambda: T0 + 10 * 3600.0)
    try:
        stored = _store_by_the_second(writer, 1500)
        store = mem._store
        counts: Counter[str] = Counter()
        filters: list[Any] = []
        store.what = _FilterLog(store.what, counts, filters)
        t = T0 + 300.5  # 1,200 memories after it
        assert store.nearest_in_time([t], horizon, n) == [_nearest_by_scan(stored, t, horizon, n)]
        assert [_bounds(f) for f in filters] == [{"$gte"}, {"$gte", "$lte"}]
        filters.clear()
        # the capped read showed newer memories: the next time among them reads the range
        t = T0 + 40.5
        assert store.nearest_in_time([t], horizon, n) == [_nearest_by_scan(stored, t, horizon, n)]
        assert _bounds(filters[0]) == {"$gte", "$lte"}
        # a caller that knows the newest time (the namespace's state) spares the capped read
        fresh = ScrubJayMemory(client=chromadb.HttpClient(host=host, port=port),
                               namespace=writer.namespace, embedder=mem._embedder,
                               config=mem.config, clock=lambda: T0 + 10 * 3600.0)
        filters.clear()
        fresh._store.what = _FilterLog(fresh._store.what, counts, filters)
        t = T0 + 300.5
        assert fresh._store.nearest_in_time([t], horizon, n, newest_hint=max(stored.values())) \
            == [_nearest_by_scan(stored, t, horizon, n)]
        assert [_bounds(f) for f in filters] == [{"$gte", "$lte"}]
        fresh.close()
    finally:
        mem.close()
        writer.close()


def test_a_batch_without_a_context_reads_no_where_vectors(chroma_server) -> None:
    """A candidate's where-vector enters an edge only through ``e_C`` against a new memory
    that has a context. A batch without one reads none (a request fewer per ``add``); a
    batch with one reads them, and links by context."""
    rng = np.random.default_rng(8)
    lut = {"": np.zeros(DIM, np.float32), "desk": _unit(rng.standard_normal(DIM))}
    for i in range(6):
        lut[f"note {i}"] = _unit(rng.standard_normal(DIM))
    mem = _memory(chroma_server, lut, max_neighbors=4)
    try:
        mem.add_many([{"text": f"note {i}", "context": "desk", "at": T0 - 86_400.0 * (6 - i),
                       "id": f"n{i}"} for i in range(4)])
        counts: Counter[str] = Counter()
        store = mem._store
        store.where = _Counting(store.where, counts)
        mem.add_many([{"text": "note 4", "at": T0 - 86_400.0 * 2, "id": "n4"}])
        assert counts["get"] == 0
        assert _stored_edges(mem, "n4") == {}  # a day apart, unrelated, no shared context
        mem.add_many([{"text": "note 5", "context": "desk", "at": T0 - 86_400.0,
                       "id": "n5"}])
        assert counts["get"] >= 1
        assert set(_stored_edges(mem, "n5")) == {"n0", "n1", "n2", "n3"}  # by context alone
    finally:
        mem.close()


def test_a_batchs_vector_queries_and_reads_by_time_run_side_by_side(chroma_server) -> None:
    """The link candidates by vector and by time are independent reads: each waits at a
    barrier for the other, which passes only when both run at once."""
    import threading

    rng = np.random.default_rng(9)
    lut = {"": np.zeros(DIM, np.float32)}
    for i in range(4):
        lut[f"note {i}"] = _unit(rng.standard_normal(DIM))
    mem = _memory(chroma_server, lut, max_neighbors=4)
    try:
        mem.add_many([{"text": f"note {i}", "at": T0 + 60.0 * i, "id": f"n{i}"}
                      for i in range(3)])
        barrier = threading.Barrier(2, timeout=10)
        store = mem._store
        by_vector, by_time = store.query_many_similar, store.nearest_in_time_bounded

        def query_many_similar(*args: Any, **kwargs: Any) -> Any:
            barrier.wait()
            return by_vector(*args, **kwargs)

        hints: list[float] = []

        def nearest_in_time(*args: Any, **kwargs: Any) -> Any:
            hints.append(kwargs["newest_hint"])
            barrier.wait()
            return by_time(*args, **kwargs)

        store.query_many_similar = query_many_similar  # type: ignore[method-assign]
        store.nearest_in_time_bounded = nearest_in_time  # type: ignore[method-assign]
        rec = mem.add("note 3", at=T0 + 180.0)
        assert set(_stored_edges(mem, rec.id)) == {"n0", "n1", "n2"}  # minutes apart
        assert hints == [T0 + 120.0]  # the newest time the memory knows of
    finally:
        mem.close()


def test_pages_are_queried_two_at_once_and_their_rows_read_while_the_next_are(
        chroma_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's what queries go in pages, two at once (a server answers them on two
    cores): the first two pages' queries wait for each other at a barrier, which passes only
    if they run at once. The rows of their candidates are read while the next page is
    queried: its query waits until such a read has started, which happens only if the reads
    run beside the queries. The graph is the one that the batch queried in one page gets."""
    import threading

    import scrubjay.backends.server as memory_module

    rng = np.random.default_rng(12)
    lut = {"": np.zeros(DIM, np.float32)}
    desk = _unit(rng.standard_normal(DIM))
    for i in range(40):  # contexts near one another, none equal (no ties between them)
        lut[f"desk {i}"] = _unit(desk + 0.05 * rng.standard_normal(DIM))
    old, new = [], []
    for c in range(3):  # three topics: each page of new memories has candidates of its own
        centre = _unit(rng.standard_normal(DIM))
        for i in range(10):
            text = f"old {c}.{i}"
            lut[text] = _unit(centre + 0.1 * rng.standard_normal(DIM))
            old.append({"text": text, "at": T0 + 60.0 * len(old), "id": f"o{c}.{i}",
                        "context": f"desk {len(old)}" if i % 3 == 0 else ""})
        for i in range(3):
            text = f"new {c}.{i}"
            lut[text] = _unit(centre + 0.1 * rng.standard_normal(DIM))
            new.append({"text": text, "at": T0 + 7200.0 + 60.0 * len(new), "id": f"n{c}.{i}",
                        "context": f"desk {30 + len(new)}" if i == 1 else ""})
    paged, whole = (_memory(chroma_server, lut, max_neighbors=4) for _ in range(2))
    try:
        for mem in (paged, whole):
            mem.add_many(old)
        monkeypatch.setattr(memory_module, "_LINK_QUERY_PAGE", 3, raising=False)
        store = paged._store
        query_many, get = store.query_many_similar, store.get
        reads = threading.Semaphore(0)
        pair = threading.Barrier(2, timeout=10)
        calls = iter(range(3))
        pages: list[bool] = []

        def paged_query(which: str, *args: Any, **kwargs: Any) -> Any:
            if next(calls) < 2:
                try:
                    pair.wait()
                    pages.append(True)
                except threading.BrokenBarrierError:
                    pages.append(False)
            else:
                pages.append(reads.acquire(timeout=10))
            return query_many(which, *args, **kwargs)

        def rows_read(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("vectors"):
                reads.release()
            return get(*args, **kwargs)

        store.query_many_similar = paged_query  # type: ignore[method-assign]
        store.get = rows_read  # type: ignore[method-assign]
        paged.add_many(new)  # three pages of three new memories
        assert pages == [True, True, True]
        monkeypatch.setattr(memory_module, "_LINK_QUERY_PAGE", 1_000)
        whole.add_many(new)
        for item in old + new:
            assert _stored_edges(paged, item["id"]) == _stored_edges(whole, item["id"])
        assert all(_stored_edges(paged, item["id"]) for item in new)
        # the where-vectors were read with the pages' rows: edges weigh their contexts
        contextual = [row for item in new if item["context"] for row in json.loads(
            paged._store.get([item["id"]])[0].meta["sj_edges"]) if row[3] > 0]
        assert contextual
    finally:
        paged.close()
        whole.close()


def test_a_pages_candidate_read_that_fails_stores_nothing(
        chroma_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read of a page's candidate rows that fails in the worker fails the batch with the
    package's error after every request it started has ended: nothing of the batch is
    stored, and the same batch goes in afterwards."""
    import scrubjay.backends.server as memory_module
    from scrubjay.errors import StoreError

    lut, items = _notes(13, 12, 60.0)
    mem = _memory(chroma_server, lut, max_neighbors=4)
    try:
        mem.add_many(items[:6])
        monkeypatch.setattr(memory_module, "_LINK_QUERY_PAGE", 2, raising=False)
        store = mem._store
        get = store.get
        calls: list[int] = []

        def failing_first_read(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("vectors"):
                calls.append(1)
                if len(calls) == 1:
                    raise StoreError("the server went away")
            return get(*args, **kwargs)

        store.get = failing_first_read  # type: ignore[method-assign]
        with pytest.raises(StoreError, match="went away"):
            mem.add_many(items[6:])
        assert len(calls) >= 2  # the batch's other reads ran to their end too
        assert len(mem) == 6 and not any(i["id"] in mem for i in items[6:])
        store.get = get  # type: ignore[method-assign]
        mem.add_many(items[6:])
        assert len(mem) == 12 and _stored_edges(mem, "n11")
    finally:
        mem.close()


def _stored_then(chroma_server: tuple[str, int], seed: int, *sizes: int
                 ) -> tuple[ScrubJayMemory, list[list[dict[str, Any]]]]:
    """A memory (4 neighbours at most) holding a first batch of random notes, and the
    batches of the further ``sizes`` to add (one minute apart, ids ``n<i>``)."""
    rng = np.random.default_rng(seed)
    lut = {"": np.zeros(DIM, np.float32)}
    batches, start = [], 0
    for size in sizes:
        batch = []
        for i in range(start, start + size):
            lut[f"note {i}"] = _unit(rng.standard_normal(DIM))
            batch.append({"text": f"note {i}", "at": T0 + 60.0 * i, "id": f"n{i}"})
        batches.append(batch)
        start += size
    mem = _memory(chroma_server, lut, max_neighbors=4)
    mem.add_many(batches[0])
    return mem, batches


def test_a_batchs_rows_are_written_while_it_is_linked(chroma_server) -> None:
    """Server mode: the new rows go to the server while the batch is linked (the linking
    waits until their write has started, which passes only if the write runs beside it);
    their edges follow, and they are the edges an add with them would have written."""
    import threading

    mem, (first, second) = _stored_then(chroma_server, 14, 6, 6)
    try:
        writing = threading.Event()
        waited: list[bool] = []
        store = mem._store
        add_unlinked, link = getattr(store, "add_unlinked", None), mem._backend._link

        def add_rows(*args: Any, **kwargs: Any) -> Any:
            writing.set()
            assert add_unlinked is not None
            return add_unlinked(*args, **kwargs)

        def linking(*args: Any, **kwargs: Any) -> Any:
            waited.append(writing.wait(timeout=10))
            return link(*args, **kwargs)

        store.add_unlinked = add_rows  # type: ignore[attr-defined]
        mem._backend._link = linking  # type: ignore[method-assign]
        mem.add_many(second)
        assert waited == [True]
        for item in first + second:  # both ends list every edge
            for other, weight in _stored_edges(mem, item["id"]).items():
                assert _stored_edges(mem, other)[item["id"]] == weight
        assert all(_stored_edges(mem, item["id"]) for item in second)
    finally:
        mem.close()


def test_a_batch_whose_edges_write_fails_leaves_nothing(chroma_server) -> None:
    """When the update that gives the new rows their edges fails, the rows are deleted again
    and the older memories keep the edges they had; the same batch goes in afterwards."""
    from scrubjay.errors import StoreError

    mem, (first, second) = _stored_then(chroma_server, 15, 6, 4)
    try:
        before = {item["id"]: _stored_edges(mem, item["id"]) for item in first}
        store = mem._store
        update = store._update_meta

        def failing(ids: Any, metas: Any, what: Any) -> Any:
            if any("sj_edges" in m for m in metas):
                raise StoreError("the server went away")
            return update(ids, metas, what)

        store._update_meta = failing  # type: ignore[method-assign]
        with pytest.raises(StoreError, match="went away"):
            mem.add_many(second)
        store._update_meta = update  # type: ignore[method-assign]
        assert len(mem) == 6 and not any(item["id"] in mem for item in second)
        assert {item["id"]: _stored_edges(mem, item["id"]) for item in first} == before
        mem.add_many(second)
        assert len(mem) == 10 and all(_stored_edges(mem, i["id"]) for i in second)
    finally:
        mem.close()


def test_a_batch_whose_linking_fails_after_its_rows_went_leaves_nothing(
        chroma_server) -> None:
    """The rows' write runs beside the linking: when the linking fails, the rows that were
    written are deleted again and the error is raised as it is."""
    from scrubjay.errors import StoreError

    mem, (_, second) = _stored_then(chroma_server, 16, 5, 4)
    try:
        link = mem._backend._link

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise StoreError("a read of the candidates failed")

        mem._backend._link = failing  # type: ignore[method-assign]
        with pytest.raises(StoreError, match="candidates failed"):
            mem.add_many(second)
        mem._backend._link = link  # type: ignore[method-assign]
        assert len(mem) == 5 and not any(item["id"] in mem for item in second)
        assert not mem._store.existing([item["id"] for item in second])
        mem.add_many(second)
        assert len(mem) == 9
    finally:
        mem.close()


def test_a_batchs_rows_are_written_while_its_candidates_rows_are_read(chroma_server) -> None:
    """Once a batch's candidates are queried, its rows go to the server while the candidates'
    rows are still being read: that read waits until the rows' write has started, which
    passes only if the write starts before it ends. And when that read then fails, the rows
    written are deleted again."""
    import threading

    from scrubjay.errors import StoreError

    mem, (_, second, third) = _stored_then(chroma_server, 17, 6, 4, 3)
    try:
        store = mem._store
        add_unlinked, get = store.add_unlinked, store.get
        writing = threading.Event()
        waited: list[bool] = []
        fail = [False]

        def add_rows(*args: Any, **kwargs: Any) -> Any:
            writing.set()
            return add_unlinked(*args, **kwargs)

        def rows_read(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("vectors"):
                waited.append(writing.wait(timeout=10))
                if fail[0]:
                    raise StoreError("the server went away")
            return get(*args, **kwargs)

        store.add_unlinked = add_rows  # type: ignore[method-assign]
        store.get = rows_read  # type: ignore[method-assign]
        mem.add_many(second)
        assert waited == [True]
        assert len(mem) == 10 and all(_stored_edges(mem, i["id"]) for i in second)
        writing.clear()
        fail[0] = True
        with pytest.raises(StoreError, match="went away"):
            mem.add_many(third)
        assert len(mem) == 10 and not store.existing([i["id"] for i in third])
        store.get = get  # type: ignore[method-assign]
        mem.add_many(third)
        assert len(mem) == 13
    finally:
        mem.close()


def test_a_batchs_candidates_weigh_the_similarities_their_queries_gave(
        chroma_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows of a page's candidates are read without their what-vectors (a quarter of the
    bytes): their similarities come with the query. Only candidates that an item found by
    where or by time alone are read with them. Every edge weighs what the vectors give."""
    import scrubjay.backends.server as memory_module

    rng = np.random.default_rng(16)
    lut = {"": np.zeros(DIM, np.float32)}
    old, new = [], []
    for c in range(3):
        centre = _unit(rng.standard_normal(DIM))
        for i in range(12):
            text = f"old {c}.{i}"
            lut[text] = _unit(centre + 0.07 * rng.standard_normal(DIM))
            old.append({"text": text, "at": T0 + 600.0 * len(old), "id": f"o{c}.{i}"})
        for i in range(4):
            text = f"new {c}.{i}"
            lut[text] = _unit(centre + 0.07 * rng.standard_normal(DIM))
            new.append({"text": text, "at": T0 + 600.0 * 36 + 60.0 * len(new),
                        "id": f"n{c}.{i}"})
    mem = _memory(chroma_server, lut, max_neighbors=4)
    try:
        mem.add_many(old)
        monkeypatch.setattr(memory_module, "_LINK_QUERY_PAGE", 4)
        store = mem._store
        get = store.get
        reads: list[tuple[bool, list[str]]] = []

        def rows_read(ids: Any, **kwargs: Any) -> Any:
            if kwargs.get("vectors"):
                reads.append((kwargs.get("index_vectors", True), list(ids)))
            return get(ids, **kwargs)

        store.get = rows_read  # type: ignore[method-assign]
        mem.add_many(new)
        store.get = get  # type: ignore[method-assign]
        without = [ids for full, ids in reads if not full]
        with_vectors = [ids for full, ids in reads if full]
        assert len(without) == 3 and len(with_vectors) == 1  # the pages', then the rest
        assert sum(map(len, without)) > len(with_vectors[0])
        cfg = mem.config.graph
        at = {item["id"]: item["at"] for item in old + new}
        vec = {item["id"]: lut[item["text"]] for item in old + new}
        semantic = 0
        for item in new:
            for other, row in ((r[0], r) for r in json.loads(
                    mem._store.get([item["id"]])[0].meta["sj_edges"])):
                cos = float(vec[item["id"]].astype(np.float64) @ vec[other])
                e_s = cos if cos >= cfg.theta_semantic else 0.0
                e_t = float(np.exp(-cfg.lambda_temporal_per_s * abs(at[item["id"]] - at[other])))
                assert row[2] == pytest.approx(e_s, abs=1e-6)
                assert row[1] == pytest.approx(cfg.weight_semantic * e_s
                                               + cfg.weight_temporal * e_t, abs=1e-6)
                semantic += e_s > 0
        assert semantic >= len(new)
    finally:
        mem.close()


def test_a_memory_rci_moved_weighs_its_exact_vector_not_its_index_one(
        chroma_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory RCI moved keeps its exact what-vector in its metadata and its old one in the
    index, so a query's similarity to it is off: a new memory is weighed against the exact
    vector (read with the row), in a page's read and in the final one alike."""
    import scrubjay.backends.server as memory_module

    rng = np.random.default_rng(17)
    a = _unit(rng.standard_normal(DIM)).astype(np.float64)
    u = rng.standard_normal(DIM)
    u = (u - (u @ a) * a) / np.linalg.norm(u - (u @ a) * a)
    angle = 0.04
    b = _unit(np.cos(angle) * a + np.sin(angle) * u)
    lut = {"": np.zeros(DIM, np.float32), "old": a.astype(np.float32), "twin one": b,
           "twin two": b}
    mem = _memory(chroma_server, lut, max_neighbors=4)
    try:
        mem.add_many([{"text": "old", "at": T0, "id": "old"}])
        rec = mem.get("old")
        mem._store.update_rci(["old"], np.array([1.0]), np.array([rec.pi]),
                              np.array([rec.tau_s]), T0 + 1.0, b[None, :],
                              np.array([angle + 1e-6]))
        monkeypatch.setattr(memory_module, "_LINK_QUERY_PAGE", 1)  # two pages
        mem.add_many([{"text": "twin one", "at": T0 + 7200.0, "id": "t1"},
                      {"text": "twin two", "at": T0 + 7260.0, "id": "t2"}])
        for twin in ("t1", "t2"):
            rows = {r[0]: r for r in json.loads(mem._store.get([twin])[0].meta["sj_edges"])}
            assert rows["old"][2] == pytest.approx(float(b @ b), abs=1e-6)  # not cos 0.04
            assert abs(rows["old"][2] - np.cos(angle)) > 1e-4
    finally:
        mem.close()


def test_an_older_memory_whose_edges_come_back_as_they_were_is_not_rewritten(
        chroma_server) -> None:
    """With one edge each: the batch's first memory takes the lone older one's free slot,
    the second evicts that edge (it is nearer in time). The older memory ends as it was, so
    the batch's edge update leaves its row alone: an older row is a server's dearest update."""
    rng = np.random.default_rng(21)
    lut = {"": np.zeros(DIM, np.float32)}
    for text in ("lone", "first", "second"):
        lut[text] = _unit(rng.standard_normal(DIM))
    mem = _memory(chroma_server, lut, max_neighbors=1)
    try:
        mem.add_many([{"text": "lone", "at": T0, "id": "y"}])
        store = mem._store
        link_added = store.link_added
        rewritten: list[str] = []

        def spy(ids: Any, edges: Any, adjacency: Any = ()) -> Any:
            rewritten.extend(i for i, _ in adjacency)
            return link_added(ids, edges, adjacency=adjacency)

        store.link_added = spy  # type: ignore[method-assign]
        mem.add_many([{"text": "first", "at": T0 + 3000.0, "id": "x1"},
                      {"text": "second", "at": T0 + 3001.0, "id": "x2"}])
        store.link_added = link_added  # type: ignore[method-assign]
        edges = {r.id: [e[0] for e in json.loads(r.meta["sj_edges"])]
                 for r in store.get(["y", "x1", "x2"])}
        assert edges == {"y": [], "x1": ["x2"], "x2": ["x1"]}
        assert "y" not in rewritten
    finally:
        mem.close()


def _twin_batches(chroma_server, monkeypatch: pytest.MonkeyPatch, cut: bool
                  ) -> tuple[dict[str, str], int, set[str]]:
    """120 stored memories 30 s apart, then a batch of 100 continuing in time, every tenth a
    near-duplicate of a stored one (a semantic edge). Returns every row's adjacency, the rows
    the batch read, and the ids of its candidates' rows; ``cut=False`` reads every
    candidate's row (the cut left out)."""
    import scrubjay.backends.server as memory_module

    if not cut:
        monkeypatch.setattr(memory_module, "_cut_unreachable", lambda found, sims, *a: (found,
                                                                                       sims))
    rng = np.random.default_rng(31)
    lut = {"": np.zeros(DIM, np.float32)}
    old, new = [], []
    for i in range(120):
        lut[f"old {i}"] = _unit(rng.standard_normal(DIM))
        old.append({"text": f"old {i}", "at": T0 + 30.0 * i, "id": f"o{i}"})
    for i in range(100):
        twin = lut[f"old {(7 * i) % 120}"]
        lut[f"new {i}"] = (_unit(twin + 0.1 * rng.standard_normal(DIM)) if i % 10 == 0
                           else _unit(rng.standard_normal(DIM)))
        new.append({"text": f"new {i}", "at": T0 + 30.0 * (120 + i), "id": f"n{i}"})
    mem = _memory(chroma_server, lut, max_neighbors=4)
    try:
        mem.add_many(old)
        counts: Counter[str] = Counter()
        store = mem._store
        plain = store.what
        store.what = _RowCounting(plain, counts)
        link_reads = memory_module.ServerBackend._server_link_reads
        read: set[str] = set()

        def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
            got = link_reads(self, *args, **kwargs)
            read.update(got.rows)
            return got

        monkeypatch.setattr(memory_module.ServerBackend, "_server_link_reads", spy)
        mem.add_many(new)
        monkeypatch.setattr(memory_module.ServerBackend, "_server_link_reads", link_reads)
        store.what = plain
        rows = store.get([m["id"] for m in old + new])
        return {r.id: str(r.meta["sj_edges"]) for r in rows}, counts["rows"], read
    finally:
        mem.close()


def test_candidates_that_cannot_make_the_cut_are_not_read_and_the_graph_is_the_same(
        chroma_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A what-candidate under theta_S, no time candidate, of an item without a context
    weighs no more than the temporal term at the read by time's gap; when 4 * max_neighbors
    earlier items and time candidates are nearer, it cannot be among the item's strongest:
    its row is not read. Every stored adjacency equals the one a read of all gives."""
    with monkeypatch.context() as patch:
        full, full_rows, full_read = _twin_batches(chroma_server, patch, cut=False)
    with monkeypatch.context() as patch:
        lean, lean_rows, lean_read = _twin_batches(chroma_server, patch, cut=True)
    assert lean == full
    assert any(json.loads(full[f"n{i}"]) for i in range(0, 100, 10))
    # the near-duplicates' stored twins stay candidates: their semantic edges are there
    assert all(f"o{(7 * i) % 120}" in lean_read for i in range(0, 100, 10))
    assert lean_read < full_read and len(lean_read) <= len(full_read) // 2
    assert lean_rows < full_rows


def test_the_cut_keeps_what_it_cannot_rule_out() -> None:
    """Kept: a cosine within the RCI drift bound under theta_S, a time candidate, every
    candidate of an item with a context, of an item whose read by time has no bound (gap 0),
    and of an item with too few nearer memories; cut: the rest under theta_S."""
    import math

    from scrubjay.backends.server import _cut_unreachable
    from scrubjay.store import INDEX_DRIFT_MAX_RAD, TimeNeighbours

    cfg = GraphConfig(max_neighbors=2)  # 8 strongest: 8 nearer memories needed
    theta = cfg.theta_semantic
    close = math.cos(math.acos(theta) + INDEX_DRIFT_MAX_RAD / 2)  # under theta, within drift
    far = math.cos(math.acos(theta) + 2 * INDEX_DRIFT_MAX_RAD)
    t = np.arange(12, dtype=np.float64) * 10.0  # the batch, 10 s apart
    found = [["a", "b", "c", "d"] for _ in range(3)]
    sims = [[0.9, close, far, far] for _ in range(3)]
    times = [[float(x) - 500.0] for x in t]  # one time candidate each, 500 s before
    ids = [["d"] for _ in t]
    gaps = [600.0] * len(t)
    gaps[10] = 0.0  # item 10: its read stopped at the limit, no bound
    by_time = TimeNeighbours(ids=ids, times=times, gaps=gaps)
    cuttable = np.ones(len(t), bool)
    cuttable[11] = False  # item 11 has a context
    got, got_sims = _cut_unreachable(found, sims, 9, t, cuttable, by_time, cfg)
    assert got[0] == ["a", "b", "d"] and got_sims[0] == [0.9, close, far]  # c is cut
    assert got[1] == got[2] == ["a", "b", "c", "d"]
    # the first items of a batch have fewer than 8 nearer memories: nothing is cut
    early, _ = _cut_unreachable(found, sims, 0, t, cuttable, by_time, cfg)
    assert early == found


def test_the_cut_waits_for_the_read_by_time_outside_the_query_worker(
        chroma_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cut needs the read by time, which runs in another worker; a worker that waited on
    another could deadlock two batches stored at once (the workers are shared, one thread
    each), so the cut runs in the thread that reads the answers, never in the query worker."""
    import threading

    import scrubjay.backends.server as memory_module

    threads: list[str] = []
    cut = memory_module._cut_unreachable

    def spy(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return cut(*args, **kwargs)

    monkeypatch.setattr(memory_module, "_cut_unreachable", spy)
    monkeypatch.setattr(memory_module, "_LINK_QUERY_PAGE", 4)
    lut, items = _notes(41, 40, 30.0, prefix="q")
    mem = _memory(chroma_server, lut, max_neighbors=2)
    try:
        mem.add_many(items[:20])
        mem.add_many(items[20:])
        assert len(threads) >= 5  # one per page of the second batch
        assert not any(name.startswith("scrubjay-query") for name in threads)
    finally:
        mem.close()
