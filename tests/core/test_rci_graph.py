"""RCI (Eq. 9-12, Proposition 1) and the episodic graph (Eq. 7-8)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrubjay import LLMConfig, RCIConfig, ScrubJayConfig, ScrubJayMemory
from scrubjay.config import GraphConfig
from scrubjay.graph import Edge, EpisodicGraph, edge_weights
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
