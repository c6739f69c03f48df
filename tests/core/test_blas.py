"""A batch is stored with BLAS held to one thread (a second OpenBLAS thread spins between the
batch's matrix products and takes a core from Chroma), and the process gets its thread count
back afterwards, however many holds overlapped."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from scrubjay import ScrubJayMemory
from scrubjay._blas import BlasThreads
from threadpoolctl import threadpool_info, threadpool_limits


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_a_batch_is_stored_on_one_blas_thread_and_the_count_comes_back(
        memory_factory: Callable[..., ScrubJayMemory]) -> None:
    mem = memory_factory()
    mem.add("warm up: numpy's BLAS is loaded")
    seen: list[list[int]] = []
    classify = mem._classifier.classify_many

    def watching(*args: Any, **kwargs: Any) -> Any:
        seen.append(_blas_threads())
        if len(seen) > 1:
            raise RuntimeError("the classifier broke")
        return classify(*args, **kwargs)

    mem._classifier.classify_many = watching  # type: ignore[method-assign]
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        assert before, "numpy's BLAS is not visible to threadpoolctl"
        mem.add_many(["my desk is in room 4", "I work as a nurse"])
        assert seen == [[1] * len(before)]
        assert _blas_threads() == before
        with pytest.raises(RuntimeError, match="broke"):
            mem.add("a batch that fails while it is stored")
        assert _blas_threads() == before
    assert len(mem) == 3


class _Process:
    """A BLAS thread count the holds set and restore, as threadpoolctl's limiter does."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.limits = 0

    def limit(self) -> Any:
        previous, self.n = self.n, 1
        self.limits += 1
        process = self

        class _Limiter:
            def restore_original_limits(self) -> None:
                process.n = previous

        return _Limiter()


@pytest.mark.parametrize("first_out", ["first", "second"])
def test_holds_at_once_end_with_the_count_the_first_found(first_out: str) -> None:
    process = _Process(4)
    threads = BlasThreads(process.limit)
    a, b = threads.one(), threads.one()
    a.__enter__()
    b.__enter__()
    assert process.n == 1
    (a if first_out == "first" else b).__exit__(None, None, None)
    assert process.n == 1  # the other batch is still being stored
    (b if first_out == "first" else a).__exit__(None, None, None)
    assert process.n == 4
    assert process.limits == 1
    with threads.one():  # a later hold limits again
        assert process.n == 1
    assert process.n == 4 and process.limits == 2


def test_holds_from_many_threads_restore_the_count() -> None:
    process = _Process(8)
    threads = BlasThreads(process.limit)
    inside = threading.Barrier(4, timeout=10)
    during: list[int] = []

    def batch() -> None:
        with threads.one():
            inside.wait()
            during.append(process.n)
            inside.wait()

    workers = [threading.Thread(target=batch) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert during == [1, 1, 1, 1]
    assert process.n == 8


def test_a_blas_that_cannot_be_held_lets_the_batch_run() -> None:
    def refusing() -> Any:
        raise RuntimeError("no BLAS here")

    ran = []
    with BlasThreads(refusing).one():
        ran.append(True)
    assert ran == [True]
