"""Work on an embedded store's own SQLite file, ``chroma.sqlite3``, beside Chroma.

Three jobs Chroma's API does not offer: a cheap marker that changes with every write (the
snapshot's check, :mod:`scrubjay.snapshot`), blanking a deleted memory's text in Chroma's
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
    """Blank deleted memories' text in Chroma's write-ahead log.

    Chroma's local log (table ``embeddings_queue`` of ``chroma.sqlite3``) keeps every write,
    with its document and metadata, until the vector index flushes (``sync_threshold`` writes
    later). A delete must not leave the text there, so the metadata of every logged write of
    a deleted id (``ids``; None: every write of the collections, which were dropped) is set to
    NULL; the operations and vectors stay, so a replay after a crash is unchanged.
    ``secure_delete`` zeroes the freed bytes. A folder without that table is skipped.
    """
    db = Path(folder) / "chroma.sqlite3"
    if not db.exists():
        return
    topics = [f"%/{cid}" for cid in collection_ids]
    topic_sql = " OR ".join("topic LIKE ?" for _ in topics)
    try:
        con = sqlite3.connect(db, timeout=30)
        try:
            con.execute("PRAGMA secure_delete = ON")
            if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                               "name = 'embeddings_queue'").fetchone():
                return
            with con:
                if ids is None:
                    con.execute(f"UPDATE embeddings_queue SET metadata = NULL "
                                f"WHERE {topic_sql}", topics)
                else:
                    ids = list(ids)
                    for lo in range(0, len(ids), 500):
                        part = ids[lo:lo + 500]
                        marks = ",".join("?" * len(part))
                        con.execute(f"UPDATE embeddings_queue SET metadata = NULL WHERE "
                                    f"id IN ({marks}) AND ({topic_sql})", part + topics)
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise wrap_error("redact deleted memories from the write-ahead log", exc) from exc


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
