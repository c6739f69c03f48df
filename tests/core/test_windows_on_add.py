"""Validity windows stated in a memory's text, read on every add (``DecayConfig.windows``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrubjay import ScrubJayConfig, ScrubJayMemory
from scrubjay.config import DecayConfig
from scrubjay.errors import ConfigError
from scrubjay.testing import FrozenClock, HashEmbedder

T0 = 1772614800.0  # Wed 4 March 2026, 09:00 UTC
H = 3600.0


def _mem(path: Path | None = None, **config: object) -> ScrubJayMemory:
    cfg = ScrubJayConfig(decay=DecayConfig(**config)) if config else None  # type: ignore[arg-type]
    kwargs = {"config": cfg} if cfg is not None else {}
    return ScrubJayMemory(path=path, embedder=HashEmbedder(dim=32),
                          clock=FrozenClock(T0 + 10 * 86_400), **kwargs)  # type: ignore[arg-type]


def _hit(mem: ScrubJayMemory, rid: str, at: float):  # type: ignore[no-untyped-def]
    return next(h for h in mem.search("maintenance window flight hotel", k=10, at=at)
                if h.id == rid)


def test_a_window_tonight_is_valid_before_it_starts_and_stale_once_it_ended(tmp_path: Path
                                                                            ) -> None:
    mem = _mem(tmp_path / "s")
    rec = mem.add("The server maintenance window is tonight from 10pm to midnight", at=T0)
    assert rec.window == "stated: from 10pm to midnight"
    assert rec.valid_from_s == T0 + 13 * H and rec.valid_until_s == T0 + 15 * H
    before = _hit(mem, rec.id, T0 + 11 * H)  # 20:00: not started yet, not decaying
    assert not before.stale and before.utility == pytest.approx(before.record.value)
    assert not _hit(mem, rec.id, T0 + 14 * H).stale  # 23:00: on
    after = _hit(mem, rec.id, T0 + 15.5 * H)  # 00:30 the next day
    assert after.stale and after.stale_reason == "window ended"
    mem.close()
    again = _mem(tmp_path / "s")  # persisted in Chroma's metadata (and the snapshot)
    assert again.get(rec.id).window == rec.window
    assert again.get(rec.id).valid_until_s == rec.valid_until_s
    again.close()


def test_a_future_event_does_not_decay_before_it_happens() -> None:
    mem = _mem()
    rec = mem.add("My flight to Berlin is tomorrow at 9am", at=T0)
    assert rec.valid_from_s == T0 + 24 * H
    hit = _hit(mem, rec.id, T0 + 23 * H)
    assert not hit.stale and hit.utility == pytest.approx(hit.record.value)
    mem.close()


def test_a_stay_of_two_nights_ends_at_check_out() -> None:
    mem = _mem()
    rec = mem.add("I booked the Hotel Adlon for two nights", at=T0)
    assert rec.valid_until_s is not None
    assert (rec.valid_until_s - T0) / H == pytest.approx(50.0)  # Friday 11:00
    assert _hit(mem, rec.id, T0 + 51 * H).stale_reason == "window ended"
    mem.close()


def test_an_unusable_expression_falls_back_and_says_so() -> None:
    mem = _mem()
    rec = mem.add("The invoice is due on the 45th", at=T0)
    assert rec.window is not None and rec.window.startswith("fallback:")
    assert rec.valid_from_s is None and rec.valid_until_s is None
    plain = mem.add("I like green tea", at=T0)
    assert plain.window is None and plain.valid_until_s is None
    mem.close()


def test_windows_off_and_the_time_zone() -> None:
    off = _mem(windows=False)
    assert off.add("The maintenance window is tonight from 10pm to midnight", at=T0).window \
        is None
    off.close()
    utc, berlin = _mem(), _mem(time_zone="Europe/Berlin")
    text = "The maintenance window is tonight from 10pm to midnight"
    assert utc.add(text, at=T0).valid_until_s - berlin.add(text, at=T0).valid_until_s == H
    utc.close()
    berlin.close()
    with pytest.raises(ConfigError, match="time_zone"):
        DecayConfig(time_zone="Mars/Olympus_Mons")
    assert ScrubJayConfig.paper().decay.windows is False
