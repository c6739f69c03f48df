"""The one place that maps scrubjay's types to LangChain's and LangGraph's, and back.

``Hit``/``MemoryRecord`` -> ``Document`` (:func:`hit_to_document`, :func:`record_to_document`;
the vector store's :func:`to_user_document`), ``Document`` -> an ``add_many`` item
(:func:`document_to_item`, :func:`user_document_to_item`), and ``MemoryRecord`` -> LangGraph
``Item``/``SearchItem`` (:func:`record_to_item`, :func:`value_to_metadata`). Every number that
crosses is a native ``float``/``int``/``bool``. No math happens here: an outdated memory's
marker and metadata come from :mod:`scrubjay.explain`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from langchain_core.documents import Document
from scrubjay import Hit, MemoryRecord
from scrubjay.annotation import safe_annotation
from scrubjay.explain import STALE_KEYS, Staleness, mark, stale_metadata, unmark

__all__ = [
    "RESERVED_KEYS",
    "STORE_KEYS",
    "document_to_item",
    "epoch_to_datetime",
    "hit_to_document",
    "record_to_document",
    "record_to_item",
    "to_user_document",
    "user_document_to_item",
    "value_to_metadata",
]

#: Metadata keys written by :func:`record_to_document`; they override user metadata of the same
#: name and are stripped again by :func:`document_to_item` (``created_at`` and ``context`` are
#: read back as the memory's time and context).
RESERVED_KEYS = frozenset({
    "id", "context", "created_at", "label", "pi", "tau_s", "value", "source", "annotation",
    "updated_at", "utility", "stale", "score", "paper_score", "what", "where", "when", "graph",
    "lexical", "time_factor", "weights", "from_buffer", *STALE_KEYS,
})


def record_to_document(rec: MemoryRecord) -> Document:
    """A stored memory as a ``Document``: text as page content, perishability as metadata."""
    meta: dict[str, Any] = dict(rec.metadata)
    meta.update({
        "id": str(rec.id), "context": str(rec.context), "created_at": float(rec.created_at_s),
        "label": str(rec.label), "pi": float(rec.pi), "tau_s": float(rec.tau_s),
        "value": float(rec.value), "source": str(rec.source),
        # data, never page content; checked again for stores written before the checks
        "annotation": safe_annotation(str(rec.annotation)),
    })
    if rec.updated_at_s is not None:
        meta["updated_at"] = float(rec.updated_at_s)
    return Document(page_content=rec.text, metadata=meta, id=str(rec.id))


def hit_to_document(hit: Hit, outdated: Staleness | None = None, *,
                    mark_stale: bool = True) -> Document:
    """A search hit as a ``Document`` carrying its utility, stale flag, score and breakdown.

    When ``outdated`` (see :func:`scrubjay.explain.staleness`), the page content starts with
    the marker (unless ``mark_stale=False``) and the metadata says why and since when.
    """
    doc = record_to_document(hit.record)
    if outdated is not None:
        if mark_stale:
            doc.page_content = mark(doc.page_content, outdated)
        doc.metadata.update(stale_metadata(outdated))
    doc.metadata.update({
        "utility": float(hit.utility), "stale": bool(hit.stale), "score": float(hit.score),
        "paper_score": float(hit.paper_score),
        "what": float(hit.what), "where": float(hit.where), "when": float(hit.when),
        "graph": float(hit.graph), "lexical": float(hit.lexical),
        "time_factor": float(hit.time_factor), "weights": [float(w) for w in hit.weights],
        "from_buffer": bool(hit.from_buffer),
    })
    doc.metadata["stale"] = outdated is not None or bool(hit.stale)
    return doc


def to_user_document(rec: MemoryRecord, outdated: Staleness | None = None, *,
                     mark_stale: bool = True) -> Document:
    """The vector store's ``Document``: the text and metadata exactly as added, plus, for an
    outdated memory, the marker (unless ``mark_stale=False``) and the ``stale_*`` metadata."""
    meta: dict[str, Any] = dict(rec.metadata)
    text = rec.text
    if outdated is not None:
        meta.update(stale_metadata(outdated))
        if mark_stale:
            text = mark(text, outdated)
    return Document(page_content=text, metadata=meta, id=str(rec.id))


def _time_of(meta: Mapping[str, Any]) -> Any:
    at = meta.get("created_at")
    return datetime.fromisoformat(at) if isinstance(at, str) else at


def document_to_item(doc: Document, id: str | None = None) -> dict[str, Any]:
    """An ``add_many`` item for ``doc``: ``created_at`` and ``context`` come from its metadata.

    ``created_at`` may be epoch seconds, an aware ``datetime`` or an ISO-8601 string; the
    remaining metadata, minus :data:`RESERVED_KEYS`, is kept as the memory's metadata.
    """
    meta = dict(doc.metadata or {})
    item: dict[str, Any] = {"text": unmark(doc.page_content),
                            "context": str(meta.get("context") or ""),
                            "metadata": {k: v for k, v in meta.items() if k not in RESERVED_KEYS}}
    at = _time_of(meta)
    if at is not None:
        item["at"] = at
    mid = id if id is not None else doc.id
    if mid is not None:
        item["id"] = str(mid)
    return item


def user_document_to_item(doc: Document, id: str | None = None) -> dict[str, Any]:
    """The vector store's ``add_many`` item: the metadata is kept whole (minus the ``stale_*``
    keys a search wrote); a str ``context`` and a ``created_at`` in it also become the memory's
    context and time."""
    meta = {k: v for k, v in (doc.metadata or {}).items() if k not in STALE_KEYS}
    context = meta.get("context")
    item: dict[str, Any] = {"text": unmark(doc.page_content), "metadata": meta,
                            "context": context if isinstance(context, str) else ""}
    at = _time_of(meta)
    if at is not None:
        item["at"] = at
    mid = id if id is not None else doc.id
    if mid is not None:
        item["id"] = str(mid)
    return item


# ---------------------------------------------------------------------- LangGraph store items
#: Keys of a memory's metadata that carry a LangGraph item.
STORE_KEYS = ("lg_ns", "lg_key", "lg_value", "lg_indexed")


def epoch_to_datetime(t_s: float) -> datetime:
    """Epoch seconds as an aware UTC ``datetime``."""
    return datetime.fromtimestamp(float(t_s), tz=UTC)


def value_to_metadata(namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
                      indexed: bool) -> dict[str, Any]:
    """Memory metadata holding a LangGraph item: its namespace, key and value as JSON."""
    return {"lg_ns": list(namespace), "lg_key": str(key),
            "lg_value": json.dumps(dict(value), separators=(",", ":")),
            "lg_indexed": bool(indexed)}


def record_to_item(rec: MemoryRecord, hit: Hit | None = None) -> Any:
    """The LangGraph ``Item`` stored in ``rec`` (a ``ScrubJaySearchItem`` when from a hit)."""
    from langgraph.store.base import Item

    from ._items import ScrubJaySearchItem

    meta = rec.metadata
    created = epoch_to_datetime(rec.created_at_s)
    updated = epoch_to_datetime(rec.updated_at_s) if rec.updated_at_s is not None else created
    common = {"namespace": tuple(str(x) for x in meta["lg_ns"]), "key": str(meta["lg_key"]),
              "value": json.loads(meta["lg_value"]), "created_at": created, "updated_at": updated}
    if hit is None:
        return Item(**common)
    return ScrubJaySearchItem(**common, score=float(hit.score), utility=float(hit.utility),
                              stale=bool(hit.stale))
