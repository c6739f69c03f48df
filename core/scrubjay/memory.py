"""``ScrubJayMemory``: the one facade over every mechanism (paper §3.9).

Store: annotate -> encode (what, where) -> classify (pi, tau) -> link -> persist -> supersede.
Prepare: fill the prospective buffer for the coming task. Retrieve: the buffer first, the full
store on a miss. Maintain: RCI on new information; consolidation at a session end.

The facade validates, embeds, classifies and orchestrates. Where the memories live is its
backend's business (:mod:`scrubjay.backends`), chosen once when the memory opens: an embedded
store with a mirror of every memory, a Chroma server asked for every answer, or a server with
a mirror kept current by its change log. Scoring is :mod:`scrubjay.ranking`'s, the same for
every backend.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from . import assist
from ._blas import one_blas_thread
from ._validation import (
    PreparedItem,
    check_k,
    check_namespace,
    check_not_future,
    check_text,
    prepare_items,
    to_epoch_s,
)
from .backends import Batch, open_backend, weakly
from .buffer import BufferState, select_buffer, task_probability
from .config import ScrubJayConfig
from .consolidation import is_protected, select_removals
from .decay import utility
from .embedding import Embedder, WordLlamaEmbedder, as_embedder, checked_query_vector
from .errors import EmbedderMismatchError, InvalidInputError, MemoryNotFoundError, ScrubJayError
from .graph import EpisodicGraph
from .llm import LLMClient
from .perishability import Classifier
from .ranking import Query
from .rci import event_key
from .scoring import adaptive_weights
from .store import ChromaStore
from .superseding import replaced_rows, supersede_stored
from .types import Deltas, Hit, IntegrationReport, MemoryRecord, Perishability
from .windows import with_windows

__all__ = ["ScrubJayMemory"]

logger = logging.getLogger(__name__)

Timestamp = float | int | datetime



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
    create : bool
        With True (the default), a missing ``path`` folder or namespace is made. With False
        (reading), it raises :class:`~scrubjay.errors.NamespaceNotFoundError` and nothing is
        written; ``scrubjay inspect`` opens this way.

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
                 clock: Callable[[], float] | None = None, create: bool = True) -> None:
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
        if not isinstance(create, bool):
            raise InvalidInputError(f"The 'create' parameter of {owner} must be a bool. "
                                    f"Got {type(create).__name__} instead.")
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
        self._buffer: BufferState | None = None
        self._closed = False
        self._backend = open_backend(path, client, self.namespace, config, self._lock,
                                     create=create)
        self._backend.on_gone = weakly(self._gone)  # the backend keeps the memory not alive
        try:
            self._open()
        except BaseException:
            self._backend.store.close()
            raise

    # ------------------------------------------------------------------ opening and closing
    def _open(self) -> None:
        store = self._backend.store
        store.check_schema()
        self._backend.dim = store.check_reader(self._embedder.name)
        self._backend.open()
        raw = store.state().get("sj_buffer")
        if isinstance(raw, str):
            try:
                self._buffer = BufferState.loads(raw)
            except (ValueError, KeyError, TypeError):
                logger.warning("Ignoring an unreadable prospective buffer in namespace %r",
                               self.namespace)

    @property
    def config(self) -> ScrubJayConfig:
        """Every hyperparameter (a new config set here applies to the next operation)."""
        return self._config

    @config.setter
    def config(self, value: ScrubJayConfig) -> None:
        self._config = value
        if hasattr(self, "_backend"):
            self._backend.config = value

    @property
    def _store(self) -> ChromaStore:
        """The namespace's Chroma adapter (the backend's)."""
        return self._backend.store

    def _fresh(self) -> None:
        """:meth:`_check_open`, then apply the writes other processes made since the last
        operation (a server namespace with a mirror: :mod:`scrubjay.changelog`). Raises
        :class:`StoreError` when they cannot be read (the memory stays as it was)."""
        self._check_open()
        self._backend.refresh()

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
                self._backend.close(save=save_snapshot)

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

    def now(self) -> float:
        """The memory's clock, in epoch seconds."""
        value = self._clock()
        return to_epoch_s(value, "the memory's clock", "clock()")

    def _time(self, at: Timestamp | None, owner: str) -> float:
        return self.now() if at is None else to_epoch_s(at, owner)

    def _embed(self, texts: list[str] | tuple[str, ...], *,
               query: bool = False) -> NDArray[np.float32]:
        vecs = self._embedder.embed(list(texts), query=query)
        dim = int(vecs.shape[1])
        if self._backend.dim is None:
            self._backend.dim = dim
        elif dim != self._backend.dim:
            raise EmbedderMismatchError(
                f"The embedder {self._embedder.name!r} returns {dim}-d vectors but the namespace "
                f"{self.namespace!r} holds {self._backend.dim}-d vectors.")
        return vecs

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
        with self._lock, assist.budget(self._llm):
            self._fresh()
            prepared = self._prepare_items(items)
            if not prepared:
                return []
            with one_blas_thread():
                return self._store_items(prepared)

    def _prepare_items(self, items: Iterable[str | Mapping[str, Any]]) -> list[PreparedItem]:
        return prepare_items(items, self.now(), "ScrubJayMemory.add")

    def _store_items(self, items: list[PreparedItem]) -> list[MemoryRecord]:
        annotations = assist.annotate(self._llm, self.config, [p.text for p in items],
                                      [p.context for p in items])
        what = self._embed([f"{p.text} {a}".strip() if a else p.text
                            for p, a in zip(items, annotations, strict=True)])
        where = self._embed([p.context for p in items])
        self._backend.store.check_embedder(self._embedder.name, int(what.shape[1]))
        # the bundled embedder is the estimator's: it reuses these rows when what = text
        reuse = isinstance(self._embedder, WordLlamaEmbedder) and not any(annotations)

        def classify() -> list[Perishability]:
            return self._classifier.classify_many(
                [p.text for p in items], [p.context for p in items], what, where,
                vectors_by=self._embedder.name if reuse else None)

        def records_of(labels: list[Perishability]) -> list[MemoryRecord]:
            decay = self.config.decay
            records = [p.record(c, a, float(decay.default_value))
                       for p, a, c in zip(items, annotations, labels, strict=True)]
            return with_windows(records, decay.time_zone) if decay.windows else records

        records = self._backend.write(Batch(
            ids=[p.id for p in items], chosen=[p.id for p in items if p.id_given],
            times=[p.at_s for p in items], what=what, where=where, classify=classify,
            records_of=records_of))
        if self.config.supersession.enabled and self.config.supersession.candidates > 0:
            records = supersede_stored(self._backend, records, what, self._llm, self.config)
        return records

    # ------------------------------------------------------------------ retrieve
    def search(self, query: str, context: str = "", k: int = 5,
               at: Timestamp | None = None, *, exclude_stale: bool = False,
               query_vector: Any = None) -> list[Hit]:
        """The ``k`` best memories for ``query`` asked in ``context`` at time ``at``.

        Each :class:`Hit` carries its score, utility, stale flag and the score's breakdown.
        With ``exclude_stale=True`` only memories that are not stale at ``at`` compete (still
        ``k`` of them when there are enough). ``query_vector`` (the embedder's dimension) is
        compared instead of ``query``'s embedding; ``query`` may then be empty.
        """
        owner = "ScrubJayMemory.search"
        check_text(query, "query", owner, allow_empty=query_vector is not None)
        check_text(context, "context", owner, allow_empty=True)
        k = check_k(k, owner)
        with self._lock:
            self._check_open()
            return self._backend.searching(
                lambda: self._search(query, context, k, at, exclude_stale, query_vector))

    def _search(self, query: str, context: str, k: int, at: Timestamp | None,
                exclude_stale: bool, query_vector: Any = None) -> list[Hit]:
        """:meth:`search` once the memory is current (the caller holds the lock)."""
        owner = "ScrubJayMemory.search"
        t_q = self._time(at, owner)
        backend = self._backend
        dim = backend.current_dim(self._embedder.name)
        if dim is None or backend.known_empty():
            return []
        e_q = (self._embed([query], query=True)[0] if query_vector is None
               else checked_query_vector(query_vector, dim, owner))
        c_q = self._embed([context], query=True)[0]
        # np.linalg.norm of a vector is sqrt(x . x): the same float, without its checks
        weights = adaptive_weights(query, float(np.sqrt(e_q.dot(e_q))),
                                   float(np.sqrt(c_q.dot(c_q))),
                                   t_q - backend.newest_t if math.isfinite(backend.newest_t)
                                   else 0.0, self.config.weights)
        q = Query(e_q=e_q, c_q=c_q, weights=weights, k=k, t_q=t_q,
                  exclude_stale=exclude_stale, text=query)
        if self._buffer is not None and not exclude_stale:
            hits = backend.search_buffer(self._buffer, q)
            if hits is not None:
                return hits
        return backend.search(q)

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
            if (self._backend.current_dim(self._embedder.name) is None
                    or self._backend.size() == 0):
                self._set_buffer(BufferState(task=task, context=context, prepared_at_s=t0,
                                             ids=()))
                return []
            e_t = self._embed([task], query=True)[0]
            c_t = self._embed([context], query=True)[0]
            rows = self._backend.task_rows(e_t, c_t, size)
            prob = task_probability(rows.what, rows.where, e_t, c_t, self.config.buffer)
            u = utility(rows.value, rows.pi, rows.tau, rows.t, t0)
            chosen = select_buffer(prob, u, size)
            ids_out = tuple(rows.records[i].id for i in chosen)
            state = BufferState(task=task, context=context, prepared_at_s=t0, ids=ids_out)
            self._set_buffer(state)
            self._backend.buffer_block(state)  # gathered now: the first buffered search is fast
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
        self._backend.store.set_state(sj_buffer=None if state is None else state.dumps())
        self._buffer = state

    # ------------------------------------------------------------------ maintain: RCI
    def integrate(self, new_info: str, context: str = "", at: Timestamp | None = None,
                  *, store: bool = True) -> IntegrationReport:
        """Retroactive Contextual Integration of ``new_info`` (paper §3.5).

        Every memory whose what-embedding is within ``config.rci.theta`` of the new information
        is updated (value, perishability, horizon, what-vector) with one set of deltas from ONE
        chat-model call, or from the offline parser; the offline deltas of news without a cue
        word change value, pi and tau only of the memories the supersession detector (when on)
        reads it to replace (:attr:`~scrubjay.types.Deltas.replaced_only`). With ``store=True``
        the news is then stored as a memory of its own (classified like :meth:`add`, not
        counted in ``llm_calls``).

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
        with self._lock, assist.budget(self._llm):
            self._fresh()
            t_n = self._time(at, owner)
            if store:  # checked before any update: the add of the news would refuse it after
                check_not_future(t_n, self.now(), owner)
            w_n = self._embed([new_info])[0]
            rows, alpha, drift = self._backend.affected(w_n)
            key = event_key(new_info, context, t_n)
            own_id = f"rci-{key}"  # the memory this event stores (store=True)
            rows, alpha, drift, skipped = self._backend.not_integrated(
                rows, alpha, drift, key, t_n, own_id)
            idx_ids = rows.ids
            deltas, used_llm, calls, reason = assist.event_deltas(
                self._llm, self.config, new_info, context) if idx_ids else (
                Deltas(summary="already applied" if skipped else "no related memory"),
                False, 0, None)
            stored = None
            # against a server, the event's updates and its own memory share one log entry
            with self._backend.store.log_batch([*idx_ids, *([own_id] if store else [])]):
                if idx_ids:
                    gate = replaced_rows(own_id, new_info, w_n, t_n, rows, self.config) \
                        if deltas.replaced_only and self.config.supersession.enabled else None
                    try:
                        self._backend.apply_rci(rows, alpha, drift, w_n, deltas, t_n, key, gate)
                    except ScrubJayError as err:
                        err.add_note(f"To complete this RCI event without updating twice the "
                                     f"memories that took it, call integrate again with the "
                                     f"same text and context and at={t_n!r}.")
                        raise
                if store:
                    stored = self._backend.record(own_id)
                    if stored is None:
                        stored = self._store_items(self._prepare_items(
                            [{"id": own_id, "text": new_info, "context": context,
                              "at": t_n}]))[0]
            return IntegrationReport(
                affected=tuple((mid, float(a)) for mid, a in zip(idx_ids, alpha, strict=True)),
                deltas=deltas, used_llm=used_llm, llm_calls=calls, stored=stored,
                fallback_reason=reason, already_applied=skipped)

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
            records = self._backend.records()
            if not records:
                return []
            u = utility([r.value for r in records], [r.pi for r in records],
                        [r.tau_s for r in records], [r.created_at_s for r in records], t)
            u_of = {r.id: float(u[i]) for i, r in enumerate(records)}
            hub = self._backend.hub_scores(u_of)
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
            rec = self._backend.record(id)
            if rec is None:
                raise MemoryNotFoundError(f"No memory with id {id!r} in namespace "
                                          f"{self.namespace!r}.")
            return rec

    def delete(self, id: str) -> None:
        """Delete a memory everywhere: Chroma, the graph, the buffer and the mirror."""
        self.get(id)
        with self._lock:
            self._delete_ids([id])

    def _delete_ids(self, ids: list[str]) -> None:
        self._backend.delete(ids)
        self._gone(set(ids))

    def _gone(self, gone: set[str], persist: bool = True) -> None:
        """Take memories found gone out of the prospective buffer, if it holds any; with
        ``persist``, its stored state too (else another process rewrote it already). The
        deletes have landed: when the state cannot be written, the stored buffer keeps listing
        those ids, which every read of it skips, and a warning is logged instead."""
        listed = gone & set(self._buffer.ids) if self._buffer is not None else set()
        if self._buffer is None or not listed:
            return
        kept = replace(self._buffer, ids=tuple(i for i in self._buffer.ids if i not in gone))
        try:
            if persist:
                self._set_buffer(kept)
        except ScrubJayError as exc:
            logger.warning("The memories are deleted, but the prospective buffer's stored "
                           "state still lists %d of them (skipped when read): %s",
                           len(listed), exc)
        self._buffer = kept

    def forget_namespace(self) -> None:
        """Delete every memory of this namespace, its collections and its buffer."""
        with self._lock:
            self._check_open()
            self._backend.forget()
            self._buffer = None

    def purge(self) -> bool:
        """Erase the bytes of deleted memories from an embedded store's files.

        :meth:`delete`, :meth:`consolidate` and :meth:`forget_namespace` remove a memory from
        every table and blank its text in Chroma's write-ahead log at once; SQLite, however,
        only marks the freed pages, so the old bytes stay in ``chroma.sqlite3`` until it is
        rewritten. ``purge()`` rewrites it (SQLite ``VACUUM``, time proportional to the file),
        and rewrites the namespace's lexical index from the live memories (a deleted memory's
        terms stay in its segment files until then). Returns False for client/server and in-memory stores (the server owns its files).
        """
        with self._lock:
            self._check_open()
            return self._backend.compact()

    def __len__(self) -> int:
        with self._lock:
            if not self._closed:
                self._backend.refresh()
            return self._backend.size()

    def __iter__(self) -> Iterator[MemoryRecord]:
        """Every memory of the namespace (a snapshot)."""
        with self._lock:
            self._fresh()
            return iter(self._backend.records())

    def __contains__(self, id: object) -> bool:
        if not isinstance(id, str):
            return False
        with self._lock:
            self._fresh()
            return self._backend.record(id) is not None

    def utility_of(self, id: str, at: Timestamp | None = None) -> float:
        """``U(m, t)`` of one memory at ``at`` (default: now)."""
        rec = self.get(id)
        t = self._time(at, "ScrubJayMemory.utility_of")
        return float(utility(rec.value, rec.pi, rec.tau_s, rec.created_at_s, t))

    @staticmethod
    def list_namespaces(*, path: str | Path | None = None, client: Any = None) -> list[str]:
        """The namespaces stored at ``path`` or behind ``client``; a ``path`` without a store
        raises :class:`~scrubjay.errors.NamespaceNotFoundError` and is not created."""
        if (path is None) == (client is None):
            raise InvalidInputError("ScrubJayMemory.list_namespaces takes exactly one of "
                                    "path= or client=.")
        return (ChromaStore.list_namespaces(client) if client is not None
                else ChromaStore.list_namespaces_at(str(path)))

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def graph(self) -> EpisodicGraph:
        """The episodic graph (embedded stores; a per-operation view in server mode)."""
        return self._backend.graph

    def __repr__(self) -> str:
        return (f"ScrubJayMemory(namespace={self.namespace!r}, "
                f"store={self._backend.location!r}, "
                f"embedder={self._embedder.name!r}, llm={self._llm is not None})")
