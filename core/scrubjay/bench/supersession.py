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

Then the fitted model (and the shipped :data:`scrubjay.supersession.DEFAULT_MODEL`) is scored on
the test slots. Pairs that fail a gate score 0 (never positive) and are not used in the fit.

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
    PairFeatures,
    Statement,
    SupersessionModel,
    detect_supersessions,
    pair_features,
    parse_claim,
)

__all__ = ["CV_FOLDS", "CV_PRECISION_FLOOR", "LABELS", "RIDGE_GRID", "TEST_SLOTS",
           "THRESHOLD_GRID", "Pair", "choose_model", "evaluate", "fit_logistic", "load_pairs",
           "run_supersession", "split", "supersession_markdown", "write_supersession"]

LABELS = ("supersedes", "coexists", "unrelated")
TEST_SLOTS = frozenset({"bank account", "car service", "grocery delivery", "medication",
                        "mobile plan", "project team", "school pickup", "wedding venue"})
"""The held-out slots, none of them a slot of the lexicon. Two earlier test splits were used up
while the rules were written and are now training slots (see docs/supersession.md); these
were written before the last change to the rules and are scored only by this command."""
CV_FOLDS = 5
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


def evaluate(pairs: Sequence[Pair], embedder: Any,
             model: SupersessionModel = DEFAULT_MODEL) -> dict[str, Any]:
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
    flagged = {lab: int(sum(1 for p, h in zip(pairs, pred) if p.label == lab and h))
               for lab in LABELS}
    errors = [{"slot": p.slot, "label": p.label, "old": p.old, "new": p.new,
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
                            model: SupersessionModel = DEFAULT_MODEL) -> dict[str, Any]:
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
    model, cv = choose_model(train, emb)
    res: dict[str, Any] = {
        "embedder": emb.name, "n_pairs": len(pairs),
        "n_slots": len({p.slot for p in pairs}),
        "labels": {lab: sum(p.label == lab for p in pairs) for lab in LABELS},
        "test_slots": sorted(TEST_SLOTS), "cv": cv,
        "fitted_model": {"weights": dict(zip(FEATURES, model.weights)), "bias": model.bias,
                         "threshold": model.threshold},
        "shipped_model": {"weights": dict(zip(FEATURES, DEFAULT_MODEL.weights)),
                          "bias": DEFAULT_MODEL.bias, "threshold": DEFAULT_MODEL.threshold},
        "train": evaluate(train, emb, DEFAULT_MODEL),
        "test": evaluate(test, emb, DEFAULT_MODEL),
        "test_fitted": evaluate(test, emb, model),
        "test_cosine_baseline": _cosine_baseline(test, emb),
    }
    if data_dir is not None:
        res["factconsolidation"] = factconsolidation_check(data_dir, emb)
    return res


def _f(x: float) -> str:
    return f"{x:.3f}" if math.isfinite(x) else "-"


def supersession_markdown(res: dict[str, Any]) -> str:
    """The report as Markdown."""
    cv, test = res["cv"], res["test"]
    tf, base = res["test_fitted"], res["test_cosine_baseline"]
    weights = ", ".join(f"{k} {v:+.3f}" for k, v in res["fitted_model"]["weights"].items())
    labels = ", ".join(f"{k} {v}" for k, v in res["labels"].items())
    flagged = ", ".join(f"{k} {v}" for k, v in test["flagged_by_label"].items())
    lines = [
        "## Supersession detector (offline)",
        "",
        (f"Labelled pairs: {res['n_pairs']} over {res['n_slots']} slots ({labels}); "
         f"embedder {res['embedder']}."),
        f"Test slots ({len(res['test_slots'])}): {', '.join(res['test_slots'])}.",
        "",
        "| split | pairs | positives | precision | recall |",
        "|---|---|---|---|---|",
        (f"| train, {cv['folds']}-fold CV grouped by slot (out of fold) | {cv['n']} | "
         f"{cv['positives']} | {_f(cv['cv_precision'])} | {_f(cv['cv_recall'])} |"),
        (f"| train, shipped model | {res['train']['n']} | {res['train']['positives']} | "
         f"{_f(res['train']['precision'])} | {_f(res['train']['recall'])} |"),
        (f"| **test, shipped model** | {test['n']} | {test['positives']} | "
         f"**{_f(test['precision'])}** | **{_f(test['recall'])}** |"),
        (f"| test, refitted now | {tf['n']} | {tf['positives']} | {_f(tf['precision'])} | "
         f"{_f(tf['recall'])} |"),
        (f"| test, cosine >= {base['theta']} (RCI's theta) | {test['n']} | "
         f"{test['positives']} | {_f(base['precision'])} | {_f(base['recall'])} |"),
        "",
        (f"Chosen by CV: ridge {cv['ridge']}, threshold {cv['threshold']}. Fitted weights: "
         f"{weights}, bias {res['fitted_model']['bias']:+.3f}."),
        "",
        f"Test pairs flagged, by label: {flagged}.",
        "",
        "| test slot | pairs | precision | recall |",
        "|---|---|---|---|",
    ]
    for slot, r in test["per_slot"].items():
        lines.append(f"| {slot} | {r['n']} | {_f(r['precision'])} | {_f(r['recall'])} |")
    if test["errors"]:
        lines += ["", "Test errors:", ""]
        lines += [f"- [{e['slot']}, {e['label']}] {e['old']!r} -> {e['new']!r}"
                  for e in test["errors"]]
    fc = res.get("factconsolidation")
    if fc:
        lines += ["", (f"FactConsolidation check (not fitted on): {fc['caught']} of "
                       f"{fc['pairs']} (old, new) fact pairs caught (recall "
                       f"{_f(fc['recall'])}); {fc['near_others_flagged']} of the "
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
