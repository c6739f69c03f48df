"""ScrubJayStore's LangGraph ``BaseStore`` contract, sync and async: TTL, filters, CRUD.

langchain-tests' ``BaseStoreSyncTests``/``BaseStoreAsyncTests`` cover langchain-core's
key-value ``BaseStore`` (``mget``/``mset``), not LangGraph's (``ScrubJayKVStore`` passes those,
``test_kv_store.py``), so this is the contract test of our own: every case runs through the
sync and the async API.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from scrubjay import FilterError, ScrubJayMemory
from scrubjay.testing import FrozenClock, HashEmbedder

from langchain_scrubjay import ScrubJayStore
from langchain_scrubjay.stores import encode_namespace

T0 = 1_764_000_000.0
NS = ("users", "alice")


class Api:
    """The store's sync or async methods, called the same way."""

    def __init__(self, store: ScrubJayStore, mode: str) -> None:
        self.store, self.mode = store, mode

    def __getattr__(self, name: str) -> Any:
        if self.mode == "sync":
            return getattr(self.store, name)
        method = getattr(self.store, "a" + name)
        return lambda *a, **kw: asyncio.run(method(*a, **kw))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def make(tmp_path: Path, clock: FrozenClock, mode: str):
    made: list[ScrubJayStore] = []

    def build(**kw: Any) -> Api:
        store = ScrubJayStore(path=tmp_path / "store", embedder=HashEmbedder(), clock=clock,
                              index={"fields": ["text"]}, **kw)
        made.append(store)
        return Api(store, mode)

    yield build
    for s in made:
        s.close()


def _stored(tmp_path: Path, namespace: tuple[str, ...]) -> int:
    """How many memories the backend keeps for ``namespace`` (read beside the store)."""
    with ScrubJayMemory(tmp_path / "store", namespace=encode_namespace(namespace),
                        embedder=HashEmbedder()) as mem:
        return len(mem)


def test_crud_search_and_list(make) -> None:
    api = make()
    assert api.get(NS, "a") is None and api.search(("users",)) == []
    api.put(NS, "a", {"text": "Alice likes green tea", "n": 1})
    api.put(NS, "b", {"text": "Alice drives a blue car", "n": 2})
    assert api.get(NS, "a").value == {"text": "Alice likes green tea", "n": 1}
    assert [i.key for i in api.search(("users",), query="tea", limit=1)] == ["a"]
    assert api.list_namespaces() == [NS]
    api.put(NS, "a", {"text": "Alice likes coffee", "n": 3})
    assert api.get(NS, "a").value["n"] == 3 and len(api.search(NS)) == 2
    api.delete(NS, "a")
    assert api.get(NS, "a") is None and [i.key for i in api.search(NS)] == ["b"]


def test_an_expired_item_is_neither_returned_nor_kept(make, clock, tmp_path) -> None:
    api = make()
    api.put(NS, "car", {"text": "Alice is parked on level 3"}, ttl=1.0)   # one minute
    api.put(("users", "bob"), "job", {"text": "Bob is a nurse"})
    assert api.get(NS, "car") is not None
    clock.advance(seconds=61)
    assert api.search(NS, query="parked") == [] and api.search(NS) == []
    assert api.get(NS, "car") is None
    assert api.list_namespaces() == [("users", "bob")]
    assert _stored(tmp_path, NS) == 0                      # deleted, not only hidden
    assert api.get(("users", "bob"), "job") is not None    # no ttl: kept


def test_reads_refresh_the_ttl_unless_told_not_to(make, clock) -> None:
    api = make()
    api.put(NS, "car", {"text": "Alice is parked on level 3"}, ttl=1.0)
    api.put(NS, "bike", {"text": "Alice locked her bike by the door"}, ttl=1.0)
    clock.advance(seconds=40)
    assert api.get(NS, "car") is not None                  # refreshed: expires at +100 s
    assert api.get(NS, "bike", refresh_ttl=False) is not None
    clock.advance(seconds=40)                              # +80 s
    assert api.get(NS, "car", refresh_ttl=False) is not None
    assert api.get(NS, "bike") is None
    assert [i.key for i in api.search(NS, query="parked")] == ["car"]   # refreshed: +140 s
    clock.advance(seconds=50)                              # +130 s
    assert api.get(NS, "car", refresh_ttl=False) is not None
    clock.advance(seconds=20)
    assert api.get(NS, "car") is None


def test_ttl_config_default_refresh_and_sweep(make, clock, tmp_path) -> None:
    api = make(ttl={"default_ttl": 1.0, "refresh_on_read": False, "sweep_interval_minutes": 5})
    assert api.store.supports_ttl
    api.put(NS, "a", {"text": "Alice likes green tea"})           # default_ttl applies
    api.put(NS, "b", {"text": "Alice drives a blue car"}, ttl=None)   # explicitly none
    clock.advance(seconds=30)
    assert api.get(NS, "a") is not None                            # not refreshed
    clock.advance(seconds=31)
    assert _stored(tmp_path, NS) == 2                               # expired, not yet swept
    clock.advance(minutes=5)
    api.get(("other",), "x")                                       # any operation sweeps
    assert _stored(tmp_path, NS) == 1 and api.get(NS, "b") is not None
    api.put(NS, "c", {"text": "c"}, ttl=1.0)
    clock.advance(minutes=2)
    assert api.store.sweep_ttl() == 1


def test_expiry_survives_a_reopen(make, clock) -> None:
    api = make()
    api.put(NS, "car", {"text": "Alice is parked on level 3"}, ttl=1.0)
    api.store.close()
    clock.advance(seconds=90)
    again = make()
    assert again.get(NS, "car") is None and again.list_namespaces() == []


VALUES: list[dict[str, Any]] = [
    {"text": "note one", "kind": "fact", "n": 1, "done": True},
    {"text": "note two", "kind": "plan", "n": 2.5},
    {"text": "note three", "kind": "fact", "n": 3, "done": False},
    {"text": "note four", "kind": "task"},
    {"text": "note five", "n": 5, "done": 1},
]
FILTERS: list[dict[str, Any]] = [
    {"kind": {"$in": ["plan", "task"]}}, {"kind": {"$nin": ["fact"]}}, {"n": {"$gt": 2}},
    {"$or": [{"kind": "task"}, {"n": {"$lte": 1}}]}, {"done": True}, {"done": {"$ne": True}},
    {"$and": [{"kind": "fact"}, {"n": {"$gte": 2}}]},
]


@pytest.mark.parametrize("where", FILTERS, ids=str)
def test_filters_match_a_chroma_collection(make, where) -> None:
    api = make()
    for i, value in enumerate(VALUES):
        api.put(NS, str(i), value)
    col = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False)) \
        .create_collection(f"st-{uuid.uuid4().hex[:8]}", embedding_function=None)
    col.add(ids=[str(i) for i in range(len(VALUES))], metadatas=VALUES,
            embeddings=[[1.0, float(i)] for i in range(len(VALUES))])
    want = set(col.get(where=where)["ids"])
    assert {i.key for i in api.search(NS, filter=where, limit=10)} == want
    assert {i.key for i in api.search(NS, query="note", filter=where, limit=10)} == want


def test_an_unsupported_filter_operator_raises(make) -> None:
    api = make()
    api.put(NS, "a", {"text": "x", "kind": "fact"})
    for where in ({"kind": {"$contains": "fa"}}, {"$not": [{"kind": "fact"}]}):
        with pytest.raises(FilterError, match=r"'\$(contains|not)'"):
            api.search(NS, filter=where)
