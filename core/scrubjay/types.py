"""Value types returned by the public API: frozen, slotted, keyword-only dataclasses."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

__all__ = ["Deltas", "Hit", "IntegrationReport", "MemoryRecord", "Perishability"]

Source = Literal["llm", "keyword", "estimator", "user"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Perishability:
    """The classifier's answer for one memory: ``phi(text, context) -> (label, pi, tau)``."""

    label: str
    """One of ``factual``, ``procedural``, ``task_specific``, ``ephemeral``."""
    pi: float
    """Perishability in (0, 1]: ~1 ephemeral, ~0 stable."""
    tau_s: float
    """Utility horizon in seconds."""
    source: Source = "keyword"
    """Who produced it: the chat model, the offline estimator, the keyword rule or the user."""


def storable(x: float) -> float:
    """``x`` rounded to the 15 significant digits that survive a Chroma metadata round trip.

    >>> storable(3712.1851795182397)
    3712.18517951824
    """
    return float(f"{x:.15g}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecord:
    """One stored memory and its perishability, as persisted in Chroma."""

    id: str
    text: str
    """What was remembered (without the future-oriented annotation)."""
    context: str
    """Where: the conversation, task or workspace it was remembered in."""
    label: str
    pi: float
    tau_s: float
    value: float
    """Base value V; RCI lowers or raises it."""
    created_at_s: float
    """When it was remembered, epoch seconds."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The user's metadata, as given to ``add``."""
    annotation: str = ""
    """The LLM's future-oriented note (paper §3.7), empty without an LLM."""
    source: Source = "keyword"
    """Who classified it."""
    updated_at_s: float | None = None
    """When RCI last changed it, if ever."""
    valid_from_s: float | None = None
    """When what it says is or becomes true (None: when it was recorded, ``created_at_s``)."""
    valid_until_s: float | None = None
    """When what it says stops being true, if the text states an end (None: no stated end)."""
    invalidated_at_s: float | None = None
    """When a later memory replaced it (the replacement's time), if one did."""
    superseded_by: str | None = None
    """The id of the memory that replaced it, if one did."""
    window: str | None = None
    """How its validity window was read from the text (``DecayConfig.windows``):
    ``"stated: <the words>"`` when the text states one (``valid_from_s``/``valid_until_s``
    hold it), ``"fallback: <why>"`` when a time expression could not be used (the learned
    decay applies), None when the text states no time."""
    rci_deltas: tuple[tuple[float, float, float, float], ...] = ()
    """RCI's updates of it, oldest first, each ``(at_s, d_value, d_pi, tau_factor)``: when the
    event happened and the change it made (value and pi added, tau multiplied). ``value``,
    ``pi`` and ``tau_s`` hold today's state, their sum; ``search(at=t)`` takes back those made
    after ``t`` (:func:`scrubjay.timeline.state_as_of`)."""

    @property
    def recorded_at_s(self) -> float:
        """When it was told: ``created_at_s``."""
        return self.created_at_s

    def __post_init__(self) -> None:
        # Chroma's metadata keeps 15 significant digits of a float: hold exactly what a
        # reopened store will read back, so that a restart changes nothing.
        # (record_from_stored skips this for values that went through it: keep them in step.)
        for name in ("pi", "tau_s", "value", "created_at_s", "updated_at_s", "valid_from_s",
                     "valid_until_s", "invalidated_at_s"):
            x = getattr(self, name)
            if isinstance(x, float):
                object.__setattr__(self, name, storable(x))


#: ``MemoryRecord``'s fields in declaration order: the order of :func:`record_from_stored`.
_RECORD_FIELDS = tuple(f.name for f in fields(MemoryRecord))
_SET = object.__setattr__


def record_from_stored(values: tuple[Any, ...]) -> MemoryRecord:
    """A ``MemoryRecord`` from values (in field declaration order) that came out of
    ``MemoryRecord``s, e.g. a reopen's snapshot rows: ``__post_init__`` is skipped, since its
    only work, :func:`storable`, was done already and is idempotent. It makes the 100,000
    records of a reopen about 2.7x cheaper to build (0.5 -> 0.2 s)."""
    record = object.__new__(MemoryRecord)
    for name, value in zip(_RECORD_FIELDS, values, strict=True):
        _SET(record, name, value)
    return record


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """A search result with its score explained (paper Eq. 5).

    ``paper_score == weights[0]*what + weights[1]*where + weights[2]*when + weights[3]*graph``.
    ``score`` is what the ranking sorted by: ``paper_score`` with ``ranking="paper"``; with the
    default ``ranking="relevance"``, ``(a*what + b*where) / (a + b) * value / default_value``.

    A relevance search against a Chroma server does not need the graph to rank, so its hits
    compute ``graph`` and ``paper_score`` on first access instead: one fetch of the graph
    neighbours of all the search's hits together, from the store as it is then (a search
    itself makes no such fetch). The values are the same as those of an eager search; reading
    them after the memory is closed raises :class:`~scrubjay.errors.ScrubJayError` (until then
    the hits refer to their memory). Every other field is always set, and pickling or comparing
    a hit computes them first.
    """

    record: MemoryRecord
    score: float
    paper_score: float
    """The Eq. 5 score (with the Eq. 8 graph bonus), whatever the ranking mode."""
    utility: float
    """``U(m, t_q) = V exp(-pi (t_q - t_i) / tau)`` at the query time."""
    stale: bool
    """``utility / value < config.decay.stale_ratio`` at the query time (documented threshold)."""
    what: float
    """``cos(w_what, e_q)``."""
    where: float
    """``cos(w_where, c_q)`` (0 when either context is empty)."""
    when: float
    """The utility term, equal to ``utility``."""
    graph: float
    """The one-hop graph bonus ``Phi(m, G)`` (paper Eq. 8)."""
    weights: tuple[float, float, float, float]
    """The query-adaptive weights (a_q, b_q, g_q, d_q) of Eq. 6; they sum to 1."""
    from_buffer: bool = False
    """True when served from the prospective buffer without a full search."""
    stale_reason: str | None = None
    """Why it is stale at the query time: ``"superseded"`` (by :attr:`MemoryRecord.superseded_by`),
    ``"window ended"`` (its ``valid_until`` passed) or ``"decayed"``; None when current."""
    time_factor: float = 1.0
    """The default ranking's time factor (:func:`scrubjay.timeline.time_factor`): ``score`` is
    the relevance times ``value / V0`` times this; 1 with ``ranking="paper"``."""
    lexical: float = 0.0
    """The lexical channel's share ``ell = BM25 / best BM25`` of the query, in [0, 1]
    (:mod:`scrubjay.fusion`): the default ranking's relevance is
    ``(1 - lambda) * dense + lambda * lexical``; 0 with ``ranking="paper"``, without the lexical
    channel (``SearchConfig.lexical=False``, a server without a mirror) or when the query has no
    index term."""
    lexical_weight: float = 0.0
    """The ``lambda`` this search fused with: ``SearchConfig.lexical_weight`` when the query had
    lexical hits, else 0 (dense relevance alone). With the default ranking, ``score ==
    ((1 - lexical_weight) * dense + lexical_weight * lexical) * value / V0 * time_factor``,
    ``dense = (a*what + b*where) / (a + b)``."""
    _graph_of: Callable[[str], float] | None = field(default=None, init=False, repr=False,
                                                      compare=False)
    """For a deferred hit: memory id -> graph bonus, called once on first access."""

    @classmethod
    def deferred(cls, *, graph_of: Callable[[str], float], record: MemoryRecord,
                 score: float, utility: float, stale: bool, what: float, where: float,
                 when: float, weights: tuple[float, float, float, float],
                 from_buffer: bool = False, stale_reason: str | None = None,
                 time_factor: float = 1.0, lexical: float = 0.0,
                 lexical_weight: float = 0.0) -> Hit:
        """A hit whose ``graph`` (``graph_of(id)``) and ``paper_score`` are computed on first
        access (see the class docstring)."""
        hit = object.__new__(cls)
        for name, value in (("record", record), ("score", score), ("utility", utility),
                            ("stale", stale), ("what", what), ("where", where), ("when", when),
                            ("weights", weights), ("from_buffer", from_buffer),
                            ("stale_reason", stale_reason), ("time_factor", time_factor),
                            ("lexical", lexical), ("lexical_weight", lexical_weight),
                            ("_graph_of", graph_of)):
            object.__setattr__(hit, name, value)
        return hit

    def __getattr__(self, name: str) -> Any:
        # Called only for an unset slot: ``graph`` and ``paper_score`` of a deferred hit.
        if name not in ("graph", "paper_score"):
            raise AttributeError(name)
        graph_of = object.__getattribute__(self, "_graph_of")
        if graph_of is None:
            raise AttributeError(name)
        g = float(graph_of(self.record.id))
        a, b, c, d = self.weights
        object.__setattr__(self, "graph", g)
        object.__setattr__(self, "paper_score",
                           float(a * self.what + b * self.where + c * self.when + d * g))
        object.__setattr__(self, "_graph_of", None)
        return object.__getattribute__(self, name)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def text(self) -> str:
        return self.record.text


(_SET_RECORD, _SET_SCORE, _SET_PAPER, _SET_UTILITY, _SET_STALE, _SET_WHAT, _SET_WHERE, _SET_WHEN,
 _SET_GRAPH, _SET_WEIGHTS, _SET_BUFFER, _SET_REASON, _SET_FACTOR, _SET_LEXICAL,
 _SET_LAMBDA, _SET_GRAPH_OF) = (getattr(Hit, name).__set__ for name in (
    "record", "score", "paper_score", "utility", "stale", "what", "where", "when", "graph",
    "weights", "from_buffer", "stale_reason", "time_factor", "lexical", "lexical_weight",
    "_graph_of"))


def new_hit(record: MemoryRecord, score: float, utility: float, stale: bool, what: float,
            where: float, graph: float, weights: tuple[float, float, float, float],
            from_buffer: bool, stale_reason: str | None = None) -> Hit:
    """An eagerly scored :class:`Hit` (``paper_score == score``, ``when == utility``), equal to
    the one its keyword constructor builds, in half the time (a search builds ``k`` of them)."""
    hit = object.__new__(Hit)
    _SET_RECORD(hit, record)
    _SET_SCORE(hit, score)
    _SET_PAPER(hit, score)
    _SET_UTILITY(hit, utility)
    _SET_STALE(hit, stale)
    _SET_WHAT(hit, what)
    _SET_WHERE(hit, where)
    _SET_WHEN(hit, utility)
    _SET_GRAPH(hit, graph)
    _SET_WEIGHTS(hit, weights)
    _SET_BUFFER(hit, from_buffer)
    _SET_REASON(hit, stale_reason)
    _SET_FACTOR(hit, 1.0)
    _SET_LEXICAL(hit, 0.0)
    _SET_LAMBDA(hit, 0.0)
    _SET_GRAPH_OF(hit, None)
    return hit


@dataclass(frozen=True, slots=True, kw_only=True)
class Deltas:
    """Latent update deltas for one RCI event, already clipped (paper Eq. 9-11)."""

    delta_value: float = 0.0
    delta_pi: float = 0.0
    delta_tau: float = 0.0
    """Relative change of tau: +0.2 means +20 %."""
    summary: str = ""
    replaced_only: bool = False
    """The value, pi and tau deltas apply only to the memories the supersession detector
    judges the event to replace; the other affected memories keep them (their what-vector
    still moves toward the event). Set by the offline parser when the event has no cue word:
    then the detector's reading is the only evidence that a memory is replaced. With
    supersession off (``SupersessionConfig(enabled=False)``, ``ScrubJayConfig.paper()``) the
    deltas apply to every affected memory, as in the paper."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IntegrationReport:
    """What one ``integrate`` call changed."""

    affected: tuple[tuple[str, float], ...]
    """(memory id, affinity alpha in (0, 1]) of every memory updated, strongest first."""
    deltas: Deltas
    used_llm: bool
    """True when the chat model produced the deltas, False when the offline parser did."""
    llm_calls: int
    """0 or 1: RCI makes at most one LLM call per event, never one per memory."""
    stored: MemoryRecord | None = None
    """The new information, stored as a memory of its own (``store=True``)."""
    fallback_reason: str | None = None
    """Why the offline parser was used, when an LLM was configured but failed."""
    already_applied: tuple[str, ...] = ()
    """Memories this same event (same text, context and time) had updated before, left as
    they are: the part that landed when an earlier call failed part-way."""

    @property
    def affected_ids(self) -> list[str]:
        return [mid for mid, _ in self.affected]
