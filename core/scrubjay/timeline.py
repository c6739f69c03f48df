"""A memory's place in time at a query time: visible, current, outdated, and why. Pure numpy.

A memory has four times: when it was told (``t``, ``recorded_at``), when what it says is or
becomes true (``valid_from``, ``t`` unless stated), when it stops being true (``valid_until``,
when the text states an end) and when a later memory replaced it (``invalidated``). At a query
time ``t_q``:

* it is **visible** when it was told by then (``t <= t_q``): a search at ``t_q`` answers as the
  memory would have then;
* its utility decays from ``valid_from``: ``U = V exp(-pi max(0, t_q - valid_from) / tau)``, so a
  memory about a future event does not decay before the event;
* it is **stale**, with one reason, the first that holds of: *superseded* (``invalidated <=
  t_q``), *window ended* (``valid_until < t_q``), *decayed* (``U / V < stale_ratio``).

The default ranking multiplies a memory's relevance by its **time factor** (:func:`time_factor`),
which is at most 1 and at least ``(1 - superseded_weight)(1 - recency_weight)``: time reorders
memories of comparable relevance (a superseded memory sinks below its replacement, a stale one
below a current one within ``stale_weight`` of its relevance, the newer of two near-duplicates
comes first), and never lifts an unrelated memory over a relevant one.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .decay import is_stale, utility

__all__ = ["CURRENT", "DECAYED", "ENDED", "REASONS", "SUPERSEDED", "stale_reasons",
           "time_factor", "visible"]

#: Stale reason codes (:func:`stale_reasons`), and their names on a hit.
CURRENT, DECAYED, ENDED, SUPERSEDED = 0, 1, 2, 3
REASONS = {DECAYED: "decayed", ENDED: "window ended", SUPERSEDED: "superseded"}


def visible(t: NDArray[np.float64], t_q: float) -> NDArray[np.bool_]:
    """Which memories were told by ``t_q``."""
    return np.asarray(t <= t_q)


def stale_reasons(value: NDArray[np.float64], pi: NDArray[np.float64],
                  tau: NDArray[np.float64], valid_from: NDArray[np.float64],
                  valid_until: NDArray[np.float64], invalidated: NDArray[np.float64],
                  t_q: float, stale_ratio: float
                  ) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
    """``(U, reason)`` of each memory at ``t_q``: the utility (decaying from ``valid_from``)
    and :data:`CURRENT` or the first stale reason that holds.

    >>> u, why = stale_reasons(np.array([1.0, 1.0, 1.0]), np.array([0.5] * 3),
    ...                        np.array([3600.0] * 3), np.array([0.0, 0.0, 9e9]),
    ...                        np.array([np.inf, 10.0, np.inf]), np.array([np.inf] * 3),
    ...                        100.0, 0.5)
    >>> why.tolist()   # current; its window ended at 10; a future event (no decay yet)
    [0, 2, 0]
    """
    u = utility(value, pi, tau, valid_from, t_q)
    reason = np.where(invalidated <= t_q, SUPERSEDED,
                      np.where(valid_until < t_q, ENDED,
                               np.where(is_stale(u, value, stale_ratio), DECAYED, CURRENT)))
    return u, reason.astype(np.int8)


def time_factor(reason: NDArray[np.int8], t: NDArray[np.float64], t_q: float, *,
                superseded_weight: float, stale_weight: float, recency_weight: float,
                recency_horizon_s: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(factor, recency)`` of each memory:

    ``factor = (1 - superseded_weight [superseded]) (1 - stale_weight [stale otherwise])
    (1 - recency_weight (1 - recency))``, ``recency = exp(-max(0, t_q - t) / recency_horizon_s)``.

    >>> f, r = time_factor(np.array([0, 3], np.int8), np.array([100.0, 0.0]), 100.0,
    ...                    superseded_weight=0.5, stale_weight=0.25, recency_weight=0.1,
    ...                    recency_horizon_s=100.0)
    >>> [round(float(x), 4) for x in f]   # told now; superseded, told 100 s ago
    [1.0, 0.4684]
    """
    recency = np.exp(-np.maximum(0.0, t_q - t) / recency_horizon_s)
    factor = np.where(reason == SUPERSEDED, 1.0 - superseded_weight, 1.0)
    factor = factor * np.where((reason != CURRENT) & (reason != SUPERSEDED),
                               1.0 - stale_weight, 1.0)
    return factor * (1.0 - recency_weight * (1.0 - recency)), recency
