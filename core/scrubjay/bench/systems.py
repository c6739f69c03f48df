"""Retrieval systems under benchmark, behind one small interface.

Every system takes memories ``(id, text, context, created_at_s)`` with :meth:`System.index`,
answers a query at a time with :meth:`System.answer` (a ranked list of
:class:`Answer` ``(id, text, judged_valid)``), and learns new information with
:meth:`System.update`. Only ScrubJay-MEM does something other than "add it as one more memory"
in ``update``: it runs Retroactive Contextual Integration (RCI, paper §3.5).

Systems
-------
``B0-random``
    A seeded random ranking; a fair-coin validity judgement (as ``tgt_scoring.random_results``).
``B2-bm25``
    BM25 (``bm25s``, English stopwords) over the memory texts.
``B3-dense``
    Cosine similarity of the query to the memory texts, with the same embedder as ScrubJay-MEM.
``B4-rrf``
    Reciprocal rank fusion of B2 and B3: ``sum_r 1 / (RRF_K + rank_r)``, ranks from 1.
``bm25-dense-rrf``
    Reciprocal rank fusion (``RRF_K`` = 60, equal weights) of the store's lexical channel
    (:class:`scrubjay.lexical.LexicalIndex`: its tokeniser, tantivy's BM25) and dense cosine:
    the obvious fusion, beside which ``hybrid``'s gain is visible.
``hybrid``
    The lexical channel and the dense what channel as the memory fuses them
    (:func:`scrubjay.fusion.fuse`): candidates are the dense top ``LEXICAL_CANDIDATES`` and the
    lexical top ``LEXICAL_CANDIDATES``; ``r = (1 - lambda) cos + lambda min(1, BM25 / sum idf)``.
    No decay or RCI: it shows what the lexical channel adds to ScrubJay-MEM's relevance.
``B5-dense-recency``
    ``cos * exp(-age / T)`` with one global ``T`` (``RECENCY_T_S``); stale when
    ``exp(-age / T) < stale_ratio`` (ScrubJay-MEM's 0.5).
``LC-time-weighted``
    LangChain's ``TimeWeightedVectorStoreRetriever`` over ``InMemoryVectorStore``.
``LI-time-weighted``
    LlamaIndex's ``TimeWeightedPostprocessor`` over the dense top ``LI_CANDIDATES``.
``B1-llm-only``, ``B6-rag``, ``B7-rag-temporal``
    Need a chat model (``make_system(..., llm=...)``); defined in ``llm_systems``.
``SJ-full`` and its ablations ``SJ-no-decay``, ``SJ-no-graph``, ``SJ-no-rci``, ``SJ-uniform-w``
    :class:`~scrubjay.ScrubJayMemory` with an in-memory store, a :class:`FrozenClock` set to
    each query time, and ``judged_valid = not hit.stale``.

Systems with no notion of time (B2-B4) judge every memory valid.

The prospective buffer (paper §3.6) is not exercised: none of the three benchmarks gives the
system a task description before its queries, so ``prepare()`` is never called and a
"no buffer" ablation would be the full system by construction.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from scrubjay.config import (
    DAY_S,
    ClassifierConfig,
    DecayConfig,
    GraphConfig,
    ScrubJayConfig,
    WeightConfig,
)
from scrubjay.embedding import Embedder, as_embedder

__all__ = [
    "DEFAULT_SYSTEMS",
    "LC_DECAY_RATE",
    "LI_CANDIDATES",
    "LI_TIME_DECAY",
    "LLM_SYSTEM_NAMES",
    "RECENCY_T_S",
    "REFRESH_ON_ACCESS",
    "RRF_K",
    "SCRUBJAY_VARIANTS",
    "SYSTEM_NAMES",
    "Answer",
    "BM25System",
    "CachedEmbedder",
    "DenseRecencySystem",
    "DenseSystem",
    "HybridSystem",
    "LangChainTimeWeightedSystem",
    "LexicalRRFSystem",
    "LlamaIndexTimeWeightedSystem",
    "MemoryItem",
    "RRFSystem",
    "RandomSystem",
    "ScrubJaySystem",
    "System",
    "close_system",
    "make_system",
    "recency_factor",
    "rrf_scores",
    "scrubjay_config",
    "settings",
]

logger = logging.getLogger(__name__)

RRF_K = 60
"""Reciprocal rank fusion constant (Cormack et al. 2009, the usual 60)."""

RECENCY_T_S = 30 * DAY_S
"""B5's one global recency time constant (chosen a priori: one month, a generic 'recent'
horizon; not tuned on any benchmark). Stale when ``exp(-age / T) < 0.5``, i.e. after
``T ln 2`` = 20.8 days."""

LC_DECAY_RATE = 0.01
"""LangChain's ``decay_rate``: score ``(1 - decay_rate) ** hours`` (its own default, 0.01,
an hourly factor of 0.99 and a half-life of 69 hours)."""

LI_TIME_DECAY = 0.01
"""LlamaIndex's ``time_decay``: score ``(1 - time_decay) ** hours``. Its default (0.99) gives
``0.01 ** hours``, which zeroes every memory older than an hour; 0.01 makes it the same curve
as LangChain's default."""

REFRESH_ON_ACCESS = False
"""Whether the LangChain / LlamaIndex time-weighted systems refresh a memory's last-access time
when they return it (both libraries do by default). Off in the benchmarks (chosen): with it on,
a ranking depends on earlier queries and on k (asking for a full ranking refreshes every
memory). The TGT run with it on is reported in docs/benchmarks.md."""

LI_CANDIDATES = 100
"""Dense candidates handed to LlamaIndex's postprocessor (as LangChain's ``search_kwargs k``)."""

STALE_RATIO = DecayConfig().stale_ratio
"""The validity threshold the time-aware baselines share with ScrubJay-MEM (0.5)."""


class MemoryItem(NamedTuple):
    """One memory given to :meth:`System.index`."""

    id: str
    text: str
    context: str
    created_at_s: float


class Answer(NamedTuple):
    """One ranked answer: the memory id, its text, the system's validity judgement, and the
    ranking score when the system exposes one (NaN otherwise; used to detect exact ties)."""

    id: str
    text: str
    judged_valid: bool
    score: float = float("nan")


class System(Protocol):
    """What the benchmark runners need from a system."""

    name: str

    def index(self, memories: Iterable[MemoryItem | tuple[str, str, str, float]]) -> None:
        """Add memories (id, text, context, created_at_s)."""

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        """The ``k`` best memories for ``query`` asked at ``at_s``, best first."""

    def update(self, text: str, context: str, at_s: float, *, memory_id: str) -> str:
        """Learn new information; returns the id it is stored under."""


# ---------------------------------------------------------------------------------------------
# Pure pieces
# ---------------------------------------------------------------------------------------------


def rrf_scores(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion: ``score(d) = sum_r 1 / (k + rank_r(d))``, ranks from 1.

    >>> s = rrf_scores([["a", "b"], ["b", "c"]], k=60)
    >>> round(s["b"], 6) == round(1 / 62 + 1 / 61, 6), round(s["a"], 6) == round(1 / 61, 6)
    (True, True)
    """
    out: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            out[doc] = out.get(doc, 0.0) + 1.0 / (k + rank)
    return out


def recency_factor(age_s: NDArray[np.float64] | float, t_s: float = RECENCY_T_S) -> Any:
    """B5's recency factor ``exp(-max(0, age) / T)``.

    >>> round(float(recency_factor(30 * 86400.0, 30 * 86400.0)), 4)
    0.3679
    """
    return np.exp(-np.maximum(0.0, age_s) / t_s)


def _items(memories: Iterable[MemoryItem | tuple[str, str, str, float]]) -> list[MemoryItem]:
    return [m if isinstance(m, MemoryItem) else MemoryItem(*m) for m in memories]


class CachedEmbedder:
    """An :class:`Embedder` that remembers the vectors of texts it has seen (same outputs)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._cache: dict[tuple[str, bool], NDArray[np.float32]] = {}

    def embed(self, texts: Sequence[str], *, query: bool = False) -> NDArray[np.float32]:
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if (t, query) not in self._cache))
        if missing:
            rows = self.inner.embed(missing, query=query)
            for t, row in zip(missing, rows, strict=True):
                self._cache[(t, query)] = row
        if not texts:
            return self.inner.embed(texts, query=query)
        return np.stack([self._cache[(t, query)] for t in texts]).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------


class _Base:
    name = "base"
    time_aware = False

    def __init__(self) -> None:
        self.items: list[MemoryItem] = []

    def index(self, memories: Iterable[MemoryItem | tuple[str, str, str, float]]) -> None:
        self.items.extend(_items(memories))
        self._dirty = True

    def update(self, text: str, context: str, at_s: float, *, memory_id: str) -> str:
        self.index([MemoryItem(memory_id, text, context, float(at_s))])
        return memory_id

    def _top(self, scores: NDArray[np.float64], k: int) -> list[int]:
        # Exact ties go to the earlier-indexed memory, as a stable sort does (chosen; the
        # FactConsolidation report counts such ties, since there they favour the older fact).
        order = np.lexsort((np.arange(len(scores)), -scores))
        return [int(i) for i in order[:k]]


class RandomSystem(_Base):
    """B0: a seeded random ranking and a fair-coin validity judgement."""

    name = "B0-random"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.rng = np.random.default_rng(seed)

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        if not self.items:
            return []
        order = self.rng.permutation(len(self.items))[:k]
        return [Answer(self.items[i].id, self.items[i].text, bool(self.rng.random() < 0.5))
                for i in order]


class BM25System(_Base):
    """B2: BM25 over the memory texts (``bm25s``, English stopwords, default k1/b)."""

    name = "B2-bm25"

    def _ensure(self) -> None:
        if getattr(self, "_dirty", True):
            import bm25s

            tokens = bm25s.tokenize([m.text for m in self.items], stopwords="en",
                                    show_progress=False)
            self._bm25 = bm25s.BM25()
            self._bm25.index(tokens, show_progress=False)
            self._dirty = False

    def scores(self, query: str) -> NDArray[np.float64]:
        import bm25s

        self._ensure()
        q = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        return np.asarray(self._bm25.get_scores(q), dtype=np.float64)

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        if not self.items:
            return []
        sc = self.scores(query)
        return [Answer(self.items[i].id, self.items[i].text, True, float(sc[i]))
                for i in self._top(sc, k)]


class DenseSystem(_Base):
    """B3: cosine of query and memory text vectors (the embedder ScrubJay-MEM uses)."""

    name = "B3-dense"

    def __init__(self, embedder: Embedder) -> None:
        super().__init__()
        self.embedder = embedder

    def _ensure(self) -> None:
        if getattr(self, "_dirty", True):
            self._vecs = self.embedder.embed([m.text for m in self.items])
            self._t = np.array([m.created_at_s for m in self.items], dtype=np.float64)
            self._dirty = False

    def cosines(self, query: str) -> NDArray[np.float64]:
        self._ensure()
        e = self.embedder.embed([query], query=True)[0]
        return np.asarray(self._vecs @ e, dtype=np.float64)

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        if not self.items:
            return []
        cos = self.cosines(query)
        return [Answer(self.items[i].id, self.items[i].text, True, float(cos[i]))
                for i in self._top(cos, k)]


class RRFSystem(_Base):
    """B4: BM25 + dense, fused by reciprocal rank (``RRF_K`` = 60) over full rankings."""

    name = "B4-rrf"

    def __init__(self, embedder: Embedder) -> None:
        super().__init__()
        self.bm25 = BM25System()
        self.dense = DenseSystem(embedder)

    def index(self, memories: Iterable[MemoryItem | tuple[str, str, str, float]]) -> None:
        items = _items(memories)
        super().index(items)
        self.bm25.index(items)
        self.dense.index(items)

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        if not self.items:
            return []
        ids = [m.id for m in self.items]
        rank_b = [ids[i] for i in self.bm25._top(self.bm25.scores(query), len(ids))]
        rank_d = [ids[i] for i in self.dense._top(self.dense.cosines(query), len(ids))]
        fused = rrf_scores([rank_b, rank_d])
        scores = np.array([fused[i] for i in ids])
        return [Answer(ids[i], self.items[i].text, True, float(scores[i]))
                for i in self._top(scores, k)]


class _LexicalDense(_Base):
    """Dense cosines and the store's lexical channel (an in-memory :class:`LexicalIndex`)."""

    def __init__(self, embedder: Embedder) -> None:
        super().__init__()
        self.dense = DenseSystem(embedder)
        self._lexical: Any = None

    def index(self, memories: Iterable[MemoryItem | tuple[str, str, str, float]]) -> None:
        from scrubjay.lexical import LexicalIndex

        items = _items(memories)
        super().index(items)
        self.dense.index(items)
        if self._lexical is None:
            self._lexical = LexicalIndex.in_memory()
            self._pos: dict[str, int] = {}
        for m in items:
            self._pos.setdefault(m.id, len(self._pos))
        self._lexical.add([m.id for m in items], [m.text for m in items])

    def channels(self, query: str) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                            NDArray[np.int64]]:
        """``(cosines, BM25 scores, lexical ranks)`` per memory (BM25 0 and rank 0 past the
        lexical top ``LEXICAL_CANDIDATES``)."""
        from scrubjay.fusion import LEXICAL_CANDIDATES

        cos = self.dense.cosines(query)
        bm = np.zeros(len(self.items))
        rank = np.zeros(len(self.items), dtype=np.int64)
        ids, scores = self._lexical.query(query, LEXICAL_CANDIDATES)
        for r, (i, sc) in enumerate(zip(ids, scores, strict=True), start=1):
            bm[self._pos[i]] = sc
            rank[self._pos[i]] = r
        return cos, bm, rank

    def close(self) -> None:
        if self._lexical is not None:
            self._lexical.close()


class LexicalRRFSystem(_LexicalDense):
    """``bm25-dense-rrf``: RRF (k = 60, equal weights) of the lexical channel and dense."""

    name = "bm25-dense-rrf"

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        from scrubjay.fusion import weighted_rrf

        if not self.items:
            return []
        cos, _, rank_l = self.channels(query)
        order = self._top(cos, len(cos))
        rank_d = np.empty(len(cos), dtype=np.int64)
        rank_d[order] = np.arange(1, len(cos) + 1)
        scores = weighted_rrf(rank_l, rank_d, k=RRF_K, lexical_weight=0.5)
        return [Answer(self.items[i].id, self.items[i].text, True, float(scores[i]))
                for i in self._top(scores, k)]


class HybridSystem(_LexicalDense):
    """``hybrid``: :func:`scrubjay.fusion.fuse` of dense and lexical over their candidates."""

    name = "hybrid"

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        from scrubjay.fusion import LEXICAL_CANDIDATES, fuse, lexical_score_idf

        if not self.items:
            return []
        cos, bm, rank_l = self.channels(query)
        candidate = rank_l > 0
        candidate[self._top(cos, LEXICAL_CANDIDATES)] = True
        ell = lexical_score_idf(bm, self._lexical.idf_sum(query))
        scores = np.where(candidate, fuse(cos, ell), -np.inf)
        # the memories outside both candidate lists follow, by their fused score
        rest = ~candidate
        scores[rest] = fuse(cos[rest], np.zeros(int(rest.sum()))) - 4.0
        return [Answer(self.items[i].id, self.items[i].text, True, float(scores[i]))
                for i in self._top(scores, k)]


class DenseRecencySystem(DenseSystem):
    """B5: ``cos * exp(-age / T)``, one global T; stale when the recency factor < 0.5."""

    name = "B5-dense-recency"
    time_aware = True

    def __init__(self, embedder: Embedder, t_s: float = RECENCY_T_S,
                 stale_ratio: float = STALE_RATIO) -> None:
        super().__init__(embedder)
        self.t_s = t_s
        self.stale_ratio = stale_ratio

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        if not self.items:
            return []
        cos = self.cosines(query)
        rec = recency_factor(at_s - self._t, self.t_s)
        score = cos * rec
        return [Answer(self.items[i].id, self.items[i].text, bool(rec[i] >= self.stale_ratio),
                       float(score[i])) for i in self._top(score, k)]


def _langchain_embeddings(embedder: Embedder) -> Any:
    from langchain_core.embeddings import Embeddings

    class _Wrapped(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in embedder.embed(texts)]

        def embed_query(self, text: str) -> list[float]:
            return [float(x) for x in embedder.embed([text], query=True)[0]]

    return _Wrapped()


class LangChainTimeWeightedSystem(_Base):
    """LangChain's ``TimeWeightedVectorStoreRetriever`` over ``InMemoryVectorStore``.

    Score = ``relevance + (1 - decay_rate) ** hours_since_last_access`` (its formula), with
    ``decay_rate = LC_DECAY_RATE``. The retriever reads "now" from ``datetime.now()``; each
    query runs inside ``langchain_core.utils.mock_now(query time)`` (LangChain's own helper, the
    one its documentation uses), and ``last_accessed_at`` is the creation time. The retriever
    would refresh ``last_accessed_at`` of what it returns; with ``refresh_on_access=False`` (the
    benchmark setting, ``REFRESH_ON_ACCESS``) that refresh is undone after each call, so a
    ranking depends neither on earlier queries nor on how many results were asked for. Stale
    when the time factor ``(1 - decay_rate) ** hours since creation`` < 0.5.
    """

    name = "LC-time-weighted"
    time_aware = True

    def __init__(self, embedder: Embedder, decay_rate: float = LC_DECAY_RATE,
                 refresh_on_access: bool = REFRESH_ON_ACCESS) -> None:
        super().__init__()
        self.refresh_on_access = refresh_on_access
        from langchain_classic.retrievers import TimeWeightedVectorStoreRetriever
        from langchain_core.vectorstores import InMemoryVectorStore

        class _CosineStore(InMemoryVectorStore):
            # InMemoryVectorStore scores by cosine but names no relevance function; the
            # retriever needs one. Relevance = that cosine, unchanged.
            def _select_relevance_score_fn(self) -> Callable[[float], float]:
                return lambda score: float(score)

        self.decay_rate = decay_rate
        store = _CosineStore(embedding=_langchain_embeddings(embedder))
        self.retriever = TimeWeightedVectorStoreRetriever(
            vectorstore=store, decay_rate=decay_rate, k=1, search_kwargs={"k": LI_CANDIDATES})

    def index(self, memories: Iterable[MemoryItem | tuple[str, str, str, float]]) -> None:
        from langchain_core.documents import Document

        items = _items(memories)
        super().index(items)
        docs = [Document(page_content=m.text,
                         metadata={"sj_id": m.id,
                                   "last_accessed_at": _dt.datetime.fromtimestamp(m.created_at_s),
                                   "created_at": _dt.datetime.fromtimestamp(m.created_at_s)})
                for m in items]
        if docs:
            self.retriever.add_documents(docs)

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        from langchain_core.utils import mock_now

        if not self.items:
            return []
        now = _dt.datetime.fromtimestamp(at_s)
        self.retriever.k = k
        with mock_now(now), warnings.catch_warnings():
            # The retriever warns when a relevance is outside [0, 1]; cosines can be < 0.
            warnings.simplefilter("ignore", UserWarning)
            docs = self.retriever.invoke(query)
        if not self.refresh_on_access:
            for d in docs:  # the memory_stream documents themselves
                d.metadata["last_accessed_at"] = d.metadata["created_at"]
        out = []
        for d in docs:
            created = d.metadata["created_at"]
            hours = (now - created).total_seconds() / 3600
            factor = (1.0 - self.decay_rate) ** max(0.0, hours)
            out.append(Answer(d.metadata["sj_id"], d.page_content, bool(factor >= STALE_RATIO)))
        return out


class LlamaIndexTimeWeightedSystem(DenseSystem):
    """LlamaIndex's ``TimeWeightedPostprocessor`` over the dense top ``LI_CANDIDATES``.

    Score = ``cos + (1 - time_decay) ** hours`` (its formula), ``time_decay = LI_TIME_DECAY``,
    ``now`` = the query time (its parameter), ``__last_accessed__`` = the creation time, and
    ``time_access_refresh = REFRESH_ON_ACCESS`` (False: see the LangChain system). Stale when the
    time factor < 0.5, measured from the creation time.
    """

    name = "LI-time-weighted"
    time_aware = True

    def __init__(self, embedder: Embedder, time_decay: float = LI_TIME_DECAY,
                 refresh_on_access: bool = REFRESH_ON_ACCESS) -> None:
        super().__init__(embedder)
        self.time_decay = time_decay
        self.refresh_on_access = refresh_on_access
        self._nodes: dict[str, Any] = {}

    def index(self, memories: Iterable[MemoryItem | tuple[str, str, str, float]]) -> None:
        from llama_index.core.schema import TextNode

        items = _items(memories)
        super().index(items)
        for m in items:
            self._nodes[m.id] = TextNode(text=m.text, id_=m.id, metadata={
                "__last_accessed__": float(m.created_at_s)})

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        from llama_index.core.postprocessor import TimeWeightedPostprocessor
        from llama_index.core.schema import NodeWithScore

        if not self.items:
            return []
        cos = self.cosines(query)
        cand = self._top(cos, LI_CANDIDATES)
        nodes = [NodeWithScore(node=self._nodes[self.items[i].id], score=float(cos[i]))
                 for i in cand]
        post = TimeWeightedPostprocessor(time_decay=self.time_decay, now=float(at_s), top_k=k,
                                         time_access_refresh=self.refresh_on_access)
        by_id = {m.id: m for m in self.items}
        out = []
        for n in post.postprocess_nodes(nodes):
            m = by_id[n.node.node_id]
            hours = max(0.0, at_s - m.created_at_s) / 3600
            factor = (1.0 - self.time_decay) ** hours
            out.append(Answer(m.id, m.text, bool(factor >= STALE_RATIO), float(n.score or 0.0)))
        return out


# ---------------------------------------------------------------------------------------------
# ScrubJay-MEM
# ---------------------------------------------------------------------------------------------

SCRUBJAY_VARIANTS = ("SJ-full", "SJ-no-decay", "SJ-no-graph", "SJ-no-rci", "SJ-uniform-w",
                     "SJ-keyword", "SJ-paper")
"""ScrubJay-MEM and its config-only ablations."""


def scrubjay_config(variant: str = "SJ-full") -> ScrubJayConfig:
    """The one ScrubJay-MEM configuration of every benchmark, or an ablation of it.

    - ``SJ-full``, ``SJ-no-rci``: the default :class:`ScrubJayConfig` (no-rci skips ``update``).
    - ``SJ-no-decay``: no keyword rule, every memory gets ``pi = pi_min`` (1e-3) and
      ``tau = tau_max`` (5 years), no context perturbation: ``U/V > 0.99`` for a year.
    - ``SJ-no-graph``: ``GraphConfig(max_neighbors=0)``.
    - ``SJ-uniform-w``: equal base logits, zero coefficients, no keyword biases: the four
      weights are 1/4 each.
    """
    base = ScrubJayConfig()
    if variant in ("SJ-full", "SJ-no-rci"):
        return base
    if variant == "SJ-no-decay":
        c = base.classifier
        return replace(base, classifier=ClassifierConfig(
            offline="keyword", keyword_rules=(), default_pi=c.pi_min, default_tau_s=c.tau_max_s,
            context_perturbation_max=0.0, tau_min_s=c.tau_min_s, tau_max_s=c.tau_max_s,
            pi_min=c.pi_min))
    if variant == "SJ-keyword":
        return replace(base, classifier=replace(base.classifier, offline="keyword"))
    if variant == "SJ-paper":
        return ScrubJayConfig.paper()
    if variant == "SJ-no-graph":
        return replace(base, graph=GraphConfig(max_neighbors=0))
    if variant == "SJ-uniform-w":
        return replace(base, weights=WeightConfig(
            base_logits=(1.0, 1.0, 1.0, 1.0), what_norm_coef=0.0, where_norm_coef=0.0,
            when_log_coef=0.0, keyword_biases=()))
    raise ValueError(f"The 'variant' parameter of scrubjay_config must be one of "
                     f"{SCRUBJAY_VARIANTS}. Got {variant!r} instead.")


class ScrubJaySystem:
    """ScrubJay-MEM (in-memory store, FrozenClock) behind the benchmark interface.

    ``update`` runs RCI (``integrate(..., store=True)``) unless ``rci=False``, in which case it
    is a plain ``add``. ``judged_valid = not hit.stale``.
    """

    time_aware = True

    def __init__(self, embedder: Embedder, variant: str = "SJ-full") -> None:
        from scrubjay import ScrubJayMemory
        from scrubjay.testing import FrozenClock

        self.name = variant
        self.config = scrubjay_config(variant)
        self.rci = variant != "SJ-no-rci"
        self.clock = FrozenClock(0.0)
        self.mem = ScrubJayMemory(embedder=embedder, config=self.config, clock=self.clock)
        self.id_map: dict[str, str] = {}

    def index(self, memories: Iterable[MemoryItem | tuple[str, str, str, float]]) -> None:
        items = _items(memories)
        if not items:
            return
        self.clock.set(max(self.clock(), max(m.created_at_s for m in items)))
        self.mem.add_many([{"id": m.id, "text": m.text, "context": m.context,
                            "at": m.created_at_s} for m in items])
        self.id_map.update({m.id: m.id for m in items})

    def update(self, text: str, context: str, at_s: float, *, memory_id: str) -> str:
        """RCI on ``text``; it is stored as a memory of its own, under ``memory_id``."""
        if not self.rci:
            self.index([MemoryItem(memory_id, text, context, float(at_s))])
            return memory_id
        self.clock.set(max(self.clock(), float(at_s)))
        report = self.mem.integrate(text, context=context, at=float(at_s), store=False)
        self.index([MemoryItem(memory_id, text, context, float(at_s))])
        self.last_report = report
        return memory_id

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        self.clock.set(max(self.clock(), float(at_s)))
        hits = self.mem.search(query, k=k, at=float(at_s))
        return [Answer(h.id, h.text, not h.stale, h.score) for h in hits]

    def close(self) -> None:
        self.mem.close()


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

def _scrubjay_system(e: Embedder, seed: int, *, variant: str) -> Any:
    return ScrubJaySystem(e, variant)


_FACTORIES: dict[str, Callable[[Embedder, int], Any]] = {
    "B0-random": lambda e, seed: RandomSystem(seed),
    "B2-bm25": lambda e, seed: BM25System(),
    "B3-dense": lambda e, seed: DenseSystem(e),
    "B4-rrf": lambda e, seed: RRFSystem(e),
    "B5-dense-recency": lambda e, seed: DenseRecencySystem(e),
    "bm25-dense-rrf": lambda e, seed: LexicalRRFSystem(e),
    "hybrid": lambda e, seed: HybridSystem(e),
    "LC-time-weighted": lambda e, seed: LangChainTimeWeightedSystem(e),
    "LI-time-weighted": lambda e, seed: LlamaIndexTimeWeightedSystem(e),
    **{v: functools.partial(_scrubjay_system, variant=v) for v in SCRUBJAY_VARIANTS},
}

SYSTEM_NAMES = tuple(_FACTORIES)
"""Every system name :func:`make_system` accepts without a chat model."""

LLM_SYSTEM_NAMES = ("B1-llm-only", "B6-rag", "B7-rag-temporal")
"""Systems that need a chat model (``make_system(..., llm=...)``; see ``llm_systems``)."""

DEFAULT_SYSTEMS = SYSTEM_NAMES
"""Systems a runner uses unless told otherwise."""


def make_system(name: str, embedder: Any = None, *, seed: int = 0, llm: Any = None) -> Any:
    """A fresh system called ``name`` (see :data:`SYSTEM_NAMES`, and with a chat model ``llm``
    :data:`LLM_SYSTEM_NAMES`) on ``embedder``."""
    if name not in _FACTORIES and name not in LLM_SYSTEM_NAMES:
        raise ValueError(f"The 'name' parameter of make_system must be one of "
                         f"{SYSTEM_NAMES + LLM_SYSTEM_NAMES}. Got {name!r} instead.")
    emb = embedder if isinstance(embedder, CachedEmbedder) else as_embedder(embedder)
    if name in LLM_SYSTEM_NAMES:
        from scrubjay.bench.llm_systems import make_llm_system

        return make_llm_system(name, emb, llm)
    return _FACTORIES[name](emb, seed)


def close_system(system: Any) -> None:
    """Release a system's resources (the ScrubJay in-memory Chroma collections, the lexical
    indexes)."""
    close = getattr(system, "close", None)
    if close is not None:
        close()


def settings() -> dict[str, Any]:
    """Every benchmark-side setting, for the reports."""
    sj = ScrubJayConfig()
    return {
        "rrf_k": RRF_K,
        "b5_recency_T_days": RECENCY_T_S / DAY_S,
        "stale_ratio": STALE_RATIO,
        "langchain_decay_rate": LC_DECAY_RATE,
        "llamaindex_time_decay": LI_TIME_DECAY,
        "time_weighted_refresh_on_access": REFRESH_ON_ACCESS,
        "dense_candidates_for_time_weighted": LI_CANDIDATES,
        "scrubjay_config": "ScrubJayConfig() defaults (ablations: see scrubjay_config)",
        "scrubjay_stale_ratio": sj.decay.stale_ratio,
        "buffer": "not exercised (no task description is given before queries)",
        "no_rci_equals_full_when": "the benchmark has no update events (TGT, LoCoMo)",
    }
