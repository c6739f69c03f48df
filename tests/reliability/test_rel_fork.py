"""A child process and its parent's embedded store, under every start method.

A ``fork`` child inherits the parent's open lock file and its cache of Chroma clients; it must
still get :class:`~scrubjay.errors.StoreLockedError` while the parent holds the folder (and not
hang inside the parent's Chroma client), as ``spawn`` and ``forkserver`` children do.
"""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from _fork_child import open_and_add, open_and_name_the_error
from scrubjay import ScrubJayMemory
from scrubjay.errors import ForkedStoreError, StoreLockedError
from scrubjay.testing import HashEmbedder

#: How long a child may take before it counts as hung (a hang is forever; an answer is ms).
HANG_S = 60


def _child_answer(method: str, path: Path, target: Any = open_and_add) -> Any:
    """What a child started by ``method`` running ``target`` on ``path`` answered, or
    ``"hung"``."""
    ctx = multiprocessing.get_context(method)
    answers = ctx.Queue()
    child = ctx.Process(target=target, args=(str(path), answers))
    child.start()
    child.join(HANG_S)
    if child.is_alive():
        child.kill()
        child.join()
        return "hung"
    return answers.get(timeout=HANG_S)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_child_gets_the_lock_error_while_the_parent_holds_the_store(
        tmp_path: Path, method: str) -> None:
    mem = ScrubJayMemory(path=tmp_path, embedder=HashEmbedder())
    try:
        mem.add("written by the parent")
        assert _child_answer(method, tmp_path) == "locked"
        # the parent's lock and client still work after the child's attempt
        mem.add("the parent writes on")
        assert len(mem) == 2
    finally:
        mem.close()
    reopened = ScrubJayMemory(path=tmp_path, embedder=HashEmbedder())
    try:
        assert len(reopened) == 2
    finally:
        reopened.close()


def test_fork_child_opens_another_folder(tmp_path: Path) -> None:
    mem = ScrubJayMemory(path=tmp_path / "parent", embedder=HashEmbedder())
    try:
        mem.add("written by the parent")
        assert _child_answer("fork", tmp_path / "child") == "opened 1"
    finally:
        mem.close()


#: Rounds of the closed-then-fork case: before the refusal, about 1 in 10 children waited 30 s
#: on the parent's Chroma connection pool and then failed.
ROUNDS = 5


def test_fork_child_of_a_parent_that_closed_the_store_is_refused_at_once(
        tmp_path: Path) -> None:
    """A ``fork`` child gets ForkedStoreError (a StoreLockedError) within a second for a folder
    its parent had opened, even after the parent closed it; the parent's store stays whole."""
    for r in range(ROUNDS):
        path = tmp_path / f"round{r}"
        mem = ScrubJayMemory(path=path, embedder=HashEmbedder())
        mem.add("written by the parent")
        mem.close()
        answer = _child_answer("fork", path, open_and_name_the_error)
        assert answer != "hung"
        name, seconds = answer
        assert name == "ForkedStoreError"
        assert seconds < 1.0
        assert issubclass(ForkedStoreError, StoreLockedError)
        reopened = ScrubJayMemory(path=path, embedder=HashEmbedder())
        try:
            assert len(reopened) == 1  # the parent reopens at once: the child took no lock
        finally:
            reopened.close()


def test_spawn_child_opens_a_store_its_parent_closed(tmp_path: Path) -> None:
    mem = ScrubJayMemory(path=tmp_path, embedder=HashEmbedder())
    mem.add("written by the parent")
    mem.close()
    assert _child_answer("spawn", tmp_path) == "opened 2"
