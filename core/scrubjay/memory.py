"""``ScrubJayMemory``: the one facade over every mechanism (paper §3.9).

Store:     annotate -> encode (what, where) -> classify (pi, tau) -> link into the graph -> persist.
Prepare:   fill the prospective buffer for the coming task.
Retrieve:  the buffer first, the full store on a miss, ranked by the adaptive WWW(G) score.
Maintain:  RCI on new information; consolidation at a session end.

Embedded stores (``path=`` or no store at all) keep an in-memory mirror of the namespace and score
every memory exactly. Client/server stores (``client=chromadb.HttpClient(...)``) let Chroma
generate candidates and never pull the whole collection into the client: a relevance search
ranks from Chroma's distances and metadata (no vectors) and defers the hits' graph bonus to
their first access; paper ranking re-scores candidates (by what, by where) and their graph
neighbours exactly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Self, cast

import numpy as np
from numpy.typing import NDArray

from ._blas import one_blas_thread
from ._validation import check_k, check_metadata, check_namespace, check_text, to_epoch_s
from .annotation import annotate_many
from .buffer import (
    BufferBlock,
    BufferState,
    block_bonus,
    gather_block,
    select_buffer,
    task_probability,
)
from .changelog import LogCursor
from .config import GraphConfig, ScrubJayConfig
from .consolidation import is_protected, select_removals
from .decay import is_stale, utility
from .embedding import Embedder, WordLlamaEmbedder, as_embedder
from .errors import (
    EmbedderMismatchError,
    InvalidInputError,
    LLMError,
    MemoryNotFoundError,
    ScrubJayError,
)
from .graph import (
    EpisodicGraph,
    edge_weight_from_similarity,
    edge_weights,
    edge_weights_from_similarity,
    strongest_columns,
    temporal_horizon_s,
)
from .llm import RCI_PROMPT, LLMClient
from .mirror import Mirror, Rows
from .perishability import Classifier
from .rci import affinities, apply_updates, event_key, fallback_deltas, parse_deltas
from .scoring import adaptive_weights, drifted_similarity_bound, relevance_bound, relevance_key
from .snapshot import Snapshot, load_snapshot, remove_snapshot, save_snapshot, snapshot_path
from .store import (
    INDEX_DRIFT_MAX_RAD,
    ChromaStore,
    RowsBackup,
    StoredRow,
    TimeNeighbours,
    dumps_user_meta,
    loads_user_meta,
    pack_perishability,
    user_filter_keys,
)
from .types import (
    Deltas,
    Hit,
    IntegrationReport,
    MemoryRecord,
    Perishability,
    new_hit,
    storable,
)

__all__ = ["ScrubJayMemory"]

logger = logging.getLogger(__name__)

Timestamp = float | int | datetime

#: A memory may be dated at most this far after the memory's clock (chosen: clock skew between
#: an agent and its host; anything later is almost surely a unit error, e.g. milliseconds).
MAX_FUTURE_SKEW_S = 300.0
#: A relevance search against a server first asks Chroma for this many candidates per hit
#: wanted (chosen: with equal values the k nearest are already the exact top k; the margin
#: covers values lowered by RCI; the exactness check below widens when it does not suffice).
SERVER_FIRST_PER_K = 2
#: Factor by which that search widens its candidates, up to ``SearchConfig.candidates``
#: (chosen).
SERVER_WIDEN = 4


@dataclass(slots=True)
class _Scored:
    """Server candidates scored from Chroma's distances, sorted by id (no vectors)."""

    records: list[MemoryRecord]
    sim_what: NDArray[np.float64]
    sim_where: NDArray[np.float64]
    edges: dict[str, str]
    """Each candidate's adjacency payload (``sj_edges``), for the deferred graph bonus."""
    bound: float
    """Upper bound of the relevance key of any memory not among them (-inf: none is left)."""

    @property
    def value(self) -> NDArray[np.float64]:
        return np.array([r.value for r in self.records], dtype=np.float64)


@dataclass(slots=True)
class _Prepared:
    """A validated item of ``add_many``."""

    text: str
    context: str
    at_s: float
    metadata: dict[str, Any]
    id: str
    id_given: bool
    """The caller chose the id (it may be stored already); else a fresh uuid4 (it is not)."""


#: Rows of a batch linked per block (chosen: bounds the (block, N) similarity matrices of
#: the link scan to a few tens of MB at N = 20,000).
_LINK_BLOCK = 128
#: Server mode: new memories per what query of their link candidates; each page's
#: candidates' rows are read while the next page is queried (2,000 new memories after
#: 8,000: 1.0-1.2 s for one query then one read, 0.65-0.73 s in pages of 250).
_LINK_QUERY_PAGE = 250

_CandidateRow = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                      NDArray[np.float64], Sequence[str]]
_NO_CANDIDATES: _CandidateRow = (np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), [])


def _strongest(comps: tuple[NDArray[np.float64], ...], allowed: NDArray[np.bool_], width: int,
               min_weight: float) -> tuple[tuple[NDArray[np.float64], ...], NDArray[np.intp]]:
    """Per row, the ``width`` columns of largest ``comps[0]`` among those allowed and at least
    ``min_weight``: ``(comps gathered, column indices)``, a column index of -1 marking a slot
    that no allowed column filled (its weights are meaningless)."""
    e = comps[0]
    key = np.where(allowed & (e >= min_weight), e, -np.inf)
    if key.shape[1] > width:  # O(W) selection per row
        cols = np.argpartition(-key, width - 1, axis=1)[:, :width]
    else:
        cols = np.broadcast_to(np.arange(key.shape[1]), key.shape)
    picked = tuple(np.take_along_axis(a, cols, axis=1) for a in comps)
    cols = np.where(np.isfinite(np.take_along_axis(key, cols, axis=1)), cols, -1)
    return picked, cols


def _components(sim_s: NDArray[np.float32], sim_c: NDArray[np.float32] | None,
                cols: NDArray[np.intp], t_old: NDArray[np.float64], t_new: NDArray[np.float64],
                cfg: GraphConfig) -> tuple[NDArray[np.float64], ...]:
    """``(e, e_S, e_C, e_T)`` of the chosen columns ``cols`` of each row: float64 from the
    float32 cosines and the float64 gaps ``|t_old[col] - t_new[row]|``."""
    return edge_weights_from_similarity(
        np.take_along_axis(sim_s, cols, axis=1).astype(np.float64),
        np.zeros(cols.shape) if sim_c is None
        else np.take_along_axis(sim_c, cols, axis=1).astype(np.float64),
        np.abs(t_old[cols] - t_new[:, None]), cfg)


def _earlier_candidates(what: NDArray[np.float32], where: NDArray[np.float32] | None,
                        t: NDArray[np.float64], lo: int, hi: int, width: int,
                        cfg: GraphConfig) -> tuple[NDArray[np.intp],
                                                   tuple[NDArray[np.float64], ...]]:
    """Link candidates of batch rows ``lo:hi`` among the rows before each: ``(cols, comps)``,
    batch row indices (``-1``: no candidate) and their ``(e, e_S, e_C, e_T)``.

    Computed as one :meth:`ScrubJayMemory.add` scans the mirror, so that a batch links as
    adds one at a time do: cosines in float32, the strongest ``width`` of the earlier blocks
    by :func:`~scrubjay.graph.strongest_columns` (the threshold hits and the rows nearest in
    time, not every pair), then this block's own earlier rows (a triangle), each part's
    components in float64 from its cosines and the float64 time gaps.
    """
    col_parts: list[NDArray[np.intp]] = []
    comp_parts: list[tuple[NDArray[np.float64], ...]] = []
    t32 = (t - t[lo]).astype(np.float32)  # the selection's times, relative to the block
    for start, stop in ((0, lo), (lo, hi)):
        if stop == start:
            continue
        sim_s = what[lo:hi] @ what[start:stop].T  # float32, as the mirror scan
        sim_c = None if where is None else where[lo:hi] @ where[start:stop].T
        if start == lo:  # the block itself: the earlier rows of each, all pairs
            e = edge_weight_from_similarity(
                sim_s, sim_c, np.abs(t32[lo:hi, None] - t32[None, lo:hi]), cfg)
            e[~np.tri(hi - lo, k=-1, dtype=bool)] = -np.inf  # j < i only
            cols = (np.argpartition(-e, width - 1, axis=1)[:, :width] if hi - lo > width
                    else np.broadcast_to(np.arange(hi - lo), e.shape))
            ok = np.isfinite(np.take_along_axis(e, cols, axis=1))
        elif stop - start > width:
            cols = strongest_columns(sim_s, sim_c, t32[start:stop], t32[lo:hi],
                                     np.argsort(t32[start:stop], kind="stable"), cfg, width)
            ok = None
        else:
            cols = np.broadcast_to(np.arange(stop - start), sim_s.shape)
            ok = None
        comp_parts.append(_components(sim_s, sim_c, cols, t[start:stop], t[lo:hi], cfg))
        col_parts.append(start + cols if ok is None else np.where(ok, start + cols, -1))
    return (np.concatenate(col_parts, axis=1),
            tuple(np.concatenate([p[j] for p in comp_parts], axis=1) for j in range(4)))


def _whats(rows: Iterable[StoredRow]) -> list[NDArray[np.float32]]:
    """The what vectors of rows read with their vectors (never None there)."""
    return cast("list[NDArray[np.float32]]", [r.what for r in rows])


def _rank(e: NDArray[np.float64], ids: NDArray[np.object_]) -> NDArray[np.intp]:
    """Per row, the column order by ``(-e, id)``, ``-inf`` (no candidate) last: a stable sort
    by weight, then the few rows where two finite weights tie sorted again with their ids
    (the ids' string array, which ``np.lexsort`` needs, is most of its cost)."""
    order = np.argsort(-e, axis=1, kind="stable")
    ranked = np.take_along_axis(e, order, axis=1)
    tie = (ranked[:, 1:] == ranked[:, :-1]) & np.isfinite(ranked[:, 1:])
    rows = np.flatnonzero(tie.any(axis=1))
    if len(rows):
        order[rows] = np.lexsort((ids[rows].astype(str), -e[rows]), axis=1)
    return order


@dataclass(slots=True)
class _Candidates:
    """Existing link candidates of each new item of a batch, as padded ``(B, W)`` arrays."""

    weights: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                   NDArray[np.float64]]
    """``(e, e_S, e_C, e_T)`` of Eq. 7."""
    ids: NDArray[np.object_]
    """The candidate ids (``""`` in padding)."""
    valid: NDArray[np.bool_]
    """False in padding."""

    @classmethod
    def from_pairs(cls, n: int, item: NDArray[np.intp], ids: NDArray[np.object_],
                   weights: tuple[NDArray[np.float64], ...]) -> _Candidates:
        """:meth:`pad` of flat ``(item, candidate)`` pairs, grouped by item (ascending) and
        in each item's order: ``n`` items, each row as long as the longest."""
        counts = np.bincount(item, minlength=n)
        width = int(counts.max(initial=0))
        pos = np.arange(len(item)) - (np.cumsum(counts) - counts)[item]
        out = tuple(np.zeros((n, width)) for _ in range(4))
        for a, flat in zip(out, weights, strict=True):
            a[item, pos] = flat
        padded = np.full((n, width), "", dtype=object)
        padded[item, pos] = ids
        valid = np.zeros((n, width), dtype=bool)
        valid[item, pos] = True
        return cls(weights=out, ids=padded, valid=valid)  # type: ignore[arg-type]

    @classmethod
    def pad(cls, rows: Sequence[_CandidateRow]) -> _Candidates:
        """Stack ragged per-item candidate rows, padding each to the longest."""
        width = max((len(r[4]) for r in rows), default=0)
        weights = tuple(np.zeros((len(rows), width)) for _ in range(4))
        ids = np.full((len(rows), width), "", dtype=object)
        valid = np.zeros((len(rows), width), dtype=bool)
        for i, row in enumerate(rows):
            m = len(row[4])
            for j in range(4):
                weights[j][i, :m] = row[j]
            ids[i, :m] = list(row[4])
            valid[i, :m] = True
        return cls(weights=weights, ids=ids, valid=valid)  # type: ignore[arg-type]


@dataclass(slots=True)
class _LinkReads:
    """Server mode: a batch's link candidates as read from Chroma."""

    per_item: list[set[str]]
    """The candidate ids of each new item."""
    rows: dict[str, StoredRow]
    """Their rows (a candidate deleted meanwhile is absent). ``what`` is read only where a
    similarity below is missing or off (an RCI-moved row carries its exact vector)."""
    similar: list[dict[str, float]]
    """Per new item, the cosine of each of its nearest by what, as the query returned it."""


def _pair_dots(rows: NDArray[np.float32], row_of: NDArray[np.intp],
               vectors: NDArray[np.float32], vector_of: NDArray[np.intp],
               chunk: int = 8192) -> NDArray[np.float64]:
    """``rows[row_of[p]] . vectors[vector_of[p]]`` for each pair ``p``, in float64 (chunks
    of pairs bound the gathered copies)."""
    out = np.empty(len(row_of))
    for lo in range(0, len(row_of), chunk):
        hi = lo + chunk
        out[lo:hi] = np.einsum("ij,ij->i", rows[row_of[lo:hi]].astype(np.float64),
                               vectors[vector_of[lo:hi]].astype(np.float64))
    return out


def _per_item(ids: Sequence[str], what: NDArray[np.float32], by_what: list[list[str]],
              sims: list[list[float]], by_where: Mapping[int, list[str]],
              by_time: list[list[str]]) -> tuple[list[set[str]], list[dict[str, float]]]:
    """Server mode: each new item's link candidates (its nearest by what, by where and in
    time, itself left out) and the similarities its what-query gave (none for an item whose
    what-vector is zero: Chroma's cosine distance is undefined there)."""
    per_item: list[set[str]] = []
    similar: list[dict[str, float]] = []
    nonzero = np.any(what, axis=1).tolist()
    for i, mid in enumerate(ids):
        mine = set(by_what[i])
        mine.update(by_where.get(i, ()))
        mine.update(by_time[i])
        mine.discard(mid)
        per_item.append(mine)
        known = dict(zip(by_what[i], sims[i], strict=True)) if nonzero[i] else {}
        similar.append({c: s for c, s in known.items() if math.isfinite(s)})
    return per_item, similar


def _cut_unreachable(found: list[list[str]], sims: list[list[float]], lo: int,
                     t_new: NDArray[np.float64], cuttable: NDArray[np.bool_],
                     by_time: TimeNeighbours, cfg: GraphConfig
                     ) -> tuple[list[list[str]], list[list[float]]]:
    """Server mode: the what-query answers of new items ``lo, lo + 1, ...`` without the
    candidates that cannot be among an item's ``4 * max_neighbors`` strongest, the cut that
    :meth:`ScrubJayMemory._link` makes over the union of its stored and earlier candidates:
    their rows need no read. The linking is the same as with them.

    Such a candidate weighs ``w_T e_T`` at most: its cosine is under ``theta_S`` even after
    an RCI move of up to :data:`~scrubjay.store.INDEX_DRIFT_MAX_RAD` (``e_S = 0``), the item
    has no context (``e_C = 0``), and it is no time candidate, so it is no nearer in time
    than the gap the read by time gives. Every earlier item of the batch and every time
    candidate weighs at least its own ``w_T e_T`` (the thresholds are not negative), so when
    ``4 * max_neighbors`` of them are nearer in time than that gap, with a margin over the
    edges' rounding, the candidate is cut. A bundled-embedder batch's what-candidates are
    mostly such (its texts rarely pass theta_S; docs/performance.md, item 37). Only an item
    in ``cuttable`` (a what-vector, no where-vector) is looked at; its earlier items within
    ``8 * max_neighbors`` places before it count (a batch in time order has its nearest there).
    """
    width = 4 * cfg.max_neighbors
    angle = math.acos(min(1.0, max(-1.0, cfg.theta_semantic))) + INDEX_DRIFT_MAX_RAD
    if (width == 0 or cfg.weight_temporal <= 0 or cfg.lambda_temporal_per_s <= 0
            or cfg.theta_semantic < 0
            or cfg.theta_contextual < 0 or angle >= math.pi):
        return found, sims
    below = math.cos(angle) - 1e-6  # a query cosine under it: e_S = 0 for sure
    rows = np.arange(lo, lo + len(found))
    # per item, the time gaps to its earlier items in the window and to its time candidates
    window = 2 * width
    before = rows[:, None] - window + np.arange(window)[None, :]
    gaps = np.where(before >= 0, np.abs(t_new[np.maximum(before, 0)] - t_new[rows, None]),
                    np.inf)
    near_t = [by_time.times[i] for i in rows.tolist()]
    cand = np.full((len(rows), max(map(len, near_t), default=0)), np.inf)
    for r, ts in enumerate(near_t):
        cand[r, :len(ts)] = np.abs(np.asarray(ts) - t_new[lo + r])
    nearest = np.partition(np.concatenate([gaps, cand], axis=1), width - 1, axis=1)[:, width - 1]
    # the temporal term alone (cosines 0, no context): the weakest of those nearer, and the
    # most a candidate beyond the gap can weigh
    zero = np.zeros(len(rows))
    floor = edge_weight_from_similarity(zero, None, nearest, cfg)
    bound = edge_weight_from_similarity(zero, None, np.asarray(by_time.gaps)[rows], cfg)
    out_found, out_sims = [], []
    for r, i in enumerate(rows.tolist()):
        ids, cos = found[r], sims[r]
        if cuttable[i] and floor[r] > bound[r] + 1e-6:
            timed = set(by_time.ids[i])
            keep = [j for j, (c, x) in enumerate(zip(ids, cos, strict=True))
                    if c in timed or not x < below]  # (a NaN cosine is kept)
            ids, cos = [ids[j] for j in keep], [cos[j] for j in keep]
        out_found.append(ids)
        out_sims.append(cos)
    return out_found, out_sims


class _Queried:
    """Server mode: set once a batch's reads by vector and by time are done (``ok``) or
    will not be (the reads failed or the batch replaces stored ids)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.ok = False

    def mark(self, ok: bool) -> None:
        if not self._event.is_set():
            self.ok = ok
            self._event.set()

    def wait(self) -> bool:
        """Wait for the mark; whether the queries are done."""
        self._event.wait()
        return self.ok


class ScrubJayMemory:
    """An agent memory whose every item knows how fast it goes stale.

    Parameters
    ----------
    path : str or Path, optional
        Folder of an embedded Chroma store (``PersistentClient``), locked to this process.
    namespace : str
        The user, agent or tenant; a search never sees another namespace's memories.
    client : chromadb client, optional
        Any Chroma client, e.g. ``chromadb.HttpClient(host, port)`` for several processes.
        With neither ``path`` nor ``client``, an in-memory Chroma is used (nothing persists).
    embedder : optional
        ``None`` for the bundled offline model (wordllama, 256-d), a LangChain ``Embeddings``,
        a LlamaIndex embedding, an :class:`~scrubjay.embedding.Embedder`, or a callable.
    llm : optional
        A LangChain chat model (e.g. ``ChatOllama``) or a callable ``str -> str`` for the
        classifier, RCI deltas and annotations. Without one, or when it fails, the offline
        fallbacks are used.
    config : ScrubJayConfig, optional
        Every hyperparameter.
    clock : callable, optional
        Returns "now" in epoch seconds; the default is ``time.time``.

    Examples
    --------
    >>> from scrubjay.testing import HashEmbedder, FrozenClock
    >>> clock = FrozenClock(1_700_000_000)
    >>> mem = ScrubJayMemory(embedder=HashEmbedder(), clock=clock)
    >>> _ = mem.add("I am parked on level 3 right now")
    >>> _ = mem.add("My sister lives in Oslo")
    >>> _ = clock.advance(days=2)
    >>> sorted((h.text, h.stale) for h in mem.search("where did I park", k=2))
    [('I am parked on level 3 right now', True), ('My sister lives in Oslo', False)]
    """

    def __init__(self, path: str | Path | None = None, *, namespace: str = "default",
                 client: Any = None, embedder: Any = None, llm: Any = None,
                 config: ScrubJayConfig | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        owner = "ScrubJayMemory"
        self.namespace = check_namespace(namespace, owner)
        if config is None:
            config = ScrubJayConfig()
        if not isinstance(config, ScrubJayConfig):
            raise InvalidInputError(f"The 'config' parameter of {owner} must be a ScrubJayConfig. "
                                    f"Got {type(config).__name__} instead.")
        if path is not None and client is not None:
            raise InvalidInputError(f"The 'path' and 'client' parameters of {owner} are "
                                    "exclusive: pass one of them.")
        if path is not None and not isinstance(path, (str, Path)):
            raise InvalidInputError(f"The 'path' parameter of {owner} must be a str or Path. "
                                    f"Got {type(path).__name__} instead.")
        if clock is not None and not callable(clock):
            raise InvalidInputError(f"The 'clock' parameter of {owner} must be a callable "
                                    f"returning epoch seconds. Got {type(clock).__name__} instead.")
        self.config = config
        self._clock = clock or time.time
        self._lock = threading.RLock()
        self._embedder: Embedder = as_embedder(embedder)
        self._llm = (LLMClient(llm, timeout_s=config.llm.timeout_s,
                               max_reply_chars=config.llm.max_reply_chars,
                               probe_interval_s=config.llm.probe_interval_s)
                     if llm is not None else None)
        self._classifier = Classifier(config.classifier, self._llm,
                                      stale_ratio=config.decay.stale_ratio,
                                      batch_items=config.llm.batch_items)
        self._embedded = client is None
        self._private_prefix: str | None = None
        if path is not None:
            self._store = ChromaStore.open_path(path, self.namespace)
        else:
            if client is None:
                import chromadb
                from chromadb.config import Settings

                client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
                # Chroma shares one in-memory system per process: a private collection prefix
                # keeps each in-memory ScrubJayMemory apart; close() drops its collections.
                prefix = f"sjm{uuid.uuid4().hex[:12]}_"
                self._private_prefix = prefix
                self._store = ChromaStore(client=client, namespace=self.namespace,
                                          prefix=prefix)
            else:
                self._private_prefix = None
                # several processes may share it: every write feeds the change log that
                # keeps their mirrors current (scrubjay.changelog)
                self._store = ChromaStore(client=client, namespace=self.namespace,
                                          change_log=True)
        use_mirror = config.search.mirror
        self._use_mirror = self._embedded if use_mirror is None else bool(use_mirror)
        self._dim: int | None = None
        self._mirror: Mirror | None = None
        # server mode with a mirror: how far the mirror has applied the change log
        self._log_cursor: LogCursor | None = None
        self._graph = EpisodicGraph(config.graph)
        self._buffer: BufferState | None = None
        # (buffer, mirror, mirror version) the block was gathered for, and the block
        self._block: tuple[BufferState, Mirror, int, BufferBlock] | None = None
        self._newest_t = -math.inf
        # an embedded store's newest time not yet in its state (written at close, see
        # _store_items)
        self._newest_unsaved = False
        # the largest value this process wrote (RCI can raise values above the default)
        self._value_max = config.decay.default_value
        # the largest angle (rad) between a memory's exact what-vector and its index vector
        # that this process wrote or read (RCI defers index rewrites up to INDEX_DRIFT_MAX_RAD)
        self._drift_max = 0.0
        # server mode's single-thread workers, by role (:meth:`_worker`), made on first use
        self._pools: dict[str, ThreadPoolExecutor] = {}
        # ids of a write that failed part-way: they may have what rows the mirror lacks
        self._maybe_written: set[str] = set()
        self._closed = False
        self._snapshot_file = (snapshot_path(self._store.path, self.namespace)
                               if self._store.path is not None else None)
        self._snapshot_marker: str | None = None  # the marker of the snapshot read at open
        try:
            self._open()
        except BaseException:
            self._store.close()
            raise

    # ------------------------------------------------------------------ opening and closing
    def _open(self) -> None:
        self._store.check_schema()
        recorded = self._store.recorded_embedder()
        if recorded is not None:
            name, dim = recorded
            if name != self._embedder.name and not self._embedder.name.startswith("callable:"):
                raise EmbedderMismatchError(
                    f"The namespace {self.namespace!r} was written with the embedder {name!r} "
                    f"({dim}-d); it cannot be used with {self._embedder.name!r}. Reopen it with "
                    "the same embedder, or use a new namespace.")
            self._dim = dim
        snap = self._load_snapshot()
        if self._embedded and snap is None:
            self._store.reconcile()
        state = self._store.state()
        self._newest_t = float(state.get("sj_newest_t", -math.inf))
        if snap is not None:
            self._dim = int(snap.what.shape[1])
            self._mirror = Mirror(self._dim)
            self._mirror.append(snap.records, snap.what, snap.where, drift=snap.drift)
            self._mirror.wdeg[: len(snap.records)] = snap.wdeg
            self._graph = snap.graph
            if snap.records:
                self._newest_t = max(self._newest_t,
                                     max(r.created_at_s for r in snap.records))
        elif self._use_mirror:
            self._start_log_cursor()
            self._load_mirror()
        if self._snapshot_file is not None:
            self._store.track_changes()
        raw = state.get("sj_buffer")
        if isinstance(raw, str):
            try:
                b = json.loads(raw)
                self._buffer = BufferState(task=b["task"], context=b["context"],
                                           prepared_at_s=float(b["at"]), ids=tuple(b["ids"]))
            except (ValueError, KeyError, TypeError):
                logger.warning("Ignoring an unreadable prospective buffer in namespace %r",
                               self.namespace)

    def _start_log_cursor(self) -> None:
        """Server mode with a mirror: follow the change log from now on (before the mirror is
        read: a write that lands meanwhile is applied again at the first sync)."""
        log = self._store.log
        self._log_cursor = log.cursor() if log is not None else None

    def _fresh(self) -> None:
        """:meth:`_check_open`, then, in server mode with a mirror, apply the writes other
        processes made since the last operation (:mod:`scrubjay.changelog`): their rows are
        read and replace the mirror's, a memory gone leaves it. Raises :class:`StoreError`
        when the change log or the rows cannot be read (the mirror stays as it was)."""
        self._check_open()
        cursor, log = self._log_cursor, self._store.log
        if cursor is None or log is None:
            return
        before = cursor.copy()
        self._apply_changes(log.changes(cursor), before)

    def _apply_changes(self, ids: set[str] | None, before: LogCursor) -> None:
        """Apply what :meth:`ChangeLog.changes` returned (None: reload the mirror whole); when
        that fails, the cursor goes back to ``before`` (the changes are read again next
        time) and the error is raised."""
        try:
            if ids is None:  # the log no longer reaches back to the last sync
                self._graph = EpisodicGraph(self.config.graph)
                self._mirror = None
                self._start_log_cursor()
                self._load_mirror()
            elif ids:
                self._apply_rows(sorted(ids))
        except ScrubJayError:
            self._log_cursor = before  # the changes are read again next time
            raise

    def _apply_rows(self, ids: list[str]) -> None:
        """Bring the mirror and the graph in step with the stored rows of ``ids`` (another
        process changed them): each row read replaces the mirror's, with its adjacency; an
        id not stored any more leaves the mirror, the graph and the buffer."""
        rows = self._store.get(ids, vectors=True)
        present = {r.id for r in rows}
        held = self._mirror.row_of if self._mirror is not None else {}
        gone = [i for i in ids if i not in present and i in held]
        touched: set[str] = set()
        for mid in gone:
            touched |= self._graph.remove(mid)
        if gone and self._mirror is not None:
            self._mirror.remove(gone)
        if rows:
            if self._dim is None:
                self._dim = len(rows[0].what)  # type: ignore[arg-type]
            self._append_rows(rows)
            g = self._graph.g
            for r in rows:
                if r.id in g:
                    touched.update(g.neighbors(r.id))
                    g.remove_edges_from(list(g.edges(r.id)))
            for r in rows:
                self._graph.loads(r.id, r.meta.get("sj_edges"))
            known = self._mirror.row_of if self._mirror is not None else {}
            for r in rows:  # an edge to a memory not stored (a leftover): dropped
                stray = [j for j in g.neighbors(r.id) if j not in known]
                g.remove_nodes_from(stray)
                touched.update(g.neighbors(r.id))
            self._newest_t = max(self._newest_t,
                                 max(float(r.meta.get("sj_t", -math.inf)) for r in rows))
        self._refresh_wdeg(touched | present)
        self._maybe_written.difference_update(ids)
        for mid in ids:
            self._graph_cache.pop(mid, None)
        if gone and self._buffer is not None:  # the deleting process rewrote the stored one
            gone_set = set(gone)
            self._buffer = replace(self._buffer, ids=tuple(i for i in self._buffer.ids
                                                           if i not in gone_set))

    def _load_mirror(self) -> None:
        """Build the mirror and the graph from every row in Chroma."""
        rows = list(self._store.iter_all(vectors=True))
        if rows:
            self._dim = self._dim or len(rows[0].what)  # type: ignore[arg-type]
        if self._dim is None:
            return
        self._mirror = Mirror(self._dim)
        if rows:
            self._append_rows(rows)
        for r in rows:
            self._graph.loads(r.id, r.meta.get("sj_edges"))
        self._graph.prune_unknown({r.id for r in rows})
        self._refresh_wdeg(self._graph.g.nodes)
        if rows:
            self._newest_t = max(self._newest_t, float(np.max(self._mirror.view().t)))

    # ------------------------------------------------------------------ snapshot (embedded)
    def _load_snapshot(self) -> Snapshot | None:
        """The saved mirror and graph, if this is an embedded store with a mirror and the
        snapshot file matches the store exactly (else None: the mirror comes from Chroma)."""
        if self._snapshot_file is None or not self._use_mirror:
            return None
        marker = self._store.change_marker()
        if marker is None:
            return None
        snap = load_snapshot(self._snapshot_file, marker, self._dim,
                             EpisodicGraph(self.config.graph))
        if snap is not None:
            self._snapshot_marker = marker
        return snap

    def _save_snapshot(self) -> None:
        """At close: save the mirror and graph when they changed since the snapshot was read
        and every write since the open was ours (best effort; a failure only costs speed)."""
        if self._snapshot_file is None or self._mirror is None:
            return
        try:
            marker = self._store.untouched_since_tracked()
            if marker is None:
                remove_snapshot(self._snapshot_file)
            elif marker != self._snapshot_marker:
                view = self._mirror.view()
                save_snapshot(self._snapshot_file, marker, view.records, view.what,
                              view.where, self._mirror.wdeg[: len(view)], self._graph,
                              drift=self._mirror.drift[: len(view)])
        except Exception as exc:  # noqa: BLE001 - best effort: the store itself is intact
            logger.warning("Could not save the snapshot of namespace %r: %s: %s",
                           self.namespace, type(exc).__name__, exc)
            remove_snapshot(self._snapshot_file)

    def close(self) -> None:
        """Release the store (the embedded folder's process lock). Idempotent.

        An embedded store first saves a snapshot of its mirror, for a fast reopen (only an
        explicit close or ``with`` block does; garbage collection just releases the store).
        """
        self._release(save_snapshot=True)

    def _release(self, *, save_snapshot: bool) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                if save_snapshot:
                    if self._newest_unsaved and self._private_prefix is None:
                        self._save_newest("The namespace's state keeps an earlier newest time; "
                                          "the next open reads the newest one off the rows")
                    self._save_snapshot()
                if self._private_prefix is not None:
                    self._store.drop()
                self._store.close()
                for pool in self._pools.values():
                    pool.shutdown(wait=False)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        # best effort, errors ignored; no file writes here: at interpreter exit even open()
        # may be gone
        with contextlib.suppress(Exception):
            self._release(save_snapshot=False)

    def _check_open(self) -> None:
        if self._closed:
            raise ScrubJayError("This ScrubJayMemory is closed; open a new one.")

    # ------------------------------------------------------------------ small helpers
    def now(self) -> float:
        """The memory's clock, in epoch seconds."""
        value = self._clock()
        return to_epoch_s(value, "the memory's clock", "clock()")

    def _time(self, at: Timestamp | None, owner: str) -> float:
        return self.now() if at is None else to_epoch_s(at, owner)

    def _record(self, row: StoredRow) -> MemoryRecord:
        m = row.meta
        return MemoryRecord(
            id=row.id, text=row.text, context=str(m.get("sj_ctx", "")),
            label=str(m.get("sj_label", "factual")), pi=float(m.get("sj_pi", 0.1)),
            tau_s=float(m.get("sj_tau", 45 * 86_400.0)), value=float(m.get("sj_value", 1.0)),
            created_at_s=float(m.get("sj_t", 0.0)), metadata=loads_user_meta(m.get("sj_meta")),
            annotation=str(m.get("sj_ann", "")), source=m.get("sj_src", "keyword"),
            updated_at_s=float(m["sj_updated"]) if "sj_updated" in m else None)

    @staticmethod
    def _meta(rec: MemoryRecord, edges: str) -> dict[str, Any]:
        """A new record's Chroma metadata. Chroma writes each key as a row of its own, so a
        lighter row is a cheaper write: the perishability fields share one key, and the
        context, annotation and user metadata are left out when empty (:meth:`_record` reads
        a missing key as empty)."""
        meta: dict[str, Any] = {
            "sj_perish": pack_perishability(rec.label, rec.pi, rec.tau_s, rec.value, rec.source),
            "sj_t": float(rec.created_at_s), "sj_edges": edges,
        }
        if rec.context:
            meta["sj_ctx"] = rec.context
        if rec.annotation:
            meta["sj_ann"] = rec.annotation
        if rec.metadata:
            meta["sj_meta"] = dumps_user_meta(rec.metadata)
        if rec.updated_at_s is not None:
            meta["sj_updated"] = float(rec.updated_at_s)
        meta.update(user_filter_keys(rec.metadata))
        return meta

    def _embed(self, texts: Sequence[str], *, query: bool = False) -> NDArray[np.float32]:
        vecs = self._embedder.embed(list(texts), query=query)
        dim = int(vecs.shape[1])
        if self._dim is None:
            self._dim = dim
        elif dim != self._dim:
            raise EmbedderMismatchError(
                f"The embedder {self._embedder.name!r} returns {dim}-d vectors but the namespace "
                f"{self.namespace!r} holds {self._dim}-d vectors.")
        return vecs

    def _refresh_wdeg(self, nodes: Iterable[str]) -> None:
        if self._mirror is None:
            return
        adj = self._graph.g._adj  # plain dicts: networkx's views iterate through the ABCs
        for node in nodes:
            nbrs = adj.get(node)
            if nbrs is not None:
                self._mirror.set_wdeg(node, float(sum(d["weight"] for d in nbrs.values())))

    # ------------------------------------------------------------------ store
    def add(self, text: str, context: str = "", at: Timestamp | None = None,
            metadata: Mapping[str, Any] | None = None) -> MemoryRecord:
        """Remember ``text`` said in ``context`` at time ``at`` (default: now).

        Returns the stored :class:`MemoryRecord` with its label, pi and tau.
        """
        return self.add_many([{"text": text, "context": context, "at": at,
                               "metadata": metadata}])[0]

    def add_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[MemoryRecord]:
        """Remember several items in one batch (same semantics as :meth:`add`).

        Each item is a text, or a mapping with ``text`` and optional ``context``, ``at``,
        ``metadata`` and ``id`` (an existing id is replaced). Every item is validated before
        anything is written: one bad item rejects the batch and stores nothing.

        While the batch is stored, the process's BLAS runs on one thread (a second one spins
        between the batch's matrix products and takes a core from Chroma; see
        ``scrubjay._blas``); its thread count is restored after.
        """
        with self._lock, self._llm_budget():
            self._fresh()
            prepared = self._prepare_items(items)
            if not prepared:
                return []
            with one_blas_thread():
                return self._store_items(prepared)

    def _prepare_items(self, items: Iterable[str | Mapping[str, Any]]) -> list[_Prepared]:
        owner = "ScrubJayMemory.add"
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise InvalidInputError("The 'items' parameter of ScrubJayMemory.add_many must be an "
                                    f"iterable of texts or mappings. Got {type(items).__name__} "
                                    "instead.")
        now = self.now()
        out: list[_Prepared] = []
        seen: set[str] = set()
        for item in items:
            if isinstance(item, str):
                item = {"text": item}
            if not isinstance(item, Mapping):
                raise InvalidInputError("Each item of ScrubJayMemory.add_many must be a str or a "
                                        f"mapping. Got {type(item).__name__} instead.")
            unknown = set(item) - {"text", "context", "at", "metadata", "id"}
            if unknown:
                raise InvalidInputError(f"Unknown keys {sorted(unknown)} in an item of "
                                        "ScrubJayMemory.add_many; allowed: text, context, at, "
                                        "metadata, id.")
            text = check_text(item.get("text"), "text", owner)
            context = check_text(item.get("context") or "", "context", owner, allow_empty=True)
            at = item.get("at")
            at_s = now if at is None else to_epoch_s(at, owner)
            _check_not_future(at_s, now, owner)
            metadata = check_metadata(item.get("metadata"), owner)
            mid = item.get("id")
            given = mid is not None
            if not given:
                mid = uuid.uuid4().hex
            elif not isinstance(mid, str) or not mid.strip() or len(mid) > 256:
                raise InvalidInputError(f"The 'id' of an item of {owner} must be a non-empty str "
                                        f"of at most 256 characters. Got {mid!r} instead.")
            if mid in seen:
                raise InvalidInputError(f"The id {mid!r} occurs twice in one add_many batch.")
            seen.add(mid)
            out.append(_Prepared(text=text, context=context, at_s=at_s, metadata=metadata,
                                 id=mid, id_given=given))
        return out

    def _llm_budget(self) -> contextlib.AbstractContextManager[None]:
        """One operation's chat-model calls share ``config.llm.timeout_s``."""
        return self._llm.budget() if self._llm is not None else contextlib.nullcontext()

    def _annotations(self, items: list[_Prepared]) -> list[str]:
        if self._llm is None or not self.config.llm.annotate:
            return [""] * len(items)
        return annotate_many(self._llm, [p.text for p in items], [p.context for p in items],
                             batch_items=self.config.llm.batch_items)

    def _store_items(self, items: list[_Prepared]) -> list[MemoryRecord]:
        annotations = self._annotations(items)
        what = self._embed([f"{p.text} {a}".strip() if a else p.text
                            for p, a in zip(items, annotations, strict=True)])
        where = self._embed([p.context for p in items])
        self._store.check_embedder(self._embedder.name, int(what.shape[1]))

        def records_of(labels: list[Perishability]) -> list[MemoryRecord]:
            return [MemoryRecord(id=p.id, text=p.text, context=p.context, label=c.label,
                                 pi=float(c.pi), tau_s=float(c.tau_s),
                                 value=float(self.config.decay.default_value),
                                 created_at_s=float(p.at_s), metadata=p.metadata,
                                 annotation=a, source=c.source)
                    for p, a, c in zip(items, annotations, labels, strict=True)]

        def write_early(labels: list[Perishability]) -> tuple[list[MemoryRecord],
                                                                Future[None]]:
            records = records_of(labels)
            return records, self._write_unlinked(records, what, where)

        # against a server, the batch's writes (its rows, their edges, its neighbours' edges,
        # a replaced memory's delete) share one change-log entry
        with self._store.log_batch([p.id for p in items]):
            labels, replaced, reads, early = self._classify_and_read(
                items, what, where, any(annotations),
                write_early if self._writes_unlinked() else None)
            records = early[0] if early is not None else records_of(labels)
            # a replaced memory goes before the batch is linked and written: if that fails,
            # the old version is written back from this backup rather than lost
            backup = self._store.backup(replaced) if replaced else None
            try:
                return self._replace_and_write(records, replaced, what, where, reads,
                                               early[1] if early is not None else None)
            except ScrubJayError:
                if backup is not None:
                    self._restore_replaced(backup)
                raise

    def _writes_unlinked(self) -> bool:
        """Whether a batch's rows go to the store before their edges (a server's add is its
        dearest write: it runs while the batch is read and linked, the edges follow)."""
        return not self._embedded and self.config.graph.max_neighbors > 0

    def _write_unlinked(self, records: list[MemoryRecord], what: NDArray[np.float32],
                        where: NDArray[np.float32]) -> Future[None]:
        """Start the write of ``records`` without their edges, in a worker of its own."""
        return self._worker("write").submit(
            self._store.add_unlinked, [r.id for r in records], [r.text for r in records],
            [self._meta(r, "[]") for r in records], what, where)

    def _replace_and_write(self, records: list[MemoryRecord], replaced: list[str],
                           what: NDArray[np.float32], where: NDArray[np.float32],
                           reads: _LinkReads | None,
                           unlinked: Future[None] | None = None) -> list[MemoryRecord]:
        """Delete the memories ``records`` replace, link ``records`` and write them
        (``unlinked``: their rows' write without edges, started already)."""
        if replaced:
            self._delete_ids(replaced)
        graph = self._graph if self._use_mirror else EpisodicGraph(self.config.graph)
        if reads is None and not self._use_mirror and self.config.graph.max_neighbors > 0:
            reads = self._server_link_reads([r.id for r in records],
                                            [r.created_at_s for r in records], what, where)
        ids = [r.id for r in records]
        new_ids = set(ids)
        # every id is new now: the ids it replaces were deleted above
        if unlinked is None and self._writes_unlinked():
            # a server takes the rows while this thread links them; their edges follow in
            # one update (the add is a server's dearest write, the update a cheap one)
            unlinked = self._write_unlinked(records, what, where)
        try:
            changed = self._link(records, what, where, graph, reads)
            old = sorted(changed - new_ids)
            before: dict[str, str | None] | None = None
            if reads is not None:
                before = {i: reads.rows[i].meta.get("sj_edges") for i in old if i in reads.rows}
                before.update(self._complete_adjacency(
                    graph, [i for i in old if i not in reads.rows], set(reads.rows) | new_ids))
            edges = graph.dumps_many([*ids, *old])
            if before is not None:
                # an older memory that gained an edge to a new one and lost it again within
                # the batch (the new one's cap evicted it) keeps its row: a server's update
                # of an older row is its dearest write per row
                kept = [k for k, i in enumerate(old, len(ids)) if edges[k] != before.get(i)]
                old = [old[k - len(ids)] for k in kept]
                edges = [*edges[:len(ids)], *(edges[k] for k in kept)]
        except BaseException:
            if unlinked is not None:
                self._drop_unlinked(unlinked, ids)
            raise
        try:
            if unlinked is not None:
                unlinked.result()  # its own failure deleted what it wrote
                self._store.link_added(ids, edges[:len(records)],
                                       adjacency=list(zip(old, edges[len(records):],
                                                          strict=True)))
            else:
                metas = [self._meta(r, e)
                         for r, e in zip(records, edges[:len(records)], strict=True)]
                self._store.add(ids, [r.text for r in records], metas, what, where,
                                adjacency=list(zip(old, edges[len(records):], strict=True)))
        except ScrubJayError:
            self._maybe_written.update(new_ids)  # a retry deletes them before its add
            if self._use_mirror:  # roll the in-memory graph back to what Chroma holds
                for r in records:
                    self._graph.remove(r.id)
                self._reload_adjacency(old)
            raise
        if self._use_mirror:
            if self._mirror is None:
                self._mirror = Mirror(int(what.shape[1]))
            self._mirror.append(records, what, where)
            self._refresh_wdeg(changed)
        newest = max(r.created_at_s for r in records)
        if newest > self._newest_t:
            self._newest_t = newest
            if self._embedded:
                # one process holds an embedded store, and its next open also reads the
                # newest time off the rows: the state is written at close (a collection
                # update per add cost about 3 ms of a 30 ms add)
                self._newest_unsaved = True
            else:
                self._save_newest("The batch is stored, but the namespace's state keeps "
                                  "its earlier newest time until a newer memory is added")
        return records

    def _drop_unlinked(self, unlinked: Future[None], ids: list[str]) -> None:
        """After the linking of a batch failed: wait for its rows' add (server mode) and
        delete what it wrote, best effort; ids it may have left are noted for a retry."""
        try:
            unlinked.result()
        except ScrubJayError:
            return  # the add deleted what it wrote
        try:
            self._store.discard(ids)
        except ScrubJayError as exc:
            self._maybe_written.update(ids)
            logger.warning("A batch whose linking failed left %d memories without edges "
                           "(a retry with the same ids replaces them): %s", len(ids), exc)

    def _save_newest(self, failure: str) -> None:
        """Record the newest memory time in the namespace's state: a hint for the adaptive
        weights of other processes (and of the next open), not part of any batch; a failure
        is logged, with ``failure`` saying what it leaves."""
        try:
            self._store.set_state(sj_newest_t=self._newest_t)
            self._newest_unsaved = False
        except ScrubJayError as exc:
            logger.warning("%s: %s", failure, exc)

    def _restore_replaced(self, backup: RowsBackup) -> None:
        """After a batch that replaced stored memories failed: write the old versions back
        (rows, where rows, their and their neighbours' adjacency) and bring the mirror and
        the graph in step with them. Best effort: a store that cannot take the write either
        keeps whatever the failure left, and the batch's error is raised as it is."""
        try:
            self._store.restore(backup)
        except ScrubJayError as exc:
            logger.error("Could not restore %d memories that a failed batch replaced: %s",
                         len(backup.ids), exc)
            return
        try:
            rows = self._store.get(backup.ids, vectors=True) if self._use_mirror else []
        except ScrubJayError as exc:
            logger.error("Restored %d memories that a failed batch replaced, but could not "
                         "read them back (a reopen shows them): %s", len(backup.ids), exc)
            return
        if not rows:
            return
        self._append_rows(rows)
        self._maybe_written.difference_update(backup.ids)
        mine = set(backup.ids)
        self._reload_adjacency([*backup.ids, *(j for j, _ in backup.adjacency if j not in mine)])

    def _classify_and_read(
            self, items: list[_Prepared], what: NDArray[np.float32],
            where: NDArray[np.float32], annotated: bool,
            write_early: Callable[[list[Perishability]], tuple[list[MemoryRecord],
                                                               Future[None]]] | None = None,
    ) -> tuple[list[Perishability], list[str], _LinkReads | None,
               tuple[list[MemoryRecord], Future[None]] | None]:
        """A batch's perishability, the ids it replaces and (server mode) its link candidates'
        reads, which run in a worker while this thread classifies: the requests wait on the
        server, not on this process's interpreter. ``write_early``: called with the labels
        once the candidates' queries are done and the batch replaces nothing, to start the
        rows' write while the candidates' rows are still being read (its result is
        returned; it is undone if the reads then fail)."""
        # the bundled embedder is the estimator's: it reuses these rows when what = text
        reuse = isinstance(self._embedder, WordLlamaEmbedder) and not annotated

        def classify() -> list[Perishability]:
            return self._classifier.classify_many(
                [p.text for p in items], [p.context for p in items], what, where,
                vectors_by=self._embedder.name if reuse else None)

        ids = [p.id for p in items]
        # only an id the caller chose can be stored already (server mode: a request saved)
        chosen = [p.id for p in items if p.id_given]
        if self._use_mirror or self.config.graph.max_neighbors == 0:
            return classify(), self._existing(chosen), None, None
        queried = _Queried()

        def read() -> tuple[list[str], _LinkReads | None]:
            try:
                found = self._existing(chosen)
                if found:  # the replaced rows must go before the candidates are read
                    return found, None
                return found, self._server_link_reads(ids, [p.at_s for p in items], what,
                                                      where, in_worker=True, queried=queried)
            finally:
                queried.mark(False)  # no-op once the queries were marked done

        later = self._worker("main").submit(read)
        early = None
        try:
            labels = classify()
            if write_early is not None and queried.wait():
                # the queries saw the store without the batch: its rows may go now
                early = write_early(labels)
            replaced, reads = later.result()
        except BaseException:
            with contextlib.suppress(Exception):
                later.result()
            if early is not None:
                self._drop_unlinked(early[1], [p.id for p in items])
            raise
        return labels, replaced, reads, early

    def _complete_adjacency(self, graph: EpisodicGraph, ids: Sequence[str],
                            complete: set[str]) -> dict[str, str | None]:
        """Server mode: ``graph`` holds the whole adjacency of the link candidates and the new
        memories (``complete``) only. Memories in ``ids`` lost an edge to one of them (an
        eviction) but were no candidate, so ``graph`` has only their edges to ``complete``:
        add the edges their rows list to anyone else, so that the rewrite of their rows keeps
        them. (Such a memory gains no edge: only candidates and new memories do.) Returns
        the adjacency payload each row held."""
        if not ids:
            return {}
        rows = self._store.get(list(ids))
        for row in rows:
            try:
                listed = json.loads(row.meta.get("sj_edges") or "[]")
            except ValueError:
                continue
            others = [e for e in listed if isinstance(e, list) and e and e[0] not in complete]
            if others:
                graph.loads(row.id, json.dumps(others))
        return {row.id: row.meta.get("sj_edges") for row in rows}

    def _reload_adjacency(self, ids: Sequence[str]) -> None:
        for row in self._store.get(ids):
            for j in list(self._graph.g.neighbors(row.id)) if row.id in self._graph.g else []:
                self._graph.g.remove_edge(row.id, j)
            self._graph.loads(row.id, row.meta.get("sj_edges"))
        self._refresh_wdeg(ids)

    def _existing(self, ids: list[str]) -> list[str]:
        """Those of ``ids`` already stored, in order (server mode: one read per batch)."""
        if not ids:
            return []
        if self._use_mirror:
            row_of = self._mirror.row_of if self._mirror is not None else {}
            unsure = self._maybe_written
            return [i for i in ids if i in row_of or i in unsure]
        found = self._store.existing(ids)
        return [i for i in ids if i in found]

    def _link(self, records: list[MemoryRecord], what: NDArray[np.float32],
              where: NDArray[np.float32], graph: EpisodicGraph,
              reads: _LinkReads | None = None) -> set[str]:
        """Link each new memory to its strongest neighbours (existing and earlier in the batch).

        Each new item considers its ``4 * max_neighbors`` strongest candidates, as one add()
        does against the mirror: the union of the best existing ones and the best earlier ones
        of the batch, cut to that count. Candidates are chosen and ranked with numpy over
        blocks of the batch; only the degree-capped insertion (:meth:`EpisodicGraph.link_ranked`,
        inherently sequential) runs per item.
        """
        cfg = self.config.graph
        if cfg.max_neighbors == 0:
            for rec in records:
                graph.add_node(rec.id)
            return {rec.id for rec in records}
        existing = self._link_candidates(records, what, where, graph, reads)
        width = 4 * cfg.max_neighbors
        head = 2 * cfg.max_neighbors  # of width = 4 * max_neighbors
        t_new = np.array([r.created_at_s for r in records])
        batch_ids = np.array([r.id for r in records], dtype=object)
        has_where = bool(np.any(where))
        changed: set[str] = set()
        # valid while only link_ranked edits graph
        weakest: dict[str, tuple[float, str]] = {}
        floor: dict[str, float] = {}
        for lo in range(0, len(records), _LINK_BLOCK):
            hi = min(len(records), lo + _LINK_BLOCK)
            cols, comps = _earlier_candidates(what, where if has_where else None, t_new, lo, hi,
                                              width, cfg)
            # the union with the existing candidates, cut to the strongest `width` again
            merged, pick = _strongest(
                tuple(np.concatenate([old[lo:hi], new], axis=1)
                      for old, new in zip(existing.weights, comps, strict=True)),
                np.concatenate([existing.valid[lo:hi], cols >= 0], axis=1),
                width, cfg.min_edge_weight)
            ids = np.concatenate([existing.ids[lo:hi], batch_ids[np.maximum(cols, 0)]], axis=1)
            ids = np.take_along_axis(ids, np.maximum(pick, 0), axis=1)
            e = np.where(pick >= 0, merged[0], -np.inf)
            order = _rank(e, ids)
            counts = (pick >= 0).sum(axis=1)
            ranked = tuple(np.take_along_axis(a, order, axis=1) for a in (*merged, ids))
            # as lists, the first `head` of each row only: an item often has its
            # max_neighbors edges by then; the rest are converted for those that do not
            e, s_, c_, t_, ids = (a[:, :head].tolist() for a in ranked)
            tails = 0
            for r, m in enumerate(counts.tolist()):
                node = records[lo + r].id
                changed |= graph.link_ranked(node, ids[r][:m], e[r][:m], s_[r][:m], c_[r][:m],
                                             t_[r][:m], weakest, floor)
                if m > head and graph.degree(node) < cfg.max_neighbors:
                    tails += 1
                    re, rs, rc, rt, rids = (a[r, head:m].tolist() for a in ranked)
                    changed |= graph.link_ranked(node, rids, re, rs, rc, rt, weakest, floor)
            if 2 * tails > hi - lo:  # most items of this block needed the rest: convert it all
                head = width
        return changed

    def _link_candidates(self, records: list[MemoryRecord], what: NDArray[np.float32],
                         where: NDArray[np.float32], graph: EpisodicGraph,
                         reads: _LinkReads | None = None) -> _Candidates:
        """Edge weights of each new item against existing memories (padded rows); ``reads``:
        server mode's candidates, when read already."""
        if self._use_mirror:
            if self._mirror is None or len(self._mirror) == 0:
                return _Candidates.pad([_NO_CANDIDATES] * len(records))
            if not self._scan(len(self._mirror)):
                return self._link_candidates_hnsw(records, what, where)
            return self._link_candidates_scan(records, what, where)
        return self._link_candidates_server(records, what, where, graph, reads)

    def _link_candidates_scan(self, records: list[MemoryRecord], what: NDArray[np.float32],
                              where: NDArray[np.float32]) -> _Candidates:
        """The ``4 * max_neighbors`` strongest existing memories per new item, by an exact
        scan of the mirror (row blocks of the batch bound the (block, N) matrices)."""
        assert self._mirror is not None
        cfg = self.config.graph
        view = self._mirror.view()
        width = 4 * cfg.max_neighbors
        recs = view.records
        # the ids of every row (an O(N) list) only when the batch names more columns than
        # there are rows; one add looks its columns' ids up
        all_ids = (np.array(view.ids, dtype=object) if len(records) * width >= len(recs)
                   else None)
        t_new = np.array([r.created_at_s for r in records])
        has_where = bool(np.any(where)) and bool(np.any(view.where))
        # the selection runs in float32 (half the bytes per (block, N) pass), on times relative
        # to the batch's first; the chosen columns' components are float64, as before
        t_old32 = (view.t - t_new[0]).astype(np.float32)
        t_new32 = (t_new - t_new[0]).astype(np.float32)
        by_time = np.argsort(t_old32, kind="stable")
        parts: list[tuple[NDArray[np.float64], ...]] = []
        id_parts: list[NDArray[np.object_]] = []
        valid_parts: list[NDArray[np.bool_]] = []
        for lo in range(0, len(records), _LINK_BLOCK):
            hi = min(len(records), lo + _LINK_BLOCK)
            sim_s = what[lo:hi] @ view.what.T  # (block, N), float32
            sim_c = where[lo:hi] @ view.where.T if has_where else None
            # the strongest `width` by e_ij per row, then their components
            if sim_s.shape[1] > width:
                cols = strongest_columns(sim_s, sim_c, t_old32, t_new32[lo:hi], by_time, cfg,
                                         width)
            else:
                cols = np.broadcast_to(np.arange(sim_s.shape[1]), sim_s.shape)
            parts.append(_components(sim_s, sim_c, cols, view.t, t_new[lo:hi], cfg))
            id_parts.append(all_ids[cols] if all_ids is not None else np.array(
                [recs[c].id for c in cols.ravel().tolist()], dtype=object).reshape(cols.shape))
            valid_parts.append(np.ones(cols.shape, dtype=bool))
        weights = tuple(np.concatenate([p[j] for p in parts]) for j in range(4))
        return _Candidates(weights=weights, ids=np.concatenate(id_parts),  # type: ignore[arg-type]
                           valid=np.concatenate(valid_parts))

    def _server_link_reads(self, ids: Sequence[str], times: Sequence[float],
                           what: NDArray[np.float32], where: NDArray[np.float32], *,
                           in_worker: bool = False,
                           queried: _Queried | None = None) -> _LinkReads:
        """Server mode: a batch's link candidates, read from Chroma (requests only, no graph:
        :meth:`_store_items` runs them in a worker thread while it classifies).

        Per new item: its ``max_neighbors`` nearest by what, with their cosines (one query
        per :data:`_LINK_QUERY_PAGE` new memories) and by where (one query), and its
        ``2 * max_neighbors`` nearest in time on each side within
        :func:`~scrubjay.graph.temporal_horizon_s` (one read per stretch of time); then the
        rows of them all. So a batch costs a few requests per page, not per memory, and they
        overlap: the reads by time run beside the first queries, the pages are queried two at
        once (the server answers them on two cores), and the rows of each page's new
        candidates are read, without their what-vectors, while the next pages are queried
        (the server searches while this process decodes rows). A page's what-candidates
        that cannot be among an item's strongest are left out before its read
        (:func:`_cut_unreachable`: the read by time is waited for). A last read takes, with
        their what-vectors, the candidates that some item has no cosine for (found by where
        or by time alone). ``in_worker``: this runs in the ``main`` worker already (its
        own requests go to the ``inner`` one). The candidates' where-vectors are read only
        when a new item has one. ``queried`` is marked once no request of the batch reads
        the store by vector or by time any more (the batch's rows may then be written: no
        query can see them).
        """
        cfg = self.config.graph
        k = cfg.max_neighbors
        has_where = [i for i in range(len(ids)) if np.any(where[i])]
        horizon = temporal_horizon_s(cfg)
        pool = self._worker("inner" if in_worker else "main")

        def by_time_read() -> TimeNeighbours:
            # the newest time known here (the namespace's state at open, then this process's
            # adds) spares a fresh store object an upward read through newer memories
            return self._store.nearest_in_time_bounded(times, horizon, 2 * k,
                                                       newest_hint=self._newest_t) \
                if horizon is not None else TimeNeighbours.of([([], [], 0.0) for _ in ids])

        requested: set[str] = set()
        pending: list[Future[list[StoredRow]]] = []

        def new_ids(found: Iterable[list[str]]) -> list[str]:
            """The candidates in ``found`` whose rows are not asked for yet, now asked for."""
            new = {c for cands in found for c in cands} - requested
            requested.update(new)
            return sorted(new)

        def read_rows(found: Iterable[list[str]]) -> None:
            """Read, in the worker, the rows of the candidates in ``found`` not asked yet,
            without their what-vectors: the queries gave their similarities."""
            new = new_ids(found)
            if new:
                # a candidate's where-vector counts only against a new memory that has one
                pending.append(pool.submit(self._store.get, new, vectors=True,
                                           where_vectors=bool(has_where),
                                           index_vectors=False))

        cuttable = np.any(what, axis=1) & ~np.any(where, axis=1)
        t_new = np.asarray(times, dtype=np.float64)

        def query(lo: int) -> tuple[list[list[str]], list[list[float]]]:
            return self._store.query_many_similar("what", what[lo:lo + _LINK_QUERY_PAGE], k)

        by_time_later = pool.submit(by_time_read)
        beside: Future[tuple[list[list[str]], list[list[float]]]] | None = None
        try:
            by_what: list[list[str]] = []
            sims: list[list[float]] = []
            pages = range(0, len(ids), _LINK_QUERY_PAGE)
            for pair in range(0, len(pages), 2):
                # two pages at once: a server answers them on two cores; the rows of the
                # pair before are read meanwhile
                if pair + 1 < len(pages):
                    beside = self._worker("query").submit(query, pages[pair + 1])
                answers = [(pages[pair], query(pages[pair]))]
                if beside is not None:
                    answers.append((pages[pair + 1], beside.result()))
                for lo, answer in answers:
                    # here, not in the query worker: a worker waits on no other worker
                    page, page_sims = _cut_unreachable(*answer, lo, t_new, cuttable,
                                                       by_time_later.result(), cfg)
                    by_what.extend(page)
                    sims.extend(page_sims)
                    if len(pages) > 1:
                        read_rows(page)
                beside = None
            by_where: dict[int, list[str]] = {}
            if has_where:
                by_where = dict(zip(has_where, self._store.query_many(
                    "where", where[has_where], k), strict=True))
            by_time = by_time_later.result().ids
            if queried is not None:  # no request of this batch reads the store by vector
                queried.mark(True)   # or time any more: its rows may be written
            per_item, similar = _per_item(ids, what, by_what, sims, by_where, by_time)
            # the rest, and every candidate some item has no similarity for: one read of
            # rows with their what-vectors, here (it wins over a page's read of the same row)
            needed = {c for mine, known in zip(per_item, similar, strict=True)
                      for c in mine if c not in known}
            last = sorted(set(new_ids([*by_what[-_LINK_QUERY_PAGE:], *by_where.values(),
                                       *by_time])) | needed)
            got = [row for later in pending for row in later.result()]
            got.extend(self._store.get(last, vectors=True, where_vectors=bool(has_where)))
        finally:  # nothing is left running when a request failed
            started: list[Future[Any]] = [by_time_later, *pending,
                                          *([beside] if beside is not None else [])]
            for later in started:
                with contextlib.suppress(Exception):
                    later.result()
        read = {r.id: r for r in got}
        return _LinkReads(per_item=per_item, rows={i: read[i] for i in sorted(read)},
                          similar=similar)

    def _link_candidates_server(self, records: list[MemoryRecord], what: NDArray[np.float32],
                                where: NDArray[np.float32], graph: EpisodicGraph,
                                reads: _LinkReads | None) -> _Candidates:
        """Server mode: exact edge weights on the candidates of :meth:`_server_link_reads`
        (read now unless ``reads`` were read meanwhile)."""
        cfg = self.config.graph
        if reads is None:
            reads = self._server_link_reads([r.id for r in records],
                                            [r.created_at_s for r in records], what, where)
        per_item, rows = reads.per_item, reads.rows
        for r in rows.values():  # their adjacency, so the degree caps hold
            graph.loads(r.id, r.meta.get("sj_edges"))
        if not rows:
            return _Candidates.pad([_NO_CANDIDATES] * len(records))
        # the candidates' vectors and times as matrices (a row read without its what-vector
        # has zeros there and is flagged), and every (item, candidate) pair as flat arrays
        index = {c: j for j, c in enumerate(rows)}
        zero = np.zeros(what.shape[1], dtype=np.float32)
        all_what = np.stack([zero if r.what is None else r.what for r in rows.values()])
        has_what = np.array([r.what is not None for r in rows.values()])
        # a row RCI moved sits in the index off its exact vector: its query similarity is off
        moved = np.array([r.drift_rad > 0.0 for r in rows.values()])
        all_t = np.array([float(r.meta.get("sj_t", 0.0)) for r in rows.values()])
        lists = [[c for c in sorted(mine) if c in index] for mine in per_item]
        flat = [c for cands in lists for c in cands]
        item = np.repeat(np.arange(len(lists)), [len(cands) for cands in lists])
        col = np.fromiter((index[c] for c in flat), dtype=np.intp, count=len(flat))
        known = np.fromiter((sims.get(c, math.nan) for sims, cands
                             in zip(reads.similar, lists, strict=True) for c in cands),
                            dtype=np.float64, count=len(flat))
        queried = ~np.isnan(known) & ~moved[col]
        sim_s = np.where(queried, known, 0.0)
        need = np.flatnonzero(~queried)
        sim_s[need] = _pair_dots(all_what, col[need], what, item[need])
        sim_c = np.zeros(len(flat))
        if np.any(where):
            all_where = np.stack([zero if r.where is None else r.where for r in rows.values()])
            sim_c = _pair_dots(all_where, col, where, item)
        t_new = np.array([r.created_at_s for r in records])
        weights = edge_weights_from_similarity(sim_s, sim_c, np.abs(all_t[col] - t_new[item]),
                                               cfg)
        ok = queried | has_what[col]  # a row gone before its vector was read: no candidate
        ids = np.array(flat, dtype=object)
        if not ok.all():
            weights = tuple(a[ok] for a in weights)
            item, ids = item[ok], ids[ok]
        return _Candidates.from_pairs(len(records), item, ids, weights)

    def _scan(self, n: int) -> bool:
        """Whether a mirror of ``n`` memories is scanned exactly (else HNSW candidates)."""
        limit = self.config.search.scan_max
        return limit is None or n <= limit

    def _link_candidates_hnsw(self, records: list[MemoryRecord], what: NDArray[np.float32],
                              where: NDArray[np.float32]) -> _Candidates:
        """Link candidates for a large mirror: per new item, the union of its nearest
        ``4 * max_neighbors`` by what and by where (Chroma's HNSW, one batched query each) and
        by time (the mirror's creation times, sorted once per batch), with exact edge weights.
        """
        assert self._mirror is not None
        cfg = self.config.graph
        width = 4 * cfg.max_neighbors
        view = self._mirror.view()
        row_of = self._mirror.row_of
        by_what = self._store.query_many("what", what, width)
        has_where = [i for i in range(len(records)) if np.any(where[i])]
        by_where: dict[int, list[str]] = {}
        if has_where:
            got = self._store.query_many("where", where[has_where], width)
            by_where = dict(zip(has_where, got, strict=True))
        order = np.argsort(view.t, kind="stable")
        t_sorted = view.t[order]
        out: list[_CandidateRow] = []
        for i in range(len(records)):
            rows = {row_of[m] for m in by_what[i] if m in row_of}
            rows.update(row_of[m] for m in by_where.get(i, ()) if m in row_of)
            at = int(np.searchsorted(t_sorted, records[i].created_at_s))
            rows.update(order[max(0, at - width):at + width].tolist())
            idx = np.fromiter(sorted(rows), dtype=np.intp, count=len(rows))
            e, s, c, tt = edge_weights(what[i], where[i], records[i].created_at_s,
                                       view.what[idx], view.where[idx], view.t[idx], cfg)
            out.append((e, s, c, tt, [view.records[j].id for j in idx]))
        return _Candidates.pad(out)

    # ------------------------------------------------------------------ retrieve
    def search(self, query: str, context: str = "", k: int = 5,
               at: Timestamp | None = None, *, exclude_stale: bool = False) -> list[Hit]:
        """The ``k`` best memories for ``query`` asked in ``context`` at time ``at``.

        Each :class:`Hit` carries its score, utility, stale flag and the score's breakdown.
        With ``exclude_stale=True`` only memories that are not stale at ``at`` compete (still
        ``k`` of them when there are enough).
        """
        owner = "ScrubJayMemory.search"
        check_text(query, "query", owner)
        check_text(context, "context", owner, allow_empty=True)
        k = check_k(k, owner)
        with self._lock:
            self._check_open()
            cursor, log = self._log_cursor, self._store.log
            if cursor is None or log is None:
                return self._search(query, context, k, at, exclude_stale)
            # server mode with a mirror: the change log is read beside the search, which runs
            # again in the rare case that it brought changes (its request costs about what
            # the search's own does)
            before = cursor.copy()
            later = self._worker("log").submit(log.changes, cursor)
            try:
                hits = self._search(query, context, k, at, exclude_stale)
            except BaseException:
                with contextlib.suppress(Exception):
                    later.result()
                raise
            ids = later.result()  # a failed read raises here, the cursor untouched
            if ids is not None and not ids:
                return hits
            self._apply_changes(ids, before)
            return self._search(query, context, k, at, exclude_stale)

    def _search(self, query: str, context: str, k: int, at: Timestamp | None,
                exclude_stale: bool) -> list[Hit]:
        """:meth:`search` once the memory is current (the caller holds the lock)."""
        owner = "ScrubJayMemory.search"
        t_q = self._time(at, owner)
        # (server mode: an empty store answers an empty query; no count() round trip)
        if self._dim is None or (self._use_mirror and self._size() == 0):
            return []
        e_q = self._embed([query], query=True)[0]
        c_q = self._embed([context], query=True)[0]
        # np.linalg.norm of a vector is sqrt(x . x): the same float, without its checks
        weights = adaptive_weights(query, float(np.sqrt(e_q.dot(e_q))),
                                   float(np.sqrt(c_q.dot(c_q))),
                                   t_q - self._newest_t if math.isfinite(self._newest_t)
                                   else 0.0, self.config.weights)
        if self._buffer is not None and not exclude_stale:
            hits = self._search_buffer(e_q, c_q, weights, k, t_q)
            if hits is not None:
                return hits
        relevance = self.config.search.ranking == "relevance"
        if relevance and not self._use_mirror:
            return self._server_relevance(e_q, c_q, weights, k, t_q, exclude_stale)
        if self._use_mirror and self._mirror:
            if not relevance or self._scan(len(self._mirror)):
                rows = self._mirror.view()
            elif np.any(c_q):
                rows = self._hnsw_candidates(e_q, c_q)
            else:
                rows = self._hnsw_relevance_rows(e_q, weights, k, t_q, exclude_stale)
        else:
            rows = self._server_candidates(e_q, c_q)
        if exclude_stale:
            u = utility(rows.value, rows.pi, rows.tau, rows.t, t_q)
            fresh = np.flatnonzero(~is_stale(u, rows.value, self.config.decay.stale_ratio))
            if len(fresh) < len(rows):
                rows = rows.take(fresh)
                if self.config.search.ranking == "relevance":
                    return self._rank_by_relevance(rows, e_q, c_q, weights, k, t_q)
                return self._rank(rows, e_q, c_q, weights, k, t_q, exhaustive=False)
        if self.config.search.ranking == "relevance":
            return self._rank_by_relevance(rows, e_q, c_q, weights, k, t_q)
        return self._rank(rows, e_q, c_q, weights, k, t_q, exhaustive=self._use_mirror)

    def _rank_by_relevance(self, rows: Rows, e_q: NDArray[np.float32],
                           c_q: NDArray[np.float32], weights: NDArray[np.float64], k: int,
                           t_q: float) -> list[Hit]:
        """Rank by ``relevance * V / V0`` (what and where mixed by the adaptive weights; value
        lowered by RCI sinks superseded memories); time decay only sets ``stale``."""
        a, b = float(weights[0]), float(weights[1])
        rel = a * (rows.what @ e_q)
        if np.any(c_q):  # an empty context embeds to zero: its column adds nothing
            rel += b * (rows.where @ c_q)
        key = rel / (a + b) * rows.value / self.config.decay.default_value
        if len(key) > k:  # O(N) selection, then a stable sort of the k best
            part = np.argpartition(-key, k - 1)[:k]
            top = part[np.lexsort((part, -key[part]))]
        else:
            top = np.argsort(-key, kind="stable")
        hits = self._rank(rows.take(top), e_q, c_q, weights, k, t_q, exhaustive=False)
        key_of = {rows.records[i].id: float(key[i]) for i in top}
        order = {rows.records[i].id: n for n, i in enumerate(top)}
        return [replace(h, score=key_of[h.id]) for h in sorted(hits, key=lambda h: order[h.id])]

    def _hnsw_candidates(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32]) -> Rows:
        """Mirror rows of the nearest memories by what and by where (Chroma's HNSW index)."""
        assert self._mirror is not None
        n = self.config.search.candidates
        ids = self._store.query_ids("what", e_q, n)
        if np.any(c_q):
            ids = ids + self._store.query_ids("where", c_q, n)
        row_of = self._mirror.row_of
        idx = sorted({row_of[m] for m in ids if m in row_of})
        return self._mirror.view().take(idx)

    def _hnsw_relevance_rows(self, e_q: NDArray[np.float32], weights: NDArray[np.float64],
                             k: int, t_q: float, exclude_stale: bool) -> Rows:
        """Mirror rows that hold the relevance top ``k`` of a query without context: the
        ``SERVER_FIRST_PER_K * k`` nearest by Chroma's HNSW index, widened by ``SERVER_WIDEN``
        (up to ``SearchConfig.candidates``) until the k-th key (exact, from the mirror) is at
        least the bound of every memory left out. The bound uses the last index similarity,
        widened by the largest RCI drift between an index vector and its exact one, and the
        largest value in the mirror: exact up to HNSW's own approximation."""
        assert self._mirror is not None
        mirror, v0 = self._mirror, self.config.decay.default_value
        view = mirror.view()
        value_max, drift_max = mirror.maxima()
        value_max = max(v0, value_max)
        cap = max(self.config.search.candidates, k)
        n = min(cap, SERVER_FIRST_PER_K * k)
        while True:
            found, sims = self._store.query_scored("what", e_q, n, rows=False)
            rows = view.take(sorted({mirror.row_of[r.id] for r in found
                                     if r.id in mirror.row_of}))
            if len(found) < n or n >= cap:
                return rows
            key = relevance_key(weights, rows.what @ e_q, np.zeros(len(rows)), rows.value, v0)
            if exclude_stale:
                u = utility(rows.value, rows.pi, rows.tau, rows.t, t_q)
                key = key[~is_stale(u, rows.value, self.config.decay.stale_ratio)]
            kth = float(np.sort(key)[-k]) if len(key) >= k else -math.inf
            floor = drifted_similarity_bound(float(sims[-1]), drift_max)
            bound = relevance_bound(weights, floor, 0.0, value_max, v0)
            if bound <= kth:
                return rows
            n = min(cap, SERVER_WIDEN * n)

    def _server_candidates(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32]) -> Rows:
        n = self.config.search.candidates
        if not np.any(c_q):  # no where channel: one query brings the rows themselves
            stored = self._store.query_rows(e_q, n, where_vectors=False)
            return self._rows_of(sorted(stored, key=lambda r: r.id))
        ids = set(self._store.query("what", e_q, n)[0])
        ids.update(self._store.query("where", c_q, n)[0])
        return self._fetch_rows(sorted(ids))

    def _server_relevance(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                          weights: NDArray[np.float64], k: int, t_q: float,
                          exclude_stale: bool) -> list[Hit]:
        """Relevance search against a Chroma server: the key needs only the similarities
        (from Chroma's distances) and the value (metadata), so no vector is transferred.

        It asks for ``SERVER_FIRST_PER_K * k`` candidates and widens them by ``SERVER_WIDEN``
        (up to ``SearchConfig.candidates``) until the k-th key is at least the bound of every
        memory left out: exact up to Chroma's HNSW approximation, provided no memory left out
        has a value above the largest one seen (the default, the candidates' and those this
        process wrote through RCI). The hits' graph bonus is deferred (see :class:`Hit`).
        """
        cap = max(self.config.search.candidates, k)
        n = min(cap, SERVER_FIRST_PER_K * k)
        while True:
            cand = self._server_scored(
                e_q, c_q, weights, n,
                lambda c: self._server_top(c, weights, k, t_q, exclude_stale)[0])
            kth, top, key, u, stale = self._server_top(cand, weights, k, t_q, exclude_stale)
            if cand.bound <= kth or n >= cap:
                break
            n = min(cap, SERVER_WIDEN * n)
        graph_of = _DeferredGraph(self, cand, [cand.records[i].id for i in top], e_q, c_q,
                                  weights, t_q)
        w = tuple(float(x) for x in weights)
        return [Hit.deferred(graph_of=graph_of, record=cand.records[i], score=float(key[i]),
                             utility=float(u[i]), stale=bool(stale[i]),
                             what=float(cand.sim_what[i]), where=float(cand.sim_where[i]),
                             when=float(u[i]), weights=w)  # type: ignore[arg-type]
                for i in top]

    def _server_top(self, cand: _Scored, weights: NDArray[np.float64], k: int, t_q: float,
                    exclude_stale: bool) -> tuple[float, NDArray[np.intp], NDArray[np.float64],
                                                  NDArray[np.float64], NDArray[np.bool_]]:
        """(k-th key or -inf when fewer than k compete, the top k best first (ties by id),
        every key, utility and stale flag) over ``cand``."""
        value = cand.value
        key = relevance_key(weights, cand.sim_what, cand.sim_where, value,
                            self.config.decay.default_value)
        u = utility(value, np.array([r.pi for r in cand.records], dtype=np.float64),
                    np.array([r.tau_s for r in cand.records], dtype=np.float64),
                    np.array([r.created_at_s for r in cand.records], dtype=np.float64), t_q)
        stale = is_stale(u, value, self.config.decay.stale_ratio)
        pool = np.flatnonzero(~stale) if exclude_stale else np.arange(len(key))
        top = pool[np.lexsort((pool, -key[pool]))][:k]
        kth = float(key[top[-1]]) if len(top) == k else -math.inf
        return kth, top, key, u, stale

    def _server_scored(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                       weights: NDArray[np.float64], n: int,
                       kth_of: Callable[[_Scored], float]) -> _Scored:
        """The top ``n`` by what (and by where, with a context) with both similarities exact.

        Without a context: one query. With one: a query of each collection; a candidate found
        by one only lacks the other similarity, which is then bounded by that list's last
        one (threshold algorithm). Only candidates whose bound beats ``kth_of`` the complete
        ones are completed from their vectors (a ``get`` of the where-vectors of what
        candidates, of the rows of where candidates); the others count in ``bound``.
        """
        if not np.any(c_q):
            what_rows, sim_what = self._store.query_scored("what", e_q, n, rows=True)
            what_floor = self._what_floor(what_rows, sim_what, n)
            return self._scored(what_rows, sim_what.tolist(), {}, weights, what_floor, 0.0)
        v0 = self.config.decay.default_value
        (what_rows, sim_what), (where_rows, sim_c) = self._concurrently(
            lambda: self._store.query_scored("what", e_q, n, rows=True),
            lambda: self._store.query_scored("where", c_q, n, rows=False))
        what_floor = self._what_floor(what_rows, sim_what, n)
        sim_where = {r.id: float(x) for r, x in zip(where_rows, sim_c, strict=True)}
        # a full where list bounds the where-similarity of the others by its last one, or by
        # 0 for those without a where row (no context); a short one lists every where row.
        # A memory stored without a context has no where row: 0, known from its metadata.
        where_floor = max(0.0, float(sim_c[-1])) if len(where_rows) == n else 0.0
        lacking = [i for i, r in enumerate(what_rows) if r.id not in sim_where
                   and len(where_rows) == n and r.meta.get("sj_ctx")]
        complete = sorted(set(range(len(what_rows))) - set(lacking))
        known = self._scored([what_rows[i] for i in complete],
                             [float(sim_what[i]) for i in complete], sim_where, weights,
                             what_floor, where_floor)
        kth = kth_of(known)
        value_max = self._value_max_of(known.records)
        in_what = {r.id for r in what_rows}
        by_where = [r.id for r in where_rows if r.id not in in_what]
        ub_what = [relevance_key(weights, np.array([sim_what[i]]), np.array([where_floor]),
                                 np.array([self._record(what_rows[i]).value]), v0)[0]
                   for i in lacking]
        ub_where = [relevance_bound(weights, what_floor if what_floor is not None else 1.0,
                                    sim_where[m], value_max, v0) for m in by_where]
        fill = [lacking[j] for j, ub in enumerate(ub_what) if ub > kth]
        fetch = [m for m, ub in zip(by_where, ub_where, strict=True) if ub > kth]
        pruned = [ub for ub in ub_what + ub_where if ub <= kth]
        vecs, extra = self._concurrently(
            lambda: self._store.where_vectors([what_rows[i].id for i in fill]),
            lambda: self._store.get(fetch, vectors=True, where_vectors=False))
        for mid, vec in vecs.items():
            sim_where[mid] = float(vec @ c_q)
        rows = [what_rows[i] for i in complete + fill] + extra
        sims = [float(sim_what[i]) for i in complete + fill] + \
            [float(r.what @ e_q) for r in extra]
        logger.debug("server search, n=%d: %d complete, %d completed, %d bounded out", n,
                     len(complete), len(fill) + len(extra), len(pruned))
        out = self._scored(rows, sims, sim_where, weights, what_floor, where_floor)
        out.bound = max([out.bound] + pruned)
        return out

    def _what_floor(self, rows: list[StoredRow], sims: NDArray[np.float64],
                    n: int) -> float | None:
        """The largest exact what-similarity a memory left out of a full list of ``n`` can
        have (None when the list is short: it holds every memory). The list is cut by index
        similarity; an index vector is at most ``_drift_max`` rad from its memory's exact one
        (RCI defers rewrites), so the last index similarity is widened by that angle."""
        if len(rows) < n:
            return None
        self._drift_max = max([self._drift_max] + [r.drift_rad for r in rows])
        # the last row's own similarity is exact: its index one is within its drift of it
        return drifted_similarity_bound(float(sims[-1]), self._drift_max + rows[-1].drift_rad)

    def _concurrently(self, first: Callable[[], Any], second: Callable[[], Any]
                      ) -> tuple[Any, Any]:
        """``(first(), second())``, the second in a worker thread meanwhile (two independent
        Chroma requests: the latency of the slower instead of the sum)."""
        later = self._worker("main").submit(second)
        try:
            done = first()
        finally:
            got = later.result()
        return done, got

    def _worker(self, role: Literal["main", "inner", "query", "write", "log"]
                ) -> ThreadPoolExecutor:
        """A single-thread worker, made on first use: ``main`` runs requests beside this
        thread (:meth:`_concurrently`), ``inner`` those beside code that runs in ``main``
        itself, ``query`` a second page of a batch's link queries, ``write`` a batch's
        rows and ``log`` a search's read of the change log; none runs anything that waits on
        another, so no call can deadlock however many threads make it."""
        pool = self._pools.get(role)
        if pool is None:
            pool = self._pools[role] = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="scrubjay" if role == "main"
                else f"scrubjay-{role}")
        return pool

    def _value_max_of(self, records: Iterable[MemoryRecord]) -> float:
        """The largest value a memory can be assumed to have (see ``_server_relevance``)."""
        return max([self.config.decay.default_value, self._value_max]
                   + [r.value for r in records])

    def _scored(self, rows: list[StoredRow], sim_what: list[float],
                sim_where: Mapping[str, float], weights: NDArray[np.float64],
                what_floor: float | None, where_floor: float) -> _Scored:
        """Candidates sorted by id, with the bound of the memories left out (none when the
        what list was short: it then holds every memory)."""
        order = sorted(range(len(rows)), key=lambda i: rows[i].id)
        records = [self._record(rows[i]) for i in order]
        bound = -math.inf if what_floor is None else relevance_bound(
            weights, what_floor, where_floor, self._value_max_of(records),
            self.config.decay.default_value)
        return _Scored(records=records,
                       sim_what=np.array([sim_what[i] for i in order], dtype=np.float64),
                       sim_where=np.array([sim_where.get(r.id, 0.0) for r in records],
                                          dtype=np.float64),
                       edges={rows[i].id: str(rows[i].meta.get("sj_edges", "[]"))
                              for i in order},
                       bound=bound)

    def _fetch_rows(self, ids: Sequence[str], *, where: bool = True) -> Rows:
        """Rows for ``ids`` from Chroma (``where=False``: zero where-vectors, for a query
        without context, where they multiply a zero vector)."""
        return self._rows_of(self._store.get(list(ids), vectors=True, where_vectors=where))

    def _rows_of(self, stored: list[StoredRow]) -> Rows:
        dim = self._dim or 1
        zero = np.zeros(dim, dtype=np.float32)
        records = [self._record(r) for r in stored]
        if not stored:
            return Rows.build([], np.zeros((0, dim), np.float32), np.zeros((0, dim), np.float32))
        rows = Rows.build(records, np.stack(_whats(stored)).astype(np.float32),
                          np.stack([r.where if r.where is not None else zero
                                    for r in stored]).astype(np.float32))
        for r in stored:
            self._graph_cache[r.id] = r.meta.get("sj_edges", "[]")
        return rows

    @property
    def _graph_cache(self) -> dict[str, str]:
        cache = getattr(self, "_adj_cache", None)
        if cache is None:
            cache = {}
            self._adj_cache = cache
        return cache

    def _neighbours(self, mid: str) -> list[tuple[str, float]]:
        if self._use_mirror:
            return self._graph.neighbors(mid)
        return _parse_edges(self._graph_cache.get(mid))

    def _partial_scores(self, rows: Rows, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                        weights: NDArray[np.float64], t_q: float) -> tuple[NDArray[Any], ...]:
        sim_what = rows.what @ e_q
        # an empty context embeds to zero: its column is zero, without multiplying N rows
        sim_where = rows.where @ c_q if c_q.any() else np.zeros(len(rows), np.float32)
        u = utility(rows.value, rows.pi, rows.tau, rows.t, t_q)
        a, b, g, _ = weights
        s_prime = a * sim_what + b * sim_where + g * u
        return sim_what.astype(np.float64), sim_where.astype(np.float64), u, s_prime

    def _rank(self, rows: Rows, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
              weights: NDArray[np.float64], k: int, t_q: float, *, exhaustive: bool,
              from_buffer: bool = False) -> list[Hit]:
        """Exact scores (Eq. 5, with the Eq. 8 bonus) for ``rows``; the top ``k`` as hits."""
        n = len(rows)
        if n == 0:
            return []
        sim_what, sim_where, u, s_prime = self._partial_scores(rows, e_q, c_q, weights, t_q)
        d = float(weights[3])
        ids = rows.ids
        local = None if exhaustive else {mid: i for i, mid in enumerate(ids)}

        def su_of(mids: Iterable[str]) -> dict[str, float]:
            """S'(j) U(j) for neighbours j: from these rows, else gathered or fetched."""
            out: dict[str, float] = {}
            missing: list[str] = []
            for j in mids:
                i = self._mirror.row_of.get(j) if exhaustive and self._mirror else (
                    local.get(j) if local is not None else None)
                if i is not None:
                    out[j] = float(s_prime[i] * u[i])
                else:
                    missing.append(j)
            if missing and not exhaustive:
                if self._use_mirror and self._mirror is not None:
                    extra = self._mirror.view().take(
                        [self._mirror.row_of[j] for j in missing if j in self._mirror.row_of])
                else:
                    extra = self._fetch_rows(missing, where=bool(np.any(c_q)))
                if len(extra):
                    _, _, u_x, s_x = self._partial_scores(extra, e_q, c_q, weights, t_q)
                    su_x = (s_x * u_x).tolist()
                    out.update(zip(extra.ids, su_x, strict=True))  # ids is a property: once
            return out

        # Graph bonus for the best candidates by S'; widen until no outsider can overtake.
        order = np.argsort(-s_prime, kind="stable")
        m = min(n, max(4 * k, 64))
        bonus = np.zeros(n)
        su_all_max = float(np.max(s_prime * u)) if n else 0.0
        wdeg = None
        if exhaustive and self._mirror is not None:
            wdeg = self._mirror.wdeg[: self._mirror.n]
        while True:
            top = order[:m]
            neigh = {ids[i]: self._neighbours(ids[i]) for i in top}
            su = su_of({j for lst in neigh.values() for j, _ in lst})
            for i in top:
                bonus[i] = sum(w * su.get(j, 0.0) for j, w in neigh[ids[i]])
            final_top = s_prime[top] + d * bonus[top]
            if m >= n or wdeg is None:
                break
            kth = np.sort(final_top)[-min(k, len(final_top))]
            rest = order[m:]
            bound = s_prime[rest] + d * wdeg[rest] * max(su_all_max, 0.0)
            if float(bound.max()) <= kth:
                break
            m = min(n, 4 * m)
        final = s_prime[top] + d * bonus[top]
        best = top[np.lexsort((top, -final))][:k]
        return self._hits(rows, best, s_prime, bonus, u, sim_what, sim_where, weights,
                          from_buffer=from_buffer)

    def _hits(self, rows: Rows, best: NDArray[np.intp], s_prime: NDArray[np.float64],
              bonus: NDArray[np.float64], u: NDArray[np.float64],
              sim_what: NDArray[np.floating[Any]], sim_where: NDArray[np.floating[Any]],
              weights: NDArray[np.float64], *,
              from_buffer: bool) -> list[Hit]:
        """Hits for rows ``best`` (in that order), with the Eq. 5 score and its parts."""
        score = (s_prime[best] + float(weights[3]) * bonus[best]).tolist()
        ratio = self.config.decay.stale_ratio
        w = tuple(weights.tolist())
        records = rows.records
        # stale as decay.is_stale: U / V < ratio, and a value of 0 is stale
        return [new_hit(records[i], sc, ut, (ut / v if v > 0 else 0.0) < ratio, wh, wr, gr,
                        w, from_buffer)
                for i, sc, ut, v, wh, wr, gr in zip(
                    best.tolist(), score, u[best].tolist(), rows.value[best].tolist(),
                    sim_what[best].tolist(), sim_where[best].tolist(), bonus[best].tolist(),
                    strict=True)]

    # ------------------------------------------------------------------ prospective buffer
    def prepare(self, task: str, context: str = "", at: Timestamp | None = None,
                k: int | None = None) -> list[str]:
        """Load the prospective buffer for ``task`` (paper §3.6); returns the buffered ids.

        Searches then score the buffer first and fall back to the full store when its best
        score is below ``config.buffer.theta``. The buffer persists with the store.
        """
        owner = "ScrubJayMemory.prepare"
        check_text(task, "task", owner)
        check_text(context, "context", owner, allow_empty=True)
        size = self.config.buffer.size if k is None else check_k(k, owner)
        with self._lock:
            self._fresh()
            t0 = self._time(at, owner)
            if self._dim is None or self._size() == 0:
                self._set_buffer(BufferState(task=task, context=context, prepared_at_s=t0,
                                             ids=()))
                return []
            e_t = self._embed([task], query=True)[0]
            c_t = self._embed([context], query=True)[0]
            if self._use_mirror and self._mirror is not None:
                rows = self._mirror.view()
            else:
                n = max(self.config.search.candidates, 4 * size)
                ids = set(self._store.query("what", e_t, n)[0])
                if np.any(c_t):
                    ids.update(self._store.query("where", c_t, n)[0])
                rows = self._fetch_rows(sorted(ids))
            prob = task_probability(rows.what, rows.where, e_t, c_t, self.config.buffer)
            u = utility(rows.value, rows.pi, rows.tau, rows.t, t0)
            chosen = select_buffer(prob, u, size)
            ids_out = tuple(rows.records[i].id for i in chosen)
            self._set_buffer(BufferState(task=task, context=context, prepared_at_s=t0,
                                         ids=ids_out))
            self._buffer_block()  # gathered now, so that the first buffered search is fast
            return list(ids_out)

    def clear_buffer(self) -> None:
        """Forget the prospective buffer; searches go to the full store."""
        with self._lock:
            self._check_open()
            self._set_buffer(None)

    @property
    def buffer(self) -> BufferState | None:
        """The loaded prospective buffer, if any."""
        return self._buffer

    def _set_buffer(self, state: BufferState | None) -> None:
        """Store the buffer's state, then use it (a failed write changes neither)."""
        payload = None if state is None else json.dumps(
            {"task": state.task, "context": state.context, "at": state.prepared_at_s,
             "ids": list(state.ids)})
        self._store.set_state(sj_buffer=payload)
        self._buffer = state

    def _buffer_block(self) -> BufferBlock | None:
        """The buffer's rows and their neighbours (embedded stores), gathered again only after
        the buffer or the mirror changed."""
        if self._buffer is None or not self._use_mirror or self._mirror is None:
            return None
        cached = self._block
        if (cached is not None and cached[0] is self._buffer and cached[1] is self._mirror
                and cached[2] == self._mirror.version):
            return cached[3]
        block = gather_block(self._buffer.ids, self._mirror, self._graph)
        self._block = (self._buffer, self._mirror, self._mirror.version, block)
        return block

    def _search_buffer(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                       weights: NDArray[np.float64], k: int, t_q: float) -> list[Hit] | None:
        assert self._buffer is not None
        ids = list(self._buffer.ids)
        if len(ids) < k:
            return None
        block = self._buffer_block()
        if block is not None:
            if block.n_buf < k:
                return None
            hits = self._rank_block(block, e_q, c_q, weights, k, t_q)
        else:
            rows = self._fetch_rows(ids)
            if len(rows) < k:
                return None
            hits = self._rank(rows, e_q, c_q, weights, k, t_q, exhaustive=False,
                              from_buffer=True)
        if hits and hits[0].score >= self.config.buffer.theta:
            return hits
        return None

    def _rank_block(self, block: BufferBlock, e_q: NDArray[np.float32],
                    c_q: NDArray[np.float32], weights: NDArray[np.float64], k: int,
                    t_q: float) -> list[Hit]:
        """:meth:`_rank` of the buffered rows (``exhaustive=False``), on the gathered block:
        the same arithmetic as :meth:`_partial_scores` and :func:`~scrubjay.decay.utility` (the
        block keeps ``pi / tau``), so the scores are the same floats; hits only for the best k."""
        rows = block.rows
        a, b, g, d = weights  # float64 scalars: the products are float64, as in _rank
        sim_what = rows.what @ e_q
        u = rows.value * np.exp(-block.rate * np.maximum(0.0, t_q - rows.t))
        if c_q.any():
            sim_where = rows.where @ c_q
            s_prime = a * sim_what + b * sim_where + g * u
        else:  # an empty context embeds to zero: its term adds exactly 0
            sim_where = np.zeros(len(rows), np.float32)
            s_prime = a * sim_what + g * u
        n = block.n_buf
        bonus = block_bonus(block, s_prime * u)
        m = max(4 * k, 64)  # as _rank: the bonus counts for the top m by S'
        if m >= n:  # all of them: a stable sort by final score breaks ties by row, as below
            best = np.argsort(-(s_prime[:n] + d * bonus), kind="stable")[:k]
        else:
            top = np.argsort(-s_prime[:n], kind="stable")[:m]
            final = s_prime[top] + d * bonus[top]
            best = top[np.lexsort((top, -final))][:k]
        return self._hits(rows, best, s_prime, bonus, u, sim_what, sim_where, weights,
                          from_buffer=True)

    # ------------------------------------------------------------------ maintain: RCI
    def integrate(self, new_info: str, context: str = "", at: Timestamp | None = None,
                  *, store: bool = True) -> IntegrationReport:
        """Retroactive Contextual Integration of ``new_info`` (paper §3.5).

        Every memory whose what-embedding is within ``config.rci.theta`` of the new information
        is updated (value, perishability, horizon, what-vector) with one set of deltas from ONE
        chat-model call, or from the offline parser. With ``store=True`` the new information is
        then stored as a memory of its own (classified like :meth:`add`; that classification is
        not counted in ``llm_calls``).

        An event is identified by ``(new_info, context, at)``, and running it again changes
        nothing it has done: memories that took it are skipped
        (:attr:`IntegrationReport.already_applied`), not updated twice, and the memory it
        stored (id ``"rci-" + key``, :func:`~scrubjay.rci.event_key`) is returned, not stored
        twice. So a call that raised can be retried. A large event is written in several
        Chroma calls; when one fails, the error's note gives the ``at`` to pass when it was
        left to the clock.
        """
        owner = "ScrubJayMemory.integrate"
        check_text(new_info, "new_info", owner)
        check_text(context, "context", owner, allow_empty=True)
        with self._lock, self._llm_budget():
            self._fresh()
            t_n = self._time(at, owner)
            if store:  # checked before any update: the add of the news would refuse it after
                _check_not_future(t_n, self.now(), owner)
            w_n = self._embed([new_info])[0]
            rows, alpha, drift = self._affected(w_n)
            key = event_key(new_info, context, t_n)
            own_id = f"rci-{key}"  # the memory this event stores (store=True)
            done = self._already_integrated(rows, key, t_n)
            ids = rows.ids
            own = np.array([i == own_id for i in ids], dtype=bool)  # stored by an earlier run
            skipped: tuple[str, ...] = ()
            if done.any() or own.any():
                skipped = tuple(ids[i] for i in np.flatnonzero(done & ~own))
                keep = np.flatnonzero(~(done | own))
                rows, alpha, drift = rows.take(keep), alpha[keep], drift[keep]
            idx_ids = rows.ids
            deltas, used_llm, calls, reason = self._deltas(new_info, context) if idx_ids else (
                Deltas(summary="already applied" if skipped else "no related memory"),
                False, 0, None)
            stored = None
            # against a server, the event's updates and its own memory share one log entry
            with self._store.log_batch([*idx_ids, *([own_id] if store else [])]):
                if idx_ids:
                    try:
                        self._apply_rci(rows, alpha, drift, w_n, deltas, t_n, key)
                    except ScrubJayError as err:
                        err.add_note(f"To complete this RCI event without updating twice the "
                                     f"memories that took it, call integrate again with the "
                                     f"same text and context and at={t_n!r}.")
                        raise
                if store:
                    stored = self._record_or_none(own_id)
                    if stored is None:
                        stored = self._store_items(self._prepare_items(
                            [{"id": own_id, "text": new_info, "context": context,
                              "at": t_n}]))[0]
            return IntegrationReport(
                affected=tuple((mid, float(a)) for mid, a in zip(idx_ids, alpha, strict=True)),
                deltas=deltas, used_llm=used_llm, llm_calls=calls, stored=stored,
                fallback_reason=reason, already_applied=skipped)

    def _already_integrated(self, rows: Rows, key: str, t_n: float) -> NDArray[np.bool_]:
        """Which of ``rows`` the event ``key`` (at ``t_n``) has updated already: a memory an
        event updated carries its time, so only those updated at ``t_n`` are read back for
        the event's key (none, unless the event is run again)."""
        at = storable(float(t_n))
        suspects = [i for i, r in enumerate(rows.records) if r.updated_at_s == at]
        done = np.zeros(len(rows.records), dtype=bool)
        if suspects:
            events = self._store.rci_events([rows.records[i].id for i in suspects])
            done[[i for i in suspects if events.get(rows.records[i].id) == key]] = True
        return done

    def _affected(self, w_n: NDArray[np.float32]) -> tuple[
            Rows, NDArray[np.float64], NDArray[np.float64]]:
        """The memories RCI updates for ``w_n``, strongest first: their rows, their ``alpha``
        and the drift bounds of their indexed what-vectors (see :mod:`scrubjay.store`)."""
        theta = self.config.rci.theta
        cap = self.config.rci.max_affected
        if self._use_mirror:
            if self._mirror is None or len(self._mirror) == 0:
                return self._rows_of([]), np.zeros(0), np.zeros(0)
            view = self._mirror.view()
            idx, alpha = affinities(view.what, w_n, theta)
            idx, alpha = idx[:cap], alpha[:cap]
            return view.take(idx), alpha, self._mirror.drift[idx]
        # Server mode: Chroma's index holds vectors up to INDEX_DRIFT_MAX_RAD from the exact
        # ones, so candidates come from a threshold lowered by that much, then exact affinities.
        low = theta - INDEX_DRIFT_MAX_RAD
        n = 64
        total = len(self)
        while True:
            ids, sims = self._store.query("what", w_n, min(n, cap))
            if len(ids) < min(n, cap) or (len(sims) and sims[-1] <= low) or n >= min(total, cap):
                break
            n *= 4
        stored = self._store.get([m for m, s in zip(ids, sims, strict=True) if s > low],
                                 vectors=True, where_vectors=False)
        rows = self._rows_of(stored)
        idx, alpha = affinities(rows.what, w_n, theta)
        drift = np.array([stored[i].drift_rad for i in idx], dtype=np.float64)
        return rows.take(idx), alpha, drift

    def _deltas(self, new_info: str, context: str) -> tuple[Deltas, bool, int, str | None]:
        if self._llm is None:
            return fallback_deltas(new_info, self.config.rci), False, 0, None
        try:
            reply = self._llm.complete(RCI_PROMPT.format(context=context, new_info_text=new_info))
            return parse_deltas(reply, self.config.rci), True, 1, None
        except LLMError as err:
            self._llm.note_parse_failure(err)
            return fallback_deltas(new_info, self.config.rci), False, 1, str(err)

    def _apply_rci(self, rows: Rows, alpha: NDArray[np.float64],
                   drift: NDArray[np.float64], w_n: NDArray[np.float32], deltas: Deltas,
                   t_n: float, event: str | None = None) -> None:
        """Update the affected ``rows`` (paper Eq. 9-12) and persist them in one pass."""
        cfg = self.config
        upd = apply_updates(rows.value, rows.pi, rows.tau, rows.what, w_n, alpha, deltas,
                            cfg.rci, pi_min=cfg.classifier.pi_min,
                            tau_min_s=cfg.classifier.tau_min_s,
                            tau_max_s=cfg.classifier.tau_max_s)
        # the angle each unit vector moved (2 asin(chord / 2), exact 0 for an unmoved one) adds
        # to the drift bound of its index embedding (triangle inequality on the sphere)
        chord = np.linalg.norm(upd.what.astype(np.float64) - rows.what.astype(np.float64),
                               axis=1)
        drift = drift + 2.0 * np.arcsin(np.minimum(1.0, chord / 2.0))
        t = float(t_n)
        values, pis, taus = upd.value.tolist(), upd.pi.tolist(), upd.tau_s.tolist()
        new_records = [replace(r, value=values[i], pi=pis[i], tau_s=taus[i], updated_at_s=t)
                       for i, r in enumerate(rows.records)]
        if len(upd.value):  # upper bounds: they hold whichever of the writes land
            self._value_max = max(self._value_max, float(np.max(upd.value)))
            self._drift_max = max(self._drift_max, float(np.max(drift)))
        try:
            recorded = self._store.update_rci(rows.ids, upd.value, upd.pi, upd.tau_s, t,
                                              upd.what, drift, event)
        except ScrubJayError:
            # an update written in several calls may have landed in part: the mirror takes
            # the rows as stored, so that the open memory answers as a reopen would
            self._reload_rows(rows.ids)
            raise
        if self._use_mirror and self._mirror is not None:
            self._mirror.update(new_records, upd.what, recorded)

    def _reload_rows(self, ids: Sequence[str]) -> None:
        """Mirror mode: the records, what-vectors and drift of ``ids`` as the store holds them
        (best effort: a store that cannot be read leaves the mirror as it is until the next
        open)."""
        if not self._use_mirror or self._mirror is None or not ids:
            return
        try:
            rows = self._store.get(list(ids), vectors=True, where_vectors=False)
        except ScrubJayError:
            return
        rows = [r for r in rows if r.id in self._mirror.row_of]
        if rows:
            self._mirror.update([self._record(r) for r in rows],
                                np.stack(_whats(rows)).astype(np.float32),
                                np.array([r.drift_rad for r in rows], dtype=np.float64))

    def _append_rows(self, rows: list[StoredRow]) -> None:
        """Put stored rows into the mirror (replacing the ids it holds), creating it."""
        if self._mirror is None:
            self._mirror = Mirror(len(rows[0].what))  # type: ignore[arg-type]
        zero = np.zeros(self._mirror.dim, dtype=np.float32)
        self._mirror.append([self._record(r) for r in rows],
                            np.stack(_whats(rows)).astype(np.float32),
                            np.stack([r.where if r.where is not None else zero
                                      for r in rows]).astype(np.float32),
                            drift=[r.drift_rad for r in rows])

    # ------------------------------------------------------------------ maintain: consolidation
    def consolidate(self, at: Timestamp | None = None) -> list[str]:
        """Prune at a session end (paper §3.8); returns the removed ids.

        A memory is kept when its utility exceeds ``eps``, when it is a graph hub, or when the
        retention policy protects it (``metadata={"protected": True}`` or a protected label).
        """
        owner = "ScrubJayMemory.consolidate"
        with self._lock:
            self._fresh()
            t = self._time(at, owner)
            records = list(self._iter_records())
            if not records:
                return []
            u = utility([r.value for r in records], [r.pi for r in records],
                        [r.tau_s for r in records], [r.created_at_s for r in records], t)
            u_of = {r.id: float(u[i]) for i, r in enumerate(records)}
            if self._use_mirror:
                hub = self._graph.hub_scores(u_of.keys(), u_of)
            else:
                rows = {row.id: row for row in self._store.iter_all(vectors=False)}
                graph = EpisodicGraph(self.config.graph)
                for row in rows.values():
                    graph.loads(row.id, row.meta.get("sj_edges"))
                hub = graph.hub_scores(u_of.keys(), u_of)
            protected = np.array([is_protected(r.label, r.metadata, self.config.consolidation)
                                  for r in records])
            removed = select_removals([r.id for r in records], u,
                                      np.array([hub[r.id] for r in records]), protected,
                                      self.config.consolidation)
            if removed:
                self._delete_ids(removed)
            return removed

    # ------------------------------------------------------------------ access
    def get(self, id: str) -> MemoryRecord:
        """The memory with this id; :class:`MemoryNotFoundError` if there is none."""
        if not isinstance(id, str):
            raise InvalidInputError(f"The 'id' parameter of ScrubJayMemory.get must be a str. "
                                    f"Got {type(id).__name__} instead.")
        with self._lock:
            self._fresh()
            rec = self._record_or_none(id)
            if rec is None:
                raise MemoryNotFoundError(f"No memory with id {id!r} in namespace "
                                          f"{self.namespace!r}.")
            return rec

    def delete(self, id: str) -> None:
        """Delete a memory everywhere: Chroma, the graph, the buffer and the mirror."""
        self.get(id)
        with self._lock:
            self._delete_ids([id])

    def _delete_ids(self, ids: Sequence[str]) -> None:
        gone = set(ids)
        if self._snapshot_file is not None:  # no copy of a deleted memory's text on disk
            remove_snapshot(self._snapshot_file)
            self._snapshot_marker = None
        if self._use_mirror:
            changed: set[str] = set()
            for mid in ids:
                changed |= self._graph.remove(mid)
        else:
            graph = EpisodicGraph(self.config.graph)
            for row in self._store.get(list(ids)):
                graph.loads(row.id, row.meta.get("sj_edges"))
            changed = set(graph.g.nodes) - gone
            for row in self._store.get(sorted(changed)):
                graph.loads(row.id, row.meta.get("sj_edges"))
            for mid in ids:
                graph.remove(mid)
        survivors = sorted(changed - gone)
        g = self._graph if self._use_mirror else graph
        try:
            self._store.delete(list(ids), adjacency=list(zip(survivors, g.dumps_many(survivors),
                                                             strict=True)))
        except ScrubJayError:
            if self._use_mirror:
                self._resync_after_failed_delete(ids, survivors)
            raise
        self._maybe_written -= gone
        if self._use_mirror and self._mirror is not None:
            self._mirror.remove(list(ids))
            self._refresh_wdeg(survivors)
        for mid in ids:
            self._graph_cache.pop(mid, None)
        self._drop_from_buffer(gone)

    def _drop_from_buffer(self, gone: set[str]) -> None:
        """Take deleted memories out of the prospective buffer, if it holds any. The deletes
        have landed: when the buffer's state cannot be written, the stored buffer keeps listing
        those ids, which every read of it skips (they are no longer stored), and a warning is
        logged instead of an error over a delete that happened."""
        listed = gone & set(self._buffer.ids) if self._buffer is not None else set()
        if self._buffer is not None and listed:
            kept = replace(self._buffer, ids=tuple(i for i in self._buffer.ids if i not in gone))
            try:
                self._set_buffer(kept)
            except ScrubJayError as exc:
                self._buffer = kept
                logger.warning("The memories are deleted, but the prospective buffer's stored "
                               "state still lists %d of them (skipped when read): %s",
                               len(listed), exc)

    def _resync_after_failed_delete(self, ids: Sequence[str], survivors: Sequence[str]) -> None:
        """After a delete that failed part-way: bring the graph and the mirror back in step
        with the store, whichever of its steps landed (the edge file's transaction, then the
        rows): the memories still stored keep the edges the store lists for them, their former
        neighbours likewise, and those whose rows are gone leave the mirror. Best effort: a
        store that cannot be read either leaves them as they are until the next open."""
        try:
            still = {row.id for row in self._store.get(list(ids))}
            self._reload_adjacency([*sorted(still), *survivors])
        except ScrubJayError:
            return
        gone = [mid for mid in ids if mid not in still]
        if not gone or self._mirror is None:
            return
        self._mirror.remove(gone)
        for mid in gone:
            self._graph.remove(mid)
        self._drop_from_buffer(set(gone))

    def forget_namespace(self) -> None:
        """Delete every memory of this namespace, its collections and its buffer."""
        with self._lock:
            self._check_open()
            if self._snapshot_file is not None:
                remove_snapshot(self._snapshot_file)
                self._snapshot_marker = None
            self._store.drop()
            self._graph = EpisodicGraph(self.config.graph)
            self._mirror = Mirror(self._dim) if self._dim is not None else None
            self._buffer = None
            self._newest_t = -math.inf
            self._newest_unsaved = False
            self._graph_cache.clear()
            self._maybe_written.clear()
            self._store = ChromaStore(client=self._store.client, namespace=self.namespace,
                                      prefix=self._store.prefix,
                                      change_log=self._store.log is not None) \
                if self._store.path is None else self._reopen_store()
            if self._log_cursor is not None:
                self._start_log_cursor()
            if self._snapshot_file is not None:
                self._store.track_changes()

    def purge(self) -> bool:
        """Erase the bytes of deleted memories from an embedded store's files.

        :meth:`delete`, :meth:`consolidate` and :meth:`forget_namespace` remove a memory from
        every table and blank its text in Chroma's write-ahead log at once; SQLite, however,
        only marks the freed pages, so the old bytes stay in ``chroma.sqlite3`` until it is
        rewritten. ``purge()`` rewrites it (SQLite ``VACUUM``, time proportional to the file).
        Returns False for client/server and in-memory stores (the server owns its files).
        """
        with self._lock:
            self._check_open()
            return self._store.compact()

    def _reopen_store(self) -> ChromaStore:
        path = self._store.path
        self._store.close()
        assert path is not None
        return ChromaStore.open_path(path, self.namespace)

    def _iter_records(self) -> Iterator[MemoryRecord]:
        if self._use_mirror:
            if self._mirror is not None:
                yield from list(self._mirror.view().records)
            return
        for row in self._store.iter_all(vectors=False):
            yield self._record(row)

    def __len__(self) -> int:
        with self._lock:
            if self._use_mirror and not self._closed:
                self._fresh()
            return self._size()

    def _size(self) -> int:
        """The number of memories, as this object knows it (no change-log read)."""
        if self._use_mirror:
            return len(self._mirror) if self._mirror is not None else 0
        return self._store.count()

    def __iter__(self) -> Iterator[MemoryRecord]:
        """Every memory of the namespace (a snapshot)."""
        with self._lock:
            self._fresh()
            return iter(list(self._iter_records()))

    def _record_or_none(self, id: str) -> MemoryRecord | None:
        """The memory with this id, or None (the caller holds the lock)."""
        if self._use_mirror:
            return self._mirror.record(id) if self._mirror is not None else None
        rows = self._store.get([id])
        return self._record(rows[0]) if rows else None

    def __contains__(self, id: object) -> bool:
        if not isinstance(id, str):
            return False
        with self._lock:
            self._fresh()
            return self._record_or_none(id) is not None

    def utility_of(self, id: str, at: Timestamp | None = None) -> float:
        """``U(m, t)`` of one memory at ``at`` (default: now)."""
        rec = self.get(id)
        t = self._time(at, "ScrubJayMemory.utility_of")
        return float(utility(rec.value, rec.pi, rec.tau_s, rec.created_at_s, t))

    @staticmethod
    def list_namespaces(*, path: str | Path | None = None, client: Any = None) -> list[str]:
        """The namespaces stored at ``path`` or behind ``client``."""
        if (path is None) == (client is None):
            raise InvalidInputError("ScrubJayMemory.list_namespaces takes exactly one of "
                                    "path= or client=.")
        if client is not None:
            return ChromaStore.list_namespaces(client)
        return ChromaStore.list_namespaces_at(str(path))

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def graph(self) -> EpisodicGraph:
        """The episodic graph (embedded stores; a per-operation view in server mode)."""
        return self._graph

    def __repr__(self) -> str:
        where = self._store.path or ("in-memory" if self._embedded else "client")
        return (f"ScrubJayMemory(namespace={self.namespace!r}, store={where!r}, "
                f"embedder={self._embedder.name!r}, llm={self._llm is not None})")


def _check_not_future(at_s: float, now: float, owner: str) -> None:
    """Refuse a memory time more than :data:`MAX_FUTURE_SKEW_S` after the memory's clock."""
    if at_s > now + MAX_FUTURE_SKEW_S:
        raise InvalidInputError(
            f"The 'at' parameter of {owner} must not be in the future (more than "
            f"{MAX_FUTURE_SKEW_S:g} s after the memory's clock). Got {at_s!r}, the clock "
            f"says {now!r}; pass epoch seconds (not milliseconds) or set clock=.")


class _DeferredGraph:
    """The Eq. 8 graph bonus of one server search's hits, computed on first access.

    ``Phi(m) = sum_j w_mj S'(j) U(j)`` over m's neighbours j; ``S'(j) U(j)`` comes from the
    search's candidates when j is one of them, else from one fetch of the missing neighbours
    (with their vectors) for all the hits together.
    """

    def __init__(self, mem: ScrubJayMemory, cand: _Scored, hit_ids: list[str],
                 e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                 weights: NDArray[np.float64], t_q: float) -> None:
        self._mem: ScrubJayMemory | None = mem
        self._cand: _Scored | None = cand
        self._hit_ids = hit_ids
        self._query = (e_q, c_q, weights, t_q)
        self._bonus: dict[str, float] | None = None
        self._lock = threading.Lock()

    def __call__(self, mid: str) -> float:
        with self._lock:
            if self._bonus is None:
                self._bonus = self._compute()
                self._mem = self._cand = None  # nothing kept alive once computed
            return self._bonus[mid]

    def _compute(self) -> dict[str, float]:
        mem, cand = self._mem, self._cand
        assert mem is not None and cand is not None
        with mem._lock:
            mem._check_open()
            return self._bonus_of(mem, cand)

    def _bonus_of(self, mem: ScrubJayMemory, cand: _Scored) -> dict[str, float]:
        e_q, c_q, weights, t_q = self._query
        neigh = {mid: _parse_edges(cand.edges.get(mid)) for mid in self._hit_ids}
        wanted = {j for lst in neigh.values() for j, _ in lst}
        index = {r.id: i for i, r in enumerate(cand.records)}
        at_hand = [j for j in wanted if j in index]
        idx = np.array([index[j] for j in at_hand], dtype=np.intp)
        rec = [cand.records[i] for i in idx]
        u = utility(np.array([r.value for r in rec]), np.array([r.pi for r in rec]),
                    np.array([r.tau_s for r in rec]), np.array([r.created_at_s for r in rec]),
                    t_q)
        a, b, g, _ = (float(x) for x in weights)
        s_prime = a * cand.sim_what[idx] + b * cand.sim_where[idx] + g * u
        su = dict(zip(at_hand, (s_prime * u).tolist(), strict=True))
        missing = sorted(wanted - su.keys())
        if missing:
            extra = mem._fetch_rows(missing, where=bool(np.any(c_q)))
            if len(extra):
                _, _, u_x, s_x = mem._partial_scores(extra, e_q, c_q, weights, t_q)
                su.update(zip(extra.ids, (s_x * u_x).tolist(), strict=True))
        return {mid: float(sum(w * su.get(j, 0.0) for j, w in neigh[mid]))
                for mid in self._hit_ids}


def _parse_edges(payload: str | None) -> list[tuple[str, float]]:
    """A stored adjacency payload (``sj_edges``: JSON ``[[id, weight], ...]``), sorted by id;
    empty when absent or unreadable."""
    if not payload:
        return []
    try:
        return sorted((row[0], float(row[1])) for row in json.loads(payload))
    except (ValueError, TypeError, IndexError):
        return []
