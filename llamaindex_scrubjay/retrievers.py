"""``ScrubJayRetriever``: a LlamaIndex retriever over a :class:`scrubjay.ScrubJayMemory`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters
from scrubjay import Hit, InvalidInputError, MemoryRecord, ScrubJayMemory
from scrubjay.explain import staleness_in
from scrubjay.filters import check_filter, matches, top_matching

from ._convert import filters_to_where, hit_to_node, node_to_item
from .embeddings import as_scrubjay_embedder

__all__ = ["ScrubJayRetriever"]

logger = logging.getLogger(__name__)

Timestamp = float | int | datetime


class ScrubJayRetriever(BaseRetriever):
    """Retrieve memories ranked by what, where, when (their staleness) and the episodic graph.

    Setup:
        ``pip install "scrubjay-mem[llamaindex]"``

    Key init args:
        memory: ScrubJayMemory
            The memory to search (or build one with :meth:`from_store` / :meth:`from_documents`).
        similarity_top_k: int
            How many memories a query returns (default 5).
        context: str
            Where the question is asked (a session, a task); memories from a similar context
            score higher. Empty by default.
        at: float | datetime | None
            When the question is asked; ``None`` means the memory's clock at each query.
        exclude_stale: bool
            Drop hits whose utility has decayed below the stale threshold. Default ``False``:
            stale hits are ranked low, flagged ``metadata["stale"] == True`` and their text
            starts with ``[outdated since ...: decayed]``.
        filters: MetadataFilters | None
            Keep only memories whose metadata passes (``==, !=, >, >=, <, <=, in, nin``, with
            ``and``/``or`` conditions, nested); another operator raises ``FilterError``.
        mark_stale: bool
            Start a stale memory's text with the outdated marker (default ``True``; the
            metadata says ``stale``, ``stale_reason`` and ``stale_since`` either way).

    Instantiate:
        .. code-block:: python

            from llamaindex_scrubjay import ScrubJayRetriever

            retriever = ScrubJayRetriever.from_store("./memory", namespace="alice",
                                                     similarity_top_k=3)
            retriever.insert([Document(text="I'm parked on level 3",
                                       metadata={"context": "at the mall"})])

    Invoke:
        .. code-block:: python

            nodes = retriever.retrieve("where did I park?")
            nodes[0].node.text, nodes[0].score, nodes[0].node.metadata["stale"]
            # ("I'm parked on level 3", 0.71, False)

    Use within a query engine:
        .. code-block:: python

            from llama_index.core.query_engine import RetrieverQueryEngine

            engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
            engine.query("Where is my car?")

    Each node's metadata carries ``memory_id``, ``context``, ``created_at`` (epoch seconds),
    ``label``, ``pi``, ``tau_s``, ``value``, ``utility``, ``stale``, ``score`` and its components
    ``score_what/where/when/graph`` and ``weight_what/where/when/graph``, all native Python
    values, beside the memory's own metadata.
    """

    def __init__(self, memory: ScrubJayMemory, *, similarity_top_k: int = 5, context: str = "",
                 at: Timestamp | None = None, exclude_stale: bool = False,
                 filters: MetadataFilters | None = None, mark_stale: bool = True,
                 callback_manager: CallbackManager | None = None, verbose: bool = False) -> None:
        owner = "ScrubJayRetriever"
        if not isinstance(memory, ScrubJayMemory):
            raise InvalidInputError(f"The 'memory' parameter of {owner} must be a "
                                    f"ScrubJayMemory. Got {type(memory).__name__} instead.")
        if isinstance(similarity_top_k, bool) or not isinstance(similarity_top_k, int) \
                or similarity_top_k < 1:
            raise InvalidInputError(f"The 'similarity_top_k' parameter of {owner} must be an int "
                                    f">= 1. Got {similarity_top_k!r} instead.")
        if not isinstance(context, str):
            raise InvalidInputError(f"The 'context' parameter of {owner} must be a str. "
                                    f"Got {type(context).__name__} instead.")
        where = filters_to_where(filters)
        check_filter(where)
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self._memory = memory
        self._owns_memory = False
        self.similarity_top_k = similarity_top_k
        """How many memories a query returns."""
        self.context = context
        """Where the question is asked; used as the query context."""
        self.at = at
        """When the question is asked; ``None`` for the memory's clock."""
        self.exclude_stale = exclude_stale
        """Drop stale hits instead of returning them flagged."""
        self.filters = filters
        """The metadata filters every query applies."""
        self._where = where
        self.mark_stale = mark_stale
        """Start a stale memory's text with the outdated marker."""

    @classmethod
    def class_name(cls) -> str:
        return "ScrubJayRetriever"

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_store(cls, path: str | Path | None = None, *, client: Any = None,
                   namespace: str = "default", embed_model: Any = None,
                   memory_kwargs: dict[str, Any] | None = None,
                   **retriever_kwargs: Any) -> ScrubJayRetriever:
        """Open a memory at ``path`` (embedded Chroma) or behind ``client`` and wrap it.

        ``embed_model`` is a LlamaIndex ``BaseEmbedding`` (wrapped with
        :func:`~llamaindex_scrubjay.as_scrubjay_embedder`) or anything ``ScrubJayMemory``
        accepts as ``embedder`` (``None``: the bundled offline model). ``memory_kwargs`` go to
        ``ScrubJayMemory`` (``clock``, ``config``, ``llm``). The retriever owns this memory:
        :meth:`close` closes it.
        """
        if isinstance(embed_model, BaseEmbedding):
            embed_model = as_scrubjay_embedder(embed_model)
        memory = ScrubJayMemory(path, client=client, namespace=namespace, embedder=embed_model,
                                **(memory_kwargs or {}))
        try:
            retriever = cls(memory, **retriever_kwargs)
        except BaseException:
            memory.close()
            raise
        retriever._owns_memory = True
        return retriever

    @classmethod
    def from_documents(cls, documents: Iterable[BaseNode], memory: ScrubJayMemory | None = None,
                       *, path: str | Path | None = None, client: Any = None,
                       namespace: str = "default", embed_model: Any = None,
                       memory_kwargs: dict[str, Any] | None = None, insert_context: str = "",
                       **retriever_kwargs: Any) -> ScrubJayRetriever:
        """Remember ``documents`` (``Document``s or nodes) and return a retriever over them.

        Uses ``memory`` when given, else opens one as :meth:`from_store` does. See
        :meth:`insert` for how a node becomes a memory.
        """
        if memory is not None:
            retriever = cls(memory, **retriever_kwargs)
        else:
            retriever = cls.from_store(path, client=client, namespace=namespace,
                                       embed_model=embed_model, memory_kwargs=memory_kwargs,
                                       **retriever_kwargs)
        retriever.insert(documents, context=insert_context)
        return retriever

    @property
    def memory(self) -> ScrubJayMemory:
        """The wrapped memory."""
        return self._memory

    def close(self) -> None:
        """Close the memory if this retriever opened it (:meth:`from_store`)."""
        if self._owns_memory:
            self._memory.close()

    # ------------------------------------------------------------------ insert
    def insert(self, nodes: Iterable[BaseNode], context: str = "") -> list[MemoryRecord]:
        """Remember LlamaIndex ``Document``s or nodes, one memory each, in one batch.

        - text: the node's content without metadata;
        - id: the node id, so inserting a node again replaces its memory;
        - context: ``metadata["context"]`` when present, else ``context``;
        - time: ``metadata["created_at"]`` (epoch seconds, an aware ``datetime`` or an ISO
          string with a timezone) when present, else now;
        - metadata: the rest, with the keys this package writes on retrieved nodes dropped and
          non-JSON values stringified (``datetime`` -> ISO string, others ``str()``).

        Long documents should be split by a node parser first (a memory is at most 100,000
        characters).
        """
        items = [node_to_item(n, context) for n in nodes]
        return self._memory.add_many(items)

    async def ainsert(self, nodes: Iterable[BaseNode], context: str = "") -> list[MemoryRecord]:
        """Async :meth:`insert` (the core call runs in a worker thread)."""
        items = [node_to_item(n, context) for n in nodes]
        return await asyncio.to_thread(self._memory.add_many, items)

    # ------------------------------------------------------------------ retrieve
    def _search(self, query: str) -> list[NodeWithScore]:
        mem, k, where = self._memory, self.similarity_top_k, self._where

        def search(n: int) -> list[Hit]:
            return mem.search(query, context=self.context, k=n, at=self.at,
                              exclude_stale=self.exclude_stale)

        hits = search(k) if not where else top_matching(
            search, k, len(mem), lambda h: matches(h.record.metadata, where))
        t_q = mem.now() if self.at is None else (
            self.at.timestamp() if isinstance(self.at, datetime) else float(self.at))
        return [hit_to_node(h, staleness_in(mem, h, t_q), mark_stale=self.mark_stale)
                for h in hits]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._search(query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._search, query_bundle.query_str)
