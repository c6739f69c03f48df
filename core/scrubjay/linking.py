"""Link selection of paper §3.4 over arrays: which memories a batch of new ones links to.

Each new memory considers its ``4 * max_neighbors`` strongest candidates by the combined edge
weight ``e_ij = w_S e_S + w_C e_C + w_T e_T`` (:mod:`scrubjay.graph`): the strongest existing
memories, which a backend finds (an exact scan of its mirror, or Chroma's nearest neighbours
and reads by time), and the strongest earlier items of the same batch, computed here. The
union is cut to that count, ranked by ``(-e, id)``, and inserted with the degree caps of
:meth:`~scrubjay.graph.EpisodicGraph.link_ranked`: a batch links as the same memories added
one at a time would. :func:`link_batch_reference` is the slow, obvious version of
:func:`link_batch`, for the parity tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .config import GraphConfig
from .graph import (
    Edge,
    EpisodicGraph,
    edge_weight_from_similarity,
    edge_weights,
    edge_weights_from_similarity,
    strongest_columns,
)
from .types import MemoryRecord

__all__ = ["NO_CANDIDATES", "CandidateRow", "LinkCandidates", "link_batch",
           "link_batch_reference", "pair_dots", "rank_columns"]

#: Rows of a batch linked per block (chosen: bounds the (block, N) similarity matrices of
#: the link scan to a few tens of MB at N = 20,000).
_LINK_BLOCK = 128

CandidateRow = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                      NDArray[np.float64], Sequence[str]]
NO_CANDIDATES: CandidateRow = (np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), [])


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

    Computed as one an add scans the mirror, so that a batch links as
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


def rank_columns(e: NDArray[np.float64], ids: NDArray[np.object_]) -> NDArray[np.intp]:
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
class LinkCandidates:
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
                   weights: tuple[NDArray[np.float64], ...]) -> LinkCandidates:
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
    def pad(cls, rows: Sequence[CandidateRow]) -> LinkCandidates:
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


def pair_dots(rows: NDArray[np.float32], row_of: NDArray[np.intp],
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


def link_batch(records: list[MemoryRecord], what: NDArray[np.float32],
           where: NDArray[np.float32], graph: EpisodicGraph, existing: LinkCandidates,
           cfg: GraphConfig) -> set[str]:
    """Link each new memory to its strongest neighbours (existing and earlier in the batch).

    ``existing``: the strongest existing memories of each new item (a backend's
    candidates). Each new item considers its ``4 * max_neighbors`` strongest candidates, as one add()
    does against the mirror: the union of the best existing ones and the best earlier ones
    of the batch, cut to that count. Candidates are chosen and ranked with numpy over
    blocks of the batch; only the degree-capped insertion (:meth:`EpisodicGraph.link_ranked`,
    inherently sequential) runs per item.
    """
    if cfg.max_neighbors == 0:
        for rec in records:
            graph.add_node(rec.id)
        return {rec.id for rec in records}
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
        order = rank_columns(e, ids)
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


def link_batch_reference(records: list[MemoryRecord], what: NDArray[np.float32],
                         where: NDArray[np.float32], graph: EpisodicGraph,
                         existing: tuple[list[str], NDArray[np.floating], NDArray[np.floating],
                                         NDArray[np.floating]],
                         cfg: GraphConfig) -> set[str]:
    """:func:`link_batch` the slow, obvious way, for the parity tests: each new memory in turn
    weighs every existing memory (``existing``: their ids, what and where vectors and times)
    and every earlier one of the batch in float64 (:func:`~scrubjay.graph.edge_weights`),
    keeps its ``4 * max_neighbors`` strongest by ``(-e, id)`` and links them
    (:meth:`~scrubjay.graph.EpisodicGraph.link`)."""
    ids, old_what, old_where, old_t = existing
    width = 4 * cfg.max_neighbors
    changed: set[str] = set()
    for i, rec in enumerate(records):
        cand_ids = list(ids) + [r.id for r in records[:i]]
        dim = what.shape[1]
        cand_what = np.concatenate([np.asarray(old_what, np.float64).reshape(len(ids), dim),
                                    what[:i].astype(np.float64)])
        cand_where = np.concatenate([np.asarray(old_where, np.float64).reshape(len(ids), dim),
                                     where[:i].astype(np.float64)])
        cand_t = np.concatenate([np.asarray(old_t, np.float64),
                                 [r.created_at_s for r in records[:i]]])
        if cfg.max_neighbors == 0 or not cand_ids:
            graph.add_node(rec.id)
            changed.add(rec.id)
            continue
        e, s, c, t = edge_weights(what[i], where[i], rec.created_at_s, cand_what, cand_where,
                                  cand_t, cfg)
        order = sorted(range(len(cand_ids)), key=lambda j: (-e[j], cand_ids[j]))[:width]
        changed |= graph.link(rec.id, [Edge(other=cand_ids[j], weight=float(e[j]),
                                            semantic=float(s[j]), contextual=float(c[j]),
                                            temporal=float(t[j])) for j in order])
    return changed
