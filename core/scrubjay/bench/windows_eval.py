"""``scrubjay bench windows``: the stated-window resolver on its labelled set, and the parsers.

The set (``bench/data/windows.tsv``, written by hand) holds statements with the time they were
recorded, their time zone and the window a person would read in them. Two metrics, per split:

* **window accuracy**: the share of statements whose window is resolved right: the same kind
  (``stated`` / ``none`` / ``fallback``) and, for stated windows, ``valid_from``, ``valid_until``
  and ``event_at`` each right (``None`` where the label has none). A label with minutes must be
  met within :data:`TOLERANCE_S`; a label with a date only accepts any instant from that day's
  00:00 to the next midnight (so "until Friday" may end on Friday 00:00, Friday 17:00 or
  Saturday 00:00);
* **stale-flag accuracy**: at five probe times per statement (an hour before the window starts,
  at its start, inside (before the earliest end the label allows), a minute after its latest
  end, 30 days after it), whether
  :func:`~scrubjay.windows.window_stale_reason` says "ended" exactly when the labelled window
  has ended. Statements with no labelled end are never window-stale.

The parsers are compared twice: inside the resolver (the module's grammar with each parser
resolving the calendar phrases) and alone (each parser's own free-text search on the raw
statement, its first find taken as the event, or a ctparse interval as the window). Speed is the
wall time per statement once warm, the first call (which loads the parser's data), and the
import time in a fresh interpreter.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from .. import windows
from ..windows import PARSERS, Window, resolve_window, window_stale_reason

__all__ = ["LabelledWindow", "load_window_set", "run_windows", "window_right", "write_windows"]

#: Tolerance for labels given to the minute (chosen: labels are written to the minute).
TOLERANCE_S = 60.0
#: Probe offsets around the labelled window (chosen: clearly before, at, inside, just after,
#: long after).
BEFORE_S, AFTER_S, LONG_AFTER_S = 3600.0, 60.0, 30 * 86400.0
#: Candidates for :data:`scrubjay.windows.BARE_HOUR_PM_BELOW`, swept on the train split.
BARE_HOUR_CANDIDATES = tuple(range(1, 13))
DATA_PATH = Path(__file__).parent / "data" / "windows.tsv"
#: train: constants are chosen on it; test: reported (its failures were looked at while the
#: grammar was written); holdout: written after the resolver was frozen, scored once, then fixed
#: on; holdout2: written last, never fixed on (docs/windows.md).
SPLITS = ("train", "test", "holdout", "holdout2")


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelledWindow:
    """One labelled statement; bounds are ``(lo_s, hi_s)`` epoch intervals or ``None``."""

    id: str
    split: str
    domain: str
    text: str
    tz: str
    recorded_at_s: float
    source: str
    valid_from: tuple[float, float]
    valid_until: tuple[float, float] | None
    event_at: tuple[float, float] | None


def _bound(field: str, rec_s: float, zone: ZoneInfo) -> tuple[float, float] | None:
    if not field:
        return None
    if field == "rec":
        return rec_s, rec_s
    if "T" in field:
        t = datetime.fromisoformat(field).replace(tzinfo=zone).timestamp()
        return t, t
    day = date.fromisoformat(field)
    lo = datetime.combine(day, datetime.min.time(), zone)
    hi = datetime.combine(day + timedelta(days=1), datetime.min.time(), zone)
    return lo.timestamp(), hi.timestamp()


def load_window_set(path: Path | None = None) -> list[LabelledWindow]:
    """The labelled statements of ``path`` (default: the bundled ``windows.tsv``)."""
    rows: list[LabelledWindow] = []
    lines = (path or DATA_PATH).read_text(encoding="utf-8").splitlines()
    for line in lines:
        if not line.strip() or line.startswith(("#", "id|")):
            continue
        wid, split, domain, rec, tz, text, vf, vu, ev, source = line.split("|")
        zone = ZoneInfo(tz)
        rec_s = datetime.fromisoformat(rec).replace(tzinfo=zone).timestamp()
        from_bound = _bound(vf, rec_s, zone)
        rows.append(LabelledWindow(
            id=wid, split=split, domain=domain, text=text, tz=tz, recorded_at_s=rec_s,
            source=source, valid_from=from_bound or (rec_s, rec_s),
            valid_until=_bound(vu, rec_s, zone), event_at=_bound(ev, rec_s, zone)))
    return rows


def _within(value: float | None, bound: tuple[float, float] | None) -> bool:
    if value is None or bound is None:
        return value is None and bound is None
    return bound[0] - TOLERANCE_S <= value <= bound[1] + TOLERANCE_S


def window_right(item: LabelledWindow, window: Window) -> bool:
    """Whether ``window`` is the labelled one (kind, and each bound within its tolerance)."""
    kind = window.source.split(":")[0]
    if kind != item.source:
        return False
    if kind != "stated":
        return True
    return (_within(window.valid_from_s, item.valid_from)
            and _within(window.valid_until_s, item.valid_until)
            and _within(window.event_at_s, item.event_at))


def probe_times(item: LabelledWindow) -> list[float]:
    """Before, at the start, inside, just after the end, long after the end (epoch seconds)."""
    start = item.event_at[0] if item.event_at is not None and item.valid_until is None \
        else item.valid_from[0]
    lo_end, hi_end = item.valid_until if item.valid_until is not None \
        else (start + 86400.0, start + 86400.0)
    # inside: before the earliest end a date-only label allows, so that the truth is certain
    inside = (start + lo_end) / 2 if lo_end > start else start + AFTER_S
    return [start - BEFORE_S, start, inside, hi_end + AFTER_S, hi_end + LONG_AFTER_S]


def stale_flags_right(item: LabelledWindow, window: Window) -> list[bool]:
    """At each probe: the predicted "window ended" flag equals the labelled one."""
    out = []
    for t in probe_times(item):
        truth = item.valid_until is not None and t >= item.valid_until[1]
        out.append((window_stale_reason(window, t) is not None) == truth)
    return out


# --- the parsers alone ---------------------------------------------------------------------------


def _alone(name: str) -> Callable[[str, datetime], tuple[datetime | None, datetime | None,
                                                          datetime | None]]:
    """Each parser's own free-text search: (valid_from, valid_until, event_at), naive local."""
    if name == "dateparser":
        from dateparser.search import search_dates

        def run_dp(text: str, base: datetime) -> tuple[datetime | None, datetime | None,
                                                        datetime | None]:
            found = search_dates(text, languages=["en"], settings={
                "RELATIVE_BASE": base, "PREFER_DATES_FROM": "future"})
            return (None, None, found[0][1]) if found else (None, None, None)
        return run_dp
    if name == "parsedatetime":
        cal = windows._pdt_calendar()

        def run_pdt(text: str, base: datetime) -> tuple[datetime | None, datetime | None,
                                                         datetime | None]:
            found = cal.nlp(text, sourceTime=base)
            return (None, None, found[0][0]) if found else (None, None, None)
        return run_pdt
    from ctparse.ctparse import ctparse
    from ctparse.types import Interval

    def run_ct(text: str, base: datetime) -> tuple[datetime | None, datetime | None,
                                                    datetime | None]:
        got = ctparse(text, ts=base, timeout=0.5)
        res = getattr(got, "resolution", None)
        if isinstance(res, Interval):
            return _ct_datetime(res.t_from), _ct_datetime(res.t_to), None
        return None, None, _ct_datetime(res)
    return run_ct


def _ct_datetime(t: Any) -> datetime | None:
    """A ctparse ``Time`` with a full date as a naive datetime (``None`` otherwise)."""
    year, month, day = (getattr(t, a, None) for a in ("year", "month", "day"))
    if not (isinstance(year, int) and isinstance(month, int) and isinstance(day, int)):
        return None
    try:
        return datetime(year, month, day, getattr(t, "hour", None) or 0,
                        getattr(t, "minute", None) or 0)
    except ValueError:
        return None


def _alone_window(run: Callable[..., Any], item: LabelledWindow) -> Window:
    zone = ZoneInfo(item.tz)
    base = datetime.fromtimestamp(item.recorded_at_s, zone).replace(tzinfo=None)
    try:
        a, b, ev = run(item.text, base)
    except Exception:  # noqa: BLE001 - a parser crash counts as "found nothing"
        a, b, ev = None, None, None
    rec = item.recorded_at_s
    if a is None and b is None and ev is None:
        return Window(valid_from_s=rec)
    frm = a.replace(tzinfo=zone).timestamp() if a is not None else rec
    until = b.replace(tzinfo=zone).timestamp() if b is not None else None
    event = ev.replace(tzinfo=zone).timestamp() if ev is not None else None
    if until is not None and until < frm:
        return Window(valid_from_s=rec, source="fallback: interval ends before it starts")
    return Window(valid_from_s=frm, valid_until_s=until, event_at_s=event, source="stated")


# --- the run -------------------------------------------------------------------------------------


@functools.cache
def _bytecode_env() -> dict[str, str]:
    """The environment for timed interpreters: bytecode cached in a temporary folder, as an
    installed package has it (``PYTHONDONTWRITEBYTECODE`` would time the compiler instead)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="scrubjay-pyc-")
    return env


def _fresh_s(setup: str, timed: str, runs: int = 3) -> float:
    """Median over ``runs`` fresh interpreters of the wall time of ``timed`` after ``setup``
    (one more run first writes the bytecode cache)."""
    code = f"import time\n{setup}\nt = time.perf_counter()\n{timed}\nprint(time.perf_counter() - t)"
    got = []
    for _ in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=True, env=_bytecode_env())
        got.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(got[1:])




def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _accuracy(items: Sequence[LabelledWindow], got: Sequence[Window]) -> dict[str, float]:
    right = [window_right(i, w) for i, w in zip(items, got, strict=True)]
    flags = [f for i, w in zip(items, got, strict=True) for f in stale_flags_right(i, w)]
    return {"window_accuracy": sum(right) / len(right), "stale_accuracy": sum(flags) / len(flags),
            "n": float(len(right))}


def _resolve_all(items: Sequence[LabelledWindow], parser: str) -> tuple[list[Window], list[float]]:
    got, times = [], []
    for item in items:
        t = time.perf_counter()
        got.append(resolve_window(item.text, item.recorded_at_s, tz=item.tz, parser=parser))
        times.append(time.perf_counter() - t)
    return got, times


def run_windows(*, path: Path | None = None, parsers: Sequence[str] | None = None,
                repeats: int = 3, fresh_interpreters: bool = True) -> dict[str, Any]:
    """Both metrics per split for each installed parser, the parsers alone, speed, import time,
    and the train-split sweep that chose ``BARE_HOUR_PM_BELOW``.

    ``fresh_interpreters=False`` skips the import and first-call timings (each starts new Python
    processes); they are then reported as NaN.
    """
    fresh = _fresh_s if fresh_interpreters else (lambda *a, **k: math.nan)
    items = load_window_set(path)
    splits = {s: [i for i in items if i.split == s] for s in SPLITS}
    names = list(parsers or PARSERS)
    res: dict[str, Any] = {"n_statements": len(items),
                           "n_train": len(splits["train"]), "n_test": len(splits["test"]),
                           "n_by_split": {k: len(v) for k, v in splits.items()},
                           "default_parser": windows.DEFAULT_PARSER,
                           "tolerance_s": TOLERANCE_S, "parsers": {}, "alone": {},
                           "import_s": {"scrubjay.windows": fresh(
                               "import scrubjay", "import scrubjay.windows")}}
    for name in names:
        if not _installed(name):
            res["parsers"][name] = {"installed": False}
            continue
        res["import_s"][name] = fresh("", f"import {name}")
        first_s = fresh("import scrubjay.windows as w",
                        f"w.resolve_window('My flight is on Friday at 9am', 1.7e9, "
                        f"parser={name!r})")
        resolve_window("My flight is on Friday at 9am", 1.7e9, parser=name)  # warm up
        per_split: dict[str, Any] = {}
        all_times: list[float] = []
        for split, its in splits.items():
            got, _ = _resolve_all(its, name)
            per_split[split] = _accuracy(its, got)
        for _ in range(repeats):
            all_times += _resolve_all(items, name)[1]
        all_times.sort()
        res["parsers"][name] = {
            "installed": True, **per_split, "first_call_s": first_s,
            "mean_us": statistics.fmean(all_times) * 1e6,
            "p95_us": all_times[min(len(all_times) - 1, math.ceil(0.95 * len(all_times)) - 1)]
            * 1e6}
        run = _alone(name)
        alone: dict[str, Any] = {}
        times: list[float] = []
        for split, its in splits.items():
            got = []
            for item in its:
                t = time.perf_counter()
                got.append(_alone_window(run, item))
                times.append(time.perf_counter() - t)
            alone[split] = _accuracy(its, got)
        alone["mean_us"] = statistics.fmean(times) * 1e6
        res["alone"][name] = alone
    res["bare_hour_sweep_train"] = _sweep(splits["train"])
    default = res["parsers"].get(windows.DEFAULT_PARSER, {})
    res["test_window_accuracy"] = default.get("test", {}).get("window_accuracy")
    res["test_stale_accuracy"] = default.get("test", {}).get("stale_accuracy")
    for split in SPLITS[2:]:
        res[f"{split}_window_accuracy"] = default.get(split, {}).get("window_accuracy")
        res[f"{split}_stale_accuracy"] = default.get(split, {}).get("stale_accuracy")
    res["wrong"] = [
        {"id": i.id, "split": i.split, "text": i.text, "got": _describe(w, i.tz)}
        for i, w in zip(items, _resolve_all(items, windows.DEFAULT_PARSER)[0], strict=True)
        if i.split != "train" and not window_right(i, w)]
    return res


def _sweep(train: Sequence[LabelledWindow]) -> dict[str, float]:
    keep = windows.BARE_HOUR_PM_BELOW
    out: dict[str, float] = {}
    try:
        for value in BARE_HOUR_CANDIDATES:
            windows.BARE_HOUR_PM_BELOW = value
            got, _ = _resolve_all(train, windows.DEFAULT_PARSER)
            out[str(value)] = _accuracy(train, got)["window_accuracy"]
    finally:
        windows.BARE_HOUR_PM_BELOW = keep
    return out


def _describe(w: Window, tz: str) -> str:
    zone = ZoneInfo(tz)

    def f(x: float | None) -> str:
        return "-" if x is None else datetime.fromtimestamp(x, zone).strftime("%Y-%m-%d %H:%M")
    return (f"from {f(w.valid_from_s)} until {f(w.valid_until_s)} event {f(w.event_at_s)} "
            f"({w.source})")


def _markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Stated validity windows (scrubjay bench windows)", "",
        (f"{res['n_statements']} labelled statements ("
         + ", ".join(f"{n} {k}" for k, n in res["n_by_split"].items())
         + f"); default parser: {res['default_parser']}. Window accuracy: kind and bounds "
         f"right (minutes within {res['tolerance_s']:.0f} s, dates within the day). Stale "
         "accuracy: the 'window ended' flag at 5 probe times per statement."), "",
        "## The resolver with each parser", "",
        (f"| parser | window acc. {_SPLIT_NAMES} | stale acc. {_SPLIT_NAMES} "
         "| per statement (mean / p95) | first call | import |"),
        "|---|---|---|---|---|---|"]
    for name, r in res["parsers"].items():
        if not r.get("installed"):
            lines.append(f"| {name} | not installed | | | | |")
            continue
        lines.append(
            f"| {name} | {_three(r, 'window_accuracy')} | {_three(r, 'stale_accuracy')} | "
            f"{r['mean_us']:.0f} / {r['p95_us']:.0f} µs | {r['first_call_s'] * 1e3:.0f} ms | "
            f"{res['import_s'][name] * 1e3:.0f} ms |")
    lines += ["", ("First call: a fresh interpreter's first statement that needs the parser "
                   "(its import and data loading). Import of scrubjay.windows after scrubjay "
                   "(the parser is imported on first use): "
                   f"{res['import_s']['scrubjay.windows'] * 1e3:.1f} ms."), "",
              "## Each parser alone (its own free-text search on the raw statement)", "",
              (f"| parser | window acc. {_SPLIT_NAMES} | stale acc. {_SPLIT_NAMES} "
               "| per statement |"),
              "|---|---|---|---|"]
    for name, r in res["alone"].items():
        lines.append(f"| {name} | {_three(r, 'window_accuracy')} | "
                     f"{_three(r, 'stale_accuracy')} | {r['mean_us']:.0f} µs |")
    sweep = res["bare_hour_sweep_train"]
    lines += ["", "## BARE_HOUR_PM_BELOW on the train split", "",
              "| value | " + " | ".join(sweep) + " |", "|---|" + "---|" * len(sweep),
              "| train window acc. | " + " | ".join(f"{v:.3f}" for v in sweep.values()) + " |",
              "", "## Test and holdout statements resolved wrong (default parser)", ""]
    lines += [f"- {w['id']} ({w['split']}): \"{w['text']}\": {w['got']}"
              for w in res["wrong"]] or ["none"]
    return "\n".join(lines) + "\n"


_SPLIT_NAMES = " / ".join(SPLITS)


def _three(r: dict[str, Any], key: str) -> str:
    return " / ".join(f"{r[s][key]:.3f}" for s in SPLITS)


def write_windows(res: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write ``windows.json`` and ``windows.md`` into ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "windows.json", "md": out_dir / "windows.md"}
    paths["json"].write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    paths["md"].write_text(_markdown(res), encoding="utf-8")
    return paths
