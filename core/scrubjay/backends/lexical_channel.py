"""A backend's lexical channel: its :class:`~scrubjay.lexical.LexicalIndex` and what to do when
the index fails.

Every backend that ranks with the lexical channel holds one :class:`LexicalChannel` and tells it
each change it makes (and, in server mode, each change other processes made). The store stays
the source of truth: a failed index write or read is logged and turns the channel off until the
memory is reopened, whose open checks or rebuilds the index from the store; searches meanwhile
rank by dense relevance alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from ..errors import ScrubJayError
from ..fusion import LEXICAL_CANDIDATES
from ..lexical import LexicalIndex
from ..ranking import Query

__all__ = ["NO_LEXICAL_HITS", "LexicalChannel"]

logger = logging.getLogger(__name__)

#: A query's lexical answer when the channel is off or finds nothing: (ids, BM25 scores, the
#: summed idf of the query's terms).
NO_LEXICAL_HITS: tuple[list[str], list[float], float] = ([], [], 0.0)

_FAILURES = (ScrubJayError, OSError, ValueError)


class LexicalChannel:
    """The lexical index of one namespace inside a backend (``index`` None: off)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.index: LexicalIndex | None = None

    @property
    def on(self) -> bool:
        return self.index is not None

    def write(self, what: str, run: Callable[[LexicalIndex], None]) -> None:
        """``run(index)``; when it fails, the channel is off until the next open, whose
        consistency check rebuilds the index from the store (the store holds the write)."""
        lex = self.index
        if lex is None:
            return
        try:
            run(lex)
        except _FAILURES as exc:
            logger.warning("The lexical index of namespace %r could not %s (%s); searches rank "
                           "by dense relevance until the memory is reopened, which rebuilds it",
                           self.namespace, what, type(exc).__name__)
            self.index = None
            try:
                lex.release()
            except _FAILURES:
                pass

    def add(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Index ``(id, text)`` pairs (an id already indexed is replaced)."""
        items = list(pairs)
        if items:
            self.write("index new memories", lambda lex: lex.add(
                [i for i, _ in items], [t for _, t in items]))

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            self.write("delete memories", lambda lex: lex.delete(ids))

    def rebuild(self, rows: Callable[[], list[tuple[str, str]]]) -> None:
        """Empty the index and fill it with ``rows()`` (the store's memories)."""
        def run(lex: LexicalIndex) -> None:
            lex.clear()
            pairs = rows()
            lex.add([i for i, _ in pairs], [t for _, t in pairs])
        self.write("be rebuilt", run)

    def clear(self) -> None:
        self.write("be cleared", lambda lex: lex.clear())

    def purge(self, rows: Callable[[], list[tuple[str, str]]]) -> None:
        """Rewrite the index from ``rows()`` (no deleted memory's terms left in it)."""
        self.write("be rewritten", lambda lex: lex.purge(rows))

    def query(self, q: Query) -> tuple[list[str], list[float], float]:
        """The best ``(ids, BM25 scores)`` for the query and the summed idf of its terms
        (:data:`NO_LEXICAL_HITS` when off, for a query vector alone, or on a failure)."""
        lex = self.index
        if lex is None or not q.text:
            return NO_LEXICAL_HITS
        try:
            ids, scores = lex.query(q.text, LEXICAL_CANDIDATES)
            return ids, scores, lex.idf_sum(q.text) if ids else 0.0
        except _FAILURES as exc:
            logger.warning("The lexical index of namespace %r could not be searched (%s); "
                           "ranking by dense relevance", self.namespace, type(exc).__name__)
            return NO_LEXICAL_HITS

    def close(self) -> None:
        """Release the index (a failure is logged: the store holds every memory)."""
        lex, self.index = self.index, None
        if lex is None:
            return
        try:
            lex.release()
        except _FAILURES as exc:
            logger.warning("Closing the lexical index of namespace %r failed: %s",
                           self.namespace, type(exc).__name__)
