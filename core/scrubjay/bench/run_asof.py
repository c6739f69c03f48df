"""As-of benchmark on FactConsolidation: does a search at time t answer as the memory would then?

Data and protocol of :mod:`scrubjay.bench.run_factconsolidation`: fact ``serial`` is memory
``fact-{serial}``, recorded at ``T0_S + serial * FACT_INTERVAL_S``. Every fact is stored first
(plain adds, or each fact through ``integrate()`` in serial order), then probes are asked with
``search(..., at=t)``. For each question whose fact was replaced (``old_seq`` then ``gt_seq``):

- **between** probes at ``t_old + f (t_new - t_old)`` for ``f`` in :data:`BETWEEN_FRACTIONS`
  expect the old fact first (the new one was not told yet);
- **after** probes half a fact interval after the new fact and one interval after the last fact
  expect the new fact first.

as-of@1 is the share of probes whose expected fact is ranked first (reported overall and for
the two kinds). Systems: ScrubJay-MEM through its public API in both modes (``SJ-add``,
``SJ-integrate``), flat dense retrieval over every memory (``B3-dense``) and the same ranking
with the memories recorded after the probe time hidden (``B3-dense-asof``, the baseline).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from scrubjay.bench.common import environment, get_embedder, md_table, pct, write_json
from scrubjay.bench.run_factconsolidation import (
    FACT_CONTEXT,
    FACT_INTERVAL_S,
    T0_S,
    load_factconsolidation,
    memory_id_of,
)
from scrubjay.bench.run_scenario import ScrubJayTimelineSystem
from scrubjay.bench.systems import DenseSystem, MemoryItem

__all__ = ["ASOF_SYSTEMS", "BETWEEN_FRACTIONS", "QUICK_PAIRS", "Probe", "asof_markdown",
           "make_probes", "quick_subset", "run_asof", "score_probes", "write_asof"]

BETWEEN_FRACTIONS = (0.25, 0.75)
"""Where the "between" probes fall in the interval from the old fact to the new one (chosen:
two points away from both ends, so neither fact's own time is probed)."""

ASOF_SYSTEMS = ("SJ-add", "SJ-integrate", "B3-dense", "B3-dense-asof")

QUICK_PAIRS = 6
"""Replaced facts in the reduced size (``--quick``)."""

QUICK_FILLER_EVERY = 15
"""In the reduced size, every fifteenth fact is kept besides the probed ones (distractors)."""


class Probe(NamedTuple):
    """One as-of probe: a question asked at ``at_s`` that expects ``expect`` first."""

    question: str
    at_s: float
    expect: str
    kind: str
    """"between" (the old fact is expected) or "after" (the new one)."""


def _t(serial: int) -> float:
    return T0_S + int(serial) * FACT_INTERVAL_S


def make_probes(questions: Sequence[dict[str, Any]], last_serial: int) -> list[Probe]:
    """The probes of every question with a replaced fact (``old_seq`` set).

    >>> [p[1:] for p in make_probes([{"question": "q", "old_seq": 0, "gt_seq": 4}], 9)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [(1767225660.0, 'fact-0', 'between'), (1767225780.0, 'fact-0', 'between'),
     (1767225870.0, 'fact-4', 'after'), (1767226200.0, 'fact-4', 'after')]
    """
    probes: list[Probe] = []
    for q in questions:
        if q.get("old_seq") is None:
            continue
        t_old, t_new = _t(q["old_seq"]), _t(q["gt_seq"])
        old, new = memory_id_of(q["old_seq"]), memory_id_of(q["gt_seq"])
        probes += [Probe(q["question"], t_old + f * (t_new - t_old), old, "between")
                   for f in BETWEEN_FRACTIONS]
        probes += [Probe(q["question"], t_new + FACT_INTERVAL_S / 2, new, "after"),
                   Probe(q["question"], _t(last_serial) + FACT_INTERVAL_S, new, "after")]
    return probes


def score_probes(firsts: Sequence[str | None], probes: Sequence[Probe]) -> dict[str, Any]:
    """as-of@1 overall and per kind, from each probe's first-ranked id (None: nothing).

    >>> p = [Probe("q", 0.0, "a", "between"), Probe("q", 1.0, "b", "after")]
    >>> r = score_probes(["a", "a"], p)
    >>> r["asof@1"], r["between@1"], r["after@1"]
    (0.5, 1.0, 0.0)
    """
    def share(kind: str | None) -> float:
        sel = [f == p.expect for f, p in zip(firsts, probes, strict=True)
               if kind is None or p.kind == kind]
        return sum(sel) / len(sel) if sel else float("nan")

    return {"n_probes": len(probes), "asof@1": share(None), "between@1": share("between"),
            "after@1": share("after")}


def quick_subset(facts: Sequence[dict[str, Any]], questions: Sequence[dict[str, Any]],
                 n_pairs: int = QUICK_PAIRS) -> tuple[list[dict[str, Any]],
                                                      list[dict[str, Any]]]:
    """The reduced size: the first ``n_pairs`` questions with a replaced fact, their facts and
    every :data:`QUICK_FILLER_EVERY`-th other fact (serials, hence times, unchanged)."""
    qs = [q for q in questions if q.get("old_seq") is not None][:n_pairs]
    keep = {int(s) for q in qs for s in (q["old_seq"], q["gt_seq"])}
    fs = [f for f in facts if int(f["serial"]) in keep
          or int(f["serial"]) % QUICK_FILLER_EVERY == 0]
    return fs, qs


def _firsts(name: str, items: Sequence[MemoryItem], probes: Sequence[Probe],
            embedder: Any) -> list[str | None]:
    if name in ("SJ-add", "SJ-integrate"):
        sj = ScrubJayTimelineSystem(embedder=embedder)
        try:
            if name == "SJ-add":
                sj.remember_many(items)
            else:
                for it in items:
                    sj.remember(it.id, it.text, it.context, it.created_at_s, integrate=True)
            return [next((mid for mid, _ in sj.ask(p.question, "", p.at_s, 1)), None)
                    for p in probes]
        finally:
            sj.close()
    dense = DenseSystem(embedder)
    dense.index(items)
    recorded = {m.id: m.created_at_s for m in items}
    out: list[str | None] = []
    for p in probes:
        ranked = dense.answer(p.question, p.at_s, k=len(items))
        if name == "B3-dense-asof":  # hide what was told after the probe
            ranked = [a for a in ranked if recorded[a.id] <= p.at_s]
        out.append(ranked[0].id if ranked else None)
    return out


def run_asof(data_dir: str | Path | None = None, *, systems: Sequence[str] = ASOF_SYSTEMS,
             embedder: Any = "wordllama", quick: bool = False,
             facts: Sequence[dict[str, Any]] | None = None,
             questions: Sequence[dict[str, Any]] | None = None,
             progress: bool = True) -> dict[str, Any]:
    """Run the as-of probes for every system; returns JSON-ready results."""
    from tqdm import tqdm

    unknown = [s for s in systems if s not in ASOF_SYSTEMS]
    if unknown:
        raise ValueError(f"unknown as-of systems {unknown}; known: {', '.join(ASOF_SYSTEMS)}")
    if facts is None or questions is None:
        if data_dir is None:
            raise ValueError("run_asof needs data_dir, or facts and questions")
        facts, questions = load_factconsolidation(data_dir)
    if quick:
        facts, questions = quick_subset(facts, questions)
    facts = sorted(facts, key=lambda f: int(f["serial"]))
    items = [MemoryItem(memory_id_of(f["serial"]), f["fact"], FACT_CONTEXT, _t(f["serial"]))
             for f in facts]
    probes = make_probes(questions, int(facts[-1]["serial"]))
    emb = get_embedder(embedder)
    t_start = time.perf_counter()
    out: dict[str, Any] = {}
    for name in tqdm(systems, desc="as-of", disable=not progress):
        t0 = time.perf_counter()
        out[name] = {**score_probes(_firsts(name, items, probes, emb), probes),
                     "seconds": time.perf_counter() - t0}
    return {"benchmark": "FactConsolidation-sh-6k as-of", "quick": quick,
            "n_facts": len(facts), "n_pairs": sum(q.get("old_seq") is not None
                                                  for q in questions),
            "n_probes": len(probes), "between_fractions": list(BETWEEN_FRACTIONS),
            "fact_interval_s": FACT_INTERVAL_S, "embedder": emb.name,
            "environment": environment(), "seconds_total": time.perf_counter() - t_start,
            "systems": out}


def asof_markdown(res: dict[str, Any]) -> str:
    """The Markdown report of :func:`run_asof`."""
    rows = [[name, pct(r["asof@1"]), pct(r["between@1"]), pct(r["after@1"])]
            for name, r in res["systems"].items()]
    fr = ", ".join(f"{f:g}" for f in res["between_fractions"])
    head = (f"FactConsolidation as-of{' (quick)' if res['quick'] else ''}: {res['n_facts']} "
            f"facts, one every {res['fact_interval_s']:g} s, all stored before probing; "
            f"{res['n_pairs']} replaced facts, {res['n_probes']} probes: between the old and "
            f"the new fact (at fractions {fr} of the interval) the old one is expected first, "
            "after the new one (half an interval later, and after the last fact) the new one; "
            f"embedder {res['embedder']}. SJ-integrate: every fact through integrate(). "
            "B3-dense-asof: dense retrieval hiding the memories recorded after the probe. "
            "Target for ScrubJay-MEM: as-of@1 >= 95% in both modes.\n\n")
    return head + md_table(["system", "as-of@1 %", "between@1 % (old expected)",
                            "after@1 % (new expected)"], rows) + \
        f"\n\nRun time {res['seconds_total']:.0f} s.\n"


def write_asof(res: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write ``asof.md`` and ``asof.json`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"md": out_dir / "asof.md", "json": out_dir / "asof.json"}
    paths["md"].write_text(asof_markdown(res))
    write_json(paths["json"], res)
    return paths
