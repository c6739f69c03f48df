"""Validity windows stated in a memory's text ("tonight from 10pm to midnight", "for two nights").

:func:`resolve_window` reads the time expression of one statement against the moment it was
recorded and returns a :class:`Window`: when the statement is or becomes true (``valid_from_s``,
default the recording time), when it stops being true if the text says so (``valid_until_s``),
and when a future event happens (``event_at_s``, "my flight is tomorrow at 9am"). It is pure: the
recording time and the time zone are parameters, nothing reads the clock.

Two layers read the text:

* the module's grammar finds the *shape* of the expression (a range "from A to B", an end "until
  B", a duration "for N units", a period "this weekend", a point "at 9am") and reads clock times,
  including the meridiem a range shares ("from 3 to 5 pm" is 15:00-17:00);
* a maintained parser (dateparser by default, see :data:`PARSERS`) resolves the calendar
  expressions inside it: weekdays, month dates, numeric dates, "in 3 days".

The rules, in the order they apply:

=====================================  =========================================================
the text says                          the window
=====================================  =========================================================
"from A to B", "between A and B",      ``[A, B)``; a time-only end before its start is the next
"9-11am"                               day ("10pm to 2am"); "midnight" as an end is 24:00
"until B", "through B", "due B"        ``[recorded_at, B)``; a date-only ``B`` ends with its day
"for N minutes/hours/days/weeks"       ``[start, start + N)``; start: a stated day or time, else
                                       recorded_at; "for the next 3 hours" the same
"for N nights"                         check-in on the stated day (else recorded_at's day) at
                                       15:00, check-out N days later at 11:00
"today", "tonight", "this morning",    the period: day 00:00-24:00, tonight and evening
"this weekend", "next week", ...       18:00-24:00, morning 06:00-12:00, afternoon 12:00-18:00,
                                       weekend Saturday-Monday 00:00, weeks Monday to Monday
a day alone ("on Friday", "on the      that day, 00:00-24:00
19th", "tomorrow")
a point ("tomorrow at 9am", "at 5pm",  ``event_at``; ``valid_from`` = recorded_at, no end
"in 2 hours")
=====================================  =========================================================

Also read: "since Tuesday" (from then, no end), "until further notice", "for the rest of the
week", "a two-hour limit"; the full rules, and how they were measured, are in docs/windows.md.

A window that has already ended when the statement is recorded ("this morning I moved desks",
said at 15:00) tells when something happened, not how long it holds: it becomes a past event
(``event_at`` = its start, no end), so the learned decay applies to it.

Bad input never raises from :func:`resolve_window`: a time expression that cannot be resolved
("on the 45th", "at 13pm"), that is vague ("soon", "for a few days") or contradictory ("tonight at
9am", two different days) gives ``source = "fallback: <why>"`` and the default window, so the
learned decay applies and the record says why. Text with no time expression gives ``source =
"none"``. Only a :class:`Window` built directly with ``valid_until_s < valid_from_s`` is refused,
with :class:`~scrubjay.errors.TimeWindowError`.

>>> from datetime import datetime, timezone
>>> nine = datetime(2026, 3, 4, 9, 0, tzinfo=timezone.utc).timestamp()
>>> w = resolve_window("The maintenance window is tonight from 10pm to midnight", nine)
>>> (w.valid_from_s - nine) / 3600, (w.valid_until_s - nine) / 3600, w.source
(13.0, 15.0, 'stated')
>>> window_state(w, nine + 11 * 3600), window_state(w, nine + 14 * 3600)
('pending', 'active')
"""

from __future__ import annotations

import calendar
import logging
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import InvalidInputError, TimeWindowError
from .types import MemoryRecord

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_PARSER",
    "PARSERS",
    "Window",
    "WindowState",
    "decay_age_s",
    "resolve_window",
    "window_stale_reason",
    "window_state",
    "with_windows",
]

WindowState = Literal["pending", "active", "ended", "open"]

#: Only the first characters of a text are read for a window (chosen: a stated window sits in
#: the sentence that states it; scanning a pasted document for dates is not this module's job).
MAX_SCAN_CHARS = 2_000

#: Parts of the day as (start hour, end hour), conventions of English usage rather than tuned.
PARTS_OF_DAY: dict[str, tuple[int, int]] = {
    "morning": (6, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 24),
    "tonight": (18, 24), "day": (0, 24),
}
#: Hotel check-in and check-out hours for "for N nights" (the common hotel convention).
CHECK_IN_HOUR = 15
CHECK_OUT_HOUR = 11
#: A bare hour ("from 3 to 5", "at 4") below this is read as afternoon (chosen on the train
#: split among 1..12: 8 resolves the most train statements; see docs/windows.md).
BARE_HOUR_PM_BELOW = 8

_SOURCES_FIXED = ("stated", "none")

# --- the parsers: (calendar phrase, naive local base) -> date or None ----------------------------

DayParser = Callable[[str, datetime], "date | None"]


def _dateparser_day(phrase: str, base: datetime) -> date | None:
    import dateparser  # imported on first use: about 0.1 s, paid by the first statement

    prefer = "past" if phrase.startswith("last ") else "future"
    got = dateparser.parse(phrase, languages=["en"], settings={
        "RELATIVE_BASE": base, "PREFER_DATES_FROM": prefer, "STRICT_PARSING": False})
    return got.date() if got is not None else None


@lru_cache(maxsize=1)
def _pdt_calendar() -> Any:
    import parsedatetime

    return parsedatetime.Calendar(version=parsedatetime.VERSION_CONTEXT_STYLE)


def _parsedatetime_day(phrase: str, base: datetime) -> date | None:
    got, status = _pdt_calendar().parseDT(phrase, sourceTime=base)
    return got.date() if status and status.hasDate else None


def _ctparse_day(phrase: str, base: datetime) -> date | None:
    from ctparse.ctparse import ctparse

    got = ctparse(phrase, ts=base, timeout=0.5)
    res = getattr(got, "resolution", None)
    if res is None or not all(isinstance(getattr(res, a, None), int)
                              for a in ("year", "month", "day")):
        return None
    try:
        return date(res.year, res.month, res.day)
    except ValueError:
        return None


#: The calendar parsers :func:`resolve_window` can use (compared in ``scrubjay bench windows``);
#: only dateparser is a dependency of the package, the others must be installed to compare.
PARSERS: dict[str, DayParser] = {
    "dateparser": _dateparser_day,
    "parsedatetime": _parsedatetime_day,
    "ctparse": _ctparse_day,
}
#: Chosen on the labelled window set: see docs/windows.md for the comparison.
DEFAULT_PARSER = "dateparser"


# --- the value ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """When a statement holds, as its text states it (UTC epoch seconds).

    ``valid_from_s`` is when it is or becomes true (the recording time unless stated),
    ``valid_until_s`` when it stops (``None``: the text states no end), ``event_at_s`` when the
    future (or past) event it is about happens, ``expression`` the words that said so, and
    ``source`` ``"stated"``, ``"none"`` (no time expression) or ``"fallback: <why>"`` (an
    expression that could not be used; the learned decay applies).

    >>> Window(valid_from_s=10.0, valid_until_s=5.0)
    Traceback (most recent call last):
    ...
    scrubjay.errors.TimeWindowError: The 'valid_until_s' parameter of Window must be >= \
valid_from_s (10.0). Got 5.0 instead.
    """

    valid_from_s: float
    valid_until_s: float | None = None
    event_at_s: float | None = None
    expression: str = ""
    source: str = "none"

    def __post_init__(self) -> None:
        for name in ("valid_from_s", "valid_until_s", "event_at_s"):
            value = getattr(self, name)
            if value is None and name != "valid_from_s":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value):
                raise TimeWindowError(f"The {name!r} parameter of Window must be a finite number "
                                      f"of epoch seconds. Got {value!r} instead.")
        if self.valid_until_s is not None and self.valid_until_s < self.valid_from_s:
            raise TimeWindowError(
                f"The 'valid_until_s' parameter of Window must be >= valid_from_s "
                f"({self.valid_from_s}). Got {self.valid_until_s} instead.")
        if self.source not in _SOURCES_FIXED and not self.source.startswith("fallback: "):
            raise InvalidInputError(f"The 'source' parameter of Window must be 'stated', 'none' "
                                    f"or 'fallback: <why>'. Got {self.source!r} instead.")

    @property
    def stated(self) -> bool:
        """Whether the text stated a usable window (``source == "stated"``)."""
        return self.source == "stated"


def window_state(window: Window, at_s: float) -> WindowState:
    """Where ``at_s`` falls: ``pending`` before ``valid_from``, ``active`` inside a stated end,
    ``ended`` at or after ``valid_until``, ``open`` after the start when no end is stated."""
    if at_s < window.valid_from_s:
        return "pending"
    if window.valid_until_s is None:
        return "open"
    return "active" if at_s < window.valid_until_s else "ended"


def window_stale_reason(window: Window, at_s: float) -> str | None:
    """``"window ended at <UTC ISO time>"`` when the stated window has ended at ``at_s``, else
    ``None`` (then the learned decay decides)."""
    if window.valid_until_s is None or at_s < window.valid_until_s:
        return None
    end = datetime.fromtimestamp(window.valid_until_s, ZoneInfo("UTC"))
    return f"window ended at {end.isoformat(timespec='minutes')}"


def decay_age_s(window: Window, at_s: float) -> float:
    """The age the learned decay should see at ``at_s``: 0 before the window starts (or before
    the event it is about), then the time since that start.

    ``start = event_at_s`` when an event is stated, else ``valid_from_s``; the age is
    ``max(0, at_s - start)``, so a memory about a future event does not decay before it.
    """
    start = window.event_at_s if window.event_at_s is not None else window.valid_from_s
    return max(0.0, float(at_s) - start)


# --- the grammar ---------------------------------------------------------------------------------


class _Lazy:
    """A regular expression compiled on first use: the grammar's patterns take tens of
    milliseconds to compile, which ``import scrubjay`` should not pay."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    def _re(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled

    def search(self, text: str) -> re.Match[str] | None:
        return self._re().search(text)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self._re().fullmatch(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self._re().finditer(text)

    def sub(self, repl: str | Callable[[re.Match[str]], str], text: str) -> str:
        return self._re().sub(repl, text)


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
          r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_PART = r"(?:morning|afternoon|evening|night)"
_WD = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DAY = (
    r"(?:(?:the\s+)?day\s+after\s+tomorrow"
    rf"|(?:today|tomorrow|yesterday|this)(?:\s+{_PART})|today|tomorrow|yesterday|tonight"
    r"|last\s+night"
    rf"|(?:(?:this|next|last|coming)\s+)?{_WD}(?:\s+{_PART})?"
    rf"|{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?"
    rf"|(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}\b(?:,?\s+\d{{4}})?"
    r"|(?:the\s+)?\d{1,2}(?:st|nd|rd|th)\b(?!\s+(?:street|st\b|avenue|ave\b|floor|place|road|row"
    r"|grade|birthday|anniversary|time|century|percentile|edition|gen))"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?"
    r"|in\s+\d+\s+(?:days?|weeks?))"
)
_CLOCK = (r"(?:\d{1,2}(?::\d{2})?\s*(?:a\.?m\.?|p\.?m\.?)(?![a-z])|\d{1,2}:\d{2}|noon|midday"
          r"|midnight|\d{1,2}\s*o'?clock)")
_CLOCK_ANY = rf"(?:{_CLOCK}|(?:[01]?\d|2[0-3])(?![\d:/.]|\s*(?:st|nd|rd|th|%)))"
_AT_END = (rf"(?=\s*(?:$|[.,;:!?)]|today|tonight|tomorrow|this|on|sharp|and|or|in\s+the|{_WD}"
           r"|\W))")
_POINT = (rf"(?:{_DAY}\s+(?:at\s+|from\s+)?{_CLOCK_ANY}|{_CLOCK_ANY}(?:\s+(?:on\s+)?{_DAY})?"
          rf"|{_DAY})")
_PERIOD = (r"(?:(?:this|next|last|the|coming|all)\s+(?:weekend|week|month)|this\s+past\s+weekend"
           rf"|all\s+(?:day|{_PART})"
           rf"|(?:this|tomorrow|yesterday)\s+{_PART}|tonight|today|all\s+day|later\s+today)")

_RANGE_RE = _Lazy(
    rf"\b(?:from|between)\s+(?P<a>{_POINT})\s*(?:to|until|till|til|and|through|thru|-)\s*"
    rf"(?P<b>{_POINT})"
    rf"|(?<![\w/:])(?P<a2>{_CLOCK_ANY})\s*(?:-|to)\s*(?P<b2>{_CLOCK_ANY})")
#: Words after which a bare number is a place, not an hour ("level 5 to 7pm" is no range).
_NOUN_BEFORE_NUMBER_RE = _Lazy(
    r"\b(?:level|floor|spot|bay|gate|room|platform|row|seat|lot|zone|deck|aisle|section|terminal"
    r"|number|no\.?|#|page|chapter|bus|line|route|table|stand|pier|berth|door)\s*$")
_SINCE_RE = _Lazy(rf"\bsince\s+(?P<a>{_POINT})")
_UNTIL_RE = _Lazy(
    r"\b(?:until|till|til|through|thru|up\s+to|by|before|due(?:\s+(?:on|by|at))?|deadline\s+is"
    r"|expires?(?:\s+(?:on|at))?|ends?\s+(?:on|at)|closes?\s+(?:on|at)|runs?\s+out\s+(?:on|at)"
    r")\s+"
    rf"(?P<end>the\s+end\s+of\s+(?:the\s+)?(?:day|today|(?:(?:this|next)\s+)?(?:week|month)"
    rf"|{_POINT})"
    rf"|end\s+of\s+(?:the\s+)?(?:day|week|month|{_MONTHS})|{_PERIOD}|{_POINT}"
    rf"|{_MONTHS}\b(?!\.?\s*\d))")
_UNITS = r"(?:minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|months?|fortnight)"
_DURATION_RE = _Lazy(
    rf"\b(?:for|within)\s+(?:the\s+)?(?:next\s+|coming\s+|following\s+)?(?P<n>\d+\s+)?"
    rf"(?P<u>{_UNITS})\b|\b(?P<nn>\d+)\s+(?P<uu>nights?)\b"
    r"|\b(?P<n3>\d+)-(?P<u3>min(?:ute)?s?|hours?|hrs?|days?|nights?|weeks?|months?)\b")
#: "for the morning", "for the rest of the week": from now to the end of that period.
_REST_RE = _Lazy(r"\bfor\s+the\s+(?:rest\s+of\s+(?:the|this)\s+)?"
                 r"(?P<p>day|week|month|morning|afternoon|evening)\b")
_WEEKDAY_ABBREVIATION_RE = _Lazy(
    r"\b(?P<pre>on|next|this|until|till|by|from|to|since|before)\s+"
    r"(?P<d>mon|tues?|wed|thu(?:rs?)?|fri|sat|sun)\b\.?")
_OPEN_RE = _Lazy(r"\b(?:until|till)\s+further\s+notice\b|\bindefinitely\b")
#: Habits ("every Monday at 7am") and present perfects ("I've lived here for 3 months") state no
#: single window ahead: they are read as no window (the learned decay applies).
_HABIT_RE = _Lazy(
    r"\b(?:usually|every|always|each|normally|generally|often|weekdays|weekends"
    r"|weeknights|(?:mon|tues|wednes|thurs|fri|satur|sun)days)\b")
_PERFECT_RE = _Lazy(
    r"\b(?:i've|we've|you've|they've|have|has|had)\s+(?:been|lived|worked|had|known|used|studied"
    r"|done|played|owned|driven|taught|run|stayed|waited|lived)\b")
#: Past-tense verbs: with one of them a period that has begun ("this morning I parked at the
#: station", said at 07:15) tells when something happened, so it is read as a past event.
_PAST_RE = _Lazy(
    r"\b(?:was|were|had|did|went|left|got|bought|met|moved|parked|started|finished|ate|came|saw"
    r"|took|made|arrived|landed|dropped|picked|checked|switched|changed|lost|found|paid|sent"
    r"|called|booked|visited)\b")
_ABBREVIATIONS = {r"\b(?:tmrw|tmr|tmrrw|tomorow|2morrow)\b": "tomorrow", r"\btonite\b": "tonight",
                  r"\btdy\b": "today"}
_IN_RE = _Lazy(r"\bin\s+(?P<n>\d+)\s+(?P<u>minutes?|mins?|hours?|hrs?)\b")
_DAY_RE = _Lazy(rf"\b{_DAY}")
_PERIOD_RE = _Lazy(rf"\b{_PERIOD}\b")
_CLOCK_RE = _Lazy(rf"(?<![\w/:]){_CLOCK}|\b(?:at|@)\s+{_CLOCK_ANY}{_AT_END}")
_VAGUE_RE = _Lazy(
    r"\b(?:soon|soonish|someday|some\s+day|sometime|at\s+some\s+point|eventually|one\s+of\s+these"
    r"\s+days|in\s+a\s+(?:while|bit)|for\s+(?:a\s+)?(?:few|several|some|couple|while|bit)"
    r"|for\s+ages|later\s+on)\b")
_HINT_RE = _Lazy(
    rf"\b(?:{_WD}|{_MONTHS}|today|tonight|tomorrow|yesterday|morning|afternoon|evening|night"
    r"|weekends?|weeks?|months?|until|till|til|through|due|deadline|expires?|noon|midday|midnight"
    r"|o'?clock|minutes?|mins?|hours?|hrs?|days?|nights?|fortnight|from|between|soon|soonish"
    r"|someday"
    r"|sometime|eventually)\b|\d(?:st|nd|rd|th)\b|\d\s*[ap]\.?m\b|\d:\d\d|\d/\d|\bat\s+\d")

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fourteen": 14, "twenty": 20,
    "thirty": 30, "a": 1, "an": 1,
}
_NUMBER_RE = _Lazy(r"\b(" + "|".join(w for w in _NUMBER_WORDS if len(w) > 2)
                        + rf")\s+(?={_UNITS}\b)")
#: "a"/"an" count as one only after a word that introduces a duration ("for an hour", not
#: "a night owl").
_ONE_RE = _Lazy(rf"\b(for|within|in|next)\s+an?\s+(?={_UNITS}\b)")
#: Named days that are not the weekday they contain.
_NAMED_DAYS_RE = _Lazy(r"\b(?:black|good|casual)\s+friday\b|\bcyber\s+monday\b"
                            r"|\bash\s+wednesday\b|\b(?:easter|palm)\s+sunday\b")
_UNIT_S = {"minute": 60, "min": 60, "hour": 3600, "hr": 3600, "day": 86400, "night": 86400,
           "week": 7 * 86400, "fortnight": 14 * 86400}


class _Fallback(Exception):
    """Internal: the expression cannot be used; carries the reason and the words."""

    def __init__(self, reason: str, expression: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.expression = expression


@dataclass(frozen=True, slots=True)
class _Clock:
    hour: int  # 0..24; 24 is midnight as an end
    minute: int
    meridiem: str | None  # "am", "pm" or None when the text gave none
    text: str


@dataclass(frozen=True, slots=True)
class _Span:
    start: datetime | None
    end: datetime | None
    event: datetime | None
    expression: str


def _normalise(text: str) -> str:
    s = text[:MAX_SCAN_CHARS].lower().replace("\u2013", "-").replace("\u2014", "-")
    s = s.replace("\u2019", "'")
    for pattern, word in _ABBREVIATIONS.items():
        s = re.sub(pattern, word, s)
    s = _WEEKDAY_ABBREVIATION_RE.sub(lambda m: f"{m.group('pre')} " + next(
        d for d in _WEEKDAYS if d.startswith(m.group("d")[:3])), s)
    s = re.sub(r"\b(" + "|".join(w for w in _NUMBER_WORDS if len(w) > 2) + r")-(?=[a-z])",
               lambda m: f"{_NUMBER_WORDS[m.group(1)]}-", s)  # "two-hour"
    s = re.sub(r"\bhalf\s+an?\s+hour\b", "30 minutes", s)
    s = re.sub(r"\ba\s+couple\s+of\s+(?=" + _UNITS + r"\b)", "2 ", s)
    s = _NUMBER_RE.sub(lambda m: f"{_NUMBER_WORDS[m.group(1)]} ", s)
    s = _ONE_RE.sub(lambda m: f"{m.group(1)} 1 ", s)
    s = _NAMED_DAYS_RE.sub(" ", s)
    s = "".join(" " if unicodedata.category(c)[0] == "S" and c not in "'/:-@.%+" else c
                for c in s)  # emoji and symbols
    return re.sub(r"\s+", " ", s).strip()


def _parse_clock(text: str) -> _Clock:
    t = text.strip()
    if t in ("noon", "midday"):
        return _Clock(12, 0, "pm", t)
    if t == "midnight":
        return _Clock(24, 0, None, t)
    m = re.fullmatch(r"(?:at\s+|@\s*)?(\d{1,2})(?::(\d{2}))?\s*(?:o'?clock)?\s*"
                     r"(?:(a|p)\.?m\.?)?", t)
    if m is None:
        raise _Fallback(f"cannot read the time {t!r}", t)
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    meridiem = m.group(3) + "m" if m.group(3) else None
    if minute > 59 or hour > 23 or (meridiem and not 1 <= hour <= 12):
        raise _Fallback(f"no such time {t!r}", t)
    return _Clock(hour, minute, meridiem, t)


def _hour24(c: _Clock, part: tuple[int, int] | None) -> int:
    if c.hour == 24 or c.meridiem is None and c.hour >= 13:
        return c.hour
    if c.meridiem == "am":
        return 0 if c.hour == 12 else c.hour
    if c.meridiem == "pm":
        return c.hour if c.hour == 12 else c.hour + 12
    if c.hour == 0:
        return 0
    if part is not None and part[0] >= 12 and c.hour < 12:  # "tonight at 9"
        return c.hour + 12
    if part is not None and part[1] <= 12:  # "this morning at 8"
        return c.hour
    if c.text.startswith("0"):  # "07:30": a 24-hour clock
        return c.hour
    return c.hour + 12 if c.hour < BARE_HOUR_PM_BELOW else c.hour


def _at(day: date, hour: int, minute: int, zone: tzinfo) -> datetime:
    return datetime.combine(day, time(0, 0), zone) + timedelta(hours=hour, minutes=minute)


def _add_months(day: date, n: int) -> date:
    y, m = divmod(day.month - 1 + n, 12)
    year, month = day.year + y, m + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


class _Reader:
    """Reads one normalised statement; raises :class:`_Fallback` when it cannot."""

    def __init__(self, text: str, rec: datetime, parser: DayParser) -> None:
        self.text = text
        self.rec = rec
        self.zone: tzinfo = rec.tzinfo  # type: ignore[assignment]
        self.parser = parser
        self.today = rec.date()

    # days ------------------------------------------------------------------------------------
    def day(self, phrase: str) -> tuple[date, tuple[int, int] | None]:
        """Resolve a day phrase to its date and the part of the day it names, if any."""
        p = re.sub(r"^(?:on\s+)", "", phrase.strip())
        part: tuple[int, int] | None = None
        m = re.fullmatch(rf"(.*?)\s+({_PART})", p)
        if m and m.group(1) not in ("last",):
            p, part = m.group(1), PARTS_OF_DAY[m.group(2)]
        if p == "tonight":
            return self.today, PARTS_OF_DAY["tonight"]
        if p == "last night":
            return self.today - timedelta(days=1), PARTS_OF_DAY["night"]
        fixed = {"today": 0, "this": 0, "tomorrow": 1, "yesterday": -1, "day after tomorrow": 2,
                 "the day after tomorrow": 2}
        if p in fixed:
            return self.today + timedelta(days=fixed[p]), part
        m = re.fullmatch(r"(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)", p)
        if m:  # "the 19th": this month if still ahead, else next month
            n = int(m.group(1))
            month = self.today if n >= self.today.day else _add_months(self.today.replace(day=1), 1)
            if not 1 <= n <= calendar.monthrange(month.year, month.month)[1]:
                raise _Fallback(f"no such day {phrase.strip()!r}", phrase.strip())
            p = f"{calendar.month_name[month.month]} {n} {month.year}"
        p = re.sub(r"^(?:this|coming)\s+(?=" + _WD + ")", "", p)
        p = re.sub(r"^the\s+", "", p)
        base = self.rec.replace(tzinfo=None)
        got = self.parser(p, base)
        if got is None:
            raise _Fallback(f"cannot resolve the day {phrase.strip()!r}", phrase.strip())
        t = self.today
        if (got.year, got.month, got.day) == (t.year + 1, t.month, t.day):
            got = t  # "expires December 31", said on 31 December: today, not next year
        return got, part

    def past(self, day: date, phrase: str) -> date:
        """The last such day on or before today ("since Tuesday", "since the 3rd")."""
        if day <= self.today:
            return day
        if re.search(_WD, phrase):
            return day - timedelta(days=7 * math.ceil((day - self.today).days / 7))
        if re.search(rf"\b{_MONTHS}\b", phrase) is None and re.search(r"\d(?:st|nd|rd|th)", phrase):
            return _add_months(day, -1)
        return day.replace(year=day.year - 1) if not (day.month == 2 and day.day == 29) else day

    def month_start(self, name: str) -> date:
        """The first day of the next month called ``name`` ("until March" in January)."""
        month = next(i for i in range(1, 13) if calendar.month_name[i].lower().startswith(
            name[:3]))
        year = self.today.year if month > self.today.month else self.today.year + 1
        return date(year, month, 1)

    def point(self, phrase: str, ctx: tuple[date, tuple[int, int] | None] | None,
              ) -> tuple[date | None, tuple[int, int] | None, _Clock | None]:
        """Split a point phrase into its day (or None), part of day and clock (or None)."""
        dm = _DAY_RE.search(phrase)
        rest = phrase
        day: date | None = None
        part: tuple[int, int] | None = None
        if dm is not None:
            day, part = self.day(dm.group(0))
            rest = (phrase[:dm.start()] + " " + phrase[dm.end():])
        rest = re.sub(r"\b(?:at|on|from)\b", " ", rest).strip()
        clock = _parse_clock(rest) if rest else None
        if day is None and ctx is not None:
            day, part = ctx[0], part or ctx[1]
        return day, part, clock

    def context(self, blank: tuple[int, int] | None) -> tuple[date, tuple[int, int] | None] | None:
        """The one day named outside the main construct; several different days: fallback."""
        text = self.text if blank is None else \
            self.text[:blank[0]] + " " * (blank[1] - blank[0]) + self.text[blank[1]:]
        found = [(m.group(0), self.day(m.group(0))) for m in _DAY_RE.finditer(text)]
        days = {d for _, (d, _) in found}
        if len(days) > 1:
            words = ", ".join(repr(w) for w, _ in found)
            raise _Fallback(f"several different days ({words})", words)
        return found[0][1] if found else None

    def dt(self, day: date, part: tuple[int, int] | None, clock: _Clock | None,
           *, end: bool = False, check: bool = True) -> datetime:
        if clock is None:
            if part is not None:
                return _at(day, part[1] if end else part[0], 0, self.zone)
            return _at(day + timedelta(days=1) if end else day, 0, 0, self.zone)
        hour = _hour24(clock, part)
        if part is not None and part[0] >= 18 and clock.meridiem == "am" and hour < 6:
            return _at(day + timedelta(days=1), hour, clock.minute, self.zone)  # "2am tonight"
        if check and part is not None and clock.meridiem is not None and clock.hour != 12 and (
                (part[0] >= 12 and clock.meridiem == "am")
                or (part[1] <= 12 and clock.meridiem == "pm")):  # "tonight at 9am"
            raise _Fallback(f"the time {clock.text!r} is outside the part of the day", clock.text)
        return _at(day, hour, clock.minute, self.zone)

    # constructs -------------------------------------------------------------------------------
    def read(self) -> _Span | None:
        s = self.text
        m = _RANGE_RE.search(s)
        if m is not None and (m.group("a") or (
                _has_explicit(m.group("a2"), m.group("b2"))
                and (_has_explicit(m.group("a2"))
                     or _NOUN_BEFORE_NUMBER_RE.search(s[:m.start()]) is None))):
            return self.range(m)
        m = _SINCE_RE.search(s)
        if m is not None:  # "overdue since Tuesday": began then, no end stated
            day, part, clock = self.point(m.group("a"), None)
            day = self.past(day or self.today, m.group("a"))
            return _Span(self.dt(day, part, clock), None, None, m.group(0))
        m = _OPEN_RE.search(s)
        if m is not None:  # "closed from Monday until further notice": a start, no end
            ctx = self.context((m.start(), m.end()))
            if ctx is None:
                return None
            return _Span(self.dt(ctx[0], ctx[1], None), None, None, m.group(0))
        m = _UNTIL_RE.search(s)
        if m is not None:
            return self.until(m)
        m = _REST_RE.search(s)
        if m is not None:
            self.context((m.start(), m.end()))
            what = m.group("p")
            if what == "day":
                end = self.dt(self.today, None, None, end=True)
            elif what in ("week", "month"):
                end = self.period("this " + what)[1]
            else:
                end = self.dt(self.today, PARTS_OF_DAY[what], None, end=True)
            if end <= self.rec:
                raise _Fallback(f"'{m.group(0)}' is over", m.group(0))
            return _Span(self.rec, end, None, m.group(0))
        m = _DURATION_RE.search(s)
        if m is not None:
            return None if _PERFECT_RE.search(s) else self.duration(m)
        m = _IN_RE.search(s)
        if m is not None:
            n, unit = int(m.group("n")), m.group("u").rstrip("s")
            self.context((m.start(), m.end()))
            return _Span(None, None, _plus(self.rec, n, unit), m.group(0))
        clocks = list(_CLOCK_RE.finditer(s))
        if clocks:
            parsed = {_parse_clock(_strip_at(c.group(0))) for c in clocks}
            if len({(c.hour, c.minute, c.meridiem) for c in parsed}) > 1:
                words = ", ".join(repr(c.group(0)) for c in clocks)
                raise _Fallback(f"several different times ({words})", words)
            m = clocks[0]
            ctx = self.context(None)
            day, part = ctx if ctx is not None else (None, None)
            clock = _parse_clock(_strip_at(m.group(0)))
            if day is None:  # a time with no day: the next such time
                day = self.today
                if self.dt(day, part, clock) <= self.rec:
                    day += timedelta(days=1)
            return _Span(None, None, self.dt(day, part, clock), m.group(0))
        m = _PERIOD_RE.search(s)
        if m is not None and re.search(r"(?:weekend|week|month)$", m.group(0)):
            self.context((m.start(), m.end()))
            start, end = self.period(m.group(0))
            return self.begun(start, end, m.group(0))
        ctx = self.context(None)
        if ctx is not None:
            day, part = ctx
            word = _DAY_RE.search(s)
            return self.begun(self.dt(day, part, None), self.dt(day, part, None, end=True),
                              word.group(0) if word else "")
        if m is not None:
            start, end = self.period(m.group(0))
            return self.begun(start, end, m.group(0))
        return None

    def begun(self, start: datetime, end: datetime, words: str) -> _Span:
        """A period or day; one that has begun, told in the past tense, is a past event."""
        if start <= self.rec < end and _PAST_RE.search(self.text):
            return _Span(None, None, start, words)
        return _Span(start, end, None, words)

    def range(self, m: re.Match[str]) -> _Span:
        a_txt, b_txt = (m.group("a"), m.group("b")) if m.group("a") else \
            (m.group("a2"), m.group("b2"))
        ctx = self.context((m.start(), m.end()))
        a_day, a_part, a_clock = self.point(a_txt, ctx)
        b_day, b_part, b_clock = self.point(b_txt, ctx)
        if a_clock is None and b_clock is None:  # a range of days: from A's start to B's end
            if a_day is None or b_day is None:
                raise _Fallback("a range without days", m.group(0))
            if b_day < a_day and _explicit_date(b_txt):
                raise _Fallback("the range ends before it starts", m.group(0))
            while b_day < a_day:
                b_day += timedelta(days=7)
            return _Span(self.dt(a_day, a_part, None), self.dt(b_day, b_part, None, end=True),
                         None, m.group(0))
        if a_clock is not None and b_clock is not None and a_clock.meridiem is None \
                and b_clock.meridiem is not None and b_clock.hour != 24:
            same = _Clock(a_clock.hour, a_clock.minute, b_clock.meridiem, a_clock.text)
            other = _Clock(a_clock.hour, a_clock.minute, "pm" if b_clock.meridiem == "am"
                           else "am", a_clock.text)
            fits = 1 <= a_clock.hour <= 12 and _hour24(same, None) <= _hour24(b_clock, None)
            a_clock = same if fits or not 1 <= a_clock.hour <= 12 else other
        if a_day is not None and b_day is not None and b_day < a_day \
                and not _explicit_date(b_txt):  # "from Monday 9am to Friday 5pm"
            b_day += timedelta(days=7 * math.ceil((a_day - b_day).days / 7))
        day = a_day or b_day or self.today
        b_own_day = _DAY_RE.search(b_txt) is not None
        start = self.dt(a_day or day, a_part, a_clock)
        end = self.dt(b_day or (a_day or day), b_part, b_clock, end=b_clock is None,
                      check=b_own_day)  # "tonight from 11pm to 2am"
        if end <= start and not b_own_day:  # "10pm to 2am": the end is the next day
            end += timedelta(days=1)
        if end <= start:
            raise _Fallback("the range ends before it starts", m.group(0))
        return _Span(start, end, None, m.group(0).strip())

    def until(self, m: re.Match[str]) -> _Span:
        end_txt = m.group("end")
        ctx = self.context((m.start(), m.end()))
        em = re.fullmatch(r"(?:the\s+)?end\s+of\s+(?:the\s+)?(.+)", end_txt)
        if em is not None:
            what = em.group(1)
            if what in ("day", "today"):
                end = self.dt(self.today, None, None, end=True)
            elif what in ("week", "month"):
                end = self.period("this " + what)[1]
            elif what in ("this week", "next week", "this month", "next month"):
                end = self.period(what)[1]
            elif re.fullmatch(_MONTHS, what):  # "the end of March"
                first = self.month_start(what)
                if _add_months(first, -12) >= self.today.replace(day=1):
                    first = _add_months(first, -12)
                end = _at(_add_months(first, 1), 0, 0, self.zone)
            else:
                d, p, c = self.point(what, None)
                end = self.dt(d or self.today, p, c, end=True)
        elif _PERIOD_RE.fullmatch(end_txt) and not _DAY_RE.fullmatch(end_txt):
            end = self.period(end_txt)[0]
        elif re.fullmatch(_MONTHS, end_txt):  # "until March": until it begins
            end = _at(self.month_start(end_txt), 0, 0, self.zone)
        else:
            d, p, c = self.point(end_txt, ctx)
            if d is None:
                d = self.today
                if c is not None and self.dt(d, p, c) <= self.rec:
                    d += timedelta(days=1)
            end = self.dt(d, p, c, end=c is None)
        start = self.rec
        if ctx is not None and ctx[0] > self.today:  # "tomorrow the road is closed until 5pm"
            start = min(self.dt(ctx[0], ctx[1], None), max(self.rec, end))
        if end <= start:
            raise _Fallback(f"'{m.group(0)}' is before the window starts", m.group(0))
        return _Span(start, end, None, m.group(0).strip())

    def duration(self, m: re.Match[str]) -> _Span:
        n = int(m.group("n") or m.group("nn") or m.group("n3") or 1)
        unit = (m.group("u") or m.group("uu") or m.group("u3")).rstrip("s")
        unit = {"min": "minute", "hr": "hour"}.get(unit, unit)
        if n <= 0:
            raise _Fallback(f"a duration of {n} {unit}s", m.group(0))
        ctx = self.context((m.start(), m.end()))
        expression = m.group(0).strip()
        if unit == "night":
            day = ctx[0] if ctx is not None else self.today
            return _Span(_at(day, CHECK_IN_HOUR, 0, self.zone),
                         _at(day + timedelta(days=n), CHECK_OUT_HOUR, 0, self.zone), None,
                         expression)
        if unit == "day" and m.group("n") is None and "next" not in m.group(0):
            return _Span(self.rec, _at(self.today + timedelta(days=1), 0, 0, self.zone), None,
                         expression)  # "for the day": the rest of today
        rest = self.text[:m.start()] + " " * (m.end() - m.start()) + self.text[m.end():]
        clock_m = _CLOCK_RE.search(rest)
        if clock_m is not None:
            clock = _parse_clock(_strip_at(clock_m.group(0)))
            start = self.dt(ctx[0] if ctx is not None else self.today,
                            ctx[1] if ctx is not None else None, clock)
        elif ctx is not None and ctx[0] != self.today:
            start = self.dt(ctx[0], ctx[1], None)
        else:
            start = self.rec
        return _Span(start, _plus(start, n, unit), None, expression)

    def period(self, words: str) -> tuple[datetime, datetime]:
        w = re.sub(r"\s+", " ", words.strip())
        w = re.sub(r"^all (?=weekend|week|month)", "this ", w)
        w = re.sub(rf"^all (?={_PART})", "this ", w)
        t, z = self.today, self.zone
        if w in ("today", "all day", "later today"):
            start = self.rec if w == "later today" else _at(t, 0, 0, z)
            return start, _at(t + timedelta(days=1), 0, 0, z)
        m = re.fullmatch(rf"(tonight|(this|tomorrow|yesterday) ({_PART}))", w)
        if m is not None:
            shift = {"this": 0, "tomorrow": 1, "yesterday": -1}.get(m.group(2) or "this", 0)
            part = PARTS_OF_DAY[m.group(3) or "tonight"]
            d = t + timedelta(days=shift)
            return _at(d, part[0], 0, z), _at(d, part[1], 0, z)
        m = re.fullmatch(r"(this|next|last|the|coming|this past) (weekend|week|month)", w)
        if m is None:
            raise _Fallback(f"cannot resolve the period {w!r}", w)
        which, what = m.group(1), m.group(2)
        shift = {"next": 1, "last": -1, "this past": -1}.get(which, 0)
        if what == "month":
            first = _add_months(t.replace(day=1), shift)
            return _at(first, 0, 0, z), _at(_add_months(first, 1), 0, 0, z)
        monday = t - timedelta(days=t.weekday())
        if what == "week":
            start_day = monday + timedelta(days=7 * shift)
            return _at(start_day, 0, 0, z), _at(start_day + timedelta(days=7), 0, 0, z)
        saturday = monday + timedelta(days=5 + 7 * shift)
        return _at(saturday, 0, 0, z), _at(saturday + timedelta(days=2), 0, 0, z)


def _strip_at(text: str) -> str:
    return re.sub(r"^(?:at|@)\s*", "", text)


def _plus(start: datetime, n: int, unit: str) -> datetime:
    """``start`` plus ``n`` units: minutes and hours in elapsed time (across a DST change too),
    days, nights and weeks on the wall clock, months on the calendar."""
    if unit == "month":
        return datetime.combine(_add_months(start.date(), n), start.timetz())
    if unit in ("minute", "hour"):
        utc = ZoneInfo("UTC")
        return (start.astimezone(utc) + timedelta(seconds=n * _UNIT_S[unit])).astimezone(
            start.tzinfo)
    return start + timedelta(seconds=n * _UNIT_S[unit])


def _has_explicit(*clocks: str | None) -> bool:
    return any(c is not None and re.search(r"[ap]\.?m|:|noon|midday|midnight|o'?clock", c)
               for c in clocks)


def _explicit_date(phrase: str) -> bool:
    """Whether a phrase names a calendar date (a month, "the 19th", 3/19), not only a weekday."""
    return re.search(rf"\b{_MONTHS}\b|\d(?:st|nd|rd|th)\b|\d/\d|\d{{4}}-", phrase) is not None


@lru_cache(maxsize=64)
def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidInputError(f"The 'tz' parameter of resolve_window must be an IANA time zone "
                                f"name such as 'UTC' or 'Europe/Berlin'. Got {tz!r} "
                                "instead.") from exc


def resolve_window(text: str, recorded_at_s: float, *, tz: str = "UTC",
                   parser: str = DEFAULT_PARSER) -> Window:
    """The validity window ``text`` states, read against ``recorded_at_s`` in time zone ``tz``.

    ``recorded_at_s`` is UTC epoch seconds; ``tz`` an IANA name (``zoneinfo``) in which "tonight"
    and "9am" are meant; ``parser`` one of :data:`PARSERS` (for comparisons; the default is the
    dependency). The rules are in the module docstring. Never reads the clock; never raises on
    the text's content: expressions it cannot use give ``source="fallback: <why>"``.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"The 'text' parameter of resolve_window must be a str. Got "
                                f"{type(text).__name__} instead.")
    if isinstance(recorded_at_s, bool) or not isinstance(recorded_at_s, (int, float)) \
            or not math.isfinite(recorded_at_s):
        raise InvalidInputError(f"The 'recorded_at_s' parameter of resolve_window must be finite "
                                f"epoch seconds. Got {recorded_at_s!r} instead.")
    if parser not in PARSERS:
        raise InvalidInputError(f"The 'parser' parameter of resolve_window must be one of "
                                f"{sorted(PARSERS)}. Got {parser!r} instead.")
    zone = _zone(tz)
    rec_s = float(recorded_at_s)
    default = Window(valid_from_s=rec_s)
    s = _normalise(text)
    if _HINT_RE.search(s) is None and _VAGUE_RE.search(s) is None:
        return default
    rec = datetime.fromtimestamp(rec_s, zone)
    if _HABIT_RE.search(s) is not None:
        return default
    try:
        span = _Reader(s, rec, PARSERS[parser]).read()
    except _Fallback as why:
        logger.debug("window fallback for %r: %s", text[:80], why.reason)
        return Window(valid_from_s=rec_s, expression=why.expression,
                      source=f"fallback: {why.reason}")
    if span is None:
        vague = _VAGUE_RE.search(s)
        if vague is not None:
            return Window(valid_from_s=rec_s, expression=vague.group(0),
                          source=f"fallback: vague time expression {vague.group(0)!r}")
        return default
    return _to_window(span, rec_s)


def _to_window(span: _Span, rec_s: float) -> Window:
    start = span.start.timestamp() if span.start is not None else rec_s
    end = span.end.timestamp() if span.end is not None else None
    event = span.event.timestamp() if span.event is not None else None
    if end is not None and end <= rec_s:  # ended before it was told: a past event
        return Window(valid_from_s=rec_s, event_at_s=start, expression=span.expression,
                      source="stated")
    return Window(valid_from_s=start, valid_until_s=end, event_at_s=event,
                  expression=span.expression, source="stated")


def with_windows(records: Sequence[MemoryRecord], tz: str = "UTC") -> list[MemoryRecord]:
    """``records`` with the window each one's text states (:func:`resolve_window`, read
    against its ``created_at_s`` in ``tz``): ``valid_from_s`` is the start the learned decay
    counts from (the event's time when one is stated, else the window's start; None when that
    is the recording time), ``valid_until_s`` the stated end, and ``window`` says how it was
    read (``"stated: <the words>"`` or ``"fallback: <why>"``). A text without a time
    expression is left as it is.

    >>> from scrubjay.types import MemoryRecord
    >>> rec = MemoryRecord(id="m", text="The maintenance window is tonight from 10pm to "
    ...                    "midnight", context="", label="ephemeral", pi=0.9, tau_s=3600.0,
    ...                    value=1.0, created_at_s=1772614800.0)   # Wed 4 March 2026, 09:00 UTC
    >>> w = with_windows([rec])[0]
    >>> (w.valid_from_s - rec.created_at_s) / 3600, (w.valid_until_s - rec.created_at_s) / 3600
    (13.0, 15.0)
    >>> w.window
    'stated: from 10pm to midnight'
    """
    out: list[MemoryRecord] = []
    for rec in records:
        w = resolve_window(rec.text, rec.created_at_s, tz=tz)
        if w.source == "none":
            out.append(rec)
            continue
        if w.source != "stated":
            out.append(replace(rec, window=w.source))
            continue
        start = w.event_at_s if w.event_at_s is not None else w.valid_from_s
        if w.valid_until_s is not None and start > w.valid_until_s:
            start = w.valid_from_s
        out.append(replace(rec, valid_from_s=None if start == rec.created_at_s else start,
                           valid_until_s=w.valid_until_s, window=f"stated: {w.expression}"))
    return out
