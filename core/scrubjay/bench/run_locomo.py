"""LoCoMo (ACL 2024) evidence recall: does decay hide old memories that are still valid?

Data: ``locomo10.json`` read from a path (never copied; CC BY-NC 4.0). Protocol (no LLM), per
conversation, one fresh system:

- one memory per turn, id ``"{sample_id}:{dia_id}"``, text ``"{speaker}: {text}"`` plus
  ``" [shares a photo: {blip_caption}]"`` when the turn carries a caption;
- created at its session's date (``%I:%M %p on %d %B, %Y``, read as UTC) plus the turn's index
  in seconds (keeps the order inside a session); context ``"{sample_id} session {n}"``;
- every question asked at the time of the last session (its last turn), with an empty context;
- evidence recall@k: the share of the item's evidence turns among the top k (k = 1, 5, 10),
  averaged per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial).

Evidence ids are normalised by :func:`normalise_evidence`; an item is usable when it has
evidence and every id resolves to a turn (README: 1,979 of 1,986).
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from scrubjay.bench.common import environment, get_embedder, md_table, pct, write_json
from scrubjay.bench.systems import MemoryItem, close_system, make_system, settings

__all__ = [
    "CATEGORIES",
    "DATE_FORMAT",
    "DEFAULT_LOCOMO_SYSTEMS",
    "build_conversation",
    "load_locomo",
    "locomo_markdown",
    "normalise_evidence",
    "run_locomo",
]

DATE_FORMAT = "%I:%M %p on %d %B, %Y"
"""Format of ``session_<n>_date_time`` (e.g. "1:56 pm on 8 May, 2023")."""

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
              5: "adversarial"}
"""The usual names of LoCoMo's numeric categories (not named in the source)."""

KS = (1, 5, 10)

DEFAULT_LOCOMO_SYSTEMS = ("B2-bm25", "B3-dense", "B4-rrf", "B5-dense-recency",
                          "LI-time-weighted", "SJ-full", "SJ-no-decay")
"""Systems run by default (LangChain's retriever, slow on 600-turn stores, is left out)."""

CONTEXT_TEMPLATE = "{sample_id} session {n}"
"""Context of a turn's memory (the brief's form). Note: ScrubJay-MEM's keyword classifier reads
the context too, and "session" is one of its ephemeral keywords (see docs/benchmarks.md)."""

_ID_RE = re.compile(r"D:?(\d+):(\d+)")


def normalise_evidence(evidence: Iterable[str]) -> list[str]:
    """Split and repair LoCoMo evidence strings into ``D<session>:<turn>`` ids.

    >>> normalise_evidence(["D8:6; D9:17"])
    ['D8:6', 'D9:17']
    >>> normalise_evidence(["D9:1 D4:4"])
    ['D9:1', 'D4:4']
    >>> normalise_evidence(["D:11:26", "D30:05"])
    ['D11:26', 'D30:5']
    >>> normalise_evidence(["D"])   # no id in it: left as is, and it will not resolve
    ['D']
    """
    out: list[str] = []
    for raw in evidence:
        for part in re.split(r"[;,\s]+", str(raw).strip()):
            if not part:
                continue
            m = _ID_RE.fullmatch(part)
            out.append(f"D{int(m.group(1))}:{int(m.group(2))}" if m else part)
    return list(dict.fromkeys(out))


def _session_time(text: str) -> float:
    return float(calendar.timegm(datetime.strptime(text.strip(), DATE_FORMAT).timetuple()))


def build_conversation(sample: dict[str, Any], context_template: str = CONTEXT_TEMPLATE
                       ) -> tuple[list[MemoryItem], list[dict[str, Any]],
                                                        float, int]:
    """``(memories, usable questions, query time, n unusable)`` of one LoCoMo sample."""
    sid = sample["sample_id"]
    conv = sample["conversation"]
    memories: list[MemoryItem] = []
    sessions = sorted(int(k.split("_")[1]) for k in conv
                       if re.fullmatch(r"session_\d+", k))
    for n in sessions:
        t = _session_time(conv[f"session_{n}_date_time"])
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            memories.append(MemoryItem(f"{sid}:{turn['dia_id']}", text,
                                       context_template.format(sample_id=sid, n=n), t + i))
    known = {m.id.split(":", 1)[1] for m in memories}
    usable, unusable = [], 0
    for qa in sample["qa"]:
        ev = normalise_evidence(qa.get("evidence") or [])
        if not ev or any(e not in known for e in ev):
            unusable += 1
            continue
        usable.append({"question": qa["question"], "category": int(qa["category"]),
                       "evidence": [f"{sid}:{e}" for e in ev]})
    return memories, usable, max(m.created_at_s for m in memories), unusable


def load_locomo(data_dir: str | Path) -> list[dict[str, Any]]:
    """The LoCoMo samples from ``data_dir`` (the ``locomo`` folder, its parent, or the file)."""
    p = Path(data_dir)
    if p.is_dir():
        p = p / "locomo10.json" if (p / "locomo10.json").exists() else p / "locomo" / \
            "locomo10.json"
    samples: list[dict[str, Any]] = json.loads(p.read_text())
    return samples


def run_locomo(data_dir: str | Path | None = None, *,
               systems: Sequence[str] = DEFAULT_LOCOMO_SYSTEMS, embedder: str = "wordllama",
               progress: bool = True, context_template: str = CONTEXT_TEMPLATE,
               samples: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Run the LoCoMo evidence-recall benchmark; returns JSON-ready results."""
    from tqdm import tqdm

    if samples is None:
        assert data_dir is not None
        samples = load_locomo(data_dir)
    emb = get_embedder(embedder)
    t_start = time.perf_counter()
    built = [build_conversation(s, context_template) for s in samples]
    n_usable = sum(len(b[1]) for b in built)
    n_unusable = sum(b[3] for b in built)
    results: dict[str, Any] = {}
    bar = tqdm(total=len(systems) * len(built), desc="LoCoMo", disable=not progress)
    for name in systems:
        t0 = time.perf_counter()
        sums: dict[int, dict[int, float]] = defaultdict(lambda: {k: 0.0 for k in KS})
        counts: dict[int, int] = defaultdict(int)
        for memories, questions, at, _ in built:
            system = make_system(name, emb, seed=0)
            try:
                system.index(memories)
                for q in questions:
                    ranked = [a.id for a in system.answer(q["question"], at, k=max(KS))]
                    ev = set(q["evidence"])
                    counts[q["category"]] += 1
                    for k in KS:
                        sums[q["category"]][k] += len(ev & set(ranked[:k])) / len(ev)
            finally:
                close_system(system)
            bar.update(1)
        per_cat = {CATEGORIES[c]: {"n": counts[c], **{f"recall@{k}": sums[c][k] / counts[c]
                                                      for k in KS}}
                   for c in sorted(counts)}
        total = sum(counts.values())
        overall = {"n": total, **{f"recall@{k}": sum(sums[c][k] for c in counts) / total
                                  for k in KS}}
        results[name] = {"overall": overall, "per_category": per_cat,
                         "seconds": time.perf_counter() - t0}
    bar.close()
    return {"benchmark": "LoCoMo-evidence-recall", "n_conversations": len(built),
            "n_turns": sum(len(b[0]) for b in built), "n_usable": n_usable,
            "n_unusable": n_unusable, "embedder": emb.name,
            "context_template": context_template, "settings": settings(),
            "environment": environment(), "seconds_total": time.perf_counter() - t_start,
            "systems": results}


def locomo_markdown(res: dict[str, Any]) -> str:
    """The Markdown report of :func:`run_locomo`."""
    cats = list(CATEGORIES.values())
    head = (f"LoCoMo evidence recall: {res['n_conversations']} conversations, "
            f"{res['n_turns']} turns, {res['n_usable']} usable questions "
            f"({res['n_unusable']} dropped: no evidence or an id that does not resolve); "
            f"queries at the time of the last session; memory context "
            f"{res['context_template']!r}; embedder {res['embedder']}.\n\n")
    rows = [[name, pct(r["overall"]["recall@1"]), pct(r["overall"]["recall@5"]),
             pct(r["overall"]["recall@10"])] for name, r in res["systems"].items()]
    t1 = md_table(["system", "R@1 %", "R@5 %", "R@10 %"], rows)
    any_sys = next(iter(res["systems"].values()), None)
    ns = {c: any_sys["per_category"].get(c, {}).get("n", 0) for c in cats} if any_sys else {}
    rows2 = [[name] + [pct(r["per_category"][c]["recall@5"]) if c in r["per_category"] else "-"
                       for c in cats] for name, r in res["systems"].items()]
    t2 = md_table(["R@5 % by category"] + [f"{c} (n={ns.get(c, 0)})" for c in cats], rows2)
    return head + t1 + "\n\n" + t2 + f"\n\nRun time {res['seconds_total']:.0f} s.\n"


def write_locomo(res: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write ``locomo.md`` and ``locomo.json`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"md": out_dir / "locomo.md", "json": out_dir / "locomo.json"}
    paths["md"].write_text(locomo_markdown(res))
    write_json(paths["json"], res)
    return paths
