"""ScrubJayKVStore: langchain-tests' key-value suites, exact round trips, reopen, bad input,
and the flows it serves (a ``ParentDocumentRetriever`` docstore, ``CacheBackedEmbeddings``).

Every store is a real Chroma: persistent in ``tmp_path``, or the session's ``chroma run``
server (the ``backend`` fixture of ``tests/conftest.py``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_tests.integration_tests import BaseStoreAsyncTests, BaseStoreSyncTests
from scrubjay import InvalidInputError, ScrubJayMemory
from scrubjay._validation import MAX_TEXT_CHARS as CORE_MAX_TEXT_CHARS
from scrubjay.testing import FrozenClock, HashEmbedder

from langchain_scrubjay import ScrubJayKVStore, ScrubJayRetriever, ScrubJayVectorStore
from langchain_scrubjay._kv import MAX_KEY_CHARS, MAX_TEXT_CHARS, kv_id

Opener = Callable[[], ScrubJayKVStore[Any]]


@pytest.fixture
def open_kv(backend: str, tmp_path: Path, request: pytest.FixtureRequest,
            clock: FrozenClock) -> Iterator[Opener]:
    """Open the test's key-value store (again: the same entries) on the backend."""
    made: list[ScrubJayKVStore[Any]] = []
    namespace = "kv-" + uuid.uuid4().hex[:12]
    address = request.getfixturevalue("chroma_server") if backend == "server" else None

    def open_store() -> ScrubJayKVStore[Any]:
        where: dict[str, Any] = {"path": tmp_path / "store"}
        if address is not None:
            import chromadb

            where = {"client": chromadb.HttpClient(host=address[0], port=address[1])}
        store: ScrubJayKVStore[Any] = ScrubJayKVStore(namespace=namespace,
                                                      embedder=HashEmbedder(dim=64),
                                                      clock=clock, **where)
        made.append(store)
        return store

    yield open_store
    for store in made:
        store.close()


#: A Document, bytes and a JSON value: the kinds of the three flows (docstore, byte store,
#: plain store), mixed, so that overwriting changes a key's kind too.
THREE = (Document("The parent document", metadata={"source": "a.txt", "page": 3}, id="d1"),
         b"\x00\xffraw bytes", {"n": 1, "tags": ["x", "y"], "nested": {"ok": True}})


class _KVFixtures:
    """The two fixtures langchain-tests' store suites ask for."""

    @pytest.fixture
    def kv_store(self, open_kv: Opener) -> ScrubJayKVStore[Any]:
        return open_kv()

    @pytest.fixture
    def three_values(self) -> tuple[Any, Any, Any]:
        return THREE


class TestScrubJayKVStoreSync(_KVFixtures, BaseStoreSyncTests[Any]):
    """langchain-tests==1.1.9 ``BaseStoreSyncTests`` on an embedded and a server Chroma."""


class TestScrubJayKVStoreAsync(_KVFixtures, BaseStoreAsyncTests[Any]):
    """langchain-tests==1.1.9 ``BaseStoreAsyncTests`` on an embedded and a server Chroma."""


ROUND_TRIP: dict[str, Any] = {
    "bytes-empty": b"", "bytes-all": bytes(range(256)),
    "bytes-big": bytes(range(256)) * 1200,            # 409,600 base64 chars: five chunks
    "str": "I'm parked on level 3", "str-empty": "", "str-blank": "  \n",
    "str-nul": "a\x00b", "str-unicode": "héllo wörld ✓ 北京", "str-surrogate": "x\ud800y",
    "str-long": "word " * 30_000,                      # longer than a memory's text
    "doc": Document("Parent text", metadata={"source": "a.txt", "page": 3, "score": 0.5,
                                             "tags": ["a", "b"], "nested": {"x": None}},
                    id="doc-1"),
    "doc-plain": Document("No metadata, no id"), "doc-empty": Document(""),
    "doc-long": Document("z" * (MAX_TEXT_CHARS + 1), metadata={"big": True}),
    "none": None, "true": True, "zero": 0, "float": -1.5, "float-int": 2.0, "neg-zero": -0.0,
    "big-int": 10**30, "list": [1, "two", 3.0, None, [False]], "dict-empty": {},
    "dict": {"a": [1, {"b": None}], "é": "ü"},
}


def _same(got: Any, want: Any) -> bool:
    """Equal and of the same type, all the way down (``1 == 1.0 == True`` is not enough)."""
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        return list(got) == list(want) and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, float):
        return math.copysign(1.0, got) == math.copysign(1.0, want) and got == want
    return bool(got == want)


def test_values_round_trip_exactly_across_a_reopen(open_kv: Opener) -> None:
    store = open_kv()
    store.mset(list(ROUND_TRIP.items()))
    store.close()
    reopened = open_kv()
    got = reopened.mget(list(ROUND_TRIP))
    assert [k for k, g in zip(ROUND_TRIP, got, strict=True) if not _same(g, ROUND_TRIP[k])] == []
    assert list(reopened.yield_keys()) == sorted(ROUND_TRIP)
    assert list(reopened.yield_keys(prefix="doc")) == ["doc", "doc-empty", "doc-long",
                                                       "doc-plain"]


def test_keys_of_any_text_are_set_and_listed(open_kv: Opener) -> None:
    keys = ["", " ", "a/b:c", "ü" * 300, "x" * MAX_KEY_CHARS, "model" + "0" * 40]
    store = open_kv()
    store.mset([(k, i) for i, k in enumerate(keys)])
    assert store.mget(keys) == list(range(len(keys)))
    assert list(store.yield_keys()) == sorted(keys)
    store.mdelete(keys[:3])
    assert list(store.yield_keys()) == sorted(keys[3:])


def test_last_pair_of_a_key_wins_and_kinds_can_change(open_kv: Opener) -> None:
    store = open_kv()
    store.mset([("a", 1), ("b", b"x"), ("a", "two")])
    assert store.mget(["a", "b"]) == ["two", b"x"]
    store.mset([("b", Document("now a document"))])
    assert store.mget(["b"]) == [Document("now a document")]
    assert len(store.memory) == 2  # one memory per key


def test_ids_are_stable() -> None:
    """Stored entries are found by this hash: changing it would orphan them."""
    assert kv_id("foo") == "kv-04136e24f85d470465c3db66e58ed56c"
    assert MAX_TEXT_CHARS == CORE_MAX_TEXT_CHARS  # the codec's limit is the core's


class Odd(Document):
    """A Document subclass (it would come back as a plain Document)."""


@pytest.mark.parametrize("value", [
    (1, 2), {1, 2}, {1: "a"}, {"a": (1,)}, float("nan"), [float("inf")], object(),
    bytearray(b"x"), Odd(page_content="x"), Document("x", metadata={"when": (1, 2)}),
    Document("x", metadata={"obj": object()}),
], ids=lambda v: type(v).__name__)
def test_values_that_would_not_round_trip_are_refused(open_kv: Opener, value: Any) -> None:
    store = open_kv()
    with pytest.raises(InvalidInputError, match="values of ScrubJayKVStore"):
        store.mset([("ok", 1), ("bad", value)])
    assert store.mget(["ok", "bad"]) == [None, None]  # one bad pair writes nothing


@pytest.mark.parametrize("key", [1, None, b"foo", ("a",), "x" * (MAX_KEY_CHARS + 1), "a\x00b",
                                 "\ud800"], ids=repr)
def test_bad_keys_raise_the_package_error(open_kv: Opener, key: Any) -> None:
    store = open_kv()
    for call in (lambda: store.mset([(key, 1)]), lambda: store.mget([key]),
                 lambda: store.mdelete([key]), lambda: store.mset([("ok", 1), (key, 2)])):
        with pytest.raises(InvalidInputError, match="keys of ScrubJayKVStore"):
            call()
    assert list(store.yield_keys()) == []


def test_bad_arguments_raise_the_package_error(open_kv: Opener) -> None:
    store = open_kv()
    with pytest.raises(TypeError):  # InvalidInputError is a TypeError and a ValueError
        store.mget("foo")
    for bad in (["foo"], [("a", 1, 2)], "ab"):
        with pytest.raises(InvalidInputError):
            store.mset(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="prefix"):
        list(store.yield_keys(prefix=1))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="'memory' parameter"):
        ScrubJayKVStore(memory="not a memory")
    with pytest.raises(InvalidInputError, match="excludes"):
        ScrubJayKVStore(store.memory, path="elsewhere")


def test_documents_are_searchable_memories_and_other_memories_are_not_keys(
        open_kv: Opener) -> None:
    store = open_kv()
    store.mset([("p1", Document("Alice's car is parked on level 3 of the mall")),
                ("p2", Document("Bob is allergic to shellfish")), ("blob", b"\x01\x02")])
    store.memory.add("An ordinary memory in the same namespace")
    assert list(store.yield_keys()) == ["blob", "p1", "p2"]
    found = ScrubJayRetriever(memory=store.memory, k=1).invoke("where is the car parked?")
    assert found[0].page_content == "Alice's car is parked on level 3 of the mall"
    assert found[0].metadata["kv_key"] == "p1"


def test_a_passed_memory_is_not_closed(tmp_path: Path, clock: FrozenClock) -> None:
    mem = ScrubJayMemory(tmp_path / "store", namespace="kv", embedder=HashEmbedder(), clock=clock)
    with ScrubJayKVStore[bytes](mem) as store:
        store.mset([("a", b"1")])
    assert len(mem) == 1  # still open
    mem.close()


def test_parent_document_retriever_docstore_survives_a_restart(tmp_path: Path,
                                                               clock: FrozenClock) -> None:
    from langchain_classic.retrievers import ParentDocumentRetriever
    from langchain_text_splitters import CharacterTextSplitter

    splitter = CharacterTextSplitter(separator=". ", chunk_size=40, chunk_overlap=0)
    parents = [Document("The shed roof leaks. It needs new felt. Buy felt at the DIY shop",
                        metadata={"room": "garden"}),
               Document("The kitchen tap drips. A new washer fixes it. Washers cost a euro",
                        metadata={"room": "kitchen"})]

    def retriever() -> ParentDocumentRetriever:
        return ParentDocumentRetriever(
            vectorstore=ScrubJayVectorStore(HashEmbedder(dim=64), path=tmp_path / "m",
                                            namespace="chunks", clock=clock),
            docstore=ScrubJayKVStore(path=tmp_path / "m", namespace="parents",
                                     embedder=HashEmbedder(dim=64), clock=clock),
            child_splitter=splitter, search_kwargs={"k": 1})

    first = retriever()
    first.add_documents(parents)
    keys = list(first.docstore.yield_keys())
    first.vectorstore.memory.close()  # type: ignore[attr-defined]
    first.docstore.close()  # type: ignore[attr-defined]

    again = retriever()
    assert sorted(again.docstore.yield_keys()) == sorted(keys) and len(keys) == 2
    got = again.invoke("a new washer fixes it")
    assert [d.page_content for d in got] == [parents[1].page_content]
    assert got[0].metadata == {"room": "kitchen"}
    again.vectorstore.memory.close()  # type: ignore[attr-defined]
    again.docstore.close()  # type: ignore[attr-defined]


def test_cache_backed_embeddings_are_served_from_the_store(tmp_path: Path,
                                                           clock: FrozenClock) -> None:
    from langchain_classic.embeddings import CacheBackedEmbeddings

    class Counting(DeterministicFakeEmbedding):
        calls: int = 0

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            self.calls += len(texts)
            return super().embed_documents(texts)

    texts = ["first text", "second text"]
    underlying = Counting(size=16)
    for _ in range(2):  # the second round is a new process's: everything comes from the cache
        with ScrubJayKVStore[bytes](path=tmp_path / "m", namespace="embcache",
                                    embedder=HashEmbedder(dim=64), clock=clock) as store:
            cached = CacheBackedEmbeddings.from_bytes_store(underlying, store, namespace="fake",
                                                            key_encoder="sha256")
            assert cached.embed_documents(texts) == underlying.embed_documents(texts)
    assert underlying.calls == 2 + 2 + 2  # round 1: misses + comparison; 2: comparison


