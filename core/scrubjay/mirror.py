"""An in-memory copy of one namespace as aligned numpy arrays (embedded stores).

Rows are appended in amortised O(1) (capacity doubling) and removed by swapping in the last row.
The arrays are the input of the vectorised scoring; Chroma stays the source of truth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .timeline import records_as_of
from .types import MemoryRecord

__all__ = ["Mirror", "Rows", "rows_as_of"]


@dataclass(slots=True)
class Rows:
    """Aligned arrays for a set of memories (a mirror view or a fetched candidate block)."""

    records: list[MemoryRecord]
    what: NDArray[np.float32]
    where: NDArray[np.float32]
    value: NDArray[np.float64]
    pi: NDArray[np.float64]
    tau: NDArray[np.float64]
    t: NDArray[np.float64]
    valid_from: NDArray[np.float64]
    """When each memory is or becomes true (its ``t`` unless stated)."""
    valid_until: NDArray[np.float64]
    """When each stops being true (``inf``: no stated end)."""
    invalidated: NDArray[np.float64]
    """When a later memory replaced each (``inf``: none did)."""

    def __len__(self) -> int:
        return len(self.records)

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.records]

    @classmethod
    def build(cls, records: Sequence[MemoryRecord], what: NDArray[np.float32],
              where: NDArray[np.float32]) -> Rows:
        return cls(records=list(records), what=what, where=where,
                   value=np.array([r.value for r in records], dtype=np.float64),
                   pi=np.array([r.pi for r in records], dtype=np.float64),
                   tau=np.array([r.tau_s for r in records], dtype=np.float64),
                   t=np.array([r.created_at_s for r in records], dtype=np.float64),
                   **temporal_arrays(records))

    def take(self, idx: Sequence[int] | NDArray[np.intp]) -> Rows:
        idx = np.asarray(idx, dtype=np.intp)
        return Rows(records=[self.records[i] for i in idx], what=self.what[idx],
                    where=self.where[idx], value=self.value[idx], pi=self.pi[idx],
                    tau=self.tau[idx], t=self.t[idx], valid_from=self.valid_from[idx],
                    valid_until=self.valid_until[idx], invalidated=self.invalidated[idx])


def rows_as_of(rows: Rows, t_q: float) -> Rows:
    """``rows`` as they were at ``t_q``: the records RCI updated after ``t_q`` with those
    updates taken back (:func:`scrubjay.timeline.records_as_of`), in new arrays; ``rows``
    itself when none was."""
    records, changed = records_as_of(rows.records, t_q)
    if not changed:
        return rows
    idx = np.asarray(changed, dtype=np.intp)
    value, pi, tau = rows.value.copy(), rows.pi.copy(), rows.tau.copy()
    value[idx] = [records[i].value for i in changed]
    pi[idx] = [records[i].pi for i in changed]
    tau[idx] = [records[i].tau_s for i in changed]
    return replace(rows, records=records, value=value, pi=pi, tau=tau)


def temporal_arrays(records: Sequence[MemoryRecord]) -> dict[str, NDArray[np.float64]]:
    """``valid_from``, ``valid_until`` and ``invalidated`` of :class:`Rows` for ``records``."""
    inf = math.inf
    return {"valid_from": np.array([r.created_at_s if r.valid_from_s is None else r.valid_from_s
                                    for r in records], dtype=np.float64),
            "valid_until": np.array([inf if r.valid_until_s is None else r.valid_until_s
                                     for r in records], dtype=np.float64),
            "invalidated": np.array([inf if r.invalidated_at_s is None else r.invalidated_at_s
                                     for r in records], dtype=np.float64)}


class Mirror:
    """All memories of a namespace, growable, with an id -> row map."""

    # the row arrays, allocated (and grown) by _alloc
    _what: NDArray[np.float32]
    _where: NDArray[np.float32]
    _value: NDArray[np.float64]
    _pi: NDArray[np.float64]
    _tau: NDArray[np.float64]
    _t: NDArray[np.float64]
    _vfrom: NDArray[np.float64]
    _vuntil: NDArray[np.float64]
    _inv: NDArray[np.float64]
    wdeg: NDArray[np.float64]
    drift: NDArray[np.float64]

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.n = 0
        self.version = 0  # bumped by every write: caches built from the mirror compare it
        self._maxima: tuple[int, float, float] | None = None
        self._cap = 0
        self.row_of: dict[str, int] = {}
        self._records: list[MemoryRecord] = []
        self._alloc(1024)
        self.wdeg = np.zeros(self._cap)  # weighted degree, for the exactness bound of Phi
        self.drift = np.zeros(self._cap)  # angle bound, indexed vs exact what (store.py)
        # upper bounds over the rows RCI updated: the latest update's time, and the largest
        # value one of them had at any time (an as-of search takes updates back)
        self.rci_newest = -math.inf
        self.rci_value_max = 0.0

    def _alloc(self, cap: int) -> None:
        def grow(old: NDArray[Any] | None, shape: tuple[int, ...], dtype: type) -> NDArray[Any]:
            new: NDArray[Any] = np.zeros(shape, dtype=dtype)
            if old is not None and self.n:
                new[: self.n] = old[: self.n]
            return new

        self._what = grow(getattr(self, "_what", None), (cap, self.dim), np.float32)
        self._where = grow(getattr(self, "_where", None), (cap, self.dim), np.float32)
        for name in ("_value", "_pi", "_tau", "_t", "_vfrom", "_vuntil", "_inv"):
            setattr(self, name, grow(getattr(self, name, None), (cap,), np.float64))
        for name in ("wdeg", "drift"):
            if hasattr(self, name):
                setattr(self, name, grow(getattr(self, name), (cap,), np.float64))
        self._cap = cap

    def __len__(self) -> int:
        return self.n

    def view(self) -> Rows:
        """Arrays over all rows (views, not copies: do not keep them across writes)."""
        n = self.n
        return Rows(records=self._records, what=self._what[:n], where=self._where[:n],
                    value=self._value[:n], pi=self._pi[:n], tau=self._tau[:n], t=self._t[:n],
                    valid_from=self._vfrom[:n], valid_until=self._vuntil[:n],
                    invalidated=self._inv[:n])

    def maxima(self) -> tuple[float, float]:
        """``(largest value, largest drift)`` over all rows (0 when empty), kept until the next
        write, so that a search's candidate bound is not an O(N) pass each time."""
        cached = self._maxima
        if cached is None or cached[0] != self.version:
            n = self.n
            cached = (self.version, float(self._value[:n].max()) if n else 0.0,
                      float(self.drift[:n].max()) if n else 0.0)
            self._maxima = cached
        return cached[1], cached[2]

    def record(self, mid: str) -> MemoryRecord | None:
        row = self.row_of.get(mid)
        return None if row is None else self._records[row]

    def append(self, records: Sequence[MemoryRecord], what: NDArray[np.float32],
               where: NDArray[np.float32],
               drift: Sequence[float] | NDArray[np.float64] | None = None) -> None:
        self.version += 1
        for rec in records:
            if rec.id in self.row_of:
                self.remove([rec.id])
        need = self.n + len(records)
        if need > self._cap:
            self._alloc(max(need, 2 * self._cap))
        lo, hi = self.n, need
        self._what[lo:hi] = what
        self._where[lo:hi] = where
        self._value[lo:hi] = [r.value for r in records]
        self._pi[lo:hi] = [r.pi for r in records]
        self._tau[lo:hi] = [r.tau_s for r in records]
        self._t[lo:hi] = [r.created_at_s for r in records]
        self._set_temporal(slice(lo, hi), records)
        self.wdeg[lo:hi] = 0.0
        self.drift[lo:hi] = 0.0 if drift is None else drift
        for i, rec in enumerate(records):
            self.row_of[rec.id] = lo + i
            self._records.append(rec)
            if rec.rci_deltas:
                self._note_rci(rec)
        self.n = hi

    def _note_rci(self, rec: MemoryRecord) -> None:
        if rec.updated_at_s is not None:
            self.rci_newest = max(self.rci_newest, rec.updated_at_s)
        self.rci_value_max = max(self.rci_value_max,
                                 rec.value + sum(abs(d[1]) for d in rec.rci_deltas))

    def update(self, records: Sequence[MemoryRecord],
               what: NDArray[np.float32] | None = None,
               drift: NDArray[np.float64] | None = None) -> None:
        """Replace records (value, pi, tau...) and optionally their what-vectors and drift."""
        self.version += 1
        rows = np.fromiter((self.row_of[rec.id] for rec in records), dtype=np.intp,
                           count=len(records))
        for row, rec in zip(rows.tolist(), records, strict=True):
            self._records[row] = rec
            if rec.rci_deltas:
                self._note_rci(rec)
        self._value[rows] = [rec.value for rec in records]
        self._pi[rows] = [rec.pi for rec in records]
        self._tau[rows] = [rec.tau_s for rec in records]
        self._set_temporal(rows, records)
        if what is not None:
            self._what[rows] = what
        if drift is not None:
            self.drift[rows] = drift

    def _set_temporal(self, rows: slice | NDArray[np.intp],
                      records: Sequence[MemoryRecord]) -> None:
        arrays = temporal_arrays(records)
        self._vfrom[rows] = arrays["valid_from"]
        self._vuntil[rows] = arrays["valid_until"]
        self._inv[rows] = arrays["invalidated"]

    def set_wdeg(self, mid: str, weight: float) -> None:
        row = self.row_of.get(mid)
        if row is not None:
            self.version += 1
            self.wdeg[row] = weight

    def remove(self, ids: Sequence[str]) -> None:
        self.version += 1
        for mid in ids:
            row = self.row_of.pop(mid, None)
            if row is None:
                continue
            last = self.n - 1
            if row != last:
                for arr in (self._what, self._where, self._value, self._pi, self._tau, self._t,
                            self._vfrom, self._vuntil, self._inv, self.wdeg, self.drift):
                    arr[row] = arr[last]
                moved = self._records[last]
                self._records[row] = moved
                self.row_of[moved.id] = row
            self._records.pop()
            self.n = last

    def replace_record(self, mid: str, **changes: object) -> MemoryRecord:
        rec = replace(self._records[self.row_of[mid]], **changes)  # type: ignore[arg-type]
        self.update([rec])
        return rec
