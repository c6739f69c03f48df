"""Filtered search over the core's ranking, by over-fetching.

The core's ``ScrubJayMemory.search`` has no metadata filter, so the integrations ask it for more
hits than they need and keep the ones that pass, widening until ``k`` pass or the namespace is
exhausted. The ranking itself is the core's; nothing is re-scored here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from scrubjay import Hit, ScrubJayMemory

__all__ = ["filtered_search", "metadata_matches"]

#: First over-fetch factor (chosen: one widening usually suffices for a selective filter).
OVERFETCH = 4


def filtered_search(memory: ScrubJayMemory, query: str, k: int, *,
                    keep: Callable[[Hit], bool] | None = None, context: str = "",
                    at: float | datetime | None = None) -> list[Hit]:
    """The best ``k`` hits of ``memory.search`` for which ``keep(hit)`` holds, best first."""
    if keep is None:
        return memory.search(query, context=context, k=k, at=at)
    total = len(memory)
    n = min(max(OVERFETCH * k, k), max(total, 1))
    while True:
        hits = memory.search(query, context=context, k=n, at=at)
        kept = [h for h in hits if keep(h)]
        if len(kept) >= k or n >= total or len(hits) < n:
            return kept[:k]
        n = min(OVERFETCH * n, total)


def metadata_matches(metadata: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter semantics: equality, nested dicts, or ``$eq/$ne/$gt/$gte/$lt/$lte``."""
    if not flt:
        return True
    return all(_compare(metadata.get(key), want) for key, want in flt.items())


def _compare(value: Any, want: Any) -> bool:
    if isinstance(want, Mapping):
        if any(str(k).startswith("$") for k in want):
            return all(_operator(value, op, arg) for op, arg in want.items())
        return isinstance(value, Mapping) and all(_compare(value.get(k), v)
                                                  for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(want)
                and all(_compare(v, w) for v, w in zip(value, want, strict=True)))
    return bool(value == want)


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if value is None:
        return False
    try:
        a, b = float(value), float(arg)
    except (TypeError, ValueError):
        return False
    if op == "$gt":
        return a > b
    if op == "$gte":
        return a >= b
    if op == "$lt":
        return a < b
    if op == "$lte":
        return a <= b
    raise ValueError(f"Unsupported filter operator {op!r}; use $eq, $ne, $gt, $gte, $lt, $lte.")
