"""A memory's place in time at a query time: visible, current, outdated, and why. Pure numpy.

A memory has four times: when it was told (``t``, ``recorded_at``), when what it says is or
becomes true (``valid_from``, ``t`` unless stated), when it stops being true (``valid_until``,
when the text states an end) and when a later memory replaced it (``invalidated``). At a query
time ``t_q``:

* it is **visible** when it was told by then (``t <= t_q``): a search at ``t_q`` answers as the
  memory would have then;
* its utility decays from ``valid_from``: ``U = V exp(-pi max(0, t_q - valid_from) / tau)``, so a
  memory about a future event does not decay before the event;
* its value, perishability and horizon are those it had at ``t_q``: RCI's updates are kept as
  time-stamped deltas (``MemoryRecord.rci_deltas``) and those made after ``t_q`` are taken back
  (:func:`state_as_of`);
* it is **stale**, with one reason, the first that holds of: *superseded* (``invalidated <=
  t_q``), *window ended* (``valid_until < t_q``), *decayed* (``U / V < stale_ratio``).

The default ranking multiplies a memory's relevance by its **time factor** (:func:`time_factor`),
which is at most 1 and at least ``(1 - superseded_weight)(1 - recency_weight)``: time reorders
memories of comparable relevance (a superseded memory sinks below its replacement, a stale one
below a current one within ``stale_weight`` of its relevance, the newer of two near-duplicates
comes first), and never lifts an unrelated memory over a relevant one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from .decay import is_stale, utility
from .types import MemoryRecord

__all__ = ["CURRENT", "DECAYED", "ENDED", "RCI_DELTAS_MAX", "REASONS", "SUPERSEDED",
           "add_delta", "records_as_of", "stale_reasons", "state_as_of", "time_factor",
           "visible"]

#: Stale reason codes (:func:`stale_reasons`), and their names on a hit.
CURRENT, DECAYED, ENDED, SUPERSEDED = 0, 1, 2, 3
REASONS = {DECAYED: "decayed", ENDED: "window ended", SUPERSEDED: "superseded"}


#: RCI deltas kept per memory (chosen: a memory that many events touched keeps ~2 kB of them);
#: beyond, the two oldest merge into one at the later one's time, so that an as-of query
#: between them sees the state before both.
RCI_DELTAS_MAX = 32

Delta = tuple[float, float, float, float]


def add_delta(deltas: tuple[Delta, ...], at_s: float, old: tuple[float, float, float],
              new: tuple[float, float, float]) -> tuple[Delta, ...]:
    """``deltas`` with the update at ``at_s`` from state ``old`` to ``new`` (``(value, pi,
    tau_s)`` each) appended, at most :data:`RCI_DELTAS_MAX` kept.

    >>> add_delta((), 10.0, (1.0, 0.5, 60.0), (0.5, 0.6, 30.0))
    ((10.0, -0.5, 0.09999999999999998, 0.5),)
    """
    d = (float(at_s), new[0] - old[0], new[1] - old[1], new[2] / old[2] if old[2] else 1.0)
    out = (*deltas, d)
    while len(out) > RCI_DELTAS_MAX:
        (_, v1, p1, f1), (t2, v2, p2, f2) = out[0], out[1]
        out = ((t2, v1 + v2, p1 + p2, f1 * f2), *out[2:])
    return out


def state_as_of(rec: MemoryRecord, t_q: float) -> tuple[float, float, float] | None:
    """``(value, pi, tau_s)`` of ``rec`` at ``t_q`` when RCI updated it after ``t_q`` (today's
    state with those deltas taken back), else None (today's state holds at ``t_q``).

    >>> r = MemoryRecord(id="a", text="t", context="", label="factual", pi=0.6, tau_s=30.0,
    ...                  value=0.5, created_at_s=0.0, updated_at_s=10.0,
    ...                  rci_deltas=((10.0, -0.5, 0.1, 0.5),))
    >>> state_as_of(r, 5.0), state_as_of(r, 10.0)
    ((1.0, 0.5, 60.0), None)
    """
    later = [d for d in rec.rci_deltas if d[0] > t_q]
    if not later:
        return None
    value, pi, tau = rec.value, rec.pi, rec.tau_s
    for _, dv, dpi, factor in later:
        value -= dv
        pi -= dpi
        tau = tau / factor if factor > 0 else tau
    return max(0.0, value), min(1.0, max(1e-9, pi)), max(1e-9, tau)


def records_as_of(records: Sequence[MemoryRecord], t_q: float
                  ) -> tuple[list[MemoryRecord], list[int]]:
    """``records`` as they were at ``t_q`` (value, pi, tau_s and ``updated_at_s`` of the RCI
    updates made after it taken back), and the positions that changed."""
    out, changed = list(records), []
    for i, rec in enumerate(records):
        if rec.updated_at_s is None or rec.updated_at_s <= t_q or not rec.rci_deltas:
            continue
        state = state_as_of(rec, t_q)
        if state is None:
            continue
        kept = [d for d in rec.rci_deltas if d[0] <= t_q]
        out[i] = replace(rec, value=state[0], pi=state[1], tau_s=state[2],
                         updated_at_s=max((d[0] for d in kept), default=None))
        changed.append(i)
    return out, changed


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
