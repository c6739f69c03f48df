"""The embedded backend: a local Chroma (a ``path=`` folder or in memory) and a mirror.

One process holds an embedded store (its folder's lock), so the mirror is current by
construction: every write goes through this object. At an explicit close the mirror and graph
are saved as a snapshot beside the store (:mod:`scrubjay.snapshot`), and the next open loads
them instead of reading every row back, when the store's change marker says nothing changed.
"""

from __future__ import annotations

import logging

from ..graph import EpisodicGraph
from ..mirror import Mirror
from ..snapshot import load_snapshot, remove_snapshot, save_snapshot
from .mirrored import MirroredBackend

__all__ = ["EmbeddedBackend"]

logger = logging.getLogger(__name__)


class EmbeddedBackend(MirroredBackend):
    """An embedded or in-memory Chroma with every memory mirrored here."""

    #: The change marker of the snapshot read at open (None: none was read).
    snapshot_marker: str | None = None

    def _load_snapshot(self) -> bool:
        """The saved mirror and graph, when the snapshot file matches the store exactly (else
        the mirror comes from Chroma)."""
        if self.snapshot_file is None:
            return False
        marker = self.store.change_marker()
        if marker is None:
            return False
        snap = load_snapshot(self.snapshot_file, marker, self.dim,
                             EpisodicGraph(self.config.graph))
        if snap is None:
            return False
        self.snapshot_marker = marker
        self.dim = int(snap.what.shape[1])
        self._mirror = Mirror(self.dim)
        self._mirror.append(snap.records, snap.what, snap.where, drift=snap.drift)
        self._mirror.wdeg[: len(snap.records)] = snap.wdeg
        self.graph = snap.graph
        if snap.records:
            self.newest_t = max(self.newest_t, max(r.created_at_s for r in snap.records))
        return True

    def _load(self) -> None:
        self._load_mirror()

    def _save_snapshot(self) -> None:
        """At close: save the mirror and graph when they changed since the snapshot was read
        and every write since the open was ours (best effort; a failure only costs speed)."""
        if self.snapshot_file is None or self._mirror is None:
            return
        try:
            marker = self.store.untouched_since_tracked()
            if marker is None:
                remove_snapshot(self.snapshot_file)
            elif marker != self.snapshot_marker:
                view = self._mirror.view()
                save_snapshot(self.snapshot_file, marker, view.records, view.what,
                              view.where, self._mirror.wdeg[: len(view)], self.graph,
                              drift=self._mirror.drift[: len(view)])
        except Exception as exc:  # noqa: BLE001 - best effort: the store itself is intact
            logger.warning("Could not save the snapshot of namespace %r: %s: %s",
                           self.store.namespace, type(exc).__name__, exc)
            remove_snapshot(self.snapshot_file)

    def _forget_snapshot(self) -> None:
        super()._forget_snapshot()
        self.snapshot_marker = None
