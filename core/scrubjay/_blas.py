"""One BLAS thread while a batch of memories is stored.

The matrix products of an ``add_many`` (the batch's similarity blocks, the estimator) are large
enough for OpenBLAS to hand half of each to a second thread, and that thread then spins for its
next piece of work, taking CPU time that the process's other threads (Chroma's write, the HTTP
reads of a server's rows) and a Chroma server on the same machine need. So
:func:`one_blas_thread` holds BLAS to one thread for the duration of a batch, as scikit-learn's
``KMeans`` does around its own loops, and gives the process its previous thread count back
after.

The limit is process-wide (BLAS libraries have one thread count): while any memory of the
process stores a batch, numpy in the process's other threads runs on one BLAS thread too. The
limiters are counted, so that batches stored at once in several threads end with the count
the first of them found, whatever order they finish in.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class _Limiter(Protocol):
    def restore_original_limits(self) -> None: ...


class BlasThreads:
    """Counted holds of BLAS to one thread (:func:`one_blas_thread` is the process's).

    ``limit`` starts a hold and returns what restores it (threadpoolctl's
    ``ThreadpoolController().limit(limits=1, user_api="blas")`` by default, made on first use:
    numpy's BLAS is loaded by then).
    """

    def __init__(self, limit: Callable[[], _Limiter] | None = None) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._users = 0
        self._held: _Limiter | None = None

    def _start(self) -> _Limiter | None:
        try:
            if self._limit is None:
                from threadpoolctl import ThreadpoolController

                controller: Any = ThreadpoolController()
                self._limit = lambda: controller.limit(limits=1, user_api="blas")
            return self._limit()
        # a BLAS threadpoolctl cannot drive: the batch runs as it would have
        except Exception as exc:  # noqa: BLE001 - a speed-up only, never a batch's failure
            logger.debug("Could not hold BLAS to one thread: %s", exc)
            return None

    @contextlib.contextmanager
    def one(self) -> Iterator[None]:
        """Hold BLAS to one thread inside the block (nested and concurrent holds count)."""
        with self._lock:
            if self._users == 0:
                self._held = self._start()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0 and self._held is not None:
                    held, self._held = self._held, None
                    try:
                        held.restore_original_limits()
                    except Exception as exc:  # noqa: BLE001 - as above
                        logger.debug("Could not restore the BLAS thread count: %s", exc)


_PROCESS = BlasThreads()


def one_blas_thread() -> contextlib.AbstractContextManager[None]:
    """Hold the process's BLAS to one thread inside the block (see the module's docstring)."""
    return _PROCESS.one()
