"""Embedders: the protocol, adapters for LangChain / LlamaIndex / callables, and the default.

The default is ``wordllama``'s bundled 256-d model, loaded from the package's own folder with
downloads disabled, so nothing leaves the machine. Adapters are found by duck typing (an object
with ``embed_documents`` is a LangChain ``Embeddings``; one with ``get_text_embedding_batch`` is a
LlamaIndex embedding); this module imports neither framework.

Every embedder returns L2-normalised float32 rows. An empty or blank text embeds to the zero
vector without calling the model (an empty context has no 'where').
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from .errors import EmbeddingError, InvalidInputError
from .unit import l2_normalize

__all__ = [
    "CallableEmbedder",
    "Embedder",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "WordLlamaEmbedder",
    "as_embedder",
    "checked_query_vector",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """What scrubjay needs of an embedder."""

    @property
    def name(self) -> str:
        """A stable name recorded with the store, so that a reopen with another model fails."""
        ...

    def embed(self, texts: Sequence[str], *, query: bool = False) -> NDArray[np.float32]:
        """Embed ``texts`` into an ``(n, d)`` float32 array of L2-normalised rows."""
        ...


class _BaseEmbedder:
    """Shared checks: blank texts -> zero rows, each distinct text embedded once, shape and
    finiteness, normalisation."""

    name: str = "embedder"
    _dim: int | None = None

    def _raw(self, texts: list[str], query: bool) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def embed(self, texts: Sequence[str], *, query: bool = False) -> NDArray[np.float32]:
        texts = list(texts)
        if len(texts) == 1 and texts[0].strip():  # a query: no de-duplication to do
            return self._checked(texts, query)
        keep = [i for i, t in enumerate(texts) if t.strip()]
        if not keep:
            if self._dim is None:
                self._dim = int(self._checked([texts[0] or "."] if texts else ["."],
                                              query).shape[1])
            return np.zeros((len(texts), self._dim), dtype=np.float32)
        # a batch often repeats a text (the context of a conversation): the model sees it once
        slot: dict[str, int] = {}
        which = [slot.setdefault(texts[i], len(slot)) for i in keep]
        rows = self._checked(list(slot), query)
        out = np.zeros((len(texts), rows.shape[1]), dtype=np.float32)
        out[keep] = rows[which]
        return out

    def _checked(self, texts: list[str], query: bool) -> NDArray[np.float32]:
        try:
            raw = self._raw(texts, query)
            arr = np.asarray(raw, dtype=np.float32)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"The embedder {self.name!r} failed on {len(texts)} texts: "
                                 f"{type(exc).__name__}: {exc}") from exc
        if arr.ndim != 2 or arr.shape[0] != len(texts) or arr.shape[1] < 2:
            raise EmbeddingError(f"The embedder {self.name!r} must return one vector per text "
                                 f"(shape ({len(texts)}, d)). Got shape {arr.shape} instead.")
        if not np.isfinite(arr).all():
            raise EmbeddingError(f"The embedder {self.name!r} returned NaN or infinite values.")
        if self._dim is not None and arr.shape[1] != self._dim:
            raise EmbeddingError(f"The embedder {self.name!r} changed dimension from "
                                 f"{self._dim} to {arr.shape[1]}.")
        self._dim = int(arr.shape[1])
        return l2_normalize(arr)


@contextmanager
def _root_logging_kept() -> Iterator[None]:
    """Undo what an import does to the root logger: ``wordllama`` calls
    ``logging.basicConfig(level=INFO)`` when imported, which would switch on INFO logs (every
    HTTP request of a Chroma client, for one) in the application that uses this library."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


_WORDLLAMA_LOCK = threading.Lock()
_WORDLLAMA_MODELS: dict[int, Any] = {}
#: Per dimension: the model's tokenizer without padding, and its token table (float32), or
#: None when the model does not have the parts :func:`_mean_of_tokens` needs.
_WORDLLAMA_PARTS: dict[int, tuple[Any, NDArray[np.float32]] | None] = {}
#: Texts per tokenizer call, and token rows gathered at once (16 MiB at 256-d).
_ENCODE_CHUNK = 4096
_GATHER_TOKENS = 1 << 14


def _wordllama_parts(model: Any) -> tuple[Any, NDArray[np.float32]] | None:
    """``(tokenizer without padding, token table)`` of a ``WordLlamaInference``, or None."""
    table = getattr(model, "embedding", None)
    tokenizer: Any = getattr(model, "tokenizer", None)
    if (getattr(model, "binary", True) or not isinstance(table, np.ndarray)
            or table.ndim != 2 or table.dtype != np.float32
            or not callable(getattr(tokenizer, "encode_batch", None))):
        return None
    try:
        tokenizer = type(tokenizer).from_str(tokenizer.to_str())
        tokenizer.no_padding()
        tokenizer.no_truncation()
    except Exception:  # noqa: BLE001  # pragma: no cover - another tokenizer type: use embed()
        return None
    return tokenizer, table


def _mean_of_tokens(table: NDArray[np.float32], ids: Sequence[Sequence[int]],
                    out: NDArray[np.float32]) -> None:
    """``out[i]`` = the mean of ``table``'s rows ``ids[i]`` (zero when empty), the floats
    ``WordLlamaInference.embed(norm=False)`` computes.

    wordllama pads each batch of 64 texts to its longest and sums ``(64, L, d)`` token rows
    under a mask; here the texts are grouped by token count, so that each group is one
    ``(k, count, d)`` gather summed over its middle axis, in the same order (adding a padded
    zero changes no float), about 3x faster for a batch of sentences. One text (a query) is
    one gather, without the grouping (which would cost it about 60 us).
    """
    if len(ids) == 1:
        tokens = np.clip(np.asarray(ids[0], np.intp), 0, len(table) - 1)
        out[0] = (table[tokens][None].sum(axis=1)[0] / np.float32(len(tokens)) if len(tokens)
                  else 0.0)
        return
    n = np.fromiter(map(len, ids), np.intp, len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), np.intp, int(n.sum()))
    np.clip(flat, 0, len(table) - 1, out=flat)  # as wordllama does
    start = np.cumsum(n) - n
    order = np.argsort(n, kind="stable")
    for group in np.split(order, np.flatnonzero(np.diff(n[order])) + 1):
        count = int(n[group[0]])
        if count == 0:
            out[group] = 0.0
            continue
        step = max(1, _GATHER_TOKENS // count)
        for lo in range(0, len(group), step):
            rows = group[lo:lo + step]
            tokens = flat[(start[rows, None] + np.arange(count)).ravel()]
            out[rows] = (table[tokens].reshape(len(rows), count, -1).sum(axis=1)
                         / np.float32(count))


class WordLlamaEmbedder(_BaseEmbedder):
    """The bundled offline default: ``wordllama`` (256-d, weights inside the PyPI package).

    The model loads once per process, on first use, from the installed package's folder with
    ``disable_download=True``.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"wordllama-l2-supercat-{dim}"

    def _model(self) -> Any:
        with _WORDLLAMA_LOCK:
            model = _WORDLLAMA_MODELS.get(self.dim)
            if model is None:
                try:
                    with _root_logging_kept():  # wordllama calls logging.basicConfig(INFO)
                        import wordllama
                        from wordllama import WordLlama

                    model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent,
                                           disable_download=True, dim=self.dim)
                except Exception as exc:
                    raise EmbeddingError(
                        "The bundled wordllama model could not be loaded from the installed "
                        f"package ({type(exc).__name__}: {exc}); reinstall 'wordllama' or pass "
                        "your own embedder=...") from exc
                _WORDLLAMA_MODELS[self.dim] = model
            return model

    def _raw(self, texts: list[str], query: bool) -> Any:
        model = self._model()
        with _WORDLLAMA_LOCK:
            if self.dim not in _WORDLLAMA_PARTS:
                _WORDLLAMA_PARTS[self.dim] = _wordllama_parts(model)
            parts = _WORDLLAMA_PARTS[self.dim]
        if parts is None:  # pragma: no cover - a wordllama without the parts used below
            return model.embed(texts, norm=False)
        tokenizer, table = parts
        out = np.empty((len(texts), table.shape[1]), np.float32)
        for lo in range(0, len(texts), _ENCODE_CHUNK):
            chunk = tokenizer.encode_batch(texts[lo:lo + _ENCODE_CHUNK], add_special_tokens=False)
            _mean_of_tokens(table, [enc.ids for enc in chunk], out[lo:lo + len(chunk)])
        return out


class LangChainEmbedder(_BaseEmbedder):
    """Adapter for a LangChain ``Embeddings`` (``embed_documents`` / ``embed_query``)."""

    def __init__(self, embeddings: Any, name: str | None = None) -> None:
        self.embeddings = embeddings
        model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        cls = type(embeddings)
        self.name = name or f"langchain:{cls.__module__}.{cls.__qualname__}:{model or ''}"

    def _raw(self, texts: list[str], query: bool) -> Any:
        if query and len(texts) == 1 and hasattr(self.embeddings, "embed_query"):
            return [self.embeddings.embed_query(texts[0])]
        return self.embeddings.embed_documents(texts)


class LlamaIndexEmbedder(_BaseEmbedder):
    """Adapter for a LlamaIndex ``BaseEmbedding`` (``get_text_embedding_batch``)."""

    def __init__(self, embed_model: Any, name: str | None = None) -> None:
        self.embed_model = embed_model
        model = getattr(embed_model, "model_name", None)
        cls = type(embed_model)
        self.name = name or f"llamaindex:{cls.__module__}.{cls.__qualname__}:{model or ''}"

    def _raw(self, texts: list[str], query: bool) -> Any:
        if query and len(texts) == 1 and hasattr(self.embed_model, "get_query_embedding"):
            return [self.embed_model.get_query_embedding(texts[0])]
        return self.embed_model.get_text_embedding_batch(texts)


class CallableEmbedder(_BaseEmbedder):
    """Adapter for any callable ``texts -> vectors``."""

    def __init__(self, fn: Callable[[list[str]], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or f"callable:{getattr(fn, '__qualname__', type(fn).__qualname__)}"

    def _raw(self, texts: list[str], query: bool) -> Any:
        return self.fn(texts)


def as_embedder(obj: Any = None) -> Embedder:
    """Turn ``obj`` into an :class:`Embedder`.

    ``None`` gives the bundled default; an :class:`Embedder` is returned as it is; a LangChain
    ``Embeddings``, a LlamaIndex embedding or a callable is wrapped.
    """
    if obj is None:
        return WordLlamaEmbedder()
    if isinstance(obj, _BaseEmbedder):
        return obj
    if hasattr(obj, "embed_documents"):
        return LangChainEmbedder(obj)
    if hasattr(obj, "get_text_embedding_batch"):
        return LlamaIndexEmbedder(obj)
    if isinstance(obj, Embedder):
        return obj
    if callable(obj):
        return CallableEmbedder(obj)
    raise InvalidInputError(
        "The 'embedder' parameter of ScrubJayMemory must be None (the bundled model), a LangChain "
        "Embeddings, a LlamaIndex embedding, an Embedder or a callable texts -> vectors. "
        f"Got {type(obj).__name__} instead.")


def checked_query_vector(vector: Any, dim: int, owner: str) -> NDArray[np.float32]:
    """A caller's query embedding as the unit ``(dim,)`` float32 vector a search compares.

    Raises :class:`InvalidInputError` unless ``vector`` is ``dim`` finite numbers, not all 0.
    """
    try:
        arr = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError):
        arr = np.zeros(0)
    if arr.shape != (dim,) or not np.all(np.isfinite(arr)) or not np.any(arr):
        raise InvalidInputError(f"The 'query_vector' parameter of {owner} must be {dim} finite "
                                f"numbers, not all 0. Got shape {arr.shape} instead.")
    return l2_normalize(arr)
