"""Validity windows stated in the text: the issue's examples with hand-computed times, bad input,
time zones, the stale rule and the decay age, and the labelled set's accuracy."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from scrubjay import InvalidInputError, ScrubJayError, TimeWindowError
from scrubjay.bench import windows_eval
from scrubjay.windows import (
    MAX_SCAN_CHARS,
    Window,
    decay_age_s,
    resolve_window,
    window_stale_reason,
    window_state,
)

H = 3600.0
D = 86400.0
# Wednesday 4 March 2026, 09:00 UTC: the recording time of most examples.
NINE = datetime(2026, 3, 4, 9, 0, tzinfo=UTC).timestamp()


def w(text: str, rec: float = NINE, tz: str = "UTC") -> Window:
    return resolve_window(text, rec, tz=tz)


# --- the examples ---------------------------------------------------------------------


def test_maintenance_tonight_from_10pm_to_midnight() -> None:
    win = w("The server maintenance window is tonight from 10pm to midnight")
    # said at 09:00: 22:00 is 13 h later, midnight 15 h later
    assert (win.valid_from_s, win.valid_until_s) == (NINE + 13 * H, NINE + 15 * H)
    assert win.source == "stated" and "10pm to midnight" in win.expression
    # the bug: stale at 20:00, before it starts. Now pending, not stale:
    assert window_state(win, NINE + 11 * H) == "pending"
    assert window_stale_reason(win, NINE + 11 * H) is None
    assert window_state(win, NINE + 14 * H) == "active"
    assert window_state(win, NINE + 15 * H) == "ended"
    assert window_stale_reason(win, NINE + 15 * H + 60) == "window ended at 2026-03-05T00:00+00:00"
    assert decay_age_s(win, NINE + 11 * H) == 0.0
    assert decay_age_s(win, NINE + 14 * H) == 1 * H  # counted from 22:00


def test_flight_tomorrow_at_9am_does_not_decay_before_it() -> None:
    win = w("My flight to Berlin is tomorrow at 9am")
    assert win.event_at_s == NINE + 24 * H
    assert win.valid_from_s == NINE and win.valid_until_s is None  # no end stated
    assert window_state(win, NINE + 1 * H) == "open"
    assert decay_age_s(win, NINE + 23 * H) == 0.0
    assert decay_age_s(win, NINE + 26 * H) == 2 * H


def test_hotel_for_two_nights() -> None:
    win = w("I booked the Hotel Adlon for two nights")
    # check-in 15:00 today (+6 h), check-out 11:00 two days later (+2 d 2 h)
    assert (win.valid_from_s, win.valid_until_s) == (NINE + 6 * H, NINE + 2 * D + 2 * H)
    stated_day = w("I booked a room for one night on the 12th")
    # the 12th is 8 days after the 4th: 8 d + 6 h to 9 d + 2 h
    assert (stated_day.valid_from_s, stated_day.valid_until_s) == (NINE + 8 * D + 6 * H,
                                                                  NINE + 9 * D + 2 * H)


@pytest.mark.parametrize(("text", "start", "end"), [
    # Friday ends at Saturday 00:00: 2 days 15 hours after Wednesday 09:00
    ("I'm in Berlin until Friday", NINE, NINE + 2 * D + 15 * H),
    # next week: Monday 9 March 00:00 (4 d 15 h) to Monday 16 March 00:00
    ("I'm on holiday next week", NINE + 4 * D + 15 * H, NINE + 11 * D + 15 * H),
    # this morning: 06:00 to 12:00
    ("I'm in the lab this morning", NINE - 3 * H, NINE + 3 * H),
    # today: 00:00 to 24:00
    ("My password for today is tulip42", NINE - 9 * H, NINE + 15 * H),
    # this weekend: Saturday 7 March 00:00 (2 d 15 h) to Monday 9 March 00:00
    ("We're going camping this weekend", NINE + 2 * D + 15 * H, NINE + 4 * D + 15 * H),
    ("I'm parked here for the next 3 hours", NINE, NINE + 3 * H),
    # the 19th: 15 days later, 00:00 to 24:00
    ("The dentist appointment is on the 19th", NINE + 15 * D - 9 * H, NINE + 16 * D - 9 * H),
    # from 3 to 5 pm: the meridiem is shared, 15:00 to 17:00
    ("The meeting is from 3 to 5 pm", NINE + 6 * H, NINE + 8 * H),
    ("Between 11 and 1pm I'm in a workshop", NINE + 2 * H, NINE + 4 * H),  # 11 am, not pm
    ("The night shift is from 10pm to 6am", NINE + 13 * H, NINE + 21 * H),  # ends the next day
])
def test_stated_windows(text: str, start: float, end: float) -> None:
    win = w(text)
    assert win.source == "stated", win
    assert (win.valid_from_s, win.valid_until_s) == (start, end)


def test_a_window_already_over_is_a_past_event() -> None:
    said_at_3pm = NINE + 6 * H
    win = w("This morning I moved to a new desk", said_at_3pm)
    # 06:00-12:00 ended before it was told: the event was at 06:00, no end, learned decay
    assert win.event_at_s == NINE - 3 * H and win.valid_until_s is None
    assert window_stale_reason(win, said_at_3pm + 30 * D) is None
    assert w("Yesterday I started a new job").event_at_s == NINE - 33 * H


def test_statements_without_a_window() -> None:
    for text in ("I'm vegetarian", "I parked on level 2, spot B17",
                 "I'm reading a book at the moment", "I live at 42 Baker Street", "I go to the gym every Monday at 7am",
                 "I've lived here for three months", "I'm a night owl"):
        win = w(text)
        assert win == Window(valid_from_s=NINE), text
        assert window_state(win, NINE + D) == "open" and window_stale_reason(win, NINE + D) is None


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "why"), [
    ("On the 45th we meet", "no such day"),
    ("Meet at 13pm", "no such time"),
    ("Let's meet at 25:00", "no such time"),
    ("The meeting is on February 30", "cannot resolve the day"),
    ("I'll be back soon", "vague"),
    ("I'm staying for a few days", "vague"),
])
def test_unparseable_falls_back_with_the_reason(text: str, why: str) -> None:
    win = w(text)
    assert win.source.startswith("fallback: ") and why in win.source, win.source
    assert (win.valid_from_s, win.valid_until_s, win.event_at_s) == (NINE, None, None)


@pytest.mark.parametrize(("text", "why"), [
    ("Dinner tonight at 9am", "outside the part of the day"),
    ("This morning at 8pm I have a call", "outside the part of the day"),
    ("I'll see you yesterday tomorrow", "several different days"),
    ("The meeting is at 10am, no wait, at 3pm", "several different times"),
    ("The trip is from March 14 to March 10", "ends before it starts"),
    ("The sale runs until yesterday", "before the window starts"),
])
def test_contradictory_falls_back(text: str, why: str) -> None:
    win = w(text)
    assert win.source.startswith("fallback: ") and why in win.source, win.source
    assert win.valid_until_s is None and window_stale_reason(win, NINE + 365 * D) is None


def test_valid_until_before_valid_from_is_refused() -> None:
    with pytest.raises(TimeWindowError, match="'valid_until_s' parameter of Window") as info:
        Window(valid_from_s=NINE, valid_until_s=NINE - 1)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ScrubJayError)
    with pytest.raises(TimeWindowError, match="finite"):
        Window(valid_from_s=float("nan"))
    with pytest.raises(InvalidInputError, match="'source' parameter"):
        Window(valid_from_s=NINE, source="guessed")
    assert Window(valid_from_s=NINE, valid_until_s=NINE).valid_until_s == NINE  # empty is fine


def test_empty_huge_emoji_and_non_english_text() -> None:
    assert w("") == Window(valid_from_s=NINE)
    assert w("   \n\t") == Window(valid_from_s=NINE)
    filler = "lorem ipsum " * 20_000
    assert w("Parked until 6pm. " + filler).valid_until_s == NINE + 9 * H
    # an expression past the scanned prefix is not read
    assert w("x" * MAX_SCAN_CHARS + " until 6pm").source == "none"
    assert w("🚗 parked at P3 until 🕔 5pm ✅").valid_until_s == NINE + 8 * H
    assert w("MEETING TOMORROW AT 10AM!!!").event_at_s == NINE + 25 * H
    for text in ("Mein Flug ist morgen um 9 Uhr", "Le vol est demain à 9h", "明天早上九点的航班"):
        assert w(text).source == "none", text


def test_bad_arguments_raise_the_package_error() -> None:
    with pytest.raises(InvalidInputError, match="'text' parameter"):
        resolve_window(None, NINE)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="'recorded_at_s' parameter"):
        resolve_window("tonight", float("inf"))
    with pytest.raises(InvalidInputError, match="'tz' parameter"):
        resolve_window("tonight", NINE, tz="Mars/Olympus")
    with pytest.raises(InvalidInputError, match="'parser' parameter"):
        resolve_window("tonight", NINE, parser="regex")


# --- time zones and purity ---------------------------------------------------------------------


def test_time_zone_is_where_9am_is_meant() -> None:
    utc = w("My flight is tomorrow at 9am").event_at_s
    tokyo = w("My flight is tomorrow at 9am", tz="Asia/Tokyo").event_at_s
    assert utc is not None and tokyo is not None
    # 09:00 UTC is 18:00 in Tokyo: "tomorrow 9am" there is 5 March 09:00 JST = 00:00 UTC
    assert tokyo == NINE + 15 * H and utc - tokyo == 9 * H


def test_daylight_saving_change() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    rec = datetime(2026, 3, 28, 20, 0, tzinfo=berlin).timestamp()  # CET, 19:00 UTC
    win = resolve_window("My flight to Madrid is tomorrow at 9am", rec, tz="Europe/Berlin")
    # clocks go forward at 02:00 on the 29th: 09:00 CEST is 07:00 UTC, 12 h after 19:00 UTC
    assert win.event_at_s == rec + 12 * H
    spa = resolve_window("I'm at the spa for the next 12 hours", rec, tz="Europe/Berlin")
    assert spa.valid_until_s == rec + 12 * H  # elapsed hours, not wall-clock hours
    assert datetime.fromtimestamp(spa.valid_until_s, berlin).hour == 9


def test_resolution_is_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_clock() -> float:
        raise AssertionError("resolve_window read the clock")

    monkeypatch.setattr(time, "time", no_clock)
    a = w("The report is due by Friday 5pm")
    b = w("The report is due by Friday 5pm")
    assert a == b and a.valid_until_s == NINE + 2 * D + 8 * H
    # another recording time, another window: only recorded_at anchors it
    assert w("The report is due by Friday 5pm", NINE + D).valid_until_s == a.valid_until_s
    # said on Saturday, "Friday" is the next one: 13 March 17:00
    assert w("The report is due by Friday 5pm", NINE + 3 * D).valid_until_s == NINE + 9 * D + 8 * H


def test_state_and_decay_age_helpers() -> None:
    win = Window(valid_from_s=100.0, valid_until_s=200.0)
    assert [window_state(win, t) for t in (99.0, 100.0, 199.0, 200.0)] == \
        ["pending", "active", "active", "ended"]
    assert [decay_age_s(win, t) for t in (50.0, 150.0, 250.0)] == [0.0, 50.0, 150.0]
    event = Window(valid_from_s=100.0, event_at_s=500.0)
    assert decay_age_s(event, 400.0) == 0.0 and decay_age_s(event, 600.0) == 100.0


# --- the labelled set --------------------------------------------------------------------------


def test_the_labelled_set_is_large_and_covers_the_domains() -> None:
    items = windows_eval.load_window_set()
    assert len(items) >= 150
    domains = {i.domain for i in items}
    assert {"parking", "meeting", "maintenance", "flight", "hotel", "deadline", "trip", "none",
            "tricky"} <= domains
    assert {i.split for i in items} == {"train", "test", "holdout", "holdout2"}
    assert len({i.id for i in items}) == len(items)


def test_the_metric_catches_a_wrong_window() -> None:
    (item,) = [i for i in windows_eval.load_window_set() if "tonight from 10pm" in i.text]
    right = resolve_window(item.text, item.recorded_at_s, tz=item.tz)
    assert windows_eval.window_right(item, right)
    assert all(windows_eval.stale_flags_right(item, right))
    late = Window(valid_from_s=right.valid_from_s, valid_until_s=right.valid_until_s + 2 * H,
                  source="stated")
    assert not windows_eval.window_right(item, late)
    assert not all(windows_eval.stale_flags_right(item, late))
    assert not windows_eval.window_right(item, Window(valid_from_s=item.recorded_at_s))


def test_test_split_accuracy_stays_above_target() -> None:
    res = windows_eval.run_windows(parsers=("dateparser",), repeats=1, fresh_interpreters=False)
    parser = res["parsers"]["dateparser"]
    assert parser["test"]["window_accuracy"] >= 0.90, res["wrong"]
    for split in ("holdout", "holdout2"):
        assert parser[split]["window_accuracy"] >= 0.90, res["wrong"]
    assert parser["test"]["stale_accuracy"] >= 0.90
    assert res["alone"]["dateparser"]["test"]["window_accuracy"] < 0.90  # the grammar matters
    sweep = res["bare_hour_sweep_train"]
    from scrubjay import windows

    assert sweep[str(windows.BARE_HOUR_PM_BELOW)] == max(sweep.values())  # chosen on train


def test_bench_command_is_registered(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import json

    from scrubjay.bench.cli import BENCHMARKS
    from scrubjay.cli import main

    assert "windows" in BENCHMARKS
    real = windows_eval.run_windows
    # the full command also times fresh interpreters and every installed parser: too slow here
    monkeypatch.setattr(windows_eval, "run_windows", lambda: real(
        parsers=("dateparser",), repeats=1, fresh_interpreters=False))
    out = io.StringIO()
    assert main(["bench", "windows", "--out", str(tmp_path)], out=out) == 0
    text = out.getvalue()
    assert "| dateparser |" in text and "BARE_HOUR_PM_BELOW" in text and "wrote" in text
    res = json.loads((tmp_path / "windows.json").read_text())
    assert res["test_window_accuracy"] >= 0.90 and (tmp_path / "windows.md").exists()


def test_module_doctests() -> None:
    import doctest

    from scrubjay import windows

    result = doctest.testmod(windows, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted >= 3
