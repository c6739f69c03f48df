"""Storage backends of :class:`~scrubjay.ScrubJayMemory`, one per kind of store.

:func:`open_backend` picks one when the memory opens, from what the caller passed (a folder,
a client, neither) and ``SearchConfig.mirror``; the memory never asks which it got.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from ..clients import ephemeral_client
from ..config import ScrubJayConfig
from ..store import ChromaStore
from .base import Backend, BaseBackend, Batch, weakly
from .embedded import EmbeddedBackend
from .server import ServerBackend
from .server_mirror import ServerMirrorBackend

__all__ = ["Backend", "BaseBackend", "Batch", "EmbeddedBackend", "ServerBackend",
           "ServerMirrorBackend", "open_backend", "weakly"]


def open_backend(path: str | Path | None, client: Any, namespace: str,
                 config: ScrubJayConfig, lock: threading.RLock, *,
                 create: bool = True) -> Backend:
    """The backend of a memory over ``path`` (an embedded folder), ``client`` (any Chroma
    client, e.g. a server's) or neither (an in-memory Chroma, private to this memory).
    Without ``create``, a missing folder or namespace raises
    :class:`~scrubjay.errors.NamespaceNotFoundError` (an in-memory one is always new).

    ====================  ==========================  =================================
    store                 ``SearchConfig.mirror``     backend
    ====================  ==========================  =================================
    ``path`` or neither   None (default) or True      :class:`EmbeddedBackend`
    ``client``            True                        :class:`ServerMirrorBackend`
    ``client``            None (default) or False     :class:`ServerBackend`
    ``path`` or neither   False                       :class:`ServerBackend` (local)
    ====================  ==========================  =================================
    """
    server = client is not None
    private_prefix = None
    if path is not None:
        store = ChromaStore.open_path(path, namespace, create=create)
    elif client is None:
        # Chroma shares one in-memory system per process: a private collection prefix keeps
        # each in-memory memory apart; its close drops its collections.
        private_prefix = f"sjm{uuid.uuid4().hex[:12]}_"
        store = ChromaStore(client=ephemeral_client(), namespace=namespace,
                            prefix=private_prefix)
    else:
        # several processes may share it: every write feeds the change log that keeps their
        # mirrors current (scrubjay.changelog)
        store = ChromaStore(client=client, namespace=namespace, change_log=True,
                            create=create)
    wanted = config.search.mirror
    mirror = not server if wanted is None else bool(wanted)
    kind: type[BaseBackend]
    if mirror:
        kind = ServerMirrorBackend if server else EmbeddedBackend
    else:
        kind = ServerBackend
    try:
        return kind(store, config, lock, server=server, private_prefix=private_prefix)
    except BaseException:
        store.close()
        raise
