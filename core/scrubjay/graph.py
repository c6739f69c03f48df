"""The episodic graph: typed edges between memories and the one-hop bonus (paper §3.4).

Edge weight (Eq. 7)::

    e_ij = w_S e_S + w_C e_C + w_T e_T
    e_S  = cos(what_i, what_j)   if >= theta_S else 0
    e_C  = cos(where_i, where_j) if >= theta_C else 0
    e_T  = exp(-lambda |t_i - t_j|) if |t_i - t_j| < Delta_T else 0

Graph bonus (Eq. 8), with ``S'`` the score without its graph term (no recursion)::

    Phi(m_i, G) = sum_{j in N(i)} e_ij S'(m_j) U(m_j)

Each memory keeps at most ``max_neighbors`` edges, the strongest. The graph is a networkx
``Graph`` whose nodes are memory ids; :func:`edge_weights` is the pure function that the
linking uses, and :class:`EpisodicGraph` is the data structure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii

import networkx as nx
import numpy as np
from numpy.typing import NDArray

from .config import GraphConfig

__all__ = [
    "EDGE_DECIMALS",
    "Edge",
    "EpisodicGraph",
    "edge_weight_from_similarity",
    "edge_weights",
    "edge_weights_from_similarity",
    "strongest_columns",
    "temporal_horizon_s",
]


#: An edge's weight and components are kept to this many decimals (an absolute error of at
#: most 5e-8 on numbers in [0, 1]; a server's cosines are float32, about as precise). Why: the
#: adjacency is stored as JSON text, and ``repr`` of an unrounded float takes 17-19
#: characters; rounded, ``repr`` takes at most 9, and an edge's entry shrinks by about 20
#: bytes a number (from about 90 to about 70 with uuid ids, when two of the components are 0).
#: A server-mode batch rewrites the adjacency of its new memories and of hundreds of older
#: ones, and reads its candidates' adjacency; Chroma charges for the metadata strings it
#: takes out of and puts into its index.
EDGE_DECIMALS = 7


@dataclass(frozen=True, slots=True)
class Edge:
    """One typed edge from a memory to ``other``."""

    other: str
    weight: float
    semantic: float
    contextual: float
    temporal: float


def edge_weights(what_i: NDArray[np.floating], where_i: NDArray[np.floating], t_i: float,
                 what: NDArray[np.floating], where: NDArray[np.floating],
                 t: NDArray[np.floating], cfg: GraphConfig) -> tuple[NDArray[np.float64], ...]:
    """``(e_ij, e_S, e_C, e_T)`` of memory i against each row j (Eq. 7), as arrays.

    >>> cfg = GraphConfig()
    >>> e, s, c, tt = edge_weights(np.array([1.0, 0]), np.zeros(2), 0.0,
    ...                            np.array([[0.8, 0.6]]), np.zeros((1, 2)), np.array([3600.0]), cfg)
    >>> round(float(e[0]), 4)   # 0.4 * 0.8 + 0.3 * 0 + 0.3 * exp(-1)
    0.4304
    """
    sim_s = np.asarray(what, np.float64) @ np.asarray(what_i, np.float64)
    sim_c = np.asarray(where, np.float64) @ np.asarray(where_i, np.float64)
    return edge_weights_from_similarity(sim_s, sim_c, np.abs(np.asarray(t, np.float64) - t_i),
                                        cfg)


def edge_weights_from_similarity(sim_s: NDArray[np.float64], sim_c: NDArray[np.float64],
                                 gap_s: NDArray[np.float64],
                                 cfg: GraphConfig) -> tuple[NDArray[np.float64], ...]:
    """:func:`edge_weights` from precomputed cosines and time gaps (Eq. 7 after the dot
    products; lets a batch compute its similarity matrix once), each rounded to
    :data:`EDGE_DECIMALS` decimals: what an edge holds in memory and in storage alike."""
    e_s = np.where(sim_s >= cfg.theta_semantic, sim_s, 0.0)
    e_c = np.where(sim_c >= cfg.theta_contextual, sim_c, 0.0)
    e_t = np.where(gap_s < cfg.delta_temporal_s,
                   np.exp(-cfg.lambda_temporal_per_s * gap_s), 0.0)
    e = cfg.weight_semantic * e_s + cfg.weight_contextual * e_c + cfg.weight_temporal * e_t
    return tuple(_rounded(a) for a in (e, e_s, e_c, e_t))


def _rounded(a: NDArray[np.floating]) -> NDArray[np.float64]:
    """``a`` in float64, rounded to :data:`EDGE_DECIMALS` decimals."""
    out = np.asarray(a, np.float64).copy()
    np.round(out, EDGE_DECIMALS, out=out)
    return out


def edge_weight_from_similarity(sim_s: NDArray[np.floating], sim_c: NDArray[np.floating] | None,
                                gap_s: NDArray[np.floating],
                                cfg: GraphConfig) -> NDArray[np.floating]:
    """``e_ij`` alone, the first array of :func:`edge_weights_from_similarity` before its
    rounding (in the inputs' precision), with fewer temporaries; ``sim_c=None`` when no memory
    has a context. For a scan of many pairs that keeps only the strongest: their components
    are recomputed after."""
    e = np.where(sim_s >= cfg.theta_semantic, sim_s, 0.0)
    e *= cfg.weight_semantic
    if sim_c is not None:
        e += cfg.weight_contextual * np.where(sim_c >= cfg.theta_contextual, sim_c, 0.0)
    e_t = -cfg.lambda_temporal_per_s * gap_s
    np.exp(e_t, out=e_t)
    e_t[gap_s >= cfg.delta_temporal_s] = 0.0
    e_t *= cfg.weight_temporal
    e += e_t
    return e


def strongest_columns(sim_s: NDArray[np.float32], sim_c: NDArray[np.float32] | None,
                      t_old: NDArray[np.float32], t_new: NDArray[np.float32],
                      by_time: NDArray[np.intp], cfg: GraphConfig,
                      width: int) -> NDArray[np.intp]:
    """Per row ``i``, the columns ``j`` of the ``width`` largest ``e_ij`` (Eq. 7), ``e`` as
    :func:`edge_weight_from_similarity` computes it from ``sim_s``, ``sim_c`` and the gaps
    ``|t_old[j] - t_new[i]|``; needs ``width < sim_s.shape[1]``.

    The same columns as an ``argpartition`` of the whole ``(rows, N)`` matrix of ``e``, but
    ``e`` is computed on candidates only (ties between equal weights may resolve otherwise).
    With positive thresholds, a column whose ``e_S`` and ``e_C`` are both 0 weighs
    ``w_T e_T`` alone, and the ``width`` columns nearest in time weigh at least as much; so
    the candidates are the columns where ``cos >= theta`` and the ``width`` nearest in time on
    either side (``by_time``: the stable argsort of ``t_old``). When the thresholds are not
    positive, or too many columns pass them, ``e`` is computed over every column.
    """
    rows, n = sim_s.shape
    use_s = cfg.weight_semantic > 0
    use_c = sim_c is not None and cfg.weight_contextual > 0
    # positive thresholds: the weight of a pair under both is its temporal term alone
    narrow = (not use_s or cfg.theta_semantic > 0) and (not use_c or cfg.theta_contextual > 0)
    if narrow and (use_s or use_c):
        hit = sim_s >= cfg.theta_semantic if use_s else None
        if use_c:
            assert sim_c is not None
            hit_c = sim_c >= cfg.theta_contextual
            hit = hit_c if hit is None else hit | hit_c
        assert hit is not None
        r, c = np.divmod(np.flatnonzero(hit), n)  # (2-d nonzero is several times slower)
        counts = np.bincount(r, minlength=rows)
        most = int(counts.max()) if len(r) else 0
    else:
        r = c = np.zeros(0, np.intp)
        counts = np.zeros(rows, np.intp)
        most = 0
    span = min(n, 2 * width)
    if not narrow or span + most >= n // 2:  # no saving: e over every column
        e = edge_weight_from_similarity(sim_s, sim_c, np.abs(t_old[None, :] - t_new[:, None]),
                                        cfg)
        return np.argpartition(-e, width - 1, axis=1)[:, :width]
    # the time window: `span` columns around each row's insertion point, kept within range
    pos = np.searchsorted(t_old[by_time], t_new)
    start = np.clip(pos - width, 0, n - span)
    cand = np.empty((rows, span + most), np.intp)
    cand[:, :span] = by_time[start[:, None] + np.arange(span)]
    # each row's threshold columns after its window, padded with a duplicate of its first
    cand[:, span:] = cand[:, :1]
    if most:
        first = np.cumsum(counts) - counts
        cand[r, span + np.arange(len(r)) - first[r]] = c
    cand.sort(axis=1)
    e = edge_weight_from_similarity(
        np.take_along_axis(sim_s, cand, axis=1),
        None if sim_c is None else np.take_along_axis(sim_c, cand, axis=1),
        np.abs(t_old[cand] - t_new[:, None]), cfg)
    e[:, 1:][cand[:, 1:] == cand[:, :-1]] = -np.inf  # a column counts once
    top = np.argpartition(-e, width - 1, axis=1)[:, :width]
    return np.take_along_axis(cand, top, axis=1)


def temporal_horizon_s(cfg: GraphConfig) -> float | None:
    """The largest time gap at which the temporal term alone reaches ``min_edge_weight``
    (``w_T exp(-lambda gap) >= min_edge_weight``, and ``gap < Delta_T``); None when it never
    does.

    Beyond it, two memories are linked only through ``e_S`` or ``e_C``, which the vector
    queries find, so the temporal candidates of a new memory are looked for within it.

    >>> round(temporal_horizon_s(GraphConfig()) / 3600, 2)   # ln(0.3 / 0.001) hours
    5.7
    """
    w, floor = cfg.weight_temporal, cfg.min_edge_weight
    if w <= 0 or w < floor:
        return None
    if floor <= 0 or cfg.lambda_temporal_per_s == 0:
        return cfg.delta_temporal_s
    return min(cfg.delta_temporal_s, math.log(w / floor) / cfg.lambda_temporal_per_s)


#: JSON's string literal (``json.dumps`` of a str, with its default ``ensure_ascii``).
_json_string = encode_basestring_ascii


def _clear_views(g: nx.Graph) -> None:
    """Drop the views networkx >= 3.3 caches, after its adjacency dicts were edited directly."""
    clear = getattr(nx, "_clear_cache", None)
    if clear is not None:
        clear(g)


def _weakest(nbrs: Mapping[str, Mapping[str, float]]) -> tuple[float, str]:
    """The weakest edge ``(weight, other)`` of a non-empty adjacency dict (ties: the smallest
    id): ``min((d["weight"], j) for j, d in nbrs.items())``, without a tuple per edge (about
    2.7x faster; a full node's weakest edge is looked up on most candidate checks)."""
    w_min, j_min = math.inf, ""
    for j, d in nbrs.items():
        w = d["weight"]
        if w < w_min or (w == w_min and j < j_min):
            w_min, j_min = w, j
    return w_min, j_min


class EpisodicGraph:
    """Undirected typed graph over memory ids, degree-capped at ``cfg.max_neighbors``."""

    def __init__(self, cfg: GraphConfig) -> None:
        self.cfg = cfg
        self.g: nx.Graph = nx.Graph()

    def __len__(self) -> int:
        return int(self.g.number_of_nodes())

    def __contains__(self, node: object) -> bool:
        return node in self.g

    def degree(self, node: str) -> int:
        """``node``'s number of edges (0 for an unknown node)."""
        nbrs = self.g._adj.get(node)
        return 0 if nbrs is None else len(nbrs)

    def add_node(self, node: str) -> None:
        self.g.add_node(node)

    def link(self, node: str, edges: Iterable[Edge]) -> set[str]:
        """Add ``node``'s strongest edges, respecting every endpoint's degree cap.

        Returns the ids whose adjacency changed (for persistence).
        """
        ranked = sorted((e for e in edges if e.weight >= self.cfg.min_edge_weight),
                        key=lambda e: (-e.weight, e.other))
        return self.link_ranked(node, [e.other for e in ranked], [e.weight for e in ranked],
                                [e.semantic for e in ranked], [e.contextual for e in ranked],
                                [e.temporal for e in ranked])

    def link_ranked(self, node: str, others: Sequence[str], weight: Sequence[float],
                    semantic: Sequence[float], contextual: Sequence[float],
                    temporal: Sequence[float],
                    weakest: dict[str, tuple[float, str]] | None = None,
                    floor: dict[str, float] | None = None) -> set[str]:
        """:meth:`link` for candidates already ranked by ``(-weight, other)`` and at least
        ``min_edge_weight`` (plain lists: the batch linking ranks them with numpy).

        The rule, per candidate in rank order until ``node`` has ``max_neighbors`` edges: link
        when the other end has room, or when its weakest edge ``(w, j)`` (smallest by weight,
        then id) is weaker than this one, which then replaces it. ``weakest`` caches each
        node's weakest edge across calls; ``floor`` holds, for nodes found full, a weight at
        or below their weakest edge, so that the candidates they would refuse are passed over
        without a look at their edges (in a batch most candidates are full nodes that refuse).
        The caller owns both and must drop them as soon as the graph changes other than
        through this method.
        """
        adj = self.g._adj  # networkx's own adjacency dicts: no view objects in the hot loop
        if node not in adj:
            self.g.add_node(node)
        cap = self.cfg.max_neighbors
        changed = {node}
        weak = {} if weakest is None else weakest
        low = {} if floor is None else floor  # kept only while its node is full
        mine = adj[node]
        ninf = -math.inf
        todo: Sequence[int] = ([k for k, o in enumerate(others) if weight[k] > low.get(o, ninf)]
                               if low else range(len(others)))
        names: set[str] | None = None
        at = 0
        while at < len(todo):
            k = todo[at]
            at += 1
            if len(mine) >= cap:
                break
            other = others[k]
            theirs = adj.get(other)
            if theirs is None or other == node or other in mine:
                continue
            w = weight[k]
            if len(theirs) >= cap:
                cached = weak.get(other)
                if cached is None:
                    cached = weak[other] = _weakest(theirs)
                w_min, j_min = cached
                if w_min >= w:
                    low[other] = w_min
                    continue
                del theirs[j_min]  # Graph.remove_edge, without its checks
                del adj[j_min][other]
                weak.pop(other, None)
                if weak.get(j_min, (0.0, ""))[1] == other:
                    del weak[j_min]
                changed.add(j_min)
                # (other stays full, its weakest edge only rose: its floor holds)
                if low.pop(j_min, None) is not None:  # j_min has room now
                    names = set(others) if names is None else names
                    if j_min in names:  # and may have been passed over: filter the rest again
                        todo = [k2 for k2 in range(k + 1, len(others))
                                if weight[k2] > low.get(others[k2], ninf)]
                        at = 0
            data = {"weight": w, "semantic": semantic[k], "contextual": contextual[k],
                    "temporal": temporal[k]}
            mine[other] = data  # Graph.add_edge between two existing nodes
            theirs[node] = data
            if node in weak:
                weak[node] = min(weak[node], (w, other))
            if other in weak:
                weak[other] = min(weak[other], (w, node))
            changed.add(other)
        _clear_views(self.g)
        return changed

    def remove(self, node: str) -> set[str]:
        """Remove ``node``; returns its former neighbours (their adjacency changed)."""
        if node not in self.g:
            return set()
        neighbours = set(self.g.neighbors(node))
        self.g.remove_node(node)
        return neighbours

    def neighbors(self, node: str) -> list[tuple[str, float]]:
        """``(neighbour, e_ij)`` pairs of ``node`` (empty for an unknown node)."""
        nbrs = self.g._adj.get(node)  # networkx's dict itself: no view objects per call
        if not nbrs:
            return []
        return [(j, float(d["weight"])) for j, d in sorted(nbrs.items())]

    def bonus(self, nodes: Iterable[str], s_prime_u: Mapping[str, float]) -> dict[str, float]:
        """``Phi(i) = sum_j e_ij * (S'(j) U(j))`` given the products ``S' U`` per neighbour."""
        out: dict[str, float] = {}
        for i in nodes:
            total = 0.0
            if i in self.g:
                for j, d in sorted(self.g[i].items()):  # fixed order: reproducible sums
                    total += d["weight"] * s_prime_u.get(j, 0.0)
            out[i] = total
        return out

    def hub_scores(self, nodes: Iterable[str], utility: Mapping[str, float]) -> dict[str, float]:
        """The query-free bonus ``sum_j e_ij U(j)`` used by consolidation (S' = 1, chosen)."""
        return self.bonus(nodes, utility)

    # -- persistence: each memory's adjacency as a compact JSON string in its metadata -----
    def dumps(self, node: str) -> str:
        """``node``'s edges as JSON ``[[other, weight, e_S, e_C, e_T], ...]``, sorted by id:
        what ``json.dumps(rows, separators=(",", ":"))`` writes (its string escaping, the
        ``repr`` of the finite floats), about twice as fast (one string per memory written)."""
        return self.dumps_many([node])[0]

    def dumps_many(self, nodes: Iterable[str]) -> list[str]:
        """:meth:`dumps` of each of ``nodes`` (the same strings): an edge's numbers are
        formatted once, though both of its ends are written (the two ends share one data
        dict, which identifies the edge while the graph is not edited)."""
        adj = self.g._adj
        tails: dict[int, str] = {}
        out: list[str] = []
        for node in nodes:
            nbrs = adj.get(node)
            if not nbrs:
                out.append("[]")
                continue
            parts = []
            for j, d in sorted(nbrs.items()):
                tail = tails.get(id(d))
                if tail is None:
                    tail = tails[id(d)] = (
                        f',{float(d["weight"])!r},{float(d["semantic"])!r},'
                        f'{float(d["contextual"])!r},{float(d["temporal"])!r}]')
                parts.append(f"[{_json_string(j)}{tail}")
            out.append("[" + ",".join(parts) + "]")
        return out

    def loads(self, node: str, payload: str | None) -> None:
        """Restore ``node``'s edges from :meth:`dumps` output; unknown ids are skipped later."""
        self.g.add_node(node)
        if not payload:
            return
        try:
            rows = json.loads(payload)
        except ValueError:
            return
        adj = self.g._adj  # Graph.add_edge without its view handling, per edge
        mine = adj[node]
        for row in rows:
            if isinstance(row, list) and len(row) == 5 and isinstance(row[0], str):
                other = row[0]
                data = {"weight": float(row[1]), "semantic": float(row[2]),
                        "contextual": float(row[3]), "temporal": float(row[4])}
                theirs = adj.get(other)
                if theirs is None:
                    self.g.add_node(other)
                    theirs = adj[other]
                old = mine.get(other)
                if old is not None:  # add_edge updates the existing edge's data in place
                    old.update(data)
                    continue
                mine[other] = data
                theirs[node] = data
        _clear_views(self.g)

    def add_edges_from_arrays(self, nodes: Sequence[str], u: Sequence[int], v: Sequence[int],
                              weight: Sequence[float], semantic: Sequence[float],
                              contextual: Sequence[float], temporal: Sequence[float]) -> None:
        """Add ``nodes`` and the edges ``nodes[u[k]] -- nodes[v[k]]`` with their weights (a
        snapshot's bulk load: networkx's adjacency dicts are filled directly)."""
        self.g.add_nodes_from(nodes)
        adj = self.g._adj
        rows = [adj[node] for node in nodes]  # by row index: no dict lookup per edge end
        for a, b, w, s, c, t in zip(u, v, weight, semantic, contextual, temporal, strict=True):
            data = {"weight": w, "semantic": s, "contextual": c, "temporal": t}
            rows[a][nodes[b]] = data
            rows[b][nodes[a]] = data
        _clear_views(self.g)

    def prune_unknown(self, known: set[str]) -> None:
        """Drop nodes that :meth:`loads` created for ids no longer stored."""
        self.g.remove_nodes_from([n for n in list(self.g.nodes) if n not in known])
