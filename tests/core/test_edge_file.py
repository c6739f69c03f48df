"""An embedded store keeps its graph's adjacency in an edge file beside Chroma (schema 5).

Chroma's embedded write costs per metadata key and byte, and the adjacency is the largest key,
rewritten whenever a memory gains or loses an edge; so a ``path=`` store writes it to
``scrubjay-graph.sqlite3`` in one transaction per batch. These tests check that the edges
survive a reopen (without the snapshot, so the graph is rebuilt from the stores), that a schema
4 store's adjacency in Chroma still reads and is shadowed once rewritten, that deletes and
``forget_namespace`` remove a memory's adjacency, that a failed edge write leaves the store as
it was before the batch, and that a failed delete leaves the graph and the mirror as a reopen
reads them.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from scrubjay import ScrubJayMemory, StoreError
from scrubjay.edgefile import EDGE_FILE, EdgeFile
from scrubjay.snapshot import snapshot_path
from scrubjay.store import SCHEMA_VERSION

T0 = 1_764_000_000.0  # the fixtures' frozen clock (tests/conftest.py)


def _texts(n: int) -> list[dict]:
    # three topics, a minute apart: plenty of semantic and temporal edges
    topics = ["the deploy of the billing service", "the meeting room on floor 2",
              "the user's daughter starts school"]
    return [{"text": f"{topics[i % 3]} note {i}", "at": T0 - 3600 + 60 * i, "id": f"m{i:02d}"}
            for i in range(n)]


def _open(path: Path, clock, embedder, namespace: str = "edges") -> ScrubJayMemory:
    return ScrubJayMemory(path=path, namespace=namespace, clock=clock, embedder=embedder)


def _reopen_cold(path: Path, clock, embedder, namespace: str = "edges") -> ScrubJayMemory:
    """Reopen without the snapshot: the mirror and graph come from Chroma and the edge file."""
    snapshot_path(path, namespace).unlink(missing_ok=True)
    return _open(path, clock, embedder, namespace)


def _adjacency(mem: ScrubJayMemory) -> dict[str, dict[str, float]]:
    g = mem.graph.g
    return {n: {m: d["weight"] for m, d in g[n].items()} for n in g.nodes}


def _file_rows(path: Path, namespace: str = "edges") -> dict[str, list]:
    con = sqlite3.connect(path / EDGE_FILE)
    try:
        return {i: json.loads(e) for i, e in con.execute(
            "SELECT id, edges FROM adjacency WHERE namespace = ?", (namespace,))}
    finally:
        con.close()


def _symmetric(adjacency: dict[str, dict[str, float]]) -> bool:
    return all(adjacency.get(j, {}).get(i) == w for i, nbrs in adjacency.items()
               for j, w in nbrs.items())


def test_the_adjacency_lives_in_the_edge_file_and_survives_a_cold_reopen(
        tmp_path, clock, embedder) -> None:
    mem = _open(tmp_path, clock, embedder)
    mem.add_many(_texts(30))
    mem.add("the deploy of the billing service finished", at=T0 - 30)  # one more, alone
    before = _adjacency(mem)
    assert sum(map(len, before.values())) > 30  # a linked graph, not a trivial one
    raw = mem._store.what.get(include=["metadatas"])["metadatas"]
    assert raw and not any("sj_edges" in m for m in raw)  # nothing of it in Chroma
    rows = _file_rows(tmp_path)
    assert {i: {e[0]: e[1] for e in edges} for i, edges in rows.items()} == before
    mem.close()
    again = _reopen_cold(tmp_path, clock, embedder)
    assert _adjacency(again) == before
    assert again._store.state()["sj_schema"] == SCHEMA_VERSION
    again.close()


def test_a_schema_4_store_reads_its_adjacency_from_chroma_until_it_is_rewritten(
        tmp_path, clock, embedder) -> None:
    mem = _open(tmp_path, clock, embedder)
    mem._store._edge_file.close()  # write as schema 4 did: sj_edges in each Chroma row
    mem._store._edge_file = None
    mem.add_many(_texts(20))
    mem._store.set_state(sj_schema=4)
    old = _adjacency(mem)
    raw = mem._store.what.get(include=["metadatas"])["metadatas"]
    assert all("sj_edges" in m for m in raw)
    mem.close()
    (tmp_path / EDGE_FILE).unlink()

    again = _reopen_cold(tmp_path, clock, embedder)
    assert _adjacency(again) == old  # read from Chroma
    new = again.add("the meeting room on floor 2 note again", at=T0)
    after = _adjacency(again)
    rewritten = set(after[new.id])
    assert rewritten and _file_rows(tmp_path).keys() >= rewritten | {new.id}
    again.close()
    final = _reopen_cold(tmp_path, clock, embedder)
    # the edge file's rows win over the stale sj_edges still in those Chroma rows
    assert _adjacency(final) == after
    assert _symmetric(after)
    final.close()


def test_deletes_and_forget_namespace_remove_the_adjacency(tmp_path, clock, embedder) -> None:
    mem = _open(tmp_path, clock, embedder)
    other = _open(tmp_path, clock, embedder, namespace="other")
    mem.add_many(_texts(12))
    other.add_many(_texts(6))
    victim = max(_adjacency(mem).items(), key=lambda kv: len(kv[1]))[0]
    neighbours = set(_adjacency(mem)[victim])
    mem.delete(victim)
    rows = _file_rows(tmp_path)
    assert victim not in rows
    assert all(victim not in {e[0] for e in rows[n]} for n in neighbours)
    mem.forget_namespace()
    assert _file_rows(tmp_path) == {}
    assert len(_file_rows(tmp_path, "other")) == 6  # another namespace of the folder: kept
    mem.close()
    other.close()


def test_a_failed_edge_write_loses_no_stored_edge_and_leaves_both_ends_alike(
        tmp_path, clock, embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    mem = _open(tmp_path, clock, embedder)
    items = _texts(30)
    mem.add_many(items[:20])
    before = _adjacency(mem)

    def broken(self, pairs):
        raise self._error("write (injected)", sqlite3.OperationalError("disk I/O error"))

    with monkeypatch.context() as m:
        m.setattr(EdgeFile, "write", broken)
        with pytest.raises(StoreError, match="edge file"):
            mem.add_many(items[20:])
    assert _adjacency(mem) == before  # the in-memory graph rolled back to what is stored
    assert len(mem) == 20
    mem.close()
    again = _reopen_cold(tmp_path, clock, embedder)
    assert _adjacency(again) == before  # every stored edge still there, both ends alike
    assert len(again) == 20  # the batch's rows went in, and out again with the failure
    again.add("the meeting room on floor 2 note 99", at=T0)  # and the store still takes writes
    again.close()


def test_a_failed_open_leaves_the_folders_other_stores_working(
        tmp_path, clock, embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores of one folder share its Chroma client; a namespace that fails to open (here
    its edge file) must give back its one share only, not the others' too."""
    mem = _open(tmp_path, clock, embedder)
    mem.add_many(_texts(4))

    def broken(self, folder, namespace):
        raise StoreError("injected: cannot open the edge file")

    with monkeypatch.context() as m:
        m.setattr(EdgeFile, "__init__", broken)
        with pytest.raises(StoreError, match="injected"):
            _open(tmp_path, clock, embedder, namespace="second")
    mem.add("the meeting room on floor 2 note 5", at=T0)  # the shared client still open
    assert len(mem) == 5 and len(mem._store.what.get(include=[])["ids"]) == 5
    mem.close()


class _FailingDelete:
    """A what collection whose ``delete`` raises (after the edge file's transaction)."""

    def __init__(self, col: object) -> None:
        self._col = col

    def __getattr__(self, name: str) -> object:
        return getattr(self._col, name)

    def delete(self, **kwargs: object) -> None:
        raise RuntimeError("disk full")


@pytest.mark.parametrize("fails", ["edge file", "rows"])
def test_a_failed_delete_leaves_the_graph_and_mirror_as_a_reopen_reads_them(
        tmp_path, clock, embedder, monkeypatch: pytest.MonkeyPatch, fails: str) -> None:
    """A delete writes the edge file (the memory's adjacency dropped, its neighbours'
    rewritten), then deletes the rows. Whichever step fails, the open store's graph and mirror
    must be what the store holds (a cold reopen's), not a graph that lost the memory's
    edges while its rows and its neighbours' listed edges stayed."""
    mem = _open(tmp_path, clock, embedder)
    mem.add_many(_texts(12))
    victim = max(_adjacency(mem).items(), key=lambda kv: len(kv[1]))[0]
    before = _adjacency(mem)
    assert before[victim]

    def broken(self, pairs):
        raise self._error("write (injected)", sqlite3.OperationalError("disk I/O error"))

    with monkeypatch.context() as m:
        if fails == "edge file":
            m.setattr(EdgeFile, "write", broken)
        else:
            m.setattr(mem._store, "what", _FailingDelete(mem._store.what))
        with pytest.raises(StoreError):
            mem.delete(victim)
    seen, ids = _adjacency(mem), set(mem._backend._mirror.row_of)
    assert mem.get(victim).id == victim  # its rows are still stored
    if fails == "edge file":  # nothing landed: as before
        assert seen == before
    else:  # the edge file's transaction landed: the memory is stored without edges
        assert not seen.get(victim) and _symmetric(seen)
    mem.close()
    again = _reopen_cold(tmp_path, clock, embedder)
    assert _adjacency(again) == seen and set(again._backend._mirror.row_of) == ids
    again.delete(victim)  # and the delete goes through once the store works
    assert victim not in again._backend._mirror.row_of and victim not in _adjacency(again)
    again.close()


def test_an_embedded_row_is_one_metadata_key_with_its_time_inside(tmp_path, clock,
                                                                 embedder) -> None:
    """Schema 6: Chroma writes a row per metadata key (10,000 rows: about 0.3 s per key), and
    only a server's reads by time filter on the time; an embedded row keeps it inside
    ``sj_row``'s perishability. Records, search and a cold reopen read it back; a schema 5
    row (the time as a key of its own) beside still reads."""
    mem = _open(tmp_path, clock, embedder)
    mem.add_many(_texts(6))
    rec = mem.add("the deploy of the billing service finished", at=T0 - 30.5)
    raw = mem._store.what.get(include=["metadatas"])["metadatas"]
    # (a superseded memory's validity, "sj_when", is a key of its own: the notes of the deploy
    # are superseded by "... finished")
    assert raw and all(set(m) - {"sj_when"} == {"sj_row"} for m in raw)
    assert any("sj_when" in m for m in raw)
    # a schema 5 row, beside: the same payload without the time, and the time as a key
    old = dict(mem._store.what.get(ids=[rec.id], include=["metadatas"])["metadatas"][0])
    perish, _ = old["sj_row"].split("\x1f", 1)
    payload = json.loads(perish)
    assert payload.pop("t") == T0 - 30.5
    vec = mem._store.what.get(ids=[rec.id], include=["embeddings"])["embeddings"][0]
    mem._store.what.add(ids=["schema5"], embeddings=[vec],
                        metadatas=[{"sj_row": json.dumps(payload) + "\x1f" + "an older note",
                                    "sj_t": T0 - 7200.0}])
    mem._store.set_state(sj_schema=5)
    mem.close()
    again = _reopen_cold(tmp_path, clock, embedder)
    assert again.get(rec.id) == rec
    assert again.get("schema5").created_at_s == T0 - 7200.0
    assert again.get("m03").created_at_s == T0 - 3600 + 180
    hits = again.search("the deploy of the billing service", k=3)
    assert rec.id in {h.id for h in hits}
    again.add("the meeting room on floor 2 is booked", at=T0 - 10.0)
    assert again._store.state()["sj_schema"] == SCHEMA_VERSION
    again.close()


def test_an_embedded_store_without_a_mirror_links_by_time(tmp_path, clock, embedder) -> None:
    """``SearchConfig(mirror=False)`` links as a server does: candidates by vector and the
    nearest in time. An embedded store's times are not a key Chroma can filter on (schema
    6), so it reads them once and keeps them with its writes. Here the memories nearest by
    vector are days old (no edge), and a new memory's only edges are by time, to the three
    unrelated memories of the last hour: found across a reopen, and again after a delete."""
    from scrubjay import ScrubJayConfig
    from scrubjay.config import GraphConfig, SearchConfig

    cfg = ScrubJayConfig(search=SearchConfig(mirror=False), graph=GraphConfig(max_neighbors=4))

    def open_() -> ScrubJayMemory:
        return ScrubJayMemory(path=tmp_path, namespace="flat", clock=clock, embedder=embedder,
                              config=cfg)

    def edges(mem: ScrubJayMemory, mid: str) -> set[str]:
        return {e[0] for e in json.loads(mem._store.get([mid])[0].meta["sj_edges"])}

    mem = open_()
    mem.add_many([{"text": f"alpha beta old {i} zz{i}", "at": T0 - 3 * 86_400 + 60 * i}
                  for i in range(30)])
    mem.add_many([{"text": f"kitchen window {i} open", "at": T0 - 3000 + 1000 * i,
                   "id": f"n{i}"} for i in range(3)])
    mem.close()
    mem = open_()
    try:
        rec = mem.add("alpha beta gamma delta", at=T0 - 300)
        assert edges(mem, rec.id) == {"n0", "n1", "n2"}
        mem.delete("n2")
        rec2 = mem.add("alpha beta epsilon zeta", at=T0 - 250)
        assert edges(mem, rec2.id) == {"n0", "n1", rec.id}
    finally:
        mem.close()
