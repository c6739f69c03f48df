"""Concurrency.

* One process, ``SCRUBJAY_THREADS`` (default 8) threads mixing add / add_many / search /
  integrate / delete / get on one embedded store: no exception, no lost acknowledged write, the
  exact final count (also after a reopen).
* ``SCRUBJAY_PROCS`` (default 4) processes writing one namespace through a ``chroma run`` server
  started by the test session, every other one with a mirror that the change log keeps current
  (each reads back its own memories while the others write): the exact final count, every
  acknowledged memory readable, and a mirror opened before them all ends with the same
  memories as a fresh open.
* The embedded path refuses a second writer process with :class:`StoreLockedError` while the
  first one is writing, and the first one's data is untouched.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayMemory, SearchConfig
from scrubjay.testing import HashEmbedder

THREADS = int(os.environ.get("SCRUBJAY_THREADS", "8"))
OPS_PER_THREAD = int(os.environ.get("SCRUBJAY_THREAD_OPS", "30"))
PROCS = int(os.environ.get("SCRUBJAY_PROCS", "4"))
OPS_PER_PROC = int(os.environ.get("SCRUBJAY_PROC_OPS", "25"))
CFG = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"))


def _env() -> dict[str, str]:
    root = Path(__file__).resolve().parents[2]
    return {**os.environ, "ANONYMIZED_TELEMETRY": "False",
            "PYTHONPATH": os.pathsep.join([str(root / "core"), str(root),
                                           os.environ.get("PYTHONPATH", "")])}


def _workload(mem: ScrubJayMemory, tag: str, ops: int, seed: int) -> tuple[set[str], int]:
    """Mixed operations; returns (ids acknowledged and not deleted, operations done)."""
    rng = random.Random(seed)
    mine: dict[str, str] = {}
    done = searches = hits = 0
    for n in range(ops):
        roll = rng.random()
        if roll < 0.35:
            rec = mem.add(f"{tag} fact {n} about topic {rng.randrange(20)}",
                          context=rng.choice(["", f"ctx {rng.randrange(5)}"]))
            mine[rec.id] = rec.text
        elif roll < 0.50:
            recs = mem.add_many([{"text": f"{tag} batch {n} item {j}", "context": "batch"}
                                 for j in range(rng.randint(2, 5))])
            mine.update({r.id: r.text for r in recs})
        elif roll < 0.60:
            report = mem.integrate(f"{tag} update {n}: topic {rng.randrange(20)} changed",
                                   context="updates")
            mine[report.stored.id] = report.stored.text  # type: ignore[union-attr]
        elif roll < 0.70 and mine:
            mid = rng.choice(sorted(mine))
            mem.delete(mid)
            del mine[mid]
        elif roll < 0.80 and mine:
            mid = rng.choice(sorted(mine))
            assert mem.get(mid).text == mine[mid]
        else:
            found = mem.search(f"topic {rng.randrange(20)}", k=5)
            assert all(hit.text for hit in found)  # a hit is always a whole memory
            searches += 1 if mine else 0
            hits += len(found) if mine else 0
        done += 1
    # searches made while this worker had memories stored found some (not all were empty)
    assert searches == 0 or hits > 0
    return set(mine), done


def test_threads_share_one_store(tmp_path: Path) -> None:
    mem = ScrubJayMemory(path=tmp_path / "store", embedder=HashEmbedder(dim=128), config=CFG)
    results: dict[int, set[str]] = {}
    errors: list[BaseException] = []
    ops: list[int] = []
    barrier = threading.Barrier(THREADS)

    def run(i: int) -> None:
        try:
            barrier.wait()
            kept, done = _workload(mem, f"thread{i}", OPS_PER_THREAD, seed=i)
            results[i] = kept
            ops.append(done)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, repr(errors[:3])
    expected = set().union(*results.values())
    assert len(mem) == len(expected)
    assert {r.id for r in mem} == expected
    mem.close()
    with ScrubJayMemory(path=tmp_path / "store", embedder=HashEmbedder(dim=128),
                        config=CFG) as again:
        assert {r.id for r in again} == expected
    print(f"\nRELIABILITY threads: threads={THREADS} operations={sum(ops)} "
          f"final_count={len(expected)} exceptions=0 seconds={time.monotonic() - started:.1f}")


PROC_SCRIPT = """
import json, sys
import chromadb
from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayMemory, SearchConfig
from scrubjay.testing import HashEmbedder
sys.path.insert(0, sys.argv[5])
from test_rel_concurrency import _workload
host, port, namespace, i = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
cfg = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"),
                     search=SearchConfig(mirror=i % 2 == 1))
mem = ScrubJayMemory(client=chromadb.HttpClient(host=host, port=port), namespace=namespace,
                     embedder=HashEmbedder(dim=128), config=cfg)
kept, done = _workload(mem, f"proc{i}", int(sys.argv[6]), seed=100 + i)
print(json.dumps({"kept": sorted(kept), "done": done}))
"""


def test_processes_share_a_chroma_server(chroma_server) -> None:
    import chromadb

    host, port = chroma_server
    namespace = f"procs-{uuid.uuid4().hex[:8]}"
    mirrored_cfg = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"),
                                  search=SearchConfig(mirror=True))
    observer = ScrubJayMemory(client=chromadb.HttpClient(host=host, port=port),
                              namespace=namespace, embedder=HashEmbedder(dim=128),
                              config=mirrored_cfg)
    started = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", PROC_SCRIPT, host, str(port), namespace,
                               str(i), str(Path(__file__).parent), str(OPS_PER_PROC)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env()) for i in range(PROCS)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    answers = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    expected = set().union(*(set(a["kept"]) for a in answers))
    mem = ScrubJayMemory(client=chromadb.HttpClient(host=host, port=port), namespace=namespace,
                         embedder=HashEmbedder(dim=128), config=CFG)
    fresh = ScrubJayMemory(client=chromadb.HttpClient(host=host, port=port),
                           namespace=namespace, embedder=HashEmbedder(dim=128),
                           config=mirrored_cfg)
    try:
        assert len(mem) == len(expected)
        assert {r.id for r in mem} == expected
        assert mem.search("topic 3", k=5)
        # the mirror opened before the processes learnt every write from the change log
        assert len(observer) == len(expected)
        assert ({r.id: (r.text, r.value, r.pi) for r in observer}
                == {r.id: (r.text, r.value, r.pi) for r in fresh})
        assert set(observer.graph.g.nodes) == set(fresh.graph.g.nodes) == expected
    finally:
        for m in (mem, observer, fresh):
            m.close()
    print(f"\nRELIABILITY processes: processes={PROCS} operations="
          f"{sum(a['done'] for a in answers)} final_count={len(expected)} "
          f"seconds={time.monotonic() - started:.1f}")


SECOND_WRITER = """
import sys
from scrubjay import ScrubJayMemory, StoreLockedError
from scrubjay.testing import HashEmbedder
try:
    ScrubJayMemory(path=sys.argv[1], embedder=HashEmbedder(dim=128)).add("intruder")
except StoreLockedError as exc:
    print("LOCKED", exc)
"""


def test_embedded_refuses_a_second_writer_while_writing(tmp_path: Path) -> None:
    mem = ScrubJayMemory(path=tmp_path / "store", embedder=HashEmbedder(dim=128), config=CFG)
    stop = threading.Event()
    written: list[str] = []

    def write() -> None:
        n = 0
        while not stop.is_set():
            written.append(mem.add(f"owner note {n}").id)
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        proc = subprocess.run([sys.executable, "-c", SECOND_WRITER, str(tmp_path / "store")],
                              capture_output=True, text=True, timeout=120, env=_env(),
                              check=False)
    finally:
        stop.set()
        writer.join(60)
    assert proc.stdout.startswith("LOCKED"), proc.stderr[-2000:]
    assert "single writer process" in proc.stdout and "chroma run" in proc.stdout
    assert len(mem) == len(written) and "intruder" not in {r.text for r in mem}
    mem.close()
