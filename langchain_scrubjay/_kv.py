"""Key-value entries as memories, and back (private): the codec of :mod:`.storage`.

One key is one memory, whose id is :func:`kv_id` (a hash of the key) and whose metadata holds

* ``kv_key``: the key;
* ``kv_kind``: ``"bytes"``, ``"str"``, ``"document"`` or ``"json"``;
* ``kv_value``: the serialised value as a list of strings (base64 for bytes, JSON otherwise),
  each at most :data:`CHUNK_CHARS` characters, the core's limit for one metadata string (a
  list also keeps the core from copying a long value into a scalar filter key);
* ``kv_text``: True when the memory's text *is* the value (a ``str``) or its page content (a
  ``Document``); that part is then not stored twice.

The memory's text, the part that is embedded and searched, is the value for a ``str``, the page
content for a ``Document`` and the key for anything else (the first :data:`MAX_TEXT_CHARS`
characters, NUL removed; the key when that leaves nothing).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document
from scrubjay import InvalidInputError, MemoryRecord, StoreError

__all__ = ["CHUNK_CHARS", "MAX_KEY_CHARS", "MAX_TEXT_CHARS", "check_key", "kv_id",
           "record_to_value", "value_to_item"]

#: The core's longest memory text and metadata string (``scrubjay._validation``).
MAX_TEXT_CHARS = 100_000
#: Characters of one ``kv_value`` string (the core's metadata limit).
CHUNK_CHARS = MAX_TEXT_CHARS
#: Longest key (chosen: keys name values, e.g. a UUID or a namespace and a hash; a key of
#: kilobytes is a bug, and it is stored as a metadata string and embedded as a fallback text).
MAX_KEY_CHARS = 4096

KINDS = ("bytes", "str", "document", "json")


def check_key(key: Any, owner: str) -> str:
    """``key`` if it is a usable key, else :class:`~scrubjay.InvalidInputError`."""
    if not isinstance(key, str):
        raise InvalidInputError(f"The keys of {owner} must be str. Got {type(key).__name__} "
                                "instead.")
    if len(key) > MAX_KEY_CHARS or "\x00" in key or not _is_unicode(key):
        raise InvalidInputError(f"The keys of {owner} must be valid Unicode of at most "
                                f"{MAX_KEY_CHARS} characters, without NUL. Got {key[:40]!r} "
                                f"({len(key)} characters) instead.")
    return key


def kv_id(key: str) -> str:
    """The memory id of ``key``: ``kv-`` and 32 hex digits of its BLAKE2b hash.

    >>> kv_id("foo")
    'kv-04136e24f85d470465c3db66e58ed56c'
    """
    return "kv-" + hashlib.blake2b(key.encode("utf-8"), digest_size=16).hexdigest()


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _usable_text(text: str) -> bool:
    """True when the core stores ``text`` as a memory's text unchanged."""
    return (bool(text.strip()) and len(text) <= MAX_TEXT_CHARS and "\x00" not in text
            and _is_unicode(text))


def _json(obj: Any) -> str:
    """Compact JSON (non-ASCII kept, unless it holds a lone surrogate); no NaN/inf."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text if _is_unicode(text) else json.dumps(obj, allow_nan=False,
                                                     separators=(",", ":"))


def _exact_json(value: Any, owner: str, got: str) -> str:
    """``value`` as JSON, if it reads back equal (no tuples, non-str keys, sets, NaN...)."""
    try:
        text = _json(value)
        same = json.loads(text) == value
    except (TypeError, ValueError, RecursionError):
        same = False
    if not same:
        raise InvalidInputError(
            f"The values of {owner} must be bytes, str, a Document or a JSON value (dicts with "
            f"str keys, lists, str, int, float, bool, None; no NaN). Got {got} that does not "
            "round-trip through JSON instead.")
    return text


def _searchable(text: str, key: str) -> str:
    """The memory's text when ``text`` cannot be stored as it is."""
    for candidate in (text, key):
        clean = candidate.replace("\x00", "")[:MAX_TEXT_CHARS]
        clean = clean.encode("utf-8", "replace").decode("utf-8")
        if clean.strip():
            return clean
    return "(empty key)"


def value_to_item(key: str, value: Any, owner: str) -> dict[str, Any]:
    """The ``add_many`` item storing ``value`` under ``key`` (checked, nothing written)."""
    in_text = False
    if isinstance(value, bytes):
        kind, payload, text = "bytes", base64.b64encode(value).decode("ascii"), key
    elif isinstance(value, str):
        in_text = _usable_text(value)
        kind, text = "str", value
        payload = "" if in_text else _json(value)
    elif isinstance(value, Document):
        if type(value) is not Document:
            raise InvalidInputError(f"The Document values of {owner} must be Document itself. "
                                    f"Got the subclass {type(value).__name__} instead.")
        in_text = _usable_text(value.page_content)
        body: dict[str, Any] = {"metadata": value.metadata, "id": value.id}
        if not in_text:
            body["page_content"] = value.page_content
        kind, text = "document", value.page_content
        payload = _exact_json(body, owner, "a Document whose metadata")
    elif value is None or isinstance(value, (bool, int, float, list, dict)):
        kind, payload, text = "json", _exact_json(value, owner, f"a {type(value).__name__}"), key
    else:
        raise InvalidInputError(f"The values of {owner} must be bytes, str, a Document or a "
                                f"JSON value. Got {type(value).__name__} instead.")
    chunks = [payload[i:i + CHUNK_CHARS] for i in range(0, len(payload), CHUNK_CHARS)]
    return {"id": kv_id(key), "text": text if in_text else _searchable(text, key),
            "metadata": {"kv_key": key, "kv_kind": kind, "kv_value": chunks,
                         "kv_text": in_text}}


def record_to_value(rec: MemoryRecord) -> Any:
    """The value a memory written by :func:`value_to_item` holds.

    Raises :class:`~scrubjay.StoreError` when the memory is not a key-value entry.
    """
    meta: Mapping[str, Any] = rec.metadata
    kind, chunks = meta.get("kv_kind"), meta.get("kv_value")
    if kind not in KINDS or not isinstance(chunks, list):
        raise StoreError(f"The memory {rec.id!r} holds no key-value entry.")
    payload = "".join(str(c) for c in chunks)
    in_text = bool(meta.get("kv_text"))
    try:
        if kind == "bytes":
            return base64.b64decode(payload, validate=True)
        if kind == "str":
            return rec.text if in_text else json.loads(payload)
        if kind == "json":
            return json.loads(payload)
        body = json.loads(payload)
        return Document(page_content=rec.text if in_text else body["page_content"],
                        metadata=body["metadata"], id=body["id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"The memory {rec.id!r} holds an unreadable {kind} value.") from exc
