"""FactConsolidation (MemoryAgentBench, single-hop 6k): do superseded facts outrank current ones?

Data (read from a path, never copied; see ``shared/benchmarks/README.md``):
``fact_bank_sh_6k.json`` (455 facts ``{serial, fact}``; a later serial overrides an earlier one)
and ``sh_6k_gt.json`` (100 questions with ``gt_seq``; the 74 ``has_pair`` ones also name the
superseded ``old_seq``).

Protocol: fact ``serial`` becomes memory ``fact-{serial}`` (``memory_id_of``), created at
``T0_S + serial * FACT_INTERVAL_S`` (one fact per minute) with context ``FACT_CONTEXT``. With
RCI **off** every fact is a plain ``index``; with RCI **on** each fact goes, in serial order,
through the system's ``update`` hook (ScrubJay-MEM: ``integrate``; the others have no such
mechanism, so their "on" equals "off"). Every question is asked one minute after the last fact,
and the system ranks all memories. Metrics:

- current recall@k: ``gt_seq`` among the top k (k = 1, 5), over all questions;
- stale-first rate: over ``has_pair`` questions, the share where ``old_seq`` is ranked above
  ``gt_seq`` (the project's goal: below 10%).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scrubjay.bench.common import environment, get_embedder, md_table, pct, write_json
from scrubjay.bench.systems import MemoryItem, close_system, make_system, settings

__all__ = ["DEFAULT_FC_SYSTEMS", "FACT_INTERVAL_S", "evaluate_rankings", "fc_markdown",
           "load_factconsolidation", "memory_id_of", "run_factconsolidation", "stale_first"]

FACT_INTERVAL_S = 60.0
"""Seconds between consecutive facts (chosen: one per minute)."""

T0_S = 1_767_225_600.0
"""Creation time of fact serial 0 (2026-01-01T00:00:00Z)."""

FACT_CONTEXT = ""
"""Context of every fact (chosen: none; the task gives no conversation or workspace)."""

DEFAULT_FC_SYSTEMS = ("B0-random", "B2-bm25", "B3-dense", "B4-rrf", "B5-dense-recency",
                      "LC-time-weighted", "LI-time-weighted", "SJ-full", "SJ-no-decay",
                      "SJ-no-graph", "SJ-uniform-w")
"""Systems run (SJ-no-rci is SJ-full with RCI off, reported in the "off" columns)."""

KS = (1, 5)


def memory_id_of(serial: int) -> str:
    """The memory id of fact ``serial`` (the serial -> memory id mapping)."""
    return f"fact-{int(serial)}"


def load_factconsolidation(data_dir: str | Path) -> tuple[list[dict[str, Any]],
                                                          list[dict[str, Any]]]:
    """``(facts sorted by serial, questions)`` from ``data_dir`` (the folder, or its parent)."""
    d = Path(data_dir)
    if (d / "factconsolidation_sh").is_dir():
        d = d / "factconsolidation_sh"
    facts = json.loads((d / "fact_bank_sh_6k.json").read_text())["facts"]
    questions = json.loads((d / "sh_6k_gt.json").read_text())
    return sorted(facts, key=lambda f: int(f["serial"])), questions


def stale_first(ranking: Sequence[str], gt_id: str, old_id: str) -> bool:
    """True when ``old_id`` is ranked above ``gt_id`` (a memory not ranked is below all).

    >>> stale_first(["a", "old", "gt"], "gt", "old"), stale_first(["gt", "old"], "gt", "old")
    (True, False)
    >>> stale_first(["old"], "gt", "old"), stale_first(["x"], "gt", "old")
    (True, False)
    """
    pos = {m: i for i, m in enumerate(ranking)}
    big = len(ranking) + 1
    return pos.get(old_id, big) < pos.get(gt_id, big)


def evaluate_rankings(rankings: Sequence[Sequence[str]],
                      questions: Sequence[dict[str, Any]],
                      scores: Sequence[dict[str, float]] | None = None) -> dict[str, Any]:
    """Recall@k and stale-first rate of one ranking per question.

    With ``scores`` (one ``{id: score}`` per question), ``stale_first_ties`` counts the stale-first
    cases where the two facts' scores are exactly equal (the order came from the tie-break).
    """
    hits = {k: 0 for k in KS}
    n_pair = n_stale = n_ties = 0
    for i, (ranking, q) in enumerate(zip(rankings, questions, strict=True)):
        gt = memory_id_of(q["gt_seq"])
        for k in KS:
            hits[k] += gt in ranking[:k]
        if q.get("old_seq") is not None:
            n_pair += 1
            old = memory_id_of(q["old_seq"])
            first = stale_first(ranking, gt, old)
            n_stale += first
            if first and scores is not None:
                sg, so = scores[i].get(gt, math.nan), scores[i].get(old, math.nan)
                n_ties += bool(sg == so)
    n = len(questions)
    return {"n_questions": n, "n_has_pair": n_pair,
            **{f"recall@{k}": hits[k] / n if n else float("nan") for k in KS},
            "stale_first": n_stale / n_pair if n_pair else float("nan"),
            "stale_first_count": n_stale,
            "stale_first_ties": n_ties if scores is not None else None}


def _run_system(name: str, facts: Sequence[dict[str, Any]], questions: Sequence[dict[str, Any]],
                embedder: Any, rci: bool) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    system = make_system(name, embedder, seed=0)
    try:
        items = [MemoryItem(memory_id_of(f["serial"]), f["fact"], FACT_CONTEXT,
                            T0_S + int(f["serial"]) * FACT_INTERVAL_S) for f in facts]
        if rci:
            for it in items:
                system.update(it.text, it.context, it.created_at_s, memory_id=it.id)
        else:
            system.index(items)
        at = max(it.created_at_s for it in items) + FACT_INTERVAL_S
        answers = [system.answer(q["question"], at, k=len(items)) for q in questions]
    finally:
        close_system(system)
    rankings = [[a.id for a in ans] for ans in answers]
    scores = [{a.id: a.score for a in ans} for ans in answers]
    return evaluate_rankings(rankings, questions, scores), time.perf_counter() - t0


def run_factconsolidation(data_dir: str | Path, *, systems: Sequence[str] = DEFAULT_FC_SYSTEMS,
                          embedder: str = "wordllama", progress: bool = True,
                          facts: Sequence[dict[str, Any]] | None = None,
                          questions: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Run FactConsolidation with RCI on and off; returns JSON-ready results."""
    from tqdm import tqdm

    if facts is None or questions is None:
        facts, questions = load_factconsolidation(data_dir)
    emb = get_embedder(embedder)
    t_start = time.perf_counter()
    out: dict[str, Any] = {}
    bar = tqdm(total=2 * len(systems), desc="FactConsolidation", disable=not progress)
    for name in systems:
        row = {}
        for rci in (False, True):
            metrics, sec = _run_system(name, facts, questions, emb, rci)
            row["rci_on" if rci else "rci_off"] = {**metrics, "seconds": sec}
            bar.update(1)
        out[name] = row
    bar.close()
    return {"benchmark": "FactConsolidation-sh-6k", "n_facts": len(facts),
            "n_questions": len(questions), "fact_interval_s": FACT_INTERVAL_S,
            "fact_context": FACT_CONTEXT, "embedder": emb.name, "settings": settings(),
            "environment": environment(), "seconds_total": time.perf_counter() - t_start,
            "systems": out}


def _sf(m: dict[str, Any]) -> str:
    ties = m.get("stale_first_ties")
    return pct(m["stale_first"]) + (f" ({ties} ties)" if ties else "")


def fc_markdown(res: dict[str, Any]) -> str:
    """The Markdown report of :func:`run_factconsolidation`."""
    rows = []
    for name, r in res["systems"].items():
        off, on = r["rci_off"], r["rci_on"]
        rows.append([name, pct(off["recall@1"]), pct(off["recall@5"]), _sf(off),
                     pct(on["recall@1"]), pct(on["recall@5"]), _sf(on)])
    any_row = next(iter(res["systems"].values()))["rci_off"] if res["systems"] else {}
    head = (f"FactConsolidation (single-hop 6k): {res['n_facts']} facts added in serial order, "
            f"one every {res['fact_interval_s']:g} s, context {res['fact_context']!r}; "
            f"{res['n_questions']} questions ({any_row.get('n_has_pair', 0)} with a superseded "
            f"fact) asked after the last fact; embedder {res['embedder']}. RCI on = each fact "
            "through the system's update hook (only ScrubJay-MEM has one: integrate); goal: "
            "stale-first < 10%. \"(n ties)\": stale-first cases where the two facts scored "
            "exactly the same and the tie-break (earlier-indexed first) put the old one first."
            "\n\n")
    return head + md_table(["system", "R@1 % (RCI off)", "R@5 % (off)", "stale-first % (off)",
                            "R@1 % (RCI on)", "R@5 % (on)", "stale-first % (on)"], rows) + \
        f"\n\nRun time {res['seconds_total']:.0f} s.\n"


def write_fc(res: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write ``factconsolidation.md`` and ``.json`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"md": out_dir / "factconsolidation.md", "json": out_dir / "factconsolidation.json"}
    paths["md"].write_text(fc_markdown(res))
    write_json(paths["json"], res)
    return paths
