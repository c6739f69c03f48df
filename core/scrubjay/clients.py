"""The Chroma adapter's connection side: the only module of the engine that imports chromadb.

It makes every client the package uses (in-memory, embedded ``PersistentClient`` folders, a
server's ``HttpClient``), holds the one-process lock of an embedded folder, and wraps the calls
that may fail transiently. :mod:`scrubjay.store` does the namespace's reads and writes through
the client it is given. Every client is made with telemetry off, and no collection gets a
Chroma embedding function (which would download a model): scrubjay always passes its vectors.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from .errors import ForkedStoreError, NamespaceNotFoundError, StoreError, StoreLockedError

__all__ = ["EmbeddedClients", "ephemeral_client", "http_client", "persistent_client", "query",
           "retry", "wrap_error"]

logger = logging.getLogger(__name__)


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def ephemeral_client() -> Any:
    """An in-memory Chroma client (one shared system per process)."""
    import chromadb

    return chromadb.EphemeralClient(settings=_settings())


def http_client(host: str, port: int) -> Any:
    """A client of a Chroma server (``chroma run --path DIR --port P``)."""
    import chromadb

    return chromadb.HttpClient(host=host, port=port, settings=_settings())


def persistent_client(path: str) -> Any:
    """A ``PersistentClient`` of a folder, without scrubjay's lock (benchmarks' raw baseline:
    :class:`EmbeddedClients` is what a store uses)."""
    import chromadb

    return chromadb.PersistentClient(path=path, settings=_settings())


def wrap_error(action: str, exc: Exception) -> StoreError:
    """A Chroma failure as the package's :class:`StoreError` (``raise ... from exc``)."""
    if isinstance(exc, StoreError):  # a client that takes no more calls says why itself
        return StoreError(f"Chroma failed to {action}: {exc}")
    return StoreError(f"Chroma failed to {action}: {type(exc).__name__}: {exc}")


#: Errors a Chroma 1.5 server gives transiently while other processes write the same
#: collection: a fresh collection whose vector index is not on disk yet, and an id deleted
#: between the plan and its execution. Retried with a short backoff.
_TRANSIENT = ("Nothing found on disk", "Error finding id")

def retry(call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, retried on a transient Chroma server error (5 retries)."""
    delay = 0.05
    for attempt in range(6):
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            if attempt == 5 or not any(m in str(exc) for m in _TRANSIENT):
                raise
            logger.debug("transient Chroma error, retrying: %s", exc)
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def query(col: Any, **kwargs: Any) -> Any:
    """``col.query(**kwargs)``; an empty collection whose index is not on disk yet answers
    empty instead of failing."""
    try:
        return retry(col.query, **kwargs)
    except Exception as exc:
        if "Nothing found on disk" not in str(exc) or col.count() != 0:
            raise
        n = len(kwargs["query_embeddings"])
        return {key: [[] for _ in range(n)] for key in
                ("ids", "distances", "metadatas", "documents", "embeddings")}

#: What a Chroma error says when a write found the disk full: SQLite's SQLITE_FULL, the
#: kernel's ENOSPC (an index file), and the compaction of a log that could not be applied
#: (the form a 2 MB disk gave).
_DISK_FULL = ("database or disk is full", "No space left on device", "os error 28",
              "Failed to apply logs to the metadata segment")


def _drop_cached_system(folder: str) -> None:
    """Forget the Chroma system cached for ``folder`` when no client holds it any more.

    Chroma keeps one system per folder in ``SharedSystemClient._identifier_to_system`` and
    caches it before starting it: a start that failed (a full disk) stays there, unstarted,
    and every later client of the folder in this process gets it ("'RustBindingsAPI' object
    has no attribute 'bindings'"). A cached system with no reference count is such a leftover
    (a client's close pops the system with its last reference); other folders' systems, and
    one another client still holds, are left alone (``clear_system_cache`` would drop all).
    """
    from chromadb.api.shared_system_client import SharedSystemClient as Shared

    with Shared._refcount_lock:
        if Shared._identifier_to_refcount.get(folder, 0) > 0:
            return
        system = Shared._identifier_to_system.pop(folder, None)
    if system is not None:
        with contextlib.suppress(Exception):  # a half-started system may not stop cleanly
            system.stop()


def _is_collection(value: Any) -> bool:
    from chromadb.api.models.Collection import Collection

    return isinstance(value, Collection)


class _Guarded:
    """A client or collection of an embedded folder whose calls stop at a full disk.

    After a Chroma write of the folder failed on a full disk, Chroma's next write (in tests,
    the delete that undoes the failed batch; or a collection update) could wait forever on a
    lock its SQLite left held, inside Rust and holding the GIL, so that no thread of the
    process runs again. Once such a failure is seen, every call through the folder's client
    raises :class:`StoreError` instead (:meth:`EmbeddedClients.check`), until the last memory
    of the folder is closed: the next open makes a fresh Chroma system, which writes again.
    """

    __slots__ = ("_folder", "_target")

    def __init__(self, target: Any, folder: str) -> None:
        self._target = target
        self._folder = folder

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value
        folder = self._folder

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            EmbeddedClients.check(folder)
            try:
                out = value(*args, **kwargs)
            except Exception as exc:
                if any(m in str(exc) for m in _DISK_FULL):
                    EmbeddedClients.mark_disk_full(folder, exc)
                raise
            return _Guarded(out, folder) if _is_collection(out) else out

        return call

    def __repr__(self) -> str:
        return f"<guarded {self._target!r}>"


class EmbeddedClients:
    """One ``PersistentClient`` and one ``flock`` per folder per process, reference-counted.

    Several namespaces (several ``ScrubJayMemory`` objects) in one process share them; a second
    *process* gets :class:`StoreLockedError` instead of risking a corrupted store. A child made
    by ``fork`` starts with none (:meth:`_forget_after_fork`): it opens its own lock file, whose
    ``flock`` fails while its parent holds the folder, and never touches the parent's client;
    it refuses, with :class:`ForkedStoreError`, every folder its parent had opened, even one the
    parent closed before the fork, because Chroma's state for that folder does not survive it.
    """

    # reentrant: a release from a finaliser that the garbage collector runs inside acquire()
    # (on this thread) must not deadlock
    _lock = threading.RLock()
    _open: ClassVar[dict[str, tuple[Any, Any, int]]] = {}
    #: The parent's clients in a forked child: kept referenced, never used or closed (their
    #: Chroma system's threads did not survive the fork; closing one could hang).
    _inherited: ClassVar[list[Any]] = []
    #: Folders whose client saw a write fail on a full disk, with that failure: their calls
    #: raise :class:`StoreError` until the folder's last release (:class:`_Guarded`).
    _disk_full: ClassVar[dict[str, str]] = {}
    #: Folders this process has opened (its own, or a ``fork`` parent's): a forked child
    #: refuses those it inherited (:meth:`_forget_after_fork`).
    _opened: ClassVar[set[str]] = set()
    #: In a ``fork`` child: the folders its parent (or an ancestor) had opened before the fork.
    _forked_from: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def mark_disk_full(cls, folder: str, exc: Exception) -> None:
        """Stop the calls of ``folder``'s client: a write of it failed on a full disk."""
        with cls._lock:
            if folder in cls._open and folder not in cls._disk_full:
                cls._disk_full[folder] = f"{type(exc).__name__}: {exc}"
                logger.warning("A write of the embedded store at %r failed on a full disk; "
                               "its Chroma client takes no more calls until the store is "
                               "closed and opened again: %s", folder, exc)

    @classmethod
    def disk_full(cls, folder: str) -> bool:
        """Whether ``folder``'s client stopped its calls (:meth:`mark_disk_full`)."""
        return folder in cls._disk_full

    @classmethod
    def check(cls, folder: str) -> None:
        """Raise :class:`StoreError` when ``folder``'s client stopped its calls."""
        reason = cls._disk_full.get(folder)
        if reason is not None:
            raise StoreError(
                f"The embedded store at {folder!r} takes no more reads or writes in this "
                f"process: a write failed on a full disk ({reason[:200]}), and Chroma's next "
                "call could wait forever on the lock that failure left. Free disk space, "
                "close every memory of the store and open it again (in this process or "
                "another); the open finishes the clean-up of the failed writes.")

    @classmethod
    def _forget_after_fork(cls) -> None:
        """In a child made by ``fork``: drop the parent's folders, clients and locks.

        The inherited lock-file descriptors share the parent's open file description, hence
        its ``flock``: closing them here leaves the parent's lock in place (only an explicit
        ``LOCK_UN``, or closing every descriptor, would release it), and the child's own
        :meth:`acquire` opens the file afresh, so its ``flock`` is its own and fails while the
        parent holds the folder."""
        cls._lock = threading.RLock()  # another thread may have held it at the fork
        cls._forked_from = cls._forked_from | frozenset(cls._opened) | frozenset(cls._open)
        cls._opened = set()
        for client, handle, _ in cls._open.values():
            cls._inherited.append(client)
            with contextlib.suppress(OSError):
                handle.close()
        cls._open = {}
        cls._disk_full = {}

    @classmethod
    def acquire(cls, folder: str, *, create: bool = True) -> Any:
        """The folder's client, opening (and with ``create``, making) the store on first use.
        Without ``create``, a folder that holds no Chroma store raises
        :class:`NamespaceNotFoundError` and nothing is written."""
        with cls._lock:
            if folder in cls._open:
                client, handle, refs = cls._open[folder]
                cls._open[folder] = (client, handle, refs + 1)
                return _Guarded(client, folder)
            if folder in cls._forked_from:
                raise ForkedStoreError(
                    f"This process was forked from one that had opened the embedded store at "
                    f"{folder!r}. Chroma's state for that folder does not survive a fork (in a "
                    "forked child its open can wait on the parent's connection pool and fail "
                    "after 30 s), so it is refused here. Open the store in a child started with "
                    "multiprocessing's 'spawn' or 'forkserver' method, or keep it in the parent.")
            p = Path(folder)
            if not create and not (p / "chroma.sqlite3").is_file():
                raise NamespaceNotFoundError(
                    f"There is no scrubjay store at {folder!r} (no folder, or no chroma.sqlite3 "
                    "in it). Check the path; opening it with create=True makes a new store.")
            try:
                p.mkdir(parents=True, exist_ok=True)
                handle = open(p / "scrubjay.lock", "a+")  # noqa: SIM115 - held while open
            except OSError as exc:
                raise StoreError(f"Cannot create the store folder {folder!r}: {exc}") from exc
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                handle.close()
                raise StoreLockedError(
                    f"The embedded store at {folder!r} is in use by another process. A Chroma "
                    "PersistentClient folder must have a single writer process; for several "
                    "processes run `chroma run --path DIR --port P` and pass "
                    "client=chromadb.HttpClient(host=..., port=...).") from exc
            try:
                _drop_cached_system(folder)  # a system whose start failed before
                client = persistent_client(folder)
            except Exception as exc:
                with contextlib.suppress(Exception):
                    _drop_cached_system(folder)  # this start's, for the next open
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
                handle.close()
                raise wrap_error(f"open the store at {folder!r}", exc) from exc
            cls._open[folder] = (client, handle, 1)
            cls._opened.add(folder)
            return _Guarded(client, folder)

    @classmethod
    def release(cls, folder: str) -> None:
        with cls._lock:
            if folder not in cls._open:
                return
            client, handle, refs = cls._open[folder]
            if refs > 1:
                cls._open[folder] = (client, handle, refs - 1)
                return
            del cls._open[folder]
            # Stop Chroma's cached system for this folder before unlocking: another process
            # may write the folder next, and a later reopen here must read the disk afresh
            # (a cached system keeps stale index state: "Error finding id" on the next read).
            with contextlib.suppress(Exception):
                client.close()
            with contextlib.suppress(Exception):
                _drop_cached_system(folder)
            cls._disk_full.pop(folder, None)  # the next open makes a fresh system
            with contextlib.suppress(OSError):
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=EmbeddedClients._forget_after_fork)
