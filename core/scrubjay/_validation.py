"""Argument checks shared by the public API (private)."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import InvalidInputError, InvalidNamespaceError
from .types import MemoryRecord, Perishability

__all__ = ["PreparedItem", "check_k", "check_metadata", "check_namespace", "check_not_future",
           "check_text", "prepare_items", "to_epoch_s"]

#: Longest text accepted for a memory, a query or a context, in characters (chosen: about
#: 25 pages; an agent memory is a sentence or a paragraph, and a megabyte of text is a bug).
MAX_TEXT_CHARS = 100_000

#: Namespaces name Chroma collections, so they are restricted to a safe alphabet (chosen).
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$")

_META_SCALARS = (str, int, float, bool)


def check_text(value: Any, name: str, owner: str, *, allow_empty: bool = False) -> str:
    """Return ``value`` if it is a usable text, else raise :class:`InvalidInputError`."""
    if not isinstance(value, str):
        raise InvalidInputError(
            f"The {name!r} parameter of {owner} must be a str. Got {type(value).__name__} instead."
        )
    if not allow_empty and not value.strip():
        raise InvalidInputError(
            f"The {name!r} parameter of {owner} must be a non-empty str. Got {value!r} instead."
        )
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidInputError(
            f"The {name!r} parameter of {owner} must be at most {MAX_TEXT_CHARS} characters. "
            f"Got {len(value)} characters instead; split long documents into memories."
        )
    if "\x00" in value:
        raise InvalidInputError(
            f"The {name!r} parameter of {owner} must not contain NUL characters."
        )
    _check_utf8(value, f"The {name!r} parameter of {owner}")
    return value


def _check_utf8(value: str, what: str) -> None:
    """Lone surrogates cannot be stored (Chroma writes UTF-8): reject them before any write."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} must be valid Unicode text. Got a lone surrogate {value[exc.start]!r} at "
            f"position {exc.start} instead."
        ) from None


def check_k(value: Any, owner: str, name: str = "k") -> int:
    """Return ``value`` as a positive int, else raise :class:`InvalidInputError`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(
            f"The {name!r} parameter of {owner} must be an int >= 1. "
            f"Got {type(value).__name__} instead."
        )
    if value < 1 or value > 10_000:
        raise InvalidInputError(
            f"The {name!r} parameter of {owner} must be an int in [1, 10000]. Got {value} instead."
        )
    return value


def to_epoch_s(value: Any, owner: str, name: str = "at") -> float:
    """Convert an epoch-seconds number or an aware ``datetime`` to float epoch seconds.

    Raises :class:`InvalidInputError` for NaN, infinities, negative times, naive datetimes and
    other types.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidInputError(
                f"The {name!r} parameter of {owner} must be an aware datetime (with tzinfo) or "
                f"epoch seconds. Got the naive datetime {value.isoformat()} instead; use "
                f"datetime(..., tzinfo=timezone.utc)."
            )
        out = value.timestamp()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(
            f"The {name!r} parameter of {owner} must be epoch seconds (int or float) or an aware "
            f"datetime. Got {type(value).__name__} instead."
        )
    else:
        out = float(value)
    if not math.isfinite(out) or out < 0.0:
        raise InvalidInputError(
            f"The {name!r} parameter of {owner} must be a finite time >= 0 (epoch seconds). "
            f"Got {value!r} instead."
        )
    return out


def check_metadata(value: Any, owner: str) -> dict[str, Any]:
    """Validate user metadata: a mapping of str keys to JSON-like values (scalars or lists)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"The 'metadata' parameter of {owner} must be a mapping or None. "
            f"Got {type(value).__name__} instead."
        )
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > 256:
            raise InvalidInputError(
                f"The 'metadata' parameter of {owner} must have non-empty str keys of at most "
                f"256 characters. Got the key {key!r} instead."
            )
        _check_utf8(key, f"The 'metadata' parameter of {owner} (a key)")
        out[key] = _check_meta_value(item, key, owner)
    return out


def _check_meta_value(item: Any, key: str, owner: str, depth: int = 0) -> Any:
    if item is None or isinstance(item, _META_SCALARS):
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidInputError(
                f"The 'metadata' parameter of {owner} must hold finite numbers. "
                f"Got {item!r} for {key!r} instead."
            )
        if isinstance(item, str) and len(item) > MAX_TEXT_CHARS:
            raise InvalidInputError(
                f"The 'metadata' parameter of {owner} must hold strings of at most "
                f"{MAX_TEXT_CHARS} characters. Got {len(item)} for {key!r} instead."
            )
        if isinstance(item, str):
            _check_utf8(item, f"The 'metadata' parameter of {owner} ({key!r})")
        return item
    if depth < 4 and isinstance(item, (list, tuple)):
        return [_check_meta_value(x, key, owner, depth + 1) for x in item]
    if depth < 4 and isinstance(item, Mapping):
        return {str(k): _check_meta_value(v, key, owner, depth + 1) for k, v in item.items()}
    raise InvalidInputError(
        f"The 'metadata' parameter of {owner} must hold JSON values (str, int, float, bool, None, "
        f"lists and dicts of these). Got {type(item).__name__} for {key!r} instead."
    )


def check_namespace(value: Any, owner: str) -> str:
    """Return ``value`` if it is a safe namespace name, else raise :class:`InvalidNamespaceError`."""
    if not isinstance(value, str) or not _NAMESPACE_RE.fullmatch(value):
        raise InvalidNamespaceError(
            f"The 'namespace' parameter of {owner} must be 1-48 characters of letters, digits, "
            f"'_' or '-', starting with a letter or digit. Got {value!r} instead."
        )
    return value


#: A memory may be dated at most this far after the memory's clock (chosen: clock skew between
#: an agent and its host; anything later is almost surely a unit error, e.g. milliseconds).
MAX_FUTURE_SKEW_S = 300.0


@dataclass(slots=True)
class PreparedItem:
    """A validated item of ``add_many``."""

    text: str
    context: str
    at_s: float
    metadata: dict[str, Any]
    id: str
    id_given: bool
    """The caller chose the id (it may be stored already); else a fresh uuid4 (it is not)."""

    def record(self, perishability: Perishability, annotation: str,
               value: float) -> MemoryRecord:
        """The item's record, once classified."""
        return MemoryRecord(id=self.id, text=self.text, context=self.context,
                            label=perishability.label, pi=float(perishability.pi),
                            tau_s=float(perishability.tau_s), value=value,
                            created_at_s=float(self.at_s), metadata=self.metadata,
                            annotation=annotation, source=perishability.source)


def check_not_future(at_s: float, now: float, owner: str) -> None:
    """Refuse a memory time more than :data:`MAX_FUTURE_SKEW_S` after the memory's clock."""
    if at_s > now + MAX_FUTURE_SKEW_S:
        raise InvalidInputError(
            f"The 'at' parameter of {owner} must not be in the future (more than "
            f"{MAX_FUTURE_SKEW_S:g} s after the memory's clock). Got {at_s!r}, the clock "
            f"says {now!r}; pass epoch seconds (not milliseconds) or set clock=.")


def prepare_items(items: Iterable[str | Mapping[str, Any]], now: float,
              owner: str) -> list[PreparedItem]:
    """Validate the items of an ``add_many`` batch: every item before anything is written."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidInputError("The 'items' parameter of ScrubJayMemory.add_many must be an "
                                f"iterable of texts or mappings. Got {type(items).__name__} "
                                "instead.")
    out: list[PreparedItem] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, Mapping):
            raise InvalidInputError("Each item of ScrubJayMemory.add_many must be a str or a "
                                    f"mapping. Got {type(item).__name__} instead.")
        unknown = set(item) - {"text", "context", "at", "metadata", "id"}
        if unknown:
            raise InvalidInputError(f"Unknown keys {sorted(unknown)} in an item of "
                                    "ScrubJayMemory.add_many; allowed: text, context, at, "
                                    "metadata, id.")
        text = check_text(item.get("text"), "text", owner)
        context = check_text(item.get("context") or "", "context", owner, allow_empty=True)
        at = item.get("at")
        at_s = now if at is None else to_epoch_s(at, owner)
        check_not_future(at_s, now, owner)
        metadata = check_metadata(item.get("metadata"), owner)
        mid = item.get("id")
        given = mid is not None
        if not given:
            mid = uuid.uuid4().hex
        elif not isinstance(mid, str) or not mid.strip() or len(mid) > 256:
            raise InvalidInputError(f"The 'id' of an item of {owner} must be a non-empty str "
                                    f"of at most 256 characters. Got {mid!r} instead.")
        if mid in seen:
            raise InvalidInputError(f"The id {mid!r} occurs twice in one add_many batch.")
        seen.add(mid)
        out.append(PreparedItem(text=text, context=context, at_s=at_s, metadata=metadata,
                             id=mid, id_given=given))
    return out
