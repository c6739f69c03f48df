"""The server backend with a mirror: a Chroma server, and every memory held here too.

Several processes share the server's namespace, so the mirror must learn of the others'
writes: before each operation it applies the entries of the namespace's change log that it
has not applied yet (:mod:`scrubjay.changelog`), reading those rows again; a search reads the
log beside its own work and runs again in the rare case that it brought changes.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

from ..changelog import LogCursor
from ..errors import ScrubJayError
from ..graph import EpisodicGraph
from ..types import Hit
from .mirrored import MirroredBackend

__all__ = ["ServerMirrorBackend"]


class ServerMirrorBackend(MirroredBackend):
    """A Chroma server namespace, mirrored here and kept current by its change log."""

    #: How far the mirror has applied the change log.
    _log_cursor: LogCursor | None = None

    def _load(self) -> None:
        self._start_log_cursor()
        self._load_mirror()

    def _start_log_cursor(self) -> None:
        """Follow the change log from now on (before the mirror is read: a write that lands
        meanwhile is applied again at the first sync)."""
        log = self.store.log
        self._log_cursor = log.cursor() if log is not None else None

    def refresh(self) -> None:
        """Apply the writes other processes made since the last operation: their rows are
        read and replace the mirror's, a memory gone leaves it. Raises :class:`StoreError`
        when the change log or the rows cannot be read (the mirror stays as it was)."""
        cursor, log = self._log_cursor, self.store.log
        if cursor is None or log is None:
            return
        before = cursor.copy()
        self._apply_changes(log.changes(cursor), before)

    def searching(self, run: Callable[[], list[Hit]]) -> list[Hit]:
        """``run()`` with the change log read beside it (its request costs about what the
        search's own does); run again when the log brought changes."""
        cursor, log = self._log_cursor, self.store.log
        if cursor is None or log is None:
            return run()
        before = cursor.copy()
        later = self._worker("log").submit(log.changes, cursor)
        try:
            hits = run()
        except BaseException:
            with contextlib.suppress(Exception):
                later.result()
            raise
        ids = later.result()  # a failed read raises here, the cursor untouched
        if ids is not None and not ids:
            return hits
        self._apply_changes(ids, before)
        return run()

    def _apply_changes(self, ids: set[str] | None, before: LogCursor) -> None:
        """Apply what :meth:`ChangeLog.changes` returned (None: reload the mirror whole); when
        that fails, the cursor goes back to ``before`` (the changes are read again next
        time) and the error is raised."""
        try:
            if ids is None:  # the log no longer reaches back to the last sync
                self.graph = EpisodicGraph(self.config.graph)
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
        rows = self.store.get(ids, vectors=True)
        present = {r.id for r in rows}
        held = self._mirror.row_of if self._mirror is not None else {}
        gone = [i for i in ids if i not in present and i in held]
        touched: set[str] = set()
        for mid in gone:
            touched |= self.graph.remove(mid)
        if gone and self._mirror is not None:
            self._mirror.remove(gone)
            self._lexical_delete(gone)
        if rows:
            if self.dim is None:
                self.dim = len(rows[0].what)  # type: ignore[arg-type]
            self._append_rows(rows)
            g = self.graph.g
            for r in rows:
                if r.id in g:
                    touched.update(g.neighbors(r.id))
                    g.remove_edges_from(list(g.edges(r.id)))
            for r in rows:
                self.graph.loads(r.id, r.meta.get("sj_edges"))
            known = self._mirror.row_of if self._mirror is not None else {}
            for r in rows:  # an edge to a memory not stored (a leftover): dropped
                stray = [j for j in g.neighbors(r.id) if j not in known]
                g.remove_nodes_from(stray)
                touched.update(g.neighbors(r.id))
            self.newest_t = max(self.newest_t,
                                max(float(r.meta.get("sj_t", -math.inf)) for r in rows))
        self._refresh_wdeg(touched | present)
        self._maybe_written.difference_update(ids)
        if gone:  # the deleting process rewrote the stored buffer
            self.on_gone(set(gone), False)

    def forget(self) -> None:
        super().forget()
        if self._log_cursor is not None:
            self._start_log_cursor()
