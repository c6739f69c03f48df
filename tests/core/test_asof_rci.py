"""As-of searches take back RCI's later updates: each update is a time-stamped delta."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrubjay import ScrubJayConfig, ScrubJayMemory, SearchConfig, SupersessionConfig
from scrubjay.codec import RCI_DELTAS_KEY, fold_packed, pack_rci
from scrubjay.snapshot import snapshot_path
from scrubjay.testing import HashEmbedder
from scrubjay.timeline import RCI_DELTAS_MAX, add_delta, state_as_of
from scrubjay.types import MemoryRecord

T0 = 1_767_225_600.0
HOUR = 3600.0
# supersession on add off: only RCI changes the old memory, which is what is tested here
RCI_ONLY = ScrubJayConfig(supersession=SupersessionConfig(enabled=False))
OLD = "The team standup is at 9:00 in room A"
NEW = "The team standup was moved to 10:00 in room B"
QUERY = "when is the team standup?"


def _story(mem: ScrubJayMemory) -> str:
    old = mem.add(OLD, at=T0).id
    report = mem.integrate(NEW, at=T0 + HOUR)
    assert [mid for mid, _ in report.affected] == [old]
    return old


def _value_at(mem: ScrubJayMemory, mid: str, t: float) -> float:
    hits = mem.search(QUERY, k=5, at=t)
    return next(h.record.value for h in hits if h.id == mid)


def test_a_search_before_the_update_sees_the_value_of_then(tmp_path: Path) -> None:
    with ScrubJayMemory(path=tmp_path / "s", config=RCI_ONLY) as mem:
        old = _story(mem)
        now = mem.get(old)
        assert now.value < 1.0 and len(now.rci_deltas) == 1
        assert now.rci_deltas[0][0] == T0 + HOUR
        before = mem.search(QUERY, k=3, at=T0 + 60)
        assert before[0].id == old
        assert before[0].record.value == pytest.approx(1.0)
        assert before[0].record.updated_at_s is None
        assert before[0].record.pi == pytest.approx(mem.get(old).pi - now.rci_deltas[0][2])
        assert _value_at(mem, old, T0 + 2 * HOUR) == pytest.approx(now.value)
        # today's state is untouched by the as-of read
        assert mem.get(old).value == now.value


@pytest.mark.parametrize("snapshot", [True, False])
def test_the_deltas_persist_across_a_reopen(tmp_path: Path, snapshot: bool) -> None:
    path = tmp_path / "s"
    with ScrubJayMemory(path=path, config=RCI_ONLY) as mem:
        old = _story(mem)
        deltas = mem.get(old).rci_deltas
    if not snapshot:  # rebuilt from Chroma's rows
        snapshot_path(path, "default").unlink()
    with ScrubJayMemory(path=path, config=RCI_ONLY) as mem:
        assert mem.get(old).rci_deltas == deltas
        assert _value_at(mem, old, T0 + 60) == pytest.approx(1.0)
        assert _value_at(mem, old, T0 + 2 * HOUR) == pytest.approx(mem.get(old).value)


@pytest.mark.parametrize("mirror", [False, True])
def test_a_chroma_server_answers_as_of_too(chroma_server: tuple[str, int], mirror: bool) -> None:
    import chromadb

    client = chromadb.HttpClient(host=chroma_server[0], port=chroma_server[1])
    cfg = ScrubJayConfig(supersession=SupersessionConfig(enabled=False),
                         search=SearchConfig(mirror=mirror))
    with ScrubJayMemory(client=client, namespace=f"asof-rci-{mirror}", config=cfg) as mem:
        mem.forget_namespace()
        old = _story(mem)
        assert _value_at(mem, old, T0 + 60) == pytest.approx(1.0)
        assert _value_at(mem, old, T0 + 2 * HOUR) == pytest.approx(mem.get(old).value)
        mem.forget_namespace()


def test_a_buffered_search_before_an_update_takes_it_back(tmp_path: Path) -> None:
    with ScrubJayMemory(path=tmp_path / "s", config=RCI_ONLY) as mem:
        other = mem.add("The team standup notes are in the wiki", at=T0 - 60).id
        old = mem.add(OLD, at=T0).id
        mem.integrate(NEW, at=T0 + HOUR, store=False)
        assert set(mem.prepare(QUERY, k=2, at=T0 + 2 * HOUR)) == {old, other}
        later = mem.search(QUERY, k=2, at=T0 + 2 * HOUR)
        assert all(h.from_buffer for h in later)
        earlier = mem.search(QUERY, k=2, at=T0 + 60)
        assert next(h for h in earlier if h.id == old).record.value == pytest.approx(1.0)
        assert next(h for h in later if h.id == old).record.value == pytest.approx(
            mem.get(old).value)


def test_between_two_updates_only_the_first_applies(tmp_path: Path) -> None:
    with ScrubJayMemory(path=tmp_path / "s", config=RCI_ONLY,
                        embedder=HashEmbedder(dim=64)) as mem:
        old = mem.add("standup room A", at=T0).id
        mem.integrate("standup room A", at=T0 + HOUR, store=False)
        after_one = mem.get(old)
        mem.integrate("standup room A", at=T0 + 3 * HOUR, store=False)
        rec = mem.get(old)
        assert len(rec.rci_deltas) == 2
        hits = mem.search("standup room A", k=1, at=T0 + 2 * HOUR)
        assert hits[0].record.value == pytest.approx(after_one.value)
        assert hits[0].record.updated_at_s == T0 + HOUR


def _record(value: float, pi: float, tau: float, deltas: Any = ()) -> MemoryRecord:
    return MemoryRecord(id="a", text="t", context="", label="factual", pi=pi, tau_s=tau,
                        value=value, created_at_s=0.0, rci_deltas=deltas,
                        updated_at_s=deltas[-1][0] if deltas else None)


states = st.tuples(st.floats(0.0, 2.0), st.floats(0.01, 1.0), st.floats(1.0, 1e6))


@settings(max_examples=60, deadline=None)
@given(st.lists(states, min_size=2, max_size=RCI_DELTAS_MAX))
def test_state_as_of_is_the_state_before_each_later_update(chain: list[Any]) -> None:
    """A slow reference: the states one after the other, each update at time i."""
    deltas: tuple[Any, ...] = ()
    for i in range(1, len(chain)):
        deltas = add_delta(deltas, float(i), chain[i - 1], chain[i])
    rec = _record(*chain[-1], deltas)
    for i in range(len(chain)):
        got = state_as_of(rec, i + 0.5)
        if i == len(chain) - 1:
            assert got is None
        else:
            assert got == pytest.approx(chain[i], rel=1e-9, abs=1e-9)


def test_the_deltas_are_bounded_and_the_oldest_state_kept() -> None:
    deltas: tuple[Any, ...] = ()
    chain = [(1.0 - 0.01 * i, 0.5, 60.0) for i in range(RCI_DELTAS_MAX + 10)]
    for i in range(1, len(chain)):
        deltas = add_delta(deltas, float(i), chain[i - 1], chain[i])
    assert len(deltas) == RCI_DELTAS_MAX
    rec = _record(*chain[-1], deltas)
    assert state_as_of(rec, 0.5) == pytest.approx(chain[0])
    assert state_as_of(rec, len(chain) - 1.5) == pytest.approx(chain[-2])


def test_the_payload_round_trips_and_bad_deltas_are_ignored(caplog: Any) -> None:
    d = ((10.0, -0.25, 0.1, 0.5), (20.0, 0.1, -0.05, 1.5))
    meta: dict[str, Any] = {"sj_rci": pack_rci(0.5, 0.2, 30.0, 20.0, 0.0, None, "e", d)}
    fold_packed(meta)
    assert meta[RCI_DELTAS_KEY] == d
    for bad in ('[[1,2,3]]', '[[1,2,3,0]]', '"x"', '[[1,2,3,NaN]]'):
        meta = {"sj_rci": '{"value":0.5,"pi":0.2,"tau":30.0,"at":1.0,"drift":0.0,"d":'
                          + bad + "}"}
        fold_packed(meta)
        assert meta.get(RCI_DELTAS_KEY, ()) == ()
        assert meta["sj_value"] == 0.5  # today's state is still read


def test_a_store_written_before_deltas_answers_with_todays_state() -> None:
    rec = _record(0.5, 0.2, 30.0)
    rec = MemoryRecord(**{**{f: getattr(rec, f) for f in (
        "id", "text", "context", "label", "pi", "tau_s", "value", "created_at_s")},
        "updated_at_s": 100.0})
    assert state_as_of(rec, 50.0) is None
    assert np.isfinite(rec.value)
