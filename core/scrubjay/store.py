"""Chroma persistence: the only module that imports chromadb.

A namespace ``ns`` lives in two collections (cosine space, no Chroma embedding function, so
Chroma never downloads a model):

* ``sj_{ns}_what``: one record per memory; embedding ``w_what``; metadata = the text and
  perishability in one key (``sj_row``, below), the time and bookkeeping plus the user's
  metadata, and against a server the adjacency (``sj_edges``; an embedded store keeps it in
  its edge file, below); no Chroma document. Its collection metadata
  records the schema version, the embedder's name and dimension and the prospective buffer.
* ``sj_{ns}_where``: the same ids, embedding ``w_where``; only memories with a non-empty
  context have a row (an empty context embeds to the zero vector).

A memory's perishability when written (label, pi, tau, value and the classifier that gave
them) is ONE metadata key, ``sj_perish``, a JSON object; its time ``sj_t`` stays a float key of
its own (server mode reads by time range). Why: Chroma writes one SQLite row per metadata key,
and the five keys these replaced made each memory's write about 10% dearer (scratch
comparison at 10k records, six runs: 4.78 s packed against 5.26 s, one-key rows 4.15 s).
Schema 1 stores hold them as ``sj_label``/``sj_pi``/``sj_tau``/``sj_value``/``sj_src``; reads
take either.

An RCI update is written as ONE metadata key, ``sj_rci``: a JSON object with the new value,
pi, tau, update time, the moved what-vector (float32 in base64, exact), ``drift``, an upper
bound on the angle between that vector and the embedding in the HNSW index, and ``ev``, the
event's key (a retry of the same event skips the rows that carry it; older rows have none).
Reads apply it over ``sj_value``/``sj_pi``/``sj_tau``/``sj_updated`` and the index embedding,
and put the key under :data:`RCI_EVENT_KEY`. The index
embedding (used only to generate candidates, which are then scored with the exact vectors) is
rewritten when the drift bound passes :data:`INDEX_DRIFT_MAX_RAD`. Why: a Chroma update costs
about one metadata write per key, and rewriting an HNSW vector several times that (measured on
the RCI benchmark: 10k records, 4 keys 2.6-3.3 s, 1 key 1.2 s, vectors 9-13 s).

Since schema 4 a memory's perishability payload and its text share ONE metadata key,
``sj_row``: ``perishability + "\\x1f" + text`` (JSON escapes the separator; the text comes
last and may hold anything). Reads spread it over ``sj_perish`` and ``sj_text`` as schema 3
wrote them (still read). The adjacency keeps a key of its own, ``sj_edges``, which linking
rewrites alone. Why: Chroma's embedded write costs per string key, and more for an entry too
long for a page of SQLite's index on metadata strings (about 1,000 bytes), which spills to an
overflow page (replays of the ingest benchmark's 10,000 rows, three alternating rounds:
schema 3's keys 8.10 s and 3,750 bytes of ``chroma.sqlite3`` per row; these 7.08 s and 3,690
bytes; all three in one key of about 1,050 bytes 7.62 s and 7,059 bytes;
docs/performance.md, item 25).

Since schema 5 an embedded (``path=``) store keeps the adjacency in an SQLite file of its
own beside Chroma's, :data:`EDGE_FILE` (:class:`_EdgeFile`): one transaction per batch, after
Chroma took the rows. Its rows win over an ``sj_edges`` key that a schema 4 row still holds;
reads merge them into each row's metadata, so the rest of the package sees ``sj_edges`` as
before. Why: of an embedded write of the ingest benchmark's rows, the adjacency key was the
dearest part (replays of 10,000 rows in one process, two rounds: 6.2-6.4 s with it, 4.7-5.0 s
without), and linking rewrites it in hundreds to thousands of older rows per 10,000 new ones
(docs/performance.md, item 26). Against a server (several processes share the store) the
adjacency stays in Chroma. Copying an embedded store's collections elsewhere must carry the
edge file's rows along (:meth:`ChromaStore.edges_of`; the benchmark's ``_copy_to`` does).

Since schema 6 an embedded store's row is one metadata key: its creation time goes inside
``sj_row``'s perishability payload (field ``t``) instead of a key ``sj_t`` of its own, which
reads put back. Why: Chroma writes an SQLite row per metadata key, and only a server's reads by
time filter on the time (Chroma adds of 10,000 rows alternating in one process, five rounds:
2.17-2.61 s with one key against 2.44-2.80 s with two; docs/performance.md, item 32). A
server's rows keep the key. An embedded memory with ``SearchConfig(mirror=False)`` links as a
server does, and takes its temporal candidates from the store's times, read once and kept by
its writes (one process holds an embedded store). Schema 5 rows, with the key, still read;
copying an embedded store's rows to a server must give them the key back (the benchmark's
``_copy_to`` does).

The text is a metadata key, not Chroma's document (schema 3; schemas 1 and 2 kept it as the
document, still read): Chroma indexes a document for full-text search (SQLite FTS5, trigrams),
which scrubjay never queries and which cost 12-19% of each write (replays of the ingest
benchmark's 10k rows, three alternating runs: 4.22-4.76 s with the document, 3.71-4.18 s with
the text as metadata, the raw add of the same vectors with a document 3.60-3.90 s).

Write order makes a crash safe: ``where`` is written before ``what`` and deleted after it, so a
memory exists exactly when its ``what`` record does; :meth:`ChromaStore.reconcile` removes
``where`` rows left behind. An embedded (``path=``) store is locked to one process with an
exclusive ``flock`` on ``PATH/scrubjay-<ns>.lock``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import math
import os
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_string
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from .changelog import ChangeLog
from .errors import EmbedderMismatchError, StoreError, StoreLockedError

__all__ = [
    "EDGE_FILE",
    "INDEX_DRIFT_MAX_RAD",
    "RCI_EVENT_KEY",
    "SCHEMA_VERSION",
    "SYNC_THRESHOLD",
    "ChromaStore",
    "StoredRow",
    "distance_to_similarity",
    "pack_perishability",
    "pack_row",
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
_USER_PREFIX = "u_"
#: Chroma names a vector-index folder after its segment's UUID.
_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
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
#: The most memories one read by time returns (server mode's temporal link candidates).
TIME_READ_MAX = 5_000
#: Server mode's first read by time spans this share of the temporal horizon on each side of
#: a new memory, then widens as needed (:meth:`ChromaStore.nearest_in_time`; chosen: 5.7 h /
#: 256 is 80 s, which holds the 32 nearest on a side at one memory every 2.5 s or denser).
TIME_FIRST_SHARE = 256.0
#: Metadata key of a memory's creation time (epoch seconds; since schema 6 an embedded
#: store keeps it inside ``sj_row``, a server's rows keep the key: reads by time filter on it).
_TIME_KEY = "sj_t"
#: Metadata key of a memory's text (schema 3; before, Chroma's document).
_TEXT_KEY = "sj_text"
#: Metadata key of schema 4's packed row, and the separator of its two parts.
_ROW_KEY = "sj_row"
_ROW_SEP = "\x1f"
#: Metadata key of a memory's adjacency (JSON, :meth:`~scrubjay.graph.EpisodicGraph.dumps`).
_EDGES_KEY = "sj_edges"
#: An embedded store's edge file, in its folder: the adjacency of every namespace there.
EDGE_FILE = "scrubjay-graph.sqlite3"
#: Ids per statement of the edge file (SQLite allows 32,766 variables).
_EDGE_BATCH = 5_000
#: Metadata key of a memory's latest RCI update (see the module docstring).
_RCI_KEY = "sj_rci"
#: The key a read puts the latest RCI update's event key under (from ``sj_rci``'s ``ev``).
RCI_EVENT_KEY = "sj_rci_event"
#: Metadata key of a memory's perishability when written, and its fields as read (the
#: ``sj_*`` keys of schema 1, which the rest of the package reads).
_PERISH_KEY = "sj_perish"
_PERISH_FIELDS = (("label", "sj_label"), ("pi", "sj_pi"), ("tau", "sj_tau"),
                  ("value", "sj_value"), ("source", "sj_src"), ("t", "sj_t"))
#: Largest angle (radians) between a memory's indexed and exact what-vectors (chosen: it shifts a
#: cosine similarity seen by the HNSW candidate generation by at most 0.05; one RCI event moves a
#: vector by at most ~0.07 rad with the default eta_w = 0.2, theta = 0.6).
INDEX_DRIFT_MAX_RAD = 0.05


def distance_to_similarity(distance: NDArray[np.floating] | float) -> NDArray[np.float64]:
    """Chroma's cosine *distance* to cosine *similarity*: ``sim = 1 - distance``."""
    return 1.0 - np.asarray(distance, dtype=np.float64)


@dataclass(slots=True)
class StoredRow:
    """One memory as read back from Chroma."""

    id: str
    text: str
    meta: dict[str, Any]
    what: NDArray[np.float32] | None = None
    """The exact what-vector (an RCI-moved one from the metadata, else the index embedding)."""
    where: NDArray[np.float32] | None = None
    drift_rad: float = 0.0
    """Upper bound on the angle between ``what`` and the embedding in the HNSW index."""


@dataclass(frozen=True, slots=True)
class RowsBackup:
    """Stored memories as Chroma and the edge file hold them, raw: what
    :meth:`ChromaStore.restore` writes back when a replacement of them failed."""

    ids: list[str]
    """The memories found (an id that had no row is left out)."""
    embeddings: list[Any]
    """Their what rows' index embeddings, as Chroma returned them."""
    metadatas: list[dict[str, Any]]
    documents: list[str | None]
    where: dict[str, NDArray[np.float32]]
    """The where rows of those that have one."""
    adjacency: list[tuple[str, str | None]]
    """``(id, edges)`` of the memories and of their neighbours, as stored then (``None``: no
    entry). Against a server the memories' own are in ``metadatas`` and this lists their
    neighbours' ``sj_edges``."""


def _neighbour_ids(payloads: Iterable[str | None]) -> set[str]:
    """The other ends listed in adjacency payloads (``[[other, weight, ...], ...]``)."""
    out: set[str] = set()
    for payload in payloads:
        try:
            rows = json.loads(payload) if payload else []
        except ValueError:
            continue
        if isinstance(rows, list):
            out.update(r[0] for r in rows if isinstance(r, list) and r and isinstance(r[0], str))
    return out


def encode_vector(vector: NDArray[np.floating]) -> str:
    """A vector as base64 of its little-endian float32 bytes (exact for float32 input).

    >>> decode_vector(encode_vector(np.array([0.5, -1.0])))
    array([ 0.5, -1. ], dtype=float32)
    """
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(payload: str) -> NDArray[np.float32]:
    """The inverse of :func:`encode_vector`."""
    return np.frombuffer(base64.b64decode(payload), dtype="<f4").astype(np.float32)


def pack_rci(value: float, pi: float, tau_s: float, updated_at_s: float, drift_rad: float,
             what: NDArray[np.floating] | None, event: str | None = None) -> str:
    """The ``sj_rci`` payload (``what=None`` when the index embedding is the exact vector;
    ``event``: the key of the RCI event that wrote it, see :func:`scrubjay.rci.event_key`).

    JSON written with ``repr`` of finite floats (as ``json.dumps`` would, three times faster):

    >>> pack_rci(0.5, 0.25, 60.0, 1.0, 0.0, None)
    '{"value":0.5,"pi":0.25,"tau":60.0,"at":1.0,"drift":0.0}'
    >>> pack_rci(0.5, 0.25, 60.0, 1.0, 0.0, None, "3f2a")
    '{"value":0.5,"pi":0.25,"tau":60.0,"at":1.0,"drift":0.0,"ev":"3f2a"}'
    """
    head = (f'{{"value":{float(value)!r},"pi":{float(pi)!r},"tau":{float(tau_s)!r},'
            f'"at":{float(updated_at_s)!r},"drift":{float(drift_rad)!r}')
    if event is not None:
        head += f',"ev":{_json_string(event)}'
    return head + ("}" if what is None else f',"what":"{encode_vector(what)}"}}')


def pack_perishability(label: str, pi: float, tau_s: float, value: float, source: str) -> str:
    """The ``sj_perish`` payload.

    >>> pack_perishability("ephemeral", 0.9, 3600.0, 1.0, "keyword")
    '{"label":"ephemeral","pi":0.9,"tau":3600.0,"value":1.0,"source":"keyword"}'
    """
    return (f'{{"label":{json.dumps(label)},"pi":{float(pi)!r},"tau":{float(tau_s)!r},'
            f'"value":{float(value)!r},"source":{json.dumps(source)}}}')


def _unpack_perishability(meta: dict[str, Any]) -> None:
    """Spread an ``sj_perish`` payload over the ``sj_*`` keys of schema 1 (a key present on
    its own wins: a schema 1 row, or a later update of that key)."""
    payload = meta.pop(_PERISH_KEY, None)
    if not isinstance(payload, str):
        return
    try:
        obj = json.loads(payload)
        for field, key in _PERISH_FIELDS:
            if field in obj:
                meta.setdefault(key, obj[field])
    except (ValueError, TypeError):
        logger.warning("Ignoring unreadable perishability metadata")


def pack_row(perishability: str, text: str) -> str:
    """The ``sj_row`` payload of schema 4.

    >>> pack_row('{"label":"factual"}', "a\\x1fb").split("\\x1f", 1)
    ['{"label":"factual"}', 'a\\x1fb']
    """
    return f"{perishability}{_ROW_SEP}{text}"


def _row_meta(meta: Mapping[str, Any], text: str, *, edges: bool = True,
              time_key: bool = True) -> dict[str, Any]:
    """A new record's Chroma metadata: ``sj_perish`` and the text packed into ``sj_row`` (a
    record without ``sj_perish`` keeps schema 3's layout); ``edges=False``: without
    ``sj_edges`` (an embedded store keeps it in its edge file); ``time_key=False``: the time
    ``sj_t`` goes into the perishability payload (schema 6, embedded), not a key of its own.

    >>> _row_meta({"sj_perish": '{"pi":0.5}', "sj_t": 7.0}, "hi", time_key=False)
    {'sj_row': '{"pi":0.5,"t":7.0}\\x1fhi'}
    """
    perish = meta.get(_PERISH_KEY)
    drop = (_PERISH_KEY,) if edges else (_PERISH_KEY, _EDGES_KEY)
    out = {k: v for k, v in meta.items() if k not in drop}
    if not isinstance(perish, str):
        out[_TEXT_KEY] = text
        return out
    t = out.get(_TIME_KEY)
    if not time_key and isinstance(t, float) and perish.endswith("}") and perish != "{}":
        del out[_TIME_KEY]
        perish = f'{perish[:-1]},"t":{t!r}}}'
    out[_ROW_KEY] = pack_row(perish, text)
    return out


def _unpack_row(meta: dict[str, Any]) -> None:
    """Spread an ``sj_row`` payload over ``sj_perish`` and ``sj_text``."""
    payload = meta.pop(_ROW_KEY, None)
    if not isinstance(payload, str):
        return
    parts = payload.split(_ROW_SEP, 1)
    if len(parts) != 2:
        logger.warning("Ignoring an unreadable sj_row payload")
        return
    meta[_PERISH_KEY], meta[_TEXT_KEY] = parts


def _fold_packed(meta: dict[str, Any]) -> tuple[NDArray[np.float32] | None, float]:
    """Fold the packed keys into ``meta`` (``sj_row``, ``sj_perish``, then an ``sj_rci``
    update over them); returns (exact what-vector or None, drift)."""
    _unpack_row(meta)
    _unpack_perishability(meta)
    payload = meta.pop(_RCI_KEY, None)
    if not isinstance(payload, str):
        return None, 0.0
    try:
        obj = json.loads(payload)
        meta.update(sj_value=float(obj["value"]), sj_pi=float(obj["pi"]),
                    sj_tau=float(obj["tau"]), sj_updated=float(obj["at"]))
        if isinstance(obj.get("ev"), str):
            meta[RCI_EVENT_KEY] = obj["ev"]
        what = decode_vector(obj["what"]) if "what" in obj else None
        return what, float(obj["drift"]) if what is not None else 0.0
    except (ValueError, KeyError, TypeError):
        logger.warning("Ignoring an unreadable RCI update in metadata")
        return None, 0.0


def _text(meta: dict[str, Any], document: str | None) -> str:
    """A row's text, taken out of ``meta``: ``sj_text`` (schema 3), else the document."""
    text = meta.pop(_TEXT_KEY, None)
    return text if isinstance(text, str) else (document or "")


def _wrap(action: str, exc: Exception) -> StoreError:
    return StoreError(f"Chroma failed to {action}: {type(exc).__name__}: {exc}")


def _rows(got: Mapping[str, Any], where_vecs: Mapping[str, NDArray[np.float32]],
          vectors: bool, edges: Mapping[str, str],
          index_vectors: bool = True) -> Iterator[StoredRow]:
    """StoredRows from a Chroma ``get`` answer (and the where-vectors and edge-file
    adjacency read beside it; the edge file's wins over an ``sj_edges`` key of schema 4;
    ``index_vectors=False``: the answer holds no embeddings)."""
    for i, rid in enumerate(got["ids"]):
        meta = dict(got["metadatas"][i] or {})
        adjacency = edges.get(rid)
        if adjacency is not None:
            meta[_EDGES_KEY] = adjacency
        exact, drift = _fold_packed(meta)
        row = StoredRow(id=rid, text=_text(meta, got["documents"][i]), meta=meta)
        if vectors:
            row.what = exact if exact is not None or not index_vectors else \
                np.asarray(got["embeddings"][i], dtype=np.float32)
            row.where = where_vecs.get(rid)
            row.drift_rad = drift
        yield row


#: Errors a Chroma 1.5 server gives transiently while other processes write the same
#: collection: a fresh collection whose vector index is not on disk yet, and an id deleted
#: between the plan and its execution. Retried with a short backoff.
_TRANSIENT = ("Nothing found on disk", "Error finding id")


def _stretches(lo: NDArray[np.float64], hi: NDArray[np.float64],
               order: Sequence[int]) -> list[list[int]]:
    """``order`` (indices of ranges ``[lo, hi]``, ascending by their centres) cut where
    consecutive ranges stop overlapping."""
    out: list[list[int]] = []
    end = -math.inf
    for i in order:
        if out and lo[i] <= end:
            out[-1].append(i)
            end = max(end, float(hi[i]))
        else:
            out.append([i])
            end = float(hi[i])
    return out


@dataclass(frozen=True, slots=True)
class TimeNeighbours:
    """:meth:`ChromaStore.nearest_in_time_bounded`'s answer, per time asked about."""

    ids: list[list[str]]
    """The memories nearest in time."""
    times: list[list[float]]
    """Their creation times."""
    gaps: list[float]
    """No other memory is nearer in time than this (seconds; 0 when a read stopped at
    :data:`TIME_READ_MAX`: no bound)."""

    @classmethod
    def of(cls, answers: Sequence[tuple[list[str], list[float], float]]) -> TimeNeighbours:
        return cls(ids=[a[0] for a in answers], times=[a[1] for a in answers],
                   gaps=[a[2] for a in answers])


def _nearest(ids: Sequence[str], t_sorted: NDArray[np.float64], at: int, t_i: float, n: int,
             horizon_s: float, complete: bool = True) -> tuple[list[str], list[float], float]:
    """The ``n`` ids before position ``at`` of ``t_sorted`` and the ``n`` from it, those
    within ``horizon_s`` of ``t_i``; their times; and the gap: no memory left out is nearer
    in time to ``t_i`` than it (``complete``: every memory within the horizon that is
    nearer than the ``n``-th on a side was read; else the gap is 0, no bound)."""
    a, b = max(0, at - n), min(len(ids), at + n)
    near = [j for j in range(a, b) if abs(t_sorted[j] - t_i) <= horizon_s]
    gap = 0.0
    if complete:  # a side that holds n within the horizon ends at its n-th; else all are in
        before = t_i - float(t_sorted[a]) if at - a == n else horizon_s
        after = float(t_sorted[b - 1]) - t_i if b - at == n else horizon_s
        gap = max(0.0, min(before, after, horizon_s))
    return [ids[j] for j in near], [float(t_sorted[j]) for j in near], gap


def _retry(call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, retried on a transient Chroma server error (5 retries)."""
    delay = 0.05
    for attempt in range(6):
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            if attempt == 5 or not any(m in str(exc) for m in _TRANSIENT):
                raise
            logger.debug("transient Chroma error, retrying: %s", exc)
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def _query(col: Any, **kwargs: Any) -> Any:
    """``col.query(**kwargs)``; an empty collection whose index is not on disk yet answers
    empty instead of failing."""
    try:
        return _retry(col.query, **kwargs)
    except Exception as exc:
        if "Nothing found on disk" not in str(exc) or col.count() != 0:
            raise
        n = len(kwargs["query_embeddings"])
        return {key: [[] for _ in range(n)] for key in
                ("ids", "distances", "metadatas", "documents", "embeddings")}


def user_filter_keys(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Scalar user metadata, prefixed, so that Chroma ``where`` filters can use it."""
    out = {}
    for key, value in meta.items():
        if isinstance(value, (str, int, float, bool)):
            out[_USER_PREFIX + key] = value
    return out


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


class _EdgeFile:
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
                for lo in range(0, len(ids), _EDGE_BATCH):
                    part = ids[lo:lo + _EDGE_BATCH]
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


class ChromaStore:
    """The two Chroma collections of one namespace."""

    def __init__(self, *, client: Any, namespace: str, path: str | None = None,
                 prefix: str = "sj_", change_log: bool = False) -> None:
        self.client = client
        self.namespace = namespace
        self.path = path
        self.prefix = prefix
        self._max_batch: int | None = None
        #: The change marker after this object's last write (embedded stores, once tracked).
        self._expected_marker: str | None = None
        #: A read-only connection to Chroma's ``chroma.sqlite3`` for :meth:`change_marker`
        #: (opened once: a connection per call cost about 0.9 ms, twice per ``add``).
        self._marker_con: sqlite3.Connection | None = None
        self._marker_lock = threading.Lock()
        #: Whether the namespace may differ from what this object's writes made of it (someone
        #: else wrote it, or a write of ours failed half-way) since tracking began.
        self.diverged = False
        #: Per (horizon, n): where the next :meth:`nearest_in_time` call's reads start, the
        #: width that would hold 2n memories a side at the density the last call read.
        self._time_width: dict[tuple[float, int], float] = {}
        #: The newest creation time this object wrote or read (a read by time reaching past
        #: it has no upper bound: :meth:`nearest_in_time`).
        self._newest_seen = -math.inf
        #: An embedded store's creation times by id, read at the first read by time (its rows
        #: hold them inside ``sj_row``, which Chroma cannot filter on; one process writes an
        #: embedded store, so its own writes keep them current), and them sorted.
        self._times: dict[str, float] | None = None
        self._times_sorted: tuple[list[str], NDArray[np.float64]] | None = None
        #: An embedded store's adjacency (schema 5); None: it is in Chroma (``sj_edges``).
        self._edge_file: _EdgeFile | None = None
        #: Against a server: the namespace's change log, which every write here feeds and
        #: from which a mirror learns of other processes' writes (:mod:`scrubjay.changelog`).
        self.log: ChangeLog | None = None
        try:
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
        except Exception as exc:
            self.close()
            raise _wrap(f"open the collections of namespace {namespace!r}", exc) from exc
        for col in (self.what, self.where):
            _set_sync_threshold(col)
        if path is not None:
            try:
                self._edge_file = _EdgeFile(path, namespace)
            except StoreError:
                self.close()
                raise

    @classmethod
    def open_path(cls, path: str | os.PathLike[str], namespace: str) -> ChromaStore:
        """Open (creating) an embedded store; the folder is locked to this process."""
        key = str(Path(path).resolve())
        client = _EmbeddedClients.acquire(key)
        # a failed open releases this share itself (``__init__`` closes the store)
        return cls(client=client, namespace=namespace, path=key)

    def close(self) -> None:
        """Release this store's share of the embedded client and its process lock (against a
        server: wait for the change log's last requests)."""
        if self.log is not None:
            self.log.close()
        if self._edge_file is not None:
            self._edge_file.close()
        with self._marker_lock:
            if self._marker_con is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._marker_con.close()
                self._marker_con = None
        if self.path is not None:
            _EmbeddedClients.release(self.path)
            self.path = None

    # -- collection metadata: schema, embedder, buffer -------------------------------------
    def state(self) -> dict[str, Any]:
        try:
            return dict(self.what.metadata or {})
        except Exception as exc:
            raise _wrap("read the collection metadata", exc) from exc

    def set_state(self, **values: Any) -> None:
        current = self.state()
        current.update({k: v for k, v in values.items() if v is not None})
        for k in [k for k, v in values.items() if v is None]:
            current.pop(k, None)
        try:
            self.what.modify(metadata=current)
        except Exception as exc:
            raise _wrap("write the collection metadata", exc) from exc

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

    def recorded_embedder(self) -> tuple[str, int] | None:
        state = self.state()
        if "sj_embedder" not in state:
            return None
        return str(state["sj_embedder"]), int(state["sj_dim"])

    # -- change tracking (embedded stores) --------------------------------------------------
    def change_marker(self, *, counts: bool = True) -> str | None:
        """A string that changes with every write to this namespace, or None (not embedded,
        or a Chroma whose files look different).

        It joins the two collections' ids and the last log sequence number that each one's
        metadata segment applied (``max_seq_id`` in ``chroma.sqlite3``; Chroma gives every
        add, update and delete the next number), and with ``counts`` their row counts (a
        second check, but a count costs a scan: 0.3 s at 100,000 memories).
        """
        if self.path is None:
            return None
        db = Path(self.path) / "chroma.sqlite3"
        ids = [str(self.what.id), str(self.where.id)]
        with self._marker_lock:
            try:
                if self._marker_con is None:
                    # autocommit reads: no transaction is held between calls
                    self._marker_con = sqlite3.connect(f"file:{db}?mode=ro", uri=True,
                                                       timeout=30, check_same_thread=False,
                                                       isolation_level=None)
                rows = dict(self._marker_con.execute(
                    "SELECT s.collection, m.seq_id FROM segments s JOIN max_seq_id m ON "
                    "m.segment_id = s.id WHERE s.scope = 'METADATA' AND s.collection IN (?, ?)",
                    ids).fetchall())
            except sqlite3.Error:
                if self._marker_con is not None:
                    with contextlib.suppress(sqlite3.Error):
                        self._marker_con.close()
                    self._marker_con = None
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
                              else lambda: edge_file.write([*((i, m.get(_EDGES_KEY)) for i, m
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
                    self._update_meta([i for i, _ in part], [{_EDGES_KEY: e} for _, e in part],
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
                part = _retry(self.what.get, ids=list(ids[lo:lo + _READ_BATCH]),
                              include=["embeddings", "metadatas", "documents"])
                for key, values in got.items():
                    values.extend(part[key])
            found = list(got["ids"])
            metas = [dict(m or {}) for m in got["metadatas"]]
            where = self._where_embeddings(found)
            embedded = self._edge_file is not None
            own = self._stored_adjacency(found) if embedded else {
                i: m.get(_EDGES_KEY) for i, m in zip(found, metas, strict=True)}
            others = sorted(_neighbour_ids(own.values()) - set(found))
            theirs = self._stored_adjacency(others)
            # a server's rows carry their own adjacency in the metadata restored with them
            adjacency = [*((i, own.get(i)) for i in found if embedded),
                         *((j, theirs.get(j)) for j in others)]
        except StoreError:
            raise
        except Exception as exc:
            raise _wrap(f"read {len(ids)} memories before replacing them", exc) from exc
        return RowsBackup(ids=found, embeddings=list(got["embeddings"]), metadatas=metas,
                          documents=list(got["documents"]), where=where, adjacency=adjacency)

    def _stored_adjacency(self, ids: Sequence[str]) -> dict[str, str | None]:
        """The adjacency payload each of ``ids`` has stored: its edge-file entry in an
        embedded store, its ``sj_edges`` against a server (a missing one is left out)."""
        if self._edge_file is not None:
            return dict(self._edge_file.read(ids))
        return {row.id: row.meta.get(_EDGES_KEY) for row in self.get(ids)}

    def restore(self, backup: RowsBackup) -> None:
        """Write back the rows and adjacency of ``backup``, over whatever a failed replacement
        of them left (its rows are deleted first)."""
        ids = backup.ids
        if not ids:
            return
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
                raise _wrap(f"restore {len(ids)} memories", exc) from exc
            if self._edge_file is not None:
                self._edge_file.write(backup.adjacency)
            else:
                self._chroma_adjacency([(j, e) for j, e in backup.adjacency if e is not None])

    def _chroma_adjacency(self, adjacency: Sequence[tuple[str, str]]) -> None:
        """Against a server: rewrite the ``sj_edges`` key of the rows in ``adjacency``."""
        if adjacency:
            self._update_meta([i for i, _ in adjacency],
                              [{_EDGES_KEY: e} for _, e in adjacency], None)

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
            with contextlib.suppress(StoreError):
                self._delete(ids)
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
                              metadatas=[_row_meta(m, t, edges=server and edges,
                                                   time_key=server)
                                         for m, t in zip(metas[sl], texts[sl], strict=True)])
        except Exception as exc:
            raise _wrap(f"write {len(ids)} memories", exc) from exc
        if server:  # an embedded store's reads by time are its own (_nearest_in_time_local)
            times = [t for m in metas if isinstance(t := m.get(_TIME_KEY), float)]
            if times:
                self._newest_seen = max(self._newest_seen, *times)
        elif self._times is not None:
            self._times.update((i, float(m.get(_TIME_KEY, 0.0)))
                               for i, m in zip(ids, metas, strict=True))
            self._times_sorted = None

    def update_meta(self, ids: Sequence[str], metas: Sequence[dict[str, Any]],
                    what: NDArray[np.float32] | None = None) -> None:
        """Merge metadata into existing records (a key set to None is removed); with ``what``,
        also rewrite their index embeddings. The adjacency is written by :meth:`add` and
        :meth:`delete` only (an embedded store keeps it in its edge file)."""
        if self._edge_file is not None and any(_EDGES_KEY in m for m in metas):
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
            raise _wrap(f"update {len(ids)} memories", exc) from exc

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
                   event: str | None = None) -> NDArray[np.float64]:
        """Persist RCI updates (one ``sj_rci`` metadata key per record), tagged with the
        ``event`` key (:meth:`rci_events` reads it back).

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
        metas = [{_RCI_KEY: pack_rci(v[i], p[i], t[i], at, d[i],
                                     None if reindex[i] else what[i], event)}
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
        self._times = self._times_sorted = None  # read again at the next read by time
        try:
            step = self._batch()
            for lo in range(0, len(ids), step):
                self.what.delete(ids=list(ids[lo:lo + step]))
            for lo in range(0, len(ids), step):
                self.where.delete(ids=list(ids[lo:lo + step]))
        except Exception as exc:
            raise _wrap(f"delete {len(ids)} memories", exc) from exc

    def _redact_log(self, ids: Sequence[str] | None = None,
                    collection_ids: Sequence[str] | None = None) -> None:
        """Embedded stores: blank deleted memories' text in Chroma's write-ahead log.

        Chroma's local log (table ``embeddings_queue`` of ``chroma.sqlite3``) keeps every write,
        with its document and metadata, until the vector index flushes (``sync_threshold``
        writes later). A delete must not leave the text there, so the metadata of every logged
        write of a deleted id (or of a dropped collection) is set to NULL; the operations and
        vectors stay, so a replay after a crash is unchanged. ``secure_delete`` zeroes the
        freed bytes. A store without that table (a server, another Chroma version) is skipped.
        """
        if self.path is None:
            return
        db = Path(self.path) / "chroma.sqlite3"
        if not db.exists():
            return
        if collection_ids is None:
            collection_ids = [str(self.what.id), str(self.where.id)]
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
            raise _wrap("redact deleted memories from the write-ahead log", exc) from exc

    # -- reads -----------------------------------------------------------------------------
    def count(self) -> int:
        try:
            return int(self.what.count())
        except Exception as exc:
            raise _wrap("count memories", exc) from exc

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
                got = _retry(self.what.get, ids=part, include=include)
                where_vecs = self._where_embeddings(part) if vectors and where_vectors else {}
                rows.update((row.id, row) for row in _rows(got, where_vecs, vectors,
                                                           self.edges_of(got["ids"]),
                                                           index_vectors))
        except Exception as exc:
            raise _wrap(f"read {len(ids)} memories", exc) from exc
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
            raise _wrap(f"read {len(ids)} where-vectors", exc) from exc

    def _where_embeddings(self, ids: Sequence[str]) -> dict[str, NDArray[np.float32]]:
        """:meth:`where_vectors` with Chroma's exceptions unwrapped (callers wrap them)."""
        out: dict[str, NDArray[np.float32]] = {}
        for lo in range(0, len(ids), _READ_BATCH):
            got = _retry(self.where.get, ids=list(ids[lo:lo + _READ_BATCH]),
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
                got = _retry(self.what.get, include=include, limit=_PAGE, offset=offset)
                ids = got["ids"]
                where_vecs = self._where_embeddings(ids) if vectors else {}
            except Exception as exc:
                raise _wrap("read the namespace", exc) from exc
            yield from _rows(got, where_vecs, vectors, self.edges_of(ids))
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
            got = _query(col, query_embeddings=[vector.astype(np.float32)], n_results=n,
                         include=["distances"], where=where)
        except Exception as exc:
            raise _wrap(f"query the {which} collection", exc) from exc
        return list(got["ids"][0]), distance_to_similarity(got["distances"][0])

    def query_rows(self, vector: NDArray[np.float32], n: int, *,
                   where_vectors: bool) -> list[StoredRow]:
        """The top-``n`` memories by what-similarity as full rows (vectors included), in one
        query of the ``what`` collection (plus one ``get`` of ``where`` when asked)."""
        if n <= 0:
            return []
        try:
            got = _query(self.what, query_embeddings=[vector.astype(np.float32)], n_results=n,
                         include=["metadatas", "documents", "embeddings"])
            flat = {key: (got[key][0] if got.get(key) is not None else None)
                    for key in ("ids", "metadatas", "documents", "embeddings")}
            where_vecs = self._where_embeddings(flat["ids"] or []) if where_vectors else {}
        except Exception as exc:
            raise _wrap("query the what collection", exc) from exc
        return list(_rows(flat, where_vecs, True, self.edges_of(flat["ids"] or [])))

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
            got = _query(self.what, query_embeddings=[vector.astype(np.float32)], n_results=n,
                         include=["distances", "metadatas", "documents"])
        except Exception as exc:
            raise _wrap("query the what collection", exc) from exc
        ids = list(got["ids"][0])
        sims = distance_to_similarity(got["distances"][0])
        docs, metas = got["documents"][0], got["metadatas"][0]
        edges = self.edges_of(ids)
        out = []
        for i, rid in enumerate(ids):
            meta = dict(metas[i] or {})
            if rid in edges:
                meta[_EDGES_KEY] = edges[rid]
            exact, drift = _fold_packed(meta)
            row = StoredRow(id=rid, text=_text(meta, docs[i]), meta=meta)
            if exact is not None:  # RCI moved it: the index vector is off by up to ``drift``
                sims[i] = float(exact.astype(np.float64) @ vector.astype(np.float64))
                row.drift_rad = drift
            out.append(row)
        return out, sims

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
                got = _query(col, query_embeddings=vectors[lo:lo + _PAGE], n_results=n,
                             include=["distances"] if with_similarity else [])
                out.extend(list(ids) for ids in got["ids"])
                if with_similarity:
                    sims.extend([1.0 - float(d) for d in ds] for ds in got["distances"])
        except Exception as exc:
            raise _wrap(f"query the {which} collection", exc) from exc
        return out, sims

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` that are stored (one read per :data:`_READ_BATCH` ids, no
        payload)."""
        found: set[str] = set()
        try:
            for lo in range(0, len(ids), _READ_BATCH):
                found.update(_retry(self.what.get, ids=list(ids[lo:lo + _READ_BATCH]),
                                    include=[])["ids"])
        except Exception as exc:
            raise _wrap(f"read {len(ids)} ids", exc) from exc
        return found

    def nearest_in_time(self, times: Sequence[float], horizon_s: float, n: int, *,
                        newest_hint: float = -math.inf) -> list[list[str]]:
        """For each of ``times``, the ids of the (up to) ``n`` stored memories created nearest
        before it and the ``n`` nearest after it, within ``horizon_s`` (server mode's temporal
        link candidates): :meth:`nearest_in_time_bounded` without the times and gaps."""
        return self.nearest_in_time_bounded(times, horizon_s, n, newest_hint=newest_hint).ids

    def nearest_in_time_bounded(self, times: Sequence[float], horizon_s: float, n: int, *,
                                newest_hint: float = -math.inf) -> TimeNeighbours:
        """For each of ``times``, the ids of the (up to) ``n`` stored memories created nearest
        before it and the ``n`` nearest after it, within ``horizon_s`` (server mode's temporal
        link candidates), their times, and a gap that no other memory is nearer than.

        Chroma cannot order a read by metadata, so memories are read by time range, and the
        ranges start narrow: ``horizon_s / TIME_FIRST_SHARE`` on each side of each time (after
        a first call, the width that would hold ``2n`` memories a side at the density that call
        read), overlapping ranges merged into stretches, one read per stretch. An item is
        answered once each of its sides is known complete: ``n`` memories were read on that
        side (every memory in the range is read, so the nearest are among them), or the range
        reaches the horizon there, or, when the read found no memory on that side of the
        stretch, a probe (one id, no data) finds none between the range and the horizon either
        (the later side of the newest memory). The others are read again over a wider range,
        sized from the density just read, up to the horizon. A store dense in time (a memory a
        second puts 20,000 within the 5.7 h horizon) is so read around each time, not over its
        whole horizon. A read holding more than :data:`TIME_READ_MAX` memories stops there,
        and which of them Chroma returns is its choice: the nearest are then taken from that
        subset. A range that reaches past the newest memory this object wrote or read (or
        ``newest_hint``, the newest the caller knows of) is read upwards, with no upper bound
        (cheaper in Chroma, and complete on the later side: no probe); when that read stops at
        the limit, newer memories were written elsewhere, and the range is read again between
        its bounds.
        """
        out: list[tuple[list[str], list[float], float]] = [([], [], 0.0) for _ in times]
        if n <= 0 or horizon_s < 0 or not len(times):
            return TimeNeighbours.of(out)
        if self._edge_file is not None:
            return self._nearest_in_time_local(times, horizon_s, n)
        t_new = np.asarray(times, dtype=np.float64)
        start = min(horizon_s, self._time_width.get((horizon_s, n), horizon_s / TIME_FIRST_SHARE))
        width = np.full(len(t_new), start)  # per item, on each side
        fits: list[float] = []  # per read: the width that would hold 2n rows a side there
        pending = np.argsort(t_new, kind="stable").tolist()
        while pending:
            later: list[int] = []
            for members in _stretches(t_new - width, t_new + width, pending):
                lo = float(min(t_new[i] - width[i] for i in members))
                hi = float(max(t_new[i] + width[i] for i in members))
                # reaching past the newest memory known, read upwards with no upper bound:
                # Chroma matches each bound of a range, then intersects, so two bounds cost
                # about the namespace's size (50,000 memories: 35 ms, against 7 ms for one);
                # a memory added now, the usual case, is past every other
                upward = hi >= max(self._newest_seen, newest_hint)
                ids, t_sorted, capped = self._read_by_time(lo, None if upward else hi)
                if upward and capped:  # newer memories written elsewhere: the closed range
                    upward = False
                    ids, t_sorted, capped = self._read_by_time(lo, hi)
                inside = int(np.searchsorted(t_sorted, hi, side="right"))
                fit = 2.0 * n * (hi - lo) / inside if inside else None
                if fit is not None and not capped:
                    fits.append(fit)
                open_sides: list[tuple[int, int, bool, bool]] = []
                for i in members:
                    at = int(np.searchsorted(t_sorted, t_new[i]))  # read rows before t_i
                    final = capped or width[i] >= horizon_s
                    done_b = final or at >= n or lo <= t_new[i] - horizon_s
                    # an upward read holds every memory after t_i
                    done_a = (final or upward or len(ids) - at >= n
                              or hi >= t_new[i] + horizon_s)
                    if done_b and done_a:
                        out[i] = _nearest(ids, t_sorted, at, t_new[i], n, horizon_s, not capped)
                    else:
                        open_sides.append((i, at, done_b, done_a))
                if not open_sides:
                    continue
                # a side with no memory read may have none within the horizon either (the
                # later side of the newest memory): a probe, where a wider read would find none
                t_first, t_last = t_new[members[0]], t_new[members[-1]]
                none_b = (not all(b for _, _, b, _ in open_sides)
                          and not np.any(t_sorted < t_first)
                          and not self._any_in_time({"$gte": float(t_first - horizon_s)},
                                                    {"$lt": lo}))
                none_a = (not all(a for _, _, _, a in open_sides)
                          and not np.any(t_sorted > t_last)
                          and not self._any_in_time({"$gt": hi},
                                                    {"$lte": float(t_last + horizon_s)}))
                for i, at, done_b, done_a in open_sides:
                    if (done_b or none_b) and (done_a or none_a):
                        out[i] = _nearest(ids, t_sorted, at, t_new[i], n, horizon_s, not capped)
                    else:  # wider: 2n rows a side at the density read (none read: 16x), 4x or more
                        width[i] = min(horizon_s, 16.0 * width[i] if fit is None
                                       else max(4.0 * width[i], fit))
                        later.append(i)
            pending = sorted(later, key=lambda i: (t_new[i], i))
        if fits:  # the next call starts at the width that fits the density read
            self._time_width[(horizon_s, n)] = min(horizon_s, float(np.median(fits)))
        return TimeNeighbours.of(out)

    def _nearest_in_time_local(self, times: Sequence[float], horizon_s: float,
                               n: int) -> TimeNeighbours:
        """:meth:`nearest_in_time` of an embedded store (a memory with ``mirror=False``), from
        its creation times held here: read once (every row), then kept by its writes."""
        if self._times_sorted is None:
            known = self._times
            if known is None:
                known = self._times = {row.id: float(row.meta.get(_TIME_KEY, 0.0))
                                       for row in self.iter_all(vectors=False)}
            ids = sorted(known, key=lambda i: (known[i], i))
            self._times_sorted = ids, np.array([known[i] for i in ids], np.float64)
        ids, t_sorted = self._times_sorted
        return TimeNeighbours.of([_nearest(ids, t_sorted, int(np.searchsorted(t_sorted, t)),
                                           float(t), n, horizon_s) for t in times])

    def _read_by_time(self, lo: float, hi: float | None
                      ) -> tuple[list[str], NDArray[np.float64], bool]:
        """The ids of the memories created in ``[lo, hi]`` (``hi=None``: at ``lo`` or later)
        sorted by time, their times, and whether the read stopped at :data:`TIME_READ_MAX`."""
        where: dict[str, Any] = {_TIME_KEY: {"$gte": float(lo)}}
        if hi is not None:
            where = {"$and": [where, {_TIME_KEY: {"$lte": float(hi)}}]}
        try:
            got = _retry(self.what.get, where=where, limit=TIME_READ_MAX, include=["metadatas"])
        except Exception as exc:
            raise _wrap("read memories by time", exc) from exc
        capped = len(got["ids"]) >= TIME_READ_MAX
        if capped:
            logger.debug("%d+ memories within [%.0f, %.0f]: temporal link candidates taken "
                         "from Chroma's first %d", TIME_READ_MAX, lo, hi, TIME_READ_MAX)
        t = np.array([float((m or {}).get(_TIME_KEY, np.nan)) for m in got["metadatas"]])
        keep = np.flatnonzero(np.isfinite(t))
        order = keep[np.argsort(t[keep], kind="stable")]
        if len(order):
            self._newest_seen = max(self._newest_seen, float(t[order[-1]]))
        return [got["ids"][j] for j in order], t[order], capped

    def _any_in_time(self, low: dict[str, float], high: dict[str, float]) -> bool:
        """Whether a memory was created within the bounds (``{"$gte": t}`` and the like):
        one id read, no data."""
        try:
            got = _retry(self.what.get, where={"$and": [{_TIME_KEY: low}, {_TIME_KEY: high}]},
                         limit=1, include=[])
        except Exception as exc:
            raise _wrap("read memories by time", exc) from exc
        return bool(got["ids"])

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
            raise _wrap("reconcile the collections", exc) from exc
        return len(orphans)

    def compact(self) -> bool:
        """Embedded stores: ``VACUUM`` ``chroma.sqlite3`` so that the bytes of deleted rows
        (which Chroma frees but does not overwrite) leave the file, and remove the vector-index
        folders of deleted collections (Chroma leaves them behind). Returns False elsewhere."""
        if self.path is None or not (Path(self.path) / "chroma.sqlite3").exists():
            return False
        try:
            con = sqlite3.connect(Path(self.path) / "chroma.sqlite3", timeout=30,
                                  isolation_level=None)
            try:
                con.execute("VACUUM")
                live = {str(row[0]) for row in con.execute("SELECT id FROM segments")}
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise _wrap("compact the store file", exc) from exc
        for child in Path(self.path).iterdir():
            if child.is_dir() and _UUID_RE.fullmatch(child.name) and child.name not in live:
                shutil.rmtree(child, ignore_errors=True)
        return True

    # -- namespaces ------------------------------------------------------------------------
    @staticmethod
    def list_namespaces(client: Any) -> list[str]:
        try:
            names = [c if isinstance(c, str) else c.name for c in client.list_collections()]
        except Exception as exc:
            raise _wrap("list collections", exc) from exc
        return sorted(n[3:-5] for n in names if n.startswith("sj_") and n.endswith("_what"))

    @staticmethod
    def list_namespaces_at(path: str) -> list[str]:
        """Namespaces of an embedded store folder (takes its process lock meanwhile)."""
        key = str(Path(path).resolve())
        client = _EmbeddedClients.acquire(key)
        try:
            return ChromaStore.list_namespaces(client)
        finally:
            _EmbeddedClients.release(key)

    def drop(self) -> None:
        """Delete both collections of this namespace (and their text in the local log; against
        a server, its change log once its last requests are done)."""
        if self.log is not None:
            self.log.close()
        self._times = self._times_sorted = None
        collection_ids = [str(self.what.id), str(self.where.id)]
        for suffix in ("what", "where", *(("log",) if self.log is not None else ())):
            with contextlib.suppress(Exception):
                self.client.delete_collection(f"{self.prefix}{self.namespace}_{suffix}")
        self._redact_log(collection_ids=collection_ids)
        if self._edge_file is not None:
            self._edge_file.drop()


def dumps_user_meta(meta: Mapping[str, Any]) -> str:
    return json.dumps(dict(meta), separators=(",", ":"), sort_keys=True)


def loads_user_meta(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, str) or not payload:
        return {}
    try:
        out = json.loads(payload)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


class _EmbeddedClients:
    """One ``PersistentClient`` and one ``flock`` per folder per process, reference-counted.

    Several namespaces (several ``ScrubJayMemory`` objects) in one process share them; a second
    *process* gets :class:`StoreLockedError` instead of risking a corrupted store.
    """

    _lock = threading.Lock()
    _open: ClassVar[dict[str, tuple[Any, Any, int]]] = {}

    @classmethod
    def acquire(cls, folder: str) -> Any:
        with cls._lock:
            if folder in cls._open:
                client, handle, refs = cls._open[folder]
                cls._open[folder] = (client, handle, refs + 1)
                return client
            p = Path(folder)
            try:
                p.mkdir(parents=True, exist_ok=True)
                handle = open(p / "scrubjay.lock", "a+")  # noqa: SIM115 - held while open
            except OSError as exc:
                raise StoreError(f"Cannot create the store folder {folder!r}: {exc}") from exc
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                handle.close()
                raise StoreLockedError(
                    f"The embedded store at {folder!r} is in use by another process. A Chroma "
                    "PersistentClient folder must have a single writer process; for several "
                    "processes run `chroma run --path DIR --port P` and pass "
                    "client=chromadb.HttpClient(host=..., port=...).") from exc
            try:
                import chromadb
                from chromadb.config import Settings

                client = chromadb.PersistentClient(
                    path=folder, settings=Settings(anonymized_telemetry=False))
            except Exception as exc:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
                handle.close()
                raise _wrap(f"open the store at {folder!r}", exc) from exc
            cls._open[folder] = (client, handle, 1)
            return client

    @classmethod
    def release(cls, folder: str) -> None:
        with cls._lock:
            if folder not in cls._open:
                return
            client, handle, refs = cls._open[folder]
            if refs > 1:
                cls._open[folder] = (client, handle, refs - 1)
                return
            del cls._open[folder]
            # Stop Chroma's cached system for this folder before unlocking: another process
            # may write the folder next, and a later reopen here must read the disk afresh
            # (a cached system keeps stale index state: "Error finding id" on the next read).
            with contextlib.suppress(Exception):
                client.close()
            with contextlib.suppress(OSError):
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()
