"""Everyday lifetimes: are the offline estimates plausible, and robust to the context string?

The set (``data/everyday_lifetimes.jsonl``, built by ``scripts/build_lifetime_set.py``) holds
everyday statements, each with the range ``[lo_s, hi_s]`` of lifetimes a person would accept
(parking, today's room, a password for today, travel bookings, diets, current reading, a new
desk, a job, a temporary place, preferences, family, meetings, moods, bugs, plans, ...), split
into ``train`` (used to fit the estimator) and ``test`` (reported here) by a fixed rule.

A statement's *lifetime* is the age at which :class:`~scrubjay.perishability.Classifier` (the
path ``ScrubJayMemory.add`` takes, offline) makes it stale: ``tau ln(1/r) / pi`` with ``r``
the stale ratio of :class:`~scrubjay.config.DecayConfig`
(:func:`~scrubjay.decay.stale_age_s`; :func:`stale_ages_s` here). Two figures:

* **robustness**: the share of statements whose lifetime under each of
  :data:`ROBUSTNESS_CONTEXTS` stays within a factor :data:`ROBUSTNESS_FACTOR` of the median
  over those contexts (none of these contexts changes what the statements mean);
* **accuracy**: the share whose lifetime (empty context) lies in ``[lo_s, hi_s]``; beside it
  the share over every (statement, context) pair, and the mean distance in decades to the
  range of those outside it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np

from ..config import ClassifierConfig, DecayConfig
from ..decay import stale_age_s
from ..embedding import Embedder, WordLlamaEmbedder
from ..errors import InvalidInputError
from ..perishability import Classifier

__all__ = ["EXAMPLES", "NUDGE_GRID", "ROBUSTNESS_CONTEXTS", "ROBUSTNESS_FACTOR",
           "cross_validate_nudge", "evaluate_lifetimes", "format_lifetimes", "format_nudge_cv",
           "load_lifetime_set", "stale_ages_s"]

logger = logging.getLogger(__name__)

DATA_FILE = "bench/data/everyday_lifetimes.jsonl"

#: Context strings a user might pass with any of the statements (issue 40's list). None of
#: them changes what a statement means: "I parked on level 2" names the same parked car
#: whether it was said on a commute or at work.
ROBUSTNESS_CONTEXTS: tuple[str, ...] = (
    "", "chat with Sam", "work", "commute", "travel", "at the mall", "standup",
    "planning a trip", "dinner with family", "debugging session", "weekend", "doctor's visit")

#: Statements whose lifetimes the report lists (issue 40's examples).
EXAMPLES: tuple[str, ...] = (
    "I parked on level 2, spot B17", "I booked the Hotel Adlon for two nights",
    "I'm reading a book at the moment", "I'm vegetarian")

#: A lifetime counts as robust within this factor of its median over the contexts.
ROBUSTNESS_FACTOR = 3.0

_UNITS = (("y", 31_557_600.0), ("mo", 2_592_000.0), ("w", 604_800.0), ("d", 86_400.0),
          ("h", 3600.0), ("min", 60.0))


def load_lifetime_set(split: str | None = None) -> list[dict[str, Any]]:
    """The everyday-lifetimes rows (optionally one split: ``"train"`` or ``"test"``)."""
    text = resources.files("scrubjay").joinpath(DATA_FILE).read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [r for r in rows if split is None or r["split"] == split]


def stale_ages_s(texts: Sequence[str], contexts: Sequence[str], *,
              embedder: Embedder | None = None,
              cfg: ClassifierConfig | None = None) -> np.ndarray:
    """Seconds until each ``(text, context)`` is flagged stale by the offline classifier."""
    cfg = cfg or ClassifierConfig()
    ratio = DecayConfig().stale_ratio
    embedder = embedder or WordLlamaEmbedder()
    what = embedder.embed(list(texts))
    where = embedder.embed(list(contexts))
    got = Classifier(cfg, stale_ratio=ratio).classify_many(
        list(texts), list(contexts), what, where, vectors_by=embedder.name)
    return np.array([stale_age_s(p.pi, p.tau_s, ratio) for p in got])


def evaluate_lifetimes(rows: Sequence[dict[str, Any]] | None = None, *,
                       contexts: Sequence[str] = ROBUSTNESS_CONTEXTS) -> dict[str, Any]:
    """Robustness and accuracy on ``rows`` (default: the whole set; accuracy per split)."""
    rows = list(rows if rows is not None else load_lifetime_set())
    if not rows or not contexts:
        raise InvalidInputError("The 'rows' and 'contexts' parameters of evaluate_lifetimes must be "
                         f"non-empty. Got {len(rows)} rows and {len(contexts)} contexts instead.")
    texts = [r["text"] for r in rows]
    embedder = WordLlamaEmbedder()
    life = np.log10(np.vstack([stale_ages_s(texts, [c] * len(texts), embedder=embedder)
                               for c in contexts]))  # (contexts, rows)
    median = np.median(life, axis=0)
    spread = np.max(np.abs(life - median), axis=0)
    robust = spread <= math.log10(ROBUSTNESS_FACTOR) + 1e-9
    lo = np.log10([float(r["lo_s"]) for r in rows])
    hi = np.log10([float(r["hi_s"]) for r in rows])
    empty = list(contexts).index("") if "" in contexts else 0
    inside = (life >= lo) & (life <= hi)
    miss = np.maximum(lo - life, life - hi).clip(min=0.0)

    def figures(mask: np.ndarray) -> dict[str, Any]:
        n = int(mask.sum())
        if not n:
            return {"n": 0}
        out_e = ~inside[empty, mask]
        return {"n": n,
                "robust": float(robust[mask].mean()),
                "accuracy": float(inside[empty, mask].mean()),
                "accuracy_all_contexts": float(inside[:, mask].mean()),
                "too_short": float((life[empty, mask] < lo[mask]).mean()),
                "too_long": float((life[empty, mask] > hi[mask]).mean()),
                "miss_decades": float(miss[empty, mask][out_e].mean()) if out_e.any() else 0.0}

    splits = np.array([r.get("split", "") for r in rows])
    per_row = [{"text": r["text"], "split": r.get("split", ""), "lo": r.get("lo"),
                "hi": r.get("hi"), "lifetime_s": float(10 ** life[empty, i]),
                "min_s": float(10 ** life[:, i].min()), "max_s": float(10 ** life[:, i].max()),
                "robust": bool(robust[i]), "inside": bool(inside[empty, i])}
               for i, r in enumerate(rows)]
    return {"contexts": list(contexts), "factor": ROBUSTNESS_FACTOR,
            "stale_ratio": DecayConfig().stale_ratio,
            "all": figures(np.ones(len(rows), bool)),
            "splits": {s: figures(splits == s) for s in ("train", "test") if (splits == s).any()},
            "rows": per_row}


def _human(seconds: float) -> str:
    for unit, size in _UNITS:
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def format_lifetimes(result: dict[str, Any], *, examples: Sequence[str] = ()) -> str:
    """The figures as Markdown (``examples``: texts whose lifetimes are listed)."""
    head = ("| rows | n | robust (within x{f:g} of the median) | accuracy (in range, no "
            "context) | accuracy (every context) | too short | too long | miss (decades) |")
    lines = [(f"Everyday lifetimes: stale when U/V < {result['stale_ratio']:g}; "
              f"{len(result['contexts'])} contexts: "
              + ", ".join(repr(c) for c in result["contexts"]) + "."), "",
             head.format(f=result["factor"]), "|---" * 8 + "|"]
    named = [("all", result["all"])] + list(result["splits"].items())
    for name, e in named:
        lines.append(f"| {name} | {e['n']} | {e['robust']:.3f} | {e['accuracy']:.3f} | "
                     f"{e['accuracy_all_contexts']:.3f} | {e['too_short']:.3f} | "
                     f"{e['too_long']:.3f} | {e['miss_decades']:.2f} |")
    shown = [r for r in result["rows"] if r["text"] in set(examples)]
    if shown:
        lines += ["", "| statement | accepted | lifetime (no context) | over the contexts |",
                  "|---|---|---|---|"]
        for r in shown:
            lines.append(f"| {r['text']} | {r['lo']}-{r['hi']} | {_human(r['lifetime_s'])} | "
                         f"{_human(r['min_s'])} - {_human(r['max_s'])} |")
    return "\n".join(lines)


#: The context-nudge bounds (decades) :func:`cross_validate_nudge` compares; None: unbounded.
NUDGE_GRID: tuple[float | None, ...] = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, None)


def cross_validate_nudge(folds: int = 5, bounds: Sequence[float | None] = NUDGE_GRID,
                         contexts: Sequence[str] = ROBUSTNESS_CONTEXTS) -> dict[str, Any]:
    """How the context-nudge bound trades accuracy for robustness, on the train splits only.

    The shipped model's rows (the statements' train split and the everyday set's, as
    :func:`~scrubjay.bench.perishability_eval.retrain` fits them) are cut into ``folds``
    groups by domain (everyday rows: by topic); each group is predicted by the ridge model fitted
    on the others, for each bound. Reported per bound: the statements' stale/valid accuracy
    (their own contexts, the ages of ``scrubjay perishability evaluate``) and, on the everyday
    rows, the in-range accuracy under every context of ``contexts`` and the robustness.
    Neither test split is read.
    """
    from ..estimator import (
        LABELS,
        LIFETIME_GRID_LOG10,
        FeatureSpec,
        featurize,
        load_statements,
        median_crossing,
        ridge_fit,
        training_targets,
    )
    from .perishability_eval import AGES_S

    spec, grid, emb = FeatureSpec(), LIFETIME_GRID_LOG10, WordLlamaEmbedder()
    stm = load_statements("train")
    day = [{**r, "context": ""} for r in load_lifetime_set("train")]
    rows = stm + day
    groups = [r["domain"] for r in stm] + ["everyday:" + r["topic"] for r in day]
    names = sorted(set(groups))
    order = np.random.default_rng(0).permutation(len(names))
    fold_of = {g: int(order[i]) % folds for i, g in enumerate(names)}
    fold = np.array([fold_of[g] for g in groups])
    texts = [r["text"] for r in rows]
    x = featurize(texts, [r["context"] for r in rows], spec, emb).astype(np.float64)
    x_alone = featurize([r["text"] for r in stm], [""] * len(stm), spec, emb).astype(np.float64)
    day_texts = [r["text"] for r in day]
    x_day = [featurize(day_texts, [c] * len(day), spec, emb).astype(np.float64)
             for c in contexts]
    y = training_targets(rows, grid)
    k = len(LABELS)
    n = len(stm)
    p_stm = np.zeros((2, n))  # alone, with its context
    p_day = np.zeros((len(contexts), len(day)))
    for f in range(folds):
        w = ridge_fit(x[fold != f], y[fold != f], spec.ridge)[:, k:]
        held = np.flatnonzero(fold[:n] == f)
        p_stm[0, held] = median_crossing(x_alone[held] @ w, grid)
        p_stm[1, held] = median_crossing(x[held] @ w, grid)
        dh = np.flatnonzero(fold[n:] == f)
        for c, xc in enumerate(x_day):
            p_day[c, dh] = median_crossing(xc[dh] @ w, grid)
    life = np.log10([float(r["lifetime_s"]) for r in stm])
    ages = np.log10(AGES_S)
    lo = np.log10([float(r["lo_s"]) for r in day])
    hi = np.log10([float(r["hi_s"]) for r in day])
    alone = contexts.index("") if "" in contexts else 0
    out = []
    for b in bounds:
        def nudged(own: np.ndarray, full: np.ndarray, b: float | None = b) -> np.ndarray:
            return full if b is None else own + np.clip(full - own, -b, b)
        ps = nudged(p_stm[0], p_stm[1])
        pd = nudged(p_day[alone][None, :], p_day)
        spread = np.max(np.abs(pd - np.median(pd, axis=0)), axis=0)
        out.append({"bound_decades": b,
                    "statements_accuracy": float(((ages[None, :] > life[:, None])
                                                  == (ages[None, :] > ps[:, None])).mean()),
                    "everyday_accuracy_all_contexts": float(((pd >= lo) & (pd <= hi)).mean()),
                    "everyday_robust": float(np.mean(spread <= math.log10(ROBUSTNESS_FACTOR)
                                                     + 1e-9))})
    return {"folds": folds, "n_statements": n, "n_everyday": len(day),
            "contexts": list(contexts), "bounds": out}


def format_nudge_cv(result: dict[str, Any]) -> str:
    """:func:`cross_validate_nudge` as a Markdown table."""
    lines = [(f"{result['folds']}-fold cross-validation (grouped by domain / topic) on the train "
              f"splits: {result['n_statements']} statements, {result['n_everyday']} everyday "
              f"statements under {len(result['contexts'])} contexts; no test split is read."),
             "", ("| context nudge bound (decades) | statements stale/valid accuracy | "
                  "everyday in-range accuracy (every context) | everyday robust (x3) |"),
             "|---|---|---|---|"]
    for e in result["bounds"]:
        b = "unbounded" if e["bound_decades"] is None else f"{e['bound_decades']:g}"
        lines.append(f"| {b} | {e['statements_accuracy']:.3f} | "
                     f"{e['everyday_accuracy_all_contexts']:.3f} | {e['everyday_robust']:.3f} |")
    return "\n".join(lines)
