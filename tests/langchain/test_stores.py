"""ScrubJayStore contract: LangGraph BaseStore semantics, sync == async, reopen, in a graph."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from scrubjay.testing import HashEmbedder

from langchain_scrubjay import ScrubJaySearchItem, ScrubJayStore
from langchain_scrubjay.stores import encode_namespace

T0 = 1_764_000_000.0
ITEMS = [
    (("users", "alice", "facts"), "job", {"text": "Alice is a structural engineer", "n": 1}),
    (("users", "alice", "facts"), "car", {"text": "Right now Alice is parked on level 3",
                                          "n": 2, "tags": {"kind": "place"}}),
    (("users", "alice", "prefs"), "units", {"text": "Alice prefers metric units", "n": 3}),
    (("users", "bob", "facts"), "allergy", {"text": "Bob is allergic to shellfish", "n": 4}),
]


@pytest.fixture(params=["embedded", "server"])
def make_store(request, tmp_path: Path, clock):
    made: list[ScrubJayStore] = []
    kw: dict[str, Any] = {"path": tmp_path / "store"}
    if request.param == "server":
        import chromadb

        host, port = request.getfixturevalue("chroma_server")
        kw = {"client": chromadb.HttpClient(host=host, port=port),
              "prefix": "t" + uuid.uuid4().hex[:7]}

    def make(**extra: Any) -> ScrubJayStore:
        store = ScrubJayStore(embedder=HashEmbedder(), clock=clock, index={"fields": ["text"]},
                              **{**kw, **extra})
        made.append(store)
        return store

    yield make
    for s in made:
        s.close()


@pytest.fixture
def filled(make_store):
    store = make_store()
    for ns, key, value in ITEMS:
        store.put(ns, key, value)
    return store


def test_empty_store(make_store) -> None:
    store = make_store()
    assert store.get(("users", "x"), "k") is None
    assert store.search(("users",)) == [] and store.search(("users",), query="q") == []
    assert store.list_namespaces() == []


def test_round_trip_replace_and_delete(filled: ScrubJayStore) -> None:
    item = filled.get(("users", "alice", "facts"), "car")
    assert item is not None and item.value == ITEMS[1][2]
    assert item.key == "car" and item.namespace == ("users", "alice", "facts")
    assert item.created_at.timestamp() == T0
    filled.put(("users", "alice", "facts"), "car", {"text": "Alice moved to level 5"})
    assert filled.get(("users", "alice", "facts"), "car").value == {"text": "Alice moved to level 5"}
    assert len(filled.search(("users", "alice", "facts"))) == 2     # replaced, not added
    filled.delete(("users", "alice", "facts"), "car")
    assert filled.get(("users", "alice", "facts"), "car") is None
    assert filled.get(("users", "alice", "other"), "car") is None


def test_search_ranks_by_scrubjay_score_with_stale_and_utility(filled: ScrubJayStore,
                                                               clock) -> None:
    res = filled.search(("users", "alice"), query="where is Alice parked")
    assert next(i.key for i in res) == "car"
    assert all(isinstance(i, ScrubJaySearchItem) for i in res)
    assert [i.score for i in res] == sorted((i.score for i in res), reverse=True)
    assert {i.namespace[:2] for i in res} == {("users", "alice")}
    assert res[0].stale is False and res[0].utility == pytest.approx(1.0)
    assert res[0].dict()["stale"] is False
    clock.advance(days=2)
    car = next(i for i in filled.search(("users",), query="where is Alice parked", limit=10)
               if i.key == "car")
    assert car.stale is True and 0.0 <= car.utility < 0.5


def test_limit_offset_and_filters(filled: ScrubJayStore) -> None:
    assert len(filled.search(("users",), limit=2)) == 2
    assert len(filled.search(("users",), query="Alice", limit=1)) == 1
    everything = [i.key for i in filled.search(("users",), query="Alice", limit=10)]
    assert [i.key for i in filled.search(("users",), query="Alice", limit=2, offset=1)] == \
        everything[1:3]
    assert {i.key for i in filled.search(("users",), filter={"n": {"$gte": 3}})} == \
        {"units", "allergy"}
    assert [i.key for i in filled.search(("users",), query="units",
                                         filter={"tags": {"kind": "place"}})] == ["car"]
    assert [i.key for i in filled.search(("users",), filter={"n": {"$ne": 1}, "text":
                                                             "Bob is allergic to shellfish"})] \
        == ["allergy"]


def test_list_namespaces_prefix_suffix_depth(filled: ScrubJayStore, make_store) -> None:
    all_ns = [ns for ns, _, _ in ITEMS]
    assert filled.list_namespaces() == sorted(set(all_ns))
    assert filled.list_namespaces(prefix=("users", "alice")) == [
        ("users", "alice", "facts"), ("users", "alice", "prefs")]
    assert filled.list_namespaces(suffix=("facts",)) == [
        ("users", "alice", "facts"), ("users", "bob", "facts")]
    assert filled.list_namespaces(prefix=("users", "*", "facts")) == [
        ("users", "alice", "facts"), ("users", "bob", "facts")]
    assert filled.list_namespaces(max_depth=2) == [("users", "alice"), ("users", "bob")]
    assert filled.list_namespaces(limit=1, offset=1) == [("users", "alice", "prefs")]


def test_reopen_recovers_namespace_tuples(filled: ScrubJayStore, make_store) -> None:
    expected = filled.list_namespaces()
    kwargs = filled._kwargs
    filled.close()
    again = make_store(**{k: v for k, v in kwargs.items() if k in ("path", "client")},
                       prefix=filled.prefix)
    assert again.list_namespaces() == expected
    assert again.get(("users", "bob", "facts"), "allergy").value == ITEMS[3][2]


def test_namespace_encoding_is_valid_and_collision_free() -> None:
    import re

    names = {encode_namespace(ns) for ns in [("a", "b"), ("a_b",), ("a", "b", ""), ("a.b",),
                                              ("x" * 100,), ("x" * 100, "y"), ("é", "ü")]}
    assert len(names) == 7
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,47}", n) for n in names)


async def test_sync_equals_async(filled: ScrubJayStore) -> None:
    ns = ("users", "alice", "facts")
    assert (await filled.aget(ns, "job")) == filled.get(ns, "job")
    s = filled.search(("users",), query="engineer", limit=3)
    a = await filled.asearch(("users",), query="engineer", limit=3)
    assert [(i.key, i.score, i.stale) for i in s] == [(i.key, i.score, i.stale) for i in a]
    assert await filled.alist_namespaces(max_depth=2) == filled.list_namespaces(max_depth=2)
    await filled.aput(ns, "new", {"text": "Alice owns a bike"})
    assert filled.get(ns, "new").value == {"text": "Alice owns a bike"}
    await filled.adelete(ns, "new")
    assert filled.get(ns, "new") is None


def test_unindexed_items_come_back_without_a_score(make_store) -> None:
    store = make_store()
    store.put(("notes",), "a", {"text": "green tea"})
    store.put(("notes",), "b", {"text": "black tea"}, index=False)
    res = store.search(("notes",), query="tea", limit=5)
    assert [(i.key, i.score is None) for i in res] == [("a", False), ("b", True)]


class State(TypedDict):
    user: str
    message: str
    answer: str


def test_store_inside_a_langgraph_graph(filled: ScrubJayStore) -> None:
    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        store.put(("users", state["user"], "facts"), "latest", {"text": state["message"]})
        return {}

    def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
        hits = store.search(("users", state["user"]), query=state["message"], limit=2)
        return {"answer": " | ".join(h.value["text"] for h in hits if not h.stale)}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=filled)
    out = graph.invoke({"user": "bob", "message": "Bob moved to Lisbon", "answer": ""})
    assert "Bob moved to Lisbon" in out["answer"]
    assert filled.get(("users", "bob", "facts"), "latest").value == {"text": "Bob moved to Lisbon"}
