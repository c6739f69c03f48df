"""The one place where scrubjay values and LlamaIndex nodes meet (private).

One function each way, with a round-trip test (``tests/llamaindex/test_convert.py``):

- :func:`record_to_node` / :func:`hit_to_node`: ``MemoryRecord`` / ``Hit`` -> ``TextNode`` /
  ``NodeWithScore``, every number a native ``float`` and the memory id as the node id.
- :func:`node_to_item`: any LlamaIndex node (``Document``, ``TextNode``, ...) -> one item for
  :meth:`scrubjay.ScrubJayMemory.add_many`.
- :func:`filters_to_where`: LlamaIndex ``MetadataFilters`` -> a Chroma ``where`` filter
  (:mod:`scrubjay.filters`).

An outdated memory's node text starts with the marker of :mod:`scrubjay.explain`
(``[outdated since ...: decayed]``) and its metadata says why and since when.

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
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilters,
)
from scrubjay import FilterError, Hit, InvalidInputError, MemoryRecord
from scrubjay.annotation import safe_annotation
from scrubjay.explain import STALE_KEYS, Staleness, mark, stale_metadata, unmark

__all__ = [
    "LLM_VISIBLE_KEYS",
    "SCRUBJAY_KEYS",
    "filters_to_where",
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
                             "score_when", "score_graph", "score_lexical", "time_factor",
                             "weight_what", "weight_where", "weight_when", "weight_graph",
                             "from_buffer")
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


def hit_to_node(hit: Hit, outdated: Staleness | None = None, *,
                mark_stale: bool = True) -> NodeWithScore:
    """A ``NodeWithScore`` for one search hit; the score components travel in the metadata.

    When ``outdated`` (see :func:`scrubjay.explain.staleness`), the text starts with the marker
    (unless ``mark_stale=False``) and the metadata says why and since when.
    """
    node = record_to_node(hit.record)
    if outdated is not None:
        if mark_stale:
            node.set_content(mark(node.get_content(), outdated))
        node.metadata.update(stale_metadata(outdated))
        extra = [k for k in STALE_KEYS if k != "stale"]  # the marker already tells the LLM
        node.excluded_llm_metadata_keys += extra
        node.excluded_embed_metadata_keys += extra
    w_what, w_where, w_when, w_graph = (float(w) for w in hit.weights)
    node.metadata.update({
        "score": float(hit.score), "paper_score": float(hit.paper_score),
        "utility": float(hit.utility), "stale": bool(hit.stale), "score_what": float(hit.what), "score_where": float(hit.where),
        "score_when": float(hit.when), "score_graph": float(hit.graph),
        "score_lexical": float(hit.lexical), "time_factor": float(hit.time_factor),
        "weight_what": w_what, "weight_where": w_where, "weight_when": w_when,
        "weight_graph": w_graph, "from_buffer": bool(hit.from_buffer),
    })
    node.metadata["stale"] = outdated is not None or bool(hit.stale)
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
    for key in (*SCRUBJAY_KEYS, *STALE_KEYS):
        meta.pop(key, None)
    item: dict[str, Any] = {
        "id": node.node_id,
        "text": unmark(node.get_content(metadata_mode=MetadataMode.NONE)),
        "context": ctx,
        "metadata": {str(k): jsonable(v) for k, v in meta.items()},
    }
    if created is not None:
        item["at"] = parse_time(created)
    return item


_OPERATORS = {FilterOperator.EQ: "$eq", FilterOperator.NE: "$ne", FilterOperator.GT: "$gt",
              FilterOperator.GTE: "$gte", FilterOperator.LT: "$lt", FilterOperator.LTE: "$lte",
              FilterOperator.IN: "$in", FilterOperator.NIN: "$nin"}
_CONDITIONS = {FilterCondition.AND: "$and", FilterCondition.OR: "$or"}


def filters_to_where(filters: MetadataFilters | None) -> dict[str, Any] | None:
    """LlamaIndex ``MetadataFilters`` (nested ones too) as a Chroma ``where`` filter.

    ``==, !=, >, >=, <, <=, in, nin`` and the ``and``/``or`` conditions translate; any other
    operator or condition raises :class:`scrubjay.FilterError` naming it.
    """
    if filters is None:
        return None
    parts: list[dict[str, Any]] = []
    for f in filters.filters:
        if isinstance(f, MetadataFilters):
            sub = filters_to_where(f)
            if sub:
                parts.append(sub)
            continue
        op = _OPERATORS.get(f.operator)
        if op is None:
            raise FilterError(f"The LlamaIndex filter operator {f.operator.value!r} is not "
                              "supported; use one of ==, !=, >, >=, <, <=, in, nin. Got "
                              f"{f!r} instead.")
        parts.append({f.key: {op: f.value}})
    condition = filters.condition or FilterCondition.AND
    if condition not in _CONDITIONS:
        raise FilterError(f"The LlamaIndex filter condition {condition.value!r} is not "
                          f"supported; use 'and' or 'or'. Got {filters!r} instead.")
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {_CONDITIONS[condition]: parts}
