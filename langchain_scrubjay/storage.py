"""``ScrubJayKVStore``: a LangChain key-value ``BaseStore`` kept in a ScrubJay memory.

Each key is one memory of the store's namespace (id: a hash of the key; the key, the value's
kind and the serialised value in its metadata, :mod:`._kv`), so the entries persist in the same
Chroma folder or server as the memories, and a ``Document`` value is also a searchable memory
(its page content is the memory's text).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar

from langchain_core.stores import BaseStore
from scrubjay import InvalidInputError, MemoryNotFoundError, ScrubJayMemory

from ._kv import check_key, kv_id, record_to_value, value_to_item

__all__ = ["ScrubJayKVStore"]

V = TypeVar("V")

_OWNER = "ScrubJayKVStore"


class ScrubJayKVStore(BaseStore[str, V]):
    """A LangChain ``BaseStore[str, V]`` whose entries are memories of one ScrubJay namespace.

    Values are ``bytes`` (a ``ByteStore``, e.g. for ``CacheBackedEmbeddings``), ``str``,
    ``Document`` (a docstore, e.g. for ``ParentDocumentRetriever``) or JSON values (dicts with
    str keys, lists, numbers, bool, None); each comes back exactly as it was set, of the same
    type, and anything that would not (a tuple, a set, NaN, a non-str dict key) is refused with
    :class:`scrubjay.InvalidInputError`, as is a key that is not a ``str``.

    A ``Document``'s page content (or a ``str`` value) is the memory's text, so a
    ``ScrubJayRetriever`` or ``ScrubJayVectorStore`` over the same namespace finds the stored
    documents; other values are stored under their key as text. The entries are ordinary
    memories: do not ``consolidate()`` the store's namespace (pruning would delete entries).

    Setup:
        .. code-block:: bash

            pip install "scrubjay-mem[langchain]"

    Key init args:
        memory: an open ``ScrubJayMemory`` to store the entries in; or
        path / client / namespace: open one (``namespace`` default ``"kv"``, apart from the
            memories of an agent in the same folder); ``embedder``, ``config``, ``clock`` and
            other ``ScrubJayMemory`` arguments as keywords.

    Instantiate:
        .. code-block:: python

            from langchain_scrubjay import ScrubJayKVStore

            store = ScrubJayKVStore(path="./memory", namespace="kv")

    Invoke:
        .. code-block:: python

            store.mset([("a", b"bytes"), ("b", {"n": 1})])
            store.mget(["a", "b", "c"]), list(store.yield_keys(prefix="a"))

        .. code-block:: none

            ([b'bytes', {'n': 1}, None], ['a'])

    Use within a chain:
        .. code-block:: python

            retriever = ParentDocumentRetriever(vectorstore=vectorstore, docstore=store,
                                                child_splitter=splitter)
    """

    def __init__(self, memory: ScrubJayMemory | None = None, *, path: str | Path | None = None,
                 client: Any = None, namespace: str = "kv", **memory_kwargs: Any) -> None:
        self._owned = memory is None
        if memory is None:
            memory = ScrubJayMemory(path, client=client, namespace=namespace, **memory_kwargs)
        elif not isinstance(memory, ScrubJayMemory):
            raise InvalidInputError(f"The 'memory' parameter of {_OWNER} must be a "
                                    f"ScrubJayMemory. Got {type(memory).__name__} instead.")
        elif path is not None or client is not None or memory_kwargs:
            raise InvalidInputError(f"The 'memory' parameter of {_OWNER} excludes path=, "
                                    "client= and the other ScrubJayMemory arguments.")
        self.memory = memory
        """The memory holding the entries (one memory per key)."""

    def mget(self, keys: Sequence[str]) -> list[V | None]:
        """The values of ``keys``, in order; ``None`` for a key that is not set."""
        keys = [check_key(k, _OWNER) for k in _sequence(keys, "keys")]
        found: dict[str, V | None] = {}
        for key in keys:
            if key not in found:
                found[key] = self._value(key)
        return [found[k] for k in keys]

    def _value(self, key: str) -> V | None:
        try:
            rec = self.memory.get(kv_id(key))
        except MemoryNotFoundError:
            return None
        if rec.metadata.get("kv_key") != key:  # a memory of another kind under that id
            return None
        value: V = record_to_value(rec)
        return value

    def mset(self, key_value_pairs: Sequence[tuple[str, V]]) -> None:
        """Set the values of keys (a set key is replaced; the last pair of a key wins).

        Every pair is checked before anything is written: one bad pair writes nothing.
        """
        items: dict[str, dict[str, Any]] = {}
        for pair in _sequence(key_value_pairs, "key_value_pairs"):
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise InvalidInputError(f"The 'key_value_pairs' parameter of {_OWNER}.mset must "
                                        f"hold (key, value) tuples. Got {pair!r:.60} instead.")
            key = check_key(pair[0], _OWNER)
            items.pop(key, None)  # the last pair of a key wins
            items[key] = value_to_item(key, pair[1], _OWNER)
        self.memory.add_many(list(items.values()))

    def mdelete(self, keys: Sequence[str]) -> None:
        """Delete these keys (a key that is not set is ignored)."""
        for key in dict.fromkeys(check_key(k, _OWNER) for k in _sequence(keys, "keys")):
            try:
                self.memory.delete(kv_id(key))
            except MemoryNotFoundError:
                continue

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        """Every key (starting with ``prefix`` when given), sorted, from a snapshot."""
        if prefix is not None and not isinstance(prefix, str):
            raise InvalidInputError(f"The 'prefix' parameter of {_OWNER}.yield_keys must be a "
                                    f"str or None. Got {type(prefix).__name__} instead.")
        keys = sorted(str(rec.metadata["kv_key"]) for rec in self.memory
                      if isinstance(rec.metadata.get("kv_key"), str)
                      and rec.id == kv_id(rec.metadata["kv_key"]))
        for key in keys:
            if prefix is None or key.startswith(prefix):
                yield key

    def close(self) -> None:
        """Close the memory if this store opened it (releases an embedded folder)."""
        if self._owned:
            self.memory.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sequence(value: Any, name: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidInputError(f"The {name!r} parameter of {_OWNER} must be a sequence "
                                f"(e.g. a list). Got {type(value).__name__} instead.")
    return value
