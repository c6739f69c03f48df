"""Why a memory is outdated, and since when: the marker an LLM reads before a stale fact.

Pure functions of a record (or a hit) and the query time; the LangChain and LlamaIndex
integrations call them so that a stale memory's text reads the same in both::

    [outdated since 2025-11-24 10:32 UTC: decayed] I am parked on level 3 right now

Reasons, strongest first:

* ``superseded``: another memory replaced it (the record's ``superseded_by``, with
  ``invalidated_at_s`` as the time, once it has passed); the marker quotes the newer memory, shortened;
* ``window ended``: its validity window closed (``valid_until_s`` at or before the query time);
* ``decayed``: its utility fell below the stale threshold (paper Eq. 3). Since
  ``U / V = exp(-pi age / tau)``, that happened at ``created + tau ln(1 / stale_ratio) / pi``
  (:func:`scrubjay.decay.stale_age_s`), or when RCI last updated it if that is later (an update
  can make a memory stale at once); a memory whose value RCI drove to 0 is stale from that
  update.

``superseded_by``, ``invalidated_at_s`` and ``valid_until_s`` are read with ``getattr`` from the hit
and its record (:class:`~scrubjay.types.MemoryRecord` carries them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from .decay import stale_age_s

__all__ = ["STALE_KEYS", "Staleness", "mark", "marker", "stale_metadata", "staleness",
           "staleness_in", "unmark"]

Reason = Literal["decayed", "superseded", "window ended"]

#: The metadata keys :func:`stale_metadata` writes.
STALE_KEYS = ("stale", "stale_reason", "stale_since", "stale_since_s", "superseded_by")
_MARKER = re.compile(r"^\[outdated since \d{4}-\d\d-\d\d \d\d:\d\d UTC: "
                     r"(?:decayed|window ended|superseded by: .*?)\] ", re.DOTALL)

#: Longest quote of a superseding memory in a marker (chosen: one short clause).
QUOTE_CHARS = 60


@dataclass(frozen=True, slots=True, kw_only=True)
class Staleness:
    """Why a memory is outdated and since when."""

    reason: Reason
    since_s: float
    """When it became outdated, epoch seconds."""
    superseded_by: str | None = None
    """The text of the memory that replaced it, shortened (``reason == "superseded"``)."""


def _attr(item: Any, name: str) -> Any:
    value = getattr(item, name, None)
    if value is None:
        value = getattr(getattr(item, "record", None), name, None)
    return value


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _shorten(text: str) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= QUOTE_CHARS:
        return one_line
    cut = one_line[:QUOTE_CHARS - 3]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "..."


def staleness(item: Any, *, at_s: float, stale_ratio: float, stale: bool | None = None,
              lookup: Callable[[str], str | None] | None = None) -> Staleness | None:
    """Why ``item`` (a :class:`~scrubjay.types.Hit` or a record) is outdated at ``at_s``, or
    ``None`` when it is not.

    ``stale`` is the core's decay verdict (a hit's ``stale``); ``None`` computes it from the
    record. ``lookup`` maps a superseding memory's id to its text (a ``superseded_by`` that is
    not an id, e.g. a text or a record, is quoted as it is).
    """
    record = getattr(item, "record", item)
    newer = _attr(item, "superseded_by")
    replaced_at = _epoch(_attr(item, "invalidated_at_s"))
    if newer is not None and (replaced_at is None or replaced_at <= at_s):
        text = getattr(newer, "text", None)
        if text is None:
            text = (lookup(str(newer)) if lookup is not None else None) or str(newer)
        since = replaced_at
        if since is None:
            since = record.updated_at_s if record.updated_at_s is not None else record.created_at_s
        return Staleness(reason="superseded", since_s=float(since),
                         superseded_by=_shorten(str(text)))
    until = _epoch(_attr(item, "valid_until_s"))
    if until is not None and until <= at_s:
        return Staleness(reason="window ended", since_s=until)
    start = getattr(record, "valid_from_s", None)
    since = decayed_since(record.value, record.pi, record.tau_s,
                          record.created_at_s if start is None else start,
                          record.updated_at_s, stale_ratio)
    if stale is None:
        stale = since <= at_s
    if not stale:
        return None
    return Staleness(reason="decayed", since_s=min(since, float(at_s)))


def staleness_in(memory: Any, item: Any, at_s: float) -> Staleness | None:
    """:func:`staleness` of ``item`` (a hit or a record) of ``memory`` (a
    :class:`~scrubjay.ScrubJayMemory`): its stale threshold, a hit's own stale flag, and its
    memories' texts for a superseding id."""
    def text_of(mid: str) -> str | None:
        return str(memory.get(mid).text) if mid in memory else None

    hit_stale = getattr(item, "stale", None) if hasattr(item, "record") else None
    return staleness(item, at_s=at_s, stale_ratio=float(memory.config.decay.stale_ratio),
                     stale=hit_stale if isinstance(hit_stale, bool) else None, lookup=text_of)


def decayed_since(value: float, pi: float, tau_s: float, created_at_s: float,
                  updated_at_s: float | None, stale_ratio: float) -> float:
    """When a memory's utility fell below ``stale_ratio`` of its value (see the module doc).

    >>> round(decayed_since(1.0, 0.9, 7200.0, 0.0, None, 0.5) / 3600, 2)   # ephemeral
    1.54
    """
    if value <= 0:
        return float(created_at_s if updated_at_s is None else updated_at_s)
    since = created_at_s + stale_age_s(pi, tau_s, stale_ratio)
    return float(since if updated_at_s is None else max(since, updated_at_s))


def _when(t_s: float) -> str:
    return f"{datetime.fromtimestamp(t_s, tz=UTC):%Y-%m-%d %H:%M} UTC"


def marker(st: Staleness) -> str:
    """The short marker put before an outdated memory's text.

    >>> marker(Staleness(reason="decayed", since_s=1_764_000_000.0))
    '[outdated since 2025-11-24 16:00 UTC: decayed]'
    >>> marker(Staleness(reason="superseded", since_s=0.0, superseded_by="Parked on level 5"))
    '[outdated since 1970-01-01 00:00 UTC: superseded by: Parked on level 5]'
    """
    why = f"superseded by: {st.superseded_by}" if st.reason == "superseded" else st.reason
    return f"[outdated since {_when(st.since_s)}: {why}]"


def mark(text: str, st: Staleness | None) -> str:
    """``text`` with the marker of ``st`` before it (unchanged when ``st`` is ``None``)."""
    return text if st is None else f"{marker(st)} {text}"


def unmark(text: str) -> str:
    """``text`` without a leading marker (a marked document given back to a memory).

    >>> unmark("[outdated since 2025-11-24 17:32 UTC: decayed] parked on level 3")
    'parked on level 3'
    """
    return _MARKER.sub("", text, count=1)


def stale_metadata(st: Staleness) -> dict[str, Any]:
    """The metadata of an outdated memory: ``stale``, ``stale_reason``, ``stale_since`` (ISO
    8601, UTC), ``stale_since_s`` (epoch seconds) and, when superseded, ``superseded_by``."""
    out: dict[str, Any] = {
        "stale": True, "stale_reason": st.reason,
        "stale_since": datetime.fromtimestamp(st.since_s, tz=UTC).isoformat(),
        "stale_since_s": float(st.since_s)}
    if st.superseded_by is not None:
        out["superseded_by"] = st.superseded_by
    return out
