"""Reopening an embedded store after another process wrote to it (found by the crash test).

A closed ``ScrubJayMemory`` releases the folder lock; another process may then write the store.
A reopen in the first process must read the disk afresh, not a cached Chroma system.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scrubjay import ScrubJayMemory
from scrubjay.testing import HashEmbedder

WRITER = """
import sys
from scrubjay import ScrubJayMemory
from scrubjay.testing import HashEmbedder
with ScrubJayMemory(path=sys.argv[1], embedder=HashEmbedder()) as mem:
    mem.add_many([f"written by process {sys.argv[2]} item {i}" for i in range(150)])
"""


def test_reopen_after_another_process_wrote(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    for round_ in range(3):
        with ScrubJayMemory(path=folder, embedder=HashEmbedder()) as mem:
            assert len(mem) == 150 * round_ + 5 * round_
            mem.add_many([f"parent round {round_} note {i}" for i in range(5)])
            assert mem.search("parent round note", k=3)
        proc = subprocess.run([sys.executable, "-c", WRITER, str(folder), str(round_)],
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
    with ScrubJayMemory(path=folder, embedder=HashEmbedder()) as mem:
        assert len(mem) == 3 * 155
        # (k=3: HashEmbedder's 64 buckets make "7" and "95" collide, an exact tie)
        assert "written by process 2 item 7" in {
            h.text for h in mem.search("written by process 2 item 7", k=3)}
