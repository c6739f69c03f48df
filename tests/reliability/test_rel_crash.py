"""Crash safety: SIGKILL a writer at random points, reopen, check.

A child process (``_crash_child.py``) adds memories one by one, in ``add_many`` batches, through
``integrate`` (RCI updates of the related memories, then the new memory) and deletes some, on an
embedded store. It acknowledges each call after it returns (a JSON line, flushed and fsync-ed).
The parent kills it with SIGKILL after a random delay, reopens the store and checks:

* every acknowledged memory is present with its exact text and context; every acknowledged
  delete is absent (a delete cut short by the kill may have happened or not);
* no partial memory: every memory visible through the API has its text, a known label,
  ``pi`` in ``[pi_min, 1]``, ``tau`` in ``[tau_min, tau_max]``, a finite value >= 0, its user
  metadata; one with a context has its where-row; no where-row lacks its what-row;
* the stored adjacency (the edge file) lists each edge at both ends with one weight, and only
  edges between memories that exist;
* search works and finds a memory by its unique token;
* the killed process's lock is gone (the reopen itself proves it).

``SCRUBJAY_CRASH_RUNS`` (default 20) sets the number of kills, ``SCRUBJAY_CRASH_SEED`` the seed,
``SCRUBJAY_CRASH_MAX_DELAY_S`` (default 1.5) the longest delay before a kill.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayMemory
from scrubjay.config import LABELS
from scrubjay.testing import HashEmbedder

CHILD = Path(__file__).with_name("_crash_child.py")
RUNS = int(os.environ.get("SCRUBJAY_CRASH_RUNS", "20"))
SEED = int(os.environ.get("SCRUBJAY_CRASH_SEED", "7"))
MAX_DELAY_S = float(os.environ.get("SCRUBJAY_CRASH_MAX_DELAY_S", "1.5"))
NOTE_RE = re.compile(r"^(note (r\d+n\d+(?:b\d+)?) about \w+ \d+|update r\d+n\d+ the \w+ plan "
                     r"changed)$")


def _env() -> dict[str, str]:
    paths = [str(Path(__file__).resolve().parents[2] / "core"),
             str(Path(__file__).resolve().parents[2])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH",
                                                                                 "")]),
            "ANONYMIZED_TELEMETRY": "False"}


def _read_acks(path: Path) -> tuple[dict[str, tuple[str, str]], set[str], set[str], int]:
    """(present id -> (text, context), acknowledged deletes, deletes in flight, lines)."""
    present: dict[str, tuple[str, str]] = {}
    deleted: set[str] = set()
    in_flight: set[str] = set()
    lines = 0
    if not path.exists():
        return present, deleted, in_flight, 0
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):  # torn last line: its call was not acknowledged
            break
        entry = json.loads(line)
        lines += 1
        if entry["op"] == "add":
            present[entry["id"]] = (entry["text"], entry["context"])
            deleted.discard(entry["id"])
        elif entry["op"] == "deleting":
            in_flight.add(entry["id"])
        else:
            in_flight.discard(entry["id"])
            present.pop(entry["id"], None)
            deleted.add(entry["id"])
    for mid in in_flight:
        present.pop(mid, None)
    return present, deleted, in_flight, lines


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.orphans = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "orphaned where-rows" in record.getMessage():
            self.orphans += int(record.args[0])  # type: ignore[index]


def _check_store(folder: Path, acks: Path, cfg: ScrubJayConfig) -> dict[str, int]:
    present, deleted, in_flight, _ = _read_acks(acks)
    mem = ScrubJayMemory(path=folder, embedder=HashEmbedder(dim=256), config=cfg)
    try:
        records = {r.id: r for r in mem}
        for mid, (text, ctx) in present.items():
            assert mid in records, f"acknowledged memory {mid} lost"
            assert records[mid].text == text and records[mid].context == ctx
        assert not (deleted & set(records)), "an acknowledged delete came back"
        c = cfg.classifier
        for rec in records.values():  # no partial memory
            assert NOTE_RE.match(rec.text), f"garbled text {rec.text!r}"
            if re.fullmatch(r"r\d+n\d+(?:b\d+)?", rec.id):  # add_many ids name their text
                assert NOTE_RE.match(rec.text).group(2) == rec.id
            assert rec.label in LABELS
            assert c.pi_min <= rec.pi <= 1.0
            assert c.tau_min_s <= rec.tau_s <= c.tau_max_s
            assert math.isfinite(rec.value) and rec.value >= 0.0
            assert math.isfinite(rec.created_at_s)
            assert set(rec.metadata) in ({"run", "n"}, set())
        store = mem._store
        what_ids = set(store.what.get(include=[])["ids"])
        where_ids = set(store.where.get(include=[])["ids"])
        assert where_ids <= what_ids, "where-row without its what-row after reconcile"
        with_ctx = {mid for mid, r in records.items() if r.context}
        assert with_ctx <= where_ids, "memory with a context but no where-row"
        assert what_ids == set(records)
        # the stored adjacency (the edge file's) lists every edge at both ends, between
        # memories that exist, with one weight
        listed = {(row.id, e[0]): e[1] for row in store.get(sorted(what_ids))
                  for e in json.loads(row.meta.get("sj_edges") or "[]")}
        one_sided = [(a, b, w, listed.get((b, a))) for (a, b), w in listed.items()
                     if listed.get((b, a)) != w]
        assert not one_sided, f"edges listed at one end only: {one_sided[:5]}"
        assert {b for _, b in listed} <= what_ids, "an edge to a missing memory"
        # search works: a note is found by its own words
        # (a superseded note ranks below current ones by design: the current ones here)
        notes = [r for r in records.values()
                 if r.text.startswith("note ") and r.superseded_by is None]
        for rec in random.Random(len(records)).sample(notes, min(5, len(notes))):
            assert rec.id in [h.id for h in mem.search(rec.text, context=rec.context, k=5)]
        if records:
            assert mem.search("garden plan", k=3)
        return {"memories": len(records), "acknowledged": len(present),
                "deleted": len(deleted), "in_flight_deletes": len(in_flight)}
    finally:
        mem.close()


def test_sigkill_at_random_points_loses_nothing(tmp_path: Path) -> None:
    folder, acks = tmp_path / "store", tmp_path / "acks.jsonl"
    cfg = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"))
    rng = random.Random(SEED)
    counter = _Count()
    logging.getLogger("scrubjay.store").addHandler(counter)
    logging.getLogger("scrubjay.store").setLevel(logging.INFO)
    kills_in_open = 0
    started = time.monotonic()
    try:
        for run in range(RUNS):
            proc = subprocess.Popen([sys.executable, str(CHILD), str(folder), str(acks),
                                     str(run), str(rng.randrange(2**31))],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
            if rng.random() < 0.15:  # sometimes kill while it imports, opens or reconciles
                time.sleep(rng.uniform(0.0, 2.5))
                kills_in_open += 1
            else:
                ready, _, _ = select.select([proc.stdout], [], [], 120)
                assert ready and proc.stdout.readline().strip() == b"READY", \
                    proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "no READY"
                time.sleep(rng.uniform(0.0, MAX_DELAY_S))
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
            proc.stderr.close()
            assert proc.returncode == -signal.SIGKILL
            figures = _check_store(folder, acks, cfg)
        _, _, _, lines = _read_acks(acks)
        elapsed = time.monotonic() - started
        print(f"\nRELIABILITY crash: kills={RUNS} (during open: {kills_in_open}) "
              f"acknowledged_calls={lines} final={figures} "
              f"orphan_where_rows_reconciled={counter.orphans} seconds={elapsed:.0f}")
        assert figures["acknowledged"] > 0
    finally:
        logging.getLogger("scrubjay.store").removeHandler(counter)
