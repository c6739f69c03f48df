"""Query-adaptive What-Where-When(-Graph) scoring (paper §3.3, Eq. 5-6). Pure numpy.

.. math::

    S(m_i, q, t_q) = a_q \\cos(w^{what}_i, e_q) + b_q \\cos(w^{where}_i, c_q)
                   + g_q U(m_i, t_q) + d_q \\Phi(m_i, G)

    [a_q, b_q, g_q, d_q] = \\mathrm{softmax}([1.5 + \\beta_{what} + 0.2 \\|e_q\\|,
        1.0 + \\beta_{where} + 0.1 \\|c_q\\|, 1.0 + \\beta_{when} + \\min(2, 0.2 \\log(\\Delta t_q + 1)),
        1.0 + \\beta_{graph}])
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from .config import WeightConfig

__all__ = ["adaptive_weights", "combine", "keyword_biases", "relevance_bound", "relevance_key"]

_COMPONENTS = ("what", "where", "when", "graph")
_WORD_RE = re.compile(r"[a-z0-9']+")


@lru_cache(maxsize=32)
def _keyword_table(table: tuple[tuple[str, float, tuple[str, ...]], ...]
                   ) -> tuple[tuple[int, float, frozenset[str], tuple[str, ...]], ...]:
    """Per component: its index, bias, single words (a set) and multi-word phrases."""
    return tuple((_COMPONENTS.index(comp), bias,
                  frozenset(kw for kw in keywords if " " not in kw),
                  tuple(kw for kw in keywords if " " in kw))
                 for comp, bias, keywords in table)


def keyword_biases(query: str, cfg: WeightConfig) -> NDArray[np.float64]:
    """Bias per component (what, where, when, graph) from the query's words (paper §3.3).

    A component's bias counts once, however many of its words occur. Multi-word keywords match
    as phrases.
    """
    return np.array(_keyword_bias_list(query, cfg))


def _keyword_bias_list(query: str, cfg: WeightConfig) -> list[float]:
    """:func:`keyword_biases` as a list."""
    lowered = query.lower()
    words = set(_WORD_RE.findall(lowered))
    out = [0.0, 0.0, 0.0, 0.0]
    for index, bias, singles, phrases in _keyword_table(cfg.keyword_biases):
        if not words.isdisjoint(singles) or any(p in lowered for p in phrases):
            out[index] += bias
    return out


def adaptive_weights(query: str, e_q_norm: float, c_q_norm: float, dt_q_s: float,
                     cfg: WeightConfig) -> NDArray[np.float64]:
    """The four weights of Eq. 6; they are positive and sum to 1.

    Parameters
    ----------
    query : str
        The query text (for the keyword biases).
    e_q_norm, c_q_norm : float
        Norms of the query and query-context embeddings (1 and 0 or 1 for unit embedders).
    dt_q_s : float
        Seconds from the newest memory to the query time (chosen, SPEC §3); clamped at 0.

    Examples
    --------
    No keyword, unit query, no context, no elapsed time:
    logits [1.7, 1, 1, 1], so a = e^0.7 / (e^0.7 + 3) = 2.0138 / 5.0138.

    >>> [round(float(w), 4) for w in adaptive_weights("my dog", 1.0, 0.0, 0.0, WeightConfig())]
    [0.4016, 0.1995, 0.1995, 0.1995]
    """
    when_term = min(cfg.when_log_cap, cfg.when_log_coef * math.log(max(0.0, dt_q_s) + 1.0))
    # four numbers: Python floats (numpy's per-call cost is most of this on every search)
    logits = [b + k + x for b, k, x in zip(
        cfg.base_logits, _keyword_bias_list(query, cfg),
        (cfg.what_norm_coef * e_q_norm, cfg.where_norm_coef * c_q_norm, when_term, 0.0),
        strict=True)]
    top = max(logits)
    z = [math.exp(v - top) for v in logits]
    total = math.fsum(z)
    return np.array([v / total for v in z])


def combine(weights: NDArray[np.float64], what: NDArray[np.floating],
            where: NDArray[np.floating], when: NDArray[np.floating],
            graph: NDArray[np.floating]) -> NDArray[np.float64]:
    """``S = a*what + b*where + g*when + d*graph`` for arrays of components."""
    a, b, g, d = (float(w) for w in weights)
    return (a * np.asarray(what, np.float64) + b * np.asarray(where, np.float64)
            + g * np.asarray(when, np.float64) + d * np.asarray(graph, np.float64))


def relevance_key(weights: NDArray[np.float64], what: NDArray[np.floating],
                  where: NDArray[np.floating], value: NDArray[np.floating],
                  default_value: float) -> NDArray[np.float64]:
    """The default ranking key ``(a*what + b*where) / (a + b) * value / default_value``.

    >>> relevance_key(np.array([0.4, 0.2, 0.2, 0.2]), np.array([0.9]), np.array([0.5]),
    ...               np.array([0.5]), 1.0)   # (0.36 + 0.1) / 0.6 * 0.5
    array([0.38333333])
    """
    a, b = float(weights[0]), float(weights[1])
    rel = a * np.asarray(what, np.float64) + b * np.asarray(where, np.float64)
    return rel / (a + b) * np.asarray(value, np.float64) / default_value


def drifted_similarity_bound(similarity: float, drift_rad: float) -> float:
    """The largest cosine a vector can have to a query when another vector at most
    ``drift_rad`` radians from it has cosine ``similarity`` (triangle inequality on angles).

    >>> drifted_similarity_bound(0.5, 0.0)
    0.5
    >>> round(drifted_similarity_bound(0.5, math.pi / 3), 12)   # 60 degrees back to 0
    1.0
    """
    angle = math.acos(max(-1.0, min(1.0, float(similarity))))
    return math.cos(max(0.0, angle - drift_rad)) if drift_rad > 0.0 else max(-1.0, min(
        1.0, float(similarity)))


def relevance_bound(weights: NDArray[np.float64], what_max: float, where_max: float,
                    value_max: float, default_value: float) -> float:
    """An upper bound of :func:`relevance_key` over memories whose what-similarity is at most
    ``what_max``, where-similarity at most ``where_max`` and value (>= 0) at most ``value_max``.

    A negative relevance times a value >= 0 is at most 0, hence the clamp. Here
    ``(0.4 * 0.6 + 0) / 0.6 * 2 / 1 = 0.8``:

    >>> round(relevance_bound(np.array([0.4, 0.2, 0.2, 0.2]), 0.6, 0.0, 2.0, 1.0), 12)
    0.8
    >>> relevance_bound(np.array([0.4, 0.2, 0.2, 0.2]), -0.3, 0.0, 2.0, 1.0)  # clamped
    0.0
    """
    a, b = float(weights[0]), float(weights[1])
    rel = max(0.0, (a * what_max + b * where_max) / (a + b))
    return rel * value_max / default_value
