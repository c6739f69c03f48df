"""The one place where scrubjay values and LlamaIndex nodes meet (private).

One function each way, with a round-trip test (``tests/llamaindex/test_convert.py``):

- :func:`record_to_node` / :func:`hit_to_node`: ``MemoryRecord`` / ``Hit`` -> ``TextNode`` /
  ``NodeWithScore``, every number a native ``float`` and the memory id as the node id.
- :func:`node_to_item`: any LlamaIndex node (``Document``, ``TextNode``, ...) -> one item for
  :meth:`scrubjay.ScrubJayMemory.add_many`.

Metadata written onto a node (the keys of :data:`SCRUBJAY_KEYS`) sit beside the memory's own
metadata and win a name clash. When a node goes back into a memory, ``context`` and ``created_at``
become the memory's context and time, the other scrubjay keys are dropped (they are recomputed),
and everything else is kept as the memory's metadata, made JSON-able (see :func:`jsonable`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, TextNode
from scrubjay import Hit, InvalidInputError, MemoryRecord
from scrubjay.annotation import safe_annotation

__all__ = [
    "LLM_VISIBLE_KEYS",
    "SCRUBJAY_KEYS",
    "hit_to_node",
    "jsonable",
    "node_to_item",
    "parse_time",
    "record_to_node",
]

#: Node metadata keys written from a memory record.
RECORD_KEYS: tuple[str, ...] = ("memory_id", "context", "created_at", "label", "pi", "tau_s",
                                "value", "source", "annotation")
#: Node metadata keys written from a search hit (the score and its explanation, paper Eq. 5).
HIT_KEYS: tuple[str, ...] = ("score", "paper_score", "utility", "stale", "score_what",
                             "score_where",
                             "score_when", "score_graph", "weight_what", "weight_where",
                             "weight_when", "weight_graph", "from_buffer")
#: Every key this package writes; on the way back only ``context`` and ``created_at`` are read.
SCRUBJAY_KEYS: tuple[str, ...] = RECORD_KEYS + HIT_KEYS
#: The scrubjay keys an LLM sees in a prompt (the rest are excluded from LLM and embedding text).
LLM_VISIBLE_KEYS: tuple[str, ...] = ("context", "label", "stale")

#: Nesting that :func:`jsonable` keeps as lists/dicts; deeper values become strings (the core
#: accepts four levels of nesting in metadata).
_MAX_DEPTH = 3


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as a JSON value the core accepts as metadata.

    ``None``, ``str``, ``bool``, ``int`` and finite ``float`` stay as they are; lists, tuples
    and mappings are converted item by item (keys become ``str``); ``datetime``/``date`` become
    ISO strings; anything else (and NaN, infinities, too deep nesting) becomes ``str(value)``.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if depth < _MAX_DEPTH and isinstance(value, (list, tuple)):
        return [jsonable(v, depth + 1) for v in value]
    if depth < _MAX_DEPTH and isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        try:
            return jsonable(value.item(), depth)
        except (TypeError, ValueError):
            pass
    return str(value)


def parse_time(value: Any, name: str = "created_at") -> float | datetime:
    """A node's ``created_at``: epoch seconds, an aware ``datetime`` or an ISO string with a
    timezone (``"2025-11-24T09:00:00+00:00"``, ``"...Z"``). The core rejects naive times."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInputError(
                f"The {name!r} metadata of a node must be epoch seconds or an ISO 8601 time with "
                f"a timezone. Got {value!r} instead.") from None
    if isinstance(value, (datetime, int, float)):
        return value
    raise InvalidInputError(f"The {name!r} metadata of a node must be epoch seconds or an ISO "
                            f"8601 time with a timezone. Got {type(value).__name__} instead.")


def record_to_node(record: MemoryRecord) -> TextNode:
    """A ``TextNode`` for one memory: its id, text, metadata and perishability."""
    meta: dict[str, Any] = dict(record.metadata)
    meta.update({
        "memory_id": record.id, "context": record.context,
        "created_at": float(record.created_at_s), "label": record.label,
        "pi": float(record.pi), "tau_s": float(record.tau_s), "value": float(record.value),
        "source": str(record.source),
        # data, hidden from the LLM; checked again for stores written before the checks
        "annotation": safe_annotation(record.annotation),
    })
    hidden = [k for k in SCRUBJAY_KEYS if k not in LLM_VISIBLE_KEYS]
    return TextNode(id_=record.id, text=record.text, metadata=meta,
                    excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=hidden)


def hit_to_node(hit: Hit) -> NodeWithScore:
    """A ``NodeWithScore`` for one search hit; the score components travel in the metadata."""
    node = record_to_node(hit.record)
    w_what, w_where, w_when, w_graph = (float(w) for w in hit.weights)
    node.metadata.update({
        "score": float(hit.score), "paper_score": float(hit.paper_score),
        "utility": float(hit.utility), "stale": bool(hit.stale), "score_what": float(hit.what), "score_where": float(hit.where),
        "score_when": float(hit.when), "score_graph": float(hit.graph),
        "weight_what": w_what, "weight_where": w_where, "weight_when": w_when,
        "weight_graph": w_graph, "from_buffer": bool(hit.from_buffer),
    })
    return NodeWithScore(node=node, score=float(hit.score))


def node_to_item(node: BaseNode, context: str = "") -> dict[str, Any]:
    """One :meth:`~scrubjay.ScrubJayMemory.add_many` item for ``node``.

    The node id becomes the memory id (re-inserting a node replaces its memory). ``context``
    is used when the node's metadata has no ``context``.
    """
    if isinstance(node, NodeWithScore):
        node = node.node
    if not isinstance(node, BaseNode):
        raise InvalidInputError("The items given to a scrubjay LlamaIndex insert must be "
                                "LlamaIndex nodes or Documents. Got "
                                f"{type(node).__name__} instead.")
    meta = dict(node.metadata or {})
    ctx = meta.pop("context", None)
    if ctx is None:
        ctx = context
    elif not isinstance(ctx, str):
        ctx = str(ctx)
    created = meta.pop("created_at", None)
    for key in SCRUBJAY_KEYS:
        meta.pop(key, None)
    item: dict[str, Any] = {
        "id": node.node_id,
        "text": node.get_content(metadata_mode=MetadataMode.NONE),
        "context": ctx,
        "metadata": {str(k): jsonable(v) for k, v in meta.items()},
    }
    if created is not None:
        item["at"] = parse_time(created)
    return item
