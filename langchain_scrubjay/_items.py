"""LangGraph store items: namespace encoding, memory ids, search items, TTL expiry (private)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from typing import Any

from langgraph.store.base import Item, MatchCondition, SearchItem
from scrubjay import MemoryNotFoundError, MemoryRecord, ScrubJayMemory

__all__ = ["ScrubJaySearchItem", "does_match", "encode_namespace", "expired", "live",
           "memory_id", "plain"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
#: Hex digits of the namespace hash (chosen: 64 bits, collisions negligible for any real store).
HASH_HEX = 16
#: The longest scrubjay namespace (the core's limit).
MAX_NAMESPACE = 48


def encode_namespace(namespace: tuple[str, ...], prefix: str = "lg") -> str:
    """The scrubjay namespace of a LangGraph namespace tuple (collision-free by its hash).

    >>> encode_namespace(("users", "alice", "memories"))
    'lg-users_alice_memories-ff9e89fec802defd'
    """
    digest = hashlib.blake2b(json.dumps(list(namespace)).encode(), digest_size=HASH_HEX // 2)
    room = MAX_NAMESPACE - len(prefix) - HASH_HEX - 2
    readable = _UNSAFE.sub("_", "_".join(namespace)).strip("_-")[:room] or "ns"
    return f"{prefix}-{readable}-{digest.hexdigest()}"


def memory_id(namespace: tuple[str, ...], key: str) -> str:
    return hashlib.blake2b(json.dumps([list(namespace), key]).encode(),
                           digest_size=16).hexdigest()


class ScrubJaySearchItem(SearchItem):
    """A LangGraph ``SearchItem`` that also says how useful the memory still is."""

    __slots__ = ("stale", "utility")

    def __init__(self, *, utility: float | None = None, stale: bool | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.utility = utility
        """``U(m, t_q)`` at the query time (``None`` for a search without a query)."""
        self.stale = stale
        """True when the memory is stale at the query time (``None`` without a query)."""

    def dict(self) -> dict[str, Any]:
        out = super().dict()
        out.update(utility=self.utility, stale=self.stale)
        return out


def expired(rec: MemoryRecord, now: float) -> bool:
    expires = rec.metadata.get("lg_expires")
    return isinstance(expires, (int, float)) and expires <= now


def plain(item: Item) -> ScrubJaySearchItem:
    """An unscored search result (no query, or an unindexed item)."""
    return ScrubJaySearchItem(namespace=item.namespace, key=item.key, value=item.value,
                              created_at=item.created_at, updated_at=item.updated_at)


def does_match(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    """LangGraph's prefix/suffix namespace match, ``*`` a wildcard label."""
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    pairs = zip(ns, path) if cond.match_type == "prefix" else zip(reversed(ns), reversed(path))
    return all(p == "*" or a == p for a, p in pairs)


def live(mem: ScrubJayMemory, records: list[MemoryRecord], now: float,
         refresh: bool = False) -> list[MemoryRecord]:
    """``records`` of ``mem`` that have not expired at ``now``; the expired ones are deleted,
    and with ``refresh`` the expiry of those with a ``ttl`` moves to ``ttl`` minutes from now
    (their memory is written again, at its original time)."""
    out = []
    for rec in records:
        if expired(rec, now):
            with contextlib.suppress(MemoryNotFoundError):
                mem.delete(rec.id)
        else:
            out.append(rec)
    if not refresh:
        return out
    renewed = [{"id": r.id, "text": r.text, "context": r.context, "at": r.created_at_s,
                "metadata": {**r.metadata, "lg_expires": now + 60.0 * float(r.metadata["lg_ttl"])}}
               for r in out if isinstance(r.metadata.get("lg_ttl"), (int, float))]
    fresh = {r.id: r for r in mem.add_many(renewed)} if renewed else {}
    return [fresh.get(r.id, r) for r in out]
