"""ScrubJayRetriever inside LlamaIndex: query engines, documents in, staleness out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import TextNode
from scrubjay import InvalidInputError, ScrubJayMemory
from scrubjay.testing import FrozenClock, HashEmbedder

from llamaindex_scrubjay import ScrubJayRetriever

T0 = 1_764_000_000.0
PARKED = "I am parked on level 3 right now"
SISTER = "My sister lives in Oslo"


@pytest.fixture
def retriever(clock: FrozenClock, embedder: HashEmbedder) -> ScrubJayRetriever:
    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    ret = ScrubJayRetriever.from_documents(
        [Document(text=PARKED, id_="car", metadata={"context": "at the mall"}),
         Document(text=SISTER, id_="sister", metadata={"context": "family"})],
        memory=mem, similarity_top_k=1)
    yield ret
    mem.close()


@pytest.mark.parametrize("use_async", [False, True])
def test_query_engine_answer_changes_as_facts_go_stale(retriever: ScrubJayRetriever,
                                                       clock: FrozenClock,
                                                       use_async: bool) -> None:
    # MockLLM echoes its prompt, so the answer shows which memory the engine was given
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())

    def ask(q: str) -> str:
        return str(asyncio.run(engine.aquery(q)) if use_async else engine.query(q))

    question = "where am I parked, and where does my sister live?"
    assert PARKED in ask(question)
    clock.advance(days=2)  # "right now" facts decay within hours; the sister's city does not
    answer = ask(question)
    assert PARKED in answer and "stale: True" in answer   # still the best match, flagged stale
    retriever.exclude_stale = True
    answer = ask(question)
    assert SISTER in answer and PARKED not in answer
    assert "stale: False" in answer


def test_stale_hits_are_flagged_or_excluded(retriever: ScrubJayRetriever,
                                            clock: FrozenClock) -> None:
    retriever.similarity_top_k = 2
    clock.advance(days=2)
    flagged = {n.node.node_id: n.node.metadata["stale"] for n in retriever.retrieve("park")}
    assert flagged == {"car": True, "sister": False}
    retriever.exclude_stale = True
    assert [n.node.text for n in retriever.retrieve("park")] == [SISTER]


def test_query_time_and_context_are_used(retriever: ScrubJayRetriever,
                                         clock: FrozenClock) -> None:
    retriever.similarity_top_k = 2
    clock.advance(days=2)
    retriever.at = T0 + 60  # asked back then, the parking spot was fresh
    got = retriever.retrieve("where did I park")
    assert got[0].node.text == PARKED and got[0].node.metadata["stale"] is False
    retriever.context = "family"
    with_ctx = {n.node.text: n.node.metadata["score_where"] for n in retriever.retrieve("park")}
    assert with_ctx[SISTER] == pytest.approx(1.0, abs=1e-5) and with_ctx[PARKED] < 0.5


def test_insert_replaces_by_node_id(retriever: ScrubJayRetriever) -> None:
    retriever.insert([TextNode(id_="car", text="I am parked on level 5 right now")])
    assert len(retriever.memory) == 2
    assert retriever.memory.get("car").text == "I am parked on level 5 right now"


def test_insert_reads_iso_times_and_rejects_naive_ones(retriever: ScrubJayRetriever) -> None:
    rec, = retriever.insert([Document(text="Dentist appointment on Monday",
                                      metadata={"created_at": "2025-11-20T09:00:00Z"})])
    assert rec.created_at_s == 1_763_629_200.0
    with pytest.raises(InvalidInputError, match="aware datetime"):
        retriever.insert([Document(text="x", metadata={"created_at": "2025-11-20T09:00:00"})])


def test_from_store_persists_and_reopens(tmp_path: Path, clock: FrozenClock,
                                         embedder: HashEmbedder) -> None:
    kwargs = {"namespace": "docs", "embed_model": embedder, "memory_kwargs": {"clock": clock}}
    ret = ScrubJayRetriever.from_documents([Document(text=SISTER, id_="s")],
                                           path=tmp_path / "m", **kwargs)
    ret.close()
    again = ScrubJayRetriever.from_store(tmp_path / "m", similarity_top_k=3, **kwargs)
    try:
        assert [n.node.node_id for n in again.retrieve("sister")] == ["s"]
    finally:
        again.close()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"similarity_top_k": 0}, "'similarity_top_k' parameter of ScrubJayRetriever"),
    ({"similarity_top_k": True}, "'similarity_top_k'"),
    ({"context": 3}, "'context' parameter of ScrubJayRetriever"),
])
def test_validation(retriever: ScrubJayRetriever, kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        ScrubJayRetriever(retriever.memory, **kwargs)


def test_rejects_other_memories() -> None:
    with pytest.raises(InvalidInputError, match="'memory' parameter of ScrubJayRetriever"):
        ScrubJayRetriever(object())  # type: ignore[arg-type]
