"""The embedded store's snapshot: a fast reopen that never loses or misreads a memory.

A clean close saves the mirror and graph beside the Chroma files; a reopen uses them only when
they match the store (count and change marker) and are whole, and otherwise rebuilds from Chroma.
"""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from scrubjay import MemoryRecord, ScrubJayMemory
from scrubjay.snapshot import _pack, _unpack, snapshot_path
from scrubjay.store import ChromaStore
from scrubjay.testing import FrozenClock, HashEmbedder

T0 = 1_764_000_000.0
NS = "alice"


def _open(folder: Path) -> ScrubJayMemory:
    return ScrubJayMemory(path=folder, namespace=NS, embedder=HashEmbedder(),
                          clock=FrozenClock(T0 + 7_200))


def _fill(mem: ScrubJayMemory, lo: int, hi: int) -> None:
    mem.add_many([{"text": f"note {i} about the garden shed {i % 5}",
                   "context": ("", "chores", "at home")[i % 3], "at": T0 + 10 * i,
                   "id": f"n{i}", "metadata": {"i": i} if i % 4 == 0 else None}
                  for i in range(lo, hi)])


def _state(mem: ScrubJayMemory) -> tuple[Any, ...]:
    """Everything a reopen must restore: records, edges and search results."""
    records = sorted((r.id, r.text, r.context, r.label, r.pi, r.tau_s, r.value, r.created_at_s,
                      tuple(sorted(r.metadata.items())), r.source, r.updated_at_s)
                     for r in mem)
    edges = sorted((min(u, v), max(u, v), round(d["weight"], 9))
                   for u, v, d in mem.graph.g.edges(data=True))
    hits = [(h.id, round(h.score, 9)) for q in ("garden shed 3", "note 7") for h in
            mem.search(q, context="chores", k=6)]
    return records, edges, hits


@pytest.fixture
def no_chroma_rebuild(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the full reads of a namespace from Chroma (the slow reopen path)."""
    calls: list[int] = []
    original = ChromaStore.iter_all

    def counting(self: ChromaStore, **kw: Any) -> Any:
        calls.append(1)
        return original(self, **kw)
    monkeypatch.setattr(ChromaStore, "iter_all", counting)
    return calls


def test_reopen_reads_the_snapshot_and_restores_everything(tmp_path: Path,
                                                           no_chroma_rebuild: list[int]) -> None:
    folder = tmp_path / "store"
    mem = _open(folder)
    _fill(mem, 0, 60)
    mem.integrate("note about the garden shed 3 was repainted", store=True)
    before = _state(mem)
    mem.close()
    assert snapshot_path(folder, NS).exists()
    no_chroma_rebuild.clear()
    mem = _open(folder)
    assert no_chroma_rebuild == []  # the mirror came from the snapshot, not from Chroma
    assert _state(mem) == before
    _fill(mem, 60, 70)  # and it keeps working as a store
    assert len(mem) == 71
    mem.close()


def test_records_read_from_the_snapshot_equal_the_written_ones_field_by_field(
        tmp_path: Path, no_chroma_rebuild: list[int]) -> None:
    """The snapshot builds its records without ``MemoryRecord.__post_init__`` (for speed):
    every field, in its declaration order, must still be what the closed store held and what
    the normal constructor makes of it."""
    folder = tmp_path / "store"
    mem = _open(folder)
    _fill(mem, 0, 40)
    mem.integrate("note about the garden shed 3 was repainted", store=True)
    before = sorted(mem, key=lambda r: r.id)
    assert any(r.updated_at_s is not None for r in before)
    assert any(r.metadata for r in before)
    mem.close()
    no_chroma_rebuild.clear()
    mem = _open(folder)
    after = sorted(mem, key=lambda r: r.id)
    assert no_chroma_rebuild == []
    assert after == before
    for r in after:
        fields = {f.name: getattr(r, f.name) for f in dataclasses.fields(MemoryRecord)}
        assert MemoryRecord(**fields) == r
        assert type(r.metadata) is dict and type(r.pi) is float
    mem.close()


def test_the_rci_drift_bounds_survive_a_snapshot_reopen(tmp_path: Path,
                                                       no_chroma_rebuild: list[int]) -> None:
    """RCI defers index rewrites while a bound on the drift stays small; the bound must come
    back with the snapshot, or later events would let the index drift past it unseen."""
    import numpy as np
    from scrubjay import ScrubJayConfig
    from scrubjay.config import RCIConfig

    folder = tmp_path / "store"
    cfg = ScrubJayConfig(rci=RCIConfig(eta_what=0.02))
    mem = ScrubJayMemory(path=folder, namespace=NS, embedder=HashEmbedder(),
                         clock=FrozenClock(T0 + 7_200), config=cfg)
    _fill(mem, 0, 40)
    mem.integrate("note about the garden shed 3 was repainted", store=False)
    drift = dict(zip(mem._backend._mirror.view().ids, mem._backend._mirror.drift[: len(mem)].tolist()))
    assert any(d > 0 for d in drift.values())
    mem.close()
    no_chroma_rebuild.clear()
    mem = _open(folder)
    assert no_chroma_rebuild == []
    again = dict(zip(mem._backend._mirror.view().ids, mem._backend._mirror.drift[: len(mem)].tolist()))
    assert again == drift and np.isfinite(list(again.values())).all()
    mem.close()


def test_a_store_without_contexts_reopens_from_the_snapshot(
        tmp_path: Path, no_chroma_rebuild: list[int]) -> None:
    """The where collection of such a store was never written (no sequence number)."""
    folder = tmp_path / "store"
    mem = _open(folder)
    mem.add_many([{"text": f"plain note {i}", "at": T0 + i} for i in range(20)])
    before = _state(mem)
    mem.close()
    no_chroma_rebuild.clear()
    mem = _open(folder)
    assert no_chroma_rebuild == [] and _state(mem) == before
    mem.close()


def test_a_stale_snapshot_falls_back_to_chroma(tmp_path: Path, no_chroma_rebuild: list[int],
                                               caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "store"
    mem = _open(folder)
    _fill(mem, 0, 30)
    mem.close()
    old = snapshot_path(folder, NS).read_bytes()
    mem = _open(folder)
    _fill(mem, 30, 45)
    mem.get("n3")
    mem.delete("n3")
    mem.close()
    snapshot_path(folder, NS).write_bytes(old)  # the snapshot of the earlier state
    no_chroma_rebuild.clear()
    caplog.set_level(logging.INFO, logger="scrubjay")
    mem = _open(folder)
    assert no_chroma_rebuild == [1]
    assert "stale snapshot" in caplog.text
    assert len(mem) == 44 and "n40" in mem and "n3" not in mem
    mem.close()
    mem = _open(folder)  # the close saved a fresh snapshot, used now
    assert no_chroma_rebuild == [1] and len(mem) == 44
    mem.close()


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_a_corrupt_snapshot_falls_back_to_chroma(tmp_path: Path, damage: str,
                                                 no_chroma_rebuild: list[int],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "store"
    mem = _open(folder)
    _fill(mem, 0, 40)
    before = _state(mem)
    mem.close()
    path = snapshot_path(folder, NS)
    data = bytearray(path.read_bytes())
    if damage == "flip":  # one byte inside the vectors: only the checksum can tell
        data[len(data) // 2] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 3]
    else:
        data = bytearray(b"not a snapshot at all")
    path.write_bytes(bytes(data))
    no_chroma_rebuild.clear()
    caplog.set_level(logging.WARNING, logger="scrubjay")
    mem = _open(folder)
    assert no_chroma_rebuild == [1]
    assert "snapshot" in caplog.text
    records, edges, hits = _state(mem)
    assert [r[:4] for r in records] == [r[:4] for r in before[0]]
    assert edges == before[1] and [h[0] for h in hits] == [h[0] for h in before[2]]
    mem.close()


CRASH = textwrap.dedent("""
    import os, sys
    from scrubjay import ScrubJayMemory
    from scrubjay.testing import FrozenClock, HashEmbedder
    mem = ScrubJayMemory(path=sys.argv[1], namespace="alice", embedder=HashEmbedder(),
                         clock=FrozenClock(1_764_000_000.0 + 7_200))
    report = mem.integrate("note about the garden shed 2 was sold", store=False)
    assert report.affected
    print(",".join(f"{mid}={mem.get(mid).value!r}" for mid, _ in report.affected))
    sys.stdout.flush()
    os._exit(0)  # a crash: no close(), so no snapshot is written
""")


def test_updates_of_a_crashed_process_are_not_hidden_by_the_snapshot(
        tmp_path: Path) -> None:
    """RCI changes values without changing the count: the change marker must catch it."""
    folder = tmp_path / "store"
    mem = _open(folder)
    _fill(mem, 0, 40)
    mem.close()
    assert snapshot_path(folder, NS).exists()
    proc = subprocess.run([sys.executable, "-c", CRASH, str(folder)], check=False,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    expected = {mid: float(v) for mid, v in (
        kv.split("=") for kv in proc.stdout.strip().splitlines()[-1].split(","))}
    assert all(v < 0.99 for v in expected.values())  # RCI lowered them from 1.0
    mem = _open(folder)
    # (Chroma's metadata round trip may move a float by one unit in the last place)
    assert {mid: mem.get(mid).value for mid in expected} == pytest.approx(expected, rel=1e-12)
    mem.close()


def test_two_writers_in_one_process_never_leave_a_partial_snapshot(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    a, b = _open(folder), _open(folder)  # same folder and namespace: two stale mirrors
    _fill(b, 0, 10)
    _fill(a, 10, 20)
    a.close()
    b.close()
    mem = _open(folder)
    assert len(mem) == 20
    mem.close()


def test_delete_removes_the_snapshot_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    mem = _open(folder)
    _fill(mem, 0, 10)
    mem.close()
    mem = _open(folder)
    assert snapshot_path(folder, NS).exists()
    mem.delete("n2")  # its text must not stay on disk in the snapshot until the close
    assert not snapshot_path(folder, NS).exists()
    mem.close()
    mem = _open(folder)
    assert len(mem) == 9 and "n2" not in mem
    mem.close()


@pytest.mark.parametrize("strings", [
    ["plain", "", "ascii only", ""],
    ["caf\u00e9", "", "\U0001f426 scrub jay", "plain", "\ud800 lone surrogate"],
    [],
])
def test_string_columns_round_trip(strings: list[str]) -> None:
    """Strings survive the packing, non-ASCII and lone surrogates included, and so does an
    empty column (its offsets once made ``_unpack`` fail)."""
    assert _unpack(*_pack(strings)) == strings


def test_an_emptied_store_reopens_from_its_snapshot_without_a_warning(
        tmp_path: Path, no_chroma_rebuild: list[int], caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "store"
    mem = _open(folder)
    _fill(mem, 0, 3)
    for i in range(3):
        mem.delete(f"n{i}")
    mem.close()
    assert snapshot_path(folder, NS).exists()  # a snapshot of zero rows
    no_chroma_rebuild.clear()
    with caplog.at_level(logging.INFO, logger="scrubjay"):
        mem = _open(folder)
    assert len(mem) == 0 and no_chroma_rebuild == []
    assert not [r for r in caplog.records if "snapshot" in r.getMessage()]
    _fill(mem, 3, 5)
    assert len(mem) == 2
    mem.close()
