"""``ScrubJayStore``: a LangGraph long-term memory store backed by ScrubJay memories.

Each LangGraph namespace (a tuple of strings) is one scrubjay namespace, named
``{prefix}-{readable}-{hash}``: a readable, sanitised prefix of the labels and 16 hex digits
of a BLAKE2b hash of the exact tuple, so two tuples never share a scrubjay namespace. The tuple
itself is kept in every memory's metadata (``lg_ns``), which is how ``list_namespaces`` returns
the original tuples after a reopen. An item's memory id is a hash of (namespace, key).

TTL: an item put with ``ttl`` (minutes; ``TTLConfig.default_ttl`` when not given) keeps its
expiry time in its metadata (``lg_expires``, epoch seconds of the store's clock). An expired
item is never returned and is deleted when a read meets it, or by :meth:`ScrubJayStore.sweep_ttl`
(run every ``TTLConfig.sweep_interval_minutes`` by the next operation). A read with
``refresh_ttl`` (default ``TTLConfig.refresh_on_read``, else ``True``) moves the expiry to
``ttl`` minutes after the read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Self

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from scrubjay import Hit, MemoryNotFoundError, MemoryRecord, NamespaceNotFoundError, ScrubJayMemory
from scrubjay.filters import check_filter, matches

from ._convert import record_to_item, value_to_metadata
from ._items import (
    ScrubJaySearchItem,
    does_match,
    encode_namespace,
    expired,
    live,
    memory_id,
    plain,
)
from ._search import filtered_search

__all__ = ["ScrubJaySearchItem", "ScrubJayStore", "encode_namespace"]

_PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9]{0,7}$")


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
        ttl: LangGraph ``TTLConfig`` (``default_ttl``, ``refresh_on_read``,
            ``sweep_interval_minutes``); ``put(..., ttl=minutes)`` works without it.
        A search's ``filter`` is a Chroma ``where`` filter over the item's value
        (:mod:`scrubjay.filters`; nested dicts match field by field).

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

    supports_ttl = True

    def __init__(self, *, path: str | Path | None = None, client: Any = None,
                 embedder: Any = None, llm: Any = None, config: Any = None, clock: Any = None,
                 index: IndexConfig | None = None, prefix: str = "lg",
                 ttl: TTLConfig | None = None) -> None:
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
        self.ttl_config = ttl
        self._clock = clock or time.time
        self._last_sweep = self._clock()
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

    def _open(self, name: str) -> ScrubJayMemory:
        """The memory of a stored scrubjay namespace, opened once."""
        mem = self._mems.get(name)
        if mem is None:
            mem = self._mems[name] = ScrubJayMemory(namespace=name, **self._kwargs)
        return mem

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
                mem = self._open(name)
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
        interval = (self.ttl_config or {}).get("sweep_interval_minutes")
        if interval and self._clock() - self._last_sweep >= 60.0 * interval:
            self.sweep_ttl()
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
            rec = mem.get(memory_id(op.namespace, op.key))
        except MemoryNotFoundError:
            return None
        live = self._live(mem, [rec], refresh=op.refresh_ttl)
        return record_to_item(live[0]) if live else None

    def _put(self, op: PutOp) -> None:
        mid = memory_id(op.namespace, op.key)
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
        meta = value_to_metadata(op.namespace, op.key, op.value, indexed)
        if op.ttl is not None:
            meta.update(lg_ttl=float(op.ttl), lg_expires=self._clock() + 60.0 * float(op.ttl))
        mem = self._memory(op.namespace, create=True)
        assert mem is not None
        mem.add_many([{"id": mid, "text": text, "metadata": meta}])

    def _search(self, op: SearchOp) -> list[SearchItem]:
        check_filter(op.filter)
        n = len(op.namespace_prefix)
        mems = [m for ns, m in self._namespaces().items() if ns[:n] == op.namespace_prefix]
        want = op.offset + op.limit
        now = self._clock()
        gone: dict[str, tuple[ScrubJayMemory, MemoryRecord]] = {}

        def matching(rec: MemoryRecord, mem: ScrubJayMemory) -> bool:
            if expired(rec, now):
                gone[rec.id] = (mem, rec)
                return False
            return matches(json.loads(rec.metadata["lg_value"]), op.filter)

        def by_time(indexed: bool | None) -> list[MemoryRecord]:
            return sorted((r for m in mems for r in m if matching(r, m)
                           and (indexed is None or bool(r.metadata.get("lg_indexed")) == indexed)),
                          key=lambda r: (r.created_at_s, r.metadata["lg_key"]))

        if not op.query:
            found = by_time(None)[op.offset:want]
            out: list[SearchItem] = [plain(record_to_item(r)) for r in found]
        else:
            def keep_in(mem: ScrubJayMemory) -> Callable[[Hit], bool]:
                return lambda h: (bool(h.record.metadata.get("lg_indexed"))
                                  and matching(h.record, mem))

            hits = [h for m in mems for h in filtered_search(m, op.query, want, keep=keep_in(m))]
            hits.sort(key=lambda h: -h.score)
            found = [h.record for h in hits[op.offset:want]]
            out = [record_to_item(h.record, h) for h in hits[op.offset:want]]
            if len(out) < op.limit:  # like InMemoryStore: unindexed items fill up, unscored
                rest = by_time(False)[:op.limit - len(out)]
                found += rest
                out += [plain(record_to_item(r)) for r in rest]
        for mem, rec in gone.values():  # met expired: deleted
            self._live(mem, [rec])
        if op.refresh_ttl:
            self._refresh([(it.namespace, it.key) for it, rec in zip(out, found, strict=True)
                           if "lg_ttl" in rec.metadata])
        return out

    # ------------------------------------------------------------------ TTL
    def _live(self, mem: ScrubJayMemory, records: list[MemoryRecord] | None = None,
              refresh: bool = False) -> list[MemoryRecord]:
        """:func:`live` records of ``mem`` at the store's clock."""
        return live(mem, list(mem) if records is None else records, self._clock(), refresh)

    def _refresh(self, keys: list[tuple[tuple[str, ...], str]]) -> None:
        for namespace, key in keys:
            mem = self._memory(namespace, create=False)
            if mem is not None:
                with contextlib.suppress(MemoryNotFoundError):
                    self._live(mem, [mem.get(memory_id(namespace, key))], refresh=True)

    def sweep_ttl(self) -> int:
        """Delete every expired item now; returns how many were deleted."""
        with self._lock:
            self._last_sweep = self._clock()
            removed = 0
            for name in sorted(self._stored_names()):
                mem = self._open(name)
                before = len(mem)
                removed += before - len(self._live(mem))
            return removed

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        # (every item is read: a namespace whose items all expired is not listed)
        namespaces = [ns for ns, mem in self._namespaces().items()
                      if all(does_match(c, ns) for c in op.match_conditions or ())
                      and self._live(mem)]
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
