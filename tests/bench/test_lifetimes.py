"""Everyday lifetimes (issue 40): plausible for a person, and robust to the context string."""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scrubjay import ScrubJayMemory
from scrubjay.bench.lifetimes import (
    ROBUSTNESS_CONTEXTS,
    ROBUSTNESS_FACTOR,
    evaluate_lifetimes,
    load_lifetime_set,
    stale_ages_s,
)
from scrubjay.cli import main
from scrubjay.errors import InvalidInputError
from scrubjay.estimator import CONTEXT_NUDGE_DECADES, load_default_model
from scrubjay.testing import HashEmbedder

HOUR, DAY, WEEK, YEAR = 3600.0, 86_400.0, 604_800.0, 365.25 * 86_400.0

#: The test-split accuracy measured when the set was introduced was 0.630 (the estimator
#: before it: 0.556); this floor keeps it from drifting down unnoticed.
TEST_ACCURACY_FLOOR = 0.60


@pytest.fixture(scope="module")
def figures() -> dict:
    return evaluate_lifetimes()


def test_the_set_covers_everyday_topics_with_a_fixed_split() -> None:
    rows = load_lifetime_set()
    assert len(rows) >= 200 and len({r["text"] for r in rows}) == len(rows)
    topics = Counter(r["topic"] for r in rows)
    for topic in ("parking", "room", "code", "travel", "diet", "reading", "desk", "job",
                  "place", "preference", "family", "meeting", "mood", "bug", "plan"):
        assert topics[topic] >= 8, topic
    assert all(0 < r["lo_s"] < r["hi_s"] for r in rows)
    # the split is the documented rule: per topic, by the text's BLAKE2b hash, every third
    for topic in topics:
        group = sorted((r for r in rows if r["topic"] == topic),
                       key=lambda r: hashlib.blake2b(r["text"].encode()).hexdigest())
        assert [r["split"] for r in group] == \
            ["test" if i % 3 == 0 else "train" for i in range(len(group))]
    assert len(load_lifetime_set("test")) >= 90


def test_lifetimes_are_robust_to_the_context_string(figures: dict) -> None:
    """>= 90% of the statements keep, under every context, a lifetime within a factor 3 of
    their median over the contexts (none of these contexts changes a statement's meaning)."""
    assert len(figures["contexts"]) >= 10 and "" in figures["contexts"]
    assert figures["factor"] == ROBUSTNESS_FACTOR == 3.0
    assert figures["all"]["robust"] >= 0.90
    assert figures["splits"]["test"]["robust"] >= 0.90


def test_test_split_accuracy_does_not_drift(figures: dict) -> None:
    test = figures["splits"]["test"]
    assert test["n"] == len(load_lifetime_set("test"))
    assert test["accuracy"] >= TEST_ACCURACY_FLOOR
    assert test["accuracy_all_contexts"] >= TEST_ACCURACY_FLOOR - 0.05


def test_robustness_is_measured_not_assumed() -> None:
    """The measure itself: a lifetime moved 10x by one context is not robust."""
    rows = load_lifetime_set("test")[:5]
    result = evaluate_lifetimes(rows, contexts=ROBUSTNESS_CONTEXTS[:3])
    assert result["all"]["robust"] == 1.0
    lo = np.array([r["lo_s"] for r in rows])
    hi = np.array([r["hi_s"] for r in rows])
    own = stale_ages_s([r["text"] for r in rows], [""] * len(rows))
    inside = (own >= lo) & (own <= hi)
    assert result["all"]["accuracy"] == pytest.approx(inside.mean())
    with pytest.raises(InvalidInputError, match="'rows' and 'contexts'"):
        evaluate_lifetimes([], contexts=ROBUSTNESS_CONTEXTS)


def test_a_context_only_nudges_the_lifetime() -> None:
    """Any context, however odd, moves the text's own lifetime by at most the bound."""
    model, embedder = load_default_model()
    texts = ["I parked on level 2, spot B17", "I'm vegetarian", "My sister lives in Oslo",
             "The kettle has just boiled"]
    contexts = ["emergency right now, seconds left", "lifelong identity since birth",
                "every day for years", "tonight at 10pm for an hour"]
    alone, _ = model.predict(texts, [""] * len(texts), embedder)
    for c in contexts:
        nudged, _ = model.predict(texts, [c] * len(texts), embedder)
        assert np.all(np.abs(nudged - alone) <= CONTEXT_NUDGE_DECADES + 1e-9)
    assert 2 * CONTEXT_NUDGE_DECADES < math.log10(ROBUSTNESS_FACTOR)


def _stale_age(text: str, context: str) -> float:
    rec = ScrubJayMemory(embedder=HashEmbedder()).add(text, context=context)
    assert rec.source == "estimator"
    return rec.tau_s * math.log(2) / rec.pi


@pytest.mark.parametrize(("text", "lo_s", "hi_s"), [
    ("I parked on level 2, spot B17", HOUR, DAY),  # hours, not days
    # a booked stay: days to weeks (the set accepts 1 d - 3 w; 'travel' nudges it to 22 d)
    ("I booked the Hotel Adlon for two nights", DAY, 30 * DAY),
    ("I'm reading a book at the moment", 2 * DAY, 8 * WEEK),  # days to weeks
    ("I'm vegetarian", YEAR, math.inf),  # years
])
@pytest.mark.parametrize("context", ["", "commute", "work", "chat with Sam", "travel"])
def test_issue_examples_get_lifetimes_a_person_accepts(text: str, lo_s: float, hi_s: float,
                                                       context: str) -> None:
    assert lo_s <= _stale_age(text, context) <= hi_s


def test_lifetimes_command_prints_and_writes_the_figures(tmp_path: Path) -> None:
    out = io.StringIO()
    assert main(["perishability", "lifetimes", "--out", str(tmp_path)], out=out) == 0
    text = out.getvalue()
    for needle in ("robust", "accuracy", "| test |", "I parked on level 2, spot B17"):
        assert needle in text
    data = json.loads((tmp_path / "lifetimes.json").read_text())
    assert data["splits"]["test"]["robust"] >= 0.90
    assert (tmp_path / "lifetimes.md").read_text().strip() in text


def test_cross_validation_shows_the_unbounded_context_is_not_robust() -> None:
    """The reason for the bound, on the train splits: unbounded, the context moves lifetimes
    far (robustness well under 90%); bounded, every statement stays within the factor."""
    from scrubjay.bench.lifetimes import cross_validate_nudge, format_nudge_cv

    result = cross_validate_nudge(folds=3, bounds=(0.0, CONTEXT_NUDGE_DECADES, None))
    by = {e["bound_decades"]: e for e in result["bounds"]}
    assert by[0.0]["everyday_robust"] == by[CONTEXT_NUDGE_DECADES]["everyday_robust"] == 1.0
    assert by[None]["everyday_robust"] < 0.6
    assert by[CONTEXT_NUDGE_DECADES]["statements_accuracy"] >= 0.85
    assert "unbounded" in format_nudge_cv(result)
