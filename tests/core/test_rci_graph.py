"""RCI (Eq. 9-12, Proposition 1) and the episodic graph (Eq. 7-8)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrubjay import LLMConfig, RCIConfig, ScrubJayConfig, ScrubJayMemory
from scrubjay.config import GraphConfig
from scrubjay.graph import (
    EDGE_DECIMALS,
    Edge,
    EpisodicGraph,
    edge_weight_from_similarity,
    edge_weights,
    edge_weights_from_similarity,
    temporal_horizon_s,
)
from scrubjay.rci import affinities, apply_updates, clip_deltas, fallback_deltas, parse_deltas
from scrubjay.testing import ScriptedLLM
from scrubjay.types import Deltas
from scrubjay.unit import l2_normalize

CFG = RCIConfig()
TAU_MIN, TAU_MAX = 60.0, 5 * 365.25 * 86400


def test_affinity_threshold_and_alpha() -> None:
    what = l2_normalize(np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]]))
    idx, alpha = affinities(what, np.array([1.0, 0.0], np.float32), 0.6)
    assert idx.tolist() == [0, 1]
    assert alpha == pytest.approx([1.0, (0.8 - 0.6) / 0.4])


def test_update_rules_hand_computed() -> None:
    d = Deltas(delta_value=-0.8, delta_pi=0.4, delta_tau=-0.5)
    w = l2_normalize(np.array([[1.0, 0.0]]))
    w_n = np.array([0.0, 1.0], np.float32)
    upd = apply_updates(np.array([1.0]), np.array([0.1]), np.array([1000.0]), w, w_n,
                        np.array([0.5]), d, CFG, pi_min=1e-3, tau_min_s=TAU_MIN,
                        tau_max_s=TAU_MAX)
    assert upd.value[0] == pytest.approx(1 - 0.5 * 0.5 * 0.8)        # 0.8
    assert upd.pi[0] == pytest.approx(0.1 + 0.5 * 0.5 * 0.4)         # 0.2
    assert upd.tau_s[0] == pytest.approx(1000 * (1 - 0.5 * 0.5 * 0.5))  # 875
    # w + 0.2 * 0.5 * (w_n - w) = [0.9, 0.1], normalised
    assert upd.what[0] == pytest.approx(np.array([0.9, 0.1]) / math.hypot(0.9, 0.1), rel=1e-6)


def test_l2_normalize_matches_the_linalg_reference_bit_for_bit() -> None:
    """The fast path (no zero row) and the general one give exactly the floats of
    ``np.where(|x| > eps, x / max(|x|, eps), 0)`` with ``np.linalg.norm``; zero and NaN rows
    become zero rows."""
    def reference(x: np.ndarray) -> np.ndarray:
        arr = np.asarray(x, dtype=np.float32)
        norms = np.linalg.norm(arr, axis=-1, keepdims=True)
        return np.where(norms > 1e-12, arr / np.maximum(norms, 1e-12), 0.0).astype(np.float32)

    rng = np.random.default_rng(7)
    cases = [rng.standard_normal(shape) * scale for shape in [(1, 256), (9, 384), (300, 2), (256,)]
             for scale in (1e-4, 1.0, 1e4)]
    with_zero = rng.standard_normal((5, 8)).astype(np.float32)
    with_zero[1] = 0.0
    with_zero[3, 2] = np.nan
    cases += [with_zero, np.zeros((2, 4)), [[3.0, 4.0]]]
    for x in cases:
        got, want = l2_normalize(x), reference(x)
        assert got.dtype == np.float32 and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    assert not np.isnan(l2_normalize(with_zero)).any()


finite = st.floats(-1e308, 1e308, allow_nan=False)


@settings(max_examples=200)
@given(dv=finite, dpi=finite, dtau=finite, alpha=st.floats(1e-6, 1.0),
       value=st.floats(0, 5), pi=st.floats(1e-3, 1), tau=st.floats(TAU_MIN, TAU_MAX),
       seed=st.integers(0, 2**16))
def test_proposition_1_bounds_for_any_llm_output(dv: float, dpi: float, dtau: float,
                                                 alpha: float, value: float, pi: float,
                                                 tau: float, seed: int) -> None:
    reply = json.dumps({"delta_value": dv, "delta_pi": dpi, "delta_tau": dtau, "summary": "s"})
    d = parse_deltas(reply, CFG)
    rng = np.random.default_rng(seed)
    w = l2_normalize(rng.normal(size=(1, 8)))
    w_n = l2_normalize(rng.normal(size=8))
    upd = apply_updates(np.array([value]), np.array([pi]), np.array([tau]), w, w_n,
                        np.array([alpha]), d, CFG, pi_min=1e-3, tau_min_s=TAU_MIN,
                        tau_max_s=TAU_MAX)
    assert abs(upd.value[0] - value) <= CFG.eta_value * CFG.dv_max + 1e-9
    assert upd.value[0] >= 0
    assert abs(upd.pi[0] - pi) <= CFG.eta_pi * CFG.dpi_max + 1e-9
    assert 1e-3 <= upd.pi[0] <= 1
    assert TAU_MIN <= upd.tau_s[0] <= TAU_MAX
    # the what-update contracts toward w_n: before renormalisation the distance shrinks by
    # exactly (1 - eta_w alpha); after it, the cosine to w_n does not decrease
    moved = w[0] + CFG.eta_what * alpha * (w_n - w[0])
    assert np.linalg.norm(moved - w_n) == pytest.approx(
        (1 - CFG.eta_what * alpha) * np.linalg.norm(w[0] - w_n), rel=1e-5, abs=1e-6)
    assert float(upd.what[0] @ w_n) >= float(w[0] @ w_n) - 1e-6


def test_clip_deltas() -> None:
    d = clip_deltas(5, -5, 10, "x" * 1000, CFG)
    assert (d.delta_value, d.delta_pi, d.delta_tau, len(d.summary)) == (1.0, -0.5, 2.0, 500)


def test_fallback_parser_cases() -> None:
    assert fallback_deltas("The offsite was cancelled", CFG).delta_value < 0
    assert fallback_deltas("The offsite was cancelled", CFG).delta_pi > 0
    assert fallback_deltas("I still use vim", CFG).delta_value > 0
    assert fallback_deltas("She likes tea", CFG).summary.startswith("offline: newer")


def test_integrate_one_llm_call_for_many_memories(clock, embedder) -> None:
    llm = ScriptedLLM(lambda p: ('{"delta_value": -1, "delta_pi": 0.5, "delta_tau": -0.9, '
                                 '"summary": "moved"}') if p.startswith("Given new") else
                      '{"label": "factual", "pi": 0.1, "tau_sec": 3.9e6}')
    mem = ScrubJayMemory(embedder=embedder, clock=clock, llm=llm,
                         config=ScrubJayConfig(llm=LLMConfig(annotate=False)))
    for i in range(40):
        mem.add(f"the office is in building A wing {i}")
    mem.add("Miso purrs loudly")
    before = {r.id: r for r in mem}
    calls_before = len(llm.prompts)
    rep = mem.integrate("the office is in building B now", store=False)
    rci_prompts = [p for p in llm.prompts[calls_before:] if p.startswith("Given new")]
    assert len(rci_prompts) == 1 and rep.llm_calls == 1 and rep.used_llm
    assert len(rep.affected) >= 30
    miso = next(r for r in before.values() if "Miso" in r.text)
    assert miso.id not in rep.affected_ids
    for mid, alpha in rep.affected:
        old, new = before[mid], mem.get(mid)
        assert new.value == pytest.approx(max(0, old.value - 0.5 * alpha * 1.0))
        assert new.pi == pytest.approx(min(1.0, old.pi + 0.5 * alpha * 0.5))
        assert new.updated_at_s == clock()


def test_integrate_fallback_when_llm_raises(clock, embedder) -> None:
    llm = ScriptedLLM([RuntimeError("boom")])
    mem = ScrubJayMemory(embedder=embedder, clock=clock, llm=llm)
    rec = mem.add("the standup is at 9 in room 2")
    rep = mem.integrate("the standup is cancelled in room 2")
    assert not rep.used_llm and rep.llm_calls == 1 and "boom" in (rep.fallback_reason or "")
    assert rep.affected_ids == [rec.id]
    assert mem.get(rec.id).value < 1.0
    assert rep.stored is not None and rep.stored.text == "the standup is cancelled in room 2"


def test_gate_limits_value_pi_and_tau_to_the_marked_rows() -> None:
    d = Deltas(delta_value=-1.0, delta_pi=0.2, delta_tau=-0.5)
    w = l2_normalize(np.array([[1.0, 0.0], [1.0, 0.0]]))
    w_n = np.array([0.0, 1.0], np.float32)
    upd = apply_updates(np.ones(2), np.full(2, 0.1), np.full(2, 1000.0), w, w_n,
                        np.ones(2), d, CFG, pi_min=1e-3, tau_min_s=TAU_MIN, tau_max_s=TAU_MAX,
                        gate=np.array([True, False]))
    assert upd.value.tolist() == pytest.approx([0.5, 1.0])
    assert upd.pi.tolist() == pytest.approx([0.2, 0.1])
    assert upd.tau_s.tolist() == pytest.approx([750.0, 1000.0])
    assert upd.what[0] == pytest.approx(upd.what[1])  # both move toward the event


def test_offline_integrate_without_a_cue_lowers_only_the_memory_it_replaces(
        clock, embedder) -> None:
    """Without a cue word the offline deltas are only "newer evidence": they apply to the
    memory the supersession detector reads as the same slot, not to every close memory."""
    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    spot = mem.add("The capital of France is Paris")
    other = mem.add("The capital of Peru is Lima")
    clock.advance(3600)
    rep = mem.integrate("The capital of France is Lyon")
    assert rep.deltas.replaced_only and not rep.used_llm
    assert {spot.id, other.id} <= set(rep.affected_ids)  # both within theta
    assert mem.get(spot.id).value < spot.value
    assert mem.get(other.id).value == pytest.approx(other.value)
    assert mem.get(other.id).pi == pytest.approx(other.pi)


def test_with_supersession_off_the_offline_deltas_reach_every_close_memory(
        clock, embedder) -> None:
    """The paper's RCI (``ScrubJayConfig.paper()`` has supersession off): one set of deltas
    for every memory within theta."""
    from scrubjay import SupersessionConfig

    mem = ScrubJayMemory(embedder=embedder, clock=clock,
                         config=ScrubJayConfig(supersession=SupersessionConfig(enabled=False)))
    other = mem.add("The capital of Peru is Lima")
    clock.advance(3600)
    rep = mem.integrate("The capital of France is Lyon")
    assert other.id in rep.affected_ids
    assert mem.get(other.id).value < other.value


def test_edge_weights_hand_computed() -> None:
    cfg = GraphConfig()
    what_i = np.array([1.0, 0.0])
    where_i = np.array([0.0, 1.0])
    what = np.array([[0.8, 0.6], [0.6, 0.8], [1.0, 0.0]])
    where = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    t = np.array([0.0, 7200.0, 90_000.0])
    e, s, c, tt = edge_weights(what_i, where_i, 0.0, what, where, t, cfg)
    assert s.tolist() == pytest.approx([0.8, 0.0, 1.0])       # 0.6 < 0.75 -> 0
    assert c.tolist() == pytest.approx([1.0, 1.0, 0.0])
    assert tt.tolist() == pytest.approx([1.0, math.exp(-2), 0.0])   # 25 h > 24 h -> 0
    assert e.tolist() == pytest.approx([0.32 + 0.3 + 0.3, 0.3 + 0.3 * math.exp(-2), 0.4])


def test_edge_weight_alone_equals_the_first_component_exactly() -> None:
    """The link scan ranks by ``edge_weight_from_similarity``; rounded to ``EDGE_DECIMALS``
    it must give the same floats as the full computation (with and without contexts, gaps
    on both sides of Delta_T), so that its order refines the stored weights' order."""
    rng = np.random.default_rng(5)
    cfg = GraphConfig()
    sim_s, sim_c = rng.uniform(-1, 1, (40, 300)), rng.uniform(-1, 1, (40, 300))
    gap = rng.uniform(0, 2 * cfg.delta_temporal_s, (40, 300))
    gap[0, :5] = cfg.delta_temporal_s  # the boundary itself: no temporal edge
    full = edge_weights_from_similarity(sim_s, sim_c, gap, cfg)[0]
    alone = edge_weight_from_similarity(sim_s, sim_c, gap, cfg)
    assert np.array_equal(np.round(alone, EDGE_DECIMALS), full)
    no_ctx = edge_weights_from_similarity(sim_s, np.zeros_like(sim_c), gap, cfg)[0]
    assert np.array_equal(np.round(edge_weight_from_similarity(sim_s, None, gap, cfg),
                                   EDGE_DECIMALS), no_ctx)


def test_temporal_horizon() -> None:
    cfg = GraphConfig()
    h = temporal_horizon_s(cfg)
    assert h is not None and cfg.weight_temporal * math.exp(-cfg.lambda_temporal_per_s * h) == \
        pytest.approx(cfg.min_edge_weight)
    assert temporal_horizon_s(GraphConfig(weight_temporal=0.0)) is None
    assert temporal_horizon_s(GraphConfig(min_edge_weight=0.0)) == cfg.delta_temporal_s
    assert temporal_horizon_s(GraphConfig(lambda_temporal_per_s=1e-9)) == cfg.delta_temporal_s


def test_degree_cap_keeps_strongest_and_persistence_round_trip() -> None:
    g = EpisodicGraph(GraphConfig(max_neighbors=2))
    for n in "abcd":
        g.add_node(n)
    g.link("a", [Edge("b", 0.5, 0, 0, 1), Edge("c", 0.2, 0, 0, 1), Edge("d", 0.9, 0, 0, 1)])
    assert sorted(j for j, _ in g.neighbors("a")) == ["b", "d"]
    g.add_node("e")
    changed = g.link("e", [Edge("a", 0.7, 0, 0, 1)])     # a is full: its weakest (b) goes
    assert sorted(j for j, _ in g.neighbors("a")) == ["d", "e"]
    assert {"a", "b", "e"} <= changed
    h = EpisodicGraph(GraphConfig(max_neighbors=2))
    for n in "abcde":
        h.loads(n, g.dumps(n))
    assert sorted(h.g.edges) == sorted(g.g.edges)


def test_graph_bonus_hand_computed() -> None:
    g = EpisodicGraph(GraphConfig())
    for n in "abc":
        g.add_node(n)
    g.link("a", [Edge("b", 0.5, 0, 0, 0), Edge("c", 0.25, 0, 0, 0)])
    bonus = g.bonus(["a", "b"], {"a": 1.0, "b": 0.4, "c": 0.8})
    assert bonus == pytest.approx({"a": 0.5 * 0.4 + 0.25 * 0.8, "b": 0.5 * 1.0})


def _cluster_embedder() -> tuple[Any, list[dict[str, str]]]:
    """Ten near-duplicates around a centre (cos ~0.99), one far memory, and "event" at the
    centre: each event moves the ten what-vectors by ~0.03 rad, below INDEX_DRIFT_MAX_RAD, so
    two events pass it."""
    from scrubjay.embedding import CallableEmbedder
    from scrubjay.unit import l2_normalize

    rng = np.random.default_rng(7)
    centre = l2_normalize(rng.standard_normal(32))
    lut = {"": np.zeros(32, np.float32), "event": centre,
           "far away": l2_normalize(rng.standard_normal(32))}
    items = [{"text": f"member {i}", "id": f"m{i}"} for i in range(10)]
    for item, v in zip(items, l2_normalize(centre + 0.025 * rng.standard_normal((10, 32)))):
        lut[item["text"]] = v
    items.append({"text": "far away", "id": "far"})
    emb = CallableEmbedder(lambda ts: np.stack([lut[t] for t in ts]), name="callable:lut")
    return emb, items


def _indexed(mem: ScrubJayMemory, ids: list[str]) -> dict[str, np.ndarray]:
    got = mem._store.what.get(ids=ids, include=["embeddings"])
    return {i: np.asarray(e, np.float32) for i, e in zip(got["ids"], got["embeddings"])}


def test_rci_keeps_index_drift_bounded_and_persists_exact_vectors(tmp_path, clock) -> None:
    from scrubjay.store import INDEX_DRIFT_MAX_RAD

    emb, items = _cluster_embedder()
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=emb, clock=clock)
    mem.add_many(items)
    ids = [it["id"] for it in items[:10]]
    reindexed = deferred = 0
    for event in range(4):
        clock.advance(minutes=5)
        rep = mem.integrate("event", store=False)
        assert sorted(rep.affected_ids) == sorted(ids)  # never "far away"
        row_of = mem._backend._mirror.row_of
        indexed = _indexed(mem, ids)
        for mid in ids:
            exact = mem._backend._mirror.view().what[row_of[mid]]
            drift = float(mem._backend._mirror.drift[row_of[mid]])
            cos = float(exact @ indexed[mid]) / float(np.linalg.norm(indexed[mid]))
            angle = float(np.arccos(np.clip(cos, -1.0, 1.0)))
            assert drift <= INDEX_DRIFT_MAX_RAD
            assert angle <= drift + 1e-3  # the recorded bound holds (float32 arccos noise)
            if drift == 0.0:
                assert np.allclose(indexed[mid], exact, atol=1e-6)
                reindexed += event > 0
            else:
                assert angle > 1e-3  # moved, and its index embedding was not rewritten
                deferred += 1
    assert deferred and reindexed  # both the metadata-only write and the re-index happened
    view = mem._backend._mirror.view()
    before = {it["id"]: (mem.get(it["id"]), view.what[mem._backend._mirror.row_of[it["id"]]].copy(),
                         float(mem._backend._mirror.drift[mem._backend._mirror.row_of[it["id"]]]))
              for it in items}
    mem.close()
    again = ScrubJayMemory(path=tmp_path / "s", embedder=emb, clock=clock)
    for mid, (rec, what, drift) in before.items():
        row = again._backend._mirror.row_of[mid]
        assert again.get(mid) == rec
        assert np.array_equal(again._backend._mirror.view().what[row], what)  # exact, not the index's
        assert float(again._backend._mirror.drift[row]) == drift
    again.close()


def test_server_rci_scores_exact_vectors_not_the_stale_index(tmp_path, clock,
                                                            chroma_server) -> None:
    import uuid

    import chromadb

    emb, items = _cluster_embedder()
    local = ScrubJayMemory(path=tmp_path / "s", embedder=emb, clock=clock)
    remote = ScrubJayMemory(client=chromadb.HttpClient(host=chroma_server[0],
                                                       port=chroma_server[1]),
                            namespace=f"rci-{uuid.uuid4().hex[:8]}", embedder=emb, clock=clock)
    local.add_many(items)
    remote.add_many(items)
    for _ in range(3):  # from the second event on, most index embeddings are stale
        a = local.integrate("event", store=False)
        b = remote.integrate("event", store=False)
        assert sorted(b.affected_ids) == sorted(a.affected_ids)
        alpha_b = dict(b.affected)
        for mid, alpha in a.affected:
            assert alpha_b[mid] == pytest.approx(alpha, abs=1e-6)
            ra, rb = local.get(mid), remote.get(mid)
            assert (rb.value, rb.pi, rb.tau_s) == pytest.approx((ra.value, ra.pi, ra.tau_s))
    remote.forget_namespace()
    remote.close()
    local.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=12),
                          st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0),
                          st.floats(0.0, 1.0)), max_size=8, unique_by=lambda e: e[0]))
def test_dumps_writes_what_json_dumps_writes_and_loads_reads_it_back(edges) -> None:
    """The adjacency JSON is built by hand for speed: byte for byte json.dumps's, for any
    id (quotes, backslashes, non-ASCII) and weight, and read back exactly."""
    g = EpisodicGraph(GraphConfig(max_neighbors=16))
    node = "\u00e9\"node\\"
    g.add_node(node)
    for other, *_ in edges:
        g.add_node(other)
    g.link(node, [Edge(other=o, weight=w, semantic=s, contextual=c, temporal=t)
                  for o, w, s, c, t in edges])
    def expected(n: str) -> str:
        rows = [[j, d["weight"], d["semantic"], d["contextual"], d["temporal"]]
                for j, d in sorted(g.g[n].items())]
        return json.dumps(rows, separators=(",", ":"))

    payload = g.dumps(node)
    assert payload == expected(node)
    # both ends of each edge in one call (an edge's numbers are formatted once for the two)
    nodes = [node, *(o for o, *_ in edges), "unknown"]
    assert g.dumps_many(nodes) == [expected(n) if n in g.g else "[]" for n in nodes]
    again = EpisodicGraph(GraphConfig(max_neighbors=16))
    again.loads(node, payload)
    assert {j: dict(d) for j, d in again.g[node].items()} == {j: dict(d)
                                                              for j, d in g.g[node].items()}
