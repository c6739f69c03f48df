"""Targets of the processes that tests/reliability/test_rel_fork.py starts (importable by the
``spawn`` and ``forkserver`` start methods)."""

from __future__ import annotations

from typing import Any

from scrubjay import ScrubJayMemory
from scrubjay.errors import StoreError, StoreLockedError
from scrubjay.testing import HashEmbedder


def open_and_add(path: str, answers: Any) -> None:
    """Open the store at ``path``, add one memory, and report what happened."""
    try:
        mem = ScrubJayMemory(path=path, embedder=HashEmbedder())
    except StoreLockedError:
        answers.put("locked")
        return
    except StoreError as exc:
        answers.put(f"error: {exc}")
        return
    try:
        mem.add("written by the child process")
        answers.put(f"opened {len(mem)}")
    finally:
        mem.close()


def open_and_name_the_error(path: str, answers: Any) -> None:
    """Open the store at ``path`` and report the error's class name (or ``opened``) and the
    seconds the open took."""
    import time

    start = time.perf_counter()
    try:
        mem = ScrubJayMemory(path=path, embedder=HashEmbedder())
    except StoreError as exc:
        answers.put((type(exc).__name__, time.perf_counter() - start))
        return
    mem.close()
    answers.put(("opened", time.perf_counter() - start))
