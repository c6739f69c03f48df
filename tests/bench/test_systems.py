"""The benchmark systems: one interface, hand-checked arithmetic (RRF, recency)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scrubjay.bench.systems import (
    RECENCY_T_S,
    RRF_K,
    SYSTEM_NAMES,
    Answer,
    CachedEmbedder,
    DenseRecencySystem,
    MemoryItem,
    RRFSystem,
    close_system,
    make_system,
    recency_factor,
    rrf_scores,
    scrubjay_config,
)
from scrubjay.testing import HashEmbedder

T0 = 1_767_225_600.0
DAY = 86_400.0

MEMORIES = [
    MemoryItem("m1", "Leo's home city is Osaka.", "chat 1", T0),
    MemoryItem("m2", "Priya prefers Zed as her editor.", "chat 1", T0 + 60),
    MemoryItem("m3", "The build of the Falcon service is green.", "chat 2", T0 + 120),
]


@pytest.fixture(scope="module")
def emb() -> CachedEmbedder:
    return CachedEmbedder(HashEmbedder(dim=64))


@pytest.mark.parametrize("name", SYSTEM_NAMES)
def test_every_system_honours_the_interface(name: str, emb: CachedEmbedder) -> None:
    system = make_system(name, emb, seed=1)
    try:
        system.index(MEMORIES)
        for k in (1, 2, 3):
            answers = system.answer("What is Leo's home city?", T0 + DAY, k=k)
            assert 1 <= len(answers) <= k
            assert all(isinstance(a, Answer) and isinstance(a.judged_valid, bool)
                       for a in answers)
            assert {a.id for a in answers} <= {m.id for m in MEMORIES}
            assert all(a.text == {m.id: m.text for m in MEMORIES}[a.id] for a in answers)
        new_id = system.update("Leo moved to Lisbon, his home city now.", "chat 3",
                               T0 + 2 * DAY, memory_id="m4")
        assert new_id == "m4"
        ids = [a.id for a in system.answer("Leo home city Lisbon", T0 + 3 * DAY, k=4)]
        assert "m4" in ids
    finally:
        close_system(system)


def test_systems_without_time_judge_everything_valid(emb: CachedEmbedder) -> None:
    for name in ("B2-bm25", "B3-dense", "B4-rrf"):
        system = make_system(name, emb)
        system.index(MEMORIES)
        assert all(a.judged_valid for a in system.answer("Osaka", T0 + 1000 * DAY, k=3))


def test_rrf_hand_example() -> None:
    # Ranking 1: a, b, c; ranking 2: c, a. With k = 60:
    # a = 1/61 + 1/62, b = 1/62, c = 1/63 + 1/61.
    s = rrf_scores([["a", "b", "c"], ["c", "a"]], k=60)
    assert s["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert s["b"] == pytest.approx(1 / 62)
    assert s["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert sorted(s, key=lambda d: -s[d]) == ["a", "c", "b"]
    assert RRF_K == 60


def test_rrf_system_fuses_bm25_and_dense(emb: CachedEmbedder) -> None:
    system = RRFSystem(emb)
    system.index(MEMORIES)
    ids = [m.id for m in MEMORIES]
    q = "Priya editor"
    rb = [ids[i] for i in system.bm25._top(system.bm25.scores(q), 3)]
    rd = [ids[i] for i in system.dense._top(system.dense.cosines(q), 3)]
    fused = rrf_scores([rb, rd])
    expected = sorted(ids, key=lambda d: (-fused[d], ids.index(d)))
    assert [a.id for a in system.answer(q, T0, k=3)] == expected


def test_recency_formula_and_staleness(emb: CachedEmbedder) -> None:
    t = RECENCY_T_S
    assert recency_factor(0.0, t) == pytest.approx(1.0)
    assert recency_factor(t, t) == pytest.approx(math.exp(-1))
    assert recency_factor(-5.0, t) == pytest.approx(1.0)  # before creation: age 0
    system = DenseRecencySystem(emb)
    system.index(MEMORIES[:1])
    half_life = t * math.log(2)
    assert system.answer("Osaka", T0 + half_life - 60, k=1)[0].judged_valid
    assert not system.answer("Osaka", T0 + half_life + 60, k=1)[0].judged_valid
    # score = cos * exp(-age / T)
    system.index(MEMORIES[1:2])
    cos = system.cosines("Osaka editor")
    at = T0 + 10 * DAY
    score = cos * np.exp(-(at - np.array([T0, T0 + 60])) / t)
    best = MEMORIES[int(np.argmax(score))].id
    assert system.answer("Osaka editor", at, k=1)[0].id == best


def test_scrubjay_ablation_configs() -> None:
    no_decay = scrubjay_config("SJ-no-decay").classifier
    assert no_decay.keyword_rules == () and no_decay.default_pi == no_decay.pi_min
    # U/V after one year stays above 0.99: exp(-pi_min * 1 y / 5 y)
    assert math.exp(-no_decay.pi_min * 365 * DAY / no_decay.default_tau_s) > 0.99
    assert scrubjay_config("SJ-no-graph").graph.max_neighbors == 0
    w = scrubjay_config("SJ-uniform-w").weights
    assert len(set(w.base_logits)) == 1 and w.keyword_biases == ()
    assert w.what_norm_coef == w.where_norm_coef == w.when_log_coef == 0
    with pytest.raises(ValueError):
        scrubjay_config("SJ-nonsense")
    with pytest.raises(ValueError):
        make_system("nonsense")


def test_scrubjay_no_rci_update_is_a_plain_add(emb: CachedEmbedder) -> None:
    full, plain = make_system("SJ-full", emb), make_system("SJ-no-rci", emb)
    try:
        for s in (full, plain):
            s.index(MEMORIES)
            s.update("Leo's home city is no longer Osaka; it changed to Lisbon.", "", T0 + DAY,
                     memory_id="m4")
        assert full.last_report is not None
        assert not hasattr(plain, "last_report")
        assert len(full.mem) == len(plain.mem) == 4
    finally:
        close_system(full)
        close_system(plain)


@pytest.mark.parametrize("cls_name", ["LangChainTimeWeightedSystem",
                                      "LlamaIndexTimeWeightedSystem"])
def test_time_weighted_frameworks_follow_the_query_time(cls_name: str,
                                                        emb: CachedEmbedder) -> None:
    import scrubjay.bench.systems as S

    cls = getattr(S, cls_name)
    old = MemoryItem("old", "Leo's home city is Osaka.", "", T0)
    new = MemoryItem("new", "Leo's home city is Osaka, he said.", "", T0 + 10 * DAY)
    system = cls(emb)
    system.index([old, new])
    # Query at T0 + 10 days: the new memory has time factor 1, the old one 0.99 ** 240.
    first = system.answer("Leo home city Osaka", T0 + 10 * DAY, k=2)
    assert first[0].id == "new" and first[0].judged_valid
    assert not {a.id: a for a in first}["old"].judged_valid   # 0.99 ** 240 = 0.09 < 0.5
    # Without access refresh the ranking does not depend on earlier queries.
    assert system.answer("Leo home city Osaka", T0 + 10 * DAY, k=2) == first
    # One hour after creation the factor is 0.99: still valid.
    fresh = cls(emb)
    fresh.index([old])
    assert fresh.answer("Osaka", T0 + 3600, k=1)[0].judged_valid


def test_hybrid_is_the_fusion_of_its_two_channels(emb: CachedEmbedder) -> None:
    from scrubjay.fusion import LEXICAL_WEIGHT, fuse, lexical_score

    system = make_system("hybrid", emb)
    try:
        system.index(MEMORIES)
        answers = system.answer("which editor, Zed?", T0 + DAY, k=3)
        cos, bm, _ = system.channels("which editor, Zed?")
        expected = fuse(cos, lexical_score(bm), LEXICAL_WEIGHT)
        assert [a.id for a in answers] == [MEMORIES[i].id for i in np.argsort(-expected)]
        assert answers[0].id == "m2"
        assert [a.score for a in answers] == pytest.approx(sorted(expected, reverse=True))
        # no index term: the dense order, scaled by 1 - lambda
        only_stop = system.answer("the and of?", T0 + DAY, k=3)
        cos = system.channels("the and of?")[0]
        assert [a.score for a in only_stop] == pytest.approx(
            sorted((1 - LEXICAL_WEIGHT) * cos, reverse=True))
    finally:
        close_system(system)


def test_bm25_dense_rrf_ranks_by_reciprocal_ranks(emb: CachedEmbedder) -> None:
    system = make_system("bm25-dense-rrf", emb)
    try:
        system.index(MEMORIES)
        top = system.answer("Falcon build", T0 + DAY, k=3)
        assert top[0].id == "m3"
        # first on both channels: 0.5 / (60 + 1) twice
        assert top[0].score == pytest.approx(1 / (RRF_K + 1))
    finally:
        close_system(system)
