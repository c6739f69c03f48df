"""The Episodic Memory Unit's vectors (paper §3.1, Eq. 2). Pure numpy."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from .config import FusionConfig

__all__ = ["fused_vector", "gate_vector", "l2_normalize"]

_EPS = 1e-12


def l2_normalize(x: NDArray[np.floating]) -> NDArray[np.float32]:
    """Row-wise L2 normalisation; an all-zero row stays zero (an empty context has no 'where')."""
    arr = np.asarray(x, dtype=np.float32)
    # np.linalg.norm's own arithmetic for float rows, without its per-call checks (a query
    # embeds one row on every search)
    norms: NDArray[np.float32] = np.sqrt(np.add.reduce(arr * arr, axis=-1, keepdims=True))
    big = norms > _EPS
    if big.all():  # the usual case: no zero row, so no selection either (the same floats)
        return arr / norms
    return np.where(big, arr / np.maximum(norms, _EPS), 0.0).astype(np.float32)


def gate_vector(what: NDArray[np.floating], where: NDArray[np.floating]) -> NDArray[np.float32]:
    """The parameter-free gate ``g = L2(w_what * w_where)`` (chosen; SPEC §1)."""
    return l2_normalize(np.asarray(what) * np.asarray(where))


def fused_vector(what: NDArray[np.floating], where: NDArray[np.floating], created_at_s: float,
                 tau_s: float, cfg: FusionConfig | None = None) -> NDArray[np.float32]:
    """``h = L2(0.55 w_what + 0.35 w_where + 0.10 g)``, then the 'when' offsets (paper Eq. 2).

    ``h[0] += log(t + 1) mod P`` and ``h[1] += log(tau + 1) mod P``.

    >>> h = fused_vector(np.array([1.0, 0, 0]), np.array([0, 1.0, 0]), 0.0, 0.0)
    >>> [round(float(v), 3) for v in h]
    [0.844, 0.537, 0.0]
    """
    cfg = cfg or FusionConfig()
    what = l2_normalize(what)
    where = l2_normalize(where)
    h = l2_normalize(cfg.what * what + cfg.where * where + cfg.gate * gate_vector(what, where))
    h = h.astype(np.float32).copy()
    if h.shape[-1] >= 2:
        h[..., 0] += math.log(created_at_s + 1.0) % cfg.period
        h[..., 1] += math.log(tau_s + 1.0) % cfg.period
    return h
