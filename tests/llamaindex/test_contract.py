"""Our contract for the retriever and the memory block, on both backends and both call styles.

Empty store, round trip, ``k`` honoured, sync == async, metadata round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from llama_index.core import Document
from llama_index.core.llms import ChatMessage
from scrubjay import ScrubJayMemory
from scrubjay.testing import WEEK_OF_MEMORIES, FrozenClock

from llamaindex_scrubjay import ScrubJayMemoryBlock, ScrubJayRetriever

Runner = Callable[..., Any]

T0 = 1_764_000_000.0


def _sync(sync: Callable[[], Any], async_: Callable[[], Awaitable[Any]]) -> Any:
    return sync()


def _async(sync: Callable[[], Any], async_: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(async_())


def _docs(dated: bool = True) -> list[Document]:
    """The scripted week as Documents, dated over the five days before T0 (or all now)."""
    return [Document(text=text, id_=f"week-{i}",
                     metadata={"context": ctx, "day": day,
                               **({"created_at": T0 - 86_400 * (5 - day) + 3600 * h}
                                  if dated else {})})
            for i, (day, h, text, ctx) in enumerate(WEEK_OF_MEMORIES)]


# ---------------------------------------------------------------- retriever
def test_retriever_empty_store(memory_factory: Callable[..., ScrubJayMemory], run: Runner) -> None:
    ret = ScrubJayRetriever(memory_factory(), similarity_top_k=3)
    assert run(lambda: ret.retrieve("anything"), lambda: ret.aretrieve("anything")) == []


def test_retriever_round_trip(memory_factory: Callable[..., ScrubJayMemory], run: Runner) -> None:
    ret = ScrubJayRetriever(memory_factory(), similarity_top_k=1)
    docs = _docs(dated=False)  # all fresh: each text must find itself first
    records = run(lambda: ret.insert(docs), lambda: ret.ainsert(docs))
    assert len(records) == len(WEEK_OF_MEMORIES) == len(ret.memory)
    for i, (_, _, text, _) in enumerate(WEEK_OF_MEMORIES):
        got = ret.retrieve(text)
        assert [n.node.node_id for n in got] == [f"week-{i}"]
        assert got[0].node.text == text


@pytest.mark.parametrize("k", [1, 3, 20])
def test_retriever_top_k(memory_factory: Callable[..., ScrubJayMemory], run: Runner,
                         k: int) -> None:
    ret = ScrubJayRetriever(memory_factory(), similarity_top_k=k)
    ret.insert(_docs())
    got = run(lambda: ret.retrieve("the user"), lambda: ret.aretrieve("the user"))
    assert len(got) == min(k, len(WEEK_OF_MEMORIES))
    scores = [n.score for n in got]
    assert scores == sorted(scores, reverse=True)


def test_retriever_sync_equals_async(memory_factory: Callable[..., ScrubJayMemory]) -> None:
    ret = ScrubJayRetriever(memory_factory(), similarity_top_k=5, context="debugging the model")
    ret.insert(_docs())
    for query in ("where is the user working", "what fails in span 3", "food allergies"):
        sync = ret.retrieve(query)
        asyn = asyncio.run(ret.aretrieve(query))
        assert [(n.node.node_id, n.score, n.node.metadata) for n in sync] == \
               [(n.node.node_id, n.score, n.node.metadata) for n in asyn]


def test_retriever_metadata_round_trip(memory_factory: Callable[..., ScrubJayMemory],
                                       run: Runner) -> None:
    ret = ScrubJayRetriever(memory_factory(), similarity_top_k=len(WEEK_OF_MEMORIES))
    docs = {d.id_: d for d in _docs()}
    ret.insert(docs.values())
    got = run(lambda: ret.retrieve("the user"), lambda: ret.aretrieve("the user"))
    assert {n.node.node_id for n in got} == set(docs)
    for n in got:
        doc, meta = docs[n.node.node_id], n.node.metadata
        assert meta["day"] == doc.metadata["day"]
        assert meta["context"] == doc.metadata["context"]
        assert meta["created_at"] == pytest.approx(doc.metadata["created_at"])
        assert meta["memory_id"] == doc.id_
        assert type(n.score) is float and meta["score"] == n.score
    # re-inserting what was retrieved replaces, never duplicates, and keeps the metadata
    ret.insert([n.node for n in got])
    assert len(ret.memory) == len(docs)
    again = {n.node.node_id: n.node.metadata for n in ret.retrieve("the user")}
    assert {k: (v["day"], v["context"]) for k, v in again.items()} == \
           {k: (d.metadata["day"], d.metadata["context"]) for k, d in docs.items()}


# ---------------------------------------------------------------- memory block
def _block_get(block: ScrubJayMemoryBlock, run: Runner, text: str) -> str:
    msgs = [ChatMessage(role="user", content=text)]
    return run(lambda: asyncio.run(block.aget(msgs, session_id="s1")),
                lambda: block.aget(msgs, session_id="s1"))


def test_block_empty_store(memory_factory: Callable[..., ScrubJayMemory], run: Runner) -> None:
    block = ScrubJayMemoryBlock(memory_factory())
    assert _block_get(block, run, "anything") == ""
    assert asyncio.run(block.aget([])) == ""


def test_block_round_trip_and_k(memory_factory: Callable[..., ScrubJayMemory], run: Runner) -> None:
    mem = memory_factory()
    block = ScrubJayMemoryBlock(mem, similarity_top_k=2)
    msgs = [ChatMessage(role="user", content=text) for _, _, text, _ in WEEK_OF_MEMORIES]
    run(lambda: asyncio.run(block.aput(msgs, session_id="s1")),
         lambda: block.aput(msgs, session_id="s1"))
    assert sorted(r.text for r in mem) == sorted(m.content for m in msgs)
    assert {r.context for r in mem} == {"s1"}
    assert {r.metadata["role"] for r in mem} == {"user"}
    text = _block_get(block, run, "The user is allergic to shellfish")
    lines = text.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("- The user is allergic to shellfish [")


def test_block_sync_equals_async(memory_factory: Callable[..., ScrubJayMemory],
                                 clock: FrozenClock) -> None:
    block = ScrubJayMemoryBlock(memory_factory())
    asyncio.run(block.aput([ChatMessage(role="user", content=t)
                            for _, _, t, _ in WEEK_OF_MEMORIES]))
    clock.advance(hours=1)
    for query in ("where is the user working", "the supplier meeting"):
        assert _block_get(block, _sync, query) == _block_get(block, _async, query) != ""
