"""``ScrubJayRetriever``: a LangChain retriever over a ScrubJay memory."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, model_validator
from scrubjay import ScrubJayMemory
from scrubjay.explain import staleness_in
from scrubjay.filters import check_filter

from ._convert import document_to_item, hit_to_document
from ._search import filtered_search, query_time

__all__ = ["ScrubJayRetriever"]

_MEMORY_ARGS = ("path", "client", "namespace", "embedder", "llm", "config", "clock")


class ScrubJayRetriever(BaseRetriever):
    """Retriever over a ScrubJay memory: ranked by the What-Where-When score, stale flagged.

    Setup:
        Install ``scrubjay-mem`` with the LangChain extra.

        .. code-block:: bash

            pip install "scrubjay-mem[langchain]"

    Key init args:
        memory: ScrubJayMemory
            The memory to search (or pass ``path=``/``client=`` and ``namespace=``).
        k: int
            Number of documents to return; ``invoke(q, k=3)`` overrides it per call.
        context: str
            The query's context ("where"); per call with ``context=``.
        at: float | datetime | None
            The query time (default: the memory's clock); per call with ``at=``.
        include_stale: bool
            Whether stale memories may be returned.
        filter: dict | None
            A Chroma ``where`` filter over the documents' metadata; per call with ``filter=``.
        mark_stale: bool
            Start a stale memory's page content with ``[outdated since ...: why]``.

    Instantiate:
        .. code-block:: python

            from langchain_scrubjay import ScrubJayRetriever

            retriever = ScrubJayRetriever(path="./memory", namespace="alice", k=3)
            retriever.add_documents([Document("I'm parked on level 3",
                                              metadata={"context": "at the mall"})])

    Invoke:
        .. code-block:: python

            docs = retriever.invoke("where is my car?", k=1)
            docs[0].metadata["stale"], docs[0].metadata["score"]

        .. code-block:: none

            (False, 0.71)

    Use within a chain:
        .. code-block:: python

            from langchain_core.output_parsers import StrOutputParser
            from langchain_core.prompts import ChatPromptTemplate
            from langchain_core.runnables import RunnablePassthrough

            prompt = ChatPromptTemplate.from_template(
                "Answer from the context.\\nContext: {context}\\nQuestion: {question}")
            chain = ({"context": retriever | (lambda ds: "\\n".join(d.page_content for d in ds)),
                      "question": RunnablePassthrough()}
                     | prompt | llm | StrOutputParser())
            chain.invoke("where is my car?")

        Each document's metadata carries ``id``, ``label``, ``pi``, ``tau_s``, ``utility``,
        ``stale``, ``score`` and its components ``what``, ``where``, ``when``, ``graph``
        (with ``weights``), besides the metadata it was added with. A stale memory's page
        content starts with ``[outdated since 2025-11-24 17:32 UTC: decayed]`` (or
        ``superseded by: ...`` / ``window ended``) and its metadata adds ``stale_reason``,
        ``stale_since`` (ISO 8601) and ``stale_since_s`` (epoch seconds).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: ScrubJayMemory
    """The live memory that is searched and written."""
    k: int = Field(default=4, gt=0)
    """Number of documents to return."""
    context: str = ""
    """The query context ("where"), e.g. the conversation or task."""
    at: float | datetime | None = None
    """The query time, epoch seconds or an aware datetime; ``None`` for the memory's clock."""
    include_stale: bool = True
    """Return stale memories too (flagged ``stale=True``); ``False`` drops them."""
    filter: dict[str, Any] | None = None
    """Keep only memories whose metadata matches this Chroma ``where`` filter (over-fetched)."""
    mark_stale: bool = True
    """Start a stale memory's page content with a marker saying why and since when it is
    outdated (``False``: the text as stored; the metadata says it either way)."""

    def __init__(self, **data: Any) -> None:
        check_filter(data.get("filter"))  # FilterError itself, not pydantic's wrapper
        super().__init__(**data)

    @model_validator(mode="before")
    @classmethod
    def _build_memory(cls, data: Any) -> Any:
        """Open a ``ScrubJayMemory`` from ``path``/``client``/``namespace`` when none is given."""
        if isinstance(data, dict) and data.get("memory") is None:
            data = dict(data)
            args = {name: data.pop(name) for name in _MEMORY_ARGS if name in data}
            data["memory"] = ScrubJayMemory(**args)
        return data

    # ------------------------------------------------------------------ retrieval
    def _search(self, query: str, k: int | None = None, context: str | None = None,
                at: float | datetime | None = None, include_stale: bool | None = None,
                filter: dict[str, Any] | None = None) -> list[Document]:
        n = self.k if k is None else int(k)
        when = self.at if at is None else at
        hits = filtered_search(self.memory, query, n,
                               where=self.filter if filter is None else filter,
                               include_stale=self.include_stale if include_stale is None
                               else include_stale,
                               context=self.context if context is None else context, at=when)
        t_q = query_time(self.memory, when)
        return [hit_to_document(h, staleness_in(self.memory, h, t_q), mark_stale=self.mark_stale)
                for h in hits]

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return self._search(query, **kwargs)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(self._search, query, **kwargs))

    # ------------------------------------------------------------------ writing
    def add_documents(self, documents: Sequence[Document], *,
                      ids: Sequence[str] | None = None) -> list[str]:
        """Remember ``documents`` (``created_at`` and ``context`` read from their metadata)."""
        if ids is not None and len(ids) != len(documents):
            raise ValueError("The 'ids' parameter of ScrubJayRetriever.add_documents must have "
                             f"one id per document. Got {len(ids)} for {len(documents)}.")
        items = [document_to_item(d, None if ids is None else ids[i])
                 for i, d in enumerate(documents)]
        return [rec.id for rec in self.memory.add_many(items)]

    async def aadd_documents(self, documents: Sequence[Document], *,
                             ids: Sequence[str] | None = None) -> list[str]:
        """Async :meth:`add_documents` (runs in the default executor)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, functools.partial(self.add_documents, documents, ids=ids))

    def add_texts(self, texts: Iterable[str], metadatas: Sequence[dict[str, Any]] | None = None,
                  *, ids: Sequence[str] | None = None) -> list[str]:
        """Remember plain texts, with optional per-text metadata (and ``context``)."""
        texts = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        if len(metas) != len(texts):
            raise ValueError("The 'metadatas' parameter of ScrubJayRetriever.add_texts must "
                             f"have one mapping per text. Got {len(metas)} for {len(texts)}.")
        return self.add_documents([Document(page_content=t, metadata=dict(m))
                                   for t, m in zip(texts, metas, strict=True)], ids=ids)

    @classmethod
    def from_documents(cls, documents: Sequence[Document], *,
                       memory: ScrubJayMemory | None = None, path: str | Path | None = None,
                       namespace: str = "default", **kwargs: Any) -> ScrubJayRetriever:
        """A retriever over a memory (given, or opened from ``path``/``client=``) holding
        ``documents``. Other keyword arguments go to the memory or the retriever."""
        # (path= and namespace= are read by the model's validator, which opens the memory)
        opened: dict[str, Any] = {"memory": None, "path": path, "namespace": namespace}
        retriever = cls(**opened, **kwargs) if memory is None else cls(memory=memory, **kwargs)
        retriever.add_documents(documents)
        return retriever

    @classmethod
    def from_texts(cls, texts: Iterable[str],
                   metadatas: Sequence[dict[str, Any]] | None = None, **kwargs: Any
                   ) -> ScrubJayRetriever:
        """Like :meth:`from_documents`, from plain texts and optional metadata."""
        texts = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        return cls.from_documents([Document(page_content=t, metadata=dict(m))
                                   for t, m in zip(texts, metas, strict=True)], **kwargs)
