"""``ScrubJayMemory``: the one facade over every mechanism (paper §3.9).

Store:     annotate -> encode (what, where) -> classify (pi, tau) -> link into the graph -> persist.
Prepare:   fill the prospective buffer for the coming task.
Retrieve:  the buffer first, the full store on a miss, ranked by the adaptive WWW(G) score.
Maintain:  RCI on new information; consolidation at a session end.

Embedded stores (``path=`` or no store at all) keep an in-memory mirror of the namespace and score
every memory exactly. Client/server stores (``client=chromadb.HttpClient(...)``) let Chroma
generate candidates (by what, by where, and their graph neighbours) and re-score those exactly,
so a search never pulls the whole collection into the client.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._validation import check_k, check_metadata, check_namespace, check_text, to_epoch_s
from .buffer import BufferState, select_buffer, task_probability
from .config import ScrubJayConfig
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
from .graph import EpisodicGraph, edge_weights, edge_weights_from_similarity
from .llm import ANNOTATE_PROMPT, RCI_PROMPT, LLMClient
from .mirror import Mirror, Rows
from .perishability import Classifier
from .rci import affinities, apply_updates, fallback_deltas, parse_deltas
from .scoring import adaptive_weights
from .snapshot import Snapshot, load_snapshot, remove_snapshot, save_snapshot, snapshot_path
from .store import ChromaStore, StoredRow, dumps_user_meta, loads_user_meta, user_filter_keys
from .types import Deltas, Hit, IntegrationReport, MemoryRecord

__all__ = ["ScrubJayMemory"]

logger = logging.getLogger(__name__)

Timestamp = float | int | datetime

#: A memory may be dated at most this far after the memory's clock (chosen: clock skew between
#: an agent and its host; anything later is almost surely a unit error, e.g. milliseconds).
MAX_FUTURE_SKEW_S = 300.0
#: Longest future-oriented annotation kept (chosen).
MAX_ANNOTATION_CHARS = 500


@dataclass(slots=True)
class _Prepared:
    """A validated item of ``add_many``."""

    text: str
    context: str
    at_s: float
    metadata: dict[str, Any]
    id: str


#: Rows of a batch linked per block (chosen: bounds the (block, N) similarity matrices of
#: the link scan to a few tens of MB at N = 20,000).
_LINK_BLOCK = 128

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
                               max_reply_chars=config.llm.max_reply_chars)
                     if llm is not None else None)
        self._classifier = Classifier(config.classifier, self._llm,
                                      stale_ratio=config.decay.stale_ratio)
        self._embedded = client is None
        self._private_prefix = None
        if path is not None:
            self._store = ChromaStore.open_path(path, self.namespace)
        else:
            if client is None:
                import chromadb
                from chromadb.config import Settings

                client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
                # Chroma shares one in-memory system per process: a private collection prefix
                # keeps each in-memory ScrubJayMemory apart; close() drops its collections.
                self._private_prefix: str | None = f"sjm{uuid.uuid4().hex[:12]}_"
                self._store = ChromaStore(client=client, namespace=self.namespace,
                                          prefix=self._private_prefix)
            else:
                self._private_prefix = None
                self._store = ChromaStore(client=client, namespace=self.namespace)
        use_mirror = config.search.mirror
        self._use_mirror = self._embedded if use_mirror is None else bool(use_mirror)
        self._dim: int | None = None
        self._mirror: Mirror | None = None
        self._graph = EpisodicGraph(config.graph)
        self._buffer: BufferState | None = None
        self._newest_t = -math.inf
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
            self._mirror.append(snap.records, snap.what, snap.where)
            self._mirror.wdeg[: len(snap.records)] = snap.wdeg
            self._graph = snap.graph
            if snap.records:
                self._newest_t = max(self._newest_t,
                                     max(r.created_at_s for r in snap.records))
        elif self._use_mirror:
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

    def _load_mirror(self) -> None:
        """Build the mirror and the graph from every row in Chroma."""
        rows = list(self._store.iter_all(vectors=True))
        if rows:
            self._dim = self._dim or int(len(rows[0].what))  # type: ignore[arg-type]
        if self._dim is None:
            return
        self._mirror = Mirror(self._dim)
        records = [self._record(r) for r in rows]
        zero = np.zeros(self._dim, dtype=np.float32)
        if rows:
            self._mirror.append(
                records, np.stack([r.what for r in rows]).astype(np.float32),
                np.stack([r.where if r.where is not None else zero
                          for r in rows]).astype(np.float32))
        for r in rows:
            self._graph.loads(r.id, r.meta.get("sj_edges"))
        self._graph.prune_unknown({r.id for r in rows})
        self._refresh_wdeg(self._graph.g.nodes)
        if records:
            self._newest_t = max(self._newest_t, max(r.created_at_s for r in records))

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
                              view.where, self._mirror.wdeg[: len(view)], self._graph)
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
                    self._save_snapshot()
                if self._private_prefix is not None:
                    self._store.drop()
                self._store.close()

    def __enter__(self) -> ScrubJayMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:  # no file writes here: at interpreter exit even open() may be gone
            self._release(save_snapshot=False)
        except Exception:
            pass

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
        meta: dict[str, Any] = {
            "sj_ctx": rec.context, "sj_label": rec.label, "sj_pi": float(rec.pi),
            "sj_tau": float(rec.tau_s), "sj_value": float(rec.value),
            "sj_t": float(rec.created_at_s), "sj_src": rec.source, "sj_ann": rec.annotation,
            "sj_edges": edges, "sj_meta": dumps_user_meta(rec.metadata),
        }
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
        """
        with self._lock:
            self._check_open()
            prepared = self._prepare_items(items)
            if not prepared:
                return []
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
            if at_s > now + MAX_FUTURE_SKEW_S:
                raise InvalidInputError(
                    f"The 'at' parameter of {owner} must not be in the future (more than "
                    f"{MAX_FUTURE_SKEW_S:g} s after the memory's clock). Got {at_s!r}, the clock "
                    f"says {now!r}; pass epoch seconds (not milliseconds) or set clock=.")
            metadata = check_metadata(item.get("metadata"), owner)
            mid = item.get("id")
            if mid is None:
                mid = uuid.uuid4().hex
            elif not isinstance(mid, str) or not mid.strip() or len(mid) > 256:
                raise InvalidInputError(f"The 'id' of an item of {owner} must be a non-empty str "
                                        f"of at most 256 characters. Got {mid!r} instead.")
            if mid in seen:
                raise InvalidInputError(f"The id {mid!r} occurs twice in one add_many batch.")
            seen.add(mid)
            out.append(_Prepared(text=text, context=context, at_s=at_s, metadata=metadata,
                                 id=mid))
        return out

    def _annotate(self, text: str, context: str) -> str:
        if self._llm is None or not self.config.llm.annotate:
            return ""
        try:
            reply = self._llm.complete(ANNOTATE_PROMPT.format(context=context, text=text))
        except LLMError:
            return ""
        return " ".join(reply.split())[:MAX_ANNOTATION_CHARS]

    def _store_items(self, items: list[_Prepared]) -> list[MemoryRecord]:
        annotations = [self._annotate(p.text, p.context) for p in items]
        what = self._embed([f"{p.text} {a}".strip() if a else p.text
                            for p, a in zip(items, annotations, strict=True)])
        where = self._embed([p.context for p in items])
        # the bundled embedder is the estimator's: it reuses these rows when what = text
        reuse = isinstance(self._embedder, WordLlamaEmbedder) and not any(annotations)
        labels = self._classifier.classify_many([p.text for p in items],
                                                [p.context for p in items], what, where,
                                                vectors_by=self._embedder.name if reuse else None)
        records = [MemoryRecord(id=p.id, text=p.text, context=p.context, label=c.label,
                                pi=float(c.pi), tau_s=float(c.tau_s),
                                value=float(self.config.decay.default_value),
                                created_at_s=float(p.at_s), metadata=p.metadata,
                                annotation=a, source=c.source)
                   for p, a, c in zip(items, annotations, labels, strict=True)]
        self._store.check_embedder(self._embedder.name, int(what.shape[1]))
        replaced = [r.id for r in records if self._exists(r.id)]
        if replaced:
            self._delete_ids(replaced)
        graph = self._graph if self._use_mirror else EpisodicGraph(self.config.graph)
        changed = self._link(records, what, where, graph)
        new_ids = {r.id for r in records}
        try:
            self._store.upsert([r.id for r in records], [r.text for r in records],
                               [self._meta(r, graph.dumps(r.id)) for r in records], what, where)
            old = sorted(changed - new_ids)
            if old:
                self._store.update_meta(old, [{"sj_edges": graph.dumps(n)} for n in old])
            newest = max(r.created_at_s for r in records)
            if newest > self._newest_t:
                self._newest_t = newest
                self._store.set_state(sj_newest_t=newest)
        except ScrubJayError:
            if self._use_mirror:  # roll the in-memory graph back to what Chroma holds
                for r in records:
                    self._graph.remove(r.id)
                self._reload_adjacency(sorted(changed - new_ids))
            raise
        if self._use_mirror:
            if self._mirror is None:
                self._mirror = Mirror(int(what.shape[1]))
            self._mirror.append(records, what, where)
            self._refresh_wdeg(changed)
        return records

    def _reload_adjacency(self, ids: Sequence[str]) -> None:
        for row in self._store.get(ids):
            for j in list(self._graph.g.neighbors(row.id)) if row.id in self._graph.g else []:
                self._graph.g.remove_edge(row.id, j)
            self._graph.loads(row.id, row.meta.get("sj_edges"))
        self._refresh_wdeg(ids)

    def _exists(self, mid: str) -> bool:
        if self._use_mirror:
            return self._mirror is not None and mid in self._mirror.row_of
        return bool(self._store.get([mid]))

    def _link(self, records: list[MemoryRecord], what: NDArray[np.float32],
              where: NDArray[np.float32], graph: EpisodicGraph) -> set[str]:
        """Link each new memory to its strongest neighbours (existing and earlier in the batch).

        Each new item considers its ``4 * max_neighbors`` strongest candidates, as one add()
        does against the mirror: the union of the best existing ones and the best earlier ones
        of the batch, cut to that count. Candidates are chosen and ranked with numpy over
        blocks of the batch; only the degree-capped insertion (:meth:`EpisodicGraph.link_ranked`,
        inherently sequential) runs per item.
        """
        cfg = self.config.graph
        if cfg.max_neighbors == 0:
            for r in records:
                graph.add_node(r.id)
            return {r.id for r in records}
        existing = self._link_candidates(records, what, where, graph)
        width = 4 * cfg.max_neighbors
        t_new = np.array([r.created_at_s for r in records])
        batch_ids = np.array([r.id for r in records], dtype=object)
        what64, where64 = what.astype(np.float64), where.astype(np.float64)
        has_where = bool(np.any(where))
        changed: set[str] = set()
        weakest: dict[str, tuple[float, str]] = {}  # valid while only link_ranked edits graph
        for lo in range(0, len(records), _LINK_BLOCK):
            hi = min(len(records), lo + _LINK_BLOCK)
            # this block against the batch up to it, earlier items only (j < i)
            sim_s = what64[lo:hi] @ what64[:hi].T
            sim_c = where64[lo:hi] @ where64[:hi].T if has_where else np.zeros_like(sim_s)
            comps = edge_weights_from_similarity(sim_s, sim_c,
                                                 np.abs(t_new[lo:hi, None] - t_new[None, :hi]),
                                                 cfg)
            earlier = np.arange(hi)[None, :] < np.arange(lo, hi)[:, None]
            comps, cols = _strongest(comps, earlier, width, cfg.min_edge_weight)
            # the union with the existing candidates, cut to the strongest `width` again
            merged, pick = _strongest(
                tuple(np.concatenate([old[lo:hi], new], axis=1)
                      for old, new in zip(existing.weights, comps, strict=True)),
                np.concatenate([existing.valid[lo:hi], cols >= 0], axis=1),
                width, cfg.min_edge_weight)
            ids = np.concatenate([existing.ids[lo:hi], batch_ids[np.maximum(cols, 0)]], axis=1)
            ids = np.take_along_axis(ids, np.maximum(pick, 0), axis=1)
            e = np.where(pick >= 0, merged[0], -np.inf)
            order = np.lexsort((ids.astype(str), -e), axis=1)  # by (-weight, id), invalid last
            counts = (pick >= 0).sum(axis=1)
            e, s_, c_, t_, ids = (np.take_along_axis(a, order, axis=1).tolist()
                                  for a in (*merged, ids))
            for r, m in enumerate(counts.tolist()):
                changed |= graph.link_ranked(records[lo + r].id, ids[r][:m], e[r][:m],
                                             s_[r][:m], c_[r][:m], t_[r][:m], weakest)
        return changed

    def _link_candidates(self, records: list[MemoryRecord], what: NDArray[np.float32],
                         where: NDArray[np.float32], graph: EpisodicGraph) -> _Candidates:
        """Edge weights of each new item against existing memories (padded rows)."""
        if self._use_mirror:
            if self._mirror is None or len(self._mirror) == 0:
                return _Candidates.pad([_NO_CANDIDATES] * len(records))
            if not self._scan(len(self._mirror)):
                return self._link_candidates_hnsw(records, what, where)
            return self._link_candidates_scan(records, what, where)
        return self._link_candidates_server(records, what, where, graph)

    def _link_candidates_scan(self, records: list[MemoryRecord], what: NDArray[np.float32],
                              where: NDArray[np.float32]) -> _Candidates:
        """The ``4 * max_neighbors`` strongest existing memories per new item, by an exact
        scan of the mirror (row blocks of the batch bound the (block, N) matrices)."""
        assert self._mirror is not None
        cfg = self.config.graph
        view = self._mirror.view()
        ids = np.array(view.ids, dtype=object)
        t_new = np.array([r.created_at_s for r in records])
        has_where = bool(np.any(where)) and bool(np.any(view.where))
        parts: list[tuple[NDArray[np.float64], ...]] = []
        id_parts: list[NDArray[np.object_]] = []
        valid_parts: list[NDArray[np.bool_]] = []
        for lo in range(0, len(records), _LINK_BLOCK):
            hi = min(len(records), lo + _LINK_BLOCK)
            sim_s = (what[lo:hi] @ view.what.T).astype(np.float64)  # (block, N)
            sim_c = (where[lo:hi] @ view.where.T).astype(np.float64) if has_where else \
                np.zeros_like(sim_s)
            comps = edge_weights_from_similarity(
                sim_s, sim_c, np.abs(view.t[None, :] - t_new[lo:hi, None]), cfg)
            comps, cols = _strongest(comps, np.ones(sim_s.shape, dtype=bool),
                                     4 * cfg.max_neighbors, -np.inf)
            parts.append(comps)
            id_parts.append(ids[np.maximum(cols, 0)])
            valid_parts.append(cols >= 0)
        weights = tuple(np.concatenate([p[j] for p in parts]) for j in range(4))
        return _Candidates(weights=weights, ids=np.concatenate(id_parts),  # type: ignore[arg-type]
                           valid=np.concatenate(valid_parts))

    def _link_candidates_server(self, records: list[MemoryRecord], what: NDArray[np.float32],
                                where: NDArray[np.float32], graph: EpisodicGraph) -> _Candidates:
        """Server mode: candidates from Chroma, then exact edge weights on them."""
        cfg = self.config.graph
        k = cfg.max_neighbors
        cand_ids: set[str] = set()
        per_item: list[set[str]] = []
        for i, rec in enumerate(records):
            mine: set[str] = set()
            mine.update(self._store.query("what", what[i], k)[0])
            if np.any(where[i]):
                mine.update(self._store.query("where", where[i], k)[0])
            mine.update(self._store.ids_in_time_range(rec.created_at_s - cfg.delta_temporal_s,
                                                      rec.created_at_s + cfg.delta_temporal_s,
                                                      4 * k))
            mine.discard(rec.id)
            per_item.append(mine)
            cand_ids |= mine
        rows = {r.id: r for r in self._store.get(sorted(cand_ids), vectors=True)}
        for r in rows.values():  # their adjacency, so the degree caps hold
            graph.loads(r.id, r.meta.get("sj_edges"))
        zero = np.zeros(what.shape[1], dtype=np.float32)
        out: list[_CandidateRow] = []
        for i in range(len(records)):
            ids = [c for c in sorted(per_item[i]) if c in rows]
            if not ids:
                out.append(_NO_CANDIDATES)
                continue
            w_what = np.stack([rows[c].what for c in ids])
            w_where = np.stack([rows[c].where if rows[c].where is not None else zero
                                for c in ids])
            t = np.array([float(rows[c].meta.get("sj_t", 0.0)) for c in ids])
            out.append((*edge_weights(what[i], where[i], records[i].created_at_s, w_what,
                                      w_where, t, cfg), ids))
        return _Candidates.pad(out)

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
            t_q = self._time(at, owner)
            # (server mode: an empty store answers an empty query; no count() round trip)
            if self._dim is None or (self._use_mirror and len(self) == 0):
                return []
            e_q = self._embed([query], query=True)[0]
            c_q = self._embed([context], query=True)[0]
            weights = adaptive_weights(query, float(np.linalg.norm(e_q)),
                                       float(np.linalg.norm(c_q)),
                                       t_q - self._newest_t if math.isfinite(self._newest_t)
                                       else 0.0, self.config.weights)
            if self._buffer is not None and not exclude_stale:
                hits = self._search_buffer(e_q, c_q, weights, k, t_q)
                if hits is not None:
                    return hits
            relevance = self.config.search.ranking == "relevance"
            if self._use_mirror and self._mirror:
                rows = self._mirror.view() if not relevance or self._scan(len(self._mirror)) \
                    else self._hnsw_candidates(e_q, c_q)
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

    def _server_candidates(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32]) -> Rows:
        n = self.config.search.candidates
        if not np.any(c_q):  # no where channel: one query brings the rows themselves
            stored = self._store.query_rows(e_q, n, where_vectors=False)
            return self._rows_of(sorted(stored, key=lambda r: r.id))
        ids = set(self._store.query("what", e_q, n)[0])
        ids.update(self._store.query("where", c_q, n)[0])
        return self._fetch_rows(sorted(ids))

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
        rows = Rows.build(records, np.stack([r.what for r in stored]).astype(np.float32),
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
        payload = self._graph_cache.get(mid)
        if not payload:
            return []
        try:
            return sorted((row[0], float(row[1])) for row in json.loads(payload))
        except (ValueError, TypeError, IndexError):
            return []

    def _partial_scores(self, rows: Rows, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                        weights: NDArray[np.float64], t_q: float) -> tuple[NDArray, ...]:
        sim_what = rows.what @ e_q
        sim_where = rows.where @ c_q
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
        stale = is_stale(u, rows.value, self.config.decay.stale_ratio)
        w = tuple(float(x) for x in weights)
        return [Hit(record=rows.records[i], score=float(s_prime[i] + d * bonus[i]),
                    paper_score=float(s_prime[i] + d * bonus[i]),
                    utility=float(u[i]), stale=bool(stale[i]), what=float(sim_what[i]),
                    where=float(sim_where[i]), when=float(u[i]), graph=float(bonus[i]),
                    weights=w, from_buffer=from_buffer)  # type: ignore[arg-type]
                for i in best]

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
            self._check_open()
            t0 = self._time(at, owner)
            if self._dim is None or len(self) == 0:
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
        self._buffer = state
        payload = None if state is None else json.dumps(
            {"task": state.task, "context": state.context, "at": state.prepared_at_s,
             "ids": list(state.ids)})
        self._store.set_state(sj_buffer=payload)

    def _search_buffer(self, e_q: NDArray[np.float32], c_q: NDArray[np.float32],
                       weights: NDArray[np.float64], k: int, t_q: float) -> list[Hit] | None:
        assert self._buffer is not None
        ids = list(self._buffer.ids)
        if len(ids) < k:
            return None
        if self._use_mirror and self._mirror is not None:
            idx = [self._mirror.row_of[i] for i in ids if i in self._mirror.row_of]
            rows = self._mirror.view().take(idx)
        else:
            rows = self._fetch_rows(ids)
        if len(rows) < k:
            return None
        hits = self._rank(rows, e_q, c_q, weights, k, t_q, exhaustive=False, from_buffer=True)
        if hits and hits[0].score >= self.config.buffer.theta:
            return hits
        return None

    # ------------------------------------------------------------------ maintain: RCI
    def integrate(self, new_info: str, context: str = "", at: Timestamp | None = None,
                  *, store: bool = True) -> IntegrationReport:
        """Retroactive Contextual Integration of ``new_info`` (paper §3.5).

        Every memory whose what-embedding is within ``config.rci.theta`` of the new information
        is updated (value, perishability, horizon, what-vector) with one set of deltas from ONE
        chat-model call, or from the offline parser. With ``store=True`` the new information is
        then stored as a memory of its own (classified like :meth:`add`; that classification is
        not counted in ``llm_calls``).
        """
        owner = "ScrubJayMemory.integrate"
        check_text(new_info, "new_info", owner)
        check_text(context, "context", owner, allow_empty=True)
        with self._lock:
            self._check_open()
            t_n = self._time(at, owner)
            w_n = self._embed([new_info])[0]
            idx_ids, alpha = self._affected(w_n)
            deltas, used_llm, calls, reason = self._deltas(new_info, context) if idx_ids else (
                Deltas(summary="no related memory"), False, 0, None)
            if idx_ids:
                self._apply_rci(idx_ids, alpha, w_n, deltas, t_n)
            stored = None
            if store:
                stored = self.add(new_info, context=context, at=t_n)
            return IntegrationReport(
                affected=tuple((mid, float(a)) for mid, a in zip(idx_ids, alpha, strict=True)),
                deltas=deltas, used_llm=used_llm, llm_calls=calls, stored=stored,
                fallback_reason=reason)

    def _affected(self, w_n: NDArray[np.float32]) -> tuple[list[str], NDArray[np.float64]]:
        theta = self.config.rci.theta
        cap = self.config.rci.max_affected
        if self._use_mirror:
            if self._mirror is None or len(self._mirror) == 0:
                return [], np.zeros(0)
            view = self._mirror.view()
            idx, alpha = affinities(view.what, w_n, theta)
            idx, alpha = idx[:cap], alpha[:cap]
            return [view.records[i].id for i in idx], alpha
        n = 64
        total = len(self)
        while True:
            ids, sims = self._store.query("what", w_n, min(n, cap))
            if len(ids) < min(n, cap) or (len(sims) and sims[-1] <= theta) or n >= min(total,
                                                                                        cap):
                break
            n *= 4
        keep = [i for i, s in enumerate(sims) if s > theta]
        alpha = np.minimum(1.0, (sims[keep] - theta) / (1.0 - theta))
        order = np.argsort(-alpha, kind="stable")
        return [ids[keep[i]] for i in order], alpha[order]

    def _deltas(self, new_info: str, context: str) -> tuple[Deltas, bool, int, str | None]:
        if self._llm is None:
            return fallback_deltas(new_info, self.config.rci), False, 0, None
        try:
            reply = self._llm.complete(RCI_PROMPT.format(context=context, new_info_text=new_info))
            return parse_deltas(reply, self.config.rci), True, 1, None
        except LLMError as err:
            self._llm.note_parse_failure(err)
            return fallback_deltas(new_info, self.config.rci), False, 1, str(err)

    def _apply_rci(self, ids: list[str], alpha: NDArray[np.float64], w_n: NDArray[np.float32],
                   deltas: Deltas, t_n: float) -> None:
        cfg = self.config
        if self._use_mirror and self._mirror is not None:
            rows = self._mirror.view().take([self._mirror.row_of[i] for i in ids])
        else:
            rows = self._fetch_rows(ids)
            order = {r.id: i for i, r in enumerate(rows.records)}
            keep = [i for i, mid in enumerate(ids) if mid in order]
            rows = rows.take([order[ids[i]] for i in keep])
            alpha = alpha[keep]
        upd = apply_updates(rows.value, rows.pi, rows.tau, rows.what, w_n, alpha, deltas,
                            cfg.rci, pi_min=cfg.classifier.pi_min,
                            tau_min_s=cfg.classifier.tau_min_s,
                            tau_max_s=cfg.classifier.tau_max_s)
        new_records = [replace(r, value=float(upd.value[i]), pi=float(upd.pi[i]),
                               tau_s=float(upd.tau_s[i]), updated_at_s=float(t_n))
                       for i, r in enumerate(rows.records)]
        metas = [{"sj_value": r.value, "sj_pi": r.pi, "sj_tau": r.tau_s,
                  "sj_updated": r.updated_at_s} for r in new_records]
        self._store.update_meta([r.id for r in new_records], metas, what=upd.what)
        if self._use_mirror and self._mirror is not None:
            self._mirror.update(new_records, upd.what)

    # ------------------------------------------------------------------ maintain: consolidation
    def consolidate(self, at: Timestamp | None = None) -> list[str]:
        """Prune at a session end (paper §3.8); returns the removed ids.

        A memory is kept when its utility exceeds ``eps``, when it is a graph hub, or when the
        retention policy protects it (``metadata={"protected": True}`` or a protected label).
        """
        owner = "ScrubJayMemory.consolidate"
        with self._lock:
            self._check_open()
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
    def get(self, id: str) -> MemoryRecord:  # noqa: A002 - the documented name
        """The memory with this id; :class:`MemoryNotFoundError` if there is none."""
        if not isinstance(id, str):
            raise InvalidInputError(f"The 'id' parameter of ScrubJayMemory.get must be a str. "
                                    f"Got {type(id).__name__} instead.")
        with self._lock:
            self._check_open()
            if self._use_mirror:
                rec = self._mirror.record(id) if self._mirror is not None else None
            else:
                rows = self._store.get([id])
                rec = self._record(rows[0]) if rows else None
            if rec is None:
                raise MemoryNotFoundError(f"No memory with id {id!r} in namespace "
                                          f"{self.namespace!r}.")
            return rec

    def delete(self, id: str) -> None:  # noqa: A002 - the documented name
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
        self._store.delete(list(ids))
        survivors = sorted(changed - gone)
        if survivors:
            g = self._graph if self._use_mirror else graph
            self._store.update_meta(survivors, [{"sj_edges": g.dumps(n)} for n in survivors])
        if self._use_mirror and self._mirror is not None:
            self._mirror.remove(list(ids))
            self._refresh_wdeg(survivors)
        for mid in ids:
            self._graph_cache.pop(mid, None)
        if self._buffer is not None and gone & set(self._buffer.ids):
            self._set_buffer(replace(self._buffer,
                                     ids=tuple(i for i in self._buffer.ids if i not in gone)))

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
            self._graph_cache.clear()
            self._store = ChromaStore(client=self._store.client, namespace=self.namespace,
                                      prefix=self._store.prefix) if self._store.path is None \
                else self._reopen_store()
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
            if self._use_mirror:
                return len(self._mirror) if self._mirror is not None else 0
            return self._store.count()

    def __iter__(self) -> Iterator[MemoryRecord]:
        """Every memory of the namespace (a snapshot)."""
        with self._lock:
            self._check_open()
            return iter(list(self._iter_records()))

    def __contains__(self, id: object) -> bool:  # noqa: A002
        if not isinstance(id, str):
            return False
        try:
            self.get(id)
        except MemoryNotFoundError:
            return False
        return True

    def utility_of(self, id: str, at: Timestamp | None = None) -> float:  # noqa: A002
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
