"""``ScrubJayVectorStore``: a LangChain ``VectorStore`` over a ScrubJay memory."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from scrubjay import Hit, InvalidInputError, MemoryNotFoundError, ScrubJayMemory
from scrubjay.explain import staleness_in

from ._convert import to_user_document, user_document_to_item
from ._search import filtered_search, query_time

__all__ = ["ScrubJayVectorStore"]


class ScrubJayVectorStore(VectorStore):
    """A ``VectorStore`` whose search ranks by the ScrubJay score and marks outdated memories.

    It works like langchain-chroma's ``Chroma``: documents keep the metadata they were added
    with, ``filter=`` takes Chroma's ``where`` grammar, and ``as_retriever()`` gives a
    retriever (``search_type`` ``"similarity"``, ``"mmr"`` or
    ``"similarity_score_threshold"``). The differences: scores are the ScrubJay ranking score
    (higher is better, not a distance), and a stale memory's page content starts with
    ``[outdated since ...: why]`` (``mark_stale=False`` turns that off) while its metadata adds
    ``stale``, ``stale_reason``, ``stale_since`` and ``stale_since_s``.

    Setup:
        .. code-block:: bash

            pip install "scrubjay-mem[langchain]"

    Key init args:
        embedding: Embeddings | None
            The embeddings model (``None``: the bundled offline model).
        path / client / namespace: where the memories persist (see ``ScrubJayMemory``);
            or pass an open ``memory=``.
        context: str
            The "where" of every query (default empty: rank by content and freshness).
        include_stale: bool
            Return stale memories (marked; default) or leave them out.
        mark_stale: bool
            Start a stale memory's page content with the outdated marker (default ``True``).

    Instantiate:
        .. code-block:: python

            from langchain_scrubjay import ScrubJayVectorStore

            store = ScrubJayVectorStore(embedding=embeddings, path="./memory")

    Invoke:
        .. code-block:: python

            store.add_texts(["I'm parked on level 3"], metadatas=[{"topic": "car"}], ids=["car"])
            store.similarity_search_with_score("where is my car?", k=1, filter={"topic": "car"})

        .. code-block:: none

            [(Document(id='car', metadata={'topic': 'car'}, page_content="I'm parked on level 3"),
              0.71)]

    Use within a chain:
        .. code-block:: python

            retriever = store.as_retriever(search_kwargs={"k": 3})
    """

    def __init__(self, embedding: Embeddings | None = None, *,
                 memory: ScrubJayMemory | None = None, path: str | Path | None = None,
                 client: Any = None, namespace: str = "default", context: str = "",
                 at: float | datetime | None = None, include_stale: bool = True,
                 mark_stale: bool = True, **memory_kwargs: Any) -> None:
        if memory is None:
            memory = ScrubJayMemory(path, client=client, namespace=namespace,
                                    embedder=embedding, **memory_kwargs)
        elif not isinstance(memory, ScrubJayMemory):
            raise InvalidInputError("The 'memory' parameter of ScrubJayVectorStore must be a "
                                    f"ScrubJayMemory. Got {type(memory).__name__} instead.")
        self.memory = memory
        """The live memory that is searched and written."""
        self._embedding = embedding
        self.context = context
        """The query context ("where") of every search."""
        self.at = at
        """The query time; ``None`` for the memory's clock."""
        self.include_stale = include_stale
        """Return stale memories too (marked); ``False`` leaves them out."""
        self.mark_stale = mark_stale
        """Start a stale memory's page content with the outdated marker."""

    @property
    def embeddings(self) -> Embeddings | None:
        return self._embedding

    # ------------------------------------------------------------------ writing
    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Remember ``documents``; ``ids=`` (or each ``Document.id``) names them, and adding an
        existing id replaces that memory. A document without an id gets a new UUID."""
        ids: Sequence[str | None] | None = kwargs.pop("ids", None)
        if ids is not None and len(ids) != len(documents):
            raise InvalidInputError("The 'ids' parameter of ScrubJayVectorStore.add_documents "
                                    f"must have one id per document. Got {len(ids)} for "
                                    f"{len(documents)} documents instead.")
        items = []
        for i, doc in enumerate(documents):
            mid = ids[i] if ids is not None else None
            items.append(user_document_to_item(doc, mid or doc.id or uuid.uuid4().hex))
        return [rec.id for rec in self.memory.add_many(items)]

    def add_texts(self, texts: Iterable[str], metadatas: list[dict[str, Any]] | None = None,
                  *, ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """Remember plain texts with optional metadata and ids (see :meth:`add_documents`)."""
        texts = list(texts)
        metas = metadatas if metadatas is not None else [{} for _ in texts]
        if len(metas) != len(texts):
            raise InvalidInputError("The 'metadatas' parameter of ScrubJayVectorStore.add_texts "
                                    f"must have one mapping per text. Got {len(metas)} for "
                                    f"{len(texts)} texts instead.")
        docs = [Document(page_content=t, metadata=dict(m)) for t, m in zip(texts, metas,
                                                                            strict=True)]
        return self.add_documents(docs, ids=ids, **kwargs)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Forget the memories with these ids (missing ids are ignored)."""
        if ids is None:
            raise InvalidInputError("ScrubJayVectorStore.delete needs ids=; to forget every "
                                    "memory call store.memory.forget_namespace().")
        for mid in ids:
            try:
                self.memory.delete(mid)
            except MemoryNotFoundError:
                continue
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids, in that order (missing ids are skipped)."""
        t_q = query_time(self.memory, self.at)
        out = []
        for mid in ids:
            try:
                rec = self.memory.get(mid)
            except MemoryNotFoundError:
                continue
            out.append(to_user_document(rec, staleness_in(self.memory, rec, t_q),
                                        mark_stale=self.mark_stale))
        return out

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings | None = None,
                   metadatas: list[dict[str, Any]] | None = None, *,
                   ids: list[str] | None = None, **kwargs: Any) -> ScrubJayVectorStore:
        """A store (its arguments in ``kwargs``) holding ``texts``."""
        store = cls(embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    # ------------------------------------------------------------------ searching
    def _hits(self, query: str, k: int, filter: dict[str, Any] | None,
              query_vector: Any = None) -> list[tuple[Hit, Document]]:
        hits = filtered_search(self.memory, query, k, where=filter,
                               include_stale=self.include_stale, context=self.context,
                               at=self.at, query_vector=query_vector)
        t_q = query_time(self.memory, self.at)
        return [(h, to_user_document(h.record, staleness_in(self.memory, h, t_q),
                                     mark_stale=self.mark_stale)) for h in hits]

    def similarity_search_with_score(self, query: str, k: int = 4,
                                     filter: dict[str, Any] | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """The ``k`` best documents for ``query`` with their ScrubJay score (higher is better).

        ``filter`` is a Chroma ``where`` filter over the documents' metadata.
        """
        return [(doc, float(h.score)) for h, doc in self._hits(query, k, filter)]

    def similarity_search(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                          **kwargs: Any) -> list[Document]:
        """The ``k`` best documents for ``query``, best first."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter)]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4,
                                    filter: dict[str, Any] | None = None,
                                    **kwargs: Any) -> list[Document]:
        """The ``k`` best documents for a query embedding (of the store's embeddings model)."""
        return [doc for _, doc in self._hits("", k, filter, query_vector=embedding)]

    def _similarity_search_with_relevance_scores(self, query: str, k: int = 4,
                                                 **kwargs: Any) -> list[tuple[Document, float]]:
        """Relevance in [0, 1]: the ScrubJay score, clipped."""
        return [(doc, min(1.0, max(0.0, s)))
                for doc, s in self.similarity_search_with_score(query, k, **kwargs)]

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20,
                                      lambda_mult: float = 0.5,
                                      filter: dict[str, Any] | None = None,
                                      **kwargs: Any) -> list[Document]:
        """``k`` documents among the ``fetch_k`` best, chosen for relevance and diversity."""
        query_vector = self.memory.embedder.embed([query], query=True)[0]
        return self._mmr(query, query_vector, k, fetch_k, lambda_mult, filter)

    def max_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4,
                                                fetch_k: int = 20, lambda_mult: float = 0.5,
                                                filter: dict[str, Any] | None = None,
                                                **kwargs: Any) -> list[Document]:
        """:meth:`max_marginal_relevance_search` for a query embedding."""
        return self._mmr("", embedding, k, fetch_k, lambda_mult, filter, by_vector=True)

    def _mmr(self, query: str, query_vector: Any, k: int, fetch_k: int, lambda_mult: float,
             filter: dict[str, Any] | None, *, by_vector: bool = False) -> list[Document]:
        found = self._hits(query, max(fetch_k, k), filter,
                           query_vector=query_vector if by_vector else None)
        if not found:
            return []
        vectors = self.memory.embedder.embed([h.text for h, _ in found])
        chosen = maximal_marginal_relevance(np.asarray(query_vector, dtype=np.float32),
                                            vectors.tolist(), lambda_mult, k)
        return [found[i][1] for i in chosen]
