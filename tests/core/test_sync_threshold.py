"""The vector index's ``sync_threshold``: scrubjay's collections flush Chroma's index every
``SYNC_THRESHOLD`` log records, set explicitly, in both modes; a store made with another
threshold (an earlier version used 250) keeps its memories and gets this one when opened."""

from __future__ import annotations

from scrubjay.store import SYNC_THRESHOLD

OTHER = 250 if SYNC_THRESHOLD != 250 else 1_000  # what an earlier version set


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


class _LockedOnce:
    """A collection of another threshold whose first ``modify`` finds Chroma's SQLite locked
    (as a store opened while Chroma still works on the folder, under load, did in CI)."""

    name = "sj_locked_what"

    def __init__(self) -> None:
        self.configuration_json = {"hnsw": {"sync_threshold": OTHER}}
        self.tries = 0

    def modify(self, configuration: dict) -> None:
        self.tries += 1
        if self.tries == 1:
            raise RuntimeError("Database error: error returned from database: (code: 5) "
                               "database is locked")
        self.configuration_json = configuration


class _Refusing(_LockedOnce):
    """A collection whose Chroma refuses the change outright."""

    def modify(self, configuration: dict) -> None:
        self.tries += 1
        raise ValueError("refused")


def test_a_threshold_change_that_finds_the_database_locked_is_tried_again(monkeypatch) -> None:
    import scrubjay.store as store_module

    monkeypatch.setattr(store_module, "_LOCKED_RETRY_S", (0.0, 0.0))
    col = _LockedOnce()
    store_module._set_sync_threshold(col)
    assert col.tries == 2
    assert col.configuration_json["hnsw"]["sync_threshold"] == SYNC_THRESHOLD
    refusing = _Refusing()  # any other error: given up at once, the open goes on
    store_module._set_sync_threshold(refusing)
    assert refusing.tries == 1
    assert refusing.configuration_json["hnsw"]["sync_threshold"] == OTHER
