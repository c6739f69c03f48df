"""The LlamaIndex retriever: MetadataFilters answered as Chroma would, stale memories marked."""

from __future__ import annotations

import uuid
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from llama_index.core import Document
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from scrubjay import FilterError, ScrubJayMemory
from scrubjay.testing import FrozenClock, HashEmbedder

from llamaindex_scrubjay import ScrubJayRetriever

METAS: list[dict[str, Any]] = [
    {"topic": "garden", "n": 0}, {"topic": "kitchen", "n": 1, "cost": 2.5},
    {"topic": "garden", "n": 2}, {"topic": "roof", "n": 3}, {"topic": "kitchen", "n": 4},
    {"n": 5, "cost": 10.0}, {"topic": "car"},
]
F, Op = MetadataFilter, FilterOperator
CASES: list[MetadataFilters] = [
    MetadataFilters(filters=[F(key="topic", value="garden")]),
    MetadataFilters(filters=[F(key="topic", value="garden", operator=Op.NE)]),
    MetadataFilters(filters=[F(key="n", value=2, operator=Op.GT)]),
    MetadataFilters(filters=[F(key="n", value=2, operator=Op.LTE)]),
    MetadataFilters(filters=[F(key="cost", value=2.5, operator=Op.GTE)]),
    MetadataFilters(filters=[F(key="n", value=4, operator=Op.LT)]),
    MetadataFilters(filters=[F(key="topic", value=["roof", "car"], operator=Op.IN)]),
    MetadataFilters(filters=[F(key="topic", value=["garden"], operator=Op.NIN)]),
    MetadataFilters(filters=[F(key="topic", value="kitchen"), F(key="n", value=2,
                                                                  operator=Op.GT)]),
    MetadataFilters(filters=[F(key="topic", value="roof"), F(key="cost", value=5.0,
                                                               operator=Op.GT)],
                    condition=FilterCondition.OR),
    MetadataFilters(filters=[MetadataFilters(filters=[F(key="topic", value="garden"),
                                                      F(key="n", value=0, operator=Op.GT)]),
                             F(key="topic", value="car")], condition=FilterCondition.OR),
]
WHERE: list[dict[str, Any]] = [   # the same filters, written for Chroma
    {"topic": "garden"}, {"topic": {"$ne": "garden"}}, {"n": {"$gt": 2}}, {"n": {"$lte": 2}},
    {"cost": {"$gte": 2.5}}, {"n": {"$lt": 4}}, {"topic": {"$in": ["roof", "car"]}},
    {"topic": {"$nin": ["garden"]}}, {"$and": [{"topic": "kitchen"}, {"n": {"$gt": 2}}]},
    {"$or": [{"topic": "roof"}, {"cost": {"$gt": 5.0}}]},
    {"$or": [{"$and": [{"topic": "garden"}, {"n": {"$gt": 0}}]}, {"topic": "car"}]},
]


@pytest.fixture
def memory(clock: FrozenClock, embedder: HashEmbedder) -> Any:
    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    mem.add_many([{"id": str(i), "text": f"note {i} about the house", "metadata": m}
                  for i, m in enumerate(METAS)])
    yield mem
    mem.close()


@pytest.mark.parametrize("case", range(len(CASES)))
def test_metadata_filters_match_a_chroma_collection(memory, run, case: int) -> None:
    col = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False)) \
        .create_collection(f"li-{uuid.uuid4().hex[:8]}", embedding_function=None)
    col.add(ids=[str(i) for i in range(len(METAS))], metadatas=METAS,
            embeddings=[[1.0, float(i)] for i in range(len(METAS))])
    want = set(col.get(where=WHERE[case])["ids"])
    retriever = ScrubJayRetriever(memory, similarity_top_k=len(METAS), filters=CASES[case])
    got = run(lambda: retriever.retrieve("house notes"),
              lambda: retriever.aretrieve("house notes"))
    assert {n.node.node_id for n in got} == want and want
    one = ScrubJayRetriever(memory, similarity_top_k=1, filters=CASES[case])
    assert [n.node.node_id for n in one.retrieve("house notes")] == \
        [n.node.node_id for n in got][:1]


@pytest.mark.parametrize("bad", [
    MetadataFilters(filters=[F(key="topic", value="gar", operator=Op.TEXT_MATCH)]),
    MetadataFilters(filters=[F(key="topic", value="garden", operator=Op.CONTAINS)]),
    MetadataFilters(filters=[F(key="topic", value="garden")], condition=FilterCondition.NOT),
])
def test_an_unsupported_operator_raises_naming_it(memory, bad: MetadataFilters) -> None:
    with pytest.raises(FilterError, match="text_match|contains|not"):
        ScrubJayRetriever(memory, filters=bad)


def test_a_stale_node_is_marked_for_the_llm(clock: FrozenClock, embedder: HashEmbedder,
                                            run) -> None:
    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    retriever = ScrubJayRetriever.from_documents(
        [Document(text="I am parked on level 3 right now", id_="car")], memory=mem,
        similarity_top_k=1)
    clock.advance(days=2)
    node = run(lambda: retriever.retrieve("where did I park"),
               lambda: retriever.aretrieve("where did I park"))[0].node
    assert node.text.startswith("[outdated since 2025-11-24 ")
    assert node.text.endswith(": decayed] I am parked on level 3 right now")
    assert node.metadata["stale_reason"] == "decayed" and node.metadata["stale"] is True
    assert "stale_reason" not in node.get_content(metadata_mode="llm")
    answer = str(RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query("parked?"))
    assert ": decayed] I am parked on level 3" in answer   # MockLLM echoes its prompt
    retriever.insert([node])                                 # given back: unmarked
    assert mem.get("car").text == "I am parked on level 3 right now"
    plain = ScrubJayRetriever(mem, similarity_top_k=1, mark_stale=False)
    assert plain.retrieve("where did I park")[0].node.text.startswith("I am parked")
    mem.close()
