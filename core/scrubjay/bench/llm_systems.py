"""Benchmark systems that need a chat model: B1 LLM-only, B6 RAG, B7 RAG-temporal (SPEC §10).

They run only when a chat model is given (``scrubjay bench tgt --llm ollama:MODEL``, or
``run_tgt(..., llm=...)``). Any LangChain chat model works, or a callable ``str -> str``; calls
go through :class:`scrubjay.llm.LLMClient` (timeout, failures as :class:`~scrubjay.errors.LLMError`).

``B1-llm-only``
    The model answers the query with no memory at all.
``B6-rag``
    Dense top-``RAG_K`` with the B3 embedder (:class:`~scrubjay.bench.systems.DenseSystem`);
    the model answers from the retrieved texts.
``B7-rag-temporal``
    As B6, each retrieved memory annotated with its age at query time (sessions, hours, days),
    and the prompt asks the model to say "stale" or "outdated" when a memory is likely no longer
    valid for its kind at that age.

The answer text is the model's reply; ``judged_valid = not tgt_scoring.judged_stale(reply)``.
A failed call (``LLMError``) answers with the empty text, judged valid, and is counted in
``llm_failures``. ``answer(query, at_s, k)`` returns the reply under the top retrieved memory's
id (B1: id ``""``), then the next ``k - 1`` retrieved memories as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrubjay.bench.systems import LLM_SYSTEM_NAMES, Answer, DenseSystem, MemoryItem, _Base
from scrubjay.bench.tgt import SESSION_LENGTH_S
from scrubjay.bench.tgt_scoring import judged_stale
from scrubjay.embedding import Embedder
from scrubjay.errors import LLMError
from scrubjay.llm import LLMClient

__all__ = [
    "B1_PROMPT",
    "B6_PROMPT",
    "B7_PROMPT",
    "LLM_MAX_REPLY_CHARS",
    "LLM_SYSTEM_NAMES",
    "LLM_TIMEOUT_S",
    "RAG_K",
    "LLMOnlySystem",
    "RAGSystem",
    "RAGTemporalSystem",
    "as_client",
    "format_age",
    "make_llm_system",
]


RAG_K = 5
"""Retrieved memories handed to the model by B6 and B7 (chosen a priori: a usual RAG k)."""

LLM_TIMEOUT_S = 120.0
"""Per-call timeout of the benchmark's chat-model calls (a local model can be slow)."""

LLM_MAX_REPLY_CHARS = 4000
"""Longer replies count as failures (an answer to a one-fact question is a sentence or two)."""

B1_PROMPT = (
    "Answer the question in one or two sentences. You have no notes about this person. If you "
    "cannot know the current answer, or what you know may no longer hold, say so with the word "
    '"stale" or "outdated".\nQuestion: {query}\nAnswer:'
)
B6_PROMPT = (
    "Answer the question in one or two sentences using only the memories below; quote the "
    "value you rely on.\nMemories:\n{memories}\nQuestion: {query}\nAnswer:"
)
B7_PROMPT = (
    "Answer the question in one or two sentences using only the memories below; quote the "
    "value you rely on. Each memory shows how long ago it was recorded, at the time of the "
    "question (one session is one day). Information perishes at different speeds: where "
    "someone is right now, today's plan, a mood or a live status last hours; project "
    "decisions, meeting outcomes, open bugs and short-term goals last days to weeks; "
    "preferences and working habits last months; occupation, home, education and family "
    "rarely change. If the memory you answer from is likely no longer valid for its kind at "
    'its age, still give its value but say that it is "stale" or "outdated"; otherwise do not '
    "use those words.\nMemories:\n{memories}\nQuestion: {query}\nAnswer:"
)


def as_client(llm: Any) -> LLMClient:
    """``llm`` as an :class:`LLMClient` with the benchmark's timeout (unchanged if it is one)."""
    if isinstance(llm, LLMClient):
        return llm
    # every call after a timeout probes the model: a benchmark wants each question asked
    return LLMClient(llm, timeout_s=LLM_TIMEOUT_S, max_reply_chars=LLM_MAX_REPLY_CHARS,
                     probe_interval_s=0.0)


def format_age(age_s: float) -> str:
    """A memory's age at query time in sessions, hours and days.

    >>> format_age(36 * 3600.0)
    'recorded 1.5 sessions ago (36 hours, 1.5 days)'
    """
    age = max(0.0, float(age_s))
    return (f"recorded {age / SESSION_LENGTH_S:.1f} sessions ago ({age / 3600:.0f} hours, "
            f"{age / 86_400:.1f} days)")


class _LLMMixin:
    client: LLMClient
    llm_failures: int

    def _ask(self, prompt: str) -> str:
        self.prompts.append(prompt)
        try:
            return self.client.complete(prompt).strip()
        except LLMError:
            self.llm_failures += 1
            return ""

    def _init_llm(self, llm: Any) -> None:
        self.client = as_client(llm)
        self.llm_failures = 0
        self.prompts: list[str] = []


class LLMOnlySystem(_Base, _LLMMixin):
    """B1: the chat model answers with no memory; memories are indexed and ignored."""

    name = "B1-llm-only"
    time_aware = False

    def __init__(self, llm: Any) -> None:
        super().__init__()
        self._init_llm(llm)

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        reply = self._ask(B1_PROMPT.format(query=query))
        return [Answer("", reply, not judged_stale(reply))]


class RAGSystem(_LLMMixin):
    """B6: dense top-``RAG_K`` (the B3 embedder), then the chat model answers from them."""

    name = "B6-rag"
    time_aware = False
    prompt = B6_PROMPT

    def __init__(self, embedder: Embedder, llm: Any, rag_k: int = RAG_K) -> None:
        self.retriever = DenseSystem(embedder)
        self.rag_k = rag_k
        self._init_llm(llm)

    @property
    def items(self) -> list[MemoryItem]:
        return self.retriever.items

    def index(self, memories: Iterable[MemoryItem | tuple[str, str, str, float]]) -> None:
        self.retriever.index(memories)

    def update(self, text: str, context: str, at_s: float, *, memory_id: str) -> str:
        return self.retriever.update(text, context, at_s, memory_id=memory_id)

    def _line(self, item: MemoryItem, at_s: float) -> str:
        return item.text

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        hits = self.retriever.answer(query, at_s, k=max(k, self.rag_k))
        if not hits:
            return []
        by_id = {m.id: m for m in self.items}
        lines = "\n".join(f"{i}. {self._line(by_id[h.id], at_s)}"
                          for i, h in enumerate(hits[:self.rag_k], start=1))
        reply = self._ask(self.prompt.format(memories=lines, query=query))
        valid = not judged_stale(reply)
        top = hits[0]
        return [Answer(top.id, reply, valid, top.score)] + [
            Answer(h.id, h.text, valid, h.score) for h in hits[1:k]]


class RAGTemporalSystem(RAGSystem):
    """B7: as B6, each memory annotated with its age; the prompt asks for "stale"/"outdated"."""

    name = "B7-rag-temporal"
    time_aware = True
    prompt = B7_PROMPT

    def _line(self, item: MemoryItem, at_s: float) -> str:
        return f"[{format_age(at_s - item.created_at_s)}] {item.text}"


def make_llm_system(name: str, embedder: Embedder, llm: Any) -> Any:
    """A fresh LLM system ``name`` (see :data:`LLM_SYSTEM_NAMES`) on ``embedder`` and ``llm``."""
    if llm is None:
        raise ValueError(f"The system {name!r} needs a chat model: pass --llm ollama:MODEL "
                         "(or llm= in Python).")
    if name == "B1-llm-only":
        return LLMOnlySystem(llm)
    if name == "B6-rag":
        return RAGSystem(embedder, llm)
    if name == "B7-rag-temporal":
        return RAGTemporalSystem(embedder, llm)
    raise ValueError(f"The 'name' parameter of make_llm_system must be one of "
                     f"{LLM_SYSTEM_NAMES}. Got {name!r} instead.")
