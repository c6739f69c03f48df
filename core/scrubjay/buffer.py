"""Prospective memory buffer (paper §3.6, Eq. 13, Proposition 2). No I/O.

Before a task T::

    P(m_i | T) = sigmoid(v_T . w_what_i + u_T . w_where_i + b_T)
    B_T        = top-K { P(m_i | T) * U(m_i, t_0) }

with the light, parameter-free task encoder ``v_T = s_what Enc(task)``,
``u_T = s_where Enc(task context)`` and bias ``b_T`` (chosen, see :class:`BufferConfig`). At query
time the buffer is scored first (O(K)); when its best score reaches ``theta_B`` the answer comes
from it, otherwise from the full store (expected cost ``K + (1 - P_hit) N``, Proposition 2).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .config import BufferConfig
from .graph import EpisodicGraph
from .mirror import Mirror, Rows
from .types import MemoryRecord

__all__ = [
    "BufferBlock",
    "BufferState",
    "block_bonus",
    "gather_block",
    "select_buffer",
    "task_probability",
]


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

    def dumps(self) -> str:
        """The state as stored in the namespace's collection metadata (JSON)."""
        return json.dumps({"task": self.task, "context": self.context, "at": self.prepared_at_s,
                           "ids": list(self.ids)})

    @classmethod
    def loads(cls, payload: str) -> BufferState:
        """The inverse of :meth:`dumps`; ``ValueError`` (or ``KeyError``, ``TypeError``) when
        the payload is unreadable."""
        b = json.loads(payload)
        return cls(task=b["task"], context=b["context"], prepared_at_s=float(b["at"]),
                   ids=tuple(b["ids"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class BufferBlock:
    """The buffered memories and their graph neighbours, gathered once per buffer so that a
    buffered search costs one small block of arithmetic (embedded stores).

    ``rows`` holds the buffered memories first (``n_buf`` of them, in buffer order), then their
    neighbours outside the buffer. Edge ``e`` joins buffered row ``src[e]`` to block row
    ``dst[e]`` with weight ``weight[e]``, grouped by ``src`` in the graph's neighbour order.
    ``rate`` is ``pi / tau`` of each row (the decay rate of :func:`~scrubjay.decay.utility`).
    """

    rows: Rows
    n_buf: int
    src: NDArray[np.intp]
    dst: NDArray[np.intp]
    weight: NDArray[np.float64]
    rate: NDArray[np.float64]
    rci_newest: float = -math.inf
    """The latest RCI update of a row (a search before it is answered by the full search)."""


def gather_block(ids: Sequence[str], mirror: Mirror, graph: EpisodicGraph) -> BufferBlock:
    """The :class:`BufferBlock` of the buffered ``ids`` (those still in ``mirror``)."""
    row_of = mirror.row_of
    taken = [row_of[m] for m in ids if m in row_of]
    pos = {row: i for i, row in enumerate(taken)}
    src: list[int] = []
    dst: list[int] = []
    weight: list[float] = []
    for i, mid in enumerate(m for m in ids if m in row_of):
        for j, w in graph.neighbors(mid):
            row = row_of.get(j)
            if row is None:  # not in the mirror: contributes nothing (S' U taken as 0)
                continue
            if row not in pos:
                pos[row] = len(taken)
                taken.append(row)
            src.append(i)
            dst.append(pos[row])
            weight.append(w)
    n_buf = len([m for m in ids if m in row_of])
    rows = mirror.view().take(taken)
    return BufferBlock(rows=rows, n_buf=n_buf,
                       src=np.asarray(src, dtype=np.intp), dst=np.asarray(dst, dtype=np.intp),
                       weight=np.asarray(weight, dtype=np.float64), rate=rows.pi / rows.tau,
                       rci_newest=rci_newest(rows.records))


def rci_newest(records: Sequence[MemoryRecord]) -> float:
    """The time of the latest RCI update of ``records`` that kept its deltas (-inf: none)."""
    return max((r.updated_at_s for r in records if r.rci_deltas and r.updated_at_s is not None),
               default=-math.inf)


def block_bonus(block: BufferBlock, su: NDArray[np.float64]) -> NDArray[np.float64]:
    """``Phi(i) = sum_j e_ij S'(j) U(j)`` (paper Eq. 8) for the block's buffered rows, given
    ``su = S' U`` over all block rows; each row's terms are added in neighbour order.

    >>> rows = Rows.build([], np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32))
    >>> b = BufferBlock(rows=rows, n_buf=2, src=np.array([0, 0, 1]), dst=np.array([1, 2, 0]),
    ...                 weight=np.array([0.5, 1.0, 2.0]), rate=np.zeros(3))
    >>> block_bonus(b, np.array([1.0, 2.0, 3.0])).tolist()   # [0.5*2 + 1*3, 2*1]
    [4.0, 2.0]
    """
    return np.bincount(block.src, weights=block.weight * su[block.dst],
                       minlength=block.n_buf).astype(np.float64, copy=False)
