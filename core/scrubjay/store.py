"""The Chroma adapter's data side: one namespace's collections, read and written.

:class:`ChromaStore` is every read and write of a namespace: rows in the layout of
:mod:`scrubjay.codec`, the adjacency in the edge file of an embedded store
(:mod:`scrubjay.edgefile`) or in Chroma against a server, the change log that keeps other
processes' mirrors current (:mod:`scrubjay.changelog`), reads by time (:mod:`scrubjay.timeread`)
and the embedded file's own upkeep (:mod:`scrubjay.localfiles`). Clients come from
:mod:`scrubjay.clients`, the only module that imports chromadb.

Write order makes a crash safe: ``where`` is written before ``what`` and deleted after it, so a
memory exists exactly when its ``what`` row does; :meth:`ChromaStore.reconcile` removes
``where`` rows left behind. An embedded store writes a batch's adjacency in one edge-file
transaction after Chroma took its rows, so that no crash leaves an edge listed at one end only.
An embedded (``path=``) store is locked to one process (:class:`~scrubjay.clients.EmbeddedClients`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .changelog import ChangeLog
from .clients import EmbeddedClients, query, retry, wrap_error
from .codec import (
    EDGES_KEY,
    INDEX_DRIFT_MAX_RAD,
    RCI_EVENT_KEY,
    RCI_KEY,
    TIME_KEY,
    RowsBackup,
    StoredRow,
    distance_to_similarity,
    fold_packed,
    is_whole_row,
    neighbour_ids,
    pack_rci,
    row_meta,
    row_text,
    rows_from_get,
)
from .edgefile import EDGE_FILE, EdgeFile
from .errors import EmbedderMismatchError, NamespaceNotFoundError, StoreError
from .localfiles import MarkerReader, compact, redact_log
from .timeread import TimeNeighbours, TimeReads

__all__ = [
    "EDGE_FILE",
    "INDEX_DRIFT_MAX_RAD",
    "RCI_EVENT_KEY",
    "SCHEMA_VERSION",
    "SYNC_THRESHOLD",
    "ChromaStore",
    "StoredRow",
    "TimeNeighbours",
]

logger = logging.getLogger(__name__)

#: 7: a server namespace's writes feed its change log (:mod:`scrubjay.changelog`): an older
#: scrubjay, which writes without it, refuses the namespace, so no write escapes a mirror;
#: 6: an embedded store's creation time inside ``sj_row``'s perishability, no ``sj_t`` key;
#: 5: an embedded store's adjacency in its edge file (:data:`EDGE_FILE`), not in Chroma;
#: 4: perishability and text in one key, ``sj_row``; 3: the text in ``sj_text``, no
#: document; 2: perishability packed in ``sj_perish``; 1: a key per field (all still read).
SCHEMA_VERSION = 7
_PAGE = 2_000
#: Records per call that rewrites index vectors (an RCI re-index), and the batch of a client
#: that cannot tell its limit.
_WRITE_BATCH = 1_000
#: Records per add, upsert, delete or metadata update, within the client's limit (chosen: one
#: request per 5,000 records took half the time of five of 1,000 in the RCI benchmark; an
#: add of 2,000 rows in one call took up to 0.8 s per 10,000 rows less than two calls of 1,000,
#: about 0.2 s on average; an embedded Chroma 1.5 accepts at most
#: 5,461 per call).
_UPDATE_BATCH = 5_000
#: The vector index's ``sync_threshold``: Chroma's default, 1,000, set explicitly. Chroma
#: persists its index every that many log records (metadata updates count too); until then
#: each write is handed the records logged since the last persist again (and skips them), so
#: a write costs more the longer the wait. A lower threshold makes one ``add`` cheaper
#: (p50 29-41 ms with 250 against 53-59 ms after a 10,000-memory bulk load) but persists four
#: times as often, and Chroma's persist is not atomic: a process killed during one can leave
#: the index's ``index_metadata.pickle`` empty, and the store then fails to open. With 250 the
#: crash test (SIGKILLs of a writer) hit that in 2 of 9 runs (20 to 60 kills each); hence
#: Chroma's 1,000, which a kill lands in four times less often.
SYNC_THRESHOLD = 1_000
#: Ids per read by id (chosen: SQLite, under both the embedded and the server Chroma, refuses
#: a statement with more than 32,766 variables: "too many SQL variables" for 40,000 ids).
_READ_BATCH = 10_000


def _set_sync_threshold(col: Any) -> None:
    """Give a collection made with another threshold (an earlier version made them with 250;
    ``get_or_create_collection`` keeps an existing collection's configuration) the
    :data:`SYNC_THRESHOLD`. Chroma reads it when it loads the index, so it applies from this
    process's first read or write of the collection (a server's already loaded index: from
    the server's next load). Best effort: a Chroma that reports no such setting, or refuses
    the change, keeps its own. Chroma's SQLite does not wait for a lock: a change that found
    the database locked (its own work on the folder still running, as under load) is tried
    again a few times over about 1.5 s."""
    for delay in (*_LOCKED_RETRY_S, None):
        try:
            current = (col.configuration_json or {}).get("hnsw", {}).get("sync_threshold")
            if isinstance(current, int) and current != SYNC_THRESHOLD:
                col.modify(configuration={"hnsw": {"sync_threshold": SYNC_THRESHOLD}})
            return
        except Exception as exc:  # noqa: BLE001 - an optimisation: never a reason to fail an open
            if delay is None or "database is locked" not in str(exc):
                logger.debug("could not set the sync_threshold of %s: %s", col.name, exc)
                return
            time.sleep(delay)


#: Waits between the tries of a Chroma change that found its SQLite database locked.
_LOCKED_RETRY_S = (0.05, 0.1, 0.2, 0.4, 0.8)

#: Clean-ups a full disk kept from running, per embedded folder and collection prefix: the
#: delete of a failed batch's rows, the write-back of the memories it replaced. Once a write
#: failed on a full disk the folder's client takes no more calls
#: (:meth:`EmbeddedClients.check`); the namespace's next open in this process runs them, in
#: order, before anything is read.
_DEFERRED: dict[tuple[str, str], list[tuple[str, Any]]] = {}
_DEFERRED_LOCK = threading.Lock()


class ChromaReads:
    """The read side of :class:`ChromaStore`: rows by id, every row, nearest neighbours by
    vector (Chroma's HNSW index), reads by time."""

    what: Any
    where: Any
    client: Any
    times: TimeReads
    _edge_file: EdgeFile | None

    def count(self) -> int:
        try:
            return int(self.what.count())
        except Exception as exc:
            raise wrap_error("count memories", exc) from exc

    def get(self, ids: Sequence[str], *, vectors: bool = False,
            where_vectors: bool = True, index_vectors: bool = True) -> list[StoredRow]:
        """Rows for ``ids`` that exist, in the order given (``where_vectors=False``: the
        where-vectors are left ``None``, one request fewer; ``index_vectors=False``: the
        what-vectors in the index are not read, so ``what`` is set only on a row RCI moved,
        whose exact vector is in its metadata, and the answer is a quarter of the bytes)."""
        if not ids:
            return []
        include = ["metadatas", "documents"] + (["embeddings"] if vectors and index_vectors
                                                else [])
        rows: dict[str, StoredRow] = {}
        try:
            for lo in range(0, len(ids), _READ_BATCH):
                part = list(ids[lo:lo + _READ_BATCH])
                got = retry(self.what.get, ids=part, include=include)
                where_vecs = self._where_embeddings(part) if vectors and where_vectors else {}
                rows.update((row.id, row) for row in rows_from_get(got, where_vecs, vectors,
                                                           self.edges_of(got["ids"]),
                                                           index_vectors))
        except Exception as exc:
            raise wrap_error(f"read {len(ids)} memories", exc) from exc
        return [rows[i] for i in ids if i in rows]

    def rci_events(self, ids: Sequence[str]) -> dict[str, str]:
        """The key of the latest RCI event written to each of ``ids`` (those that have one)."""
        out: dict[str, str] = {}
        for row in self.get(ids):
            event = row.meta.get(RCI_EVENT_KEY)
            if isinstance(event, str):
                out[row.id] = event
        return out

    def edges_of(self, ids: Sequence[str]) -> dict[str, str]:
        """The edge file's adjacency of ``ids`` (empty when Chroma holds it)."""
        return self._edge_file.read(ids) if self._edge_file is not None and ids else {}

    def where_vectors(self, ids: Sequence[str]) -> dict[str, NDArray[np.float32]]:
        """The where-vectors of those ``ids`` that have one (a memory without a context has
        no where row)."""
        try:
            return self._where_embeddings(ids)
        except Exception as exc:
            raise wrap_error(f"read {len(ids)} where-vectors", exc) from exc

    def _where_embeddings(self, ids: Sequence[str]) -> dict[str, NDArray[np.float32]]:
        """:meth:`where_vectors` with Chroma's exceptions unwrapped (callers wrap them)."""
        out: dict[str, NDArray[np.float32]] = {}
        for lo in range(0, len(ids), _READ_BATCH):
            got = retry(self.where.get, ids=list(ids[lo:lo + _READ_BATCH]),
                         include=["embeddings"])
            out.update((rid, np.asarray(got["embeddings"][i], dtype=np.float32))
                       for i, rid in enumerate(got["ids"]))
        return out

    def iter_all(self, *, vectors: bool = True) -> Iterator[StoredRow]:
        """Every memory, paged (used to build the in-memory mirror and by ``inspect``)."""
        include = ["metadatas", "documents"] + (["embeddings"] if vectors else [])
        offset = 0
        while True:
            try:
                got = retry(self.what.get, include=include, limit=_PAGE, offset=offset)
                ids = got["ids"]
                where_vecs = self._where_embeddings(ids) if vectors else {}
            except Exception as exc:
                raise wrap_error("read the namespace", exc) from exc
            yield from rows_from_get(got, where_vecs, vectors, self.edges_of(ids))
            if len(ids) < _PAGE:
                return
            offset += _PAGE

    def query(self, which: str, vector: NDArray[np.float32], n: int,
              where: dict[str, Any] | None = None) -> tuple[list[str], NDArray[np.float64]]:
        """Top-``n`` ids by cosine similarity in the ``what`` or ``where`` collection."""
        return self._query_ids(which, vector, n, where)

    def _query_ids(self, which: str, vector: NDArray[np.float32], n: int,
                   where: dict[str, Any] | None) -> tuple[list[str], NDArray[np.float64]]:
        col = self.what if which == "what" else self.where
        if n <= 0:
            return [], np.zeros(0)
        try:
            # Chroma >= 1.0 returns fewer than n_results when the collection is smaller (and
            # nothing when it is empty): no count() round trip first.
            got = query(col, query_embeddings=[vector.astype(np.float32)], n_results=n,
                         include=["distances"], where=where)
        except Exception as exc:
            raise wrap_error(f"query the {which} collection", exc) from exc
        return list(got["ids"][0]), distance_to_similarity(got["distances"][0])

    def query_rows(self, vector: NDArray[np.float32], n: int, *,
                   where_vectors: bool) -> list[StoredRow]:
        """The top-``n`` memories by what-similarity as full rows (vectors included), in one
        query of the ``what`` collection (plus one ``get`` of ``where`` when asked)."""
        if n <= 0:
            return []
        try:
            got = query(self.what, query_embeddings=[vector.astype(np.float32)], n_results=n,
                         include=["metadatas", "documents", "embeddings"])
            flat = {key: (got[key][0] if got.get(key) is not None else None)
                    for key in ("ids", "metadatas", "documents", "embeddings")}
            where_vecs = self._where_embeddings(flat["ids"] or []) if where_vectors else {}
        except Exception as exc:
            raise wrap_error("query the what collection", exc) from exc
        return list(rows_from_get(flat, where_vecs, True, self.edges_of(flat["ids"] or [])))

    def query_scored(self, which: str, vector: NDArray[np.float32], n: int, *,
                     rows: bool) -> tuple[list[StoredRow], NDArray[np.float64]]:
        """The top-``n`` memories of the ``what`` or ``where`` collection with their cosine
        similarities (best first), in one query that transfers no vectors.

        ``rows=True`` brings each memory's text and metadata too (``what`` only), with RCI
        updates folded in and the similarity of an RCI-moved memory computed from its exact
        vector (so the list is ordered by the index, at most ``drift_rad`` off, but every
        similarity returned is exact); otherwise the rows carry their id alone (:meth:`query`).
        Fewer than ``n`` come back when the collection is smaller.
        """
        if not rows:
            ids, sims = self._query_ids(which, vector, n, None)
            return [StoredRow(id=rid, text="", meta={}) for rid in ids], sims
        if which != "what":
            raise ValueError("query_scored(rows=True) reads the what collection only")
        if n <= 0:
            return [], np.zeros(0)
        try:
            got = query(self.what, query_embeddings=[vector.astype(np.float32)], n_results=n,
                         include=["distances", "metadatas", "documents"])
        except Exception as exc:
            raise wrap_error("query the what collection", exc) from exc
        ids = list(got["ids"][0])
        sims = distance_to_similarity(got["distances"][0])
        docs, metas = got["documents"][0], got["metadatas"][0]
        edges = self.edges_of(ids)
        out, kept = [], []
        for i, rid in enumerate(ids):
            meta = dict(metas[i] or {})
            if rid in edges:
                meta[EDGES_KEY] = edges[rid]
            exact, drift = fold_packed(meta)
            row = StoredRow(id=rid, text=row_text(meta, docs[i]), meta=meta)
            if not is_whole_row(metas[i], row.text):
                continue  # deleted by another client while this query ran
            kept.append(i)
            if exact is not None:  # RCI moved it: the index vector is off by up to ``drift``
                sims[i] = float(exact.astype(np.float64) @ vector.astype(np.float64))
                row.drift_rad = drift
            out.append(row)
        return out, (sims if len(kept) == len(ids) else sims[kept])

    def query_ids(self, which: str, vector: NDArray[np.float32], n: int) -> list[str]:
        """Top-``n`` ids by cosine similarity (no distances: the cheapest Chroma query)."""
        return self.query_many(which, vector[None, :], n)[0]

    def query_many(self, which: str, vectors: NDArray[np.float32],
                   n: int) -> list[list[str]]:
        """Top-``n`` ids for each of several vectors, in one Chroma query (HNSW) per
        :data:`_PAGE` vectors."""
        return self._query_many(which, vectors, n, with_similarity=False)[0]

    def query_many_similar(self, which: str, vectors: NDArray[np.float32],
                           n: int) -> tuple[list[list[str]], list[list[float]]]:
        """:meth:`query_many` with each id's cosine similarity to its query vector (one
        minus Chroma's distance, float32 precision) against the embedding in the index: a
        memory RCI moved (:attr:`StoredRow.drift_rad` > 0) is off by up to its drift."""
        return self._query_many(which, vectors, n, with_similarity=True)

    def _query_many(self, which: str, vectors: NDArray[np.float32], n: int, *,
                    with_similarity: bool) -> tuple[list[list[str]], list[list[float]]]:
        col = self.what if which == "what" else self.where
        if n <= 0 or len(vectors) == 0:
            return [[] for _ in range(len(vectors))], [[] for _ in range(len(vectors))]
        vectors = np.asarray(vectors, dtype=np.float32)
        out: list[list[str]] = []
        sims: list[list[float]] = []
        try:
            for lo in range(0, len(vectors), _PAGE):
                got = query(col, query_embeddings=vectors[lo:lo + _PAGE], n_results=n,
                             include=["distances"] if with_similarity else [])
                out.extend(list(ids) for ids in got["ids"])
                if with_similarity:
                    sims.extend([1.0 - float(d) for d in ds] for ds in got["distances"])
        except Exception as exc:
            raise wrap_error(f"query the {which} collection", exc) from exc
        return out, sims

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` that are stored (one read per :data:`_READ_BATCH` ids, no
        payload)."""
        found: set[str] = set()
        try:
            for lo in range(0, len(ids), _READ_BATCH):
                found.update(retry(self.what.get, ids=list(ids[lo:lo + _READ_BATCH]),
                                    include=[])["ids"])
        except Exception as exc:
            raise wrap_error(f"read {len(ids)} ids", exc) from exc
        return found

    def nearest_in_time(self, times: Sequence[float], horizon_s: float, n: int, *,
                        newest_hint: float = -math.inf) -> list[list[str]]:
        """:meth:`TimeReads.nearest_in_time` of this namespace."""
        return self.times.nearest_in_time(times, horizon_s, n, newest_hint=newest_hint)

    def nearest_in_time_bounded(self, times: Sequence[float], horizon_s: float, n: int, *,
                                newest_hint: float = -math.inf) -> TimeNeighbours:
        """:meth:`TimeReads.nearest_in_time_bounded` of this namespace."""
        return self.times.nearest_in_time_bounded(times, horizon_s, n, newest_hint=newest_hint)

    def _local_times(self) -> dict[str, float]:
        """Every memory's creation time (an embedded store's reads by time are its own)."""
        return {row.id: float(row.meta.get(TIME_KEY, 0.0))
                for row in self.iter_all(vectors=False)}


def _collection_names(client: Any) -> list[str]:
    try:
        return [c if isinstance(c, str) else c.name for c in client.list_collections()]
    except Exception as exc:
        raise wrap_error("list collections", exc) from exc


class ChromaStore(ChromaReads):
    """The two Chroma collections of one namespace (and, against a server, its change log)."""

    def __init__(self, *, client: Any, namespace: str, path: str | None = None,
                 prefix: str = "sj_", change_log: bool = False, create: bool = True) -> None:
        self.client = client
        self.namespace = namespace
        self.path = path
        self.prefix = prefix
        self._max_batch: int | None = None
        #: The change marker after this object's last write (embedded stores, once tracked).
        self._expected_marker: str | None = None
        #: Reads ``chroma.sqlite3``'s log positions for :meth:`change_marker` (embedded).
        self._marker = MarkerReader(path) if path is not None else None
        #: Whether the namespace may differ from what this object's writes made of it (someone
        #: else wrote it, or a write of ours failed half-way) since tracking began.
        self.diverged = False
        #: An embedded store's adjacency (schema 5); None: it is in Chroma (``sj_edges``).
        self._edge_file: EdgeFile | None = None
        #: Against a server: the namespace's change log, which every write here feeds and
        #: from which a mirror learns of other processes' writes (:mod:`scrubjay.changelog`).
        self.log: ChangeLog | None = None
        try:
            if not create and f"{prefix}{namespace}_what" not in _collection_names(client):
                self.close()
                raise NamespaceNotFoundError(
                    f"The namespace {namespace!r} does not exist in this store. Check its "
                    "name (`scrubjay inspect STORE` lists them); opening it with create=True "
                    "makes it.")
            hnsw = {"space": "cosine", "sync_threshold": SYNC_THRESHOLD}
            self.what = client.get_or_create_collection(
                f"{prefix}{namespace}_what", embedding_function=None,
                configuration={"hnsw": hnsw})
            self.where = client.get_or_create_collection(
                f"{prefix}{namespace}_where", embedding_function=None,
                configuration={"hnsw": hnsw})
            if change_log:
                self.log = ChangeLog(client.get_or_create_collection(
                    f"{prefix}{namespace}_log", embedding_function=None))
        except NamespaceNotFoundError:
            raise
        except Exception as exc:
            self.close()
            raise wrap_error(f"open the collections of namespace {namespace!r}", exc) from exc
        for col in (self.what, self.where):
            _set_sync_threshold(col)
        #: Reads by creation time (server mode's temporal link candidates).
        self.times = TimeReads(lambda: self.what, self._local_times if path is not None else None)
        if path is not None:
            try:
                self._edge_file = EdgeFile(path, namespace)
                self._run_deferred()
            except StoreError:
                self.close()
                raise

    @classmethod
    def open_path(cls, path: str | os.PathLike[str], namespace: str, *,
                  create: bool = True) -> ChromaStore:
        """Open an embedded store (with ``create``, making the folder and the namespace when
        missing; without, :class:`NamespaceNotFoundError` and nothing written); the folder is
        locked to this process."""
        key = str(Path(path).resolve())
        client = EmbeddedClients.acquire(key, create=create)
        # a failed open releases this share itself (``__init__`` closes the store)
        return cls(client=client, namespace=namespace, path=key, create=create)

    def _defer(self, op: str, arg: Any) -> bool:
        """Keep a clean-up (``"delete"`` ids, ``"restore"`` a backup) for the next open when
        a full disk stopped this folder's client; False (nothing kept) otherwise."""
        if self.path is None or not EmbeddedClients.disk_full(self.path):
            return False
        with _DEFERRED_LOCK:
            _DEFERRED.setdefault((self.path, self.prefix + self.namespace), []).append((op, arg))
        return True

    def _run_deferred(self) -> None:
        """Run the clean-ups a full disk kept from running (:data:`_DEFERRED`); one that
        fails stays, with the rest, for the next open, and the open raises."""
        assert self.path is not None
        key = (self.path, self.prefix + self.namespace)
        with _DEFERRED_LOCK:
            ops = _DEFERRED.pop(key, [])
        for k, (op, arg) in enumerate(ops):
            try:
                if op == "delete":
                    self._delete(arg)
                else:
                    self.restore(arg)
            except StoreError as exc:
                with _DEFERRED_LOCK:
                    _DEFERRED[key] = ops[k:] + _DEFERRED.get(key, [])
                raise StoreError(
                    f"Could not finish the clean-up of the writes that failed on a full disk "
                    f"in namespace {self.namespace!r} (free disk space and open the store "
                    f"again): {exc}") from exc
        if ops:
            logger.info("Finished %d clean-ups of writes that failed on a full disk in "
                        "namespace %r", len(ops), self.namespace)

    def close(self) -> None:
        """Release this store's share of the embedded client and its process lock (against a
        server: wait for the change log's last requests)."""
        if self.log is not None:
            self.log.close()
        if self._edge_file is not None:
            self._edge_file.close()
        if self._marker is not None:
            self._marker.close()
        if self.path is not None:
            EmbeddedClients.release(self.path)
            self.path = None

    # -- collection metadata: schema, embedder, buffer -------------------------------------
    def state(self, *, fresh: bool = False) -> dict[str, Any]:
        """The namespace's state (the what collection's metadata); ``fresh``: read again from
        Chroma (another client may have written it since this one opened the collection)."""
        try:
            if fresh:
                return dict(self.client.get_collection(self.what.name).metadata or {})
            return dict(self.what.metadata or {})
        except Exception as exc:
            raise wrap_error("read the collection metadata", exc) from exc

    def set_state(self, **values: Any) -> None:
        current = self.state()
        current.update({k: v for k, v in values.items() if v is not None})
        for k in [k for k, v in values.items() if v is None]:
            current.pop(k, None)
        try:
            self.what.modify(metadata=current)
        except Exception as exc:
            raise wrap_error("write the collection metadata", exc) from exc

    def check_schema(self) -> None:
        """Refuse a namespace written by a newer scrubjay (its rows may not read right)."""
        recorded = self.state().get("sj_schema", 1)
        if not isinstance(recorded, int) or recorded > SCHEMA_VERSION:
            raise StoreError(
                f"The namespace {self.namespace!r} was written by a newer scrubjay-mem (storage "
                f"schema {recorded!r}; this version reads up to {SCHEMA_VERSION}). Upgrade "
                "scrubjay-mem to open it.")

    def check_embedder(self, name: str, dim: int) -> None:
        """Before a write: record the embedder (and the schema) on first use; refuse another
        embedder later. Raises the recorded schema to this version's, whose rows are
        written from now on."""
        state = self.state()
        if "sj_embedder" not in state:
            self.set_state(sj_schema=SCHEMA_VERSION, sj_embedder=name, sj_dim=dim)
            return
        if int(state.get("sj_dim", dim)) != dim or (
                state["sj_embedder"] != name and not str(name).startswith("callable:")):
            raise EmbedderMismatchError(
                f"The namespace {self.namespace!r} was written with the embedder "
                f"{state['sj_embedder']!r} ({state.get('sj_dim')}-d); it cannot be searched with "
                f"{name!r} ({dim}-d). Reopen it with the same embedder, or use a new namespace.")
        if state.get("sj_schema", 1) != SCHEMA_VERSION:
            self.set_state(sj_schema=SCHEMA_VERSION)

    def recorded_embedder(self, *, fresh: bool = False) -> tuple[str, int] | None:
        state = self.state(fresh=fresh)
        if "sj_embedder" not in state:
            return None
        return str(state["sj_embedder"]), int(state["sj_dim"])

    def check_reader(self, name: str, *, fresh: bool = False) -> int | None:
        """At open: the dimension of the embedder the namespace was written with (None: none
        yet); refuse another embedder (a ``callable:`` one is taken on trust). ``fresh``: the
        state is read again from Chroma."""
        recorded = self.recorded_embedder(fresh=fresh)
        if recorded is None:
            return None
        written, dim = recorded
        if written != name and not name.startswith("callable:"):
            raise EmbedderMismatchError(
                f"The namespace {self.namespace!r} was written with the embedder {written!r} "
                f"({dim}-d); it cannot be used with {name!r}. Reopen it with the same "
                "embedder, or use a new namespace.")
        return dim

    # -- change tracking (embedded stores) --------------------------------------------------
    def change_marker(self, *, counts: bool = True) -> str | None:
        """A string that changes with every write to this namespace, or None (not embedded,
        or a Chroma whose files look different).

        It joins the two collections' ids and the last log sequence number that each one's
        metadata segment applied (:class:`~scrubjay.localfiles.MarkerReader`), the edge
        file's write count, and with ``counts`` their row counts (a second check, but a count
        costs a scan: 0.3 s at 100,000 memories).
        """
        if self._marker is None:
            return None
        ids = [str(self.what.id), str(self.where.id)]
        rows = self._marker.seq_ids(ids)
        if rows is None:
            return None
        seqs = [rows.get(cid) for cid in ids]
        marker = "|".join(f"{cid}:{seq!r}" for cid, seq in zip(ids, seqs, strict=True))
        if self._edge_file is not None:
            marker += f"|edges:{self._edge_file.writes()}"
        if not counts:
            return marker
        n = [self.count(), int(self.where.count())]
        if any(seq is None and k for seq, k in zip(seqs, n, strict=True)):
            return None  # rows, yet no sequence number: not a layout we know
        return f"{marker}|{n[0]}|{n[1]}"

    def track_changes(self) -> None:
        """Start tracking this object's writes (see :meth:`untouched_since_tracked`)."""
        self._expected_marker = self.change_marker(counts=False)
        self.diverged = False

    def untouched_since_tracked(self) -> str | None:
        """The full change marker if every write since :meth:`track_changes` was this
        object's and succeeded, else None."""
        if self._expected_marker is None or self.diverged:
            return None
        if self.change_marker(counts=False) != self._expected_marker:
            return None
        return self.change_marker()

    def log_batch(self, ids: Sequence[str]) -> contextlib.AbstractContextManager[None]:
        """Against a server: one change-log entry for the writes of one operation, listing
        ``ids`` and whatever the writes inside change (:meth:`ChangeLog.batch`); elsewhere
        nothing."""
        return self.log.batch(ids) if self.log is not None else contextlib.nullcontext()

    @contextlib.contextmanager
    def _tracked_write(self, ids: Sequence[str]) -> Iterator[None]:
        """Around a write that changes the rows of ``ids``: against a server, its change-log
        entry (:mod:`scrubjay.changelog`); in an embedded store, note a foreign write before
        it or a failure in it, and record the marker after it."""
        if self.log is not None:
            with self.log.logged(ids):
                yield
            return
        if self._expected_marker is None:
            yield
            return
        if self.change_marker(counts=False) != self._expected_marker:
            self.diverged = True
        try:
            yield
        except BaseException:
            self.diverged = True
            raise
        finally:
            try:
                self._expected_marker = self.change_marker(counts=False)
            except StoreError:
                self.diverged = True

    # -- writes ----------------------------------------------------------------------------
    def add(self, ids: Sequence[str], texts: Sequence[str], metas: Sequence[dict[str, Any]],
            what: NDArray[np.float32], where: NDArray[np.float32], *,
            adjacency: Sequence[tuple[str, str]] = ()) -> None:
        """Write new memories (where first, then what: a memory exists once its what row does),
        and ``adjacency``, the new ``sj_edges`` of older memories whose edges changed. In an
        embedded store the new memories' adjacency and ``adjacency`` go to the edge file in ONE
        transaction after Chroma took the rows, so that no crash leaves an edge listed at one
        end only; against a server they are Chroma writes, the older rows' after the new ones.

        The caller guarantees that none of ``ids`` has a what row (it deletes the ids it
        replaces first): the what rows go in with Chroma's ``add``, which skips upsert's
        existence check per id (about 8% cheaper) and silently ignores an id that does exist.
        Where rows are upserted. When the rows' write (or an embedded store's edge-file
        transaction) fails, the rows that landed are deleted again, best effort, before the
        error is raised: the batch that failed then shows up neither in a later read nor after
        a reopen, and the older memories keep the edges they had. A retry with the same ids
        deletes whatever a failed clean-up left behind before its add.
        """
        edge_file = self._edge_file
        with self._tracked_write([*ids, *(i for i, _ in adjacency)]):
            self._add_or_undo(ids, texts, metas, what, where, then=None if edge_file is None
                              else lambda: edge_file.write([*((i, m.get(EDGES_KEY)) for i, m
                                                               in zip(ids, metas, strict=True)),
                                                            *adjacency]))
            if edge_file is None:
                self._chroma_adjacency(adjacency)

    def add_unlinked(self, ids: Sequence[str], texts: Sequence[str],
                     metas: Sequence[dict[str, Any]], what: NDArray[np.float32],
                     where: NDArray[np.float32]) -> None:
        """Against a server, the first half of :meth:`add`: write new memories without
        their ``sj_edges`` (read as no edges) while the caller links them; then
        :meth:`link_added` writes the edges. A write that fails deletes the rows that
        landed, as :meth:`add` does. The server takes the rows meanwhile, and the edges' update
        that follows costs far less than their share of the add."""
        if self._edge_file is not None:
            raise ValueError("an embedded store writes a batch's edges with add()")
        with self._tracked_write(ids):
            self._add_or_undo(ids, texts, metas, what, where, edges=False)

    def discard(self, ids: Sequence[str]) -> None:
        """Delete rows that :meth:`add_unlinked` wrote and no memory links to yet (no
        adjacency to rewrite)."""
        with self._tracked_write(ids):
            self._delete(ids)

    def link_added(self, ids: Sequence[str], edges: Sequence[str],
                   adjacency: Sequence[tuple[str, str]] = ()) -> None:
        """The second half: the ``sj_edges`` of the memories :meth:`add_unlinked` wrote
        (``edges``, in the order of ``ids``), then ``adjacency``, the new ``sj_edges`` of older
        memories, in one update when they fit in one request (new rows first). As with
        :meth:`add`, a crash leaves at worst new memories that list an older one that does
        not list them yet. When the new rows' part fails, they are deleted again (best
        effort) and the error is raised, so that the batch shows up nowhere; when only the
        older memories' part fails, the error is raised and the new memories stay, as
        :meth:`add` leaves them."""
        todo = [*zip(ids, edges, strict=True), *adjacency]
        step = self._batch()
        with self._tracked_write([i for i, _ in todo]):
            for lo in range(0, len(todo), step):
                part = todo[lo:lo + step]
                try:
                    self._update_meta([i for i, _ in part], [{EDGES_KEY: e} for _, e in part],
                                      None)
                except StoreError:
                    if lo < len(ids):  # the part held new rows: the batch goes
                        with contextlib.suppress(StoreError):
                            self._delete(ids)
                    raise

    def backup(self, ids: Sequence[str]) -> RowsBackup:
        """The raw rows of ``ids`` and the adjacency of them and their neighbours, read before
        a batch replaces them (:meth:`restore` puts them back if it fails)."""
        try:
            got: dict[str, list[Any]] = {"ids": [], "embeddings": [], "metadatas": [],
                                         "documents": []}
            for lo in range(0, len(ids), _READ_BATCH):
                part = retry(self.what.get, ids=list(ids[lo:lo + _READ_BATCH]),
                              include=["embeddings", "metadatas", "documents"])
                for key, values in got.items():
                    values.extend(part[key])
            found = list(got["ids"])
            metas = [dict(m or {}) for m in got["metadatas"]]
            where = self._where_embeddings(found)
            embedded = self._edge_file is not None
            own = self._stored_adjacency(found) if embedded else {
                i: m.get(EDGES_KEY) for i, m in zip(found, metas, strict=True)}
            others = sorted(neighbour_ids(own.values()) - set(found))
            theirs = self._stored_adjacency(others)
            # a server's rows carry their own adjacency in the metadata restored with them
            adjacency = [*((i, own.get(i)) for i in found if embedded),
                         *((j, theirs.get(j)) for j in others)]
        except StoreError:
            raise
        except Exception as exc:
            raise wrap_error(f"read {len(ids)} memories before replacing them", exc) from exc
        return RowsBackup(ids=found, embeddings=list(got["embeddings"]), metadatas=metas,
                          documents=list(got["documents"]), where=where, adjacency=adjacency)

    def _stored_adjacency(self, ids: Sequence[str]) -> dict[str, str | None]:
        """The adjacency payload each of ``ids`` has stored: its edge-file entry in an
        embedded store, its ``sj_edges`` against a server (a missing one is left out)."""
        if self._edge_file is not None:
            return dict(self._edge_file.read(ids))
        return {row.id: row.meta.get(EDGES_KEY) for row in self.get(ids)}

    def restore(self, backup: RowsBackup) -> None:
        """Write back the rows and adjacency of ``backup``, over whatever a failed replacement
        of them left (its rows are deleted first)."""
        if not backup.ids:
            return
        try:
            self._restore(backup)
        except StoreError:
            self._defer("restore", backup)  # a full disk: at the next open
            raise

    def _restore(self, backup: RowsBackup) -> None:
        ids = backup.ids
        with self._tracked_write([*ids, *(j for j, _ in backup.adjacency)]):
            self._delete(ids)
            try:
                step = self._batch()
                has_where = [i for i in ids if i in backup.where]
                for lo in range(0, len(has_where), step):
                    part = has_where[lo:lo + step]
                    self.where.upsert(ids=part, embeddings=np.stack(
                        [backup.where[i] for i in part]).astype(np.float32))
                docs = any(d is not None for d in backup.documents)
                for lo in range(0, len(ids), step):
                    sl = slice(lo, lo + step)
                    kw = {"documents": [d or "" for d in backup.documents[sl]]} if docs else {}
                    self.what.add(ids=ids[sl], embeddings=np.asarray(
                        backup.embeddings[sl], dtype=np.float32),
                        metadatas=backup.metadatas[sl], **kw)
            except Exception as exc:
                raise wrap_error(f"restore {len(ids)} memories", exc) from exc
            if self._edge_file is not None:
                self._edge_file.write(backup.adjacency)
            else:
                self._chroma_adjacency([(j, e) for j, e in backup.adjacency if e is not None])

    def _chroma_adjacency(self, adjacency: Sequence[tuple[str, str]]) -> None:
        """Against a server: rewrite the ``sj_edges`` key of the rows in ``adjacency``."""
        if adjacency:
            self._update_meta([i for i, _ in adjacency],
                              [{EDGES_KEY: e} for _, e in adjacency], None)

    def _add_or_undo(self, ids: Sequence[str], texts: Sequence[str],
                     metas: Sequence[dict[str, Any]], what: NDArray[np.float32],
                     where: NDArray[np.float32], *, edges: bool = True,
                     then: Callable[[], None] | None = None) -> None:
        """:meth:`_add`, then ``then`` (an embedded store's edge-file write); when either
        fails, the rows that landed are deleted again (best effort) and the error raised."""
        has_where = [i for i in range(len(ids)) if np.any(where[i])]
        try:
            self._add(ids, texts, metas, what, where, has_where, edges=edges)
            if then is not None:
                then()
        except StoreError:
            try:
                self._delete(ids)
            except StoreError:
                self._defer("delete", list(ids))  # a full disk: at the next open
            raise

    def _add(self, ids: Sequence[str], texts: Sequence[str], metas: Sequence[dict[str, Any]],
             what: NDArray[np.float32], where: NDArray[np.float32],
             has_where: list[int], *, edges: bool = True) -> None:
        server = self._edge_file is None  # an embedded store: edges and time as schema 6
        try:
            step = self._batch()
            for lo in range(0, len(has_where), step):
                part = has_where[lo:lo + step]
                self.where.upsert(ids=[ids[i] for i in part],
                                  embeddings=where[part].astype(np.float32))
            for lo in range(0, len(ids), step):
                sl = slice(lo, lo + step)
                self.what.add(ids=list(ids[sl]), embeddings=what[sl].astype(np.float32),
                              metadatas=[row_meta(m, t, edges=server and edges,
                                                   time_key=server)
                                         for m, t in zip(metas[sl], texts[sl], strict=True)])
        except Exception as exc:
            raise wrap_error(f"write {len(ids)} memories", exc) from exc
        self.times.note_added(ids, metas)

    def update_meta(self, ids: Sequence[str], metas: Sequence[dict[str, Any]],
                    what: NDArray[np.float32] | None = None) -> None:
        """Merge metadata into existing records (a key set to None is removed); with ``what``,
        also rewrite their index embeddings. The adjacency is written by :meth:`add` and
        :meth:`delete` only (an embedded store keeps it in its edge file)."""
        if self._edge_file is not None and any(EDGES_KEY in m for m in metas):
            raise ValueError("an embedded store's adjacency is written by add() and delete()")
        with self._tracked_write(ids):
            self._update_meta(ids, metas, what)

    def _update_meta(self, ids: Sequence[str], metas: Sequence[dict[str, Any]],
                     what: NDArray[np.float32] | None) -> None:
        step = self._batch() if what is None else _WRITE_BATCH
        try:
            for lo in range(0, len(ids), step):
                sl = slice(lo, lo + step)
                if what is None:
                    self.what.update(ids=list(ids[sl]), metadatas=list(metas[sl]))
                else:
                    self.what.update(ids=list(ids[sl]), metadatas=list(metas[sl]),
                                     embeddings=what[sl].astype(np.float32))
        except Exception as exc:
            raise wrap_error(f"update {len(ids)} memories", exc) from exc

    def _batch(self) -> int:
        """Records per write call: :data:`_UPDATE_BATCH`, within the client's limit."""
        if self._max_batch is None:
            try:
                self._max_batch = max(1, min(_UPDATE_BATCH,
                                             int(self.client.get_max_batch_size())))
            except Exception:  # noqa: BLE001 - an older or partial client: the conservative batch
                self._max_batch = _WRITE_BATCH
        return self._max_batch

    def update_rci(self, ids: Sequence[str], value: NDArray[np.floating],
                   pi: NDArray[np.floating], tau_s: NDArray[np.floating], updated_at_s: float,
                   what: NDArray[np.float32], drift_rad: NDArray[np.floating],
                   event: str | None = None,
                   deltas: Sequence[Sequence[tuple[float, float, float, float]]] | None = None
                   ) -> NDArray[np.float64]:
        """Persist RCI updates (one ``sj_rci`` metadata key per record), tagged with the
        ``event`` key (:meth:`rci_events` reads it back) and carrying each record's
        time-stamped ``deltas`` (``MemoryRecord.rci_deltas``).

        ``drift_rad`` bounds each new what-vector's angle to its indexed embedding. Within
        :data:`INDEX_DRIFT_MAX_RAD` the exact vector goes into ``sj_rci`` only; beyond, the index
        embedding is rewritten and the drift resets to 0. Returns the drift bounds now recorded,
        aligned with ``ids``.
        """
        drift = np.asarray(drift_rad, dtype=np.float64)
        reindex = drift > INDEX_DRIFT_MAX_RAD
        recorded = np.where(reindex, 0.0, drift)
        v, p, t, d = (np.asarray(a, np.float64).tolist() for a in (value, pi, tau_s, recorded))
        at = float(updated_at_s)
        metas = [{RCI_KEY: pack_rci(v[i], p[i], t[i], at, d[i],
                                     None if reindex[i] else what[i], event,
                                     deltas[i] if deltas is not None else ())}
                 for i in range(len(ids))]
        near, far = (np.flatnonzero(m).tolist() for m in (~reindex, reindex))
        if near:
            self.update_meta([ids[i] for i in near], [metas[i] for i in near])
        if far:
            self.update_meta([ids[i] for i in far], [metas[i] for i in far],
                             what=np.asarray(what)[far])
        return recorded

    def delete(self, ids: Sequence[str], *,
               adjacency: Sequence[tuple[str, str]] = ()) -> None:
        """Delete memories (what first, then where) and write ``adjacency``, the new
        ``sj_edges`` of their former neighbours. An embedded store first drops the deleted
        memories' adjacency and writes their neighbours' in ONE edge-file transaction, then
        deletes the rows: a crash between the two leaves the memories without edges, at both
        ends. Against a server the rows go first, then the neighbours' ``sj_edges``."""
        if not ids:
            return
        with self._tracked_write([*ids, *(i for i, _ in adjacency)]):
            if self._edge_file is not None:
                self._edge_file.write([*((i, None) for i in ids), *adjacency])
            self._delete(ids)
            if self._edge_file is None:
                self._chroma_adjacency(adjacency)
        self._redact_log(ids=ids)

    def _delete(self, ids: Sequence[str]) -> None:
        self.times.forget()  # an embedded store's times are read again at the next read
        try:
            step = self._batch()
            for lo in range(0, len(ids), step):
                self.what.delete(ids=list(ids[lo:lo + step]))
            for lo in range(0, len(ids), step):
                self.where.delete(ids=list(ids[lo:lo + step]))
        except Exception as exc:
            raise wrap_error(f"delete {len(ids)} memories", exc) from exc

    def _redact_log(self, ids: Sequence[str] | None = None,
                    collection_ids: Sequence[str] | None = None) -> None:
        """Embedded stores: blank deleted memories' text in Chroma's write-ahead log
        (:func:`scrubjay.localfiles.redact_log`)."""
        if self.path is None:
            return
        if collection_ids is None:
            collection_ids = [str(self.what.id), str(self.where.id)]
        redact_log(self.path, collection_ids, ids)

    def reconcile(self) -> int:
        """Delete ``where`` rows whose memory does not exist (left by a crash). Returns count."""
        try:
            what_ids = set(self.what.get(include=[])["ids"])
            where_ids = set(self.where.get(include=[])["ids"])
            orphans = sorted(where_ids - what_ids)
            if orphans:
                step = self._batch()
                for lo in range(0, len(orphans), step):
                    self.where.delete(ids=orphans[lo:lo + step])
                logger.info("Removed %d orphaned where-rows in namespace %r", len(orphans),
                            self.namespace)
        except Exception as exc:
            raise wrap_error("reconcile the collections", exc) from exc
        return len(orphans)

    def compact(self) -> bool:
        """Embedded stores: rewrite ``chroma.sqlite3`` without the bytes of deleted rows and
        remove deleted collections' index folders (:func:`scrubjay.localfiles.compact`).
        Returns False elsewhere."""
        return False if self.path is None else compact(self.path)

    # -- namespaces ------------------------------------------------------------------------
    @staticmethod
    def list_namespaces(client: Any) -> list[str]:
        names = _collection_names(client)
        return sorted(n[3:-5] for n in names if n.startswith("sj_") and n.endswith("_what"))

    @staticmethod
    def list_namespaces_at(path: str) -> list[str]:
        """Namespaces of an embedded store folder (takes its process lock meanwhile); a folder
        without a store raises :class:`NamespaceNotFoundError` and is not created."""
        key = str(Path(path).resolve())
        client = EmbeddedClients.acquire(key, create=False)
        try:
            return ChromaStore.list_namespaces(client)
        finally:
            EmbeddedClients.release(key)

    def drop(self) -> None:
        """Delete both collections of this namespace (and their text in the local log; against
        a server, its change log once its last requests are done)."""
        if self.log is not None:
            self.log.close()
        self.times.forget()
        collection_ids = [str(self.what.id), str(self.where.id)]
        for suffix in ("what", "where", *(("log",) if self.log is not None else ())):
            with contextlib.suppress(Exception):
                self.client.delete_collection(f"{self.prefix}{self.namespace}_{suffix}")
        self._redact_log(collection_ids=collection_ids)
        if self._edge_file is not None:
            self._edge_file.drop()
