"""Prospective memory buffer (paper §3.6, Eq. 13, Proposition 2). Pure numpy.

Before a task T::

    P(m_i | T) = sigmoid(v_T . w_what_i + u_T . w_where_i + b_T)
    B_T        = top-K { P(m_i | T) * U(m_i, t_0) }

with the light, parameter-free task encoder ``v_T = s_what Enc(task)``,
``u_T = s_where Enc(task context)`` and bias ``b_T`` (chosen, see :class:`BufferConfig`). At query
time the buffer is scored first (O(K)); when its best score reaches ``theta_B`` the answer comes
from it, otherwise from the full store (expected cost ``K + (1 - P_hit) N``, Proposition 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .config import BufferConfig

__all__ = ["task_probability", "select_buffer", "BufferState"]


def task_probability(what: NDArray[np.floating], where: NDArray[np.floating],
                     e_task: NDArray[np.floating], c_task: NDArray[np.floating],
                     cfg: BufferConfig) -> NDArray[np.float64]:
    """``P(m | T)`` for each row (Eq. 13).

    >>> cfg = BufferConfig()
    >>> p = task_probability(np.array([[1.0, 0]]), np.zeros((1, 2)), np.array([1.0, 0]),
    ...                      np.zeros(2), cfg)
    >>> round(float(p[0]), 4)   # sigmoid(4 * 1 + 2 * 0 - 1) = sigmoid(3)
    0.9526
    """
    logit = (cfg.task_what_scale * (np.asarray(what, np.float64) @ np.asarray(e_task, np.float64))
             + cfg.task_where_scale * (np.asarray(where, np.float64)
                                       @ np.asarray(c_task, np.float64))
             + cfg.task_bias)
    return 1.0 / (1.0 + np.exp(-logit))


def select_buffer(prob: NDArray[np.floating], utility: NDArray[np.floating],
                  size: int) -> NDArray[np.intp]:
    """Indices of the top-``size`` rows by ``P * U``, best first (ties by index)."""
    priority = np.asarray(prob, np.float64) * np.asarray(utility, np.float64)
    if len(priority) <= size:
        return np.argsort(-priority, kind="stable")
    part = np.argpartition(-priority, size - 1)[:size]
    return part[np.lexsort((part, -priority[part]))]


@dataclass(frozen=True, slots=True, kw_only=True)
class BufferState:
    """The loaded buffer: the task it was prepared for and its memory ids, best first."""

    task: str
    context: str
    prepared_at_s: float
    ids: tuple[str, ...]
