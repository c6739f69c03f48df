"""The learned supersession score: slot-independent features, one logistic regression.

:mod:`scrubjay.supersession` reads a memory's subject, slot cues and values with rules, and
those rules were written while looking at their training slots: on slots written after them
they over-flag and miss updates. This model decides with features that name no slot:

========================  =====================================================================
feature                   what it measures (``o`` the older memory, ``n`` the new one)
========================  =====================================================================
``cosine``                the what-cosine of ``o`` and ``n``
``overlap``               Jaccard overlap of their content-word stems
``shared``                1 when they share a content word
``update_cue``            ``n`` says something changed ("now", "moved", "switched", "went up")
``replace_cue``           ``n`` says the old one is gone ("instead", "no longer", "used to")
``negation``              ``n`` ends a state ("stopped", "quit", "cancelled", "retired")
``coexist``               either side states a taste, an addition or one of several
``typed_change``          a number, time, weekday or month of ``o`` is replaced in ``n``
``same_subject``          :func:`~scrubjay.supersession.subjects_match`
``old_update_cue``        ``o`` itself was an update
``swap``                  ``o`` and ``n`` are one sentence with one span swapped after the
                          predicate ("... the sport of ice hockey" / "... the sport of
                          pesapallo"): the share of tokens kept
``subject_swap``          the swapped span starts inside the subject ("note 3 about ..." /
                          "note 9 about ..."; "the 8:15 to Leeds" / "the 8:20 to York"): two
                          things, not two values
========================  =====================================================================

The score is ``sigmoid(w . phi(x) + b)`` where ``phi`` appends every pairwise product of the
features (so that, for example, a swap counts for more when the subject is the same). The
weights and the threshold are fitted by ``scrubjay bench supersession`` on the training slots
of the bundled labelled pairs plus, beside each, the nearest old memories of other slots
(what a caller comparing a new memory with its nearest memories meets); the threshold is the
one of highest recall whose out-of-fold precision, grouped by slot, is at least 0.95. They ship
in ``data/update_model.json``; a test pins that file to a refit.

Pure: numpy and the standard library.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
from numpy.typing import NDArray

from .errors import InvalidInputError
from .supersession import (
    _COEXIST_RE,
    _NEGATION_RE,
    _REPLACE_RE,
    _UPDATE_RE,
    Claim,
    _stem,
    subjects_match,
)

__all__ = ["BASE_FEATURES", "UpdateModel", "default_update_model", "expand", "numbers_only",
           "subject_swap", "update_features"]

BASE_FEATURES = ("cosine", "overlap", "shared", "update_cue", "replace_cue", "negation",
                 "coexist", "typed_change", "same_subject", "old_update_cue", "swap",
                 "subject_swap")
"""The features before :func:`expand`, in order."""

_STOP = frozenset(
    ["i", "me", "my", "we", "our", "us", "you", "your", "the", "a", "an", "is", "are", "was", "were", "be", "been", "am", "to", "of", "in", "on", "at", "for", "with", "and", "or", "it", "its", "this", "that", "these", "those", "has", "have", "had", "do", "does", "did", "will", "would", "can", "could", "so", "as", "by", "from", "about", "into", "than", "then", "there", "their", "they", "he", "she", "his", "her", "him", "them", "what", "which", "who", "when", "where", "how", "just", "also", "too", "very", "really"])
_TOKEN = re.compile(r"[a-z0-9][a-z0-9'.:-]*")
_TYPED = re.compile(
    r"\b(?:\d[\w:.]*|(?:mon|tues|wednes|thurs|fri|satur|sun)days?|january|february|march|"
    r"april|may|june|july|august|september|october|november|december)\b")
#: A verb that starts the predicate: a swap after one changes a value of the subject; a swap
#: before any ("the printer on floor 2" / "the printer on floor 3") names another thing.
_PREDICATE = frozenset({
    "is", "are", "was", "were", "be", "been", "am", "has", "have", "had", "'s", "'re", "will",
    "would", "can", "could", "shall", "should", "may", "might", "must", "do", "does", "did"})


def _tokens(text: str) -> list[str]:
    return [w.strip(".:'") for w in _TOKEN.findall(text.lower())]


def _content(tokens: Sequence[str]) -> set[str]:
    return {_stem(w) for w in tokens if w and w not in _STOP and not _UPDATE_RE.fullmatch(w)}


def _swap(a: Sequence[str], b: Sequence[str]) -> tuple[float, float]:
    """``(swap, subject_swap)``: the share of tokens in the common prefix and suffix when one
    span differs, and whether that span starts before the predicate."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    if i in (0, len(a), len(b)):
        return 0.0, 0.0
    j = 0
    while j < n - i and a[-1 - j] == b[-1 - j]:
        j += 1
    if not any(w in _PREDICATE or (len(w) > 3 and w.endswith("ed"))
               or (k > 0 and w.endswith("s")) for k, w in enumerate(a[:i])):
        # before the predicate: two identifiers ("note 3" / "note 9") name two things
        if any(c.isdigit() for c in a[i]) and any(c.isdigit() for c in b[i]):
            return 0.0, 1.0
        return 0.0, 0.0
    return (i + j) / max(len(a), len(b)), 0.0


def subject_swap(old: str, new: str) -> bool:
    """``old`` and ``new`` are one sentence with a span swapped inside its subject (before the
    predicate starts): "a note 3 about topic 3" / "a note 7 about topic 3", "the 8:15 to
    Leeds leaves from platform 4" / "the 8:20 to York leaves from platform 6"."""
    return _swap(_tokens(old), _tokens(new))[1] > 0.0


def numbers_only(old: str, new: str) -> bool:
    """``old`` and ``new`` are the same words but for whole numbers at the same places ("note 3
    about topic 1" / "note 9 about topic 1", "week 5" / "week 9"): an enumeration, unless
    something else says it is an update (see :func:`scrubjay.supersession.score_candidates`)."""
    a, b = _tokens(old), _tokens(new)
    if len(a) != len(b) or a == b:
        return False
    return all(x == y or (x.isdigit() and y.isdigit()) for x, y in zip(a, b, strict=True))


#: Words that number things rather than measure them: "note 3" / "note 9" are two notes.
_ORDINAL_LABELS = frozenset({
    "note", "notes", "item", "items", "entry", "step", "part", "chapter", "page", "day",
    "message", "turn", "record", "row", "line", "test", "case", "sample", "example", "number",
    "no", "episode", "session", "lesson", "ticket", "issue", "task", "question"})


def numbered_things(old: str, new: str) -> bool:
    """:func:`numbers_only`, and every number that differs follows a word that numbers things
    ("the meeting room on floor 2 note 1" / "... note 4", "visits Oslo on day 1" / "on day
    3"): an enumeration even where both name a slot of the lexicon."""
    a, b = _tokens(old), _tokens(new)
    if not numbers_only(old, new):
        return False
    return all(i > 0 and a[i - 1] in _ORDINAL_LABELS
               for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)


def restates(old: str, new: str) -> bool:
    """One of ``old`` and ``new`` holds the other's words in a row ("I am parked on level 3" /
    "user: I am parked on level 3 right now"): a restatement or a quote, which brings no new
    value, unless something else says it is an update (see
    :func:`scrubjay.supersession.score_candidates`)."""
    a, b = _tokens(old), _tokens(new)
    if not a or not b:
        return False
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    n = len(short)
    return any(long_[i:i + n] == short for i in range(len(long_) - n + 1))


def update_features(old: str, new: str, cosine: float, old_claim: Claim,
                    new_claim: Claim) -> tuple[float, ...]:
    """The :data:`BASE_FEATURES` of the pair (see the module docstring)."""
    lo, ln = old.lower(), new.lower()
    to, tn = _tokens(old), _tokens(new)
    co, cn = _content(to), _content(tn)
    shared = co & cn
    typed_o, typed_n = set(_TYPED.findall(lo)), set(_TYPED.findall(ln))
    return (
        float(np.clip(cosine, -1.0, 1.0)),
        len(shared) / max(1, len(co | cn)),
        1.0 if shared else 0.0,
        1.0 if _UPDATE_RE.search(ln) else 0.0,
        1.0 if _REPLACE_RE.search(ln) else 0.0,
        1.0 if _NEGATION_RE.search(ln) else 0.0,
        1.0 if _COEXIST_RE.search(ln) or _COEXIST_RE.search(lo) else 0.0,
        1.0 if typed_o and typed_n - typed_o else 0.0,
        1.0 if subjects_match(old_claim, new_claim) else 0.0,
        1.0 if _UPDATE_RE.search(lo) else 0.0,
        *_swap(to, tn),
    )


def expand(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """The rows of ``x`` (``(n, d)``) followed by every pairwise product of their columns."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    i, j = np.triu_indices(x.shape[1], k=1)
    return np.hstack([x, x[:, i] * x[:, j]])


def n_expanded(d: int = len(BASE_FEATURES)) -> int:
    return d + d * (d - 1) // 2


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateModel:
    """Weights over :func:`expand` of :data:`BASE_FEATURES`, bias, threshold."""

    weights: tuple[float, ...]
    bias: float
    threshold: float
    """A pair supersedes iff its score is at least this."""
    llm_floor: float = 0.2
    """Candidates scoring at least this are shown to a chat model for confirmation."""

    def __post_init__(self) -> None:
        if len(self.weights) != n_expanded():
            raise InvalidInputError(f"The 'weights' parameter of UpdateModel must have "
                                    f"{n_expanded()} entries. Got {len(self.weights)} instead.")
        for name in ("threshold", "llm_floor"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InvalidInputError(f"The '{name}' parameter of UpdateModel must be in "
                                        f"[0, 1]. Got {value!r} instead.")

    def score(self, x: Sequence[float]) -> float:
        z = float(expand(np.asarray([x]))[0] @ np.asarray(self.weights)) + self.bias
        return 1.0 / (1.0 + math.exp(-z)) if z > -500 else 0.0

    def to_json(self) -> str:
        return json.dumps({"features": list(BASE_FEATURES), "weights": list(self.weights),
                           "bias": self.bias, "threshold": self.threshold,
                           "llm_floor": self.llm_floor}, indent=1) + "\n"


@lru_cache(maxsize=1)
def default_update_model() -> UpdateModel:
    """The shipped model (``data/update_model.json``)."""
    raw = json.loads(resources.files("scrubjay").joinpath("data/update_model.json")
                     .read_text(encoding="utf-8"))
    if tuple(raw["features"]) != BASE_FEATURES:
        raise InvalidInputError("data/update_model.json was fitted on other features; refit "
                                "it with `scrubjay bench supersession --write-model`.")
    return UpdateModel(weights=tuple(float(v) for v in raw["weights"]), bias=float(raw["bias"]),
                       threshold=float(raw["threshold"]),
                       llm_floor=float(raw.get("llm_floor", 0.2)))
