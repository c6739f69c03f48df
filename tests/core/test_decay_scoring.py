"""Utility decay (Eq. 3) and adaptive weights (Eq. 6): hand-computed values and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scrubjay.config import ClassifierConfig, DecayConfig, WeightConfig
from scrubjay.decay import is_stale, stale_age_s, utility, utility_scalar
from scrubjay.perishability import keyword_classify
from scrubjay.scoring import (
    adaptive_weights,
    combine,
    keyword_biases,
    relevance_bound,
    relevance_key,
)

HOUR = 3600.0
DAY = 86_400.0

values = st.floats(0.0, 10.0)
pis = st.floats(1e-3, 1.0)
taus = st.floats(60.0, 5 * 365 * DAY)
ages = st.floats(0.0, 10 * 365 * DAY)


def test_utility_hand_computed() -> None:
    # task-specific: V=1, pi=0.6, tau=24 h, 12 h old -> exp(-0.6 * 0.5) = exp(-0.3)
    assert utility(1.0, 0.6, 24 * HOUR, 0.0, 12 * HOUR) == pytest.approx(math.exp(-0.3))
    # factual: V=2, pi=0.1, tau=45 d, 90 d old -> 2 exp(-0.2)
    assert utility(2.0, 0.1, 45 * DAY, 100.0, 100.0 + 90 * DAY) == pytest.approx(
        2 * math.exp(-0.2))
    # query before creation: age 0
    assert utility(1.0, 0.9, HOUR, 1000.0, 0.0) == 1.0


@given(values, pis, taus, ages, ages)
def test_utility_bounded_and_non_increasing(v: float, pi: float, tau: float, a1: float,
                                            a2: float) -> None:
    young, old = sorted((a1, a2))
    u_young = float(utility(v, pi, tau, 0.0, young))
    u_old = float(utility(v, pi, tau, 0.0, old))
    assert 0.0 <= u_old <= u_young <= v + 1e-12
    assert u_young == pytest.approx(utility_scalar(v, pi, tau, 0.0, young), rel=1e-9, abs=1e-12)


def test_vectorised_matches_reference() -> None:
    rng = np.random.default_rng(0)
    n = 200
    v, pi = rng.uniform(0, 2, n), rng.uniform(0.01, 1, n)
    tau, t = rng.uniform(60, 1e8, n), rng.uniform(0, 1e9, n)
    vec = utility(v, pi, tau, t, 1.2e9)
    ref = [utility_scalar(*args, 1.2e9) for args in zip(v, pi, tau, t, strict=True)]
    np.testing.assert_allclose(vec, ref, rtol=1e-12)


def test_ephemeral_turns_stale_long_before_factual() -> None:
    cfg = ClassifierConfig()
    eph = keyword_classify("I am at the dentist right now", "", None, cfg)
    fact = keyword_classify("My mother was born in Porto", "", None, cfg)
    ratio = DecayConfig().stale_ratio
    t_eph = stale_age_s(eph.pi, eph.tau_s, ratio)
    t_fact = stale_age_s(fact.pi, fact.tau_s, ratio)
    assert t_eph < 2 * HOUR            # 2h * ln2 / 0.9 = 1.54 h
    assert t_fact > 300 * DAY          # 45d * ln2 / 0.1 = 312 d
    # and the flag agrees at one day
    u = utility([1.0, 1.0], [eph.pi, fact.pi], [eph.tau_s, fact.tau_s], [0.0, 0.0], DAY)
    assert is_stale(u, [1.0, 1.0], ratio).tolist() == [True, False]


def test_weights_hand_computed() -> None:
    cfg = WeightConfig()
    # "latest" -> when +1.5; unit query, unit context, dt = e^5 - 1 -> 0.2 * 5 = 1.0
    w = adaptive_weights("latest news", 1.0, 1.0, math.exp(5) - 1, cfg)
    logits = np.array([1.5 + 0.2, 1.0 + 0.1, 1.0 + 1.5 + 1.0, 1.0])
    expected = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(w, expected)
    # the when term is capped at 2
    w_cap = adaptive_weights("x", 1.0, 0.0, 1e12, cfg)
    logits = np.array([1.7, 1.0, 3.0, 1.0])
    np.testing.assert_allclose(w_cap, np.exp(logits) / np.exp(logits).sum())


def test_keyword_biases_each_component_once() -> None:
    cfg = WeightConfig()
    b = keyword_biases("What is the latest related project detail, which is recent?", cfg)
    assert b.tolist() == [0.8, 1.0, 1.5, 0.8]
    assert keyword_biases("nothing here", cfg).tolist() == [0, 0, 0, 0]


def test_keyword_table_given_as_lists_is_held_as_tuples() -> None:
    """A bias table read from JSON arrives as lists: the config holds it as tuples, so that
    scoring can cache its lookup per table; single words and phrases both match."""
    table = [["what", 0.5, ["dog", "cat food"]]]
    cfg = WeightConfig(keyword_biases=table)  # type: ignore[arg-type]
    assert cfg.keyword_biases == (("what", 0.5, ("dog", "cat food")),)
    assert keyword_biases("my dog", cfg).tolist() == [0.5, 0, 0, 0]
    assert keyword_biases("some cat food", cfg).tolist() == [0.5, 0, 0, 0]
    assert keyword_biases("a cat", cfg).tolist() == [0, 0, 0, 0]


@given(st.text(max_size=50), st.floats(0, 2), st.floats(0, 2), st.floats(0, 1e10))
def test_weights_are_a_distribution(q: str, en: float, cn: float, dt: float) -> None:
    w = adaptive_weights(q, en, cn, dt, WeightConfig())
    assert w.shape == (4,) and np.all(w > 0) and w.sum() == pytest.approx(1.0)


def test_combine() -> None:
    s = combine(np.array([0.4, 0.3, 0.2, 0.1]), np.array([1.0]), np.array([0.5]),
                np.array([0.25]), np.array([2.0]))
    assert s[0] == pytest.approx(0.4 + 0.15 + 0.05 + 0.2)


def test_relevance_key_hand_computed() -> None:
    w = np.array([0.4, 0.2, 0.2, 0.2])
    # (0.4 * 0.9 + 0.2 * 0.5) / 0.6 * 0.5 / 1.0 = 0.46 / 0.6 * 0.5
    assert relevance_key(w, np.array([0.9]), np.array([0.5]), np.array([0.5]), 1.0)[0] == \
        pytest.approx(0.46 / 0.6 * 0.5)


sims = st.floats(-1.0, 1.0)


@given(st.lists(st.floats(0.01, 1.0), min_size=4, max_size=4), sims, sims, values,
       st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_relevance_bound_dominates_every_key_within_its_limits(
        w: list[float], what_max: float, where_max: float, value_max: float,
        f_what: float, f_where: float, f_value: float) -> None:
    # any memory with what <= what_max, where <= where_max and 0 <= value <= value_max
    weights = np.asarray(w) / sum(w)
    what = what_max - f_what * (what_max + 1.0)
    where = where_max - f_where * (where_max + 1.0)
    key = relevance_key(weights, np.array([what]), np.array([where]),
                        np.array([f_value * value_max]), 1.0)[0]
    assert key <= relevance_bound(weights, what_max, where_max, value_max, 1.0) + 1e-12
