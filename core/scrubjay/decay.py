"""Perishability-aware utility (paper §3.2, Eq. 3). Pure functions of arrays; time is a parameter.

.. math:: U(m_i, t_q) = V_i \\exp(-\\pi_i (t_q - t_i) / \\tau_i)

A query time before the memory's creation counts as age 0 (documented fallback: a memory is not
more useful than new before it exists).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["is_stale", "stale_age_s", "utility", "utility_scalar"]


def utility(value: ArrayLike, pi: ArrayLike, tau_s: ArrayLike, created_at_s: ArrayLike,
            at_s: float) -> NDArray[np.float64]:
    """Vectorised ``U = V exp(-pi * max(0, at - t) / tau)``.

    Parameters
    ----------
    value, pi, tau_s, created_at_s : array_like
        Base value (>= 0), perishability in (0, 1], horizon (> 0 s) and creation time (epoch s).
    at_s : float
        Query time, epoch seconds.

    Returns
    -------
    ndarray of float64, each in ``[0, value]`` and non-increasing in ``at_s``.

    Examples
    --------
    An ephemeral memory (pi 0.9, tau 2 h) two hours old keeps ``exp(-0.9)`` of its value:

    >>> float(utility(1.0, 0.9, 7200.0, 0.0, 7200.0).round(4))
    0.4066
    """
    age = np.maximum(0.0, at_s - np.asarray(created_at_s, dtype=np.float64))
    rate = np.asarray(pi, dtype=np.float64) / np.asarray(tau_s, dtype=np.float64)
    return np.asarray(value, dtype=np.float64) * np.exp(-rate * age)


def utility_scalar(value: float, pi: float, tau_s: float, created_at_s: float,
                   at_s: float) -> float:
    """The reference (scalar, pure-Python) form of :func:`utility`, used to test the vector one."""
    age = max(0.0, at_s - created_at_s)
    return value * math.exp(-pi * age / tau_s)


def is_stale(utility_: ArrayLike, value: ArrayLike, stale_ratio: float) -> NDArray[np.bool_]:
    """``U / V < stale_ratio``; a memory whose value RCI drove to 0 is stale."""
    u = np.asarray(utility_, dtype=np.float64)
    v = np.asarray(value, dtype=np.float64)
    positive = v > 0
    ratio = np.where(positive, u / np.where(positive, v, 1.0), 0.0)  # never divides by 0
    return np.asarray(ratio < stale_ratio)


def stale_age_s(pi: float, tau_s: float, stale_ratio: float) -> float:
    """Age at which a memory turns stale: ``tau * ln(1 / stale_ratio) / pi``.

    >>> round(stale_age_s(0.9, 7200.0, 0.5) / 3600, 2)   # ephemeral: about 1.5 hours
    1.54
    """
    return tau_s * math.log(1.0 / stale_ratio) / pi
