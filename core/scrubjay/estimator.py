"""The offline perishability estimator: text and context -> (label, pi, tau) without an LLM.

The paper's keyword fallback knows a dozen words. This estimator is a small linear model that we
train on ``data/perishability_statements.jsonl`` (statements an agent might remember, each with a
realistic validity lifetime; see ``data/README_perishability.md``). It predicts the log10
lifetime and the label from:

* the bundled ``wordllama`` embedding of the text and, scaled, of the context;
* hashed unigrams and bigrams of the text and of the context;
* counts of hand-written cue patterns (progressive aspect, "right now", durations, habitual and
  identity words, ...).

Model: ridge regressions (closed form, dual) from the *train* split only; the held-out *test*
split is for evaluation (``scrubjay perishability evaluate``). One output scores each label
(one-hot targets). The lifetime is modelled *ordinally*: for each age ``a`` of a fixed log grid
(``LIFETIME_GRID_LOG10``, 10 s to 100 years) one output estimates ``P(lifetime < a)`` (0/1
targets), the scores are made monotone in ``a``, and the predicted lifetime is the age where they
cross 1/2, i.e. an estimate of the *median* lifetime. A single regression on log lifetime
estimates the mean instead, which sits between the modes when a statement could be minutes or
decades and shrinks every prediction toward the middle; the stale/valid decision at an age is
exactly "is P(lifetime < age) above 1/2", which the ordinal outputs estimate directly
(``scrubjay perishability cv``: on the train split, 5 folds grouped by domain, 0.875
stale/valid accuracy against 0.847 for the regression on log lifetime). ``scrubjay
perishability train`` re-fits it deterministically and writes the weights shipped in
``data/perishability_model.npz``.

The context only nudges the lifetime: the prediction is the crossing for the text alone
(context ``""``) moved towards the crossing with the context by at most
``FeatureSpec.context_nudge_decades`` (:data:`CONTEXT_NUDGE_DECADES`), so that a free-form
context string ("work", "commute", "chat with Sam") cannot move a lifetime by more than a
factor 2.5 (it used to move them 8-100x; ``scrubjay perishability lifetimes``). Besides the
statements' train split, the model is fitted on the train split of the everyday-lifetimes set
(``scrubjay.bench.lifetimes``), whose rows give a range ``[lo, hi]`` instead of one lifetime.

A predicted lifetime ``L`` becomes perishability as follows: the label's pi is the paper's value
for that class (ephemeral 0.9, task_specific 0.6, procedural 0.3, factual 0.1), and
``tau = L * pi / ln(1 / stale_ratio)``, so that the memory turns stale exactly at age ``L``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import threading
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .embedding import Embedder, WordLlamaEmbedder
from .types import Perishability

__all__ = [
    "CONTEXT_NUDGE_DECADES",
    "LABELS",
    "LIFETIME_GRID_LOG10",
    "FeatureSpec",
    "LifetimeModel",
    "featurize",
    "lifetime_to_perishability",
    "load_default_model",
    "load_statements",
    "median_crossing",
    "train_model",
]

LABELS: tuple[str, ...] = ("ephemeral", "task_specific", "procedural", "factual")
#: pi per label when the estimator answers: the paper's keyword-rule values (SPEC §2).
LABEL_PI = {"ephemeral": 0.9, "task_specific": 0.6, "procedural": 0.3, "factual": 0.1}

#: The ages (log10 seconds) of the ordinal outputs: 10 s to 100 years, 30 points. Chosen to span
#: the data's lifetimes; deliberately not the evaluation's age grid.
LIFETIME_GRID_LOG10: NDArray[np.float64] = np.linspace(1.0, 9.5, 30)

_TOKEN = re.compile(r"[a-z0-9']+")

#: Cue patterns (chosen by reading the training split's errors; never the test split).
CUES: dict[str, str] = {
    "progressive": r"\b(i'm|i am|we're|we are|he's|she's|it's|they're|is|are|am)\s+(\w+ing)\b",
    "now": r"\b(right now|just|currently|at the moment|still|shortly|for now|in the middle of|"
           r"on my way|about to)\b",
    "seconds_minutes": r"\b(seconds?|minutes?|mins?)\b",
    "hours_tonight": r"\b((\d+|an?|few|couple of|one|two|three|four|five|six|several|the next|"
                     r"half an) hours?|tonight|this (morning|afternoon|evening)|lunch ?time|noon|"
                     r"o'clock|\d{1,2}(:\d\d)? ?(am|pm|a\.m\.|p\.m\.))\b",
    "days": r"\b(tomorrow|yesterday|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
            r"weekend|days?)\b",
    "weeks_months": r"\b(weeks?|fortnight|months?|january|february|march|april|may|june|july|"
                    r"august|september|october|november|december|this year|next year|season|"
                    r"semester|term)\b",
    "years": r"\b(years?|decades?|lifelong|for life|forever|ever since|since (childhood|birth|"
             r"i was))\b",
    "habitual": r"\b(every|always|never|whenever|usually|each|tends? to|prefer|prefers|likes?|"
                r"loves?|hates?)\b",
    "identity": r"\b(born|allergic|diagnosed|handed|blind|deaf|twin|grew up|native|inherited|"
                r"chronic|type 1|genetic|listed|owns?|married|divorced)\b",
    "past": r"\b(was|were|had|did|broke|bought|moved|started|finished|got|went)\b",
    "future": r"\b(will|going to|gonna|next|upcoming|due|until|by (the|next|end))\b",
    "situated": r"\b(i'm|i am|we're|he's|she's|they're|it's|is|are)\s+(at|in|on|outside|inside|"
                r"by|with|stuck|waiting|sitting|standing|parked|out|off|away|home|back|here|"
                r"there|busy|late|running)\b",
    "duration_short": r"\bfor (a |an |the )?(few |couple of |\d+ |one |two |three |five |ten |"
                      r"twenty |thirty |fifteen )?(seconds?|minutes?|mins?|hours?)\b",
    "condition": r"\b(so|because|until|while|after|before|when)\b",
    "numbers": r"\b(\d+|one|two|three|four|five|ten|twenty|thirty|fifteen|forty|sixty)\b",
    "first_person_state": r"\b(i feel|i'm feeling|i'm tired|i'm hungry|my (head|back|stomach|"
                          r"battery|phone)\b)",
    "whereabouts": r"\b(parked|left (the|my|our) (car|van|bike|scooter)|locked to|(bay|spot|space|"
                   r"row|level|slot|platform|gate|seat) [a-z]?\d+[a-z]?)\b",
    "imperative": r"^(please |don't |do not |remember |make sure |use |check |keep |put |rest |"
                  r"hold |add |set |turn |press |open |run |always |never )",
}
_CUE_RX = [re.compile(p, re.IGNORECASE) for p in CUES.values()]
#: Joins a batch's texts for :func:`_cues`: a character no pattern matches.
_SEP = "\x00"
#: The same patterns, case-sensitive, for lower-cased ASCII texts joined by ``_SEP`` (``^``
#: becomes "at the start or after ``_SEP``"): the same matches there (the patterns are lower
#: case; only non-ASCII letters such as U+212A KELVIN SIGN fold differently) at about 1.7x the
#: speed of ``re.IGNORECASE``.
_CUE_RX_JOINED = [re.compile("(?<![^\x00])" + p[1:] if p.startswith("^") else p)
                  for p in CUES.values()]


def _required(items: Any) -> set[str] | None:
    """Strings one of which every match of the parsed pattern ``items`` contains (``None``:
    none found). Sound for case-sensitive patterns: a run of literals is matched as it is
    written, a group or a repeat of at least one matches its body, a branch one of its
    alternatives, a class one of its characters (``\\d``: an ASCII digit, so for ASCII text
    only); assertions match no characters and anything else is passed over. Of the sets
    found, the one whose shortest string is longest (then the smallest) is kept."""
    from re import _constants as sre  # type: ignore[attr-defined]  # CPython 3.11+

    best: set[str] | None = None

    def consider(found: set[str] | None) -> None:
        nonlocal best
        if found and all(found) and (best is None or (min(map(len, found)), -len(found))
                                     > (min(map(len, best)), -len(best))):
            best = found

    run: list[str] = []
    for op, av in items:
        if op is sre.LITERAL:
            run.append(chr(av))
            continue
        consider({"".join(run)} if run else None)
        run = []
        if op is sre.SUBPATTERN and not av[1] and not av[2]:  # no inline flags
            consider(_required(av[3]))
        elif op is sre.BRANCH:
            alts = [_required(alt) for alt in av[1]]
            consider(None if any(a is None for a in alts) else set().union(*alts))  # type: ignore[arg-type]
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and av[0] >= 1:
            consider(_required(av[2]))
        elif op is sre.IN:
            chars: set[str] = set()
            for kind, arg in av:
                if kind is sre.LITERAL:
                    chars.add(chr(arg))
                elif kind is sre.CATEGORY and arg is sre.CATEGORY_DIGIT:
                    chars.update("0123456789")
                else:
                    chars = set()
                    break
            consider(chars or None)
    consider({"".join(run)} if run else None)
    return best


def _anchors(pattern: str) -> tuple[str, ...] | None:
    """:func:`_required` of ``pattern``, sorted; ``None`` when the parser is not CPython's or
    nothing is found (the pattern then scans every text)."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        found = _required(_parser.parse(pattern))
    except (ImportError, AttributeError, TypeError, ValueError, re.error):  # other internals
        return None
    return tuple(sorted(found)) if found else None


#: Per joined pattern, strings one of which each of its matches contains: a text holding none
#: of them is not scanned (``str.find`` is far faster than the patterns' ``\b`` scans). None
#: for the ``^`` patterns (they fail fast already) and where none is found.
_CUE_ANCHORS = [None if p.startswith("^") else _anchors(rx.pattern)
                for p, rx in zip(CUES.values(), _CUE_RX_JOINED, strict=True)]


#: The context only nudges the lifetime: the prediction is the text's own (context ``""``)
#: moved towards the one with the context by at most this many decades (a factor 1.58 each
#: way), so that no two contexts give one text lifetimes more than 10**0.4 = 2.5x apart, and
#: each is within a factor 3 of their median. Chosen: the largest value on the grid 0, 0.05,
#: ..., 0.25 that keeps that guarantee; in 5-fold cross-validation on the train split the
#: stale/valid accuracy is flat over the grid (0.865-0.866, ``docs/lifetimes.md``), while the
#: unbounded context moves lifetimes 8-100x with free-form context strings.
CONTEXT_NUDGE_DECADES = 0.2


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureSpec:
    """Scales of the feature blocks (chosen by 5-fold cross-validation grouped by domain on the
    train split)."""

    context_embedding: float = 0.6
    text_bow: float = 1.0
    context_bow: float = 0.5
    cues: float = 0.8
    bow_dim: int = 4096
    ridge: float = 2.0
    context_nudge_decades: float = CONTEXT_NUDGE_DECADES
    """How far the context may move the predicted lifetime from the text's own (log10 s)."""


def _hashed(feature: str, dim: int) -> int:
    h = hashlib.blake2b(feature.encode(), digest_size=4).digest()
    return int.from_bytes(h, "little") % dim


def _bow_columns(text: str, dim: int) -> list[int]:
    """The distinct hashed columns of the unigrams and bigrams of ``text``, ascending (each
    weighs 1 before the row is normalised, so a row's norm is ``sqrt(len(columns))``)."""
    toks = _TOKEN.findall(text.lower())
    feats = set(toks) | {f"{a} {b}" for a, b in itertools.pairwise(toks)}
    return sorted({_hashed(f, dim) for f in feats})


class _Columns(dict[str, int]):
    """Feature -> hashed column for one ``dim``, filled on lookup (``map(cols.__getitem__,
    ...)`` runs without a Python frame per known feature); cleared when it reaches
    ``_COLUMNS_MAX`` entries."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def __missing__(self, feature: str) -> int:
        if len(self) >= _COLUMNS_MAX:
            self.clear()
        col = self[feature] = _hashed(feature, self.dim)
        return col


_COLUMNS_MAX = 262_144
_COLUMNS: dict[int, _Columns] = {}


def _bow_rows(texts: Sequence[str], dim: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """:func:`_bow_columns` of each text at once: ``(sizes, flat)``, the rows' column lists
    concatenated (``flat``) and their lengths. The features of all texts are hashed through
    one cache and made distinct and ascending per row by one sort."""
    cols = _COLUMNS.get(dim)
    if cols is None:
        cols = _COLUMNS.setdefault(dim, _Columns(dim))
    look, find, pair = cols.__getitem__, _TOKEN.findall, " ".join
    keys: list[int] = []  # row * dim + column, per feature
    for row, text in enumerate(texts):
        toks = find(text.lower())
        at = (row * dim).__add__
        keys.extend(map(at, map(look, toks)))
        keys.extend(map(at, map(look, map(pair, itertools.pairwise(toks)))))
    key = np.sort(np.fromiter(keys, np.intp, len(keys)))
    if len(key):  # distinct (np.unique is about 10x slower here)
        first = np.empty(len(key), bool)
        first[0] = True
        np.not_equal(key[1:], key[:-1], out=first[1:])
        key = key[first]
    row_of, flat = np.divmod(key, dim)
    return np.bincount(row_of, minlength=len(texts)).astype(np.intp), flat


def _bow(texts: Sequence[str], dim: int) -> NDArray[np.float32]:
    out = np.zeros((len(texts), dim), np.float32)
    sizes, flat = _bow_rows(texts, dim)
    rows = np.repeat(np.arange(len(texts)), sizes)
    out[rows, flat] = np.repeat(1.0 / np.sqrt(np.maximum(sizes, 1)), sizes)
    return out


def _cues(texts: Sequence[str]) -> NDArray[np.float32]:
    """Matches of each cue per text, capped at 2.

    The lower-cased ASCII texts are joined with ``_SEP`` and each pattern scans the join once
    (:data:`_CUE_RX_JOINED`), its matches counted per text by position: the counts of a scan
    per text (no pattern can match ``_SEP``, so no match spans two texts), without a call per
    text and pattern. Other texts (non-ASCII, or holding ``_SEP``) are scanned one by one.
    """
    out = np.zeros((len(texts), len(_CUE_RX)), np.float32)
    joined: list[int] = []
    for i, text in enumerate(texts):
        if text.isascii() and _SEP not in text:
            joined.append(i)
        else:
            out[i] = [min(2, len(rx.findall(text))) for rx in _CUE_RX]
    if not joined:
        return out
    low = [texts[i].lower() for i in joined]
    big = _SEP.join(low)
    size = np.fromiter(map(len, low), np.intp, len(low)) + len(_SEP)
    start = np.cumsum(size) - size
    rows = np.asarray(joined, np.intp)
    starts, ends = start.tolist(), (start + size - 1).tolist()
    for j, rx in enumerate(_CUE_RX_JOINED):
        anchors = _CUE_ANCHORS[j]
        if anchors is None:  # every text
            part, part_start, part_rows = big, start, rows
        else:  # the texts holding an anchor, joined again
            has = bytearray(len(low))
            for anchor in anchors:
                pos = big.find(anchor)
                while pos >= 0:
                    k = bisect_right(starts, pos) - 1
                    has[k] = 1
                    pos = big.find(anchor, ends[k])  # on from the next text
            keep = np.flatnonzero(np.frombuffer(has, np.uint8))
            if not len(keep):
                continue
            part = _SEP.join([low[k] for k in keep.tolist()])
            part_start = np.cumsum(size[keep]) - size[keep]
            part_rows = rows[keep]
        at = [m.start() for m in rx.finditer(part)]
        if at:
            hits = np.bincount(np.searchsorted(part_start, at, side="right") - 1,
                               minlength=len(part_rows))
            out[part_rows, j] = np.minimum(2, hits)
    return out


def featurize(texts: Sequence[str], contexts: Sequence[str], spec: FeatureSpec,
              embedder: Embedder) -> NDArray[np.float32]:
    """The feature matrix of the estimator (one row per text), with a bias column."""
    a = embedder.embed(list(texts))
    b = embedder.embed(list(contexts))
    return np.hstack([a, spec.context_embedding * b, spec.text_bow * _bow(texts, spec.bow_dim),
                      spec.context_bow * _bow(contexts, spec.bow_dim),
                      spec.cues * _cues(texts),
                      np.ones((len(texts), 1), np.float32)]).astype(np.float32)


@dataclass(frozen=True, slots=True)
class LifetimeModel:
    """Linear weights: columns ``0..3`` score the labels, the next ``len(grid)`` columns
    estimate ``P(lifetime < 10**grid[j] s)``."""

    weights: NDArray[np.floating]
    """float32 when trained and saved; float64 once loaded (no conversion per prediction)."""
    spec: FeatureSpec
    embedder_name: str
    grid: NDArray[np.float64]

    def predict(self, texts: Sequence[str], contexts: Sequence[str],
                embedder: Embedder) -> tuple[NDArray[np.float64], list[str]]:
        """``(log10 lifetime, label)`` per text.

        Computes ``featurize(...) @ weights`` without building the dense hashed-n-gram blocks
        (a row holds a few dozen of their 8,192 columns): the embedding blocks are multiplied,
        the n-gram blocks gather the rows of ``weights`` they hit.

        The lifetime is the text's own (the scores with context ``""``) moved towards the
        one with the context by at most ``spec.context_nudge_decades``; the label is the
        one with the context (it sets pi, not the stale age).
        """
        own, nudge = self._parts(texts, contexts, embedder)
        out = own + nudge
        labels = [LABELS[int(j)] for j in np.argmax(out[:, : len(LABELS)], axis=1)]
        alone = median_crossing(own[:, len(LABELS):], self.grid)
        with_context = median_crossing(out[:, len(LABELS):], self.grid)
        bound = self.spec.context_nudge_decades
        return alone + np.clip(with_context - alone, -bound, bound), labels

    def scores(self, texts: Sequence[str], contexts: Sequence[str],
               embedder: Embedder) -> NDArray[np.float64]:
        """``featurize(texts, contexts) @ weights``, computed sparsely."""
        own, nudge = self._parts(texts, contexts, embedder)
        return own + nudge

    def _parts(self, texts: Sequence[str], contexts: Sequence[str], embedder: Embedder
               ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``featurize(...) @ weights`` split into the text's part (with the bias: the scores
        for context ``""``, whose embedding and n-grams are empty) and the context's."""
        spec, w = self.spec, np.asarray(self.weights, np.float64)  # the shipped one: no copy
        a = np.asarray(embedder.embed(list(texts)), np.float64)
        b = np.asarray(embedder.embed(list(contexts)), np.float64)
        d, v = a.shape[1], spec.bow_dim
        blocks = np.cumsum([0, d, d, v, v, len(_CUE_RX), 1])
        own = a @ w[blocks[0]:blocks[1]]
        own += spec.cues * (_cues(texts).astype(np.float64) @ w[blocks[4]:blocks[5]])
        own += w[blocks[5]]
        nudge = spec.context_embedding * (b @ w[blocks[1]:blocks[2]])
        for out, scale, start, strings in ((own, spec.text_bow, blocks[2], texts),
                                           (nudge, spec.context_bow, blocks[3], contexts)):
            # each row's n-gram columns gather their weight rows; one sum per row segment
            sizes, flat = _bow_rows(strings, v)
            rows = np.flatnonzero(sizes)
            if not len(rows):
                continue
            sums = np.add.reduceat(w[start + flat], np.cumsum(sizes[rows]) - sizes[rows], axis=0)
            out[rows] += (scale / np.sqrt(sizes[rows]))[:, None] * sums
        return own, nudge


def median_crossing(scores: NDArray[np.float64], grid: NDArray[np.float64]) -> NDArray[np.float64]:
    """Where each row of ``P(lifetime < 10**grid)`` scores first reaches 1/2 (log10 seconds).

    The scores are made monotone in age (running maximum) and interpolated linearly between
    grid points; a row that never reaches 1/2 gets half a decade past the grid's end, a row
    that starts above it half a decade before its start.

    >>> median_crossing(np.array([[0.0, 0.2, 0.6, 1.0], [0.9, 1.0, 1.0, 1.0]]),
    ...                 np.array([1.0, 2.0, 3.0, 4.0])).round(2).tolist()
    [2.75, 0.5]
    """
    mono = np.maximum.accumulate(scores, axis=1)
    above = mono >= 0.5
    first = np.argmax(above, axis=1)
    out = np.full(len(scores), grid[-1] + 0.5)
    hit = above.any(axis=1)
    out[hit & (first == 0)] = grid[0] - 0.5
    mid = np.flatnonzero(hit & (first > 0))
    j = first[mid]
    lo, hi = mono[mid, j - 1], mono[mid, j]
    frac = np.where(hi > lo, (0.5 - lo) / np.where(hi > lo, hi - lo, 1.0), 0.5)
    out[mid] = grid[j - 1] + frac * (grid[j] - grid[j - 1])
    return out


def load_statements(split: str | None = None) -> list[dict[str, Any]]:
    """The shipped training data (optionally one split)."""
    text = resources.files("scrubjay").joinpath(
        "data/perishability_statements.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [r for r in rows if split is None or r["split"] == split]


def train_model(rows: Sequence[dict[str, Any]], embedder: Embedder,
                spec: FeatureSpec | None = None) -> LifetimeModel:
    """Fit the ridge model (dual closed form: deterministic for given rows and embedder)."""
    spec = spec or FeatureSpec()
    x = featurize([r["text"] for r in rows], [r["context"] for r in rows], spec,
                  embedder).astype(np.float64)
    grid = LIFETIME_GRID_LOG10
    weights = ridge_fit(x, training_targets(rows, grid), spec.ridge)
    return LifetimeModel(weights=weights.astype(np.float32), spec=spec,
                         embedder_name=embedder.name, grid=grid.copy())


def training_targets(rows: Sequence[dict[str, Any]],
                     grid: NDArray[np.float64]) -> NDArray[np.float64]:
    """One-hot labels, then ``1[lifetime < 10**grid[j]]`` per grid age.

    A row with a range ``lo_s``-``hi_s`` instead of a ``lifetime_s`` (the everyday-lifetimes
    set) is 0 below ``lo_s``, 1 above ``hi_s`` and linear in log age between: any lifetime in
    the range is as plausible as any other.
    """
    y = np.zeros((len(rows), len(LABELS) + len(grid)))
    for i, r in enumerate(rows):
        y[i, LABELS.index(r["label"])] = 1.0
        if "lifetime_s" in r:
            y[i, len(LABELS):] = grid > math.log10(float(r["lifetime_s"]))
        else:
            lo, hi = math.log10(float(r["lo_s"])), math.log10(float(r["hi_s"]))
            y[i, len(LABELS):] = np.clip((grid - lo) / (hi - lo), 0.0, 1.0)
    return y


def ridge_fit(x: NDArray[np.float64], y: NDArray[np.float64], ridge: float) -> NDArray[np.float64]:
    """Ridge weights in the dual form (fewer rows than features)."""
    gram = x @ x.T + ridge * np.eye(len(x))
    return x.T @ np.linalg.solve(gram, y)


_DEFAULT: dict[str, Any] = {}
_LOCK = threading.Lock()
MODEL_FILE = "data/perishability_model.npz"


def save_model(model: LifetimeModel, path: str) -> None:
    spec = model.spec
    np.savez_compressed(path, weights=np.asarray(model.weights, np.float32),
                        embedder=np.array(model.embedder_name), grid=model.grid,
                        spec=np.array(json.dumps({f: getattr(spec, f) for f in
                                                  FeatureSpec.__slots__})))


def load_default_model() -> tuple[LifetimeModel, Embedder]:
    """The shipped model and its (bundled) embedder, loaded once per process."""
    with _LOCK:
        if "model" not in _DEFAULT:
            with resources.files("scrubjay").joinpath(MODEL_FILE).open("rb") as fh:
                data = np.load(fh)
                spec = FeatureSpec(**json.loads(str(data["spec"])))
                # float64 once here, not on every prediction
                model = LifetimeModel(weights=np.asarray(data["weights"], np.float64),
                                      spec=spec, embedder_name=str(data["embedder"]),
                                      grid=np.asarray(data["grid"], np.float64))
            embedder = WordLlamaEmbedder()
            if embedder.name != model.embedder_name:  # pragma: no cover - packaging error
                raise RuntimeError("perishability model was trained with another embedder")
            _DEFAULT["model"], _DEFAULT["embedder"] = model, embedder
        return _DEFAULT["model"], _DEFAULT["embedder"]


def lifetime_to_perishability(lifetime_s: float, label: str, *, stale_ratio: float,
                              tau_min_s: float, tau_max_s: float,
                              pi_min: float) -> Perishability:
    """(label, pi, tau) that turns stale at age ``lifetime_s`` (when tau is not clipped).

    >>> p = lifetime_to_perishability(3600.0, "ephemeral", stale_ratio=0.5, tau_min_s=60,
    ...                               tau_max_s=1e9, pi_min=1e-3)
    >>> (p.label, p.pi, round(p.tau_s * math.log(2) / p.pi))   # stale after one hour
    ('ephemeral', 0.9, 3600)
    """
    pi = max(pi_min, LABEL_PI[label])
    tau = lifetime_s * pi / math.log(1.0 / stale_ratio)
    return Perishability(label=label, pi=pi, tau_s=float(min(tau_max_s, max(tau_min_s, tau))),
                         source="estimator")
