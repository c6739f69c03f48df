"""What the backends that hold a mirror share: every memory of the namespace in memory.

The mirror (:class:`~scrubjay.mirror.Mirror`: records, what and where vectors as aligned
arrays) and the whole graph are here, so a search scores every memory exactly (or, past
``SearchConfig.scan_max``, the candidates of Chroma's HNSW index with an exactness bound), and
linking scans the mirror. Chroma stays the source of truth: every write goes there first.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ..buffer import BufferBlock, BufferState, gather_block
from ..codec import RowsBackup, StoredRow, record_of
from ..errors import ScrubJayError
from ..fusion import lexical_score_idf
from ..graph import edge_weights, strongest_columns
from ..lexical import LexicalIndex
from ..linking import (
    _LINK_BLOCK,
    NO_CANDIDATES,
    CandidateRow,
    LinkCandidates,
    _components,
)
from ..mirror import Mirror, Rows, rows_as_of
from ..ranking import Query, rank_paper, rank_relevance, relevance_keys
from ..rci import affinities
from ..scoring import drifted_similarity_bound, relevance_bound
from ..timeline import CURRENT, stale_reasons, visible
from ..types import Hit, MemoryRecord
from .base import BaseBackend, _whats

__all__ = ["LEXICAL_FOLDER", "SERVER_FIRST_PER_K", "SERVER_WIDEN", "MirroredBackend"]

logger = logging.getLogger(__name__)

#: The folder of an embedded store that holds its namespaces' lexical indexes.
LEXICAL_FOLDER = "scrubjay-lexical"

#: A relevance search first asks Chroma for this many candidates per hit wanted (chosen: with
#: equal values the k nearest are already the exact top k; the margin covers values lowered by
#: RCI; the exactness check widens when it does not suffice).
SERVER_FIRST_PER_K = 2
#: Factor by which that search widens its candidates, up to ``SearchConfig.candidates``
#: (chosen).
SERVER_WIDEN = 4


@dataclass(frozen=True)
class _LexicalRows:
    """The lexical channel's hits as mirror rows, with each one's ``ell``."""

    rows: NDArray[np.intp]
    ell: NDArray[np.float64]


class MirroredBackend(BaseBackend):
    """A backend with every memory in memory (subclassed per store kind)."""

    _mirror: Mirror | None = None
    # (buffer, mirror, mirror version) the block was gathered for, and the block
    _block: tuple[BufferState, Mirror, int, BufferBlock] | None = None
    # ------------------------------------------------------------------ the lexical channel
    def open(self) -> None:
        super().open()
        if self.lexical_wanted:
            self._open_lexical()

    def _open_lexical(self) -> None:
        """The namespace's lexical index: in the store's folder for an embedded store (checked
        against the mirror's ids, rebuilt from its texts when they differ), else in memory,
        built from the mirror."""
        if self.store.path is not None and self.private_prefix is None:
            self._lexical.index = LexicalIndex.acquire(
                Path(self.store.path) / LEXICAL_FOLDER, self.store.namespace,
                expected_ids=self._mirror_ids, rows=self._lexical_texts)
        else:
            self._lexical.index = LexicalIndex.in_memory(self._lexical_texts(),
                                                         namespace=self.store.namespace)

    def _mirror_ids(self) -> list[str]:
        return list(self._mirror.row_of) if self._mirror is not None else []

    def _lexical_texts(self) -> list[tuple[str, str]]:
        if self._mirror is None:
            return []
        return [(r.id, r.text) for r in self._mirror.view().records]

    # ------------------------------------------------------------------ the mirror
    def size(self) -> int:
        return len(self._mirror) if self._mirror is not None else 0

    def known_empty(self) -> bool:
        return self.size() == 0

    def neighbours(self, mid: str) -> list[tuple[str, float]]:
        return self.graph.neighbors(mid)

    def _refresh_wdeg(self, nodes: Sequence[str] | set[str]) -> None:
        if self._mirror is None:
            return
        adj = self.graph.g._adj  # plain dicts: networkx's views iterate through the ABCs
        for node in nodes:
            nbrs = adj.get(node)
            if nbrs is not None:
                self._mirror.set_wdeg(node, float(sum(d["weight"] for d in nbrs.values())))

    def _load_mirror(self) -> None:
        """Build the mirror and the graph from every row in Chroma."""
        rows = list(self.store.iter_all(vectors=True))
        if rows:
            self.dim = self.dim or len(rows[0].what)  # type: ignore[arg-type]
        if self.dim is None:
            return
        self._mirror = Mirror(self.dim)
        if rows:
            self._append_rows(rows)
        for r in rows:
            self.graph.loads(r.id, r.meta.get("sj_edges"))
        self.graph.prune_unknown({r.id for r in rows})
        self._refresh_wdeg(set(self.graph.g.nodes))
        if rows:
            self.newest_t = max(self.newest_t, float(np.max(self._mirror.view().t)))
        if self._lexical.on:  # a reload of the whole mirror (a change log gone too far)
            self._lexical.rebuild(self._lexical_texts)

    def _append_rows(self, rows: list[StoredRow]) -> None:
        """Put stored rows into the mirror (replacing the ids it holds), creating it."""
        if self._mirror is None:
            self._mirror = Mirror(len(rows[0].what))  # type: ignore[arg-type]
        zero = np.zeros(self._mirror.dim, dtype=np.float32)
        self._mirror.append([record_of(r) for r in rows],
                            np.stack(_whats(rows)).astype(np.float32),
                            np.stack([r.where if r.where is not None else zero
                                      for r in rows]).astype(np.float32),
                            drift=[r.drift_rad for r in rows])
        self._lexical.add((r.id, r.text) for r in rows)

    def _reload_rows(self, ids: Sequence[str]) -> None:
        """The records, what-vectors and drift of ``ids`` as the store holds them (best
        effort: a store that cannot be read leaves the mirror as it is until the next open)."""
        if self._mirror is None or not ids:
            return
        try:
            rows = self.store.get(list(ids), vectors=True, where_vectors=False)
        except ScrubJayError:
            return
        rows = [r for r in rows if r.id in self._mirror.row_of]
        if rows:
            self._mirror.update([record_of(r) for r in rows],
                                np.stack(_whats(rows)).astype(np.float32),
                                np.array([r.drift_rad for r in rows], dtype=np.float64))

    def _reload_adjacency(self, ids: Sequence[str]) -> None:
        for row in self.store.get(ids):
            for j in list(self.graph.g.neighbors(row.id)) if row.id in self.graph.g else []:
                self.graph.g.remove_edge(row.id, j)
            self.graph.loads(row.id, row.meta.get("sj_edges"))
        self._refresh_wdeg(list(ids))

    # ------------------------------------------------------------------ writes
    def _existing(self, ids: list[str]) -> list[str]:
        if not ids:
            return []
        row_of = self._mirror.row_of if self._mirror is not None else {}
        unsure = self._maybe_written
        return [i for i in ids if i in row_of or i in unsure]

    def _written(self, records: list[MemoryRecord], what: NDArray[np.float32],
                 where: NDArray[np.float32], changed: set[str]) -> None:
        if self._mirror is None:
            self._mirror = Mirror(int(what.shape[1]))
        self._mirror.append(records, what, where)
        self._refresh_wdeg(changed)
        self._lexical.add((r.id, r.text) for r in records)

    def _unwritten(self, records: list[MemoryRecord], old: list[str]) -> None:
        # roll the in-memory graph back to what Chroma holds
        for r in records:
            self.graph.remove(r.id)
        self._reload_adjacency(old)

    def _restored(self, backup: RowsBackup) -> None:
        try:
            rows = self.store.get(backup.ids, vectors=True)
        except ScrubJayError as exc:
            self._log_restore_unread(backup, exc)
            return
        if not rows:
            return
        self._append_rows(rows)
        self._maybe_written.difference_update(backup.ids)
        mine = set(backup.ids)
        self._reload_adjacency([*backup.ids, *(j for j, _ in backup.adjacency if j not in mine)])

    @staticmethod
    def _log_restore_unread(backup: RowsBackup, exc: Exception) -> None:
        from .base import logger

        logger.error("Restored %d memories that a failed batch replaced, but could not "
                     "read them back (a reopen shows them): %s", len(backup.ids), exc)

    def _rci_written(self, records: list[MemoryRecord], what: NDArray[np.float32],
                     drift: NDArray[np.float64]) -> None:
        if self._mirror is not None:
            self._mirror.update(records, what, drift)

    def _marked(self, records: list[MemoryRecord]) -> None:
        if self._mirror is not None:
            self._mirror.update([r for r in records if r.id in self._mirror.row_of])

    def nearest(self, what: NDArray[np.float32], n: int) -> list[Rows]:
        """Per what-vector, its ``n`` nearest memories of the mirror: an exact scan (row
        blocks bound the (block, N) matrix), or Chroma's index past ``scan_max``."""
        mirror = self._mirror
        if mirror is None or len(mirror) == 0 or n <= 0:
            return [Rows.build([], np.zeros((0, what.shape[1]), np.float32),
                               np.zeros((0, what.shape[1]), np.float32))
                    for _ in range(len(what))]
        if not self._scan(len(mirror)):
            return super().nearest(what, n)
        view = mirror.view()
        out: list[Rows] = []
        for lo in range(0, len(what), _LINK_BLOCK):
            sims = what[lo:lo + _LINK_BLOCK] @ view.what.T
            if sims.shape[1] > n:
                cols = np.argpartition(-sims, n - 1, axis=1)[:, :n]
            else:
                cols = np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
            for row in range(len(cols)):
                order = cols[row][np.argsort(-sims[row, cols[row]], kind="stable")]
                out.append(view.take(order))
        return out

    # ------------------------------------------------------------------ linking
    def _scan(self, n: int) -> bool:
        """Whether a mirror of ``n`` memories is scanned exactly (else HNSW candidates)."""
        limit = self.config.search.scan_max
        return limit is None or n <= limit

    def _link_candidates(self, records: list[MemoryRecord], what: NDArray[np.float32],
                         where: NDArray[np.float32], graph: object,
                         reads: object = None) -> LinkCandidates:
        """Edge weights of each new item against existing memories (padded rows)."""
        if self._mirror is None or len(self._mirror) == 0:
            return LinkCandidates.pad([NO_CANDIDATES] * len(records))
        if not self._scan(len(self._mirror)):
            return self._link_candidates_hnsw(records, what, where)
        return self._link_candidates_scan(records, what, where)

    def _link_candidates_scan(self, records: list[MemoryRecord], what: NDArray[np.float32],
                              where: NDArray[np.float32]) -> LinkCandidates:
        """The ``4 * max_neighbors`` strongest existing memories per new item, by an exact
        scan of the mirror (row blocks of the batch bound the (block, N) matrices)."""
        assert self._mirror is not None
        cfg = self.config.graph
        view = self._mirror.view()
        width = 4 * cfg.max_neighbors
        recs = view.records
        # the ids of every row (an O(N) list) only when the batch names more columns than
        # there are rows; one add looks its columns' ids up
        all_ids = (np.array(view.ids, dtype=object) if len(records) * width >= len(recs)
                   else None)
        t_new = np.array([r.created_at_s for r in records])
        has_where = bool(np.any(where)) and bool(np.any(view.where))
        # the selection runs in float32 (half the bytes per (block, N) pass), on times relative
        # to the batch's first; the chosen columns' components are float64, as before
        t_old32 = (view.t - t_new[0]).astype(np.float32)
        t_new32 = (t_new - t_new[0]).astype(np.float32)
        by_time = np.argsort(t_old32, kind="stable")
        parts: list[tuple[NDArray[np.float64], ...]] = []
        id_parts: list[NDArray[np.object_]] = []
        valid_parts: list[NDArray[np.bool_]] = []
        for lo in range(0, len(records), _LINK_BLOCK):
            hi = min(len(records), lo + _LINK_BLOCK)
            sim_s = what[lo:hi] @ view.what.T  # (block, N), float32
            sim_c = where[lo:hi] @ view.where.T if has_where else None
            # the strongest `width` by e_ij per row, then their components
            if sim_s.shape[1] > width:
                cols = strongest_columns(sim_s, sim_c, t_old32, t_new32[lo:hi], by_time, cfg,
                                         width)
            else:
                cols = np.broadcast_to(np.arange(sim_s.shape[1]), sim_s.shape)
            parts.append(_components(sim_s, sim_c, cols, view.t, t_new[lo:hi], cfg))
            id_parts.append(all_ids[cols] if all_ids is not None else np.array(
                [recs[c].id for c in cols.ravel().tolist()], dtype=object).reshape(cols.shape))
            valid_parts.append(np.ones(cols.shape, dtype=bool))
        weights = tuple(np.concatenate([p[j] for p in parts]) for j in range(4))
        return LinkCandidates(weights=weights,  # type: ignore[arg-type]
                              ids=np.concatenate(id_parts), valid=np.concatenate(valid_parts))

    def _link_candidates_hnsw(self, records: list[MemoryRecord], what: NDArray[np.float32],
                              where: NDArray[np.float32]) -> LinkCandidates:
        """Link candidates for a large mirror: per new item, the union of its nearest
        ``4 * max_neighbors`` by what and by where (Chroma's HNSW, one batched query each) and
        by time (the mirror's creation times, sorted once per batch), with exact edge weights.
        """
        assert self._mirror is not None
        cfg = self.config.graph
        width = 4 * cfg.max_neighbors
        view = self._mirror.view()
        row_of = self._mirror.row_of
        by_what = self.store.query_many("what", what, width)
        has_where = [i for i in range(len(records)) if np.any(where[i])]
        by_where: dict[int, list[str]] = {}
        if has_where:
            got = self.store.query_many("where", where[has_where], width)
            by_where = dict(zip(has_where, got, strict=True))
        order = np.argsort(view.t, kind="stable")
        t_sorted = view.t[order]
        out: list[CandidateRow] = []
        for i in range(len(records)):
            rows = {row_of[m] for m in by_what[i] if m in row_of}
            rows.update(row_of[m] for m in by_where.get(i, ()) if m in row_of)
            at = int(np.searchsorted(t_sorted, records[i].created_at_s))
            rows.update(order[max(0, at - width):at + width].tolist())
            idx = np.fromiter(sorted(rows), dtype=np.intp, count=len(rows))
            e, s, c, tt = edge_weights(what[i], where[i], records[i].created_at_s,
                                       view.what[idx], view.where[idx], view.t[idx], cfg)
            out.append((e, s, c, tt, [view.records[j].id for j in idx]))
        return LinkCandidates.pad(out)

    # ------------------------------------------------------------------ search
    def _outside(self, missing: list[str], q: Query | None = None) -> Rows:
        """Mirror rows of neighbours that are not among a search's candidates."""
        assert self._mirror is not None
        row_of = self._mirror.row_of
        rows = self._mirror.view().take([row_of[j] for j in missing if j in row_of])
        return self._as_of(rows, q.t_q) if q is not None else rows

    def _as_of(self, rows: Rows, t_q: float) -> Rows:
        """``rows`` as they were at ``t_q`` (RCI's later updates taken back), cheaply ``rows``
        itself when no update is later than ``t_q``."""
        assert self._mirror is not None
        return rows_as_of(rows, t_q) if t_q < self._mirror.rci_newest else rows

    def search(self, q: Query) -> list[Hit]:
        assert self._mirror is not None  # the facade asks only a backend that holds memories
        relevance = self.config.search.ranking == "relevance"
        decay = self.config.decay
        rows: Rows
        exhaustive = True
        lex_ids, lex_bm, lex_idf = self._lexical.query(q) if relevance else ([], [], 0.0)
        ell: NDArray[np.float64] | None = None
        lex = self._lexical_rows(lex_ids, lex_bm, lex_idf)
        if not relevance or self._scan(len(self._mirror)):
            rows = self._mirror.view()
            if lex is not None:
                ell = np.zeros(len(rows))
                ell[lex.rows] = lex.ell
        else:
            if np.any(q.c_q):
                rows, ell = self._hnsw_candidates(q.e_q, q.c_q, lex)
            else:
                rows, ell = self._hnsw_relevance_rows(q, lex)
            exhaustive = False
        if q.t_q < self.newest_t:  # memories told after the query time are not seen
            seen = np.flatnonzero(visible(rows.t, q.t_q))
            if len(seen) < len(rows):
                rows, exhaustive = rows.take(seen), False
                ell = ell[seen] if ell is not None else None
        rows = self._as_of(rows, q.t_q)
        if q.exclude_stale:
            fresh = np.flatnonzero(_current(rows, q.t_q, decay.stale_ratio))
            if len(fresh) < len(rows):
                rows, exhaustive = rows.take(fresh), False
                ell = ell[fresh] if ell is not None else None
        if relevance:
            return rank_relevance(rows, q, neighbours=self.neighbours,
                                  stale_ratio=decay.stale_ratio,
                                  default_value=decay.default_value, cfg=self.config.search,
                                  outside=self._outside, lexical=ell)
        if exhaustive:
            return rank_paper(rows, q, neighbours=self.neighbours,
                              stale_ratio=decay.stale_ratio, index=self._mirror.row_of,
                              wdeg=self._mirror.wdeg[: self._mirror.n])
        return rank_paper(rows, q, neighbours=self.neighbours, stale_ratio=decay.stale_ratio,
                          outside=self._outside)

    def _lexical_rows(self, ids: Sequence[str], bm25: Sequence[float], idf_sum: float
                      ) -> _LexicalRows | None:
        """The mirror rows of the lexical channel's hits and their ``ell``
        (:func:`scrubjay.fusion.lexical_score_idf`); None without hits."""
        if not ids:
            return None
        assert self._mirror is not None
        row_of = self._mirror.row_of
        kept = [(row_of[m], s) for m, s in zip(ids, bm25, strict=True) if m in row_of]
        return _LexicalRows(np.array([r for r, _ in kept], dtype=np.intp),
                            lexical_score_idf([s for _, s in kept], idf_sum))

    def _candidate_rows(self, ids: Iterable[str], lex: _LexicalRows | None
                        ) -> tuple[Rows, NDArray[np.float64] | None]:
        """The mirror rows of ``ids`` and of the lexical hits, in row order, and each one's
        ``ell`` (None without lexical hits)."""
        assert self._mirror is not None
        row_of = self._mirror.row_of
        idx = np.fromiter((row_of[m] for m in ids if m in row_of), dtype=np.intp)
        if lex is not None:
            idx = np.concatenate([idx, lex.rows])
        idx = np.unique(idx)
        rows = self._mirror.view().take(idx)
        if lex is None:
            return rows, None
        ell = np.zeros(len(idx))
        ell[np.searchsorted(idx, lex.rows)] = lex.ell
        return rows, ell

    def _hnsw_candidates(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                         lex: _LexicalRows | None = None
                         ) -> tuple[Rows, NDArray[np.float64] | None]:
        """Mirror rows of the nearest memories by what and by where (Chroma's HNSW index),
        and of the lexical channel's hits, with their ``ell``."""
        n = self.config.search.candidates
        ids = self.store.query_ids("what", e_q, n)
        if np.any(c_q):
            ids = ids + self.store.query_ids("where", c_q, n)
        return self._candidate_rows(ids, lex)

    def _hnsw_relevance_rows(self, q: Query, lex: _LexicalRows | None = None
                             ) -> tuple[Rows, NDArray[np.float64] | None]:
        """Mirror rows that hold the relevance top ``k`` of a query without context: the
        ``SERVER_FIRST_PER_K * k`` nearest by Chroma's HNSW index, widened by ``SERVER_WIDEN``
        (up to ``SearchConfig.candidates``) until the k-th key (exact, from the mirror) is at
        least the bound of every memory left out. The bound uses the last index similarity,
        widened by the largest RCI drift between an index vector and its exact one, and the
        largest value in the mirror: exact up to HNSW's own approximation. The lexical
        channel's hits join the rows; a memory outside them has ``ell = 0``, so its fused key
        is at most ``(1 - lambda)`` times the dense bound, and the k-th key is the fused one."""
        assert self._mirror is not None
        k, weights = q.k, q.weights
        mirror, v0 = self._mirror, self.config.decay.default_value
        value_max, drift_max = mirror.maxima()
        value_max = max(v0, value_max)
        if q.t_q < mirror.rci_newest:  # RCI's later updates are taken back
            value_max = max(value_max, mirror.rci_value_max)
        cap = max(self.config.search.candidates, k)
        n = min(cap, SERVER_FIRST_PER_K * k)
        while True:
            found, sims = self.store.query_scored("what", q.e_q, n, rows=False)
            rows, ell = self._candidate_rows((r.id for r in found), lex)
            rows = self._as_of(rows, q.t_q)
            if len(found) < n or n >= cap:
                return rows, ell
            key, _ = relevance_keys(rows, q, stale_ratio=self.config.decay.stale_ratio,
                                    default_value=v0, cfg=self.config.search, lexical=ell)
            if q.exclude_stale:
                key = key[_current(rows, q.t_q, self.config.decay.stale_ratio)]
            key = key[np.isfinite(key)]
            kth = float(np.sort(key)[-k]) if len(key) >= k else -math.inf
            floor = drifted_similarity_bound(float(sims[-1]), drift_max)
            bound = relevance_bound(weights, floor, 0.0, value_max, v0)
            if ell is not None and ell.any() and bound > 0:
                bound *= 1.0 - self.config.search.lexical_weight
            if bound <= kth:
                return rows, ell
            n = min(cap, SERVER_WIDEN * n)

    # ------------------------------------------------------------------ buffer
    def task_rows(self, e_t: NDArray[np.float32], c_t: NDArray[np.float32], n: int) -> Rows:
        assert self._mirror is not None
        return self._mirror.view()

    def buffer_block(self, state: BufferState) -> BufferBlock | None:
        """The buffer's rows and their neighbours, gathered again only after the buffer or the
        mirror changed."""
        if self._mirror is None:
            return None
        cached = self._block
        if (cached is not None and cached[0] is state and cached[1] is self._mirror
                and cached[2] == self._mirror.version):
            return cached[3]
        block = gather_block(state.ids, self._mirror, self.graph)
        self._block = (state, self._mirror, self._mirror.version, block)
        return block

    # ------------------------------------------------------------------ RCI
    def affected(self, w_n: NDArray[np.float32]) -> tuple[Rows, NDArray[np.float64],
                                                         NDArray[np.float64]]:
        """The memories RCI updates for ``w_n``, strongest first: their rows, their ``alpha``
        and the drift bounds of their indexed what-vectors (see :mod:`scrubjay.codec`)."""
        if self._mirror is None or len(self._mirror) == 0:
            return self._rows_of([]), np.zeros(0), np.zeros(0)
        view = self._mirror.view()
        idx, alpha = affinities(view.what, w_n, self.config.rci.theta)
        cap = self.config.rci.max_affected
        idx, alpha = idx[:cap], alpha[:cap]
        return view.take(idx), alpha, self._mirror.drift[idx]

    # ------------------------------------------------------------------ delete, access
    def delete(self, ids: Sequence[str]) -> None:
        gone = set(ids)
        self._forget_snapshot()
        changed: set[str] = set()
        for mid in ids:
            changed |= self.graph.remove(mid)
        survivors = sorted(changed - gone)
        try:
            self.store.delete(list(ids), adjacency=list(zip(
                survivors, self.graph.dumps_many(survivors), strict=True)))
        except ScrubJayError:
            self._resync_after_failed_delete(ids, survivors)
            raise
        self._maybe_written -= gone
        if self._mirror is not None:
            self._mirror.remove(list(ids))
            self._refresh_wdeg(survivors)
        self._lexical.delete(list(ids))

    def _resync_after_failed_delete(self, ids: Sequence[str], survivors: Sequence[str]) -> None:
        """After a delete that failed part-way: bring the graph and the mirror back in step
        with the store, whichever of its steps landed (the edge file's transaction, then the
        rows): the memories still stored keep the edges the store lists for them, their former
        neighbours likewise, and those whose rows are gone leave the mirror. Best effort: a
        store that cannot be read either leaves them as they are until the next open."""
        try:
            still = {row.id for row in self.store.get(list(ids))}
            self._reload_adjacency([*sorted(still), *survivors])
        except ScrubJayError:
            return
        gone = [mid for mid in ids if mid not in still]
        if not gone or self._mirror is None:
            return
        self._mirror.remove(gone)
        self._lexical.delete(gone)
        for mid in gone:
            self.graph.remove(mid)
        self.on_gone(set(gone), True)

    def records(self) -> list[MemoryRecord]:
        return list(self._mirror.view().records) if self._mirror is not None else []

    def record(self, id: str) -> MemoryRecord | None:
        return self._mirror.record(id) if self._mirror is not None else None

    def hub_scores(self, u_of: dict[str, float]) -> dict[str, float]:
        return self.graph.hub_scores(u_of.keys(), u_of)

    def forget(self) -> None:
        super().forget()
        self._mirror = Mirror(self.dim) if self.dim is not None else None


def _current(rows: Rows, t_q: float, stale_ratio: float) -> NDArray[np.bool_]:
    """Which rows are not stale at ``t_q`` (for ``exclude_stale``)."""
    _, reason = stale_reasons(rows.value, rows.pi, rows.tau, rows.valid_from, rows.valid_until,
                              rows.invalidated, t_q, stale_ratio)
    return np.asarray(reason == CURRENT)
