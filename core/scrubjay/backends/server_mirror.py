"""The server backend with a mirror: a Chroma server, and every memory held here too.

Several processes share the server's namespace, so the mirror must learn of the others'
writes: before each operation it applies the entries of the namespace's change log that it
has not applied yet (:mod:`scrubjay.backends.following`), reading those rows again.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..graph import EpisodicGraph
from ..types import Hit
from .following import FollowsChangeLog
from .mirrored import MirroredBackend

__all__ = ["ServerMirrorBackend"]


class ServerMirrorBackend(FollowsChangeLog, MirroredBackend):
    """A Chroma server namespace, mirrored here and kept current by its change log."""

    def _load(self) -> None:
        self._start_log_cursor()
        self._load_mirror()

    def refresh(self) -> None:
        """Apply the writes other processes made since the last operation: their rows are
        read and replace the mirror's, a memory gone leaves it. Raises :class:`StoreError`
        when the change log or the rows cannot be read (the mirror stays as it was)."""
        self._follow_log()

    def searching(self, run: Callable[[], list[Hit]]) -> list[Hit]:
        return self._search_following(run)

    def _apply_logged(self, ids: set[str] | None) -> None:
        if ids is None:  # the log no longer reaches back to the last sync
            self.graph = EpisodicGraph(self.config.graph)
            self._mirror = None
            self._start_log_cursor()
            self._load_mirror()
        else:
            self._apply_rows(sorted(ids))

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
            self._lexical.delete(gone)
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
