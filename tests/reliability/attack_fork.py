"""Ten children per start method open a folder their parent holds, the parent writing between
them; prints each method's outcomes and its slowest child (docs/RELIABILITY.md, section 7).

    PYTHONPATH=core:. python tests/reliability/attack_fork.py
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _fork_child import open_and_add
from scrubjay import ScrubJayMemory
from scrubjay.testing import HashEmbedder


def main() -> None:
    for method in ("fork", "spawn", "forkserver"):
        mem = ScrubJayMemory(path=tempfile.mkdtemp(), embedder=HashEmbedder())
        ctx = multiprocessing.get_context(method)
        answers = ctx.Queue()
        seen: dict[str, int] = {}
        slowest = 0.0
        for i in range(10):
            mem.add(f"parent note {i}")
            child = ctx.Process(target=open_and_add, args=(mem._store.path, answers))
            t0 = time.perf_counter()
            child.start()
            child.join(60)
            answer = "hung" if child.is_alive() else str(answers.get(timeout=60))
            slowest = max(slowest, time.perf_counter() - t0)
            if child.is_alive():
                child.kill()
                child.join()
            seen[answer] = seen.get(answer, 0) + 1
        print(method, seen, f"slowest child {slowest:.2f} s", "parent rows", len(mem))
        mem.close()


if __name__ == "__main__":
    main()
