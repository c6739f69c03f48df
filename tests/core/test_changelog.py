"""Server mode's change log (scrubjay.changelog): a memory with a mirror on a `chroma run`
server sees the writes of the other processes sharing the namespace, and applies them exactly
as a fresh open would read them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from scrubjay import ScrubJayConfig, ScrubJayMemory, SearchConfig, StoreError
from scrubjay.changelog import (
    LOG_KEEP_S,
    LOG_OPEN_MAX_S,
    LOG_OPEN_REREAD_S,
    LOG_SKEW_S,
    ChangeLog,
)
from scrubjay.testing import FrozenClock, HashEmbedder

T0 = 1_764_000_000.0
MIRROR = ScrubJayConfig(search=SearchConfig(mirror=True))
MIRROR_NO_LEXICAL = ScrubJayConfig(search=SearchConfig(mirror=True, lexical=False))


@pytest.fixture
def open_memory(chroma_server, clock: FrozenClock
                ) -> Iterator[Callable[..., ScrubJayMemory]]:
    """Memories on one fresh namespace of the session's server (each its own store object, as
    separate processes have); ``mirror=True`` keeps a mirror."""
    import chromadb

    client = chromadb.HttpClient(host=chroma_server[0], port=chroma_server[1])
    namespace = f"log-{uuid.uuid4().hex[:10]}"
    made: list[ScrubJayMemory] = []

    def make(*, mirror: bool = False, lexical: bool = True) -> ScrubJayMemory:
        config = ScrubJayConfig()
        if mirror:
            config = MIRROR if lexical else MIRROR_NO_LEXICAL
        mem = ScrubJayMemory(client=client, namespace=namespace, clock=clock,
                             embedder=HashEmbedder(dim=64), config=config)
        made.append(mem)
        return mem

    yield make
    if made:
        made[0].forget_namespace()
    for mem in made:
        mem.close()


def _edges(mem: ScrubJayMemory) -> dict[tuple[str, str], float]:
    return {(min(a, b), max(a, b)): round(float(d["weight"]), 7)
            for a, b, d in mem.graph.g.edges(data=True)}


def _records(mem: ScrubJayMemory) -> dict[str, tuple[str, float, float, float]]:
    return {r.id: (r.text, r.value, r.pi, r.tau_s) for r in mem}


def _items(clock: FrozenClock, tag: str, n: int) -> list[dict[str, Any]]:
    return [{"text": f"{tag} note {i} about topic {i % 4} and the project",
             "context": f"room {i % 3}", "at": clock() - (n - i) * 600.0, "id": f"{tag}{i}"}
            for i in range(n)]


def test_a_mirror_applies_another_writers_adds_updates_and_deletes(
        open_memory: Callable[..., ScrubJayMemory], clock: FrozenClock) -> None:
    mirrored = open_memory(mirror=True)
    plain = open_memory(mirror=True, lexical=False)  # its ranking, without BM25's statistics
    writer = open_memory()
    assert len(mirrored) == 0

    writer.add_many(_items(clock, "a", 30))
    assert len(mirrored) == 30  # without the log the mirror stays empty
    fresh = open_memory(mirror=True)
    assert _records(mirrored) == _records(fresh)
    assert _edges(mirrored) == _edges(fresh) and _edges(fresh)

    # a second batch links to the first: older rows' adjacency changes too
    writer.add_many(_items(clock, "b", 20))
    report = writer.integrate("topic 1 of the project moved to a new room", context="room 1")
    assert report.affected_ids
    writer.delete("a3")
    assert "a3" not in mirrored and "a3" not in mirrored.graph.g
    fresh = open_memory(mirror=True)
    assert _records(mirrored) == _records(fresh)
    assert _edges(mirrored) == _edges(fresh)
    changed = report.affected_ids[0]
    assert mirrored.get(changed).value == writer.get(changed).value
    def ranked(mem: ScrubJayMemory) -> list[tuple[float, str]]:  # every memory: ties at k
        return sorted((-round(h.score, 9), h.id) for h in mem.search("topic 2 project", k=100))
    assert ranked(plain) == ranked(open_memory(mirror=True, lexical=False))
    # the lexical channel holds the same memories; its BM25 statistics may still count a3
    # until tantivy merges its segment (docs/hybrid.md), so its scores are not compared
    lex, fresh_lex = mirrored._backend._lexical.index, fresh._backend._lexical.index
    assert lex is not None and fresh_lex is not None and lex.checksum == fresh_lex.checksum
    assert ({h.id for h in mirrored.search("topic 2 project", k=100)}
            == {h.id for h in fresh.search("topic 2 project", k=100)})


def test_a_search_finds_what_another_writer_just_added(
        open_memory: Callable[..., ScrubJayMemory], clock: FrozenClock) -> None:
    """The search reads the log beside its own work and runs again when it brought changes."""
    mirrored = open_memory(mirror=True)
    writer = open_memory()
    writer.add_many(_items(clock, "a", 10))
    assert mirrored.search("note 3 about topic 3", k=1)[0].id == "a3"
    writer.add("zebra crossing near the quarry office", at=clock() - 5.0)
    hits = mirrored.search("zebra crossing near the quarry office", k=1)
    assert hits[0].text == "zebra crossing near the quarry office"


def test_a_mirror_keeps_its_own_writes_and_learns_the_others(
        open_memory: Callable[..., ScrubJayMemory], clock: FrozenClock) -> None:
    first, second = open_memory(mirror=True), open_memory(mirror=True)
    first.add_many(_items(clock, "a", 12))
    second.add_many(_items(clock, "b", 12))  # links to first's memories after a sync
    first.add_many(_items(clock, "c", 12))
    for mem in (first, second):
        fresh = open_memory(mirror=True)
        assert _records(mem) == _records(fresh)
        assert _edges(mem) == _edges(fresh)
    assert any(a.startswith("b") and b.startswith("a") or a.startswith("a") and b.startswith("b")
               for a, b in _edges(second))


def test_a_writer_that_cannot_log_writes_nothing(
        open_memory: Callable[..., ScrubJayMemory], clock: FrozenClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    writer = open_memory()
    writer.add_many(_items(clock, "a", 5))
    mirrored = open_memory(mirror=True)

    def refuse(**_: Any) -> None:
        raise RuntimeError("log collection unavailable")

    monkeypatch.setattr(writer._store.log.col, "add", refuse)
    with pytest.raises(StoreError, match="change log"):
        writer.add_many(_items(clock, "b", 5))
    monkeypatch.undo()
    assert len(writer) == 5 and len(mirrored) == 5


@pytest.mark.parametrize("part", ["log", "rows"])
def test_a_log_or_rows_that_cannot_be_read_raise_and_come_again_next_time(
        open_memory: Callable[..., ScrubJayMemory], clock: FrozenClock,
        monkeypatch: pytest.MonkeyPatch, part: str) -> None:
    mirrored = open_memory(mirror=True)
    writer = open_memory()
    writer.add_many(_items(clock, "a", 8))

    def broken(*_: Any, **__: Any) -> Any:
        raise (RuntimeError if part == "log" else StoreError)("server gone")

    if part == "log":  # a search reads it in a worker, beside its own work
        monkeypatch.setattr(mirrored._store.log.col, "get", broken)
        with pytest.raises(StoreError, match="change log"):
            mirrored.search("topic 1")
    else:
        monkeypatch.setattr(mirrored._store, "get", broken)
        with pytest.raises(StoreError):
            len(mirrored)
    monkeypatch.undo()
    assert len(mirrored) == 8


def test_a_mirror_that_fell_behind_the_log_reloads_whole(
        open_memory: Callable[..., ScrubJayMemory], clock: FrozenClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    mirrored = open_memory(mirror=True)
    writer = open_memory()
    writer.add_many(_items(clock, "a", 6))
    assert mirrored._backend._log_cursor is not None
    mirrored._backend._log_cursor.synced_at -= LOG_KEEP_S
    loads: list[int] = []
    real = mirrored._backend._load_mirror
    monkeypatch.setattr(mirrored._backend, "_load_mirror", lambda: (loads.append(1), real())[1])
    assert len(mirrored) == 6
    assert loads == [1]
    assert _edges(mirrored) == _edges(open_memory(mirror=True))


class _Log:
    """A stand-in for the log's Chroma collection: add / update / get / delete by metadata."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def add(self, ids: list[str], embeddings: Any, metadatas: list[dict[str, Any]]) -> None:
        for i, m in zip(ids, metadatas, strict=True):
            self.rows[i] = dict(m)

    def update(self, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
        for i, m in zip(ids, metadatas, strict=True):
            self.rows[i].update(m)

    def get(self, ids: list[str] | None = None, where: Any = None,
            include: Any = None) -> dict[str, Any]:
        if ids is None:
            lo = where["t"]["$gte"]
            ids = [i for i, m in self.rows.items() if m["t"] >= lo]
        ids = [i for i in ids if i in self.rows]
        return {"ids": ids, "metadatas": [dict(self.rows[i]) for i in ids]}

    def delete(self, where: Any) -> None:
        hi = where["t"]["$lt"]
        for i in [i for i, m in self.rows.items() if m["t"] < hi]:
            del self.rows[i]


def test_an_open_entry_is_read_again_until_it_is_done() -> None:
    col, clock = _Log(), FrozenClock(T0)
    writer, reader = ChangeLog(col, clock), ChangeLog(col, clock)
    cursor = reader.cursor()
    with writer.logged(["x", "y"]):
        assert reader.changes(cursor) == {"x", "y"}  # the write has not landed: again later
        assert reader.changes(cursor) == set()  # ... but not at once: a dead writer's entry
        clock.advance(LOG_OPEN_REREAD_S)           # would be read at every sync for an hour
        assert reader.changes(cursor) == {"x", "y"}
    assert reader.changes(cursor) == {"x", "y"}  # done: read a last time
    assert reader.changes(cursor) == set()
    assert writer.changes(writer.cursor()) == set()  # its own entries: applied as written


def test_a_batch_writes_one_entry_that_lists_every_write_inside_it() -> None:
    col, clock = _Log(), FrozenClock(T0)
    writer, reader = ChangeLog(col, clock), ChangeLog(col, clock)
    cursor = reader.cursor()
    with writer.batch(["new1", "new2"]):
        with writer.logged(["new1", "new2"]):  # the rows
            pass
        assert reader.changes(cursor) == {"new1", "new2"}  # open: what it listed first
        with writer.logged(["new1", "old7"]):  # their edges and a neighbour's
            pass
        assert len(col.rows) == 1
    assert len(col.rows) == 1
    assert reader.changes(cursor) == {"new1", "new2", "old7"}
    assert reader.changes(cursor) == set()


def test_an_entry_a_writer_left_open_expires() -> None:
    col, clock = _Log(), FrozenClock(T0)
    writer, reader = ChangeLog(col, clock), ChangeLog(col, clock)
    cursor = reader.cursor()
    entries = writer.logged(["x"])
    entries.__enter__()  # a writer killed mid-write never leaves the block
    assert reader.changes(cursor) == {"x"}
    clock.advance(LOG_OPEN_MAX_S + 1)
    assert reader.changes(cursor) == {"x"}
    assert reader.changes(cursor) == set()


def test_an_entry_stamped_before_the_last_sync_by_a_slower_clock_is_applied_once() -> None:
    col, clock = _Log(), FrozenClock(T0)
    behind = FrozenClock(T0 - LOG_SKEW_S / 2)  # another machine's clock, five minutes slow
    writer, reader = ChangeLog(col, behind), ChangeLog(col, clock)
    cursor = reader.cursor()
    assert reader.changes(cursor) == set()
    with writer.logged(["late"]):
        pass
    assert reader.changes(cursor) == {"late"}
    assert reader.changes(cursor) == set()
    clock.advance(3 * LOG_SKEW_S)  # the entry leaves the window and the cursor's memory
    assert reader.changes(cursor) == set() and not cursor.seen


def test_a_failed_write_is_read_back_by_its_own_writer() -> None:
    col, clock = _Log(), FrozenClock(T0)
    writer = ChangeLog(col, clock)
    cursor = writer.cursor()
    with pytest.raises(RuntimeError), writer.logged(["half"]):
        raise RuntimeError("the write failed part-way")
    assert writer.changes(cursor) == {"half"}


def test_expired_entries_are_pruned() -> None:
    col, clock = _Log(), FrozenClock(T0)
    log = ChangeLog(col, clock)
    with log.logged(["old"]):
        pass
    clock.advance(LOG_KEEP_S + 1)
    with log.logged(["new"]):
        pass
    log.prune()
    assert [m["ids"] for m in col.rows.values()] == ['["new"]']
    cursor = log.cursor()
    cursor.synced_at -= LOG_KEEP_S
    assert log.changes(cursor) is None  # older than the log reaches: reload whole


def test_forget_namespace_drops_the_log(
        open_memory: Callable[..., ScrubJayMemory], clock: FrozenClock, chroma_server) -> None:
    import chromadb

    mem = open_memory(mirror=True)
    mem.add_many(_items(clock, "a", 3))
    name = f"sj_{mem.namespace}_log"
    client = chromadb.HttpClient(host=chroma_server[0], port=chroma_server[1])
    assert client.get_collection(name).count() > 0
    mem.forget_namespace()
    assert client.get_collection(name).count() == 0  # dropped, then made again, empty
    mem.add_many(_items(clock, "b", 3))  # the recreated namespace logs again
    assert client.get_collection(name).count() > 0
    assert {r.id for r in mem} == {"b0", "b1", "b2"}
    assert len(open_memory(mirror=True)) == 3


def test_a_logged_namespace_is_refused_by_a_scrubjay_that_does_not_log(
        open_memory: Callable[..., ScrubJayMemory], clock: FrozenClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema 7: a scrubjay from before the change log (schema 6) cannot open the namespace
    once this one wrote there, so its unlogged writes cannot escape the mirrors."""
    from scrubjay import store

    writer = open_memory()
    writer.add_many(_items(clock, "a", 2))
    assert writer._store.state()["sj_schema"] == 7
    monkeypatch.setattr(store, "SCHEMA_VERSION", 6)
    with pytest.raises(StoreError, match="newer scrubjay-mem"):
        open_memory()
