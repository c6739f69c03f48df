"""Work on an embedded store's own SQLite file, ``chroma.sqlite3``, beside Chroma.

Three jobs Chroma's API does not offer: a cheap marker that changes with every write (the
snapshot's check, :mod:`scrubjay.snapshot`), removing a deleted memory from Chroma's
write-ahead log, and compacting the file so that freed pages leave it (``purge``). A store
folder of another Chroma version, whose tables look different, is left alone: each function
then answers None or False and changes nothing.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from .clients import wrap_error

__all__ = ["MarkerReader", "compact", "redact_log"]

#: Chroma names a vector-index folder after its segment's UUID.
_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class MarkerReader:
    """Reads, per collection, the last log sequence number its metadata segment applied
    (``max_seq_id``; Chroma gives every add, update and delete the next number), through one
    read-only connection kept open (a connection per call cost about 0.9 ms, twice per add)."""

    def __init__(self, folder: str) -> None:
        self._db = Path(folder) / "chroma.sqlite3"
        self._con: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def seq_ids(self, collection_ids: Sequence[str]) -> dict[str, object] | None:
        """``{collection id: seq id}`` (a collection without one is missing), or None when
        the file cannot be read that way."""
        with self._lock:
            try:
                if self._con is None:
                    # autocommit reads: no transaction is held between calls
                    self._con = sqlite3.connect(f"file:{self._db}?mode=ro", uri=True,
                                                timeout=30, check_same_thread=False,
                                                isolation_level=None)
                marks = ",".join("?" * len(collection_ids))
                return dict(self._con.execute(
                    "SELECT s.collection, m.seq_id FROM segments s JOIN max_seq_id m ON "
                    f"m.segment_id = s.id WHERE s.scope = 'METADATA' AND s.collection IN "
                    f"({marks})", list(collection_ids)).fetchall())
            except sqlite3.Error:
                self._close()
                return None

    def _close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(sqlite3.Error):
                self._con.close()
            self._con = None

    def close(self) -> None:
        with self._lock:
            self._close()


def redact_log(folder: str, collection_ids: Sequence[str],
               ids: Sequence[str] | None = None) -> None:
    """Remove deleted memories from Chroma's write-ahead log.

    Chroma's local log (table ``embeddings_queue`` of ``chroma.sqlite3``) keeps every write,
    with its id, vector, document and metadata, until every segment of the collection has
    applied it (the vector index persists every ``sync_threshold`` writes; Chroma then drops
    the applied rows). On open, Chroma replays the rows past each segment's persisted position
    (table ``max_seq_id``). For each deleted id (``ids``; None: the collections were dropped,
    and with them their segments, so every row of theirs goes):

    - rows below the collection's lowest persisted position are deleted: nothing replays
      them;
    - when no index has persisted anything yet, or the id's first unpersisted row is its add
      (not an upsert), the persisted index never held it: all its rows go, and a replay
      neither adds nor deletes it;
    - otherwise the persisted index holds it, and only its last delete stays (an id and an
      operation, no vector, no text), which Chroma drops at the index's next persist.

    ``secure_delete`` zeroes the freed bytes. A folder without those tables is skipped.
    """
    db = Path(folder) / "chroma.sqlite3"
    if not db.exists():
        return
    try:
        con = sqlite3.connect(db, timeout=30)
        try:
            con.execute("PRAGMA secure_delete = ON")
            tables = {str(r[0]) for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"embeddings_queue", "max_seq_id", "segments"} <= tables:
                return
            with con:
                for cid in collection_ids:
                    topic = f"%/{cid}"
                    if ids is None:
                        con.execute("DELETE FROM embeddings_queue WHERE topic LIKE ?", [topic])
                    else:
                        _forget_ids(con, cid, topic, list(ids))
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise wrap_error("remove deleted memories from the write-ahead log", exc) from exc


#: Chroma's log operations (``embeddings_queue.operation``).
_ADD, _DELETE = 0, 3


def _persisted_seq(con: sqlite3.Connection, collection_id: str) -> int:
    """The lowest log position every segment of the collection has persisted (0: one of them
    has persisted nothing yet)."""
    rows = con.execute("SELECT m.seq_id FROM segments s LEFT JOIN max_seq_id m ON "
                       "m.segment_id = s.id WHERE s.collection = ?", [collection_id]).fetchall()
    seqs = [r[0] if isinstance(r[0], int) else None for r in rows]
    ints = [q for q in seqs if q is not None]
    if not seqs or len(ints) < len(seqs):
        return 0
    return min(ints)


def _forget_ids(con: sqlite3.Connection, collection_id: str, topic: str,
                ids: list[str]) -> None:
    persisted = _persisted_seq(con, collection_id)
    for lo in range(0, len(ids), 500):
        part = ids[lo:lo + 500]
        marks = ",".join("?" * len(part))
        con.execute(f"DELETE FROM embeddings_queue WHERE seq_id < ? AND id IN ({marks}) AND "
                    "topic LIKE ?", [persisted, *part, topic])
        rows = con.execute(f"SELECT id, seq_id, operation FROM embeddings_queue WHERE id IN "
                           f"({marks}) AND topic LIKE ? ORDER BY seq_id", [*part, topic])
        by_id: dict[str, list[tuple[int, int]]] = {}
        for memory_id, seq, op in rows.fetchall():
            by_id.setdefault(str(memory_id), []).append((int(seq), int(op)))
        doomed: list[int] = []
        for ops in by_id.values():
            if ops[-1][1] != _DELETE:  # not deleted after all (written again): leave it
                continue
            # the persisted index may hold it, unless it holds nothing yet or the id's first
            # row past its position adds it
            keep_last = ops[0][1] != _ADD or ops[0][0] <= persisted
            doomed.extend(seq for seq, _ in (ops[:-1] if keep_last else ops))
        for at in range(0, len(doomed), 500):
            chunk = doomed[at:at + 500]
            con.execute(f"DELETE FROM embeddings_queue WHERE seq_id IN "
                        f"({','.join('?' * len(chunk))})", chunk)


def compact(folder: str) -> bool:
    """``VACUUM`` ``chroma.sqlite3`` so that the bytes of deleted rows (which Chroma frees but
    does not overwrite) leave the file, and remove the vector-index folders of deleted
    collections (Chroma leaves them behind). False when the folder holds no such file."""
    db = Path(folder) / "chroma.sqlite3"
    if not db.exists():
        return False
    try:
        con = sqlite3.connect(db, timeout=30, isolation_level=None)
        try:
            con.execute("VACUUM")
            live = {str(row[0]) for row in con.execute("SELECT id FROM segments")}
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise wrap_error("compact the store file", exc) from exc
    for child in Path(folder).iterdir():
        if child.is_dir() and _UUID_RE.fullmatch(child.name) and child.name not in live:
            shutil.rmtree(child, ignore_errors=True)
    return True
