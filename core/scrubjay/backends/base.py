"""The seam between :class:`~scrubjay.ScrubJayMemory` and where its memories live.

A backend owns a namespace's storage: the Chroma adapter (:class:`~scrubjay.store.ChromaStore`),
the episodic graph, and whatever it keeps in memory to answer fast. The facade validates,
embeds, classifies and orchestrates; it asks the backend for candidates and writes, and never
which backend it has. Three implementations, chosen once when the memory opens
(:func:`scrubjay.backends.open_backend`):

* :class:`~scrubjay.backends.embedded.EmbeddedBackend`: an embedded or in-memory Chroma and
  a mirror of every memory (exact scans; a snapshot at close for a fast reopen);
* :class:`~scrubjay.backends.server.ServerBackend`: a Chroma server (or an embedded store
  with ``SearchConfig(mirror=False)``): candidates from Chroma's indexes, nothing of the
  namespace held here;
* :class:`~scrubjay.backends.server_mirror.ServerMirrorBackend`: a Chroma server and a
  mirror kept current by the namespace's change log.

:class:`Backend` is the protocol; :class:`BaseBackend` holds what they share: the batch write
with its undo, the linking, RCI's update, the worker threads, the newest-time hint.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from ..buffer import BufferBlock, BufferState, rci_newest
from ..codec import TEMPORAL_KEY, RowsBackup, StoredRow, meta_of, pack_temporal, record_of
from ..config import ScrubJayConfig
from ..errors import ScrubJayError
from ..graph import EpisodicGraph
from ..linking import LinkCandidates, link_batch
from ..mirror import Rows
from ..ranking import Query, rank_block, rank_paper
from ..rci import apply_updates
from ..snapshot import remove_snapshot, snapshot_path
from ..store import ChromaStore
from ..timeline import add_delta
from ..types import Deltas, Hit, MemoryRecord, Perishability, storable
from .lexical_channel import LexicalChannel

__all__ = ["Backend", "BaseBackend", "Batch", "weakly"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Batch:
    """A validated batch of new memories, embedded, not yet classified."""

    ids: list[str]
    chosen: list[str]
    """The ids the caller chose (only those can be stored already)."""
    times: list[float]
    what: NDArray[np.float32]
    where: NDArray[np.float32]
    classify: Callable[[], list[Perishability]]
    """The batch's perishability (it may run while the backend reads)."""
    records_of: Callable[[list[Perishability]], list[MemoryRecord]]
    """The batch's records, given its perishability."""


class Backend(Protocol):
    """What :class:`~scrubjay.ScrubJayMemory` asks of a storage backend."""

    store: ChromaStore
    config: ScrubJayConfig
    graph: EpisodicGraph
    dim: int | None
    newest_t: float
    on_gone: Callable[[set[str], bool], None]

    @property
    def location(self) -> str:
        """Where the namespace lives: its folder, ``"in-memory"`` or ``"client"``."""

    def open(self) -> None:
        """Read the namespace once the store is open."""

    def refresh(self) -> None:
        """Apply the writes other processes made since the last operation."""

    def current_dim(self, embedder: str) -> int | None:
        """The namespace's vector dimension (None: no memory yet)."""

    def searching(self, run: Callable[[], list[Hit]]) -> list[Hit]:
        """``run()`` (a search) on a current view of the namespace."""

    def size(self) -> int:
        """The number of memories, as this backend knows it."""

    def known_empty(self) -> bool:
        """Whether the namespace is known to hold nothing (without a request)."""

    def search(self, q: Query) -> list[Hit]:
        """The ``q.k`` best memories of the whole namespace for ``q``."""

    def write(self, batch: Batch) -> list[MemoryRecord]:
        """Store a batch (replacing the stored ids it names), linked; all or nothing."""

    def rows(self, ids: Sequence[str]) -> Rows:
        """The rows of ``ids`` (those stored), with their vectors."""

    def rank(self, rows: Rows, q: Query, *, from_buffer: bool = False) -> list[Hit]:
        """Rank some rows (Eq. 5 with the graph bonus from this backend's graph)."""

    def search_buffer(self, state: BufferState, q: Query) -> list[Hit] | None:
        """The prospective buffer's best, when good enough (else None)."""

    def task_rows(self, e_t: NDArray[np.float32], c_t: NDArray[np.float32], n: int) -> Rows:
        """Candidates of a prospective buffer for a task."""

    def buffer_block(self, state: BufferState) -> BufferBlock | None:
        """The buffer's rows and neighbours gathered (None: rank :meth:`rows` instead)."""

    def affected(self, w_n: NDArray[np.float32]) -> tuple[Rows, NDArray[np.float64],
                                                         NDArray[np.float64]]:
        """The memories an RCI event at ``w_n`` updates, their alpha and drift bounds."""

    def apply_rci(self, rows: Rows, alpha: NDArray[np.float64], drift: NDArray[np.float64],
                  w_n: NDArray[np.float32], deltas: Deltas, t_n: float,
                  event: str | None = None, gate: NDArray[np.bool_] | None = None) -> None:
        """Update the affected rows (Eq. 9-12; value, pi and tau only where ``gate``) and
        persist them."""

    def nearest(self, what: NDArray[np.float32], n: int) -> list[Rows]:
        """Per what-vector, up to ``n`` stored memories nearest by what-cosine."""

    def mark(self, records: Sequence[MemoryRecord]) -> None:
        """Persist the validity fields of ``records`` (a supersession), everywhere."""

    def delete(self, ids: Sequence[str]) -> None:
        """Delete memories everywhere (the store, the graph, what is held here)."""

    def compact(self) -> bool:
        """Rewrite the namespace's files without the bytes of deleted memories (the store's,
        the lexical index's); False when the store's files are not ours (in memory, a
        server)."""

    def not_integrated(self, rows: Rows, alpha: NDArray[np.float64],
                       drift: NDArray[np.float64], key: str, t_n: float, own_id: str
                       ) -> tuple[Rows, NDArray[np.float64], NDArray[np.float64],
                                  tuple[str, ...]]:
        """The affected rows an RCI event has not updated yet, and those it had."""

    def records(self) -> list[MemoryRecord]:
        """Every memory (a snapshot)."""

    def record(self, id: str) -> MemoryRecord | None:
        """The memory with this id, or None."""

    def hub_scores(self, u_of: dict[str, float]) -> dict[str, float]:
        """Each memory's graph-hub score (consolidation, §3.8)."""

    def forget(self) -> None:
        """Delete the namespace and start it anew, empty."""

    def close(self, *, save: bool) -> None:
        """Release the store (``save``: an embedded store's snapshot, the newest time)."""


class BaseBackend:
    """What the backends share. Subclasses provide the candidates (:meth:`_link_candidates`,
    :meth:`search`, ...) and keep what they hold in step (:meth:`_written` and the like)."""

    def __init__(self, store: ChromaStore, config: ScrubJayConfig, lock: threading.RLock, *,
                 server: bool, private_prefix: str | None = None) -> None:
        self.store = store
        self.config = config
        #: The facade's lock: a deferred graph bonus takes it when computed later.
        self.lock = lock
        #: Against a Chroma server (its add is its dearest write: a batch's rows go first).
        self.server = server
        #: An in-memory store's collection prefix (its collections are dropped at close).
        self.private_prefix = private_prefix
        self.dim: int | None = None
        self.graph = EpisodicGraph(config.graph)
        self.newest_t = -math.inf
        # an embedded store's newest time not yet in its state (written at close)
        self._newest_unsaved = False
        # the largest value this process wrote (RCI can raise values above the default)
        self._value_max = config.decay.default_value
        # the largest angle (rad) between a memory's exact what-vector and its index vector
        # that this process wrote or read (RCI defers index rewrites up to INDEX_DRIFT_MAX_RAD)
        self._drift_max = 0.0
        # single-thread workers, by role (:meth:`_worker`), made on first use
        self._pools: dict[str, ThreadPoolExecutor] = {}
        # ids of a write that failed part-way: they may have what rows the mirror lacks
        self._maybe_written: set[str] = set()
        self.closed = False
        self.snapshot_file = (snapshot_path(store.path, store.namespace)
                              if store.path is not None else None)
        #: Called with the ids of memories found gone (another process deleted them, or a
        #: failed delete's resync found them deleted), so that the facade's buffer drops them,
        #: and whether the buffer's stored state must be rewritten too.
        self.on_gone: Callable[[set[str], bool], None] = lambda gone, persist: None
        #: The lexical channel (its index None: off, or given up after a failed write until
        #: the next open); a subclass opens it and tells it each change.
        self._lexical = LexicalChannel(store.namespace)

    @property
    def lexical_wanted(self) -> bool:
        """Whether searches rank with the lexical channel (the config's default ranking)."""
        search = self.config.search
        return search.lexical and search.ranking == "relevance"

    def _lexical_texts(self) -> list[tuple[str, str]]:
        """Every memory's ``(id, text)``, from which the lexical index is rebuilt."""
        return []

    @property
    def location(self) -> str:
        """Where the namespace lives: its folder, ``"in-memory"`` or ``"client"``."""
        return self.store.path or ("client" if self.server else "in-memory")

    # ------------------------------------------------------------------ opening, closing
    def open(self) -> None:
        """Read the namespace once the store is open: a saved snapshot of it if there is one
        (an embedded store's reopen), else a repair of what a crash may have left; the
        newest memory time; then what this backend holds."""
        loaded = self._load_snapshot()
        if not self.server and not loaded:
            self.store.reconcile()
        state = self.store.state()
        self.newest_t = max(self.newest_t, float(state.get("sj_newest_t", -math.inf)))
        if not loaded:
            self._load()
        if self.snapshot_file is not None:
            self.store.track_changes()

    def _load_snapshot(self) -> bool:
        """Load what this backend holds from a snapshot file; whether it did."""
        return False

    def _load(self) -> None:
        """Load what this backend holds from the store."""
        return

    def refresh(self) -> None:
        return None

    def current_dim(self, embedder: str) -> int | None:
        """The namespace's vector dimension (None: no memory yet). A server namespace that
        was empty at open learns it here once another client has written (``embedder``: this
        memory's embedder's name, checked against the one that wrote)."""
        if self.dim is None and self.server:
            self.dim = self.store.check_reader(embedder, fresh=True)
        return self.dim

    def searching(self, run: Callable[[], list[Hit]]) -> list[Hit]:
        return run()

    def close(self, *, save: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self._lexical.close()
        if save:
            if self._newest_unsaved and self.private_prefix is None:
                self._save_newest("The namespace's state keeps an earlier newest time; "
                                  "the next open reads the newest one off the rows")
            self._save_snapshot()
        if self.private_prefix is not None:
            self.store.drop()
        self.store.close()
        for pool in self._pools.values():
            pool.shutdown(wait=False)

    def _save_snapshot(self) -> None:
        return None

    def compact(self) -> bool:
        done = self.store.compact()
        self._lexical.purge(self._lexical_texts)
        return done

    def _forget_snapshot(self) -> None:
        """No copy of a deleted memory's text on disk: the snapshot file goes."""
        if self.snapshot_file is not None:
            remove_snapshot(self.snapshot_file)

    def forget(self) -> None:
        self._forget_snapshot()
        self.store.drop()
        self.graph = EpisodicGraph(self.config.graph)
        self.newest_t = -math.inf
        self._newest_unsaved = False
        self._maybe_written.clear()
        store = self.store
        if store.path is None:
            self.store = ChromaStore(client=store.client, namespace=store.namespace,
                                     prefix=store.prefix, change_log=store.log is not None)
        else:
            path = store.path
            store.close()
            self.store = ChromaStore.open_path(path, store.namespace)
        if self.snapshot_file is not None:
            self.store.track_changes()
        self._lexical.clear()

    # ------------------------------------------------------------------ small helpers
    def _worker(self, role: Literal["main", "inner", "query", "write", "log"]
                ) -> ThreadPoolExecutor:
        """A single-thread worker, made on first use: ``main`` runs requests beside this
        thread (:meth:`_concurrently`), ``inner`` those beside code that runs in ``main``
        itself, ``query`` a second page of a batch's link queries, ``write`` a batch's
        rows and ``log`` a search's read of the change log; none runs anything that waits on
        another, so no call can deadlock however many threads make it."""
        pool = self._pools.get(role)
        if pool is None:
            pool = self._pools[role] = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="scrubjay" if role == "main"
                else f"scrubjay-{role}")
        return pool

    def _concurrently(self, first: Callable[[], Any], second: Callable[[], Any]
                      ) -> tuple[Any, Any]:
        """``(first(), second())``, the second in a worker thread meanwhile (two independent
        Chroma requests: the latency of the slower instead of the sum)."""
        later = self._worker("main").submit(second)
        try:
            done = first()
        finally:
            got = later.result()
        return done, got

    def _rows_of(self, stored: list[StoredRow]) -> Rows:
        dim = self.dim or 1
        zero = np.zeros(dim, dtype=np.float32)
        records = [record_of(r) for r in stored]
        if not stored:
            return Rows.build([], np.zeros((0, dim), np.float32), np.zeros((0, dim), np.float32))
        rows = Rows.build(records, np.stack(_whats(stored)).astype(np.float32),
                          np.stack([r.where if r.where is not None else zero
                                    for r in stored]).astype(np.float32))
        self._rows_read(stored)
        return rows

    def _rows_read(self, stored: list[StoredRow]) -> None:
        """Rows were read from the store (a backend may keep their adjacency)."""
        return

    def _fetch_rows(self, ids: Sequence[str], *, where: bool = True) -> Rows:
        """Rows for ``ids`` from Chroma (``where=False``: zero where-vectors, for a query
        without context, where they multiply a zero vector)."""
        return self._rows_of(self.store.get(list(ids), vectors=True, where_vectors=where))

    def rows(self, ids: Sequence[str]) -> Rows:
        return self._fetch_rows(ids)

    def neighbours(self, mid: str) -> list[tuple[str, float]]:
        """A memory's graph neighbours and edge weights."""
        raise NotImplementedError

    def delete(self, ids: Sequence[str]) -> None:
        """Delete memories everywhere (the store, the graph, what is held here)."""
        raise NotImplementedError

    def _outside(self, missing: list[str], q: Query) -> Rows:
        """Rows of neighbours that are not among a ranking's candidates."""
        raise NotImplementedError

    def rank(self, rows: Rows, q: Query, *, from_buffer: bool = False) -> list[Hit]:
        """:func:`~scrubjay.ranking.rank_paper` of some rows (not every memory)."""
        return rank_paper(rows, q, neighbours=self.neighbours,
                          stale_ratio=self.config.decay.stale_ratio,
                          outside=lambda missing: self._outside(missing, q),
                          from_buffer=from_buffer)

    def search_buffer(self, state: BufferState, q: Query) -> list[Hit] | None:
        """The prospective buffer's best ``q.k`` when its best score reaches
        ``BufferConfig.theta`` (else None: the whole namespace is searched)."""
        ids = list(state.ids)
        if len(ids) < q.k:
            return None
        block = self.buffer_block(state)
        if block is not None:
            # a buffered memory told after the query time: the full search answers
            # (or one RCI updated after it: the full search takes the update back)
            if (block.n_buf < q.k or float(block.rows.t[: block.n_buf].max()) > q.t_q
                    or block.rci_newest > q.t_q):
                return None
            hits = rank_block(block, q, stale_ratio=self.config.decay.stale_ratio)
        else:
            rows = self.rows(ids)
            if (len(rows) < q.k or float(rows.t.max()) > q.t_q
                    or rci_newest(rows.records) > q.t_q):
                return None
            hits = self.rank(rows, q, from_buffer=True)
        if hits and hits[0].score >= self.config.buffer.theta:
            return hits
        return None

    def buffer_block(self, state: BufferState) -> BufferBlock | None:
        """The buffer's rows and neighbours gathered (None: rank :meth:`rows` instead)."""
        return None

    def _value_max_of(self, records: Sequence[MemoryRecord]) -> float:
        """The largest value a memory can be assumed to have (see ``ServerBackend``)."""
        return max([self.config.decay.default_value, self._value_max]
                   + [r.value for r in records])

    # ------------------------------------------------------------------ writes
    def write(self, batch: Batch) -> list[MemoryRecord]:
        """Store a batch: the ids it replaces go first (written back if the batch then
        fails), then its rows and edges in one guarded write."""

        def write_early(labels: list[Perishability]) -> tuple[list[MemoryRecord],
                                                                Future[None]]:
            records = batch.records_of(labels)
            return records, self._write_unlinked(records, batch.what, batch.where)

        # against a server, the batch's writes (its rows, their edges, its neighbours' edges,
        # a replaced memory's delete) share one change-log entry
        with self.store.log_batch(batch.ids):
            labels, replaced, reads, early = self._classify_and_read(
                batch, write_early if self._writes_unlinked() else None)
            records = early[0] if early is not None else batch.records_of(labels)
            # a replaced memory goes before the batch is linked and written: if that fails,
            # the old version is written back from this backup rather than lost
            backup = self.store.backup(replaced) if replaced else None
            try:
                return self._replace_and_write(records, replaced, batch.what, batch.where,
                                               reads, early[1] if early is not None else None)
            except ScrubJayError:
                if backup is not None:
                    self._restore_replaced(backup)
                raise

    def _classify_and_read(
            self, batch: Batch,
            write_early: Callable[[list[Perishability]], tuple[list[MemoryRecord],
                                                               Future[None]]] | None = None,
    ) -> tuple[list[Perishability], list[str], Any,
               tuple[list[MemoryRecord], Future[None]] | None]:
        """A batch's perishability and the ids it replaces (a backend that reads link
        candidates from the store overlaps those reads with the classification)."""
        return batch.classify(), self._existing(batch.chosen), None, None

    def _existing(self, ids: list[str]) -> list[str]:
        """Those of ``ids`` already stored, in order (one read per batch)."""
        if not ids:
            return []
        found = self.store.existing(ids)
        return [i for i in ids if i in found]

    def _writes_unlinked(self) -> bool:
        """Whether a batch's rows go to the store before their edges (a server's add is its
        dearest write: it runs while the batch is read and linked, the edges follow)."""
        return self.server and self.config.graph.max_neighbors > 0

    def _write_unlinked(self, records: list[MemoryRecord], what: NDArray[np.float32],
                        where: NDArray[np.float32]) -> Future[None]:
        """Start the write of ``records`` without their edges, in a worker of its own."""
        return self._worker("write").submit(
            self.store.add_unlinked, [r.id for r in records], [r.text for r in records],
            [meta_of(r, "[]") for r in records], what, where)

    def _link_graph(self) -> EpisodicGraph:
        """The graph a batch is linked into."""
        return self.graph

    def _link_reads(self, records: list[MemoryRecord], what: NDArray[np.float32],
                    where: NDArray[np.float32], reads: Any) -> Any:
        """The link candidates' reads a batch needs before it is linked (None: none)."""
        return reads

    def _link_candidates(self, records: list[MemoryRecord], what: NDArray[np.float32],
                         where: NDArray[np.float32], graph: EpisodicGraph,
                         reads: Any = None) -> LinkCandidates:
        raise NotImplementedError

    def _link(self, records: list[MemoryRecord], what: NDArray[np.float32],
              where: NDArray[np.float32], graph: EpisodicGraph, reads: Any = None) -> set[str]:
        """Link each new memory to its strongest neighbours (:func:`~scrubjay.linking.link_batch`
        over this backend's candidates)."""
        cfg = self.config.graph
        existing = (self._link_candidates(records, what, where, graph, reads)
                    if cfg.max_neighbors > 0 else LinkCandidates.pad([]))
        return link_batch(records, what, where, graph, existing, cfg)

    def _replace_and_write(self, records: list[MemoryRecord], replaced: list[str],
                           what: NDArray[np.float32], where: NDArray[np.float32],
                           reads: Any, unlinked: Future[None] | None = None
                           ) -> list[MemoryRecord]:
        """Delete the memories ``records`` replace, link ``records`` and write them
        (``unlinked``: their rows' write without edges, started already)."""
        if replaced:
            self.delete(replaced)
            self.on_gone(set(replaced), True)  # the buffer lists them no more
        graph = self._link_graph()
        reads = self._link_reads(records, what, where, reads)
        ids = [r.id for r in records]
        new_ids = set(ids)
        # every id is new now: the ids it replaces were deleted above
        if unlinked is None and self._writes_unlinked():
            # a server takes the rows while this thread links them; their edges follow in
            # one update (the add is a server's dearest write, the update a cheap one)
            unlinked = self._write_unlinked(records, what, where)
        try:
            changed = self._link(records, what, where, graph, reads)
            old = sorted(changed - new_ids)
            before: dict[str, str | None] | None = None
            if reads is not None:
                before = {i: reads.rows[i].meta.get("sj_edges") for i in old if i in reads.rows}
                before.update(self._complete_adjacency(
                    graph, [i for i in old if i not in reads.rows], set(reads.rows) | new_ids))
            edges = graph.dumps_many([*ids, *old])
            if before is not None:
                # an older memory that gained an edge to a new one and lost it again within
                # the batch (the new one's cap evicted it) keeps its row: a server's update
                # of an older row is its dearest write per row
                kept = [k for k, i in enumerate(old, len(ids)) if edges[k] != before.get(i)]
                old = [old[k - len(ids)] for k in kept]
                edges = [*edges[:len(ids)], *(edges[k] for k in kept)]
        except BaseException:
            if unlinked is not None:
                self._drop_unlinked(unlinked, ids)
            raise
        try:
            if unlinked is not None:
                unlinked.result()  # its own failure deleted what it wrote
                self.store.link_added(ids, edges[:len(records)],
                                      adjacency=list(zip(old, edges[len(records):],
                                                         strict=True)))
            else:
                metas = [meta_of(r, e)
                         for r, e in zip(records, edges[:len(records)], strict=True)]
                self.store.add(ids, [r.text for r in records], metas, what, where,
                               adjacency=list(zip(old, edges[len(records):], strict=True)))
        except ScrubJayError:
            self._maybe_written.update(new_ids)  # a retry deletes them before its add
            self._unwritten(records, old)
            raise
        self._written(records, what, where, changed)
        newest = max(r.created_at_s for r in records)
        if newest > self.newest_t:
            self.newest_t = newest
            if not self.server:
                # one process holds an embedded store, and its next open also reads the
                # newest time off the rows: the state is written at close (a collection
                # update per add cost about 3 ms of a 30 ms add)
                self._newest_unsaved = True
            else:
                self._save_newest("The batch is stored, but the namespace's state keeps "
                                  "its earlier newest time until a newer memory is added")
        return records

    def _written(self, records: list[MemoryRecord], what: NDArray[np.float32],
                 where: NDArray[np.float32], changed: set[str]) -> None:
        """A batch is stored (what this backend holds takes it)."""
        return

    def _unwritten(self, records: list[MemoryRecord], old: list[str]) -> None:
        """A batch's write failed (what this backend holds goes back to the store's)."""
        return

    def _drop_unlinked(self, unlinked: Future[None], ids: list[str]) -> None:
        """After the linking of a batch failed: wait for its rows' add (server mode) and
        delete what it wrote, best effort; ids it may have left are noted for a retry."""
        try:
            unlinked.result()
        except ScrubJayError:
            return  # the add deleted what it wrote
        try:
            self.store.discard(ids)
        except ScrubJayError as exc:
            self._maybe_written.update(ids)
            logger.warning("A batch whose linking failed left %d memories without edges "
                           "(a retry with the same ids replaces them): %s", len(ids), exc)

    def _save_newest(self, failure: str) -> None:
        """Record the newest memory time in the namespace's state: a hint for the adaptive
        weights of other processes (and of the next open), not part of any batch; a failure
        is logged, with ``failure`` saying what it leaves."""
        try:
            self.store.set_state(sj_newest_t=self.newest_t)
            self._newest_unsaved = False
        except ScrubJayError as exc:
            logger.warning("%s: %s", failure, exc)

    def _restore_replaced(self, backup: RowsBackup) -> None:
        """After a batch that replaced stored memories failed: write the old versions back
        (rows, where rows, their and their neighbours' adjacency) and bring what this backend
        holds in step with them. Best effort: a store that cannot take the write either
        keeps whatever the failure left, and the batch's error is raised as it is."""
        try:
            self.store.restore(backup)
        except ScrubJayError as exc:
            logger.error("Could not restore %d memories that a failed batch replaced: %s",
                         len(backup.ids), exc)
            return
        self._restored(backup)

    def _restored(self, backup: RowsBackup) -> None:
        """The memories of ``backup`` are stored again (what this backend holds takes them)."""
        return

    def _complete_adjacency(self, graph: EpisodicGraph, ids: Sequence[str],
                            complete: set[str]) -> dict[str, str | None]:
        """Server mode: ``graph`` holds the whole adjacency of the link candidates and the new
        memories (``complete``) only. Memories in ``ids`` lost an edge to one of them (an
        eviction) but were no candidate, so ``graph`` has only their edges to ``complete``:
        add the edges their rows list to anyone else, so that the rewrite of their rows keeps
        them. (Such a memory gains no edge: only candidates and new memories do.) Returns
        the adjacency payload each row held."""
        if not ids:
            return {}
        rows = self.store.get(list(ids))
        for row in rows:
            try:
                listed = json.loads(row.meta.get("sj_edges") or "[]")
            except ValueError:
                continue
            others = [e for e in listed if isinstance(e, list) and e and e[0] not in complete]
            if others:
                graph.loads(row.id, json.dumps(others))
        return {row.id: row.meta.get("sj_edges") for row in rows}

    # ------------------------------------------------------------------ RCI
    def apply_rci(self, rows: Rows, alpha: NDArray[np.float64], drift: NDArray[np.float64],
                  w_n: NDArray[np.float32], deltas: Deltas, t_n: float,
                  event: str | None = None, gate: NDArray[np.bool_] | None = None) -> None:
        """Update the affected ``rows`` (paper Eq. 9-12; value, pi and tau only where
        ``gate``, when given) and persist them in one pass."""
        cfg = self.config
        upd = apply_updates(rows.value, rows.pi, rows.tau, rows.what, w_n, alpha, deltas,
                            cfg.rci, pi_min=cfg.classifier.pi_min,
                            tau_min_s=cfg.classifier.tau_min_s,
                            tau_max_s=cfg.classifier.tau_max_s, gate=gate)
        # the angle each unit vector moved (2 asin(chord / 2), exact 0 for an unmoved one) adds
        # to the drift bound of its index embedding (triangle inequality on the sphere)
        chord = np.linalg.norm(upd.what.astype(np.float64) - rows.what.astype(np.float64),
                               axis=1)
        drift = drift + 2.0 * np.arcsin(np.minimum(1.0, chord / 2.0))
        t = float(t_n)
        values, pis, taus = upd.value.tolist(), upd.pi.tolist(), upd.tau_s.tolist()
        new_records = []
        for i, r in enumerate(rows.records):
            rec = replace(r, value=values[i], pi=pis[i], tau_s=taus[i], updated_at_s=t)
            # kept as a time-stamped delta, so that a search before t takes it back
            new_records.append(replace(rec, rci_deltas=add_delta(
                r.rci_deltas, t, (r.value, r.pi, r.tau_s), (rec.value, rec.pi, rec.tau_s))))
        if len(upd.value):  # upper bounds: they hold whichever of the writes land
            self._value_max = max(self._value_max, float(np.max(upd.value)))
            self._drift_max = max(self._drift_max, float(np.max(drift)))
        try:
            recorded = self.store.update_rci(rows.ids, upd.value, upd.pi, upd.tau_s, t,
                                             upd.what, drift, event,
                                             deltas=[r.rci_deltas for r in new_records])
        except ScrubJayError:
            # an update written in several calls may have landed in part: what this backend
            # holds takes the rows as stored, so that the memory answers as a reopen would
            self._reload_rows(rows.ids)
            raise
        self._rci_written(new_records, upd.what, recorded)

    def not_integrated(self, rows: Rows, alpha: NDArray[np.float64],
                       drift: NDArray[np.float64], key: str, t_n: float, own_id: str
                       ) -> tuple[Rows, NDArray[np.float64], NDArray[np.float64],
                                  tuple[str, ...]]:
        """The affected rows (with their alpha and drift) that the RCI event ``key`` has not
        updated yet, and the ids it had (a retry of the event): its own memory ``own_id``,
        stored by an earlier run, is left out too, and not listed."""
        done = self.already_integrated(rows, key, t_n)
        ids = rows.ids
        own = np.array([i == own_id for i in ids], dtype=bool)
        if not (done.any() or own.any()):
            return rows, alpha, drift, ()
        skipped = tuple(ids[i] for i in np.flatnonzero(done & ~own))
        keep = np.flatnonzero(~(done | own))
        return rows.take(keep), alpha[keep], drift[keep], skipped

    def already_integrated(self, rows: Rows, key: str, t_n: float) -> NDArray[np.bool_]:
        """Which of ``rows`` the event ``key`` (at ``t_n``) has updated already: a memory an
        event updated carries its time, so only those updated at ``t_n`` are read back for
        the event's key (none, unless the event is run again)."""
        at = storable(float(t_n))
        suspects = [i for i, r in enumerate(rows.records) if r.updated_at_s == at]
        done = np.zeros(len(rows.records), dtype=bool)
        if suspects:
            events = self.store.rci_events([rows.records[i].id for i in suspects])
            done[[i for i in suspects if events.get(rows.records[i].id) == key]] = True
        return done

    def _reload_rows(self, ids: Sequence[str]) -> None:
        """The rows of ``ids`` changed in the store in a way this backend may not know."""
        return

    def _rci_written(self, records: list[MemoryRecord], what: NDArray[np.float32],
                     drift: NDArray[np.float64]) -> None:
        """An RCI update is stored (what this backend holds takes it)."""
        return

    # ------------------------------------------------------------------ supersession
    def nearest(self, what: NDArray[np.float32], n: int) -> list[Rows]:
        """Per what-vector, up to ``n`` stored memories nearest by what-cosine (Chroma's
        index, then one read of their rows)."""
        if n <= 0 or len(what) == 0:
            return [self._fetch_rows([], where=False) for _ in range(len(what))]
        found = self.store.query_many("what", what, n)
        ids = sorted({i for f in found for i in f})
        rows = self._fetch_rows(ids, where=False)
        index = {r.id: j for j, r in enumerate(rows.records)}
        return [rows.take(np.array([index[i] for i in f if i in index], dtype=np.intp))
                for f in found]

    def mark(self, records: Sequence[MemoryRecord]) -> None:
        """Write the validity fields (``sj_when``) of ``records``; what this backend holds
        takes them once the store has them (a failed write leaves it as the store is)."""
        if not records:
            return
        ids = [r.id for r in records]
        try:
            self.store.update_meta(ids, [{TEMPORAL_KEY: pack_temporal(r)} for r in records])
        except ScrubJayError:
            self._reload_rows(ids)
            raise
        self._marked(list(records))

    def _marked(self, records: list[MemoryRecord]) -> None:
        """Records' validity fields are stored (what this backend holds takes them)."""
        return

    # ------------------------------------------------------------------ iteration
    def iter_stored(self) -> Iterator[MemoryRecord]:
        """Every memory as the store holds it."""
        for row in self.store.iter_all(vectors=False):
            yield record_of(row)


def _whats(rows: Sequence[StoredRow]) -> list[NDArray[np.float32]]:
    """The what vectors of rows read with their vectors (never None there)."""
    return [r.what for r in rows]  # type: ignore[misc]


def weakly(method: Callable[[set[str], bool], None]) -> Callable[[set[str], bool], None]:
    """``method`` called through a weak reference (nothing once its object is gone): a
    backend holding its memory's callback must not keep the memory alive, or the memory's
    release would be left to the garbage collector, at any allocation and under any lock."""
    ref = weakref.WeakMethod(method)

    def call(ids: set[str], persist: bool) -> None:
        bound = ref()
        if bound is not None:
            bound(ids, persist)

    return call
