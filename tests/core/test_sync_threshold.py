"""The vector index's ``sync_threshold``: scrubjay's collections flush Chroma's index every
``SYNC_THRESHOLD`` log records, set explicitly, in both modes; a store made with another
threshold (session 11's code used 250) keeps its memories and gets this one when opened."""

from __future__ import annotations

from scrubjay.store import SYNC_THRESHOLD

OTHER = 250 if SYNC_THRESHOLD != 250 else 1_000  # what session 11's code set


def _thresholds(mem) -> list[int]:
    store = mem._store
    return [store.client.get_collection(col.name).configuration_json["hnsw"]["sync_threshold"]
            for col in (store.what, store.where)]


def test_new_collections_flush_the_index_every_sync_threshold_records(memory_factory) -> None:
    mem = memory_factory()
    assert _thresholds(mem) == [SYNC_THRESHOLD, SYNC_THRESHOLD]


def test_a_store_made_with_another_threshold_gets_this_one_and_keeps_its_memories(
        memory_factory) -> None:
    mem = memory_factory("old")
    ids = [r.id for r in mem.add_many([f"note {i} about the garden shed" for i in range(30)])]
    for col in (mem._store.what, mem._store.where):  # as an earlier version made them
        col.modify(configuration={"hnsw": {"sync_threshold": OTHER}})
    assert _thresholds(mem) == [OTHER, OTHER]
    again = memory_factory("old")
    assert _thresholds(again) == [SYNC_THRESHOLD, SYNC_THRESHOLD]
    assert [again.get(i).id for i in ids] == ids
    assert again.search("garden shed", k=5)
    again.add("one more note after the change")
    assert len(again) == 31
