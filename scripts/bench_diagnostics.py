"""Diagnostics behind docs/benchmarks.md: why ScrubJay-MEM scores as it does (no core change).

Usage: ``PYTHONPATH=core:. python scripts/bench_diagnostics.py [--data ../shared/benchmarks]``
Prints Markdown: (1) the offline classifier's labels of TGT memories by hidden type, and of
LoCoMo turns with and without the word "session" in their context; (2) the adaptive weights
of typical queries; (3) graph degree and bonus against the what-term on one TGT instance;
(4) what RCI does to superseded FactConsolidation facts.
"""

from __future__ import annotations

import argparse
import collections
import logging
from pathlib import Path

import numpy as np
from scrubjay.bench.common import default_data_dir, get_embedder, md_table
from scrubjay.bench.run_factconsolidation import (
    FACT_INTERVAL_S,
    T0_S,
    load_factconsolidation,
    memory_id_of,
)
from scrubjay.bench.run_locomo import build_conversation, load_locomo
from scrubjay.bench.systems import close_system, make_system
from scrubjay.bench.tgt import TGTConfig, generate, system_view
from scrubjay.config import ClassifierConfig, WeightConfig
from scrubjay.perishability import keyword_classify
from scrubjay.scoring import adaptive_weights


def classifier_table(data: Path) -> str:
    cfg = ClassifierConfig()
    rows = []
    c: collections.Counter[tuple[str, str]] = collections.Counter()
    for inst in generate(TGTConfig(n_instances=20, seed=0)):
        for m in inst.memories:
            c[(m.type_id, keyword_classify(m.text, m.context, None, cfg).label)] += 1
    for t in "ABCD":
        n = sum(v for (tt, _), v in c.items() if tt == t)
        labels = ", ".join(f"{lab} {v}" for (tt, lab), v in sorted(c.items()) if tt == t)
        rows.append([f"TGT type {t} (seed 0, 20 instances)", n, labels])
    samples = load_locomo(data)
    for tmpl in ("{sample_id} session {n}", "{sample_id} part {n}"):
        lc: collections.Counter[str] = collections.Counter()
        for s in samples:
            for m in build_conversation(s, tmpl)[0]:
                lc[keyword_classify(m.text, m.context, None, cfg).label] += 1
        rows.append([f"LoCoMo turns, context '{tmpl}'", sum(lc.values()),
                     ", ".join(f"{k} {v}" for k, v in sorted(lc.items()))])
    return md_table(["memories", "n", "keyword-classifier labels"], rows)


def weights_table() -> str:
    rows = []
    for q, dt in [("What is Kenji's favourite lunch?", 600.0),
                  ("What is Kenji's favourite lunch?", 6 * 3600.0),
                  ("What is Kenji's favourite lunch?", 3 * 86400.0),
                  ("Has Kenji's favourite lunch changed recently?", 10 * 86400.0),
                  ("Which sport is goaltender associated with?", 60.0),
                  ("When did Caroline go to the LGBTQ support group?", 30 * 86400.0)]:
        w = adaptive_weights(q, 1.0, 0.0, dt, WeightConfig())
        rows.append([q, f"{dt / 3600:.3g} h"] + [f"{x:.3f}" for x in w])
    return md_table(["query (empty context)", "time since newest memory", "a (what)",
                     "b (where)", "g (utility)", "d (graph)"], rows)


def graph_table(emb: object) -> str:
    inst = generate(TGTConfig(n_instances=1, seed=0))[0]
    s = make_system("SJ-full", emb)
    try:
        v = system_view(inst)
        s.index([(m.memory_id, m.text, m.context, m.created_at_s) for m in v.memories])
        deg = [len(s.mem.graph.neighbors(m.memory_id)) for m in inst.memories]
        d_graph, a_what = [], []
        for q in inst.queries:
            s.clock.set(q.time_s)
            h = s.mem.search(q.text, k=1, at=q.time_s)[0]
            d_graph.append(h.weights[3] * h.graph)
            a_what.append(h.weights[0] * h.what)
    finally:
        close_system(s)
    return md_table(["TGT instance (seed 0, #0), SJ-full", "value"], [
        ["mean neighbours per memory (cap 16)", f"{np.mean(deg):.1f}"],
        ["top-1 hit: mean d * graph bonus", f"{np.mean(d_graph):.3f}"],
        ["top-1 hit: mean a * cos(what, query)", f"{np.mean(a_what):.3f}"]])


def rci_table(data: Path, emb: object) -> str:
    facts, qs = load_factconsolidation(data)
    s = make_system("SJ-full", emb)
    try:
        n_aff = 0
        dvs = []
        for f in facts:
            mid = memory_id_of(f["serial"])
            s.update(f["fact"], "", T0_S + int(f["serial"]) * FACT_INTERVAL_S, memory_id=mid)
            r = s.last_report
            if r.affected:
                n_aff += 1
                dvs.append(r.deltas.delta_value)
        pairs = [q for q in qs if q.get("old_seq") is not None]
        old_v = np.array([s.mem.get(memory_id_of(q["old_seq"])).value for q in pairs])
        gt_v = np.array([s.mem.get(memory_id_of(q["gt_seq"])).value for q in pairs])
    finally:
        close_system(s)
    return md_table(["FactConsolidation with RCI (SJ-full, offline deltas)", "value"], [
        ["facts whose integrate() touched >= 1 memory", f"{n_aff} of {len(facts)}"],
        ["delta_value of those events (offline parser)", ", ".join(
            f"{k:g} x{v}" for k, v in sorted(collections.Counter(np.round(dvs, 2)).items()))],
        ["superseded facts (74): mean V after all facts", f"{old_v.mean():.3f}"],
        ["superseded facts never touched (V = 1)", f"{(old_v >= 0.999).sum()} of {len(old_v)}"],
        ["current facts: mean V", f"{gt_v.mean():.3f}"]])


def main() -> None:
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=None)
    args = p.parse_args()
    data = Path(args.data) if args.data else default_data_dir()
    assert data is not None, "pass --data"
    emb = get_embedder("wordllama")
    for title, table in [("Classifier labels", classifier_table(data)),
                         ("Adaptive weights (Eq. 6)", weights_table()),
                         ("Graph bonus on TGT", graph_table(emb)),
                         ("RCI on FactConsolidation", rci_table(data, emb))]:
        print(f"#### {title}\n\n{table}\n")


if __name__ == "__main__":
    main()
