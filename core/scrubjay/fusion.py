"""Fusion of the lexical channel (BM25) with the dense what/where relevance. Pure numpy.

The fused relevance of memory ``m`` for query ``q`` is a convex combination of the dense
relevance and the share of the query's information that ``m`` matches:

.. math::

    r(m, q) = (1 - \\lambda) \\, d(m, q) + \\lambda \\, \\ell(m, q),
    \\qquad
    \\ell(m, q) = \\min\\Big(1, \\frac{\\mathrm{BM25}(m, q)}{\\sum_{t \\in q} \\mathrm{idf}(t)}\\Big)

where ``d = (a cos_what + b cos_where) / (a + b)`` is the dense relevance the memory already
ranks by (in [-1, 1]) and ``lambda`` is :data:`LEXICAL_WEIGHT`. ``ell`` is in [0, 1]: near 1 for
a memory holding every query term, small for one that matches only common words, 0 for a
memory that matches no query term or is not among the :data:`LEXICAL_CANDIDATES` lexical hits.
A query without lexical hits (only stop words or punctuation, or no term in any memory) ranks
by ``d`` alone.

Why this form (docs/hybrid.md has the measurements, all on the training split):

- A convex combination keeps ``r`` on the dense relevance's scale, so the memory's ranking key
  ``r * value / default_value`` (and its upper bounds: ``ell <= 1``) keep their meaning, and each
  hit can report ``lexical = ell`` beside ``what`` and ``where``.
- Scores, not ranks: reciprocal rank fusion (:func:`weighted_rrf`, kept as the baseline)
  throws the magnitudes away, so a memory far ahead on one channel gains nothing from the gap.
  Tuned the same way it was below both convex forms (leave-one-conversation-out recall@5).
- Calibrated by the query's idf, not by its best hit: scaling by the best BM25
  (:func:`lexical_score`) was 0.007 ahead in leave-one-out recall@5 on the training split
  (0.5445 against 0.5373, within the noise of 995 questions), but it gives ``ell = 1`` to the
  best hit however weak: when a question's only words in the memory are common ones ("What is
  the user's job?" against memories that all say "the user"), every such memory gets
  ``ell`` near 1 and the lexical share outvotes the dense relevance that knows "job" means a
  career. The idf form gives those matches the small share of the query they are.
- ``lambda`` = 0.8 favours the lexical channel: on conversations, names, dates and rare
  words carry most of what a question asks, and the 256-d static embedder blurs them; the
  dense share still breaks BM25's ties and finds paraphrases BM25 cannot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "LEXICAL_CANDIDATES",
    "LEXICAL_WEIGHT",
    "fuse",
    "fuse_reference",
    "lexical_score",
    "lexical_score_idf",
    "weighted_rrf",
    "weighted_rrf_reference",
]

LEXICAL_WEIGHT = 0.8
"""``lambda``: the lexical share of the fused relevance, with ``ell = min(1, BM25 / sum idf)``
(chosen on the training split, LoCoMo conversations 1-5 and TGT seeds 5-9, by
``scripts/hybrid_fusion_cv.py``: the grid 0, 0.05, ..., 1 maximising recall@5 with TGT factual
accuracy kept at BM25's; see docs/hybrid.md)."""

LEXICAL_CANDIDATES = 100
"""Lexical hits taken into candidate generation beside the dense ones (chosen: the BM25
100th score is already small; ``ell`` = 0 is assumed past it)."""


def lexical_score(bm25: NDArray[np.floating] | Sequence[float],
                  top: float | None = None) -> NDArray[np.float64]:
    """``ell = BM25 / top`` clipped to [0, 1], ``top`` the query's best BM25 score (default:
    the largest of ``bm25``); all 0 when ``top <= 0`` (no lexical hit).

    >>> lexical_score([4.0, 1.0, 0.0]).tolist()
    [1.0, 0.25, 0.0]
    >>> lexical_score([0.0, 0.0]).tolist()
    [0.0, 0.0]
    """
    s = np.asarray(bm25, dtype=np.float64)
    best = float(s.max(initial=0.0)) if top is None else float(top)
    if not best > 0.0:
        return np.zeros_like(s)
    return np.clip(s / best, 0.0, 1.0)


def lexical_score_idf(bm25: NDArray[np.floating] | Sequence[float],
                      idf_sum: float) -> NDArray[np.float64]:
    """The lexical score the ranking uses, ``ell = min(1, BM25 / sum of the query terms' idf)``
    (see the module docstring); all 0 when ``idf_sum <= 0``.

    >>> lexical_score_idf([4.0, 1.0, 0.0], 2.0).tolist()
    [1.0, 0.5, 0.0]
    """
    s = np.asarray(bm25, dtype=np.float64)
    if not idf_sum > 0.0:
        return np.zeros_like(s)
    return np.minimum(1.0, np.maximum(0.0, s) / idf_sum)


def fuse(dense: NDArray[np.floating] | Sequence[float],
         lexical: NDArray[np.floating] | Sequence[float],
         lexical_weight: float = LEXICAL_WEIGHT) -> NDArray[np.float64]:
    """``r = (1 - lambda) * dense + lambda * lexical``, elementwise.

    >>> fuse([0.4, 0.8], [1.0, 0.0], 0.5).tolist()   # 0.5*0.4 + 0.5*1, 0.5*0.8
    [0.7, 0.4]
    """
    if not 0.0 <= lexical_weight <= 1.0:
        raise ValueError(f"The 'lexical_weight' parameter of fuse must be in [0, 1]. Got "
                         f"{lexical_weight!r} instead.")
    d = np.asarray(dense, dtype=np.float64)
    ell = np.asarray(lexical, dtype=np.float64)
    return (1.0 - lexical_weight) * d + lexical_weight * ell


def fuse_reference(dense: Sequence[float], bm25: Sequence[float],
                   lexical_weight: float = LEXICAL_WEIGHT) -> list[float]:
    """Slow pure-Python ``fuse(dense, lexical_score(bm25), lexical_weight)`` (the tests'
    reference)."""
    top = max([0.0, *bm25])
    out = []
    for d, b in zip(dense, bm25, strict=True):
        ell = min(1.0, max(0.0, b / top)) if top > 0 else 0.0
        out.append((1.0 - lexical_weight) * d + lexical_weight * ell)
    return out


def weighted_rrf(lexical_rank: NDArray[np.integer] | Sequence[int],
                 dense_rank: NDArray[np.integer] | Sequence[int], *, k: float = 60.0,
                 lexical_weight: float = 0.5) -> NDArray[np.float64]:
    """Weighted reciprocal rank fusion ``w / (k + r_lex) + (1 - w) / (k + r_dense)``, ranks
    from 1; a rank of 0 or less means "not ranked by that channel" and adds nothing.

    >>> [round(x, 6) for x in weighted_rrf([1, 0], [2, 1], k=60).tolist()]   # .5/61+.5/62, .5/61
    [0.016261, 0.008197]
    """
    rl = np.asarray(lexical_rank, dtype=np.float64)
    rd = np.asarray(dense_rank, dtype=np.float64)
    with np.errstate(divide="ignore"):
        part_l = np.where(rl > 0, lexical_weight / (k + rl), 0.0)
        part_d = np.where(rd > 0, (1.0 - lexical_weight) / (k + rd), 0.0)
    return np.asarray(part_l + part_d, dtype=np.float64)


def weighted_rrf_reference(lexical_rank: Sequence[int], dense_rank: Sequence[int], *,
                           k: float = 60.0, lexical_weight: float = 0.5) -> list[float]:
    """Slow pure-Python :func:`weighted_rrf` (the tests' reference)."""
    out = []
    for rl, rd in zip(lexical_rank, dense_rank, strict=True):
        s = 0.0
        if rl > 0:
            s += lexical_weight / (k + rl)
        if rd > 0:
            s += (1.0 - lexical_weight) / (k + rd)
        out.append(s)
    return out
