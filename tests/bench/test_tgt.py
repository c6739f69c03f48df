"""Tests of the TGT generator (scrubjay.bench.tgt) and its scoring (scrubjay.bench.tgt_scoring)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrubjay.bench import tgt, tgt_scoring
from scrubjay.bench._tgt_templates import CATEGORIES
from scrubjay.bench.tgt import (
    CATEGORY_KEYS,
    FUTURE_TASKS,
    MEMORY_TYPES,
    QUERY_KINDS,
    SESSION_LENGTH_S,
    TGTConfig,
    TGTInstance,
    TGTQuery,
    export_json,
    generate,
    load_json,
    strip_checkpoint,
    system_view,
)
from scrubjay.bench.tgt_scoring import (
    QueryResult,
    TGTReport,
    aggregate_seeds,
    always_valid_results,
    audit,
    factual_correct,
    format_audit,
    judged_stale,
    keyword_solvable,
    mean_ci,
    random_results,
    score,
    t_quantile_975,
    tokenize,
)

# ---------------------------------------------------------------------------
# fixtures and helpers
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bench0() -> list[TGTInstance]:
    return generate(TGTConfig(seed=0))


def _query(
    *,
    interval: str = "I1",
    type_id: str = "A",
    valid: bool = True,
    value: str = "north atrium",
    kind: str = "factual",
    n: int = 0,
) -> TGTQuery:
    """A fabricated query for scoring tests."""
    return TGTQuery(
        query_id=f"q{n}",
        text="What is Priya's current work spot?",
        time_s=0.0,
        kind=kind,
        interval=interval,
        held_out=interval in ("I3", "I5"),
        offset_sessions=0.0,
        target_memory_id="m0",
        type_id=type_id,
        category="current_location",
        answer_value=value,
        ground_truth_valid=valid,
        is_distractor=False,
    )


# ---------------------------------------------------------------------------
# generator: determinism, counts, structure
# ---------------------------------------------------------------------------


def test_same_seed_same_instances() -> None:
    cfg = TGTConfig(seed=7, n_instances=3)
    assert generate(cfg) == generate(cfg)


def test_different_seeds_differ() -> None:
    a = generate(TGTConfig(seed=0, n_instances=2))
    b = generate(TGTConfig(seed=1, n_instances=2))
    assert [m.text for m in a[0].memories] != [m.text for m in b[0].memories]
    assert [q.time_s for q in a[0].queries] != [q.time_s for q in b[0].queries]


def test_instances_differ_within_a_seed(bench0: list[TGTInstance]) -> None:
    bodies = [{strip_checkpoint(m.text) for m in inst.memories} for inst in bench0]
    assert bodies[0] != bodies[1]


def test_instance_prefix_does_not_depend_on_n_instances(bench0: list[TGTInstance]) -> None:
    assert generate(TGTConfig(seed=0, n_instances=3)) == bench0[:3]


def test_counts(bench0: list[TGTInstance]) -> None:
    assert len(bench0) == 20
    assert sum(len(i.memories) for i in bench0) == 1920
    assert sum(len(i.queries) for i in bench0) == 1320
    for inst in bench0:
        assert len(inst.memories) == 96
        assert len(inst.queries) == 66
        assert Counter(m.type_id for m in inst.memories) == {t: 24 for t in MEMORY_TYPES}
        base = [q for q in inst.queries if not q.is_distractor]
        assert len(base) == 60
        # 3 queries for every (interval, type) pair
        assert Counter((q.interval, q.type_id) for q in base) == {
            (iv, t): 3 for iv in ("I1", "I2", "I3", "I4", "I5") for t in MEMORY_TYPES
        }
        # 42 valid base queries: A 2x3 + B 3x3 + C 4x3 + D 5x3 = 6 + 9 + 12 + 15
        assert sum(q.ground_truth_valid for q in base) == 42


def test_one_template_per_taxonomy_category() -> None:
    assert tuple(c.key for c in CATEGORIES) == CATEGORY_KEYS


def test_every_category_used(bench0: list[TGTInstance]) -> None:
    for inst in bench0:
        counts = Counter(m.category for m in inst.memories)
        assert set(counts) == set(CATEGORY_KEYS)
        assert set(counts.values()) <= {4, 5}  # 24 spread over 5 categories


def test_stale_distractors(bench0: list[TGTInstance]) -> None:
    for inst in bench0:
        d = [q for q in inst.queries if q.is_distractor]
        assert len(d) == 6
        assert all(q.type_id == "A" and not q.ground_truth_valid for q in d)
        assert Counter((q.interval, q.kind) for q in d) == {
            (iv, k): 1 for iv in ("I1", "I2") for k in QUERY_KINDS
        }


def test_validity_schedule(bench0: list[TGTInstance]) -> None:
    valid_at = {"A": {"I1", "I2"}, "B": {"I1", "I2", "I3"}, "C": {"I1", "I2", "I3", "I4"},
                "D": {"I1", "I2", "I3", "I4", "I5"}}
    for inst in bench0:
        for q in inst.queries:
            if not q.is_distractor:
                assert q.ground_truth_valid == (q.interval in valid_at[q.type_id])


def test_query_text_templates_and_targets(bench0: list[TGTInstance]) -> None:
    for inst in bench0:
        for q in inst.queries:
            m = inst.memory(q.target_memory_id)
            assert q.answer_value == m.value and m.value in m.text
            assert m.attribute in m.text  # query and memory share the attribute phrase
            head = f"{m.subject}'s {m.attribute}"
            if q.kind == "factual":
                assert q.text == f"What is {head}?"
            elif q.kind == "staleness":
                assert q.text == f"Has {head} changed recently?"
                assert q.answer_value.lower() not in q.text.lower()
            else:
                assert q.text.startswith(f"What should I remember about {head} for ")
                assert any(q.text.endswith(f" {task}?") for task in FUTURE_TASKS)


def test_targets_without_replacement(bench0: list[TGTInstance]) -> None:
    for inst in bench0:
        per_pair: dict[tuple[str, str, bool], set[str]] = defaultdict(set)
        for q in inst.queries:
            per_pair[(q.interval, q.type_id, q.is_distractor)].add(q.target_memory_id)
        # the three queries of one (interval, type) pair share one target
        assert all(len(v) == 1 for v in per_pair.values())
        # and no target is reused across intervals / distractor groups of a type
        for t in MEMORY_TYPES:
            targets = [next(iter(v)) for k, v in per_pair.items() if k[1] == t]
            assert len(targets) == len(set(targets))


def test_times(bench0: list[TGTInstance]) -> None:
    intervals = {iv.name: iv for iv in tgt.DEFAULT_INTERVALS}
    for inst in bench0:
        t0 = tgt.T0_S
        for m in inst.memories:
            assert t0 <= m.created_at_s < t0 + SESSION_LENGTH_S
        times = [q.time_s for q in inst.queries]
        assert times == sorted(times)
        for q in inst.queries:
            iv = intervals[q.interval]
            assert iv.lo_sessions <= q.offset_sessions < iv.hi_sessions
            assert q.held_out == iv.held_out
            created = inst.memory(q.target_memory_id).created_at_s
            assert q.time_s == pytest.approx(created + q.offset_sessions * SESSION_LENGTH_S,
                                             abs=1e-2)


def test_memory_text_format_and_uniqueness(bench0: list[TGTInstance]) -> None:
    for inst in bench0:
        texts = [m.text for m in inst.memories]
        assert len(set(texts)) == 96
        assert len({strip_checkpoint(t) for t in texts}) == 96
        for m in inst.memories:
            assert m.text.endswith(f"This was logged in checkpoint {m.checkpoint}.")
            assert m.checkpoint.startswith(f"P{inst.pool_id}-")
        assert len({(m.subject, m.category) for m in inst.memories}) == 96


def test_true_pi_tau_in_type_ranges(bench0: list[TGTInstance]) -> None:
    specs = {s.type_id: s for s in tgt.TYPE_SPECS}
    assert specs["A"].pi_range == (0.80, 0.95) and specs["D"].pi_range == (0.02, 0.10)
    for m in bench0[0].memories:
        lo, hi = specs[m.type_id].pi_range
        assert lo <= m.true_pi <= hi
        lo, hi = specs[m.type_id].tau_range_sessions
        assert lo <= m.true_tau_sessions <= hi


def test_values_of_a_category_are_told_apart_by_the_judge() -> None:
    """Two different values of one category never pass the 60% judge for each other."""
    for cat in CATEGORIES:
        for a in cat.values:
            for b in cat.values:
                if a != b:
                    assert not factual_correct(a, b), (cat.key, a, b)


def test_future_task_words_never_appear_in_memories(bench0: list[TGTInstance]) -> None:
    words = {w for task in FUTURE_TASKS for w in tokenize(task)} - tgt_scoring.QUERY_STOPWORDS
    for inst in bench0:
        for m in inst.memories:
            assert not words & set(tokenize(strip_checkpoint(m.text) + " " + m.context))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_any_seed_gives_a_clean_instance(seed: int) -> None:
    (inst,) = generate(TGTConfig(seed=seed, n_instances=1))
    assert len({strip_checkpoint(m.text) for m in inst.memories}) == 96
    assert len({q.text for q in inst.queries}) / 66 > 0.9
    for q in inst.queries:
        if q.kind == "staleness":
            assert q.answer_value.lower() not in q.text.lower()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_instances": 0},
        {"memories_per_type": 4},
        {"memories_per_type": 61},
        {"session_length_s": 0},
        {"n_stale_distractors": -1},
        {"stale_distractor_intervals": ("I9",)},
        {"validity_schedule": (("A", ("I1",)),)},
    ],
)
def test_config_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="parameter of TGTConfig must be"):
        TGTConfig(**kwargs)  # type: ignore[arg-type]


def test_config_knobs() -> None:
    (inst,) = generate(TGTConfig(n_instances=1, memories_per_type=10, n_stale_distractors=3,
                                 stale_distractor_intervals=("I2",)))
    assert len(inst.memories) == 40
    assert len(inst.queries) == 63
    d = [q for q in inst.queries if q.is_distractor]
    assert {q.interval for q in d} == {"I2"}
    assert [q.kind for q in sorted(d, key=lambda q: QUERY_KINDS.index(q.kind))] == list(QUERY_KINDS)
    (inst,) = generate(TGTConfig(n_instances=1, n_stale_distractors=4))
    d = [q for q in inst.queries if q.is_distractor]
    assert Counter(q.interval for q in d) == {"I1": 3, "I2": 1}
    assert len({q.target_memory_id for q in d}) == 2


# ---------------------------------------------------------------------------
# persistence and the system's view
# ---------------------------------------------------------------------------


def test_json_round_trip(tmp_path, bench0: list[TGTInstance]) -> None:
    path = tmp_path / "tgt.json"
    export_json(bench0, path, config=TGTConfig(seed=0))
    payload = json.loads(path.read_text())
    assert payload["format_version"] == tgt.FORMAT_VERSION
    assert payload["config"]["seed"] == 0
    assert load_json(path) == bench0


def test_load_json_refuses_other_versions(tmp_path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "scrubjay-tgt", "format_version": 999, "instances": []}))
    with pytest.raises(ValueError, match="format_version"):
        load_json(path)


def test_system_view_hides_ground_truth(bench0: list[TGTInstance]) -> None:
    inst = bench0[0]
    view = system_view(inst)
    mem_fields = {f.name for f in dataclasses.fields(view.memories[0])}
    q_fields = {f.name for f in dataclasses.fields(view.queries[0])}
    assert mem_fields == {"memory_id", "text", "context", "created_at_s"}
    assert q_fields == {"query_id", "text", "time_s"}
    dumped = json.dumps(dataclasses.asdict(view))
    for hidden in ("type_id", "true_pi", "true_tau", "valid", "answer_value", "category",
                   "interval", "held_out", "ephemeral"):
        assert hidden not in dumped
    assert [m.text for m in view.memories] == [m.text for m in inst.memories]
    assert len(view.queries) == 66


def test_ids_order_and_checkpoints_do_not_reveal_type(bench0: list[TGTInstance]) -> None:
    for inst in bench0:
        first = [m.type_id for m in inst.memories[:24]]
        assert len(set(first)) > 1  # memory order is not grouped by type
        for t in MEMORY_TYPES:
            blocks = {m.checkpoint.split("-")[1][0] for m in inst.memories if m.type_id == t}
            assert blocks <= set(tgt.CHECKPOINT_BLOCKS)
            assert len(blocks) > 1  # a type's memories spread over several blocks
        assert all(m.memory_id.startswith(f"p{inst.pool_id}-m") for m in inst.memories)
        assert all(q.query_id.startswith(f"p{inst.pool_id}-q") for q in inst.queries)


def test_reveal_type_in_checkpoint() -> None:
    (inst,) = generate(TGTConfig(n_instances=1, reveal_type_in_checkpoint=True))
    for m in inst.memories:
        assert m.checkpoint.split("-")[1][0] == m.type_id


# ---------------------------------------------------------------------------
# heuristic judge
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "value", "expected"),
    [
        ("Priya is working from the North Atrium today.", "north atrium", True),
        ("Somewhere in the north annex.", "north atrium", False),  # 1/2 = 50%
        ("found a startup", "found a robotics startup", True),  # found, a, startup: 3/4
        ("They use billing_api.rb", "billing_api.rb", True),
        ("", "Lisbon", False),
        ("lisbon", "Lisbon", True),
        ("A fantasy novel", "publish a fantasy novel", True),  # a, fantasy, novel: 3/4
        ("publish novel", "publish a fantasy novel", False),  # 2/4 = 50%
        ("brief bullet", "brief bullet points", True),  # 2/3 = 66.7%
        ("brief", "brief bullet points", False),  # 1/3
        ("Zed", "", False),
    ],
)
def test_factual_correct_examples(answer: str, value: str, expected: bool) -> None:
    assert factual_correct(answer, value) is expected


def test_factual_threshold_boundary() -> None:
    value = "one two three four five"
    assert factual_correct("one two three", value)  # 3/5 = 60% exactly
    assert not factual_correct("one two", value)  # 2/5 = 40%


@given(
    value=st.text(alphabet="abcdefghij ", min_size=1, max_size=20),
    noise=st.text(max_size=30),
)
def test_answer_containing_value_is_correct(value: str, noise: str) -> None:
    if tokenize(value):
        assert factual_correct(f"{noise} {value.upper()} {noise}", value)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("It was the north atrium, but that is probably outdated.", True),
        ("That information is STALE.", True),
        ("I cannot confirm whether that still holds.", True),
        ("Priya no longer sits there.", True),
        ("It may have changed since then.", True),
        ("The plan expired yesterday.", True),
        ("The north atrium.", False),
        ("It is not stale; Priya still prefers Zed.", False),
        ("This isn\u2019t outdated.", False),
        ("Nothing has changed.", False),
        ("It is not stale, but the plan has since expired.", True),
    ],
)
def test_judged_stale_examples(answer: str, expected: bool) -> None:
    assert judged_stale(answer) is expected


def test_judged_stale_flag_passes_through() -> None:
    assert judged_stale(True) is True
    assert judged_stale(False) is False


# ---------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------


def test_stale_query_needs_old_value_and_stale_flag() -> None:
    q = _query(valid=False, value="north atrium")
    both = score([(q, "It was the north atrium, but that is outdated.", False)])
    assert (both.factual, both.staleness, both.combined) == (1.0, 1.0, 1.0)
    refusal = score([(q, "I cannot confirm where Priya is.", False)])
    assert (refusal.factual, refusal.staleness, refusal.combined) == (0.0, 1.0, 0.0)
    trusting = score([(q, "The north atrium.", True)])
    assert (trusting.factual, trusting.staleness, trusting.combined) == (1.0, 0.0, 0.0)


def test_tgs_and_gengap_hand_computed() -> None:
    # Per interval, 4 queries; the number answered correctly (value + right validity):
    #   I1: 4/4 = 1.00, I2: 2/4 = 0.50, I3: 1/4 = 0.25, I4: 3/4 = 0.75, I5: 0/4 = 0.00
    # TGS = (1 + 0.5 + 0.25 + 0.75 + 0) / 5 = 2.5 / 5 = 0.5
    # GenGap = Acc(I2) + Acc(I4) - 2 Acc(I3) = 0.5 + 0.75 - 0.5 = 0.75
    correct = {"I1": 4, "I2": 2, "I3": 1, "I4": 3, "I5": 0}
    results = []
    for iv, k in correct.items():
        for j in range(4):
            q = _query(interval=iv, n=j)
            results.append(QueryResult(query=q, answer_text="north atrium" if j < k else "?",
                                       judged_valid=True))
    rep = score(results)
    assert [g.key for g in rep.per_interval] == ["I1", "I2", "I3", "I4", "I5"]
    assert rep.acc("I3") == 0.25
    assert rep.tgs == pytest.approx(0.5)
    assert rep.gen_gap == pytest.approx(0.75)
    assert rep.combined == pytest.approx(10 / 20)
    assert math.isnan(rep.acc("I9"))


def test_per_type_and_cell() -> None:
    results = [
        (_query(type_id="A", interval="I1"), "north atrium", True),  # combined 1
        (_query(type_id="A", interval="I2", valid=False), "north atrium", True),  # stale miss
        (_query(type_id="D", interval="I1"), "nowhere", True),  # factual miss
    ]
    rep = score(results)
    per_type = {g.key: g for g in rep.per_type}
    assert per_type["A"].n == 2 and per_type["A"].combined == 0.5
    assert per_type["A"].staleness == 0.5 and per_type["A"].factual == 1.0
    assert per_type["D"].factual == 0.0 and per_type["D"].staleness == 1.0
    cells = {g.key: g.combined for g in rep.per_cell}
    assert cells == {"I1/A": 1.0, "I1/D": 0.0, "I2/A": 0.0}
    assert math.isnan(rep.tgs) and math.isnan(rep.gen_gap)  # I3..I5 missing


def test_score_rejects_empty() -> None:
    with pytest.raises(ValueError):
        score([])


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_score_bounds(rows: list[tuple[bool, bool, bool]]) -> None:
    results = [
        (_query(valid=v, n=i), "north atrium" if f else "no idea", j)
        for i, (f, v, j) in enumerate(rows)
    ]
    rep = score(results)
    for x in (rep.factual, rep.staleness, rep.combined):
        assert 0.0 <= x <= 1.0
    assert rep.combined <= min(rep.factual, rep.staleness) + 1e-12


def test_always_valid_baseline(bench0: list[TGTInstance]) -> None:
    rep = score(always_valid_results(bench0))
    assert rep.factual == 1.0
    assert rep.combined == pytest.approx(42 / 66)  # 63.6%
    # Acc: I1 12/15, I2 12/15, I3 9/12, I4 6/12, I5 3/12
    expected = {"I1": 0.8, "I2": 0.8, "I3": 0.75, "I4": 0.5, "I5": 0.25}
    assert {g.key: g.combined for g in rep.per_interval} == pytest.approx(expected)
    assert rep.tgs == pytest.approx(3.1 / 5)
    assert rep.gen_gap == pytest.approx(0.8 + 0.5 - 1.5)


def test_random_baseline_is_seeded_and_low(bench0: list[TGTInstance]) -> None:
    a = score(random_results(bench0, seed=1))
    assert a == score(random_results(bench0, seed=1))
    assert a.combined < 0.2
    assert 0.4 < a.staleness < 0.6


# ---------------------------------------------------------------------------
# several seeds
# ---------------------------------------------------------------------------


def test_t_quantiles() -> None:
    assert t_quantile_975(1) == 12.7062
    assert t_quantile_975(4) == 2.7764
    assert t_quantile_975(30) == 2.0423
    assert t_quantile_975(45) == 2.0211  # next-lower tabulated df (40): conservative
    with pytest.raises(ValueError):
        t_quantile_975(0)


def test_mean_ci_known_sample() -> None:
    # x = 1..5: mean 3, s = sqrt(10/4) = 1.58114, se = s/sqrt(5) = 0.70711,
    # t_{0.975,4} = 2.7764 -> half width 2.7764 * 0.70711 = 1.96321 -> [1.03679, 4.96321]
    ci = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert ci.mean == 3.0
    assert ci.std == pytest.approx(1.581139, abs=1e-6)
    assert ci.half_width == pytest.approx(1.963211, abs=1e-5)
    assert (ci.lo, ci.hi) == pytest.approx((1.036789, 4.963211), abs=1e-5)
    single = mean_ci([0.4])
    assert single.mean == 0.4 and math.isnan(single.half_width)


def test_aggregate_seeds() -> None:
    def rep(c: float, gap: float) -> TGTReport:
        g = tgt_scoring.GroupScore(key="I3", n=1, factual=c, staleness=c, combined=c)
        return TGTReport(n_queries=1, factual=c, staleness=c, combined=c, per_interval=(g,),
                         per_type=(), per_cell=(), tgs=c, gen_gap=gap)

    agg = aggregate_seeds([rep(0.2, 0.1), rep(0.4, -0.1), rep(0.6, 0.0)])
    assert agg.n_seeds == 3
    assert agg.combined.mean == pytest.approx(0.4)
    # s = 0.2, t_{0.975,2} = 4.3027 -> half = 4.3027 * 0.2 / sqrt(3) = 0.496833
    assert agg.combined.half_width == pytest.approx(0.496833, abs=1e-5)
    assert agg.gen_gap.mean == pytest.approx(0.0)
    assert dict(agg.per_interval)["I3"].mean == pytest.approx(0.4)


def test_aggregate_real_seeds() -> None:
    reports = [score(random_results(generate(TGTConfig(seed=s, n_instances=2)), seed=s))
               for s in range(3)]
    agg = aggregate_seeds(reports)
    assert agg.combined.lo <= agg.combined.mean <= agg.combined.hi


# ---------------------------------------------------------------------------
# audit
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_audit_thresholds_hold(seed: int) -> None:
    instances = generate(TGTConfig(seed=seed))
    rep = audit(instances)
    assert rep.passed, format_audit(rep)
    assert rep.n_queries == 1320 and rep.n_memories == 1920
    assert rep.check("answer leakage (staleness queries)").value == 0.0
    assert rep.check("memory uniqueness").value == 1.0
    assert rep.check("query uniqueness (min per instance)").value > 0.9
    assert rep.check("stale queries at I1").value == pytest.approx(3 / 15)  # 20%, App. B.10
    assert rep.check("stale queries at I2").value == pytest.approx(3 / 15)
    assert rep.check("always-valid baseline").value == pytest.approx(42 / 66)
    assert rep.check("min queries per cell").value >= 10
    assert rep.check("keyword solvability").value < 0.05
    assert rep.check("validity matches schedule").value == 0


def _replace_query(inst: TGTInstance, k: int, **changes: object) -> TGTInstance:
    qs = list(inst.queries)
    qs[k] = dataclasses.replace(qs[k], **changes)
    return dataclasses.replace(inst, queries=tuple(qs))


def test_audit_catches_leakage(bench0: list[TGTInstance]) -> None:
    inst = bench0[0]
    k, q = next((k, q) for k, q in enumerate(inst.queries) if q.kind == "staleness")
    broken = _replace_query(inst, k, text=f"Has it changed from {q.answer_value} recently?")
    rep = audit([broken, *bench0[1:]])
    assert not rep.passed
    assert not rep.check("answer leakage (staleness queries)").passed
    assert keyword_solvable(broken.queries[k], broken)


def test_audit_catches_duplicates_and_schedule_errors(bench0: list[TGTInstance]) -> None:
    inst = bench0[0]
    mems = list(inst.memories)
    mems[1] = dataclasses.replace(mems[1], text=mems[0].text)
    dup = dataclasses.replace(inst, memories=tuple(mems))
    assert not audit([dup]).check("memory uniqueness").passed
    k = next(k for k, q in enumerate(inst.queries) if q.type_id == "A" and q.interval == "I5")
    wrong = _replace_query(inst, k, ground_truth_valid=True)
    assert not audit([wrong]).check("validity matches schedule").passed


def test_audit_catches_reused_pools(bench0: list[TGTInstance]) -> None:
    rep = audit([bench0[0], bench0[0]])
    assert not rep.check("pool reuse ratio").passed
    assert not rep.passed


def test_audit_catches_single_keyword_shortcut(bench0: list[TGTInstance]) -> None:
    inst = bench0[0]
    k, q = next((k, q) for k, q in enumerate(inst.queries) if q.kind == "factual")
    target = inst.memory(q.target_memory_id)
    mems = tuple(
        dataclasses.replace(m, context=m.context + " zanzibar") if m is target else m
        for m in inst.memories
    )
    shortcut = _replace_query(dataclasses.replace(inst, memories=mems), k,
                              text=q.text.replace("?", " zanzibar?"))
    assert keyword_solvable(shortcut.queries[k], shortcut)
    assert not keyword_solvable(inst.queries[k], inst)


def test_format_audit(bench0: list[TGTInstance]) -> None:
    text = format_audit(audit(bench0))
    assert "always-valid baseline" in text and "63.6%" in text
    assert text.splitlines()[-1] == "overall: PASS"
    # two instances give 2 x 3 = 6 queries per (interval, type) cell: below 10, FAIL
    small = format_audit(audit(bench0[:2]))
    assert any(line.startswith("min queries per cell") and line.endswith("FAIL")
               for line in small.splitlines())
    assert small.splitlines()[-1] == "overall: FAIL"


# ---------------------------------------------------------------------------
# command line and public names
# ---------------------------------------------------------------------------


def test_main_writes_file_and_prints_audit(tmp_path, capsys) -> None:
    out = tmp_path / "tgt.json"
    assert tgt.main(["--seed", "3", "--out", str(out), "--n-instances", "20"]) == 0
    printed = capsys.readouterr().out
    assert "keyword solvability" in printed and "overall: PASS" in printed
    assert load_json(out) == generate(TGTConfig(seed=3))


def test_doctests() -> None:
    import doctest

    for module in (tgt, tgt_scoring):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0


def test_public_names() -> None:
    for module in (tgt, tgt_scoring):
        for name in module.__all__:
            assert hasattr(module, name), name
    assert {"generate", "export_json", "load_json", "system_view", "TGTConfig"} <= set(tgt.__all__)
    assert {"score", "audit", "factual_correct", "judged_stale", "aggregate_seeds",
            "always_valid_results", "random_results"} <= set(tgt_scoring.__all__)


def test_bench_generator_loads_no_store_or_framework() -> None:
    import subprocess
    import sys

    code = (
        "import sys, scrubjay.bench.tgt_scoring; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'chromadb', 'langchain_core', 'llama_index', 'wordllama', 'torch'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
