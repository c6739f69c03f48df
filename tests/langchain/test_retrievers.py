"""ScrubJayRetriever: the standard LangChain suite, construction paths, options, LCEL chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_tests.integration_tests import RetrieversIntegrationTests
from scrubjay import ScrubJayMemory
from scrubjay.testing import WEEK_OF_MEMORIES, FrozenClock, HashEmbedder

from langchain_scrubjay import ScrubJayRetriever

T0 = 1_764_000_000.0
DAY = 86_400.0


def week_documents() -> list[Document]:
    return [Document(text, metadata={"context": ctx, "created_at": T0 - (7 - d) * DAY + h * 3600,
                                     "day": d})
            for d, h, text, ctx in WEEK_OF_MEMORIES]


class TestScrubJayRetrieverStandard(RetrieversIntegrationTests):
    """langchain-tests==1.1.9 (pinned in pyproject's test extra), sync and async cases."""

    @pytest.fixture(autouse=True)
    def _store(self, tmp_path: Path) -> None:
        self._path = tmp_path / "store"
        with ScrubJayMemory(path=self._path, namespace="std", embedder=HashEmbedder(),
                            clock=FrozenClock(T0)) as mem:
            mem.add_many([{"text": t, "context": c} for _, _, t, c in WEEK_OF_MEMORIES])

    @property
    def retriever_constructor(self) -> type[ScrubJayRetriever]:
        return ScrubJayRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"path": self._path, "namespace": "std", "embedder": HashEmbedder(),
                "clock": FrozenClock(T0)}

    @property
    def retriever_query_example(self) -> str:
        return "what is the user working on today?"


@pytest.fixture
def retriever(clock, embedder) -> ScrubJayRetriever:
    return ScrubJayRetriever.from_documents(week_documents(), embedder=embedder, clock=clock, k=3)


def test_from_documents_reads_time_and_context(retriever: ScrubJayRetriever) -> None:
    recs = {r.text: r for r in retriever.memory}
    assert len(recs) == len(WEEK_OF_MEMORIES)
    d, h, text, ctx = WEEK_OF_MEMORIES[3]
    assert recs[text].context == ctx
    assert recs[text].created_at_s == T0 - (7 - d) * DAY + h * 3600
    assert recs[text].metadata == {"day": d}


def test_documents_carry_the_score_breakdown(retriever: ScrubJayRetriever) -> None:
    docs = retriever.invoke("which room is the user sitting in", k=2)
    assert len(docs) == 2
    md = docs[0].metadata
    assert set(md) >= {"id", "label", "pi", "tau_s", "utility", "stale", "score", "what",
                       "where", "when", "graph", "weights"}
    assert docs[0].id == md["id"] and md["score"] >= docs[1].metadata["score"]
    w = md["weights"]
    assert md["paper_score"] == pytest.approx(w[0] * md["what"] + w[1] * md["where"]
                                              + w[2] * md["when"] + w[3] * md["graph"])


def test_k_context_time_and_stale_per_call(clock, embedder) -> None:
    r = ScrubJayRetriever.from_texts(
        ["I am parked on level 3 right now", "The user is a structural engineer"],
        metadatas=[{"context": "at the mall"}, {"context": "getting to know the user"}],
        embedder=embedder, clock=clock, k=1)
    assert len(r.invoke("where am I parked")) == 1
    assert len(r.invoke("where am I parked", k=2)) == 2
    later = T0 + 2 * DAY
    docs = r.invoke("where am I parked", k=2, at=later)
    parked = next(d for d in docs if "parked" in d.page_content)
    assert parked.metadata["stale"] is True
    fresh = r.invoke("where am I parked", k=2, at=later, include_stale=False)
    assert [d.page_content for d in fresh] == ["The user is a structural engineer"]
    assert r.invoke("where am I parked", k=2, at=T0)[0].metadata["stale"] is False


def test_metadata_filter_is_over_fetched(retriever: ScrubJayRetriever) -> None:
    docs = retriever.invoke("the user", k=5, filter={"day": {"$gte": 3}})
    assert {d.metadata["day"] for d in docs} <= {3, 4} and len(docs) == 2


async def test_async_matches_sync(retriever: ScrubJayRetriever) -> None:
    sync = retriever.invoke("ticket deflection check", k=2, context="debugging the model")
    asy = await retriever.ainvoke("ticket deflection check", k=2, context="debugging the model")
    assert [d.id for d in sync] == [d.id for d in asy]
    ids = await retriever.aadd_documents([Document("New ticket BR-300")], ids=["br300"])
    assert ids == ["br300"] and "br300" in retriever.memory


def test_server_backend(chroma_server, clock, embedder) -> None:
    import uuid

    import chromadb

    host, port = chroma_server
    r = ScrubJayRetriever(client=chromadb.HttpClient(host=host, port=port),
                          namespace=f"lc-{uuid.uuid4().hex[:8]}", embedder=embedder,
                          clock=clock, k=2)
    r.add_documents(week_documents())
    docs = r.invoke("ticket deflection check span")
    hits = r.memory.search("ticket deflection check span", k=2)
    assert len(docs) == 2 and [d.id for d in docs] == [h.id for h in hits]
    assert [d.metadata["score"] for d in docs] == [h.score for h in hits]


class _Prompts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.seen.extend(m.content for batch in messages for m in batch)


def test_inside_an_lcel_rag_chain(clock, embedder) -> None:
    r = ScrubJayRetriever.from_texts(
        ["Right now I am parked on level 3", "The user is allergic to shellfish"],
        embedder=embedder, clock=clock, k=1, include_stale=False)
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    model = GenericFakeChatModel(messages=iter([AIMessage("Level 3."), AIMessage("Unknown.")]))
    chain = ({"context": r | (lambda docs: "\n".join(d.page_content for d in docs)),
              "question": RunnablePassthrough()} | prompt | model | StrOutputParser())
    spy = _Prompts()
    assert chain.invoke("where am I parked", config={"callbacks": [spy]}) == "Level 3."
    assert "parked on level 3" in spy.seen[-1]
    clock.advance(days=2)   # the parking spot is stale now: it drops out of the chain's context
    assert chain.invoke("where am I parked", config={"callbacks": [spy]}) == "Unknown."
    assert "parked on level 3" not in spy.seen[-1] and "shellfish" in spy.seen[-1]
