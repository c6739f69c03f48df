"""Server mode: following the namespace's change log (:mod:`scrubjay.changelog`).

A backend that holds something of a shared namespace in the process (a mirror of every memory,
or the lexical index alone) must learn of the writes other processes make. It keeps a
:class:`~scrubjay.changelog.LogCursor` and applies the log's entries it has not applied yet:
a search reads the log beside its own work and runs again in the rare case that it brought
changes. Its own writes update what it holds as they go (the log skips them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Literal

from ..changelog import LogCursor
from ..errors import ScrubJayError
from ..store import ChromaStore
from ..types import Hit

__all__ = ["FollowsChangeLog"]


class FollowsChangeLog:
    """What a backend mixes in to follow its namespace's change log. It provides
    :meth:`_apply_logged`; the cursor is None (nothing followed) for a store without a log."""

    store: ChromaStore
    #: How far the changes have been applied.
    _log_cursor: LogCursor | None = None

    if TYPE_CHECKING:  # provided by BaseBackend
        def _worker(self, role: Literal["main", "inner", "query", "write", "log"]
                    ) -> ThreadPoolExecutor: ...

    def _apply_logged(self, ids: set[str] | None) -> None:
        """Apply the rows of ``ids``, which other processes changed (None: the log no longer
        reaches back to the last sync, reload whole). Raises :class:`StoreError` when they
        cannot be read."""
        raise NotImplementedError

    def _start_log_cursor(self) -> None:
        """Follow the change log from now on (before what is held is read: a write that lands
        meanwhile is applied again at the first sync)."""
        log = self.store.log
        self._log_cursor = log.cursor() if log is not None else None

    def _follow_log(self) -> None:
        """Apply the writes other processes made since the last sync. Raises
        :class:`StoreError` when the change log or the rows cannot be read (what is held stays
        as it was)."""
        cursor, log = self._log_cursor, self.store.log
        if cursor is None or log is None:
            return
        before = cursor.copy()
        self._apply_changes(log.changes(cursor), before)

    def _search_following(self, run: Callable[[], list[Hit]]) -> list[Hit]:
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
        """Apply what :meth:`ChangeLog.changes` returned; when that fails, the cursor goes
        back to ``before`` (the changes are read again next time) and the error is raised."""
        try:
            if ids is None or ids:
                self._apply_logged(ids)
        except ScrubJayError:
            self._log_cursor = before
            raise
