"""``ScrubJayStore``: a LangGraph long-term memory store backed by ScrubJay memories.

Each LangGraph namespace (a tuple of strings) is one scrubjay namespace, named
``{prefix}-{readable}-{hash}``: a readable, sanitised prefix of the labels and 16 hex digits
of a BLAKE2b hash of the exact tuple, so two tuples never share a scrubjay namespace. The tuple
itself is kept in every memory's metadata (``lg_ns``), which is how ``list_namespaces`` returns
the original tuples after a reopen. An item's memory id is a hash of (namespace, key).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from scrubjay import MemoryNotFoundError, MemoryRecord, NamespaceNotFoundError, ScrubJayMemory

from ._convert import record_to_item, value_to_metadata
from ._search import filtered_search, metadata_matches

__all__ = ["ScrubJaySearchItem", "ScrubJayStore", "encode_namespace"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9]{0,7}$")
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


def _memory_id(namespace: tuple[str, ...], key: str) -> str:
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


class ScrubJayStore(BaseStore):
    """LangGraph ``BaseStore`` whose search ranks by the ScrubJay score and flags stale items.

    Setup:
        .. code-block:: bash

            pip install "scrubjay-mem[langgraph]"

    Key init args:
        path / client: where the memories persist (neither: in memory, nothing persists).
        embedder, llm, config, clock: passed to every ``ScrubJayMemory``.
        index: LangGraph ``IndexConfig``; only ``fields`` is used (the text embedded, default
            the whole value as JSON); ``embed`` is used as the embedder when none is given.
        prefix: short tag starting every scrubjay namespace of this store (default ``lg``).

    Instantiate:
        .. code-block:: python

            from langchain_scrubjay import ScrubJayStore

            store = ScrubJayStore(path="./memory", index={"fields": ["text"]})

    Invoke:
        .. code-block:: python

            store.put(("users", "alice"), "car", {"text": "I'm parked on level 3"})
            [(i.key, i.score, i.stale) for i in store.search(("users",), query="my car")]

        .. code-block:: none

            [('car', 0.52, False)]

    Use within a graph:
        .. code-block:: python

            graph = builder.compile(store=store)   # nodes receive it as ``store``
    """

    def __init__(self, *, path: str | Path | None = None, client: Any = None,
                 embedder: Any = None, llm: Any = None, config: Any = None, clock: Any = None,
                 index: IndexConfig | None = None, prefix: str = "lg") -> None:
        if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
            raise ValueError("The 'prefix' parameter of ScrubJayStore must be 1-8 letters or "
                             f"digits. Got {prefix!r} instead.")
        if embedder is None and index and not isinstance(index.get("embed"), (str, type(None))):
            embedder = index["embed"]
        self._kwargs = {"path": path, "client": client, "embedder": embedder, "llm": llm,
                        "config": config, "clock": clock}
        self.index_config = index
        fields = (index or {}).get("fields") or ["$"]
        self._fields = [(f, tokenize_path(f) if f != "$" else "$") for f in fields]
        self.prefix = prefix
        self._mems: dict[str, ScrubJayMemory] = {}
        self._tuples: dict[str, tuple[str, ...]] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ namespaces
    def _memory(self, namespace: tuple[str, ...], create: bool) -> ScrubJayMemory | None:
        name = encode_namespace(namespace, self.prefix)
        with self._lock:
            if name not in self._mems:
                if not create and name not in self._stored_names():
                    return None
                self._mems[name] = ScrubJayMemory(namespace=name, **self._kwargs)
            self._tuples[name] = tuple(namespace)
            return self._mems[name]

    def _stored_names(self) -> set[str]:
        """Scrubjay namespaces of this store that exist in the backend."""
        path, client = self._kwargs["path"], self._kwargs["client"]
        if path is None and client is None:
            return set(self._mems)
        try:
            names = ScrubJayMemory.list_namespaces(path=path) if client is None else \
                ScrubJayMemory.list_namespaces(client=client)
        except NamespaceNotFoundError:  # no store at ``path`` yet: the first put makes it
            names = []
        return {n for n in names if n.startswith(self.prefix + "-")} | set(self._mems)

    def _namespaces(self) -> dict[tuple[str, ...], ScrubJayMemory]:
        """Every namespace holding at least one item, with its memory."""
        with self._lock:
            out = {}
            for name in sorted(self._stored_names()):
                mem = self._mems.get(name)
                if mem is None:
                    mem = self._mems[name] = ScrubJayMemory(namespace=name, **self._kwargs)
                if len(mem) == 0:
                    continue
                if name not in self._tuples:
                    first = next(iter(mem))
                    self._tuples[name] = tuple(first.metadata["lg_ns"])
                out[self._tuples[name]] = mem
            return out

    # ------------------------------------------------------------------ operations
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (a put is visible to the operations after it)."""
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            else:  # ValueError, as langgraph's own stores raise
                raise ValueError(f"Unknown operation type: {type(op).__name__}")  # noqa: TRY004
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch` (the same code, in the default executor)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.batch, list(ops))

    def _get(self, op: GetOp) -> Item | None:
        mem = self._memory(op.namespace, create=False)
        if mem is None:
            return None
        try:
            item: Item = record_to_item(mem.get(_memory_id(op.namespace, op.key)))
            return item
        except MemoryNotFoundError:
            return None

    def _put(self, op: PutOp) -> None:
        mid = _memory_id(op.namespace, op.key)
        if op.value is None:
            mem = self._memory(op.namespace, create=False)
            if mem is not None and mid in mem:
                mem.delete(mid)
            return
        fields = self._fields if op.index is None else \
            [(f, tokenize_path(f) if f != "$" else "$") for f in op.index or []]
        texts = [t for _, path in fields for t in
                 ([json.dumps(op.value, sort_keys=True)] if path == "$"
                  else get_text_at_path(op.value, path))]
        indexed = op.index is not False and bool(texts)
        text = "\n".join(texts) if indexed else json.dumps(op.value, sort_keys=True)
        mem = self._memory(op.namespace, create=True)
        assert mem is not None
        mem.add_many([{"id": mid, "text": text,
                       "metadata": value_to_metadata(op.namespace, op.key, op.value, indexed)}])

    def _search(self, op: SearchOp) -> list[SearchItem]:
        n = len(op.namespace_prefix)
        mems = [m for ns, m in self._namespaces().items() if ns[:n] == op.namespace_prefix]
        want = op.offset + op.limit

        def matches(rec: MemoryRecord) -> bool:
            return metadata_matches(json.loads(rec.metadata["lg_value"]), op.filter)

        if not op.query:
            records = sorted((r for m in mems for r in m if matches(r)),
                             key=lambda r: (r.created_at_s, r.metadata["lg_key"]))
            return [_plain(record_to_item(r)) for r in records[op.offset:want]]
        hits = [h for m in mems for h in filtered_search(
            m, op.query, want, keep=lambda h: bool(h.record.metadata.get("lg_indexed"))
            and matches(h.record))]
        hits.sort(key=lambda h: -h.score)
        out: list[SearchItem] = [record_to_item(h.record, h) for h in hits[op.offset:want]]
        if len(out) < op.limit:  # like InMemoryStore: unindexed items fill up, without a score
            rest = sorted((r for m in mems for r in m
                           if not r.metadata.get("lg_indexed") and matches(r)),
                          key=lambda r: (r.created_at_s, r.metadata["lg_key"]))
            out += [_plain(record_to_item(r)) for r in rest[:op.limit - len(out)]]
        return out

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [ns for ns in self._namespaces()
                      if all(_does_match(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            namespaces = list({ns[:op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset:op.offset + op.limit]

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close every open memory (releases an embedded store's process lock)."""
        with self._lock:
            for mem in self._mems.values():
                mem.close()
            self._mems.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _plain(item: Item) -> ScrubJaySearchItem:
    """An unscored search result (no query, or an unindexed item)."""
    return ScrubJaySearchItem(namespace=item.namespace, key=item.key, value=item.value,
                              created_at=item.created_at, updated_at=item.updated_at)


def _does_match(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    """LangGraph's prefix/suffix namespace match, ``*`` a wildcard label."""
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    pairs = zip(ns, path) if cond.match_type == "prefix" else zip(reversed(ns), reversed(path))
    return all(p == "*" or a == p for a, p in pairs)


