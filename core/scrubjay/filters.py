"""Metadata filters in Chroma's ``where`` grammar, checked and evaluated over a metadata dict.

Pure: no Chroma, no I/O. The integrations give these filters to their retrievers, vector store
and LangGraph store; the search over-fetches from the core's ranking and keeps the hits whose
user metadata matches (:func:`top_matching`).

Grammar (Chroma's, as langchain-chroma passes ``filter=`` through)::

    filter     := {field: value} | {field: {op: operand}} | {"$and": [filter, ...]}
                | {"$or": [filter, ...]}
    op         := $eq | $ne | $gt | $gte | $lt | $lte | $in | $nin

Semantics, as a Chroma collection answers (``tests/core/test_filters.py`` checks them against
one):

* ``{field: value}`` is ``{field: {"$eq": value}}``. Equality is typed: ``1 == 1.0``, but a bool
  equals only a bool (``True`` does not match ``1``) and a str only a str.
* ``$ne`` and ``$nin`` match every memory that ``$eq`` / ``$in`` do not, including those
  without the field.
* ``$gt``/``$gte``/``$lt``/``$lte`` take an int or float operand and match numbers only (not
  bools, not strings); ``$in``/``$nin`` take a non-empty list of values of one type.

Beyond Chroma (which rejects them), for the LangGraph store's values: several fields or
several operators in one mapping mean all of them (an implicit ``$and``); ``$and``/``$or`` take
one filter or more; a field's mapping without ``$`` keys matches a nested dict field by field;
a list or ``None`` value is matched by plain equality. Anything else, e.g. ``$contains``,
``$not`` or ``$regex``, raises :class:`~scrubjay.errors.FilterError` naming the operator:
never a silent empty result.

>>> matches({"kind": "fact", "year": 2024},
...         {"$and": [{"kind": "fact"}, {"year": {"$gte": 2020}}]})
True
>>> matches({"kind": "fact"}, {"kind": {"$in": ["plan", "task"]}})
False
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from .errors import FilterError

__all__ = ["COMPARISONS", "LOGICAL", "check_filter", "matches", "top_matching"]

#: The field operators supported.
COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
#: The logical operators supported.
LOGICAL = ("$and", "$or")
_ORDER = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}

#: First over-fetch factor of :func:`top_matching` (chosen: one widening usually suffices).
OVERFETCH = 4

H = TypeVar("H")


def _fail(message: str, where: Any) -> FilterError:
    return FilterError(f"{message} Got {where!r} instead.")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _scalar(x: Any) -> bool:
    return isinstance(x, (str, int, float)) and not (isinstance(x, float) and math.isnan(x))


def check_filter(where: Mapping[str, Any] | None) -> None:
    """Raise :class:`~scrubjay.errors.FilterError` unless ``where`` is in the grammar above.

    >>> check_filter({"year": {"$regex": "20.."}})
    Traceback (most recent call last):
    ...
    scrubjay.errors.FilterError: The filter operator '$regex' is not supported; use one of \
$eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $and, $or. Got {'$regex': '20..'} instead.
    """
    if where is None:
        return
    if not isinstance(where, Mapping):
        raise _fail("A metadata filter must be a mapping.", where)
    for key, value in where.items():
        if not isinstance(key, str):
            raise _fail("A metadata filter's keys must be str.", where)
        if key in LOGICAL:
            if not isinstance(value, Sequence) or isinstance(value, str) or not value:
                raise _fail(f"The filter operator {key!r} takes a non-empty list of filters.",
                            value)
            for sub in value:
                check_filter(sub)
        elif key.startswith("$"):
            raise _unsupported(key, where)
        else:
            _check_condition(value)


def _unsupported(op: str, where: Any) -> FilterError:
    return _fail(f"The filter operator {op!r} is not supported; use one of "
                 f"{', '.join(COMPARISONS + LOGICAL)}.", where)


def _check_condition(cond: Any) -> None:
    if not isinstance(cond, Mapping):
        return  # plain equality, any JSON value
    ops = [k for k in cond if isinstance(k, str) and k.startswith("$")]
    if not ops:  # a nested dict, field by field
        for sub in cond.values():
            _check_condition(sub)
        return
    if len(ops) != len(cond):
        raise _fail("A filter condition mixes operators and field names.", cond)
    for op, arg in cond.items():
        if op in ("$eq", "$ne"):
            continue
        if op in _ORDER:
            if not _is_number(arg):
                raise _fail(f"The filter operator {op!r} takes an int or a float.", cond)
        elif op in ("$in", "$nin"):
            if (not isinstance(arg, Sequence) or isinstance(arg, str) or not arg
                    or not all(_scalar(a) for a in arg)
                    or len({"bool" if isinstance(a, bool) else "number" if _is_number(a)
                            else "str" for a in arg}) != 1):
                raise _fail(f"The filter operator {op!r} takes a non-empty list of str, int "
                            "or float values of one type.", cond)
        else:
            raise _unsupported(op, cond)


def matches(metadata: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """Whether ``metadata`` passes ``where`` (checked first: see :func:`check_filter`)."""
    check_filter(where)
    return _matches(metadata, where)


def _matches(metadata: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    if not where:
        return True
    for key, value in where.items():
        if key == "$and":
            ok = all(_matches(metadata, sub) for sub in value)
        elif key == "$or":
            ok = any(_matches(metadata, sub) for sub in value)
        else:
            ok = _condition(metadata.get(key, _MISSING), value)
        if not ok:
            return False
    return True


_MISSING = object()


def _equal(value: Any, want: Any) -> bool:
    """Chroma's typed equality: numbers by value, a bool only to a bool, else same type."""
    if value is _MISSING:
        return False
    if isinstance(value, bool) or isinstance(want, bool):
        return isinstance(value, bool) and isinstance(want, bool) and value == want
    if _is_number(value) and _is_number(want):
        return float(value) == float(want)
    return type(value) is type(want) and bool(value == want)


def _condition(value: Any, cond: Any) -> bool:
    if not isinstance(cond, Mapping):
        return _equal(value, cond)
    if not any(k.startswith("$") for k in cond):
        return isinstance(value, Mapping) and all(
            _condition(value.get(k, _MISSING), sub) for k, sub in cond.items())
    for op, arg in cond.items():
        if op == "$eq":
            ok = _equal(value, arg)
        elif op == "$ne":
            ok = not _equal(value, arg)
        elif op == "$in":
            ok = any(_equal(value, a) for a in arg)
        elif op == "$nin":
            ok = not any(_equal(value, a) for a in arg)
        else:
            ok = _is_number(value) and _ORDER[op](float(value), float(arg))
        if not ok:
            return False
    return True


def top_matching(search: Callable[[int], list[H]], k: int, total: int,
                 keep: Callable[[H], bool]) -> list[H]:
    """The best ``k`` results of ``search(n)`` (best first) for which ``keep`` holds.

    ``search(n)`` returns the ``n`` best results of a ranking over ``total`` items; it is asked
    for ``OVERFETCH * k`` first, then ``OVERFETCH`` times more, until ``k`` pass or every item
    has been seen. The ranking is the caller's; nothing is re-scored here.
    """
    n = min(max(OVERFETCH * k, k), max(total, 1))
    while True:
        results = search(n)
        kept = [r for r in results if keep(r)]
        if len(kept) >= k or n >= total or len(results) < n:
            return kept[:k]
        n = min(OVERFETCH * n, total)
