"""Argument checks shared by the public API (private)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .errors import InvalidInputError, InvalidNamespaceError

__all__ = ["check_k", "check_metadata", "check_namespace", "check_text", "to_epoch_s"]

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
