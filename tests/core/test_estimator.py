"""The offline perishability estimator (issue 8): reproducible, better than the keyword rule on
held-out data, and wired in as the default fallback."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayMemory
from scrubjay.bench.perishability_eval import evaluate, retrain
from scrubjay.cli import main
from scrubjay.estimator import load_default_model, load_statements
from scrubjay.testing import HashEmbedder

DAY, YEAR = 86_400.0, 365.25 * 86_400.0


def test_shipped_model_is_reproduced_by_retraining() -> None:
    shipped, _ = load_default_model()
    again = retrain()
    assert again.spec == shipped.spec
    np.testing.assert_allclose(again.weights, shipped.weights, rtol=1e-3, atol=1e-5)


def test_train_and_test_splits_are_disjoint() -> None:
    train = {r["text"] for r in load_statements("train")}
    test = {r["text"] for r in load_statements("test")}
    assert len(train) >= 900 and len(test) >= 300 and not train & test


def test_held_out_accuracy_beats_keyword_rule_and_never_stale() -> None:
    result = evaluate()
    acc = {k: v["accuracy"] for k, v in result["systems"].items()}
    assert acc["estimator"] >= acc["keyword rule (paper)"] + 0.08
    assert acc["estimator"] >= acc["never stale"] + 0.10
    mae = result["systems"]["estimator"]["mae_log10_lifetime"]
    assert mae < result["systems"]["keyword rule (paper)"]["mae_log10_lifetime"]


@pytest.mark.parametrize(("text", "lo_s", "hi_s"), [
    ("The oven timer has twenty minutes left", 60, DAY),
    ("The plumber comes on Thursday", 3600, 30 * DAY),
    ("I have type 1 diabetes", 2 * YEAR, math.inf),
])
def test_issue_examples_get_realistic_lifetimes(text: str, lo_s: float, hi_s: float) -> None:
    mem = ScrubJayMemory(embedder=HashEmbedder())
    rec = mem.add(text)
    stale_age = rec.tau_s * math.log(2) / rec.pi
    assert rec.source == "estimator" and lo_s <= stale_age <= hi_s


def test_keyword_rule_stays_available() -> None:
    cfg = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"))
    rec = ScrubJayMemory(embedder=HashEmbedder(), config=cfg).add("The plumber comes on Thursday")
    assert (rec.source, rec.label, rec.pi, rec.tau_s) == ("keyword", "factual", 0.1, 45 * DAY)


def test_evaluate_command_prints_the_table() -> None:
    out = io.StringIO()
    assert main(["perishability", "evaluate"], out=out) == 0
    text = out.getvalue()
    for name in ("estimator", "keyword rule (paper)", "never stale", "MAE log10 L", "Cost:"):
        assert name in text
