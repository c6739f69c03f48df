"""Server mode: a namespace's change log, which keeps other processes' mirrors current.

Against a Chroma server several processes share a namespace. A process that keeps a mirror
(``SearchConfig(mirror=True)``: every memory, its vectors and the graph in memory) must see the
others' writes, and Chroma's HTTP API gives a collection no version or log position to ask for
them. So every write through a server also writes an entry to a third collection,
``sj_{ns}_log``: the ids whose rows it changes (added, updated or deleted), its wall-clock time,
and whether it is done. The entry is added *before* the write and marked done after it, so that
a writer killed in between leaves an open entry behind, never a change without one.

A mirror holds a :class:`LogCursor`. Before each operation it asks :meth:`ChangeLog.changes` for
the ids of the entries it has not applied yet (others' entries; its own writes update its mirror
as they go), reads those rows and puts them into the mirror (a row that is gone leaves it). An
entry still open is read again at every sync until it is done, or until it is older than
:data:`LOG_OPEN_MAX_S` (its writer is gone: one last read). Entries are found by time: the
reader asks for those stamped at or after its previous sync less :data:`LOG_SKEW_S`, the slack
for clocks that differ between machines and for a write that stamped its entry just before the
reader's previous sync, and skips those it has applied. Entries older than :data:`LOG_KEEP_S`
are deleted now and then by the writers; a reader that has not synced for that long reloads its
mirror whole.

Storage schema 7 records that a namespace's writes are logged: a scrubjay from before the log
refuses to open it once a newer one wrote there, so every writer logs (one that was open
already writes unlogged until it reopens).

A write pays two small requests (the entry's add and its update); a reader pays one read of
entry ids per sync, plus one read of the new entries and one of the changed rows when there are
any.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .errors import StoreError

logger = logging.getLogger(__name__)

#: Slack (seconds) for clocks that differ between the processes' machines and for a write whose
#: entry was stamped just before a reader's sync (chosen: NTP keeps clocks within a second; ten
#: minutes leaves room for a clock that drifted or an entry whose add took long).
LOG_SKEW_S = 600.0
#: An entry open this long belongs to a writer that died mid-write: read a last time, then
#: applied (chosen: a batch write of 100,000 memories takes a few minutes).
LOG_OPEN_MAX_S = 3_600.0
#: The rows of an entry still open are read again at most this often (a write in progress
#: lands in this time or reports done; a writer that died leaves its entry open for an hour,
#: and each sync would otherwise read its rows again).
LOG_OPEN_REREAD_S = 5.0
#: Entries older than this are deleted; a reader whose last sync is older reloads its mirror.
LOG_KEEP_S = 86_400.0
#: Ids per entry (a write of more ids writes several entries).
LOG_IDS_MAX = 20_000
#: A writer deletes expired entries once per this many entries it wrote.
LOG_PRUNE_EVERY = 200


@dataclass(slots=True)
class LogCursor:
    """How far a mirror has applied a namespace's change log."""

    synced_at: float
    """Wall-clock time of the start of the last sync (or of the mirror's load)."""
    seen: dict[str, float] = field(default_factory=dict)
    """Entries applied (done, or expired while open), by id, with their time."""
    open: dict[str, float] = field(default_factory=dict)
    """Entries found open: looked at again at each sync until done."""
    read_at: dict[str, float] = field(default_factory=dict)
    """When the rows of each open entry were last read (again after
    :data:`LOG_OPEN_REREAD_S`)."""

    def copy(self) -> LogCursor:
        """An independent copy (to go back to when applying the changes failed)."""
        return LogCursor(self.synced_at, dict(self.seen), dict(self.open), dict(self.read_at))


class ChangeLog:
    """The change log of one namespace on a server (``col``: its Chroma collection)."""

    def __init__(self, col: Any, clock: Callable[[], float] = time.time) -> None:
        self.col = col
        self._clock = clock
        #: This object's own entries that completed, by id with their time: a mirror applies
        #: its own writes as it makes them (a write that failed is read back like another's).
        self.mine: dict[str, float] = {}
        self._written = 0
        #: The ids of the operation whose entry is open (:meth:`batch`), in order, and the
        #: request that adds the entry (None until the operation has an id).
        self._batch: dict[str, None] | None = None
        self._opened: Future[tuple[list[str], float]] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def cursor(self) -> LogCursor:
        """A cursor at now: for a mirror about to be loaded from the rows (an entry written
        meanwhile is applied again at the first sync, which is harmless)."""
        return LogCursor(synced_at=self._clock())

    @contextlib.contextmanager
    def logged(self, ids: Sequence[str]) -> Iterator[None]:
        """Around a write that changes the rows of ``ids``: its entry is added before it (a
        failure there raises :class:`StoreError` and nothing is written) and marked done after
        it, whether it succeeded or not (a failure to mark it is logged: readers then read
        those rows again until the entry expires). Inside :meth:`batch`, the write's ids join
        the batch's entry, which this waits for (and opens if the batch had no ids yet)."""
        with self._lock:
            batch = self._batch
            if batch is not None:
                batch.update(dict.fromkeys(ids))
                if self._opened is None and batch:
                    self._opened = self._submit(self._open, list(batch))
                opened = self._opened
        if batch is not None:
            if opened is not None:
                opened.result()  # the entry is there before the write (or StoreError)
            yield
        elif ids:
            with self.batch(ids):
                with self._lock:
                    opened = self._opened
                if opened is not None:
                    opened.result()
                yield
        else:
            yield

    @contextlib.contextmanager
    def batch(self, ids: Sequence[str]) -> Iterator[None]:
        """One entry for the writes of one operation (a server batch writes its rows, then
        their edges and its neighbours' edges): added listing ``ids`` (in a worker, while the
        operation reads; each write waits for it, :meth:`logged`), the writes inside add the
        ids they change, and it is marked done once, listing them all, when the operation
        ends. Two requests per operation instead of two per write, the first beside its
        reads."""
        with self._lock:
            if self._batch is not None:  # one operation at a time per store: a nested one
                self._batch.update(dict.fromkeys(ids))  # joins the open entry
                nested = True
            else:
                self._batch = dict.fromkeys(ids)
                self._opened = self._submit(self._open, list(self._batch)) if ids else None
                nested = False
        if nested:
            yield
            return
        ok = False
        try:
            yield
            ok = True
        finally:
            with self._lock:
                listed = list(self._batch or ())
                opened = self._opened
                self._batch = self._opened = None
            if opened is not None:
                try:
                    entries, now = opened.result()
                except StoreError:
                    pass  # nothing was written: each write waited for the entry and failed
                else:
                    with self._lock:
                        if ok:
                            self.mine.update((e, now) for e in entries)
                        self._written += len(entries)
                        prune = self._written >= LOG_PRUNE_EVERY
                        if prune:
                            self._written = 0
                            self._forget_before(self._clock() - 2 * LOG_SKEW_S, self.mine)
                    self._close(entries, listed, prune)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn`` in this log's worker (one thread: the entries' requests keep their
        order)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scrubjay-log")
        return self._pool.submit(fn, *args)

    def _open(self, ids: list[str]) -> tuple[list[str], float]:
        """Add the entries of an operation listing ``ids``, not done; their ids and time."""
        now = self._clock()
        entries = [uuid.uuid4().hex for _ in range(max(1, -(-len(ids) // LOG_IDS_MAX)))]
        try:
            self.col.add(ids=entries, embeddings=[[1.0]] * len(entries),
                         metadatas=[{"t": now, "done": False, "ids": json.dumps(part)}
                                    for part in _split(ids, len(entries))])
        except Exception as exc:
            raise StoreError(f"Could not write the namespace's change log before a write of "
                             f"{len(ids)} memories (nothing was written): "
                             f"{type(exc).__name__}: {exc}") from exc
        return entries, now

    def _close(self, entries: list[str], ids: list[str], prune: bool) -> None:
        """Mark ``entries`` done, listing every id the operation's writes changed."""
        try:
            self.col.update(ids=entries, metadatas=[{"done": True, "ids": json.dumps(part)}
                                                    for part in _split(ids, len(entries))])
        except Exception as exc:  # noqa: BLE001 - the write itself is what matters
            logger.warning("Could not mark %d change-log entries done (other processes' "
                           "mirrors read those memories again until the entries expire in "
                           "%.0f s, and may miss %d memories the write changed besides "
                           "those it listed first): %s", len(entries), LOG_OPEN_MAX_S,
                           len(ids), exc)
        if prune:
            self.prune()

    def close(self) -> None:
        """Stop the worker (after the entry add it may be running)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def prune(self) -> None:
        """Delete the entries older than :data:`LOG_KEEP_S` (best effort)."""
        try:
            self.col.delete(where={"t": {"$lt": self._clock() - LOG_KEEP_S}})
        except Exception as exc:  # noqa: BLE001 - only the log's size is at stake
            logger.debug("Could not prune the change log: %s", exc)

    def changes(self, cursor: LogCursor) -> set[str] | None:
        """The ids whose rows changed since ``cursor``'s last sync, by entries it has not
        applied (``cursor`` is advanced); None when the cursor is older than the log keeps
        (the mirror must be reloaded whole). Raises :class:`StoreError` when the log cannot
        be read (the cursor is left as it was)."""
        now = self._clock()
        if now - cursor.synced_at > LOG_KEEP_S - LOG_SKEW_S:
            return None
        try:
            listed = self.col.get(where={"t": {"$gte": cursor.synced_at - LOG_SKEW_S}},
                                  include=[])["ids"]
            with self._lock:
                skip = cursor.seen.keys() | self.mine.keys()
            new = sorted({e for e in listed if e not in skip} | cursor.open.keys())
            got = self.col.get(ids=new, include=["metadatas"]) if new else {"ids": []}
        except Exception as exc:
            raise StoreError(f"Could not read the namespace's change log: "
                             f"{type(exc).__name__}: {exc}") from exc
        ids: set[str] = set()
        still_open: dict[str, float] = {}
        for eid, meta in zip(got["ids"], got.get("metadatas") or [], strict=False):
            meta = meta or {}
            t = float(meta.get("t", now))
            settled = bool(meta.get("done")) or now - t > LOG_OPEN_MAX_S
            if settled:
                cursor.seen[eid] = t
                cursor.read_at.pop(eid, None)
            else:
                still_open[eid] = t
                if now - cursor.read_at.get(eid, -math.inf) < LOG_OPEN_REREAD_S:
                    continue  # its rows were read a moment ago (a writer that died, or slow)
                cursor.read_at[eid] = now
            try:
                listed_ids = json.loads(meta.get("ids") or "[]")
            except (TypeError, ValueError):
                listed_ids = []
            ids.update(i for i in listed_ids if isinstance(i, str))
        cursor.open = still_open  # an open entry deleted meanwhile is gone
        for eid in [e for e in cursor.read_at if e not in still_open]:
            del cursor.read_at[eid]
        cursor.synced_at = now
        # an entry older than the next sync's window is not listed again: forget it
        with self._lock:
            self._forget_before(now - 2 * LOG_SKEW_S, cursor.seen, self.mine)
        return ids

    @staticmethod
    def _forget_before(horizon: float, *kept: dict[str, float]) -> None:
        for entries in kept:
            for eid in [e for e, t in entries.items() if t < horizon]:
                del entries[eid]


def _split(ids: list[str], parts: int) -> list[list[str]]:
    """``ids`` in ``parts`` consecutive runs of about equal length."""
    size = -(-len(ids) // parts) if ids else 0
    return [ids[k * size:(k + 1) * size] for k in range(parts)]
