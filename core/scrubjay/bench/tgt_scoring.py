"""Scoring, baselines and the quality audit of the Temporal Generalization Test (TGT).

Everything here is a pure function of its arguments (paper App. B.7, B.9-B.11).

Per-query metrics
-----------------
``factual_correct``
    The answer holds the ground-truth attribute value: at least 60% of the value's
    distinct lower-case alphanumeric tokens occur in the answer (the paper's heuristic
    fallback judge). This is the paper's definition and it does **not** depend on
    validity: for a query whose ground truth is *invalid* (a stale Type-A memory, or any
    memory past its schedule), ``factual_correct`` still asks whether the answer recalls
    the stored value. A system that refuses ("I cannot confirm") scores 0 on it, so an
    invalid query is combined-correct only if the answer both recalls the old value and
    flags it as stale.
``staleness_aware``
    The system's validity judgement equals the schedule's ground truth.
``combined``
    ``factual_correct and staleness_aware``.

Aggregates
----------
``Acc(I_k)`` is the mean combined score over queries at interval ``I_k``;
``TGS = mean_k Acc(I_k)`` over I1..I5; ``GenGap = Acc(I2) + Acc(I4) - 2 Acc(I3)``
(paper Eq. 16, SPEC §10).

Note on GenGap's sign: the paper's prose says negative GenGap marks "memorised only the
seen intervals" and calls a dip at I3 "negative GenGap", but by Eq. 16 a dip at I3
(``Acc(I3)`` below the mean of ``Acc(I2)`` and ``Acc(I4)``) makes GenGap *positive*.
This module implements Eq. 16 as written; read the sign with that in mind.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from scrubjay.bench.tgt import (
    MEMORY_TYPES,
    TYPE_SPECS,
    TGTConfig,
    TGTInstance,
    TGTQuery,
    strip_checkpoint,
)

__all__ = [
    "FACTUAL_OVERLAP_THRESHOLD",
    "STALE_MARKERS",
    "T_QUANTILE_975",
    "AuditCheck",
    "AuditReport",
    "GroupScore",
    "MeanCI",
    "QueryResult",
    "SeedAggregate",
    "TGTReport",
    "aggregate_seeds",
    "always_valid_results",
    "audit",
    "factual_correct",
    "format_audit",
    "gen_gap",
    "judged_stale",
    "keyword_solvable",
    "lexically_retrievable",
    "mean_ci",
    "random_results",
    "score",
    "t_quantile_975",
    "tokenize",
]

FACTUAL_OVERLAP_THRESHOLD = 0.6
"""Minimum share of ground-truth value tokens found in the answer (App. B.7)."""

STALE_MARKERS = (
    "stale",
    "outdated",
    "cannot confirm",
    # The three above are quoted in App. B.7; the rest are chosen with the same meaning.
    "can't confirm",
    "can not confirm",
    "unable to confirm",
    "cannot be confirmed",
    "no longer",
    "out of date",
    "out-of-date",
    "expired",
    "obsolete",
    "superseded",
    "not current",
    "may have changed",
    "might have changed",
    "has likely changed",
)
"""Phrases that mark an answer as judging its memory stale (heuristic judge)."""

_NEGATION_RE = re.compile(r"(?:\bnot|n't|\bnever)\s+$")
"""A marker right after "not", "...n't" or "never" is negated ("not stale")."""

TGS_INTERVALS = ("I1", "I2", "I3", "I4", "I5")
"""Intervals averaged by TGS (App. B.7)."""

ALWAYS_VALID_CEILING = 0.70
"""The audit wants the always-valid floor below this (App. B.10, "<70% preferred")."""

KEYWORD_SOLVABILITY_MAX = 0.05
"""Keyword solvability must stay below this (App. B.10)."""

QUERY_UNIQUENESS_MIN = 0.90
"""Intra-instance query-text uniqueness must exceed this (App. B.10)."""

MIN_CELL_QUERIES = 10
"""Minimum queries per (interval, type) cell over all instances (App. B.10)."""

QUERY_STOPWORDS = frozenset(
    ["what", "is", "s", "has", "changed", "recently", "should", "i", "remember", "about", "for", "the", "a", "an", "of", "to", "in", "on", "at", "and", "are", "this", "that", "with"]
)
"""Template and function words ignored by the keyword rules (chosen: the words of the
three query templates plus common function words)."""

_TYPE_LABEL_RE = re.compile(
    r"\b(?:"
    + "|".join(
        [re.escape(spec.name) for spec in TYPE_SPECS]
        + [r"session specific", r"perishab\w*", r"type [abcd]"]
        + [re.escape(c) for spec in TYPE_SPECS for c in spec.categories if "_" in c]
    )
    + r")\b",
    re.IGNORECASE,
)
"""Type names, "type A".."type D", "perishab..." and underscore category keys: none may
appear in what a system sees."""

# Two-sided 95% Student-t quantiles t_{0.975, df}, to 4 decimals (standard tables;
# checked against scipy.stats.t.ppf). Between tabulated df above 30 the next-lower entry
# is used, which is conservative (slightly wider intervals).
T_QUANTILE_975 = {
    1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706,
    6: 2.4469, 7: 2.3646, 8: 2.3060, 9: 2.2622, 10: 2.2281,
    11: 2.2010, 12: 2.1788, 13: 2.1604, 14: 2.1448, 15: 2.1314,
    16: 2.1199, 17: 2.1098, 18: 2.1009, 19: 2.0930, 20: 2.0860,
    21: 2.0796, 22: 2.0739, 23: 2.0687, 24: 2.0639, 25: 2.0595,
    26: 2.0555, 27: 2.0518, 28: 2.0484, 29: 2.0452, 30: 2.0423,
    40: 2.0211, 60: 2.0003, 120: 1.9799,
}


# ---------------------------------------------------------------------------
# Heuristic judge
# ---------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric tokens of ``text``.

    >>> tokenize("Priya's file is billing_api.rb!")
    ['priya', 's', 'file', 'is', 'billing', 'api', 'rb']
    """
    return re.findall(r"[a-z0-9]+", text.lower())


def factual_correct(
    answer_text: str, gt_value: str, *, threshold: float = FACTUAL_OVERLAP_THRESHOLD
) -> bool:
    """Return whether ``answer_text`` holds the ground-truth value ``gt_value``.

    True iff ``|T(v) & T(a)| / |T(v)| >= threshold`` with ``T`` the set of lower-case
    alphanumeric tokens, ``v`` the value and ``a`` the answer (App. B.7 heuristic judge).
    The answer's validity judgement plays no part (see the module docstring).

    Parameters
    ----------
    answer_text : str
        The system's answer (may be empty).
    gt_value : str
        The ground-truth attribute value.
    threshold : float, optional
        Required token share, 0.6 by default.

    Returns
    -------
    bool
        False for an empty answer or a value without tokens.

    Examples
    --------
    >>> factual_correct("Probably the north atrium.", "north atrium")
    True
    >>> factual_correct("The north annex.", "north atrium")  # 1 of 2 tokens = 50%
    False
    """
    value_tokens = set(tokenize(gt_value))
    if not value_tokens or not answer_text:
        return False
    found = len(value_tokens & set(tokenize(answer_text)))
    return found >= threshold * len(value_tokens) - 1e-12


def judged_stale(answer: str | bool) -> bool:
    """Read a staleness judgement from an answer.

    Parameters
    ----------
    answer : str or bool
        Free answer text, or an explicit flag where ``True`` means "the system judged
        the memory stale" (returned unchanged). Note the polarity: a ``judged_valid``
        flag must be negated before it is passed here.

    Returns
    -------
    bool
        For text: True iff a phrase of ``STALE_MARKERS`` occurs (case-insensitive, on
        word boundaries) and is not directly preceded by "not", "...n't" or "never".

    Examples
    --------
    >>> judged_stale("Ravi's mood was frazzled, but that is probably outdated.")
    True
    >>> judged_stale("It is not stale: Ravi still prefers Zed.")
    False
    """
    if isinstance(answer, bool):
        return answer
    text = answer.lower().replace("\u2019", "'")
    for marker in STALE_MARKERS:
        for match in re.finditer(r"\b" + re.escape(marker) + r"\b", text):
            if not _NEGATION_RE.search(text[: match.start()]):
                return True
    return False


# ---------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryResult:
    """A system's answer to one query.

    Parameters
    ----------
    query : TGTQuery
        The query, with ground truth.
    answer_text : str
        The answer text.
    judged_valid : bool
        The system's validity judgement (True: the memory is still valid).
    factual : bool or None, optional
        An external judge's factual verdict (the LLM judge); None (default) uses
        :func:`factual_correct`.
    """

    query: TGTQuery
    answer_text: str
    judged_valid: bool
    factual: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupScore:
    """Accuracies over one group of queries (an interval, a type or a cell)."""

    key: str
    n: int
    factual: float
    staleness: float
    combined: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TGTReport:
    """TGT scores of one system on one benchmark set.

    Parameters
    ----------
    n_queries : int
        Number of scored queries.
    factual, staleness, combined : float
        Overall accuracies in [0, 1].
    per_interval : tuple of GroupScore
        Keyed ``"I1"`` .. ``"I5"``, in interval order.
    per_type : tuple of GroupScore
        Keyed ``"A"`` .. ``"D"`` (stale distractors count under A).
    per_cell : tuple of GroupScore
        Keyed ``"I1/A"`` etc.
    tgs : float
        Mean of ``Acc(I1..I5)``; NaN if an interval has no query.
    gen_gap : float
        ``Acc(I2) + Acc(I4) - 2 Acc(I3)``; NaN if one of them is missing.
    """

    n_queries: int
    factual: float
    staleness: float
    combined: float
    per_interval: tuple[GroupScore, ...]
    per_type: tuple[GroupScore, ...]
    per_cell: tuple[GroupScore, ...]
    tgs: float
    gen_gap: float

    def acc(self, interval: str) -> float:
        """Return ``Acc(interval)``, the mean combined score there (NaN if absent)."""
        for g in self.per_interval:
            if g.key == interval:
                return g.combined
        return math.nan


def gen_gap(acc_i2: float, acc_i3: float, acc_i4: float) -> float:
    """Generalization gap, paper Eq. 16: ``Acc(I2) + Acc(I4) - 2 Acc(I3)``.

    >>> round(gen_gap(0.6, 0.5, 0.5), 10)
    0.1
    """
    return acc_i2 + acc_i4 - 2.0 * acc_i3


def _as_result(item: QueryResult | tuple[TGTQuery, str, bool]) -> QueryResult:
    if isinstance(item, QueryResult):
        return item
    query, answer_text, judged_valid = item
    return QueryResult(query=query, answer_text=answer_text, judged_valid=bool(judged_valid))


def _group(key: str, rows: Sequence[tuple[bool, bool, bool]]) -> GroupScore:
    arr = np.asarray(rows, dtype=float).reshape(-1, 3)
    mean = arr.mean(axis=0) if len(arr) else np.full(3, math.nan)
    return GroupScore(
        key=key,
        n=len(arr),
        factual=float(mean[0]),
        staleness=float(mean[1]),
        combined=float(mean[2]),
    )


def _interval_order(name: str) -> tuple[int, str]:
    return (TGS_INTERVALS.index(name), name) if name in TGS_INTERVALS else (99, name)


def score(results: Iterable[QueryResult | tuple[TGTQuery, str, bool]]) -> TGTReport:
    """Score a system's answers with the heuristic judge (or a ``QueryResult.factual`` verdict).

    Parameters
    ----------
    results : iterable of QueryResult or (query, answer_text, judged_valid)
        One entry per answered query.

    Returns
    -------
    TGTReport
        Overall, per-interval, per-type and per-cell accuracies, TGS and GenGap.

    Raises
    ------
    ValueError
        If ``results`` is empty.
    """
    rows: list[tuple[TGTQuery, tuple[bool, bool, bool]]] = []
    for item in results:
        r = _as_result(item)
        f = (factual_correct(r.answer_text, r.query.answer_value) if r.factual is None
             else bool(r.factual))
        s = r.judged_valid == r.query.ground_truth_valid
        rows.append((r.query, (f, s, f and s)))
    if not rows:
        raise ValueError("The 'results' parameter of score must be non-empty. Got 0 results.")

    by_interval: dict[str, list[tuple[bool, bool, bool]]] = defaultdict(list)
    by_type: dict[str, list[tuple[bool, bool, bool]]] = defaultdict(list)
    by_cell: dict[tuple[str, str], list[tuple[bool, bool, bool]]] = defaultdict(list)
    for q, v in rows:
        by_interval[q.interval].append(v)
        by_type[q.type_id].append(v)
        by_cell[(q.interval, q.type_id)].append(v)

    overall = _group("all", [v for _, v in rows])
    per_interval = tuple(
        _group(k, by_interval[k]) for k in sorted(by_interval, key=_interval_order)
    )
    acc = {g.key: g.combined for g in per_interval}
    accs = [acc.get(k, math.nan) for k in TGS_INTERVALS]
    return TGTReport(
        n_queries=overall.n,
        factual=overall.factual,
        staleness=overall.staleness,
        combined=overall.combined,
        per_interval=per_interval,
        per_type=tuple(_group(k, by_type[k]) for k in sorted(by_type)),
        per_cell=tuple(
            _group(f"{i}/{t}", by_cell[(i, t)])
            for i, t in sorted(by_cell, key=lambda c: (_interval_order(c[0]), c[1]))
        ),
        tgs=float(np.mean(accs)),
        gen_gap=gen_gap(
            acc.get("I2", math.nan), acc.get("I3", math.nan), acc.get("I4", math.nan)
        ),
    )


# ---------------------------------------------------------------------------
# Several seeds
# ---------------------------------------------------------------------------


def t_quantile_975(df: int) -> float:
    """Return the 0.975 quantile of Student's t with ``df`` degrees of freedom.

    Exact (4 decimals) for df <= 30 and df in {40, 60, 120}; otherwise the entry of the
    next-lower tabulated df (conservative).

    >>> t_quantile_975(4)
    2.7764
    """
    if df < 1:
        raise ValueError(f"The 'df' parameter of t_quantile_975 must be >= 1. Got {df} instead.")
    return T_QUANTILE_975[max(k for k in T_QUANTILE_975 if k <= df)]


@dataclass(frozen=True, slots=True, kw_only=True)
class MeanCI:
    """Mean of a sample with its two-sided 95% t-interval.

    ``half_width = t_{0.975, n-1} * s / sqrt(n)`` with ``s`` the sample standard
    deviation (ddof=1); NaN when ``n < 2``.
    """

    n: int
    mean: float
    std: float
    half_width: float
    lo: float
    hi: float


def mean_ci(values: Sequence[float]) -> MeanCI:
    """Return the mean of ``values`` and its 95% t-interval.

    >>> ci = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    >>> round(ci.lo, 4), round(ci.hi, 4)
    (1.0368, 4.9632)
    """
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        raise ValueError("The 'values' parameter of mean_ci must be non-empty. Got 0 values.")
    mean = float(x.mean())
    if n < 2:
        return MeanCI(n=n, mean=mean, std=math.nan, half_width=math.nan, lo=math.nan, hi=math.nan)
    std = float(x.std(ddof=1))
    half = t_quantile_975(n - 1) * std / math.sqrt(n)
    return MeanCI(n=n, mean=mean, std=std, half_width=half, lo=mean - half, hi=mean + half)


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedAggregate:
    """Reports of several seeds summarised as mean and 95% t-interval per metric."""

    n_seeds: int
    combined: MeanCI
    factual: MeanCI
    staleness: MeanCI
    tgs: MeanCI
    gen_gap: MeanCI
    per_interval: tuple[tuple[str, MeanCI], ...]


def aggregate_seeds(reports: Sequence[TGTReport]) -> SeedAggregate:
    """Summarise one report per seed (same system, different benchmark seeds).

    Each metric is treated as one observation per seed; the interval is the
    t-interval of :func:`mean_ci` over seeds (not over queries).
    """
    if not reports:
        raise ValueError("The 'reports' parameter of aggregate_seeds must be non-empty.")
    names = sorted({g.key for r in reports for g in r.per_interval}, key=_interval_order)
    return SeedAggregate(
        n_seeds=len(reports),
        combined=mean_ci([r.combined for r in reports]),
        factual=mean_ci([r.factual for r in reports]),
        staleness=mean_ci([r.staleness for r in reports]),
        tgs=mean_ci([r.tgs for r in reports]),
        gen_gap=mean_ci([r.gen_gap for r in reports]),
        per_interval=tuple((k, mean_ci([r.acc(k) for r in reports])) for k in names),
    )


# ---------------------------------------------------------------------------
# Trivial baselines (App. B.9)
# ---------------------------------------------------------------------------


def always_valid_results(instances: Sequence[TGTInstance]) -> list[QueryResult]:
    """The always-valid floor: every query answered with its true value, judged valid.

    Its combined accuracy is the share of valid queries: 42/66 = 63.6% by default.
    """
    return [
        QueryResult(query=q, answer_text=q.answer_value, judged_valid=True)
        for inst in instances
        for q in inst.queries
    ]


def random_results(instances: Sequence[TGTInstance], *, seed: int = 0) -> list[QueryResult]:
    """The random baseline: a uniformly random memory of the pool, a fair-coin validity.

    The answer text is the chosen memory's text; ``judged_valid`` is True with
    probability 1/2. Deterministic given ``seed``.
    """
    rng = np.random.default_rng(seed)
    out: list[QueryResult] = []
    for inst in instances:
        for q in inst.queries:
            mem = inst.memories[int(rng.integers(len(inst.memories)))]
            out.append(
                QueryResult(query=q, answer_text=mem.text, judged_valid=bool(rng.random() < 0.5))
            )
    return out


# ---------------------------------------------------------------------------
# Keyword rules and audit (App. B.10, B.11)
# ---------------------------------------------------------------------------


def _content_tokens(text: str) -> set[str]:
    return set(tokenize(text)) - QUERY_STOPWORDS


def _memory_tokens(instance: TGTInstance) -> dict[str, set[str]]:
    return {
        m.memory_id: set(tokenize(strip_checkpoint(m.text) + " " + m.context))
        for m in instance.memories
    }


def keyword_solvable(
    query: TGTQuery, instance: TGTInstance, *, _tokens: dict[str, set[str]] | None = None
) -> bool:
    """Return whether a trivial keyword rule answers ``query`` without real retrieval.

    Definition used by the audit (ours; the paper does not define the term). A query is
    keyword-solvable if either

    (a) the query text alone would pass the factual judge, i.e.
        ``factual_correct(query.text, query.answer_value)`` (the answer, or 60% of its
        tokens, is in the query); or
    (b) a *single* content word of the query (tokens minus ``QUERY_STOPWORDS``) occurs in
        exactly one memory of the pool (checkpoint-free text plus context), and that
        memory is the target: one word pins the answer, with no need to combine the
        subject with the attribute.

    Ordinary retrieval (match subject *and* attribute) is deliberately not counted: the
    benchmark must stay solvable by retrieval; see :func:`lexically_retrievable`.
    """
    if factual_correct(query.text, query.answer_value):
        return True
    tokens = _memory_tokens(instance) if _tokens is None else _tokens
    for word in _content_tokens(query.text):
        hits = [mid for mid, toks in tokens.items() if word in toks]
        if len(hits) == 1 and hits[0] == query.target_memory_id:
            return True
    return False


def lexically_retrievable(
    query: TGTQuery, instance: TGTInstance, *, _tokens: dict[str, set[str]] | None = None
) -> bool:
    """Return whether the memory sharing most content words with the query is the target.

    True iff the target is the unique memory with the largest number of distinct content
    words in common with the query. A diagnostic (high in template mode), not a flaw.
    """
    tokens = _memory_tokens(instance) if _tokens is None else _tokens
    words = _content_tokens(query.text)
    overlap = {mid: len(words & toks) for mid, toks in tokens.items()}
    best = max(overlap.values())
    winners = [mid for mid, v in overlap.items() if v == best]
    return winners == [query.target_memory_id]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditCheck:
    """One audit criterion.

    Parameters
    ----------
    name : str
        The criterion.
    value : float
        The measured value.
    display : str
        ``value`` formatted for the table.
    threshold : str
        The requirement, as text.
    passed : bool
        Whether ``value`` meets it (always True for information rows).
    required : bool
        False for information rows, which cannot fail the audit.
    """

    name: str
    value: float
    display: str
    threshold: str
    passed: bool
    required: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditReport:
    """All audit criteria of one benchmark set."""

    n_instances: int
    n_memories: int
    n_queries: int
    checks: tuple[AuditCheck, ...]

    @property
    def passed(self) -> bool:
        """True iff every required check passed."""
        return all(c.passed for c in self.checks if c.required)

    def check(self, name: str) -> AuditCheck:
        """Return the check called ``name`` (``KeyError`` if absent)."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def audit(instances: Sequence[TGTInstance], *, config: TGTConfig | None = None) -> AuditReport:
    """Run the quality checks of App. B.10/B.11 on a generated set.

    Parameters
    ----------
    instances : sequence of TGTInstance
        The set to audit.
    config : TGTConfig, optional
        The generator settings (schedule, memories per type); defaults to ``TGTConfig()``.

    Returns
    -------
    AuditReport
        Check names: ``pool reuse ratio``, ``memories per type``, ``memory uniqueness``,
        ``target present with value``, ``validity matches schedule``,
        ``answer leakage (staleness queries)``, ``answer leakage (all queries)``,
        ``query uniqueness (min per instance)``, ``stale queries at I1``,
        ``stale queries at I2``, ``always-valid baseline``, ``min queries per cell``,
        ``keyword solvability``, ``type labels visible``, and information rows
        ``independent pools``, ``query uniqueness (mean)``, ``min queries per
        (interval, type, kind)``, ``lexical top-1 retrievability``.
    """
    config = TGTConfig() if config is None else config
    if not instances:
        raise ValueError("The 'instances' parameter of audit must be non-empty.")
    queries = [q for inst in instances for q in inst.queries]
    n_q = len(queries)
    checks: list[AuditCheck] = []

    def add(
        name: str, value: float, display: str, threshold: str, ok: bool, req: bool = True
    ) -> None:
        checks.append(
            AuditCheck(name=name, value=float(value), display=display, threshold=threshold,
                       passed=bool(ok), required=req)
        )

    # Pools: one per instance (App. B.5, F2).
    pools = {inst.pool_id for inst in instances}
    ratio = len(instances) / len(pools)
    add("pool reuse ratio", ratio, f"{ratio:.2f}", "= 1.00", ratio == 1.0)
    add("independent pools", len(pools), str(len(pools)), ">= 20 preferred", True, req=False)

    # Memory counts per type (B.11).
    counts = [
        sum(1 for m in inst.memories if m.type_id == t) for inst in instances for t in MEMORY_TYPES
    ]
    ok = all(c == config.memories_per_type for c in counts)
    add("memories per type", min(counts), f"{min(counts)}-{max(counts)}",
        f"= {config.memories_per_type}", ok)

    # Memory uniqueness, on the text without the checkpoint tag (stricter than the
    # paper's full-text check, which the unique tag satisfies trivially).
    uniq = min(
        len({strip_checkpoint(m.text) for m in inst.memories}) / len(inst.memories)
        for inst in instances
    )
    add("memory uniqueness", uniq, _pct(uniq), "= 100%", uniq == 1.0)

    # Target presence and consistency with the schedule (B.11).
    present = 0
    schedule_errors = 0
    leak_stale = leak_all = 0
    n_stale_q = 0
    for inst in instances:
        by_id = {m.memory_id: m for m in inst.memories}
        for q in inst.queries:
            mem = by_id.get(q.target_memory_id)
            if (
                mem is not None
                and mem.value == q.answer_value
                and q.answer_value in mem.text
                and mem.type_id == q.type_id
            ):
                present += 1
            if q.is_distractor:
                expected = False
                schedule_errors += int(q.type_id != "A")
            else:
                expected = config.is_valid(q.type_id, q.interval)
            schedule_errors += int(q.ground_truth_valid != expected)
            leaked = q.answer_value.lower() in q.text.lower()
            leak_all += int(leaked)
            if q.kind == "staleness":
                n_stale_q += 1
                leak_stale += int(leaked)
    add("target present with value", present / n_q, _pct(present / n_q), "= 100%", present == n_q)
    add("validity matches schedule", schedule_errors, f"{schedule_errors} errors", "0 errors",
        schedule_errors == 0)
    rate = leak_stale / max(n_stale_q, 1)
    add("answer leakage (staleness queries)", rate, f"{_pct(rate)} ({leak_stale}/{n_stale_q})",
        "= 0%", leak_stale == 0)
    add("answer leakage (all queries)", leak_all / n_q,
        f"{_pct(leak_all / n_q)} ({leak_all}/{n_q})", "= 0%", leak_all == 0)

    # Intra-instance query uniqueness (B.5, B.10).
    uniq_q = [len({q.text for q in inst.queries}) / len(inst.queries) for inst in instances]
    add("query uniqueness (min per instance)", min(uniq_q), _pct(min(uniq_q)),
        f"> {_pct(QUERY_UNIQUENESS_MIN)}", min(uniq_q) > QUERY_UNIQUENESS_MIN)
    add("query uniqueness (mean)", float(np.mean(uniq_q)), _pct(float(np.mean(uniq_q))),
        "paper: 96% mean", True, req=False)

    # Stale queries present at I1 and I2 (B.4, B.10).
    for name in ("I1", "I2"):
        at = [q for q in queries if q.interval == name]
        share = sum(not q.ground_truth_valid for q in at) / max(len(at), 1)
        add(f"stale queries at {name}", share, _pct(share), "> 0%", share > 0)

    # Always-valid floor (B.9).
    floor = sum(q.ground_truth_valid for q in queries) / n_q
    add("always-valid baseline", floor, _pct(floor), f"< {_pct(ALWAYS_VALID_CEILING)}",
        floor < ALWAYS_VALID_CEILING)

    # Cell sizes over all instances.
    cells: dict[tuple[str, str], int] = defaultdict(int)
    kind_cells: dict[tuple[str, str, str], int] = defaultdict(int)
    for q in queries:
        cells[(q.interval, q.type_id)] += 1
        kind_cells[(q.interval, q.type_id, q.kind)] += 1
    expected_cells = [(iv.name, t) for iv in config.intervals for t in MEMORY_TYPES]
    min_cell = min(cells.get(c, 0) for c in expected_cells)
    add("min queries per cell", min_cell, f"{min_cell} (interval x type)",
        f">= {MIN_CELL_QUERIES}", min_cell >= MIN_CELL_QUERIES)
    min_kind = min(kind_cells.values())
    add("min queries per (interval, type, kind)", min_kind, str(min_kind),
        "paper's cell: 20", True, req=False)

    # Keyword shortcuts and lexical retrievability.
    solvable = retrievable = 0
    for inst in instances:
        toks = _memory_tokens(inst)
        for q in inst.queries:
            solvable += int(keyword_solvable(q, inst, _tokens=toks))
            retrievable += int(lexically_retrievable(q, inst, _tokens=toks))
    add("keyword solvability", solvable / n_q, f"{_pct(solvable / n_q)} ({solvable}/{n_q})",
        f"< {_pct(KEYWORD_SOLVABILITY_MAX)}", solvable / n_q < KEYWORD_SOLVABILITY_MAX)
    add("lexical top-1 retrievability", retrievable / n_q, _pct(retrievable / n_q),
        "info (template mode)", True, req=False)

    # No type label in what a system sees (text, context).
    labelled = sum(
        1
        for inst in instances
        for m in inst.memories
        if _TYPE_LABEL_RE.search(m.text) or _TYPE_LABEL_RE.search(m.context)
    )
    add("type labels visible", labelled, f"{labelled} memories", "0", labelled == 0)

    return AuditReport(
        n_instances=len(instances),
        n_memories=sum(len(inst.memories) for inst in instances),
        n_queries=n_q,
        checks=tuple(checks),
    )


def format_audit(report: AuditReport) -> str:
    """Render an :class:`AuditReport` as a plain-text table."""
    w = max(len(c.name) for c in report.checks)
    wv = max(len(c.display) for c in report.checks)
    wt = max(len(c.threshold) for c in report.checks)
    lines = [
        (f"TGT audit: {report.n_instances} instances, {report.n_memories} memories, "
         f"{report.n_queries} queries"),
        f"{'criterion':<{w}}  {'value':<{wv}}  {'threshold':<{wt}}  result",
        "-" * (w + wv + wt + 12),
    ]
    for c in report.checks:
        result = ("PASS" if c.passed else "FAIL") if c.required else "info"
        lines.append(f"{c.name:<{w}}  {c.display:<{wv}}  {c.threshold:<{wt}}  {result}")
    lines.append(f"overall: {'PASS' if report.passed else 'FAIL'}")
    return "\n".join(lines)
