"""Any LlamaIndex BaseEmbedding serves as the memory's embedder."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.embeddings import MockEmbedding
from scrubjay import InvalidInputError, ScrubJayMemory
from scrubjay.embedding import LlamaIndexEmbedder
from scrubjay.testing import FrozenClock

from llamaindex_scrubjay import ScrubJayRetriever, as_scrubjay_embedder

CALLS: list[str] = []  # which LlamaIndex method each embedding went through


class LetterEmbedding(BaseEmbedding):
    """A custom embedding: letter counts, with a marker dimension for queries."""

    @classmethod
    def class_name(cls) -> str:
        return "LetterEmbedding"

    def _vec(self, text: str, query: bool) -> list[float]:
        out = [float(text.lower().count(c)) for c in "abcdefghijklmnopqrstuvwxyz"]
        return [*out, 1.0 if query else 0.0]

    def _get_text_embedding(self, text: str) -> list[float]:
        CALLS.append("text")
        return self._vec(text, False)

    def _get_query_embedding(self, query: str) -> list[float]:
        CALLS.append("query")
        return self._vec(query, True)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def test_mock_embedding_is_wrapped() -> None:
    emb = as_scrubjay_embedder(MockEmbedding(embed_dim=8))
    assert isinstance(emb, LlamaIndexEmbedder)
    vecs = emb.embed(["a", "b"])
    assert vecs.shape == (2, 8) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0)
    assert emb.name.startswith("llamaindex:") and "MockEmbedding" in emb.name
    assert as_scrubjay_embedder(emb) is emb


def test_custom_embedding_drives_a_memory() -> None:
    model = LetterEmbedding()
    CALLS.clear()
    emb = as_scrubjay_embedder(model, name="letters-v1")
    mem = ScrubJayMemory(embedder=emb, clock=FrozenClock(1_764_000_000))
    try:
        mem.add("zzz zzz zebra")
        mem.add("aaa banana")
        assert "text" in CALLS
        CALLS.clear()
        hits = mem.search("zzz", k=2)
        assert CALLS == ["query"]  # the query goes through get_query_embedding
        assert hits[0].text == "zzz zzz zebra"
        assert mem.embedder.name == "letters-v1"
    finally:
        mem.close()


def test_retriever_from_store_accepts_a_base_embedding(tmp_path) -> None:
    ret = ScrubJayRetriever.from_store(tmp_path / "m", namespace="emb",
                                       embed_model=MockEmbedding(embed_dim=16),
                                       memory_kwargs={"clock": FrozenClock(1_764_000_000)})
    try:
        assert isinstance(ret.memory.embedder, LlamaIndexEmbedder)
        ret.memory.add("hello there")
        assert [n.node.text for n in ret.retrieve("hello")] == ["hello there"]
    finally:
        ret.close()


@pytest.mark.parametrize("bad", [lambda t: t, "model", None])
def test_rejects_other_objects(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="'embed_model' parameter of as_scrubjay"):
        as_scrubjay_embedder(bad)


def test_rejects_blank_name() -> None:
    with pytest.raises(InvalidInputError, match="'name' parameter"):
        as_scrubjay_embedder(MockEmbedding(embed_dim=4), name=" ")
