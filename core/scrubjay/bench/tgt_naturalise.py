"""Optional LLM naturalisation of TGT texts (``--naturalise``), with the paper's safety rule.

Each memory text (without its checkpoint sentence, which is put back unchanged) and each query
text is rewritten by the chat model in natural language. Checks, each falling back to the
template text and counted in :attr:`Naturaliser.fallbacks`:

- FORBIDDEN ANSWER CONTENT: a rewritten query must not contain its answer value (neither as a
  case-insensitive substring nor by the heuristic judge's token overlap, i.e. the query must not
  answer itself). The paper states the rule for staleness queries; it is applied to every query
  (no template query holds its answer either).
- A rewritten memory must keep its value (case-insensitive substring, as the template does).
- Neither may name a memory type ("ephemeral", "type A", a category key, ...), which the audit
  forbids in anything a system sees.
- A failed call (:class:`~scrubjay.errors.LLMError`) also falls back.

The model's reply is cached per (role, text) within a run, so a deterministic model gives
deterministic instances.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from scrubjay.bench.llm_systems import as_client
from scrubjay.bench.tgt import CHECKPOINT_RE, TGTInstance, strip_checkpoint
from scrubjay.bench.tgt_scoring import _TYPE_LABEL_RE, factual_correct
from scrubjay.errors import LLMError

__all__ = ["MEMORY_PROMPT", "QUERY_PROMPT", "Naturaliser", "leaks_answer"]

MEMORY_PROMPT = (
    "Rewrite this note as one or two natural sentences someone might say or write. Keep every "
    "fact; keep the value \"{value}\" word for word. Return plain text only.\nNote: {text}"
)
QUERY_PROMPT = (
    "Rewrite this question as a person would naturally ask it, keeping its meaning and the "
    "person it is about. FORBIDDEN ANSWER CONTENT: the question must not contain or hint at "
    "its answer. Return plain text only.\nQuestion: {text}"
)


def leaks_answer(query_text: str, value: str) -> bool:
    """Whether ``query_text`` contains the answer ``value`` (substring or token overlap).

    >>> leaks_answer("Has Leo's city changed from Osaka?", "Osaka")
    True
    >>> leaks_answer("Is Leo still living in the same city?", "Osaka")
    False
    """
    return value.lower() in query_text.lower() or factual_correct(query_text, value)


class Naturaliser:
    """Rewrites TGT instances' memory and query texts with a chat model, safely."""

    def __init__(self, llm: Any) -> None:
        self.client = as_client(llm)
        self.calls = 0
        self.memory_fallbacks = 0
        self.query_fallbacks = 0
        self.n_memories = 0
        self.n_queries = 0
        self._cache: dict[tuple[str, str], str | None] = {}

    @property
    def fallbacks(self) -> int:
        """Texts left as templates (memories + queries)."""
        return self.memory_fallbacks + self.query_fallbacks

    def _rewrite(self, role: str, prompt: str, text: str) -> str | None:
        key = (role, text)
        if key not in self._cache:
            self.calls += 1
            try:
                self._cache[key] = " ".join(self.client.complete(prompt).split())
            except LLMError:
                self._cache[key] = None
        return self._cache[key]

    def memory_text(self, text: str, value: str) -> str:
        """``text`` rewritten (checkpoint sentence kept), or ``text`` if a check fails."""
        self.n_memories += 1
        body = strip_checkpoint(text)
        match = CHECKPOINT_RE.search(text)
        tail = match.group(0) if match else ""
        new = self._rewrite("memory", MEMORY_PROMPT.format(value=value, text=body), body)
        if (new is None or value.lower() not in new.lower() or _TYPE_LABEL_RE.search(new)
                or CHECKPOINT_RE.search(new)):
            self.memory_fallbacks += 1
            return text
        return new + tail

    def query_text(self, text: str, value: str) -> str:
        """``text`` rewritten, or ``text`` if the rewrite leaks ``value`` or fails a check."""
        self.n_queries += 1
        new = self._rewrite("query", QUERY_PROMPT.format(text=text), text)
        if new is None or leaks_answer(new, value) or _TYPE_LABEL_RE.search(new):
            self.query_fallbacks += 1
            return text
        return new

    def instance(self, inst: TGTInstance) -> TGTInstance:
        """``inst`` with naturalised texts; ids, times and ground truth unchanged."""
        mems = tuple(dataclasses.replace(m, text=self.memory_text(m.text, m.value))
                     for m in inst.memories)
        qs = tuple(dataclasses.replace(q, text=self.query_text(q.text, q.answer_value))
                   for q in inst.queries)
        return dataclasses.replace(inst, memories=mems, queries=qs)

    def instances(self, instances: Sequence[TGTInstance]) -> list[TGTInstance]:
        """Every instance naturalised, in order."""
        return [self.instance(i) for i in instances]

    def stats(self) -> dict[str, int]:
        """Counts for the report."""
        return {"calls": self.calls, "memories": self.n_memories, "queries": self.n_queries,
                "memory_fallbacks": self.memory_fallbacks,
                "query_fallbacks": self.query_fallbacks}
