"""The offline perishability estimator (issue 8): reproducible, better than the keyword rule on
held-out data, and wired in as the default fallback."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayMemory
from scrubjay.bench.perishability_eval import cross_validate, evaluate, retrain
from scrubjay.cli import main
from scrubjay.estimator import LABELS, featurize, load_default_model, load_statements
from scrubjay.testing import HashEmbedder

DAY, YEAR = 86_400.0, 365.25 * 86_400.0


def test_shipped_model_is_reproduced_by_retraining() -> None:
    shipped, _ = load_default_model()
    again = retrain()
    assert again.spec == shipped.spec
    np.testing.assert_array_equal(again.grid, shipped.grid)
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


def test_held_out_accuracy_meets_the_issue_target() -> None:
    """Issue 8: >= 85% stale/valid accuracy on the held-out split (keyword rule: about 70%)."""
    assert evaluate()["systems"]["estimator"]["accuracy"] >= 0.85


def test_ordinal_lifetime_beats_a_regression_on_log_lifetime_in_cross_validation() -> None:
    """The shipped design choice, checked on the train split only (grouped by domain)."""
    systems = cross_validate()["systems"]
    ordinal, regression = systems["ordinal (shipped)"], systems["regression on log10 L"]
    assert ordinal["accuracy"] > regression["accuracy"]
    assert ordinal["mae_log10_lifetime"] < regression["mae_log10_lifetime"]


def test_predicted_lifetime_is_where_the_stale_probability_crosses_one_half() -> None:
    model, embedder = load_default_model()
    feats = featurize(["The kettle has just boiled"], [""], model.spec, embedder)
    scores = (feats.astype(np.float64) @ model.weights)[0, len(LABELS):]
    log_life, _ = model.predict(["The kettle has just boiled"], [""], embedder)
    mono = np.maximum.accumulate(scores)
    j = int(np.searchsorted(model.grid, log_life[0]))
    assert mono[j - 1] < 0.5 <= mono[j]


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


def test_sparse_prediction_equals_the_dense_features_times_the_weights() -> None:
    model, embedder = load_default_model()
    rows = load_statements("test")[:50] + [{"text": "ok", "context": ""},
                                           {"text": "?!", "context": "at the desk"}]
    texts, contexts = [r["text"] for r in rows], [r["context"] for r in rows]
    dense = featurize(texts, contexts, model.spec, embedder).astype(np.float64) @ \
        model.weights.astype(np.float64)
    np.testing.assert_allclose(model.scores(texts, contexts, embedder), dense, rtol=1e-5,
                               atol=1e-5)


def test_cue_counts_match_the_case_insensitive_patterns_on_any_text() -> None:
    """ASCII texts take a lower-cased, case-sensitive path: the counts must be the ones the
    IGNORECASE patterns give, upper case, capping at 2 and non-ASCII texts included."""
    from scrubjay.estimator import _CUE_RX, _cues

    texts = [s["text"] for s in load_statements()[:400]] + [
        "I'M RIGHT NOW At The Office, currently WAITING", "Born in 1990 and ALLERGIC to nuts",
        "", "every DAY every day every Day", "Kelvin \u212a and 10 MINS", "straße: 5 seconds",
        "\u0130stanbul next WEEK", "PLEASE hold on", "At 10:30 AM tomorrow",
        # the batch is scanned joined: no match may span two texts or miss a text's start
        "the build is", "going well", "she is", "", "waiting", "we are", " at home",
        "please", "keep it", "i am\x00 going", "run it\x00please check", "do not\x00run"]
    expected = np.array([[min(2, len(rx.findall(t))) for rx in _CUE_RX] for t in texts])
    got = _cues(texts)
    assert got.shape == expected.shape and np.array_equal(got, expected)
    assert got.sum() > len(texts)  # the cues do fire
    for n in (1, 2, 7):  # any batch size, and each text alone
        assert np.array_equal(np.vstack([_cues(texts[i:i + n])
                                         for i in range(0, len(texts), n)]), expected)


def test_every_cue_match_holds_one_of_its_patterns_anchors() -> None:
    """``_cues`` scans only the texts that hold one of a pattern's anchors: each match of each
    pattern (the statements' texts, lower-cased) must contain one, and every pattern but the
    ``^`` one must have anchors (else the prefilter is lost)."""
    from scrubjay.estimator import _CUE_ANCHORS, _CUE_RX_JOINED, CUES, _required

    texts = [s["text"].lower() for s in load_statements()]
    texts = [t for t in texts if t.isascii()]
    fired = 0
    for (name, pattern), rx, anchors in zip(CUES.items(), _CUE_RX_JOINED, _CUE_ANCHORS,
                                            strict=True):
        assert (anchors is None) == pattern.startswith("^"), name
        for t in texts:
            for m in rx.finditer(t):
                fired += 1
                assert anchors is None or any(a in m.group() for a in anchors), (name, t)
    assert fired > len(texts)
    from re import _parser
    parse = _parser.parse
    assert _required(parse(r"\b(ab|cd)e?\b")) == {"ab", "cd"}
    assert _required(parse(r"(ab|\w+)x")) == {"x"}  # an open branch gives nothing
    assert _required(parse(r"x?(y)*")) is None  # nor does what may match nothing
    assert _required(parse(r"\d+|one")) == {*"0123456789", "one"}
    assert _required(parse(r"(?i:abc)")) is None  # a case-folding group: no literal


def test_estimates_do_not_depend_on_the_batch_or_its_chunks(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The estimator's batch paths (the joined cue scan, the grouped embedding pooling, one
    n-gram hashing pass) give each text the estimate it gets alone, whatever the chunk size
    and with the bundled rows reused or embedded again."""
    from scrubjay import perishability
    from scrubjay.config import ClassifierConfig
    from scrubjay.embedding import WordLlamaEmbedder
    from scrubjay.perishability import Classifier

    rows = load_statements("test")[:60]
    texts = [r["text"] for r in rows] + ["", "PLEASE keep the door shut", "I am", "going home"]
    contexts = [r["context"] for r in rows] + ["", "at home", "", "at the office"]
    emb = WordLlamaEmbedder()
    what, where = emb.embed(texts), emb.embed(contexts)
    clf = Classifier(ClassifierConfig())
    alone = [clf.classify_many([t], [c], what[i:i + 1], where[i:i + 1])[0]
             for i, (t, c) in enumerate(zip(texts, contexts, strict=True))]
    for chunk in (3, 2048):
        monkeypatch.setattr(perishability, "ESTIMATE_CHUNK", chunk)
        for by in (None, emb.name):
            got = clf.classify_many(texts, contexts, what, where, vectors_by=by)
            for a, b in zip(got, alone, strict=True):
                assert (a.label, a.source) == (b.label, b.source)
                assert a.tau_s == pytest.approx(b.tau_s, rel=1e-9)
                assert a.pi == b.pi
    assert len({p.label for p in alone}) >= 3


def test_batch_ngram_columns_are_each_texts_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_bow_rows`` hashes a batch's n-grams through one cache and dedups them with numpy:
    per text, the distinct ascending columns of ``_bow_columns`` (repeated words, empty and
    non-ASCII texts, a cache cleared as it fills)."""
    from scrubjay import estimator

    texts = [s["text"] for s in load_statements()[:300]] + [
        "", "the the the the", "It's 5 o'clock, it's LATE", "straße \u212a ünïcode", "?!",
        "a b a b a b"]
    want = [estimator._bow_columns(t, 4096) for t in texts]
    for cap in (estimator._COLUMNS_MAX, 50):
        monkeypatch.setattr(estimator, "_COLUMNS_MAX", cap)
        estimator._COLUMNS.clear()
        sizes, flat = estimator._bow_rows(texts, 4096)
        got = np.split(flat, np.cumsum(sizes)[:-1])
        assert [g.tolist() for g in got] == want
    assert len(estimator._COLUMNS[4096]) <= 50
    sizes, flat = estimator._bow_rows(texts, 64)  # another width: its own cache
    assert [g.tolist() for g in np.split(flat, np.cumsum(sizes)[:-1])] == \
        [estimator._bow_columns(t, 64) for t in texts]
