"""Reads by creation time: server mode's temporal link candidates (paper §3.4's e_T term).

Chroma cannot order a read by metadata, so :class:`TimeReads` reads the memories of a time
range around each new memory (``sj_t`` between two bounds), starting narrow and widening until
the ``n`` nearest on each side are known. An embedded store with ``mirror=False`` keeps its
creation times in memory instead (one process writes it), read once and kept by its writes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .clients import retry, wrap_error
from .codec import TIME_KEY

__all__ = ["TIME_FIRST_SHARE", "TIME_READ_MAX", "TimeNeighbours", "TimeReads"]

logger = logging.getLogger(__name__)

#: The most memories one read by time returns (server mode's temporal link candidates).
TIME_READ_MAX = 5_000
#: Server mode's first read by time spans this share of the temporal horizon on each side of
#: a new memory, then widens as needed (:meth:`nearest_in_time`; chosen: 5.7 h /
#: 256 is 80 s, which holds the 32 nearest on a side at one memory every 2.5 s or denser).
TIME_FIRST_SHARE = 256.0


def _stretches(lo: NDArray[np.float64], hi: NDArray[np.float64],
               order: Sequence[int]) -> list[list[int]]:
    """``order`` (indices of ranges ``[lo, hi]``, ascending by their centres) cut where
    consecutive ranges stop overlapping."""
    out: list[list[int]] = []
    end = -math.inf
    for i in order:
        if out and lo[i] <= end:
            out[-1].append(i)
            end = max(end, float(hi[i]))
        else:
            out.append([i])
            end = float(hi[i])
    return out


@dataclass(frozen=True, slots=True)
class TimeNeighbours:
    """:meth:`ChromaStore.nearest_in_time_bounded`'s answer, per time asked about."""

    ids: list[list[str]]
    """The memories nearest in time."""
    times: list[list[float]]
    """Their creation times."""
    gaps: list[float]
    """No other memory is nearer in time than this (seconds; 0 when a read stopped at
    :data:`TIME_READ_MAX`: no bound)."""

    @classmethod
    def of(cls, answers: Sequence[tuple[list[str], list[float], float]]) -> TimeNeighbours:
        return cls(ids=[a[0] for a in answers], times=[a[1] for a in answers],
                   gaps=[a[2] for a in answers])


def _nearest(ids: Sequence[str], t_sorted: NDArray[np.float64], at: int, t_i: float, n: int,
             horizon_s: float, complete: bool = True) -> tuple[list[str], list[float], float]:
    """The ``n`` ids before position ``at`` of ``t_sorted`` and the ``n`` from it, those
    within ``horizon_s`` of ``t_i``; their times; and the gap: no memory left out is nearer
    in time to ``t_i`` than it (``complete``: every memory within the horizon that is
    nearer than the ``n``-th on a side was read; else the gap is 0, no bound)."""
    a, b = max(0, at - n), min(len(ids), at + n)
    near = [j for j in range(a, b) if abs(t_sorted[j] - t_i) <= horizon_s]
    gap = 0.0
    if complete:  # a side that holds n within the horizon ends at its n-th; else all are in
        before = t_i - float(t_sorted[a]) if at - a == n else horizon_s
        after = float(t_sorted[b - 1]) - t_i if b - at == n else horizon_s
        gap = max(0.0, min(before, after, horizon_s))
    return [ids[j] for j in near], [float(t_sorted[j]) for j in near], gap


class TimeReads:
    """A namespace's reads by creation time, with what they learnt of its density.

    ``collection``: gives the what collection (a server's rows carry ``sj_t``); ``local_times``:
    for an embedded store, a callable giving every memory's creation time by id (read at the
    first read by time, then kept current by :meth:`note_added` and :meth:`forget`).
    """

    def __init__(self, collection: Callable[[], Any],
                 local_times: Callable[[], Mapping[str, float]] | None = None) -> None:
        self._col = collection
        self._local_times = local_times
        #: Per (horizon, n): where the next :meth:`nearest_in_time` call's reads start, the
        #: width that would hold 2n memories a side at the density the last call read.
        self._time_width: dict[tuple[float, int], float] = {}
        #: The newest creation time this object wrote or read (a read by time reaching past
        #: it has no upper bound: :meth:`nearest_in_time`).
        self._newest_seen = -math.inf
        #: An embedded store's creation times by id, and them sorted.
        self._times: dict[str, float] | None = None
        self._times_sorted: tuple[list[str], NDArray[np.float64]] | None = None

    def note_added(self, ids: Sequence[str], metas: Sequence[Mapping[str, Any]]) -> None:
        """After a write of new rows: their times count from now on."""
        if self._local_times is None:
            times = [t for m in metas if isinstance(t := m.get(TIME_KEY), float)]
            if times:
                self._newest_seen = max(self._newest_seen, *times)
        elif self._times is not None:
            self._times.update((i, float(m.get(TIME_KEY, 0.0)))
                               for i, m in zip(ids, metas, strict=True))
            self._times_sorted = None

    def forget(self) -> None:
        """After a delete: an embedded store's times are read again at the next read."""
        self._times = self._times_sorted = None

    def nearest_in_time(self, times: Sequence[float], horizon_s: float, n: int, *,
                        newest_hint: float = -math.inf) -> list[list[str]]:
        """For each of ``times``, the ids of the (up to) ``n`` stored memories created nearest
        before it and the ``n`` nearest after it, within ``horizon_s`` (server mode's temporal
        link candidates): :meth:`nearest_in_time_bounded` without the times and gaps."""
        return self.nearest_in_time_bounded(times, horizon_s, n, newest_hint=newest_hint).ids

    def nearest_in_time_bounded(self, times: Sequence[float], horizon_s: float, n: int, *,
                                newest_hint: float = -math.inf) -> TimeNeighbours:
        """For each of ``times``, the ids of the (up to) ``n`` stored memories created nearest
        before it and the ``n`` nearest after it, within ``horizon_s`` (server mode's temporal
        link candidates), their times, and a gap that no other memory is nearer than.

        Chroma cannot order a read by metadata, so memories are read by time range, and the
        ranges start narrow: ``horizon_s / TIME_FIRST_SHARE`` on each side of each time (after
        a first call, the width that would hold ``2n`` memories a side at the density that call
        read), overlapping ranges merged into stretches, one read per stretch. An item is
        answered once each of its sides is known complete: ``n`` memories were read on that
        side (every memory in the range is read, so the nearest are among them), or the range
        reaches the horizon there, or, when the read found no memory on that side of the
        stretch, a probe (one id, no data) finds none between the range and the horizon either
        (the later side of the newest memory). The others are read again over a wider range,
        sized from the density just read, up to the horizon. A store dense in time (a memory a
        second puts 20,000 within the 5.7 h horizon) is so read around each time, not over its
        whole horizon. A read holding more than :data:`TIME_READ_MAX` memories stops there,
        and which of them Chroma returns is its choice: the nearest are then taken from that
        subset. A range that reaches past the newest memory this object wrote or read (or
        ``newest_hint``, the newest the caller knows of) is read upwards, with no upper bound
        (cheaper in Chroma, and complete on the later side: no probe); when that read stops at
        the limit, newer memories were written elsewhere, and the range is read again between
        its bounds.
        """
        out: list[tuple[list[str], list[float], float]] = [([], [], 0.0) for _ in times]
        if n <= 0 or horizon_s < 0 or not len(times):
            return TimeNeighbours.of(out)
        if self._local_times is not None:
            return self._nearest_in_time_local(times, horizon_s, n)
        t_new = np.asarray(times, dtype=np.float64)
        start = min(horizon_s, self._time_width.get((horizon_s, n), horizon_s / TIME_FIRST_SHARE))
        width = np.full(len(t_new), start)  # per item, on each side
        fits: list[float] = []  # per read: the width that would hold 2n rows a side there
        pending = np.argsort(t_new, kind="stable").tolist()
        while pending:
            later: list[int] = []
            for members in _stretches(t_new - width, t_new + width, pending):
                lo = float(min(t_new[i] - width[i] for i in members))
                hi = float(max(t_new[i] + width[i] for i in members))
                # reaching past the newest memory known, read upwards with no upper bound:
                # Chroma matches each bound of a range, then intersects, so two bounds cost
                # about the namespace's size (50,000 memories: 35 ms, against 7 ms for one);
                # a memory added now, the usual case, is past every other
                upward = hi >= max(self._newest_seen, newest_hint)
                ids, t_sorted, capped = self._read_by_time(lo, None if upward else hi)
                if upward and capped:  # newer memories written elsewhere: the closed range
                    upward = False
                    ids, t_sorted, capped = self._read_by_time(lo, hi)
                inside = int(np.searchsorted(t_sorted, hi, side="right"))
                fit = 2.0 * n * (hi - lo) / inside if inside else None
                if fit is not None and not capped:
                    fits.append(fit)
                open_sides: list[tuple[int, int, bool, bool]] = []
                for i in members:
                    at = int(np.searchsorted(t_sorted, t_new[i]))  # read rows before t_i
                    final = capped or width[i] >= horizon_s
                    done_b = final or at >= n or lo <= t_new[i] - horizon_s
                    # an upward read holds every memory after t_i
                    done_a = (final or upward or len(ids) - at >= n
                              or hi >= t_new[i] + horizon_s)
                    if done_b and done_a:
                        out[i] = _nearest(ids, t_sorted, at, t_new[i], n, horizon_s, not capped)
                    else:
                        open_sides.append((i, at, done_b, done_a))
                if not open_sides:
                    continue
                # a side with no memory read may have none within the horizon either (the
                # later side of the newest memory): a probe, where a wider read would find none
                t_first, t_last = t_new[members[0]], t_new[members[-1]]
                none_b = (not all(b for _, _, b, _ in open_sides)
                          and not np.any(t_sorted < t_first)
                          and not self._any_in_time({"$gte": float(t_first - horizon_s)},
                                                    {"$lt": lo}))
                none_a = (not all(a for _, _, _, a in open_sides)
                          and not np.any(t_sorted > t_last)
                          and not self._any_in_time({"$gt": hi},
                                                    {"$lte": float(t_last + horizon_s)}))
                for i, at, done_b, done_a in open_sides:
                    if (done_b or none_b) and (done_a or none_a):
                        out[i] = _nearest(ids, t_sorted, at, t_new[i], n, horizon_s, not capped)
                    else:  # wider: 2n rows a side at the density read (none read: 16x), 4x or more
                        width[i] = min(horizon_s, 16.0 * width[i] if fit is None
                                       else max(4.0 * width[i], fit))
                        later.append(i)
            pending = sorted(later, key=lambda i: (t_new[i], i))
        if fits:  # the next call starts at the width that fits the density read
            self._time_width[(horizon_s, n)] = min(horizon_s, float(np.median(fits)))
        return TimeNeighbours.of(out)

    def _nearest_in_time_local(self, times: Sequence[float], horizon_s: float,
                               n: int) -> TimeNeighbours:
        """:meth:`nearest_in_time` of an embedded store (a memory with ``mirror=False``), from
        its creation times held here: read once (every row), then kept by its writes."""
        if self._times_sorted is None:
            known = self._times
            if known is None:
                assert self._local_times is not None
                known = self._times = dict(self._local_times())
            ids = sorted(known, key=lambda i: (known[i], i))
            self._times_sorted = ids, np.array([known[i] for i in ids], np.float64)
        ids, t_sorted = self._times_sorted
        return TimeNeighbours.of([_nearest(ids, t_sorted, int(np.searchsorted(t_sorted, t)),
                                           float(t), n, horizon_s) for t in times])

    def _read_by_time(self, lo: float, hi: float | None
                      ) -> tuple[list[str], NDArray[np.float64], bool]:
        """The ids of the memories created in ``[lo, hi]`` (``hi=None``: at ``lo`` or later)
        sorted by time, their times, and whether the read stopped at :data:`TIME_READ_MAX`."""
        where: dict[str, Any] = {TIME_KEY: {"$gte": float(lo)}}
        if hi is not None:
            where = {"$and": [where, {TIME_KEY: {"$lte": float(hi)}}]}
        try:
            got = retry(self._col().get, where=where, limit=TIME_READ_MAX, include=["metadatas"])
        except Exception as exc:
            raise wrap_error("read memories by time", exc) from exc
        capped = len(got["ids"]) >= TIME_READ_MAX
        if capped:
            logger.debug("%d+ memories within [%.0f, %.0f]: temporal link candidates taken "
                         "from Chroma's first %d", TIME_READ_MAX, lo, hi, TIME_READ_MAX)
        t = np.array([float((m or {}).get(TIME_KEY, np.nan)) for m in got["metadatas"]])
        keep = np.flatnonzero(np.isfinite(t))
        order = keep[np.argsort(t[keep], kind="stable")]
        if len(order):
            self._newest_seen = max(self._newest_seen, float(t[order[-1]]))
        return [got["ids"][j] for j in order], t[order], capped

    def _any_in_time(self, low: dict[str, float], high: dict[str, float]) -> bool:
        """Whether a memory was created within the bounds (``{"$gte": t}`` and the like):
        one id read, no data."""
        try:
            got = retry(self._col().get, where={"$and": [{TIME_KEY: low}, {TIME_KEY: high}]},
                         limit=1, include=[])
        except Exception as exc:
            raise wrap_error("read memories by time", exc) from exc
        return bool(got["ids"])
