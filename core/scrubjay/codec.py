"""How a memory is laid out in its Chroma rows (the row codec), and back.

A namespace ``ns`` lives in two collections (cosine space, no Chroma embedding function):

* ``sj_{ns}_what``: one row per memory, embedding ``w_what``. Its metadata holds

  - ``sj_row``: the perishability payload (JSON: label, pi, tau, value, source and, in an
    embedded store, the creation time ``t``), then ``\\x1f``, then the text (last: it may hold
    anything). One key, because Chroma writes one SQLite row per metadata key and a long entry
    spills to an overflow page.
  - ``sj_t``: the creation time, as a key of its own only against a server (reads by time
    range filter on it; an embedded store keeps it inside ``sj_row``).
  - ``sj_edges``: the adjacency (JSON ``[[id, weight, e_S, e_C, e_T], ...]``) against a server;
    an embedded store keeps it in its edge file (:mod:`scrubjay.edgefile`).
  - ``sj_rci``: the latest RCI update (JSON: value, pi, tau, update time, the moved
    what-vector as base64 float32, ``drift``, the bound on its angle to the indexed
    embedding, and ``ev``, the event's key). Reads apply it over the perishability.
  - ``sj_ctx``, ``sj_ann``, ``sj_meta`` (context, annotation, user metadata as JSON) when not
    empty, ``sj_updated``, and each scalar user field as ``u_<key>`` for Chroma filters.

* ``sj_{ns}_where``: the same ids, embedding ``w_where``; only memories with a context have a
  row (an empty context embeds to the zero vector).

Rows written by older versions of the package (a key per perishability field, the text as
``sj_text`` or as Chroma's document) are still read: :func:`fold_packed` and
:func:`row_text` accept every layout, and :func:`record_of` reads missing keys as empty.
"""

from __future__ import annotations

import base64
import json
import logging
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_string
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .types import MemoryRecord

__all__ = [
    "INDEX_DRIFT_MAX_RAD",
    "RCI_DELTAS_KEY",
    "RCI_EVENT_KEY",
    "TEMPORAL_KEY",
    "RowsBackup",
    "StoredRow",
    "decode_vector",
    "distance_to_similarity",
    "dumps_user_meta",
    "encode_vector",
    "fold_packed",
    "loads_user_meta",
    "meta_of",
    "pack_perishability",
    "pack_rci",
    "pack_row",
    "pack_temporal",
    "record_of",
    "row_meta",
    "row_text",
    "rows_from_get",
    "temporal_fields",
    "user_filter_keys",
]

logger = logging.getLogger(__name__)

#: Prefix of the scalar user-metadata keys that Chroma ``where`` filters can use.
USER_PREFIX = "u_"
#: Metadata key of a memory's creation time (epoch seconds; since schema 6 an embedded
#: store keeps it inside ``sj_row``, a server's rows keep the key: reads by time filter on it).
TIME_KEY = "sj_t"
#: Metadata key of a memory's text (schema 3; before, Chroma's document).
TEXT_KEY = "sj_text"
#: Metadata key of schema 4's packed row, and the separator of its two parts.
ROW_KEY = "sj_row"
ROW_SEP = "\x1f"
#: Metadata key of a memory's adjacency (JSON, :meth:`~scrubjay.graph.EpisodicGraph.dumps`).
EDGES_KEY = "sj_edges"
#: Metadata key of a memory's latest RCI update (see the module docstring).
RCI_KEY = "sj_rci"
#: The key a read puts the latest RCI update's event key under (from ``sj_rci``'s ``ev``).
RCI_EVENT_KEY = "sj_rci_event"
#: The key a read puts an ``sj_rci`` payload's time-stamped deltas under (``d``).
RCI_DELTAS_KEY = "sj_rci_deltas"
#: Metadata key of a memory's perishability when written, and its fields as read (the
#: ``sj_*`` keys of schema 1, which the rest of the package reads).
PERISH_KEY = "sj_perish"
PERISH_FIELDS = (("label", "sj_label"), ("pi", "sj_pi"), ("tau", "sj_tau"),
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


def neighbour_ids(payloads: Iterable[str | None]) -> set[str]:
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
             what: NDArray[np.floating] | None, event: str | None = None,
             deltas: Sequence[tuple[float, float, float, float]] = ()) -> str:
    """The ``sj_rci`` payload (``what=None`` when the index embedding is the exact vector;
    ``event``: the key of the RCI event that wrote it, see :func:`scrubjay.rci.event_key`;
    ``deltas``: every RCI update of the memory, ``MemoryRecord.rci_deltas``).

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
    if deltas:
        head += ',"d":[' + ",".join(
            f"[{float(a)!r},{float(b)!r},{float(c)!r},{float(e)!r}]" for a, b, c, e in deltas) + "]"
    return head + ("}" if what is None else f',"what":"{encode_vector(what)}"}}')


def pack_perishability(label: str, pi: float, tau_s: float, value: float, source: str) -> str:
    """The ``sj_perish`` payload.

    >>> pack_perishability("ephemeral", 0.9, 3600.0, 1.0, "keyword")
    '{"label":"ephemeral","pi":0.9,"tau":3600.0,"value":1.0,"source":"keyword"}'
    """
    return (f'{{"label":{json.dumps(label)},"pi":{float(pi)!r},"tau":{float(tau_s)!r},'
            f'"value":{float(value)!r},"source":{json.dumps(source)}}}')


def unpack_perishability(meta: dict[str, Any]) -> None:
    """Spread an ``sj_perish`` payload over the ``sj_*`` keys of schema 1 (a key present on
    its own wins: a schema 1 row, or a later update of that key)."""
    payload = meta.pop(PERISH_KEY, None)
    if not isinstance(payload, str):
        return
    try:
        obj = json.loads(payload)
        for field, key in PERISH_FIELDS:
            if field in obj:
                meta.setdefault(key, obj[field])
    except (ValueError, TypeError):
        logger.warning("Ignoring unreadable perishability metadata")


def pack_row(perishability: str, text: str) -> str:
    """The ``sj_row`` payload of schema 4.

    >>> pack_row('{"label":"factual"}', "a\\x1fb").split("\\x1f", 1)
    ['{"label":"factual"}', 'a\\x1fb']
    """
    return f"{perishability}{ROW_SEP}{text}"


def row_meta(meta: Mapping[str, Any], text: str, *, edges: bool = True,
              time_key: bool = True) -> dict[str, Any]:
    """A new record's Chroma metadata: ``sj_perish`` and the text packed into ``sj_row`` (a
    record without ``sj_perish`` keeps schema 3's layout); ``edges=False``: without
    ``sj_edges`` (an embedded store keeps it in its edge file); ``time_key=False``: the time
    ``sj_t`` goes into the perishability payload (schema 6, embedded), not a key of its own.

    >>> row_meta({"sj_perish": '{"pi":0.5}', "sj_t": 7.0}, "hi", time_key=False)
    {'sj_row': '{"pi":0.5,"t":7.0}\\x1fhi'}
    """
    perish = meta.get(PERISH_KEY)
    drop = (PERISH_KEY,) if edges else (PERISH_KEY, EDGES_KEY)
    out = {k: v for k, v in meta.items() if k not in drop}
    if not isinstance(perish, str):
        out[TEXT_KEY] = text
        return out
    t = out.get(TIME_KEY)
    if not time_key and isinstance(t, float) and perish.endswith("}") and perish != "{}":
        del out[TIME_KEY]
        perish = f'{perish[:-1]},"t":{t!r}}}'
    out[ROW_KEY] = pack_row(perish, text)
    return out


def unpack_row(meta: dict[str, Any]) -> None:
    """Spread an ``sj_row`` payload over ``sj_perish`` and ``sj_text``."""
    payload = meta.pop(ROW_KEY, None)
    if not isinstance(payload, str):
        return
    parts = payload.split(ROW_SEP, 1)
    if len(parts) != 2:
        logger.warning("Ignoring an unreadable sj_row payload")
        return
    meta[PERISH_KEY], meta[TEXT_KEY] = parts


def fold_packed(meta: dict[str, Any]) -> tuple[NDArray[np.float32] | None, float]:
    """Fold the packed keys into ``meta`` (``sj_row``, ``sj_perish``, then an ``sj_rci``
    update over them); returns (exact what-vector or None, drift)."""
    unpack_row(meta)
    unpack_perishability(meta)
    payload = meta.pop(RCI_KEY, None)
    if not isinstance(payload, str):
        return None, 0.0
    try:
        obj = json.loads(payload)
        meta.update(sj_value=float(obj["value"]), sj_pi=float(obj["pi"]),
                    sj_tau=float(obj["tau"]), sj_updated=float(obj["at"]))
        if isinstance(obj.get("ev"), str):
            meta[RCI_EVENT_KEY] = obj["ev"]
        if "d" in obj:
            meta[RCI_DELTAS_KEY] = _read_deltas(obj["d"])
        what = decode_vector(obj["what"]) if "what" in obj else None
        return what, float(obj["drift"]) if what is not None else 0.0
    except (ValueError, KeyError, TypeError):
        logger.warning("Ignoring an unreadable RCI update in metadata")
        return None, 0.0


def _read_deltas(raw: Any) -> tuple[tuple[float, float, float, float], ...]:
    """The time-stamped deltas of an ``sj_rci`` payload (none when unreadable: the memory then
    answers every as-of query with today's state)."""
    try:
        out = tuple((float(a), float(b), float(c), float(d)) for a, b, c, d in raw)
    except (ValueError, TypeError):
        out = ()
    if not all(math.isfinite(x) for d in out for x in d) or any(d[3] <= 0 for d in out):
        logger.warning("Ignoring unreadable RCI deltas in metadata")
        return ()
    return out


def row_text(meta: dict[str, Any], document: str | None) -> str:
    """A row's text, taken out of ``meta``: ``sj_text`` (schema 3), else the document."""
    text = meta.pop(TEXT_KEY, None)
    return text if isinstance(text, str) else (document or "")


def is_whole_row(meta: Mapping[str, Any] | None, text: str) -> bool:
    """Whether a row read from Chroma is a whole memory. A row another client deletes while
    it is read can come back as its id alone (no metadata, no text): it is skipped, never
    returned as an empty memory."""
    return bool(meta) and bool(text)


def rows_from_get(got: Mapping[str, Any], where_vecs: Mapping[str, NDArray[np.float32]],
          vectors: bool, edges: Mapping[str, str],
          index_vectors: bool = True) -> Iterator[StoredRow]:
    """StoredRows from a Chroma ``get`` answer (and the where-vectors and edge-file
    adjacency read beside it; the edge file's wins over an ``sj_edges`` key of schema 4;
    ``index_vectors=False``: the answer holds no embeddings)."""
    for i, rid in enumerate(got["ids"]):
        meta = dict(got["metadatas"][i] or {})
        adjacency = edges.get(rid)
        if adjacency is not None:
            meta[EDGES_KEY] = adjacency
        exact, drift = fold_packed(meta)
        row = StoredRow(id=rid, text=row_text(meta, got["documents"][i]), meta=meta)
        if not is_whole_row(got["metadatas"][i], row.text):
            continue  # deleted by another client between the index and the record read
        if vectors:
            row.what = exact if exact is not None or not index_vectors else \
                np.asarray(got["embeddings"][i], dtype=np.float32)
            row.where = where_vecs.get(rid)
            row.drift_rad = drift
        yield row

def user_filter_keys(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Scalar user metadata, prefixed, so that Chroma ``where`` filters can use it."""
    out = {}
    for key, value in meta.items():
        if isinstance(value, (str, int, float, bool)):
            out[USER_PREFIX + key] = value
    return out

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


def record_of(row: StoredRow) -> MemoryRecord:
    """The :class:`MemoryRecord` a stored row holds (a missing key reads as empty)."""
    m = row.meta
    return MemoryRecord(
        id=row.id, text=row.text, context=str(m.get("sj_ctx", "")),
        label=str(m.get("sj_label", "factual")), pi=float(m.get("sj_pi", 0.1)),
        tau_s=float(m.get("sj_tau", 45 * 86_400.0)), value=float(m.get("sj_value", 1.0)),
        created_at_s=float(m.get("sj_t", 0.0)), metadata=loads_user_meta(m.get("sj_meta")),
        annotation=str(m.get("sj_ann", "")), source=m.get("sj_src", "keyword"),
        updated_at_s=float(m["sj_updated"]) if "sj_updated" in m else None,
        rci_deltas=m.get(RCI_DELTAS_KEY, ()), **temporal_fields(m.get(TEMPORAL_KEY)))


def meta_of(rec: MemoryRecord, edges: str) -> dict[str, Any]:
    """A new record's Chroma metadata (before :func:`row_meta` packs it). Chroma writes each
    key as a row of its own, so a lighter row is a cheaper write: the perishability fields
    share one key, and the context, annotation and user metadata are left out when empty
    (:func:`record_of` reads a missing key as empty)."""
    meta: dict[str, Any] = {
        "sj_perish": pack_perishability(rec.label, rec.pi, rec.tau_s, rec.value, rec.source),
        "sj_t": float(rec.created_at_s), "sj_edges": edges,
    }
    if rec.context:
        meta["sj_ctx"] = rec.context
    if rec.annotation:
        meta["sj_ann"] = rec.annotation
    if rec.metadata:
        meta["sj_meta"] = dumps_user_meta(rec.metadata)
    if rec.updated_at_s is not None:
        meta["sj_updated"] = float(rec.updated_at_s)
    temporal = pack_temporal(rec)
    if temporal is not None:
        meta[TEMPORAL_KEY] = temporal
    meta.update(user_filter_keys(rec.metadata))
    return meta


#: Metadata key of a memory's validity and replacement (JSON, :func:`pack_temporal`); absent
#: when it has none (valid from when it was recorded, no stated end, not replaced).
TEMPORAL_KEY = "sj_when"
_TEMPORAL_FIELDS = (("vf", "valid_from_s"), ("vu", "valid_until_s"),
                    ("inv", "invalidated_at_s"), ("sup", "superseded_by"), ("win", "window"))


def pack_temporal(rec: MemoryRecord) -> str | None:
    """The ``sj_when`` payload of a record, or None when it has nothing to say.

    >>> from scrubjay.types import MemoryRecord
    >>> pack_temporal(MemoryRecord(id="a", text="t", context="", label="factual", pi=0.1,
    ...     tau_s=60.0, value=1.0, created_at_s=5.0, invalidated_at_s=9.0, superseded_by="b"))
    '{"inv":9.0,"sup":"b"}'
    """
    payload = {key: getattr(rec, name) for key, name in _TEMPORAL_FIELDS
               if getattr(rec, name) is not None}
    return json.dumps(payload, separators=(",", ":")) if payload else None


def temporal_fields(payload: Any) -> dict[str, Any]:
    """The record fields an ``sj_when`` payload holds (none when absent or unreadable)."""
    if not isinstance(payload, str) or not payload:
        return {}
    try:
        obj = json.loads(payload)
        out: dict[str, Any] = {}
        for key, name in _TEMPORAL_FIELDS:
            if obj.get(key) is not None:
                out[name] = str(obj[key]) if key in ("sup", "win") else float(obj[key])
        return out
    except (ValueError, TypeError, AttributeError):
        logger.warning("Ignoring unreadable validity metadata")
        return {}
