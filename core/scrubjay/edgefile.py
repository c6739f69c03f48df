"""An embedded store's adjacency lists, in an SQLite file beside Chroma's.

Chroma's embedded write costs per metadata key and per byte, and the adjacency is the largest
key, rewritten whenever a memory gains or loses an edge; so an embedded (``path=``) store keeps
it here, one transaction per batch after Chroma took the rows. Against a server (several
processes share the store) the adjacency stays in Chroma (``sj_edges``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from .errors import StoreError

__all__ = ["EDGE_FILE", "EdgeFile"]

#: An embedded store's edge file, in its folder: the adjacency of every namespace there.
EDGE_FILE = "scrubjay-graph.sqlite3"
#: Ids per statement of the edge file (SQLite allows 32,766 variables).
EDGE_BATCH = 5_000


class EdgeFile:
    """An embedded store's adjacency lists: :data:`EDGE_FILE` in its folder, an SQLite table
    ``adjacency(namespace, id, edges)`` (the JSON that schema 4 kept as each Chroma row's
    ``sj_edges``) and a counter of writes per namespace (part of the change marker).

    Why not in Chroma: its embedded write costs per metadata key and per byte, and the
    adjacency is the largest key, rewritten whenever a memory gains or loses an edge (replays
    of the ingest benchmark's 10,000 rows: 6.2-6.4 s with ``sj_edges``, 4.7-5.0 s without,
    in one embedded Chroma). One transaction here writes a batch's adjacency (the new
    memories' and that of the older ones whose edges changed) after Chroma took its rows, so
    a crash between the two leaves the new memories without edges and every older memory
    with the edges it had, consistently. The folder's lock keeps it to one process; a
    connection serves the threads of one store under a lock.
    """

    def __init__(self, folder: str, namespace: str) -> None:
        self.namespace = namespace
        self._lock = threading.Lock()
        self._con: sqlite3.Connection | None = None
        try:
            con = sqlite3.connect(Path(folder) / EDGE_FILE, timeout=30,
                                  check_same_thread=False)
            self._con = con
            con.execute("PRAGMA journal_mode = WAL")
            # NORMAL: a killed process loses no commit (WAL); a power cut may lose the last
            # ones, never the file (the memories then lack those edges, both ends alike)
            con.execute("PRAGMA synchronous = NORMAL")
            with con:
                con.execute("CREATE TABLE IF NOT EXISTS adjacency (namespace TEXT NOT NULL, "
                            "id TEXT NOT NULL, edges TEXT NOT NULL, "
                            "PRIMARY KEY (namespace, id)) WITHOUT ROWID")
                con.execute("CREATE TABLE IF NOT EXISTS writes (namespace TEXT PRIMARY KEY, "
                            "n INTEGER NOT NULL)")
        except sqlite3.Error as exc:
            self.close()
            raise StoreError(f"Cannot open the edge file {EDGE_FILE!r} in {folder!r}: "
                             f"{type(exc).__name__}: {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            raise StoreError(f"The edge file of namespace {self.namespace!r} is closed")
        return self._con

    def write(self, pairs: Sequence[tuple[str, str | None]]) -> None:
        """Set each id's adjacency (None: remove it), all in one transaction."""
        if not pairs:
            return
        ns = self.namespace
        keep = [(ns, i, e) for i, e in pairs if e is not None]
        gone = [(ns, i) for i, e in pairs if e is None]
        try:
            with self._lock, self._connection() as con:
                con.executemany("INSERT OR REPLACE INTO adjacency VALUES (?, ?, ?)", keep)
                con.executemany("DELETE FROM adjacency WHERE namespace = ? AND id = ?", gone)
                self._count(con)
        except sqlite3.Error as exc:
            raise self._error(f"write the edges of {len(pairs)} memories", exc) from exc

    def drop(self) -> None:
        """Remove the namespace's adjacency and counter."""
        try:
            with self._lock, self._connection() as con:
                con.execute("DELETE FROM adjacency WHERE namespace = ?", (self.namespace,))
                con.execute("DELETE FROM writes WHERE namespace = ?", (self.namespace,))
        except sqlite3.Error as exc:
            raise self._error("drop the namespace's edges", exc) from exc

    def _error(self, action: str, exc: Exception) -> StoreError:
        return StoreError(f"The edge file {EDGE_FILE!r} failed to {action} (namespace "
                          f"{self.namespace!r}): {type(exc).__name__}: {exc}")

    def _count(self, con: sqlite3.Connection) -> None:
        con.execute("INSERT INTO writes VALUES (?, 1) ON CONFLICT (namespace) "
                    "DO UPDATE SET n = n + 1", (self.namespace,))

    def read(self, ids: Sequence[str]) -> dict[str, str]:
        """The adjacency of those ``ids`` that have one here."""
        out: dict[str, str] = {}
        ids = list(ids)
        try:
            with self._lock:
                con = self._connection()
                for lo in range(0, len(ids), EDGE_BATCH):
                    part = ids[lo:lo + EDGE_BATCH]
                    marks = ",".join("?" * len(part))
                    out.update(con.execute(
                        "SELECT id, edges FROM adjacency WHERE namespace = ? AND id IN "
                        f"({marks})", [self.namespace, *part]).fetchall())
        except sqlite3.Error as exc:
            raise self._error(f"read the edges of {len(ids)} memories", exc) from exc
        return out

    def writes(self) -> int:
        """How many transactions wrote this namespace (the change marker's part)."""
        try:
            with self._lock:
                row = self._connection().execute("SELECT n FROM writes WHERE namespace = ?",
                                                 (self.namespace,)).fetchone()
        except sqlite3.Error as exc:
            raise self._error("read its write count", exc) from exc
        return int(row[0]) if row else 0

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(sqlite3.Error):
                self._con.close()
            self._con = None
