"""LlamaIndex integration for scrubjay: translation between LlamaIndex types and the core.

- :class:`ScrubJayRetriever`: a ``BaseRetriever`` over a :class:`scrubjay.ScrubJayMemory`
  (``RetrieverQueryEngine``, ``insert``/``from_documents`` for ``Document``s and nodes).
- :class:`ScrubJayMemoryBlock`: a ``BaseMemoryBlock[str]`` for ``llama_index.core.memory.Memory``.
- :func:`as_scrubjay_embedder`: any LlamaIndex ``BaseEmbedding`` as the memory's embedder.

Importing this package imports ``llama_index.core`` and ``scrubjay``, never LangChain.
"""

from .embeddings import as_scrubjay_embedder
from .memory import ScrubJayMemoryBlock
from .retrievers import ScrubJayRetriever

__all__ = ["ScrubJayMemoryBlock", "ScrubJayRetriever", "as_scrubjay_embedder"]
