"""Any LlamaIndex ``BaseEmbedding`` as the embedder of a :class:`scrubjay.ScrubJayMemory`.

The core already wraps objects with ``get_text_embedding_batch`` by duck typing; this module is
the explicit, checked entry point for LlamaIndex users:

>>> from llama_index.core.embeddings import MockEmbedding
>>> from llamaindex_scrubjay import as_scrubjay_embedder
>>> emb = as_scrubjay_embedder(MockEmbedding(embed_dim=8))
>>> emb.embed(["hello"]).shape
(1, 8)
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from scrubjay import InvalidInputError
from scrubjay.embedding import LlamaIndexEmbedder

__all__ = ["as_scrubjay_embedder"]


def as_scrubjay_embedder(embed_model: Any, name: str | None = None) -> LlamaIndexEmbedder:
    """Wrap a LlamaIndex ``BaseEmbedding`` as a scrubjay embedder.

    Parameters
    ----------
    embed_model : BaseEmbedding
        Any LlamaIndex embedding (``MockEmbedding``, ``OllamaEmbedding``, a subclass of your own).
        Documents go through ``get_text_embedding_batch`` and a single query through
        ``get_query_embedding``, so models with query/document prefixes work as intended.
    name : str, optional
        The name recorded with the store (a reopen with another embedder fails). The default is
        ``llamaindex:<module>.<class>:<model_name>``; pass one when two configurations of the
        same class produce different vectors.

    Returns
    -------
    scrubjay.embedding.LlamaIndexEmbedder
        Pass it as ``ScrubJayMemory(embedder=...)``.
    """
    if isinstance(embed_model, LlamaIndexEmbedder):
        return embed_model
    if not isinstance(embed_model, BaseEmbedding):
        raise InvalidInputError("The 'embed_model' parameter of as_scrubjay_embedder must be a "
                                "LlamaIndex BaseEmbedding. Got "
                                f"{type(embed_model).__name__} instead.")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise InvalidInputError("The 'name' parameter of as_scrubjay_embedder must be a "
                                f"non-empty str or None. Got {name!r} instead.")
    return LlamaIndexEmbedder(embed_model, name=name)
