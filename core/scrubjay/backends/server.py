"""The server backend: a Chroma server namespace, of which nothing is held here.

Several processes may share the namespace; this backend asks Chroma for every answer, so it
is always current and costs no memory per memory. A relevance search ranks from Chroma's
distances and metadata (no vectors are transferred) and widens its candidates until the k-th
key beats a bound on every memory left out; the hits' graph bonus is deferred to their first
access. A batch's link candidates come from Chroma's nearest neighbours by what and by where
and from reads by time, read while the batch is classified. An embedded store opened with
``SearchConfig(mirror=False)`` works the same way over its local Chroma.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..codec import INDEX_DRIFT_MAX_RAD, RowsBackup, StoredRow, record_of, row_text
from ..config import GraphConfig
from ..decay import utility
from ..errors import ScrubJayError
from ..fusion import fuse, lexical_score_idf
from ..graph import (
    EpisodicGraph,
    edge_weight_from_similarity,
    edge_weights_from_similarity,
    temporal_horizon_s,
)
from ..lexical import LexicalIndex
from ..linking import NO_CANDIDATES, LinkCandidates, pair_dots
from ..mirror import Rows, rows_as_of, temporal_arrays
from ..ranking import Query, partial_scores
from ..rci import affinities
from ..scoring import drifted_similarity_bound, relevance_bound, relevance_key
from ..timeline import CURRENT, REASONS, records_as_of, stale_reasons, time_factor, visible
from ..timeread import TimeNeighbours
from ..types import Hit, MemoryRecord, Perishability
from .base import BaseBackend, Batch
from .following import FollowsChangeLog
from .mirrored import SERVER_FIRST_PER_K, SERVER_WIDEN

__all__ = ["ServerBackend"]

logger = logging.getLogger(__name__)

#: Server mode: new memories per what query of their link candidates; each page's
#: candidates' rows are read while the next page is queried (2,000 new memories after
#: 8,000: 1.0-1.2 s for one query then one read, 0.65-0.73 s in pages of 250).
_LINK_QUERY_PAGE = 250


@dataclass(slots=True)
class _Scored:
    """Server candidates scored from Chroma's distances, sorted by id (no vectors)."""

    records: list[MemoryRecord]
    sim_what: NDArray[np.float64]
    sim_where: NDArray[np.float64]
    edges: dict[str, str]
    """Each candidate's adjacency payload (``sj_edges``), for the deferred graph bonus."""
    bound: float
    """Upper bound of the relevance key of any memory not among them (-inf: none is left)."""
    ell: NDArray[np.float64]
    """Each candidate's lexical score (0 outside the lexical channel's hits)."""

    @property
    def value(self) -> NDArray[np.float64]:
        return np.array([r.value for r in self.records], dtype=np.float64)


@dataclass(slots=True)
class _Top:
    """The relevance top ``k`` of some candidates (:meth:`ServerBackend._server_top`)."""

    kth: float
    """The k-th key, -inf when fewer than k compete."""
    top: NDArray[np.intp]
    """The top k, best first (ties by id)."""
    key: NDArray[np.float64]
    utility: NDArray[np.float64]
    why: NDArray[np.int8]
    factor: NDArray[np.float64]
    lexical: bool
    """Whether the lexical channel is fused: a competing candidate is among its hits."""


class _LexicalHits:
    """A server search's lexical hits: their ``ell`` and their rows, fetched once (with
    vectors, beside the search's first dense queries) and scored exactly."""

    def __init__(self, ell: dict[str, float], rows: Future[list[StoredRow]],
                 e_q: NDArray[np.float32], c_q: NDArray[np.float32]) -> None:
        self.ell = ell
        self._rows: Future[list[StoredRow]] | None = rows
        self._q = (e_q, c_q)
        self._scored: tuple[list[StoredRow], list[float], dict[str, float]] | None = None

    def scored(self) -> tuple[list[StoredRow], list[float], dict[str, float]]:
        """``(rows, what-similarities, where-similarity by id)`` of the hits still stored."""
        if self._scored is None:
            assert self._rows is not None
            rows, self._rows = self._rows.result(), None
            e_q, c_q = self._q
            sims = [float(r.what @ e_q) for r in rows]  # type: ignore[operator]
            where = {r.id: float(r.where @ c_q) for r in rows if r.where is not None}
            self._scored = rows, sims, where
        return self._scored

    def close(self) -> None:
        """Wait for the fetch when no search step did (its failure is the search's)."""
        if self._rows is not None:
            with contextlib.suppress(Exception):
                self._rows.result()


@dataclass(slots=True)
class _LinkReads:
    """Server mode: a batch's link candidates as read from Chroma."""

    per_item: list[set[str]]
    """The candidate ids of each new item."""
    rows: dict[str, StoredRow]
    """Their rows (a candidate deleted meanwhile is absent). ``what`` is read only where a
    similarity below is missing or off (an RCI-moved row carries its exact vector)."""
    similar: list[dict[str, float]]
    """Per new item, the cosine of each of its nearest by what, as the query returned it."""


def _per_item(ids: Sequence[str], what: NDArray[np.float32], by_what: list[list[str]],
              sims: list[list[float]], by_where: Mapping[int, list[str]],
              by_time: list[list[str]]) -> tuple[list[set[str]], list[dict[str, float]]]:
    """Server mode: each new item's link candidates (its nearest by what, by where and in
    time, itself left out) and the similarities its what-query gave (none for an item whose
    what-vector is zero: Chroma's cosine distance is undefined there)."""
    per_item: list[set[str]] = []
    similar: list[dict[str, float]] = []
    nonzero = np.any(what, axis=1).tolist()
    for i, mid in enumerate(ids):
        mine = set(by_what[i])
        mine.update(by_where.get(i, ()))
        mine.update(by_time[i])
        mine.discard(mid)
        per_item.append(mine)
        known = dict(zip(by_what[i], sims[i], strict=True)) if nonzero[i] else {}
        similar.append({c: s for c, s in known.items() if math.isfinite(s)})
    return per_item, similar


def _cut_unreachable(found: list[list[str]], sims: list[list[float]], lo: int,
                     t_new: NDArray[np.float64], cuttable: NDArray[np.bool_],
                     by_time: TimeNeighbours, cfg: GraphConfig
                     ) -> tuple[list[list[str]], list[list[float]]]:
    """Server mode: the what-query answers of new items ``lo, lo + 1, ...`` without the
    candidates that cannot be among an item's ``4 * max_neighbors`` strongest, the cut that
    :meth:`ScrubJayMemory._link` makes over the union of its stored and earlier candidates:
    their rows need no read. The linking is the same as with them.

    Such a candidate weighs ``w_T e_T`` at most: its cosine is under ``theta_S`` even after
    an RCI move of up to :data:`~scrubjay.codec.INDEX_DRIFT_MAX_RAD` (``e_S = 0``), the item
    has no context (``e_C = 0``), and it is no time candidate, so it is no nearer in time
    than the gap the read by time gives. Every earlier item of the batch and every time
    candidate weighs at least its own ``w_T e_T`` (the thresholds are not negative), so when
    ``4 * max_neighbors`` of them are nearer in time than that gap, with a margin over the
    edges' rounding, the candidate is cut. A bundled-embedder batch's what-candidates are
    mostly such (its texts rarely pass theta_S), so most of their rows need no read. Only an item
    in ``cuttable`` (a what-vector, no where-vector) is looked at; its earlier items within
    ``8 * max_neighbors`` places before it count (a batch in time order has its nearest there).
    """
    width = 4 * cfg.max_neighbors
    angle = math.acos(min(1.0, max(-1.0, cfg.theta_semantic))) + INDEX_DRIFT_MAX_RAD
    if (width == 0 or cfg.weight_temporal <= 0 or cfg.lambda_temporal_per_s <= 0
            or cfg.theta_semantic < 0
            or cfg.theta_contextual < 0 or angle >= math.pi):
        return found, sims
    below = math.cos(angle) - 1e-6  # a query cosine under it: e_S = 0 for sure
    rows = np.arange(lo, lo + len(found))
    # per item, the time gaps to its earlier items in the window and to its time candidates
    window = 2 * width
    before = rows[:, None] - window + np.arange(window)[None, :]
    gaps = np.where(before >= 0, np.abs(t_new[np.maximum(before, 0)] - t_new[rows, None]),
                    np.inf)
    near_t = [by_time.times[i] for i in rows.tolist()]
    cand = np.full((len(rows), max(map(len, near_t), default=0)), np.inf)
    for r, ts in enumerate(near_t):
        cand[r, :len(ts)] = np.abs(np.asarray(ts) - t_new[lo + r])
    nearest = np.partition(np.concatenate([gaps, cand], axis=1), width - 1, axis=1)[:, width - 1]
    # the temporal term alone (cosines 0, no context): the weakest of those nearer, and the
    # most a candidate beyond the gap can weigh
    zero = np.zeros(len(rows))
    floor = edge_weight_from_similarity(zero, None, nearest, cfg)
    bound = edge_weight_from_similarity(zero, None, np.asarray(by_time.gaps)[rows], cfg)
    out_found, out_sims = [], []
    for r, i in enumerate(rows.tolist()):
        ids, cos = found[r], sims[r]
        if cuttable[i] and floor[r] > bound[r] + 1e-6:
            timed = set(by_time.ids[i])
            keep = [j for j, (c, x) in enumerate(zip(ids, cos, strict=True))
                    if c in timed or not x < below]  # (a NaN cosine is kept)
            ids, cos = [ids[j] for j in keep], [cos[j] for j in keep]
        out_found.append(ids)
        out_sims.append(cos)
    return out_found, out_sims


class _Queried:
    """Server mode: set once a batch's reads by vector and by time are done (``ok``) or
    will not be (the reads failed or the batch replaces stored ids)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.ok = False

    def mark(self, ok: bool) -> None:
        if not self._event.is_set():
            self.ok = ok
            self._event.set()

    def wait(self) -> bool:
        """Wait for the mark; whether the queries are done."""
        self._event.wait()
        return self.ok


class ServerBackend(FollowsChangeLog, BaseBackend):
    """A namespace read and written through Chroma only: nothing of it is held here but the
    lexical index of its texts (the lexical channel, when on), kept current by the change log."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Adjacency payloads of the rows the last reads brought (a search's graph bonus).
        self._graph_cache: dict[str, str] = {}

    # ------------------------------------------------------------------ the lexical channel
    def _load(self) -> None:
        """The lexical index, built in RAM from the stored texts (no vectors are read), and
        following the change log from before that read on."""
        if self.lexical_wanted:
            self._start_log_cursor()
            self._lexical.index = LexicalIndex.in_memory(self._lexical_texts(),
                                                         namespace=self.store.namespace)

    def _lexical_texts(self) -> list[tuple[str, str]]:
        return [(r.id, r.text) for r in self.store.iter_all(vectors=False)]

    def searching(self, run: Callable[[], list[Hit]]) -> list[Hit]:
        """``run()`` with the change log read beside it when the lexical channel is on (the
        lexical index learns of other processes' writes; Chroma answers the rest)."""
        return self._search_following(run) if self._lexical.on else run()

    def _apply_logged(self, ids: set[str] | None) -> None:
        if ids is None:  # the log no longer reaches back to the last sync
            self._start_log_cursor()
            self._lexical.rebuild(self._lexical_texts)
            return
        rows = self.store.get(sorted(ids))
        present = {r.id for r in rows}
        self._lexical.delete([i for i in sorted(ids) if i not in present])
        self._lexical.add((r.id, r.text) for r in rows)

    def _written(self, records: list[MemoryRecord], what: NDArray[np.float32],
                 where: NDArray[np.float32], changed: set[str]) -> None:
        self._lexical.add((r.id, r.text) for r in records)

    def _restored(self, backup: RowsBackup) -> None:
        self._lexical.add((i, row_text(meta or {}, doc)) for i, meta, doc in
                          zip(backup.ids, backup.metadatas, backup.documents, strict=True))

    def size(self) -> int:
        return self.store.count()

    def known_empty(self) -> bool:
        return False  # (an empty store answers an empty query: no count() round trip)

    def neighbours(self, mid: str) -> list[tuple[str, float]]:
        return _parse_edges(self._graph_cache.get(mid))

    def _rows_read(self, stored: list[StoredRow]) -> None:
        for r in stored:
            self._graph_cache[r.id] = r.meta.get("sj_edges", "[]")

    def _link_graph(self) -> EpisodicGraph:
        # a per-batch graph: the candidates' adjacency, read with them
        return EpisodicGraph(self.config.graph)

    def _link_reads(self, records: list[MemoryRecord], what: NDArray[np.float32],
                    where: NDArray[np.float32], reads: Any) -> Any:
        if reads is None and self.config.graph.max_neighbors > 0:
            reads = self._server_link_reads([r.id for r in records],
                                            [r.created_at_s for r in records], what, where)
        return reads

    def _classify_and_read(
            self, batch: Batch,
            write_early: Callable[[list[Perishability]], tuple[list[MemoryRecord],
                                                               Future[None]]] | None = None,
    ) -> tuple[list[Perishability], list[str], Any,
               tuple[list[MemoryRecord], Future[None]] | None]:
        """A batch's perishability, the ids it replaces and (server mode) its link candidates'
        reads, which run in a worker while this thread classifies: the requests wait on the
        server, not on this process's interpreter. ``write_early``: called with the labels
        once the candidates' queries are done and the batch replaces nothing, to start the
        rows' write while the candidates' rows are still being read (its result is
        returned; it is undone if the reads then fail)."""
        classify, ids, chosen = batch.classify, batch.ids, batch.chosen
        what, where = batch.what, batch.where
        if self.config.graph.max_neighbors == 0:
            return classify(), self._existing(chosen), None, None
        queried = _Queried()

        def read() -> tuple[list[str], _LinkReads | None]:
            try:
                found = self._existing(chosen)
                if found:  # the replaced rows must go before the candidates are read
                    return found, None
                return found, self._server_link_reads(ids, batch.times, what,
                                                      where, in_worker=True, queried=queried)
            finally:
                queried.mark(False)  # no-op once the queries were marked done

        later = self._worker("main").submit(read)
        early = None
        try:
            labels = classify()
            if write_early is not None and queried.wait():
                # the queries saw the store without the batch: its rows may go now
                early = write_early(labels)
            replaced, reads = later.result()
        except BaseException:
            with contextlib.suppress(Exception):
                later.result()
            if early is not None:
                self._drop_unlinked(early[1], ids)
            raise
        return labels, replaced, reads, early

    def _server_link_reads(self, ids: Sequence[str], times: Sequence[float],
                           what: NDArray[np.float32], where: NDArray[np.float32], *,
                           in_worker: bool = False,
                           queried: _Queried | None = None) -> _LinkReads:
        """Server mode: a batch's link candidates, read from Chroma (requests only, no graph:
        :meth:`_store_items` runs them in a worker thread while it classifies).

        Per new item: its ``max_neighbors`` nearest by what, with their cosines (one query
        per :data:`_LINK_QUERY_PAGE` new memories) and by where (one query), and its
        ``2 * max_neighbors`` nearest in time on each side within
        :func:`~scrubjay.graph.temporal_horizon_s` (one read per stretch of time); then the
        rows of them all. So a batch costs a few requests per page, not per memory, and they
        overlap: the reads by time run beside the first queries, the pages are queried two at
        once (the server answers them on two cores), and the rows of each page's new
        candidates are read, without their what-vectors, while the next pages are queried
        (the server searches while this process decodes rows). A page's what-candidates
        that cannot be among an item's strongest are left out before its read
        (:func:`_cut_unreachable`: the read by time is waited for). A last read takes, with
        their what-vectors, the candidates that some item has no cosine for (found by where
        or by time alone). ``in_worker``: this runs in the ``main`` worker already (its
        own requests go to the ``inner`` one). The candidates' where-vectors are read only
        when a new item has one. ``queried`` is marked once no request of the batch reads
        the store by vector or by time any more (the batch's rows may then be written: no
        query can see them).
        """
        cfg = self.config.graph
        k = cfg.max_neighbors
        has_where = [i for i in range(len(ids)) if np.any(where[i])]
        horizon = temporal_horizon_s(cfg)
        pool = self._worker("inner" if in_worker else "main")

        def by_time_read() -> TimeNeighbours:
            # the newest time known here (the namespace's state at open, then this process's
            # adds) spares a fresh store object an upward read through newer memories
            return self.store.nearest_in_time_bounded(times, horizon, 2 * k,
                                                       newest_hint=self.newest_t) \
                if horizon is not None else TimeNeighbours.of([([], [], 0.0) for _ in ids])

        requested: set[str] = set()
        pending: list[Future[list[StoredRow]]] = []

        def new_ids(found: Iterable[list[str]]) -> list[str]:
            """The candidates in ``found`` whose rows are not asked for yet, now asked for."""
            new = {c for cands in found for c in cands} - requested
            requested.update(new)
            return sorted(new)

        def read_rows(found: Iterable[list[str]]) -> None:
            """Read, in the worker, the rows of the candidates in ``found`` not asked yet,
            without their what-vectors: the queries gave their similarities."""
            new = new_ids(found)
            if new:
                # a candidate's where-vector counts only against a new memory that has one
                pending.append(pool.submit(self.store.get, new, vectors=True,
                                           where_vectors=bool(has_where),
                                           index_vectors=False))

        cuttable = np.any(what, axis=1) & ~np.any(where, axis=1)
        t_new = np.asarray(times, dtype=np.float64)

        def query(lo: int) -> tuple[list[list[str]], list[list[float]]]:
            return self.store.query_many_similar("what", what[lo:lo + _LINK_QUERY_PAGE], k)

        by_time_later = pool.submit(by_time_read)
        beside: Future[tuple[list[list[str]], list[list[float]]]] | None = None
        try:
            by_what: list[list[str]] = []
            sims: list[list[float]] = []
            pages = range(0, len(ids), _LINK_QUERY_PAGE)
            for pair in range(0, len(pages), 2):
                # two pages at once: a server answers them on two cores; the rows of the
                # pair before are read meanwhile
                if pair + 1 < len(pages):
                    beside = self._worker("query").submit(query, pages[pair + 1])
                answers = [(pages[pair], query(pages[pair]))]
                if beside is not None:
                    answers.append((pages[pair + 1], beside.result()))
                for lo, answer in answers:
                    # here, not in the query worker: a worker waits on no other worker
                    page, page_sims = _cut_unreachable(*answer, lo, t_new, cuttable,
                                                       by_time_later.result(), cfg)
                    by_what.extend(page)
                    sims.extend(page_sims)
                    if len(pages) > 1:
                        read_rows(page)
                beside = None
            by_where: dict[int, list[str]] = {}
            if has_where:
                by_where = dict(zip(has_where, self.store.query_many(
                    "where", where[has_where], k), strict=True))
            by_time = by_time_later.result().ids
            if queried is not None:  # no request of this batch reads the store by vector
                queried.mark(True)   # or time any more: its rows may be written
            per_item, similar = _per_item(ids, what, by_what, sims, by_where, by_time)
            # the rest, and every candidate some item has no similarity for: one read of
            # rows with their what-vectors, here (it wins over a page's read of the same row)
            needed = {c for mine, known in zip(per_item, similar, strict=True)
                      for c in mine if c not in known}
            last = sorted(set(new_ids([*by_what[-_LINK_QUERY_PAGE:], *by_where.values(),
                                       *by_time])) | needed)
            got = [row for later in pending for row in later.result()]
            got.extend(self.store.get(last, vectors=True, where_vectors=bool(has_where)))
        finally:  # nothing is left running when a request failed
            started: list[Future[Any]] = [by_time_later, *pending,
                                          *([beside] if beside is not None else [])]
            for later in started:
                with contextlib.suppress(Exception):
                    later.result()
        read = {r.id: r for r in got}
        return _LinkReads(per_item=per_item, rows={i: read[i] for i in sorted(read)},
                          similar=similar)

    def _link_candidates(self, records: list[MemoryRecord], what: NDArray[np.float32],
                         where: NDArray[np.float32], graph: EpisodicGraph,
                         reads: Any = None) -> LinkCandidates:
        """Server mode: exact edge weights on the candidates of :meth:`_server_link_reads`
        (read now unless ``reads`` were read meanwhile)."""
        cfg = self.config.graph
        if reads is None:
            reads = self._server_link_reads([r.id for r in records],
                                            [r.created_at_s for r in records], what, where)
        per_item, rows = reads.per_item, reads.rows
        for r in rows.values():  # their adjacency, so the degree caps hold
            graph.loads(r.id, r.meta.get("sj_edges"))
        if not rows:
            return LinkCandidates.pad([NO_CANDIDATES] * len(records))
        # the candidates' vectors and times as matrices (a row read without its what-vector
        # has zeros there and is flagged), and every (item, candidate) pair as flat arrays
        index = {c: j for j, c in enumerate(rows)}
        zero = np.zeros(what.shape[1], dtype=np.float32)
        all_what = np.stack([zero if r.what is None else r.what for r in rows.values()])
        has_what = np.array([r.what is not None for r in rows.values()])
        # a row RCI moved sits in the index off its exact vector: its query similarity is off
        moved = np.array([r.drift_rad > 0.0 for r in rows.values()])
        all_t = np.array([float(r.meta.get("sj_t", 0.0)) for r in rows.values()])
        lists = [[c for c in sorted(mine) if c in index] for mine in per_item]
        flat = [c for cands in lists for c in cands]
        item = np.repeat(np.arange(len(lists)), [len(cands) for cands in lists])
        col = np.fromiter((index[c] for c in flat), dtype=np.intp, count=len(flat))
        known = np.fromiter((sims.get(c, math.nan) for sims, cands
                             in zip(reads.similar, lists, strict=True) for c in cands),
                            dtype=np.float64, count=len(flat))
        queried = ~np.isnan(known) & ~moved[col]
        sim_s = np.where(queried, known, 0.0)
        need = np.flatnonzero(~queried)
        sim_s[need] = pair_dots(all_what, col[need], what, item[need])
        sim_c = np.zeros(len(flat))
        if np.any(where):
            all_where = np.stack([zero if r.where is None else r.where for r in rows.values()])
            sim_c = pair_dots(all_where, col, where, item)
        t_new = np.array([r.created_at_s for r in records])
        weights = edge_weights_from_similarity(sim_s, sim_c, np.abs(all_t[col] - t_new[item]),
                                               cfg)
        ok = queried | has_what[col]  # a row gone before its vector was read: no candidate
        ids = np.array(flat, dtype=object)
        if not ok.all():
            weights = tuple(a[ok] for a in weights)
            item, ids = item[ok], ids[ok]
        return LinkCandidates.from_pairs(len(records), item, ids, weights)

    # ------------------------------------------------------------------ search
    def search(self, q: Query) -> list[Hit]:
        if self.config.search.ranking == "relevance":
            return self._server_relevance(q)
        rows = rows_as_of(self._server_candidates(q.e_q, q.c_q), q.t_q)
        keep = visible(rows.t, q.t_q)  # memories told after the query time are not seen
        if q.exclude_stale:
            _, reason = stale_reasons(rows.value, rows.pi, rows.tau, rows.valid_from,
                                      rows.valid_until, rows.invalidated, q.t_q,
                                      self.config.decay.stale_ratio)
            keep &= reason == CURRENT
        if not keep.all():
            rows = rows.take(np.flatnonzero(keep))
        return self.rank(rows, q)

    def _outside(self, missing: list[str], q: Query) -> Rows:
        return rows_as_of(self._fetch_rows(missing, where=bool(np.any(q.c_q))), q.t_q)

    def _server_candidates(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32]) -> Rows:
        n = self.config.search.candidates
        if not np.any(c_q):  # no where channel: one query brings the rows themselves
            stored = self.store.query_rows(e_q, n, where_vectors=False)
            return self._rows_of(sorted(stored, key=lambda r: r.id))
        ids = set(self.store.query("what", e_q, n)[0])
        ids.update(self.store.query("where", c_q, n)[0])
        return self._fetch_rows(sorted(ids))

    def _server_relevance(self, q: Query) -> list[Hit]:
        """Relevance search against a Chroma server: the key needs only the similarities
        (from Chroma's distances) and the value (metadata), so no vector is transferred but
        the lexical hits' (below).

        It asks for ``SERVER_FIRST_PER_K * k`` candidates and widens them by ``SERVER_WIDEN``
        (up to ``SearchConfig.candidates``) until the k-th key is at least the bound of every
        memory left out: exact up to Chroma's HNSW approximation, provided no memory left out
        has a value above the largest one seen (the default, the candidates' and those this
        process wrote through RCI). The lexical channel's hits are candidates too, their rows
        fetched with vectors beside the first dense queries; a memory outside them has
        ``ell = 0``, so once the channel is fused its key is at most ``(1 - lambda)`` times its
        dense bound. The hits' graph bonus is deferred (see :class:`Hit`).
        """
        e_q, c_q, weights, k, t_q = q.e_q, q.c_q, q.weights, q.k, q.t_q
        lexical = self._lexical_hits(q)
        cap = max(self.config.search.candidates, k)
        n = min(cap, SERVER_FIRST_PER_K * k)
        try:
            while True:
                cand = self._server_scored(
                    e_q, c_q, weights, n, lambda c: self._server_top(c, q), lexical)
                best = self._server_top(cand, q)
                if cand.bound <= best.kth or n >= cap:
                    break
                n = min(cap, SERVER_WIDEN * n)
        finally:
            if lexical is not None:
                lexical.close()
        top, key, u, why, factor = best.top, best.key, best.utility, best.why, best.factor
        graph_of = _DeferredGraph(self, cand, [cand.records[i].id for i in top], e_q, c_q,
                                  weights, t_q)
        w = tuple(float(x) for x in weights)
        lam = self.config.search.lexical_weight if best.lexical else 0.0
        records, _ = records_as_of(cand.records, t_q)  # as they were at t_q
        return [Hit.deferred(graph_of=graph_of, record=records[i], score=float(key[i]),
                             utility=float(u[i]), stale=bool(why[i] != CURRENT),
                             what=float(cand.sim_what[i]), where=float(cand.sim_where[i]),
                             when=float(u[i]), weights=w,  # type: ignore[arg-type]
                             stale_reason=REASONS.get(int(why[i])),
                             time_factor=float(factor[i]),
                             lexical=float(cand.ell[i]) if best.lexical else 0.0,
                             lexical_weight=lam)
                for i in top]

    def _lexical_hits(self, q: Query) -> _LexicalHits | None:
        """The query's lexical hits (None: none, or the channel is off), their rows' fetch
        started in a worker."""
        ids, bm25, idf_sum = self._lexical.query(q)
        if not ids or not idf_sum > 0:
            return None
        ell = dict(zip(ids, lexical_score_idf(bm25, idf_sum).tolist(), strict=True))
        rows = self._worker("inner").submit(self.store.get, ids, vectors=True,
                                            where_vectors=bool(np.any(q.c_q)))
        return _LexicalHits(ell, rows, q.e_q, q.c_q)

    def _server_top(self, cand: _Scored, q: Query) -> _Top:
        """The top ``q.k`` of ``cand`` by :func:`~scrubjay.ranking.relevance_keys`' key (its
        time factor is at most 1, so the relevance bounds of the memories left out still
        hold), with the lexical channel fused when a competing candidate is among its hits."""
        t_q, cfg = q.t_q, self.config.search
        value = cand.value
        recs, changed = records_as_of(cand.records, t_q)  # RCI's later updates taken back
        if changed:
            value = value.copy()
            value[changed] = [recs[i].value for i in changed]
        t = np.array([r.created_at_s for r in recs], dtype=np.float64)
        times = temporal_arrays(recs)
        u, why = stale_reasons(value, np.array([r.pi for r in recs], dtype=np.float64),
                               np.array([r.tau_s for r in recs], dtype=np.float64),
                               times["valid_from"], times["valid_until"], times["invalidated"],
                               t_q, self.config.decay.stale_ratio)
        factor, _ = time_factor(why, t, t_q, superseded_weight=cfg.superseded_weight,
                                stale_weight=cfg.stale_weight,
                                recency_weight=cfg.recency_weight,
                                recency_horizon_s=cfg.recency_horizon_s)
        ok = visible(t, t_q)
        if q.exclude_stale:
            ok &= why == CURRENT
        fused = bool(np.any(cand.ell[ok] > 0))
        a, b = float(q.weights[0]), float(q.weights[1])
        rel = (a * cand.sim_what + b * cand.sim_where) / (a + b)
        if fused:
            rel = fuse(rel, cand.ell, cfg.lexical_weight)
        key = rel * value / self.config.decay.default_value * factor
        pool = np.flatnonzero(ok)
        top = pool[np.lexsort((pool, -key[pool]))][:q.k]
        kth = float(key[top[-1]]) if len(top) == q.k else -math.inf
        return _Top(kth=kth, top=top, key=key, utility=u, why=why, factor=factor,
                    lexical=fused)

    def _server_scored(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                       weights: NDArray[np.float64], n: int,
                       top_of: Callable[[_Scored], _Top],
                       lexical: _LexicalHits | None = None) -> _Scored:
        """The top ``n`` by what (and by where, with a context) with both similarities exact,
        and the lexical hits.

        Without a context: one query. With one: a query of each collection; a candidate found
        by one only lacks the other similarity, which is then bounded by that list's last
        one (threshold algorithm). Only candidates whose bound beats the k-th key of the
        complete ones (``top_of``) are completed from their vectors (a ``get`` of the
        where-vectors of what candidates, of the rows of where candidates); the others count
        in ``bound``. The lexical hits come complete (``lexical``).
        """
        ell = lexical.ell if lexical is not None else {}
        if not np.any(c_q):
            what_rows, sim_what = self.store.query_scored("what", e_q, n, rows=True)
            what_floor = self._what_floor(what_rows, sim_what, n)
            rows, sims, sim_where = self._with_lexical(list(what_rows), sim_what.tolist(), {},
                                                       lexical)
            out = self._scored(rows, sims, sim_where, weights, what_floor, 0.0, ell)
            if lexical is not None and top_of(out).lexical:
                out.bound = _scaled(out.bound, 1.0 - self.config.search.lexical_weight)
            return out
        v0 = self.config.decay.default_value
        (what_rows, sim_what), (where_rows, sim_c) = self._concurrently(
            lambda: self.store.query_scored("what", e_q, n, rows=True),
            lambda: self.store.query_scored("where", c_q, n, rows=False))
        what_floor = self._what_floor(what_rows, sim_what, n)
        sim_where = {r.id: float(x) for r, x in zip(where_rows, sim_c, strict=True)}
        # a full where list bounds the where-similarity of the others by its last one, or by
        # 0 for those without a where row (no context); a short one lists every where row.
        # A memory stored without a context has no where row: 0, known from its metadata.
        where_floor = max(0.0, float(sim_c[-1])) if len(where_rows) == n else 0.0
        lacking = [i for i, r in enumerate(what_rows) if r.id not in sim_where
                   and len(where_rows) == n and r.meta.get("sj_ctx") and r.id not in ell]
        complete = sorted(set(range(len(what_rows))) - set(lacking))
        known_rows, known_sims, sim_where = self._with_lexical(
            [what_rows[i] for i in complete], [float(sim_what[i]) for i in complete],
            sim_where, lexical)
        known = self._scored(known_rows, known_sims, sim_where, weights, what_floor,
                             where_floor, ell)
        best = top_of(known)
        kth = best.kth
        # a candidate outside the lexical hits has ell = 0: once fused, its key is at most
        # (1 - lambda) times its dense bound
        scale = 1.0 - self.config.search.lexical_weight if best.lexical else 1.0
        value_max = self._value_max_of(known.records)
        in_what = {r.id for r in what_rows}
        by_where = [r.id for r in where_rows if r.id not in in_what and r.id not in ell]
        ub_what = [scale * relevance_key(weights, np.array([sim_what[i]]),
                                         np.array([where_floor]),
                                         np.array([record_of(what_rows[i]).value]), v0)[0]
                   for i in lacking]
        ub_where = [scale * relevance_bound(weights,
                                            what_floor if what_floor is not None else 1.0,
                                            sim_where[m], value_max, v0) for m in by_where]
        fill = [lacking[j] for j, ub in enumerate(ub_what) if ub > kth]
        fetch = [m for m, ub in zip(by_where, ub_where, strict=True) if ub > kth]
        pruned = [ub for ub in ub_what + ub_where if ub <= kth]
        vecs, extra = self._concurrently(
            lambda: self.store.where_vectors([what_rows[i].id for i in fill]),
            lambda: self.store.get(fetch, vectors=True, where_vectors=False))
        for mid, vec in vecs.items():
            sim_where[mid] = float(vec @ c_q)
        rows = known_rows + [what_rows[i] for i in fill] + extra
        sims = known_sims + [float(sim_what[i]) for i in fill] + \
            [float(r.what @ e_q) for r in extra]
        logger.debug("server search, n=%d: %d complete, %d completed, %d bounded out", n,
                     len(complete), len(fill) + len(extra), len(pruned))
        out = self._scored(rows, sims, sim_where, weights, what_floor, where_floor, ell)
        out.bound = max([_scaled(out.bound, scale)] + pruned)
        return out

    @staticmethod
    def _with_lexical(rows: list[StoredRow], sims: list[float], sim_where: dict[str, float],
                      lexical: _LexicalHits | None
                      ) -> tuple[list[StoredRow], list[float], dict[str, float]]:
        """Dense candidates and the lexical hits, each once (a hit's own row and exact
        similarities replace its dense one)."""
        if lexical is None:
            return rows, sims, sim_where
        lex_rows, lex_sims, lex_where = lexical.scored()
        hit = {r.id for r in lex_rows}
        keep = [i for i, r in enumerate(rows) if r.id not in hit]
        return ([rows[i] for i in keep] + lex_rows, [sims[i] for i in keep] + lex_sims,
                {**sim_where, **lex_where})

    def _what_floor(self, rows: list[StoredRow], sims: NDArray[np.float64],
                    n: int) -> float | None:
        """The largest exact what-similarity a memory left out of a full list of ``n`` can
        have (None when the list is short: it holds every memory). The list is cut by index
        similarity; an index vector is at most ``_drift_max`` rad from its memory's exact one
        (RCI defers rewrites), so the last index similarity is widened by that angle."""
        if len(rows) < n:
            return None
        self._drift_max = max([self._drift_max] + [r.drift_rad for r in rows])
        # the last row's own similarity is exact: its index one is within its drift of it
        return drifted_similarity_bound(float(sims[-1]), self._drift_max + rows[-1].drift_rad)

    def _scored(self, rows: list[StoredRow], sim_what: list[float],
                sim_where: Mapping[str, float], weights: NDArray[np.float64],
                what_floor: float | None, where_floor: float,
                ell: Mapping[str, float] | None = None) -> _Scored:
        """Candidates sorted by id, with the bound of the memories left out (none when the
        what list was short: it then holds every memory)."""
        order = sorted(range(len(rows)), key=lambda i: rows[i].id)
        records = [record_of(rows[i]) for i in order]
        bound = -math.inf if what_floor is None else relevance_bound(
            weights, what_floor, where_floor, self._value_max_of(records),
            self.config.decay.default_value)
        return _Scored(records=records,
                       sim_what=np.array([sim_what[i] for i in order], dtype=np.float64),
                       sim_where=np.array([sim_where.get(r.id, 0.0) for r in records],
                                          dtype=np.float64),
                       edges={rows[i].id: str(rows[i].meta.get("sj_edges", "[]"))
                              for i in order},
                       bound=bound,
                       ell=np.array([(ell or {}).get(r.id, 0.0) for r in records],
                                    dtype=np.float64))

    # ------------------------------------------------------------------ buffer, RCI
    def task_rows(self, e_t: NDArray[np.float32], c_t: NDArray[np.float32], n: int) -> Rows:
        n = max(self.config.search.candidates, 4 * n)
        ids = set(self.store.query("what", e_t, n)[0])
        if np.any(c_t):
            ids.update(self.store.query("where", c_t, n)[0])
        return self._fetch_rows(sorted(ids))

    def affected(self, w_n: NDArray[np.float32]) -> tuple[Rows, NDArray[np.float64],
                                                         NDArray[np.float64]]:
        """The memories RCI updates for ``w_n``, strongest first: their rows, their ``alpha``
        and the drift bounds of their indexed what-vectors. Chroma's index holds vectors up to
        INDEX_DRIFT_MAX_RAD from the exact ones, so candidates come from a threshold lowered
        by that much, then exact affinities."""
        theta = self.config.rci.theta
        cap = self.config.rci.max_affected
        low = theta - INDEX_DRIFT_MAX_RAD
        n = 64
        total = self.size()
        while True:
            ids, sims = self.store.query("what", w_n, min(n, cap))
            if len(ids) < min(n, cap) or (len(sims) and sims[-1] <= low) or n >= min(total, cap):
                break
            n *= 4
        stored = self.store.get([m for m, s in zip(ids, sims, strict=True) if s > low],
                                vectors=True, where_vectors=False)
        rows = self._rows_of(stored)
        idx, alpha = affinities(rows.what, w_n, theta)
        drift = np.array([stored[i].drift_rad for i in idx], dtype=np.float64)
        return rows.take(idx), alpha, drift

    # ------------------------------------------------------------------ delete, access
    def delete(self, ids: Sequence[str]) -> None:
        gone = set(ids)
        self._forget_snapshot()
        graph = EpisodicGraph(self.config.graph)
        for row in self.store.get(list(ids)):
            graph.loads(row.id, row.meta.get("sj_edges"))
        changed = set(graph.g.nodes) - gone
        for row in self.store.get(sorted(changed)):
            graph.loads(row.id, row.meta.get("sj_edges"))
        for mid in ids:
            graph.remove(mid)
        survivors = sorted(changed - gone)
        self.store.delete(list(ids), adjacency=list(zip(survivors, graph.dumps_many(survivors),
                                                        strict=True)))
        self._maybe_written -= gone
        for mid in ids:
            self._graph_cache.pop(mid, None)
        self._lexical.delete(list(ids))

    def records(self) -> list[MemoryRecord]:
        return list(self.iter_stored())

    def record(self, id: str) -> MemoryRecord | None:
        rows = self.store.get([id])
        return record_of(rows[0]) if rows else None

    def hub_scores(self, u_of: dict[str, float]) -> dict[str, float]:
        graph = EpisodicGraph(self.config.graph)
        for row in self.store.iter_all(vectors=False):
            graph.loads(row.id, row.meta.get("sj_edges"))
        return graph.hub_scores(u_of.keys(), u_of)

    def forget(self) -> None:
        super().forget()
        self._graph_cache.clear()
        if self._log_cursor is not None:
            self._start_log_cursor()


class _DeferredGraph:
    """The Eq. 8 graph bonus of one server search's hits, computed on first access.

    ``Phi(m) = sum_j w_mj S'(j) U(j)`` over m's neighbours j; ``S'(j) U(j)`` comes from the
    search's candidates when j is one of them, else from one fetch of the missing neighbours
    (with their vectors) for all the hits together.
    """

    def __init__(self, mem: ServerBackend, cand: _Scored, hit_ids: list[str],
                 e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                 weights: NDArray[np.float64], t_q: float) -> None:
        self._mem: ServerBackend | None = mem
        self._cand: _Scored | None = cand
        self._hit_ids = hit_ids
        self._query = (e_q, c_q, weights, t_q)
        self._bonus: dict[str, float] | None = None
        self._lock = threading.Lock()

    def __call__(self, mid: str) -> float:
        with self._lock:
            if self._bonus is None:
                self._bonus = self._compute()
                self._mem = self._cand = None  # nothing kept alive once computed
            return self._bonus[mid]

    def _compute(self) -> dict[str, float]:
        mem, cand = self._mem, self._cand
        assert mem is not None and cand is not None
        with mem.lock:
            if mem.closed:
                raise ScrubJayError("This ScrubJayMemory is closed; open a new one.")
            return self._bonus_of(mem, cand)

    def _bonus_of(self, mem: ServerBackend, cand: _Scored) -> dict[str, float]:
        e_q, c_q, weights, t_q = self._query
        neigh = {mid: _parse_edges(cand.edges.get(mid)) for mid in self._hit_ids}
        wanted = {j for lst in neigh.values() for j, _ in lst}
        index = {r.id: i for i, r in enumerate(cand.records)}
        at_hand = [j for j in wanted if j in index]
        idx = np.array([index[j] for j in at_hand], dtype=np.intp)
        rec = [cand.records[i] for i in idx]
        u = utility(np.array([r.value for r in rec]), np.array([r.pi for r in rec]),
                    np.array([r.tau_s for r in rec]),
                    np.array([r.created_at_s if r.valid_from_s is None else r.valid_from_s
                              for r in rec]), t_q)
        a, b, g, _ = (float(x) for x in weights)
        s_prime = a * cand.sim_what[idx] + b * cand.sim_where[idx] + g * u
        su = dict(zip(at_hand, (s_prime * u).tolist(), strict=True))
        missing = sorted(wanted - su.keys())
        if missing:
            extra = mem._fetch_rows(missing, where=bool(np.any(c_q)))
            if len(extra):
                _, _, u_x, s_x = partial_scores(extra, e_q, c_q, weights, t_q)
                su.update(zip(extra.ids, (s_x * u_x).tolist(), strict=True))
        return {mid: float(sum(w * su.get(j, 0.0) for j, w in neigh[mid]))
                for mid in self._hit_ids}


def _scaled(bound: float, scale: float) -> float:
    """``bound * scale`` for a finite bound (-inf, no memory left out, stays -inf)."""
    return bound * scale if math.isfinite(bound) else bound


def _parse_edges(payload: str | None) -> list[tuple[str, float]]:
    """A stored adjacency payload (``sj_edges``: JSON ``[[id, weight], ...]``), sorted by id;
    empty when absent or unreadable."""
    if not payload:
        return []
    try:
        return sorted((row[0], float(row[1])) for row in json.loads(payload))
    except (ValueError, TypeError, IndexError):
        return []
