"""Evaluate the offline perishability estimators on the held-out split.

For each held-out statement with true lifetime ``L`` and each age ``a`` on a log grid from one
minute to two years, the truth is *stale* iff ``a > L``; an estimator says *stale* iff its
``U / V < stale_ratio`` at age ``a``, i.e. iff ``a`` exceeds its stale age ``tau ln(1/r) / pi``.
Accuracy is the mean over statements and ages. Compared: the trained estimator, the paper's
keyword rule, and "never stale".
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import ClassifierConfig, DecayConfig
from ..estimator import (
    LABELS,
    LIFETIME_GRID_LOG10,
    FeatureSpec,
    featurize,
    lifetime_to_perishability,
    load_default_model,
    load_statements,
    median_crossing,
    ridge_fit,
    train_model,
    training_targets,
)
from ..perishability import keyword_classify

__all__ = ["AGES_S", "cross_validate", "evaluate", "format_cv", "format_report"]

YEAR_S = 365.25 * 86_400
#: 25 log-spaced ages from one minute to two years.
AGES_S = np.logspace(math.log10(60.0), math.log10(2 * YEAR_S), 25)
#: Ages shown as columns of the report.
SHOWN = (("1 min", 60.0), ("10 min", 600.0), ("1 h", 3600.0), ("6 h", 21_600.0),
         ("1 d", 86_400.0), ("1 w", 604_800.0), ("1 mo", 2_592_000.0), ("6 mo", 15_768_000.0),
         ("1 y", YEAR_S), ("2 y", 2 * YEAR_S))


def _accuracy(stale_age: np.ndarray, lifetime: np.ndarray, ages: np.ndarray) -> np.ndarray:
    """Per-age accuracy of 'stale iff age > stale_age' against 'stale iff age > lifetime'."""
    truth = ages[None, :] > lifetime[:, None]
    said = ages[None, :] > stale_age[:, None]
    return np.asarray((truth == said).mean(axis=0))


def evaluate(rows: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Figures for the estimator, the keyword rule and never-stale on ``rows`` (default: test)."""
    rows = list(rows if rows is not None else load_statements("test"))
    cfg, ratio = ClassifierConfig(), DecayConfig().stale_ratio
    k = math.log(1.0 / ratio)
    lifetime = np.array([float(r["lifetime_s"]) for r in rows])
    texts, contexts = [r["text"] for r in rows], [r["context"] for r in rows]

    t0 = time.perf_counter()
    model, embedder = load_default_model()
    embedder.embed(texts[:8])  # the first call loads the bundled embedder if not yet loaded
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    log_life, labels = model.predict(texts, contexts, embedder)
    predict_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    embedder.embed(texts)
    embedder.embed(contexts)
    embed_s = time.perf_counter() - t0
    est = [lifetime_to_perishability(10 ** float(x), lab, stale_ratio=ratio,
                                     tau_min_s=cfg.tau_min_s, tau_max_s=cfg.tau_max_s,
                                     pi_min=cfg.pi_min) for x, lab in zip(log_life, labels)]
    kw = [keyword_classify(t, c, None, cfg) for t, c in zip(texts, contexts)]
    systems = {
        "estimator": np.array([p.tau_s * k / p.pi for p in est]),
        "keyword rule (paper)": np.array([p.tau_s * k / p.pi for p in kw]),
        "never stale": np.full(len(rows), np.inf),
    }
    shown = np.array([a for _, a in SHOWN])
    out: dict[str, Any] = {"n": len(rows), "stale_ratio": ratio, "systems": {}}
    for name, stale_age in systems.items():
        per_age = _accuracy(stale_age, lifetime, AGES_S)
        entry = {"accuracy": float(per_age.mean()),
                 "at": dict(zip([s for s, _ in SHOWN],
                                map(float, _accuracy(stale_age, lifetime, shown)))),
                 "mae_log10_lifetime": (float(np.mean(np.abs(np.log10(stale_age)
                                                             - np.log10(lifetime))))
                                        if np.isfinite(stale_age).all() else None)}
        out["systems"][name] = entry
    out["label_accuracy"] = {
        "estimator": float(np.mean([p.label == r["label"] for p, r in zip(est, rows)])),
        "keyword rule (paper)": float(np.mean([p.label == r["label"] for p, r in zip(kw, rows)])),
    }
    add_s = {}
    for offline in ("keyword", "estimator"):
        from ..config import ScrubJayConfig
        from ..memory import ScrubJayMemory

        mem = ScrubJayMemory(config=ScrubJayConfig(classifier=ClassifierConfig(offline=offline)),
                             namespace=f"eval-{offline.replace('_', '-')}")
        items = [{"text": t, "context": c} for t, c in zip(texts, contexts)]
        mem.add_many(items[:4])
        t0 = time.perf_counter()
        for lo in range(4, len(items), 32):
            mem.add_many(items[lo:lo + 32])
        add_s[offline] = (time.perf_counter() - t0) / max(1, len(items) - 4)
        mem.close()
    out["timing"] = {"add_ms_keyword": 1000 * add_s["keyword"],
                     "add_ms_estimator": 1000 * add_s["estimator"], "model_load_s": load_s, "estimate_ms_per_statement":
                     1000 * predict_s / len(rows), "embed_ms_per_statement":
                     1000 * embed_s / len(rows)}
    return out


def format_report(result: dict[str, Any]) -> str:
    """The figures as Markdown tables."""
    head = "| system | accuracy | " + " | ".join(s for s, _ in SHOWN) + " | MAE log10 L |"
    lines = [(f"Held-out statements: {result['n']}; stale when U/V < {result['stale_ratio']}; "
              f"accuracy = mean over 25 log-spaced ages from 1 min to 2 years."), "", head,
             "|" + "---|" * (len(SHOWN) + 3)]
    for name, e in result["systems"].items():
        mae = "-" if e["mae_log10_lifetime"] is None else f"{e['mae_log10_lifetime']:.2f}"
        lines.append(f"| {name} | **{e['accuracy']:.3f}** | "
                     + " | ".join(f"{e['at'][s]:.2f}" for s, _ in SHOWN) + f" | {mae} |")
    la = result["label_accuracy"]
    t = result["timing"]
    lines += ["", (f"Label accuracy: estimator {la['estimator']:.3f}, keyword rule "
                   f"{la['keyword rule (paper)']:.3f}."),
              (f"Cost: model load {t['model_load_s']:.2f} s once per process (includes the "
               f"bundled embedder when not yet loaded); estimate "
               f"{t['estimate_ms_per_statement']:.3f} ms per statement (features + embedding) "
               f"vs embedding text and context alone {t['embed_ms_per_statement']:.3f} ms; "
               f"ScrubJayMemory.add_many (in-memory Chroma, batches of 32) "
               f"{t['add_ms_estimator']:.2f} ms per memory with the estimator vs "
               f"{t['add_ms_keyword']:.2f} ms with the keyword rule (same run).")]
    return "\n".join(lines)


def retrain(spec: FeatureSpec | None = None):  # type: ignore[no-untyped-def]
    """The shipped model, re-fitted from the train splits (deterministic): the statements'
    and the everyday-lifetimes set's (:mod:`scrubjay.bench.lifetimes`, with empty contexts
    and range targets)."""
    from ..embedding import WordLlamaEmbedder
    from .lifetimes import load_lifetime_set

    rows = load_statements("train") + [{**r, "context": ""}
                                       for r in load_lifetime_set("train")]
    return train_model(rows, WordLlamaEmbedder(), spec)


def cross_validate(folds: int = 5, spec: FeatureSpec | None = None) -> dict[str, Any]:
    """Stale/valid accuracy of the shipped design against a regression on log lifetime, by
    ``folds``-fold cross-validation on the *train* split, grouped by domain (a domain is never
    in both the fitting and the scoring part). The test split is not read.
    """
    from ..embedding import WordLlamaEmbedder

    rows = load_statements("train")
    spec = spec or FeatureSpec()
    domains = sorted({r["domain"] for r in rows})
    order = np.random.default_rng(0).permutation(len(domains))
    fold_of = {d: int(order[i]) % folds for i, d in enumerate(domains)}
    fold = np.array([fold_of[r["domain"]] for r in rows])
    x = featurize([r["text"] for r in rows], [r["context"] for r in rows], spec,
                  WordLlamaEmbedder()).astype(np.float64)
    life = np.log10([float(r["lifetime_s"]) for r in rows])
    y = training_targets(rows, LIFETIME_GRID_LOG10)
    pred = {"ordinal (shipped)": np.zeros(len(rows)), "regression on log10 L": np.zeros(len(rows))}
    for f in range(folds):
        fit, held = fold != f, fold == f
        w = ridge_fit(x[fit], y[fit], spec.ridge)
        pred["ordinal (shipped)"][held] = median_crossing(x[held] @ w[:, len(LABELS):],
                                                          LIFETIME_GRID_LOG10)
        pred["regression on log10 L"][held] = x[held] @ ridge_fit(x[fit], life[fit], spec.ridge)
    ages = np.log10(AGES_S)
    return {"n": len(rows), "folds": folds, "systems": {
        name: {"accuracy": float(((ages[None, :] > life[:, None])
                                  == (ages[None, :] > p[:, None])).mean()),
               "mae_log10_lifetime": float(np.mean(np.abs(p - life)))}
        for name, p in pred.items()}}


def format_cv(result: dict[str, Any]) -> str:
    """The cross-validation figures as a Markdown table."""
    lines = [(f"{result['folds']}-fold cross-validation grouped by domain on the train split "
              f"({result['n']} statements; the test split is not read)."), "",
             "| lifetime model | stale/valid accuracy | MAE log10 L |", "|---|---|---|"]
    for name, e in result["systems"].items():
        lines.append(f"| {name} | {e['accuracy']:.3f} | {e['mae_log10_lifetime']:.2f} |")
    return "\n".join(lines)
