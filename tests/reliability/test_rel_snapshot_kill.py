"""SIGKILL while ``close()`` writes the snapshot of an embedded store.

``close()`` saves the mirror and graph to ``scrubjay-<namespace>.snapshot.npz`` for a fast
reopen: a temporary file, ``fsync``, then a rename. A process killed in the middle leaves a
partial temporary file, or a whole one not yet renamed, beside the snapshot of an earlier
close, which no longer matches the store. The reopen must ignore both and rebuild from
Chroma, with every memory and edge; the next ``close()`` must write a snapshot that the
following open uses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scrubjay import ScrubJayMemory
from scrubjay.snapshot import snapshot_path
from scrubjay.testing import HashEmbedder

# The second session: more memories, then a close killed while it saves.
CHILD = """
import os, signal, sys
import numpy as np
import scrubjay.snapshot as snapshot
from scrubjay import ScrubJayMemory
from scrubjay.testing import HashEmbedder

folder, when = sys.argv[1], sys.argv[2]
mem = ScrubJayMemory(path=folder, embedder=HashEmbedder())
mem.add_many([f"second session note {i} about the garden" for i in range(120)])
savez, replace = np.savez, os.replace

def die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)

def savez_cut_short(fh, **arrays):  # half of the archive reaches the file
    savez(fh, **arrays)
    fh.flush()
    fh.truncate(fh.tell() // 2)
    fh.flush()
    os.fsync(fh.fileno())
    die()

def replace_never(src, dst):  # the whole temporary snapshot, never renamed
    if not str(src).endswith(".snapshot.npz.tmp"):  # os.replace is global: others rename
        return replace(src, dst)
    die()

if when == "during_write":
    snapshot.np.savez = savez_cut_short
else:
    snapshot.os.replace = replace_never
print("CLOSING", flush=True)
mem.close()
print("NOT KILLED", flush=True)
"""


def _listed_edges(mem: ScrubJayMemory) -> set[tuple[str, str]]:
    """Every edge as the stored rows list it (both ends), from Chroma."""
    ids = [r.id for r in mem]
    edges: set[tuple[str, str]] = set()
    for row in mem._store.get(ids):
        for other, *_ in json.loads(row.meta.get("sj_edges") or "[]"):
            edges.add((row.id, other))
    return edges


def _graph_edges(mem: ScrubJayMemory) -> set[tuple[str, str]]:
    return {(u, v) for u, nbrs in mem._backend.graph.g.adjacency() for v in nbrs}


@pytest.mark.parametrize("when", ["during_write", "before_rename"])
def test_a_kill_while_close_saves_the_snapshot_loses_nothing(tmp_path: Path,
                                                             when: str) -> None:
    folder = tmp_path / "store"
    snap = snapshot_path(folder, "default")
    with ScrubJayMemory(path=folder, embedder=HashEmbedder()) as mem:
        mem.add_many([f"first session note {i} about taxes" for i in range(100)])
    assert snap.exists()  # the earlier close's snapshot: stale after the second session
    stale = snap.read_bytes()

    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder), when],
                          capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == -9, proc.stdout + proc.stderr[-2000:]
    assert proc.stdout.split() == ["CLOSING"]
    tmp = snap.with_name(snap.name + ".tmp")
    assert tmp.exists() and snap.read_bytes() == stale  # the kill came before the rename

    with ScrubJayMemory(path=folder, embedder=HashEmbedder()) as mem:
        texts = {r.text for r in mem}
        assert texts == ({f"first session note {i} about taxes" for i in range(100)}
                         | {f"second session note {i} about the garden" for i in range(120)})
        assert mem._backend.snapshot_marker is None  # the stale snapshot was not used
        edges = _graph_edges(mem)
        assert edges and edges == _listed_edges(mem)
        assert {v for _, v in edges} - {r.id for r in mem} == set()
        hits = mem.search("second session note 5 about the garden", k=3)
        assert "second session note 5 about the garden" in {h.text for h in hits}
    assert not tmp.exists() and snap.read_bytes() != stale  # this close saved a new one

    with ScrubJayMemory(path=folder, embedder=HashEmbedder()) as mem:
        assert mem._backend.snapshot_marker is not None  # the new snapshot was used
        assert len(mem) == 220 and {r.text for r in mem} == texts
        assert _graph_edges(mem) == edges == _listed_edges(mem)
