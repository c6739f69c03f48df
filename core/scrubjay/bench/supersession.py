"""``scrubjay bench supersession``: the offline supersession detector on a labelled set.

Data: ``bench/data/supersession_pairs.tsv`` (written for this project, not taken from any
benchmark): one ``(slot, label, old, new)`` row per pair, labels ``supersedes`` / ``coexists`` /
``unrelated``. A pair is positive iff ``supersedes``.

Split **by slot** (fixed, :data:`TEST_SLOTS`): no slot of the test split is seen when the
constants are chosen. Protocol on the training slots only:

1. grouped k-fold by slot (:data:`CV_FOLDS` folds, slots dealt round-robin in sorted order):
   for each ridge strength in :data:`RIDGE_GRID`, fit the logistic score on k-1 folds and score
   the held-out fold; pool the out-of-fold scores;
2. the threshold is the one of :data:`THRESHOLD_GRID` with the highest out-of-fold recall among
   those with out-of-fold precision >= :data:`CV_PRECISION_FLOOR`, over every ridge strength
   (ties: the higher precision, then the larger ridge, then the higher threshold);
3. refit on all training slots with the chosen ridge: the weights and bias.

This runs twice: on the labelled pairs alone (-> :data:`scrubjay.supersession.DEFAULT_MODEL`)
and on the pairs plus a **pool** of hard negatives (:func:`with_pool`: each new memory against
the :data:`POOL_K` nearest old memories of other slots, what a caller comparing a new memory
with its nearest memories meets; -> :data:`scrubjay.supersession.POOL_MODEL`). Both shipped
models are then scored on the test slots, on the pairs and on the pairs plus their pool.
Pairs that fail a gate score 0 (never positive) and are not used in the fit.

``--data`` also runs a generalisation check on FactConsolidation (never used for fitting): the
share of its (old, new) fact pairs that the detector catches, and how many of the 5 most
similar other older facts it flags wrongly.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scrubjay.supersession import (
    DEFAULT_MODEL,
    FEATURES,
    POOL_MODEL,
    PairFeatures,
    Statement,
    SupersessionModel,
    detect_supersessions,
    pair_features,
    parse_claim,
)
from scrubjay.update_model import (
    BASE_FEATURES,
    UpdateModel,
    default_update_model,
    expand,
    update_features,
)

__all__ = [
    "CV_FOLDS",
    "CV_PRECISION_FLOOR",
    "LABELS",
    "POOL_K",
    "RIDGE_GRID",
    "TEST_SLOTS",
    "THRESHOLD_GRID",
    "Pair",
    "choose_model",
    "evaluate",
    "fit_logistic",
    "load_pairs",
    "run_supersession",
    "split",
    "supersession_markdown",
    "with_pool",
    "write_supersession",
]

LABELS = ("supersedes", "coexists", "unrelated")
TEST_SLOTS = frozenset({"bedtime", "bin collection", "body weight", "energy supplier",
                        "hairdresser", "holiday trip", "house cleaner", "language course",
                        "spare key", "streaming subscription"})
"""The held-out slots, none of them a slot of the lexicon, written before the rules and
constants they score were last changed. Earlier test splits whose errors were looked at are
training slots now (see docs/supersession.md)."""
CV_FOLDS = 5
POOL_K = 5
"""Hard negatives per new memory (chosen: a top-5 candidate list is the least a caller would
look at)."""
RIDGE_GRID = (0.1, 1.0, 10.0)
THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(2, 20))
CV_PRECISION_FLOOR = 0.97
"""Above the 0.95 target: a wrong supersession hides a true fact (chosen)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pair:
    """One labelled (old, new) pair."""

    slot: str
    label: str
    old: str
    new: str
    pooled: bool = False
    """A hard negative from the pool: another slot's old memory near the new one."""

    @property
    def positive(self) -> bool:
        return self.label == "supersedes"


def load_pairs() -> list[Pair]:
    """The bundled labelled pairs, in file order."""
    text = resources.files("scrubjay.bench").joinpath("data/supersession_pairs.tsv") \
        .read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
    pairs = [Pair(slot=r["slot"], label=r["label"], old=r["old"], new=r["new"]) for r in rows]
    bad = [p for p in pairs if p.label not in LABELS]
    if bad:
        raise ValueError(f"unknown labels in supersession_pairs.tsv: {bad[:3]}")
    return pairs


def split(pairs: Sequence[Pair]) -> tuple[list[Pair], list[Pair]]:
    """``(train, test)`` by slot."""
    return ([p for p in pairs if p.slot not in TEST_SLOTS],
            [p for p in pairs if p.slot in TEST_SLOTS])


def with_pool(pairs: Sequence[Pair], embedder: Any, k: int | None = None) -> list[Pair]:
    """``pairs`` plus, for each new memory of a ``supersedes`` or ``coexists`` pair, the ``k``
    (:data:`POOL_K`) old memories of *other* slots of the same split closest to it by
    what-cosine, labelled ``unrelated`` (every old memory states its own slot).

    In use, a new memory is compared with its nearest stored memories, not with one chosen
    partner: these are the candidates a wrong supersession would come from.
    """
    k = POOL_K if k is None else k
    olds = sorted({(p.slot, p.old) for p in pairs})
    # the new memories of 'unrelated' pairs are distractors that may belong to another slot
    # ("The meeting is in room 412" beside the hotel slot): only the others are paired
    news = sorted({(p.slot, p.new) for p in pairs if p.label != "unrelated"})
    texts = sorted({t for _, t in olds} | {t for _, t in news})
    vec = dict(zip(texts, np.asarray(embedder.embed(texts), dtype=np.float64)))
    old_vecs = np.array([vec[t] for _, t in olds])
    seen = {(p.old, p.new) for p in pairs}
    out = list(pairs)
    for slot, new in news:
        sims = old_vecs @ vec[new]
        taken = 0
        for i in np.argsort(-sims, kind="stable"):
            o_slot, old = olds[int(i)]
            if o_slot == slot or old == new or (old, new) in seen:
                continue
            out.append(Pair(slot=slot, label="unrelated", old=old, new=new, pooled=True))
            seen.add((old, new))
            taken += 1
            if taken == k:
                break
    return out


def _features(pairs: Sequence[Pair], embedder: Any) -> list[PairFeatures]:
    texts = sorted({t for p in pairs for t in (p.old, p.new)})
    vecs = {t: v for t, v in zip(texts, np.asarray(embedder.embed(texts), dtype=np.float64))} \
        if embedder is not None else {}
    out = []
    for p in pairs:
        cos = float(vecs[p.old] @ vecs[p.new]) if vecs else 0.0
        out.append(pair_features(parse_claim(p.old), parse_claim(p.new), cos))
    return out


def fit_logistic(x: NDArray[np.float64], y: NDArray[np.float64], ridge: float) -> tuple[
        NDArray[np.float64], float]:
    """Ridge-penalised logistic regression with non-negative weights (the bias is free).

    Every feature is, by design, evidence *for* a supersession, so a weight the fit would make
    negative (a sampling artefact of the few negatives that pass the gates) is fixed at 0 and
    the rest refitted (an active-set loop). Newton's method from zero: deterministic.
    """
    d = x.shape[1]
    active = np.ones(d, dtype=bool)
    while True:
        w_a, b = _newton(x[:, active], y, ridge)
        if (w_a >= 0).all() or not active.any():
            w = np.zeros(d)
            w[active] = w_a
            return w, b
        active[np.flatnonzero(active)[np.argmin(w_a)]] = False


def _newton(x: NDArray[np.float64], y: NDArray[np.float64], ridge: float) -> tuple[
        NDArray[np.float64], float]:
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    pen = np.full(d + 1, ridge)
    pen[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ w, -30, 30)))
        grad = xb.T @ (p - y) + pen * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(pen) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return w[:-1], float(w[-1])


def _scores(feats: Sequence[PairFeatures], w: NDArray[np.float64], b: float) -> NDArray[
        np.float64]:
    x = np.array([f.x for f in feats], dtype=np.float64).reshape(len(feats), len(FEATURES))
    s = 1.0 / (1.0 + np.exp(-np.clip(x @ w + b, -500, 500)))
    passed = np.array([f.passed for f in feats], dtype=bool)
    return np.where(passed, s, 0.0)


def _fit(feats: Sequence[PairFeatures], y: NDArray[np.bool_], ridge: float) -> tuple[
        NDArray[np.float64], float]:
    keep = [i for i, f in enumerate(feats) if f.passed]
    x = np.array([feats[i].x for i in keep], dtype=np.float64).reshape(len(keep), len(FEATURES))
    return fit_logistic(x, y[keep].astype(np.float64), ridge)


def _pr(pred: NDArray[np.bool_], y: NDArray[np.bool_]) -> tuple[float, float]:
    tp = int(np.sum(pred & y))
    fp = int(np.sum(pred & ~y))
    fn = int(np.sum(~pred & y))
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)


def _folds(slots: Sequence[str], k: int) -> list[int]:
    order = {s: i % k for i, s in enumerate(sorted(set(slots)))}
    return [order[s] for s in slots]


def choose_model(train: Sequence[Pair], embedder: Any) -> tuple[SupersessionModel,
                                                                 dict[str, Any]]:
    """The model fitted on ``train`` as the module docstring says, and the CV figures."""
    feats = _features(train, embedder)
    y = np.array([p.positive for p in train], dtype=bool)
    fold = np.array(_folds([p.slot for p in train], CV_FOLDS))
    best: tuple[float, float, float, float] | None = None  # (recall, prec, ridge, threshold)
    grid: dict[str, Any] = {}
    for ridge in RIDGE_GRID:
        oof = np.zeros(len(train))
        for f in range(CV_FOLDS):
            tr, te = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
            w, b = _fit([feats[i] for i in tr], y[tr], ridge)
            oof[te] = _scores([feats[i] for i in te], w, b)
        rows = []
        for t in THRESHOLD_GRID:
            prec, rec = _pr(oof >= t, y)
            rows.append({"threshold": t, "precision": prec, "recall": rec})
            if prec >= CV_PRECISION_FLOOR:
                cand = (rec, prec, ridge, t)
                if best is None or cand >= best:
                    best = cand
        grid[str(ridge)] = rows
    if best is None:  # pragma: no cover - no threshold reaches the floor: the strictest one
        best = (0.0, 0.0, RIDGE_GRID[-1], THRESHOLD_GRID[-1])
    recall, precision, ridge, threshold = best
    w, b = _fit(feats, y, ridge)
    model = SupersessionModel(weights=tuple(round(float(v), 3) for v in w),
                              bias=round(b, 3), threshold=threshold)
    return model, {"folds": CV_FOLDS, "ridge": ridge, "threshold": threshold,
                   "cv_precision": precision, "cv_recall": recall, "grid": grid,
                   "n": len(train), "positives": int(y.sum()),
                   "slots": sorted({p.slot for p in train})}


UPDATE_RIDGE_GRID = (0.1, 0.3, 1.0, 3.0)
"""Ridge strengths tried for the learned model (:mod:`scrubjay.update_model`)."""
UPDATE_THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(4, 20))
UPDATE_PRECISION_FLOOR = 0.95
"""The learned model's threshold: highest out-of-fold recall with at least this precision."""


def update_matrix(pairs: Sequence[Pair], embedder: Any) -> NDArray[np.float64]:
    """The :data:`~scrubjay.update_model.BASE_FEATURES` of every pair, one row each."""
    texts = sorted({t for p in pairs for t in (p.old, p.new)})
    vecs = dict(zip(texts, np.asarray(embedder.embed(texts), dtype=np.float64)))
    claims = {t: parse_claim(t) for t in texts}
    return np.array([update_features(p.old, p.new, float(vecs[p.old] @ vecs[p.new]),
                                     claims[p.old], claims[p.new]) for p in pairs],
                    dtype=np.float64).reshape(len(pairs), len(BASE_FEATURES))


def _fit_update(x: NDArray[np.float64], y: NDArray[np.bool_], ridge: float) -> tuple[
        NDArray[np.float64], float]:
    return _newton(expand(x), y.astype(np.float64), ridge)


def _update_scores(x: NDArray[np.float64], w: NDArray[np.float64], b: float) -> NDArray[
        np.float64]:
    return 1.0 / (1.0 + np.exp(-np.clip(expand(x) @ w + b, -500, 500)))


def choose_update_model(train: Sequence[Pair], embedder: Any) -> tuple[UpdateModel,
                                                                       dict[str, Any]]:
    """The learned model on ``train`` (pass the pairs with their pool): ridge and threshold by
    grouped k-fold CV (highest out-of-fold recall with precision >= the floor), then a refit
    on all of ``train``."""
    x = update_matrix(train, embedder)
    y = np.array([p.positive for p in train], dtype=bool)
    fold = np.array(_folds([p.slot for p in train], CV_FOLDS))
    best: tuple[float, float, float, float] | None = None
    for ridge in UPDATE_RIDGE_GRID:
        oof = np.zeros(len(train))
        for f in range(CV_FOLDS):
            tr, te = fold != f, fold == f
            w, b = _fit_update(x[tr], y[tr], ridge)
            oof[te] = _update_scores(x[te], w, b)
        for t in UPDATE_THRESHOLD_GRID:
            prec, rec = _pr(oof >= t, y)
            if prec >= UPDATE_PRECISION_FLOOR:
                cand = (rec, prec, ridge, t)
                if best is None or cand >= best:
                    best = cand
    if best is None:  # pragma: no cover - no threshold reaches the floor: the strictest one
        best = (0.0, 0.0, UPDATE_RIDGE_GRID[-1], UPDATE_THRESHOLD_GRID[-1])
    recall, precision, ridge, threshold = best
    w, b = _fit_update(x, y, ridge)
    model = UpdateModel(weights=tuple(round(float(v), 4) for v in w), bias=round(b, 4),
                        threshold=threshold)
    return model, {"folds": CV_FOLDS, "ridge": ridge, "threshold": threshold,
                   "cv_precision": precision, "cv_recall": recall, "n": len(train),
                   "positives": int(y.sum())}


def evaluate(pairs: Sequence[Pair], embedder: Any,
             model: SupersessionModel | UpdateModel = DEFAULT_MODEL) -> dict[str, Any]:
    """Precision and recall of :func:`detect_supersessions` on ``pairs`` (each pair as one new
    memory with one older candidate), per slot and per label, and the errors."""
    texts = sorted({t for p in pairs for t in (p.old, p.new)})
    vecs = dict(zip(texts, embedder.embed(texts))) if embedder is not None else {}
    pred = []
    for p in pairs:
        old = Statement(id="old", text=p.old, what=vecs.get(p.old), recorded_at_s=0.0)
        new = Statement(id="new", text=p.new, what=vecs.get(p.new), recorded_at_s=1.0)
        pred.append(bool(detect_supersessions(new, [old], model=model)))
    yhat = np.array(pred, dtype=bool)
    y = np.array([p.positive for p in pairs], dtype=bool)
    prec, rec = _pr(yhat, y)
    per_slot = {}
    for slot in sorted({p.slot for p in pairs}):
        idx = [i for i, p in enumerate(pairs) if p.slot == slot]
        sp, sr = _pr(yhat[idx], y[idx])
        per_slot[slot] = {"n": len(idx), "precision": sp, "recall": sr,
                          "tp": int(np.sum(yhat[idx] & y[idx])),
                          "fp": int(np.sum(yhat[idx] & ~y[idx])),
                          "fn": int(np.sum(~yhat[idx] & y[idx]))}
    flagged = {lab: int(sum(1 for p, h in zip(pairs, pred)
                            if p.label == lab and not p.pooled and h)) for lab in LABELS}
    flagged["pool"] = int(sum(1 for p, h in zip(pairs, pred) if p.pooled and h))
    errors = [{"slot": p.slot, "label": "pool" if p.pooled else p.label, "old": p.old,
               "new": p.new,
               "predicted": "supersedes" if h else "no"}
              for p, h in zip(pairs, pred) if h != p.positive]
    return {"n": len(pairs), "positives": int(y.sum()), "precision": prec, "recall": rec,
            "flagged_by_label": flagged, "per_slot": per_slot, "errors": errors}


def _cosine_baseline(pairs: Sequence[Pair], embedder: Any, theta: float = 0.5) -> dict[str, Any]:
    """'supersedes iff what-cosine >= theta' (RCI's affinity threshold), for comparison."""
    texts = sorted({t for p in pairs for t in (p.old, p.new)})
    vecs = dict(zip(texts, np.asarray(embedder.embed(texts), dtype=np.float64)))
    yhat = np.array([float(vecs[p.old] @ vecs[p.new]) >= theta for p in pairs], dtype=bool)
    prec, rec = _pr(yhat, np.array([p.positive for p in pairs], dtype=bool))
    return {"theta": theta, "precision": prec, "recall": rec}


def factconsolidation_check(data_dir: str | Path, embedder: Any,
                            model: SupersessionModel | UpdateModel = DEFAULT_MODEL
                            ) -> dict[str, Any]:
    """On FactConsolidation (a check only, never fitted on): of its ``has_pair`` questions, the
    share whose old fact the new fact supersedes, and the share of the 5 most similar other
    older facts it flags (those are mostly about other slots)."""
    from scrubjay.bench.run_factconsolidation import load_factconsolidation

    facts, questions = load_factconsolidation(data_dir)
    text = {int(f["serial"]): str(f["fact"]) for f in facts}
    serials = sorted(text)
    vec = dict(zip(serials, np.asarray(embedder.embed([text[s] for s in serials]))))
    caught, pairs, flagged_other, others = 0, 0, 0, 0
    for q in questions:
        if q.get("conflict_type") != "has_pair":
            continue
        new_s, old_s = int(q["gt_seq"]), int(q["old_seq"])
        new = Statement(id=str(new_s), text=text[new_s], what=vec[new_s], recorded_at_s=new_s)
        older = [s for s in serials if s < new_s and s != old_s]
        sims = np.array([float(vec[s] @ vec[new_s]) for s in older])
        near = [older[i] for i in np.argsort(-sims, kind="stable")[:5]]
        cands = [Statement(id=str(s), text=text[s], what=vec[s], recorded_at_s=s)
                 for s in [old_s, *near]]
        hit = {h.old_id for h in detect_supersessions(new, cands, model=model)}
        pairs += 1
        caught += str(old_s) in hit
        others += len(near)
        flagged_other += sum(str(s) in hit for s in near)
    return {"pairs": pairs, "caught": caught, "recall": caught / pairs if pairs else 0.0,
            "near_others": others, "near_others_flagged": flagged_other}


def run_supersession(*, embedder: Any = "wordllama", data_dir: str | Path | None = None
                     ) -> dict[str, Any]:
    """Cross-validate on the training slots, refit, and score the test slots."""
    from scrubjay.bench.common import get_embedder

    emb = get_embedder(embedder)
    pairs = load_pairs()
    train, test = split(pairs)
    train_pool, test_pool = with_pool(train, emb), with_pool(test, emb)
    protocols: dict[str, Any] = {}
    for name, tr, shipped in (("pairs", train, DEFAULT_MODEL),
                              ("pool", train_pool, POOL_MODEL)):
        model, cv = choose_model(tr, emb)
        protocols[name] = {
            "cv": cv,
            "fitted_model": {"weights": dict(zip(FEATURES, model.weights)), "bias": model.bias,
                             "threshold": model.threshold},
            "shipped_model": {"weights": dict(zip(FEATURES, shipped.weights)),
                              "bias": shipped.bias, "threshold": shipped.threshold},
            "test_pairs": evaluate(test, emb, shipped),
            "test_pool": evaluate(test_pool, emb, shipped),
        }
    learned, learned_cv = choose_update_model(train_pool, emb)
    shipped_learned = default_update_model()
    protocols["learned"] = {
        "cv": learned_cv,
        "fitted_model": json.loads(learned.to_json()),
        "shipped_model": json.loads(shipped_learned.to_json()),
        "test_pairs": evaluate(test, emb, shipped_learned),
        "test_pool": evaluate(test_pool, emb, shipped_learned),
    }
    res: dict[str, Any] = {
        "embedder": emb.name, "n_pairs": len(pairs),
        "n_slots": len({p.slot for p in pairs}),
        "labels": {lab: sum(p.label == lab for p in pairs) for lab in LABELS},
        "test_slots": sorted(TEST_SLOTS), "pool_k": POOL_K,
        "n_pool_train": len(train_pool) - len(train), "n_pool_test": len(test_pool) - len(test),
        "protocols": protocols,
        "test_cosine_baseline": {"pairs": _cosine_baseline(test, emb),
                                 "pool": _cosine_baseline(test_pool, emb)},
    }
    if data_dir is not None:
        res["factconsolidation_rules"] = factconsolidation_check(data_dir, emb)
        res["factconsolidation"] = factconsolidation_check(data_dir, emb, shipped_learned)
    return res


def _f(x: float) -> str:
    return f"{x:.3f}" if math.isfinite(x) else "-"


def supersession_markdown(res: dict[str, Any]) -> str:
    """The report as Markdown."""
    labels = ", ".join(f"{k} {v}" for k, v in res["labels"].items())
    base = res["test_cosine_baseline"]
    lines = [
        "## Supersession detector (offline)",
        "",
        (f"Labelled pairs: {res['n_pairs']} over {res['n_slots']} slots ({labels}); "
         f"embedder {res['embedder']}. Pool: beside each labelled pair, the {res['pool_k']} "
         f"nearest old memories of other slots as negatives ({res['n_pool_train']} train, "
         f"{res['n_pool_test']} test)."),
        f"Test slots ({len(res['test_slots'])}): {', '.join(res['test_slots'])}.",
        "",
        ("| model (fitted on) | train CV P | train CV R | test pairs P | test pairs R "
         "| test pool P | test pool R |"),
        "|---|---|---|---|---|---|---|",
    ]
    for name, label in (("pairs", "rules DEFAULT_MODEL (pairs), the default"),
                        ("learned", "learned UpdateModel (pairs + pool)"),
                        ("pool", "rules POOL_MODEL (pairs + pool)")):
        pr = res["protocols"][name]
        cv, tp, tq = pr["cv"], pr["test_pairs"], pr["test_pool"]
        lines.append(f"| {label} | {_f(cv['cv_precision'])} | {_f(cv['cv_recall'])} | "
                     f"**{_f(tp['precision'])}** | **{_f(tp['recall'])}** | "
                     f"**{_f(tq['precision'])}** | **{_f(tq['recall'])}** |")
    lines.append(f"| cosine >= {base['pairs']['theta']} (RCI's theta) | - | - | "
                 f"{_f(base['pairs']['precision'])} | {_f(base['pairs']['recall'])} | "
                 f"{_f(base['pool']['precision'])} | {_f(base['pool']['recall'])} |")
    lines.append("")
    for name in ("pairs", "pool"):
        pr = res["protocols"][name]
        cv = pr["cv"]
        weights = ", ".join(f"{k} {v:+.3f}" for k, v in pr["fitted_model"]["weights"].items())
        flagged = ", ".join(f"{k} {v}" for k, v in pr["test_pool"]["flagged_by_label"].items())
        lines += [(f"Fitted on {name}: ridge {cv['ridge']}, threshold {cv['threshold']}; "
                   f"weights {weights}, bias {pr['fitted_model']['bias']:+.3f}. Test pool "
                   f"flagged by label: {flagged}."), ""]
    lc = res["protocols"]["learned"]["cv"]
    lines += [(f"Learned model: ridge {lc['ridge']}, threshold {lc['threshold']} (grouped "
               f"{lc['folds']}-fold CV on {lc['n']} training pairs with their pool)."), ""]
    test = res["protocols"]["learned"]["test_pairs"]
    lines += ["Test pairs, learned model, per slot:", "",
              "| test slot | pairs | precision | recall |", "|---|---|---|---|"]
    for slot, r in test["per_slot"].items():
        lines.append(f"| {slot} | {r['n']} | {_f(r['precision'])} | {_f(r['recall'])} |")
    if test["errors"]:
        lines += ["", "Test pair errors, learned model:", ""]
        lines += [f"- [{e['slot']}, {e['label']}] {e['old']!r} -> {e['new']!r}"
                  for e in test["errors"]]
    for key, name in (("factconsolidation", "learned model"),
                      ("factconsolidation_rules", "rules DEFAULT_MODEL")):
        fc = res.get(key)
        if fc:
            lines += ["", (f"FactConsolidation check ({name}, not fitted on): "
                           f"{fc['caught']} of {fc['pairs']} (old, new) fact pairs caught "
                           f"(recall {_f(fc['recall'])}); {fc['near_others_flagged']} of the "
                           f"{fc['near_others']} most similar other older facts flagged.")]
    return "\n".join(lines) + "\n"


def write_supersession(res: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write ``supersession.json`` and ``supersession.md`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "supersession.json", "md": out / "supersession.md"}
    paths["json"].write_text(json.dumps(res, indent=2, ensure_ascii=False) + "\n")
    paths["md"].write_text(supersession_markdown(res))
    return paths
