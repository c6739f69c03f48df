"""Ranking a set of candidate memories for one query (paper §3.3, Eq. 5-8). Pure numpy.

A backend finds the candidates (a mirror's rows, Chroma's nearest neighbours); the functions
here score them, the same for every backend:

* :func:`partial_scores`: ``S' = a*what + b*where + g*U`` (Eq. 5 without its graph term) and
  its parts.
* :func:`rank_paper`: the full Eq. 5 score ``S = S' + d*Phi`` with the Eq. 8 bonus
  ``Phi(m) = sum_j w_mj S'(j) U(j)`` over m's neighbours j, for the best candidates by ``S'``,
  widened until no other candidate can overtake the k-th (exact).
* :func:`rank_relevance`: the default key ``(a*what + b*where) / (a + b) * V / V0``
  (:func:`~scrubjay.scoring.relevance_key`), then the hits' Eq. 5 parts for the breakdown.
* :func:`rank_block`: :func:`rank_paper` of a prospective buffer's gathered block.

:func:`rank_paper_reference` is the slow, obvious version of :func:`rank_paper`, for the
parity tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .buffer import BufferBlock, block_bonus
from .config import SearchConfig
from .decay import is_stale, utility
from .fusion import fuse
from .mirror import Rows
from .timeline import (
    CURRENT,
    DECAYED,
    ENDED,
    REASONS,
    SUPERSEDED,
    stale_reasons,
    time_factor,
    visible,
)
from .types import Hit, new_hit

__all__ = ["Query", "partial_scores", "rank_block", "rank_paper",
           "rank_paper_reference", "rank_relevance", "relevance_keys", "relevance_order",
           "time_factors"]

#: Candidates whose graph bonus is computed first: the best ``max(4 * k, BONUS_FIRST)`` by
#: ``S'`` (chosen: a bonus is at most ``d * wdeg * max S'U``, so few outsiders need one).
BONUS_FIRST = 64

Neighbours = Callable[[str], list[tuple[str, float]]]
"""A memory's graph neighbours and edge weights."""
Outside = Callable[[list[str]], Rows]
"""Rows of memories that are not among the candidates (for the bonus of their neighbours)."""


@dataclass(frozen=True, slots=True)
class Query:
    """One search: the query's and its context's embeddings, the Eq. 6 weights, ``k`` and the
    query time (epoch seconds)."""

    e_q: NDArray[np.float32]
    c_q: NDArray[np.float32]
    weights: NDArray[np.float64]
    k: int
    t_q: float
    exclude_stale: bool = False
    text: str = ""
    """The query's text, for the lexical channel (empty: no lexical channel)."""


def partial_scores(rows: Rows, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                   weights: NDArray[np.float64], t_q: float) -> tuple[NDArray[Any], ...]:
    """``(what, where, U, S')`` of each row: the cosines (float64), the utility at ``t_q`` and
    ``S' = a*what + b*where + g*U``."""
    sim_what = rows.what @ e_q
    # an empty context embeds to zero: its column is zero, without multiplying N rows
    sim_where = rows.where @ c_q if c_q.any() else np.zeros(len(rows), np.float32)
    u = utility(rows.value, rows.pi, rows.tau, rows.valid_from, t_q)
    a, b, g, _ = weights
    s_prime = a * sim_what + b * sim_where + g * u
    return sim_what.astype(np.float64), sim_where.astype(np.float64), u, s_prime


def rank_paper(rows: Rows, q: Query, *, neighbours: Neighbours, stale_ratio: float,
               index: Mapping[str, int] | None = None,
               wdeg: NDArray[np.float64] | None = None, outside: Outside | None = None,
               from_buffer: bool = False) -> list[Hit]:
    """Exact Eq. 5 scores, with the Eq. 8 bonus, for ``rows``; the top ``q.k`` as hits.

    ``index`` and ``wdeg``: ``rows`` are every memory (a mirror's view), ``index`` maps an id
    to its row and ``wdeg`` holds each row's weighted degree, which bounds the bonus of the
    rows not scored yet. Otherwise a neighbour outside ``rows`` is read with ``outside``.
    """
    e_q, c_q, weights, k, t_q = q.e_q, q.c_q, q.weights, q.k, q.t_q
    n = len(rows)
    if n == 0:
        return []
    sim_what, sim_where, u, s_prime = partial_scores(rows, e_q, c_q, weights, t_q)
    d = float(weights[3])
    ids = rows.ids
    exhaustive = index is not None
    local = None if exhaustive else {mid: i for i, mid in enumerate(ids)}

    def su_of(mids: Iterable[str]) -> dict[str, float]:
        """S'(j) U(j) for neighbours j: from these rows, else read with ``outside``."""
        out: dict[str, float] = {}
        missing: list[str] = []
        for j in mids:
            i = index.get(j) if index is not None else (
                local.get(j) if local is not None else None)
            if i is not None:
                out[j] = float(s_prime[i] * u[i])
            else:
                missing.append(j)
        if missing and outside is not None:
            extra = outside(missing)
            if len(extra):
                _, _, u_x, s_x = partial_scores(extra, e_q, c_q, weights, t_q)
                su_x = (s_x * u_x).tolist()
                out.update(zip(extra.ids, su_x, strict=True))  # ids is a property: once
        return out

    # Graph bonus for the best candidates by S'; widen until no outsider can overtake.
    order = np.argsort(-s_prime, kind="stable")
    m = min(n, max(4 * k, BONUS_FIRST))
    bonus = np.zeros(n)
    su_all_max = float(np.max(s_prime * u)) if n else 0.0
    while True:
        top = order[:m]
        neigh = {ids[i]: neighbours(ids[i]) for i in top}
        su = su_of({j for lst in neigh.values() for j, _ in lst})
        for i in top:
            bonus[i] = sum(w * su.get(j, 0.0) for j, w in neigh[ids[i]])
        final_top = s_prime[top] + d * bonus[top]
        if m >= n or wdeg is None:
            break
        kth = np.sort(final_top)[-min(k, len(final_top))]
        rest = order[m:]
        bound = s_prime[rest] + d * wdeg[rest] * max(su_all_max, 0.0)
        if float(bound.max()) <= kth:
            break
        m = min(n, 4 * m)
    final = s_prime[top] + d * bonus[top]
    best = top[np.lexsort((top, -final))][:k]
    return hits(rows, best, s_prime, bonus, u, sim_what, sim_where, weights, t_q=t_q,
                stale_ratio=stale_ratio, from_buffer=from_buffer)


def rank_paper_reference(rows: Rows, q: Query, *, neighbours: Neighbours,
                         stale_ratio: float) -> list[Hit]:
    """:func:`rank_paper` the slow, obvious way: every candidate's bonus from its
    neighbours among ``rows``, then a sort by ``(-S, row)``. For the parity tests."""
    a, b, g, d = (float(x) for x in q.weights)
    su: dict[str, float] = {}
    parts = []
    for i, rec in enumerate(rows.records):
        what = float(rows.what[i].astype(np.float64) @ q.e_q.astype(np.float64))
        where = (float(rows.where[i].astype(np.float64) @ q.c_q.astype(np.float64))
                 if q.c_q.any() else 0.0)
        u = float(utility(rec.value, rec.pi, rec.tau_s, float(rows.valid_from[i]), q.t_q))
        s_prime = a * what + b * where + g * u
        su[rec.id] = s_prime * u
        parts.append((what, where, u, s_prime))
    scored = []
    for i, rec in enumerate(rows.records):
        what, where, u, s_prime = parts[i]
        bonus = sum(w * su.get(j, 0.0) for j, w in neighbours(rec.id))
        scored.append((-(s_prime + d * bonus), i, bonus))
    scored.sort()
    out = []
    w = (a, b, g, d)
    for neg, i, bonus in scored[:q.k]:
        what, where, u, _ = parts[i]
        v = rows.records[i].value
        reason = (SUPERSEDED if rows.invalidated[i] <= q.t_q else ENDED
                  if rows.valid_until[i] < q.t_q else DECAYED
                  if (u / v if v > 0 else 0.0) < stale_ratio else CURRENT)
        out.append(new_hit(rows.records[i], -neg, u, reason != CURRENT, what, where, bonus, w,
                           False, REASONS.get(reason)))
    return out


def hits(rows: Rows, best: NDArray[np.intp], s_prime: NDArray[np.float64],
         bonus: NDArray[np.float64], u: NDArray[np.float64],
         sim_what: NDArray[np.floating[Any]], sim_where: NDArray[np.floating[Any]],
         weights: NDArray[np.float64], *, t_q: float, stale_ratio: float,
         from_buffer: bool) -> list[Hit]:
    """Hits for rows ``best`` (in that order), with the Eq. 5 score and its parts, and each
    one's stale flag and reason (:func:`scrubjay.timeline.stale_reasons`)."""
    score = (s_prime[best] + float(weights[3]) * bonus[best]).tolist()
    w = tuple(weights.tolist())
    records = rows.records
    value = rows.value[best]
    # decayed as decay.is_stale: U / V < ratio, and a value of 0 is stale
    reason = np.where(rows.invalidated[best] <= t_q, SUPERSEDED,
                      np.where(rows.valid_until[best] < t_q, ENDED,
                               np.where(is_stale(u[best], value, stale_ratio), DECAYED,
                                        CURRENT))).tolist()
    return [new_hit(records[i], sc, ut, why != CURRENT, wh, wr, gr, w, from_buffer,
                    REASONS.get(why))
            for i, sc, ut, wh, wr, gr, why in zip(
                best.tolist(), score, u[best].tolist(), sim_what[best].tolist(),
                sim_where[best].tolist(), bonus[best].tolist(), reason, strict=True)]


def relevance_order(key: NDArray[np.float64], k: int) -> NDArray[np.intp]:
    """The rows of the ``k`` largest keys, best first, ties by row (an O(N) selection, then
    a stable sort of the k best)."""
    if len(key) > k:
        part = np.argpartition(-key, k - 1)[:k]
        return part[np.lexsort((part, -key[part]))]
    return np.argsort(-key, kind="stable")


def time_factors(rows: Rows, t_q: float, stale_ratio: float,
                 cfg: SearchConfig) -> NDArray[np.float64]:
    """Each row's time factor at ``t_q`` (:func:`scrubjay.timeline.time_factor`)."""
    _, reason = stale_reasons(rows.value, rows.pi, rows.tau, rows.valid_from, rows.valid_until,
                              rows.invalidated, t_q, stale_ratio)
    factor, _ = time_factor(reason, rows.t, t_q, superseded_weight=cfg.superseded_weight,
                            stale_weight=cfg.stale_weight, recency_weight=cfg.recency_weight,
                            recency_horizon_s=cfg.recency_horizon_s)
    return factor


def relevance_keys(rows: Rows, q: Query, *, stale_ratio: float, default_value: float,
                   cfg: SearchConfig, lexical: NDArray[np.float64] | None = None,
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(key, factor)``: the default ranking key of each row, ``relevance * V / V0 * factor``
    with ``relevance = (a*what + b*where) / (a + b)`` (the Eq. 6 weights) and ``factor`` its
    time factor; a memory told after ``q.t_q`` gets ``-inf`` (invisible at that time).

    ``lexical``: each row's lexical score ``ell`` in [0, 1]
    (:func:`scrubjay.fusion.lexical_score_idf`, 0 for rows without a lexical hit); when
    given and not all 0, ``relevance = (1 - lambda) * dense + lambda * ell``
    (:func:`scrubjay.fusion.fuse`, ``lambda = cfg.lexical_weight``)."""
    a, b = float(q.weights[0]), float(q.weights[1])
    rel = a * (rows.what @ q.e_q)
    if np.any(q.c_q):  # an empty context embeds to zero: its column adds nothing
        rel += b * (rows.where @ q.c_q)
    rel = rel / (a + b)
    if lexical is not None and lexical.any():
        rel = fuse(rel, lexical, cfg.lexical_weight)
    factor = time_factors(rows, q.t_q, stale_ratio, cfg)
    key = rel * rows.value / default_value * factor
    return np.where(visible(rows.t, q.t_q), key, -np.inf), factor


def rank_relevance(rows: Rows, q: Query, *, neighbours: Neighbours, stale_ratio: float,
                   default_value: float, cfg: SearchConfig,
                   outside: Outside | None = None,
                   lexical: NDArray[np.float64] | None = None) -> list[Hit]:
    """Rank by the default key (:func:`relevance_keys`). The hits carry their Eq. 5 parts,
    their time factor and their lexical score, with ``score`` the key."""
    key, factor = relevance_keys(rows, q, stale_ratio=stale_ratio, default_value=default_value,
                                 cfg=cfg, lexical=lexical)
    top = relevance_order(key, q.k)
    top = top[np.isfinite(key[top])]
    found = rank_paper(rows.take(top), q, neighbours=neighbours, stale_ratio=stale_ratio,
                       outside=outside)
    ell = lexical if lexical is not None and lexical.any() else None
    lam = cfg.lexical_weight if ell is not None else 0.0
    key_of = {rows.records[i].id: (float(key[i]), float(factor[i]),
                                   float(ell[i]) if ell is not None else 0.0) for i in top}
    order = {rows.records[i].id: n for n, i in enumerate(top)}
    return [replace(h, score=key_of[h.id][0], time_factor=key_of[h.id][1],
                    lexical=key_of[h.id][2], lexical_weight=lam)
            for h in sorted(found, key=lambda h: order[h.id])]


def rank_block(block: BufferBlock, q: Query, *, stale_ratio: float) -> list[Hit]:
    """:func:`rank_paper` of the buffered rows (not exhaustive), on the gathered block: the
    same arithmetic as :func:`partial_scores` and :func:`~scrubjay.decay.utility` (the block
    keeps ``pi / tau``), so the scores are the same floats; hits only for the best k."""
    e_q, c_q, weights, k, t_q = q.e_q, q.c_q, q.weights, q.k, q.t_q
    rows = block.rows
    a, b, g, d = weights  # float64 scalars: the products are float64, as in rank_paper
    sim_what = rows.what @ e_q
    u = rows.value * np.exp(-block.rate * np.maximum(0.0, t_q - rows.valid_from))
    if c_q.any():
        sim_where = rows.where @ c_q
        s_prime = a * sim_what + b * sim_where + g * u
    else:  # an empty context embeds to zero: its term adds exactly 0
        sim_where = np.zeros(len(rows), np.float32)
        s_prime = a * sim_what + g * u
    n = block.n_buf
    bonus = block_bonus(block, s_prime * u)
    m = max(4 * k, BONUS_FIRST)  # as rank_paper: the bonus counts for the top m by S'
    if m >= n:  # all of them: a stable sort by final score breaks ties by row, as below
        best = np.argsort(-(s_prime[:n] + d * bonus), kind="stable")[:k]
    else:
        top = np.argsort(-s_prime[:n], kind="stable")[:m]
        final = s_prime[top] + d * bonus[top]
        best = top[np.lexsort((top, -final))][:k]
    return hits(rows, best, s_prime, bonus, u, sim_what, sim_where, weights, t_q=t_q,
                stale_ratio=stale_ratio, from_buffer=True)
