"""scrubjay.explain: why and since when a memory is outdated, and its marker."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from scrubjay import MemoryRecord, ScrubJayMemory
from scrubjay.explain import Staleness, mark, marker, stale_metadata, staleness
from scrubjay.testing import FrozenClock, HashEmbedder

T0 = 1_764_000_000.0  # 2025-11-24 16:00 UTC


def _record(**kw: Any) -> MemoryRecord:
    base = {"id": "m", "text": "parked on level 3", "context": "", "label": "ephemeral",
            "pi": 0.9, "tau_s": 7200.0, "value": 1.0, "created_at_s": T0}
    return MemoryRecord(**{**base, **kw})


def test_decayed_since_is_when_utility_crossed_the_threshold() -> None:
    # U/V = exp(-0.9 age / 7200) < 0.5  <=>  age > 7200 ln 2 / 0.9 = 5545.18 s
    since = T0 + 7200.0 * math.log(2.0) / 0.9
    rec = _record()
    assert staleness(rec, at_s=since - 1, stale_ratio=0.5) is None
    st = staleness(rec, at_s=since + 1, stale_ratio=0.5)
    assert st == Staleness(reason="decayed", since_s=since)
    assert marker(st) == "[outdated since 2025-11-24 17:32 UTC: decayed]"
    assert mark("parked", st) == "[outdated since 2025-11-24 17:32 UTC: decayed] parked"
    assert mark("parked", None) == "parked"
    meta = stale_metadata(st)
    assert meta["stale"] is True and meta["stale_reason"] == "decayed"
    assert meta["stale_since_s"] == since and meta["stale_since"].startswith("2025-11-24T17:32")


def test_agrees_with_the_core_stale_flag() -> None:
    clock = FrozenClock(T0)
    mem = ScrubJayMemory(embedder=HashEmbedder(dim=32), clock=clock)
    rec = mem.add("I am parked on level 3 right now")
    ratio = mem.config.decay.stale_ratio
    for hours in (0.5, 1, 2, 6, 24, 24 * 30, 24 * 400):
        clock.set(T0 + hours * 3600)
        hit = mem.search("where am I parked", k=1)[0]
        computed = staleness(rec, at_s=clock(), stale_ratio=ratio)
        assert (computed is not None) == hit.stale, hours
        if hit.stale:
            assert staleness(hit, at_s=clock(), stale_ratio=ratio, stale=True) == computed
            assert computed is not None and T0 < computed.since_s <= clock()
    mem.close()


def test_a_value_driven_to_zero_is_stale_from_its_update() -> None:
    rec = _record(value=0.0, pi=0.01, tau_s=1e9, updated_at_s=T0 + 60)
    assert staleness(rec, at_s=T0 + 120, stale_ratio=0.5) == Staleness(
        reason="decayed", since_s=T0 + 60)


def test_superseded_and_window_ended_read_by_getattr() -> None:
    rec = _record(pi=0.01, tau_s=1e9)
    sup = dataclasses.replace(rec, superseded_by="new-id", invalidated_at_s=T0 + 3600)
    assert staleness(sup, at_s=T0 + 1800, stale_ratio=0.5) is None  # not replaced yet then
    texts = {"new-id": "I moved the car to level 5 of the north garage, next to the lifts"}
    st = staleness(sup, at_s=T0 + 7200, stale_ratio=0.5, lookup=texts.get)
    assert st is not None and st.reason == "superseded" and st.since_s == T0 + 3600
    assert marker(st) == ("[outdated since 2025-11-24 17:00 UTC: superseded by: I moved the "
                          "car to level 5 of the north garage, next to...]")
    assert stale_metadata(st)["superseded_by"].endswith("...")
    ended = dataclasses.replace(rec, valid_until_s=T0 + 60)
    assert staleness(ended, at_s=T0 + 30, stale_ratio=0.5) is None
    st = staleness(ended, at_s=T0 + 120, stale_ratio=0.5)
    assert st == Staleness(reason="window ended", since_s=T0 + 60)
    assert marker(st).endswith(": window ended]")
