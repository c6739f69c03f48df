"""Child of ``test_rel_disk_full.py``: ``add_many`` on an embedded store with a few KB free.

Run as ``python _disk_full_child.py DISK FREE_KB ROUNDS``: DISK is a small tmpfs the parent
mounted. The child stores 100 memories, fills DISK with a ballast file but for FREE_KB, tries
ROUNDS ``add_many`` batches of 20, closes, removes the ballast, reopens the store in this same
process, adds one memory and prints one JSON line with what it saw. A Chroma call that hangs
holds the GIL, so only a deadline outside this process (the parent's) can stop it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import time
from pathlib import Path

from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayError, ScrubJayMemory, StoreError
from scrubjay.testing import HashEmbedder

CFG = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"))


def _open(path: Path) -> ScrubJayMemory:
    return ScrubJayMemory(path=path, embedder=HashEmbedder(dim=256), config=CFG)


def _batch(tag: str, n: int) -> list[dict[str, str]]:
    return [{"id": f"{tag}-{j}", "text": f"note {tag} {j} " + "y" * 300, "context": f"ctx {tag}"}
            for j in range(n)]


def fill(disk: Path) -> Path:
    """Write a ballast file until the disk is full; return it."""
    ballast = disk / "ballast"
    with open(ballast, "ab", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    return ballast


def main() -> None:
    disk, free_kb, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    path = disk / "store"
    mem = _open(path)
    acked = {r.id for r in mem.add_many(_batch("a", 100))}
    ballast = fill(disk)
    os.truncate(ballast, max(0, ballast.stat().st_size - free_kb * 1024))
    calls = []
    for k in range(rounds):
        t0 = time.monotonic()
        try:
            acked |= {r.id for r in mem.add_many(_batch(f"full{k}", 20))}
            outcome = "ok"
        except ScrubJayError as exc:
            outcome = f"{'StoreError' if isinstance(exc, StoreError) else type(exc).__name__}:"
            outcome += f" {exc}".replace(str(disk), "DISK")[:200]
        calls.append({"s": round(time.monotonic() - t0, 3), "outcome": outcome})
        print(f"round {k}: {calls[-1]}", file=sys.stderr, flush=True)
    open_view = {r.id for r in mem}
    t0 = time.monotonic()
    with contextlib.suppress(ScrubJayError):
        mem.close()
    close_s = round(time.monotonic() - t0, 3)
    ballast.unlink()
    again = _open(path)
    try:
        reopened = {r.id for r in again}
        again.add("the disk has room again")
        after_add = len(again)
    finally:
        again.close()
    print(json.dumps({"acked": sorted(acked), "calls": calls, "close_s": close_s,
                      "open_missing": sorted(acked - open_view),
                      "open_extra": sorted(open_view - acked),
                      "reopen_missing": sorted(acked - reopened),
                      "reopen_extra": sorted(reopened - acked), "after_add": after_add}))


if __name__ == "__main__":
    main()
