"""The vector index's ``sync_threshold``: scrubjay's collections flush Chroma's index every
``SYNC_THRESHOLD`` log records instead of Chroma's 1,000 (each write re-reads the records
logged since the last flush), in both modes; a store made before keeps its memories and gets
the threshold when opened."""

from __future__ import annotations

from scrubjay.store import SYNC_THRESHOLD


def _thresholds(mem) -> list[int]:
    store = mem._store
    return [store.client.get_collection(col.name).configuration_json["hnsw"]["sync_threshold"]
            for col in (store.what, store.where)]


def test_new_collections_flush_the_index_every_sync_threshold_records(memory_factory) -> None:
    mem = memory_factory()
    assert SYNC_THRESHOLD < 1_000  # Chroma's default, which made every write re-read more
    assert _thresholds(mem) == [SYNC_THRESHOLD, SYNC_THRESHOLD]


def test_a_store_made_with_chromas_default_gets_the_threshold_and_keeps_its_memories(
        memory_factory) -> None:
    mem = memory_factory("old")
    ids = [r.id for r in mem.add_many([f"note {i} about the garden shed" for i in range(30)])]
    for col in (mem._store.what, mem._store.where):  # as an earlier version made them
        col.modify(configuration={"hnsw": {"sync_threshold": 1_000}})
    assert _thresholds(mem) == [1_000, 1_000]
    again = memory_factory("old")
    assert _thresholds(again) == [SYNC_THRESHOLD, SYNC_THRESHOLD]
    assert [again.get(i).id for i in ids] == ids
    assert again.search("garden shed", k=5)
    again.add("one more note after the change")
    assert len(again) == 31
