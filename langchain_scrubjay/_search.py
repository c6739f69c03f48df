"""Filtered search over the core's ranking, by over-fetching (:func:`scrubjay.filters.top_matching`).

The core's ``ScrubJayMemory.search`` has no metadata filter, so the integrations ask it for more
hits than they need and keep the ones that pass, widening until ``k`` pass or the namespace is
exhausted. Filters are Chroma ``where`` filters (:mod:`scrubjay.filters`), checked before the
search: an unsupported operator raises :class:`scrubjay.FilterError`. The ranking itself is the
core's; nothing is re-scored here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from scrubjay import Hit, ScrubJayMemory
from scrubjay.filters import check_filter, matches, top_matching

__all__ = ["filtered_search", "query_time"]


def filtered_search(memory: ScrubJayMemory, query: str, k: int, *,
                    keep: Callable[[Hit], bool] | None = None,
                    where: Mapping[str, Any] | None = None, include_stale: bool = True,
                    context: str = "", at: float | datetime | None = None,
                    query_vector: Any = None) -> list[Hit]:
    """The best ``k`` hits of ``memory.search`` whose user metadata matches ``where``, that are
    fresh unless ``include_stale``, and for which ``keep(hit)`` holds; best first."""
    check_filter(where)
    conditions = [c for c in (keep,
                              (lambda h: matches(h.record.metadata, where)) if where else None,
                              None if include_stale else (lambda h: not h.stale)) if c]

    def search(n: int) -> list[Hit]:
        return memory.search(query, context=context, k=n, at=at, query_vector=query_vector)

    if not conditions:
        return search(k)
    return top_matching(search, k, len(memory),
                        lambda h: all(condition(h) for condition in conditions))


def query_time(memory: ScrubJayMemory, at: float | datetime | None) -> float:
    """The query time in epoch seconds: ``at``, or the memory's clock."""
    if at is None:
        return memory.now()
    return at.timestamp() if isinstance(at, datetime) else float(at)
