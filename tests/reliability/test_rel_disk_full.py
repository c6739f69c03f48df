"""A full disk (ENOSPC) under an embedded store, during ``add_many`` and during ``purge``.

The store lives on a small ``tmpfs`` mounted for the test (root only: ``mount -t tmpfs``); a
ballast file fills what is left of it, so that Chroma's and the edge file's next writes get
ENOSPC from the kernel. Checked: the call raises a :class:`~scrubjay.StoreError` (nothing else
escapes), the open memory still answers for what it acknowledged, and once the ballast is
removed the store opens in the same process with every acknowledged memory, none of the failed
batch, no acknowledged delete back, and works again (``add``, ``purge``).

Also: an open that failed on the full disk, followed by an open in the same process once there
is room; and, in child processes (``_disk_full_child.py``) under a deadline, ``add_many`` with a
few KB free, where ENOSPC comes part-way through a batch and Chroma's next call could hang.

``SCRUBJAY_ENOSPC_ROUNDS`` (default 5) sets the batches tried on the full disk;
``SCRUBJAY_ENOSPC_FEW_KB_RUNS`` (3) and ``SCRUBJAY_ENOSPC_FEW_KB`` (64) the few-KB children.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# the store, batches and ballast of the child processes, shared (this folder is on sys.path)
from _disk_full_child import _batch, _open
from _disk_full_child import fill as _fill
from scrubjay import MemoryNotFoundError, ScrubJayError, StoreError

#: The tmpfs size: room for the store and a few hundred memories (chosen).
DISK = "32m"
ROUNDS = int(os.environ.get("SCRUBJAY_ENOSPC_ROUNDS", "5"))
#: Children run with a few KB free (``SCRUBJAY_ENOSPC_FEW_KB_RUNS``), and the KB left free
#: (``SCRUBJAY_ENOSPC_FEW_KB``).
FEW_KB_RUNS = int(os.environ.get("SCRUBJAY_ENOSPC_FEW_KB_RUNS", "3"))
FEW_KB = int(os.environ.get("SCRUBJAY_ENOSPC_FEW_KB", "64"))
#: A child's deadline: a call that hangs inside Chroma holds the GIL, so the deadline is the
#: parent's (chosen: a child that does not hang takes 2-4 s).
CHILD_DEADLINE_S = 30
CHILD = Path(__file__).with_name("_disk_full_child.py")
FIGURES: dict[str, object] = {}


@contextlib.contextmanager
def _small_disk(folder: Path) -> Iterator[Path]:
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the full-disk test runs as root in CI)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(folder)],
                   check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _cause_chain(exc: BaseException) -> str:
    parts = []
    cur: BaseException | None = exc
    while cur is not None:
        parts.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__
    return " <- ".join(parts)


def test_enospc_during_add_many_loses_nothing_acknowledged(tmp_path: Path) -> None:
    with _small_disk(tmp_path / "disk") as disk:
        path = disk / "store"
        mem = _open(path)
        acked = {r.id for r in mem.add_many(_batch("a", 100))}
        ballast = _fill(disk)
        errors = []
        for k in range(ROUNDS):  # a full disk fails every write
            with pytest.raises(ScrubJayError) as info:
                mem.add_many(_batch(f"full{k}", 20))
            errors.append(info.value)
        assert all(isinstance(e, StoreError) for e in errors), [_cause_chain(e) for e in errors]
        # the open memory answers for what it acknowledged, and shows none of the failed
        assert len(mem) == len(acked)
        assert {r.id for r in mem} == acked
        assert mem.get("a-7").text.startswith("note a 7")
        with pytest.raises(MemoryNotFoundError):
            mem.get("full0-0")
        with contextlib.suppress(ScrubJayError):  # the close's snapshot may not fit
            mem.close()
        ballast.unlink()
        again = _open(path)  # in the same process, once there is room
        try:
            assert {r.id for r in again} == acked
            again.add("the disk has room again")
            assert len(again) == len(acked) + 1
        finally:
            again.close()
    FIGURES["add"] = {"acked": len(acked), "failed_calls": len(errors),
                      "failed_items": 20 * len(errors), "lost": 0,
                      "error": _cause_chain(errors[0])[:160]}


def test_enospc_during_purge_loses_nothing_acknowledged(tmp_path: Path) -> None:
    with _small_disk(tmp_path / "disk") as disk:
        path = disk / "store"
        mem = _open(path)
        mem.add_many(_batch("p", 300))
        deleted = {f"p-{j}" for j in range(0, 300, 3)}
        for mid in sorted(deleted):
            mem.delete(mid)
        kept = {f"p-{j}" for j in range(300)} - deleted
        ballast = _fill(disk)
        with pytest.raises(ScrubJayError) as info:
            mem.purge()
        assert isinstance(info.value, StoreError), _cause_chain(info.value)
        assert {r.id for r in mem} == kept
        with contextlib.suppress(ScrubJayError):
            mem.close()
        ballast.unlink()
        again = _open(path)
        try:
            ids = {r.id for r in again}
            assert ids == kept and not ids & deleted
            assert again.purge()  # with room, the purge goes through
            assert {r.id for r in again} == kept
        finally:
            again.close()
    FIGURES["purge"] = {"kept": len(kept), "deleted": len(deleted),
                        "error": _cause_chain(info.value)[:160]}


def test_open_failed_on_full_disk_reopens_once_there_is_room(tmp_path: Path) -> None:
    with _small_disk(tmp_path / "disk") as disk:
        fresh, kept = disk / "fresh", disk / "kept"
        mem = _open(kept)
        acked = {r.id for r in mem.add_many(_batch("k", 50))}
        mem.close()
        ballast = _fill(disk)
        failures = []
        for path in (fresh, kept):  # a new store, and one that holds memories
            with pytest.raises(ScrubJayError) as info:
                _open(path)
            assert isinstance(info.value, StoreError), _cause_chain(info.value)
            failures.append(info.value)
        ballast.unlink()
        t0 = time.monotonic()
        for path, expected in ((fresh, set()), (kept, acked)):  # the same process, with room
            again = _open(path)
            try:
                assert {r.id for r in again} == expected
                again.add("the disk has room again")
                assert len(again) == len(expected) + 1
            finally:
                again.close()
    FIGURES["open"] = {"failed_opens": len(failures), "reopened": 2,
                       "reopen_s": round(time.monotonic() - t0, 2),
                       "error": _cause_chain(failures[1])[:160]}


def _env() -> dict[str, str]:
    root = Path(__file__).resolve().parents[2]
    paths = [str(root / "core"), str(root), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "ANONYMIZED_TELEMETRY": "False"}


def test_enospc_with_a_few_kb_free_fails_promptly(tmp_path: Path) -> None:
    """A few KB free: ENOSPC part-way through a batch's writes, after which Chroma's next
    call may never return. Each ``add_many`` must raise a StoreError promptly (or succeed),
    and the store reopen in the same process with every acknowledged memory and none of the
    failed batches."""
    results = []
    for run in range(FEW_KB_RUNS):
        with _small_disk(tmp_path / f"disk{run}") as disk:
            proc = subprocess.Popen([sys.executable, str(CHILD), str(disk), str(FEW_KB),
                                     str(ROUNDS)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=_env())
            try:
                out, err = proc.communicate(timeout=CHILD_DEADLINE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                pytest.fail(f"run {run}: the child hung for {CHILD_DEADLINE_S} s; its rounds:"
                            f"\n{err[-2000:]}")
            assert proc.returncode == 0, err[-3000:]
            res = json.loads(out.strip().splitlines()[-1])
        calls = res["calls"]
        failed = [c for c in calls if c["outcome"] != "ok"]
        assert all(c["outcome"].startswith("StoreError") for c in failed), failed
        assert max(c["s"] for c in calls) < 10, calls
        assert not res["open_missing"] and not res["open_extra"], res
        assert not res["reopen_missing"] and not res["reopen_extra"], res
        assert res["after_add"] == len(res["acked"]) + 1
        results.append(res)
    FIGURES["few_kb"] = {
        "runs": len(results), "free_kb": FEW_KB, "calls": sum(len(r["calls"]) for r in results),
        "failed": sum(c["outcome"] != "ok" for r in results for c in r["calls"]),
        "slowest_s": max(c["s"] for r in results for c in r["calls"]),
        "lost": 0, "errors": sorted({c["outcome"][:120] for r in results for c in r["calls"]
                                     if c["outcome"] != "ok"})}


def test_report_figures() -> None:
    print(f"\nRELIABILITY disk full: tmpfs={DISK} {FIGURES}")
    assert FIGURES
