"""ScrubJayVectorStore: the standard LangChain suite, filters against Chroma, stale marking."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from langchain_tests.integration_tests import VectorStoreIntegrationTests
from scrubjay import FilterError, ScrubJayMemory
from scrubjay.testing import FrozenClock, HashEmbedder

from langchain_scrubjay import ScrubJayRetriever, ScrubJayVectorStore

T0 = 1_764_000_000.0


class TestScrubJayVectorStoreStandard(VectorStoreIntegrationTests):
    """langchain-tests==1.1.9 against an embedded Chroma in tmp_path, sync and async."""

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[VectorStore]:  # type: ignore[override]
        store = ScrubJayVectorStore(self.get_embeddings(), path=tmp_path / "vs",
                                    clock=FrozenClock(T0))
        try:
            yield store
        finally:
            store.memory.close()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def store(tmp_path: Path, clock: FrozenClock) -> Iterator[ScrubJayVectorStore]:
    vs = ScrubJayVectorStore(HashEmbedder(dim=64), path=tmp_path / "vs", clock=clock)
    yield vs
    vs.memory.close()


TEXTS = [f"note {i} about the {topic} project" for i, topic in
         enumerate(["garden", "kitchen", "garden", "roof", "kitchen", "garden", "roof", "car"])]
METAS: list[dict[str, Any]] = [
    {"topic": "garden", "n": 0, "done": True}, {"topic": "kitchen", "n": 1, "cost": 2.5},
    {"topic": "garden", "n": 2, "done": False}, {"topic": "roof", "n": 3},
    {"topic": "kitchen", "n": 4, "done": True, "cost": 10}, {"topic": "garden", "n": 5},
    {"n": 6, "cost": 1}, {"topic": "car", "done": 1},
]
FILTERS: list[dict[str, Any]] = [
    {"topic": "garden"}, {"topic": {"$ne": "garden"}}, {"n": {"$gt": 2}}, {"n": {"$lte": 1}},
    {"cost": {"$gte": 2.5}}, {"cost": {"$lt": 5}}, {"topic": {"$in": ["roof", "car"]}},
    {"topic": {"$nin": ["garden", "kitchen"]}}, {"done": True}, {"done": {"$ne": True}},
    {"$and": [{"topic": "garden"}, {"n": {"$gte": 2}}]},
    {"$or": [{"topic": "roof"}, {"done": True}]},
    {"$or": [{"$and": [{"topic": "kitchen"}, {"cost": {"$gt": 5}}]}, {"n": {"$eq": 0}}]},
]


@pytest.fixture
def chroma_ids() -> Any:
    """The ids a plain Chroma collection, with the same metadata, returns for a filter."""
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    col = client.create_collection(f"vs-{uuid.uuid4().hex[:8]}", embedding_function=None)
    emb = HashEmbedder(dim=64)
    col.add(ids=[str(i) for i in range(len(TEXTS))], documents=TEXTS, metadatas=METAS,
            embeddings=[list(map(float, v)) for v in emb.embed(TEXTS)])

    def ids(where: dict[str, Any]) -> set[str]:
        return set(col.get(where=where)["ids"])
    return ids


@pytest.mark.parametrize("where", FILTERS, ids=str)
def test_filters_match_a_chroma_collection(store, chroma_ids, where) -> None:
    store.add_texts(TEXTS, METAS, ids=[str(i) for i in range(len(TEXTS))])
    want = chroma_ids(where)
    docs = store.similarity_search("project notes", k=len(TEXTS), filter=where)
    assert {d.id for d in docs} == want and want
    k = max(1, len(want) - 1)   # k honoured: the best k of those that pass
    best = store.similarity_search("project notes", k=k, filter=where)
    assert [d.id for d in best] == [d.id for d in docs][:k]
    retriever = ScrubJayRetriever(memory=store.memory, k=len(TEXTS), filter=where)
    assert {d.id for d in retriever.invoke("project notes")} == want
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "filter": where})
    assert {d.id for d in mmr.invoke("project notes")} <= want


@pytest.mark.parametrize("op", ["$contains", "$regex", "$not"])
def test_an_unsupported_operator_raises_instead_of_returning_nothing(store, op) -> None:
    store.add_texts(TEXTS, METAS)
    where = {op: [{"topic": "roof"}]} if op == "$not" else {"topic": {op: "roof"}}
    with pytest.raises(FilterError, match=rf"'\{op}'"):
        store.similarity_search("roof", filter=where)
    with pytest.raises(FilterError, match=rf"'\{op}'"):
        ScrubJayRetriever(memory=store.memory).invoke("roof", filter=where)
    with pytest.raises(FilterError, match=rf"'\{op}'"):
        ScrubJayRetriever(memory=store.memory, filter=where)


def test_scores_by_vector_mmr_and_retriever(store) -> None:
    ids = store.add_texts(TEXTS, METAS)
    scored = store.similarity_search_with_score(TEXTS[3], k=3)
    assert scored[0][0].page_content == TEXTS[3] and scored[0][0].id == ids[3]
    assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
    assert scored[0][0].metadata == METAS[3]     # the metadata as added, nothing more
    vector = list(map(float, store.memory.embedder.embed([TEXTS[5]], query=True)[0]))
    assert store.similarity_search_by_vector(vector, k=1)[0].id == ids[5]
    assert store.max_marginal_relevance_search_by_vector(vector, k=1)[0].id == ids[5]
    mmr = store.max_marginal_relevance_search(TEXTS[0], k=3, fetch_k=8, lambda_mult=0.1)
    assert len({d.id for d in mmr}) == 3 and mmr[0].id == ids[0]
    retriever = store.as_retriever(search_kwargs={"k": 2})
    assert isinstance(retriever, VectorStoreRetriever)
    assert [d.id for d in retriever.invoke(TEXTS[1])] == [d.id for d, _ in
                                                          store.similarity_search_with_score(
                                                              TEXTS[1], k=2)]
    relevant = store.similarity_search_with_relevance_scores(TEXTS[2], k=2)
    assert all(0.0 <= s <= 1.0 for _, s in relevant)


def test_from_texts_and_from_documents(tmp_path: Path, clock) -> None:
    emb = HashEmbedder(dim=32)
    a = ScrubJayVectorStore.from_texts(["alpha one", "beta two"], emb, [{"x": 1}, {"x": 2}],
                                       ids=["a", "b"], path=tmp_path / "a", clock=clock)
    assert [d.metadata for d in a.get_by_ids(["b", "a", "zz"])] == [{"x": 2}, {"x": 1}]
    b = ScrubJayVectorStore.from_documents([Document("gamma", id="g", metadata={"y": True})],
                                           emb, memory=ScrubJayMemory(embedder=emb, clock=clock))
    assert b.get_by_ids(["g"]) == [Document("gamma", id="g", metadata={"y": True})]
    a.memory.close()
    b.memory.close()


def test_a_stale_memory_is_marked_where_the_llm_reads_it(store, clock) -> None:
    store.add_texts(["Right now I am parked on level 3 of the mall garage",
                     "My sister lives in Oslo"], [{"kind": "car"}, {"kind": "family"}],
                    ids=["car", "sister"])
    fresh = store.similarity_search("where am I parked", k=2)
    assert all(not d.page_content.startswith("[outdated") for d in fresh)
    clock.advance(days=3)
    docs = {d.id: d for d in store.similarity_search("where am I parked", k=2)}
    car = docs["car"]
    assert car.page_content.startswith("[outdated since 2025-11-24 ")
    assert car.page_content.endswith(": decayed] Right now I am parked on level 3 of the mall "
                                     "garage")
    assert car.metadata["stale"] is True and car.metadata["stale_reason"] == "decayed"
    assert T0 < car.metadata["stale_since_s"] < clock()
    assert car.metadata["stale_since"].startswith("2025-11-24T")
    assert car.metadata["kind"] == "car"
    assert docs["sister"].metadata == {"kind": "family"}          # fresh: untouched
    assert store.get_by_ids(["car"])[0].page_content == car.page_content
    # a marked document given back is stored without its marker and stale keys
    store.add_documents([car])
    assert store.memory.get("car").text.startswith("Right now")
    assert "stale" not in store.memory.get("car").metadata
    clock.advance(days=3)
    plain = ScrubJayVectorStore(memory=store.memory, mark_stale=False)
    assert plain.get_by_ids(["car"])[0].page_content.startswith("Right now")
    assert plain.get_by_ids(["car"])[0].metadata["stale"] is True
    assert [d.id for d in ScrubJayVectorStore(memory=store.memory, include_stale=False)
            .similarity_search("where am I parked", k=2)] == ["sister"]


def test_the_retriever_marks_stale_memories_in_an_lcel_chain(store, clock) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough

    store.add_texts(["Right now I am parked on level 3 of the mall garage"], ids=["car"])
    clock.advance(days=2)
    retriever = ScrubJayRetriever(memory=store.memory, k=1)
    doc = retriever.invoke("where am I parked")[0]
    assert doc.page_content.startswith("[outdated since 2025-11-24 ")
    assert doc.metadata["stale"] is True and doc.metadata["stale_reason"] == "decayed"
    prompts: list[str] = []
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    chain = ({"context": retriever | (lambda ds: "\n".join(d.page_content for d in ds)),
              "question": RunnablePassthrough()} | prompt
             | (lambda p: prompts.append(p.to_string()) or p)
             | GenericFakeChatModel(messages=iter([AIMessage("It may have moved.")])))
    chain.invoke("where am I parked")
    assert ": decayed] Right now I am parked on level 3" in prompts[0]
    unmarked = ScrubJayRetriever(memory=store.memory, k=1, mark_stale=False)
    assert unmarked.invoke("where am I parked")[0].page_content.startswith("Right now")
