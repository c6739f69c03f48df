"""Build ``core/scrubjay/bench/data/everyday_lifetimes.jsonl`` from ``scripts/lifetimes_src.txt``.

Each source line is ``topic | text | lo | hi`` (units ``min h d w mo y``, ``inf`` = lifelong,
stored as 100 years); ``label`` is :func:`band_label` of the range. The split is fixed by the text alone: within each topic, the rows are
ordered by the BLAKE2b hash of their text and every third one from the first (30-34% of each
topic) goes to ``test``, the rest to ``train``. Run ``python scripts/build_lifetime_set.py``
after editing the source; the output is deterministic.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "scripts" / "lifetimes_src.txt"
OUT = ROOT / "core" / "scrubjay" / "bench" / "data" / "everyday_lifetimes.jsonl"
UNITS = {"min": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0, "mo": 2_592_000.0,
         "y": 31_557_600.0}
LIFELONG_S = 100 * UNITS["y"]


def band_label(lo_s: float, hi_s: float) -> str:
    """The label the estimator is trained with, from the range's geometric middle: under a
    day ephemeral, under a year task_specific, else factual (the bands of the original
    statements' labels; the stale age does not depend on the label)."""
    mid = (lo_s * hi_s) ** 0.5
    return "ephemeral" if mid < UNITS["d"] else "task_specific" if mid < UNITS["y"] else "factual"


def seconds(token: str) -> float:
    if token == "inf":
        return LIFELONG_S
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(min|h|d|w|mo|y)", token)
    if not m:
        raise ValueError(f"bad duration {token!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def main() -> None:
    rows: list[dict[str, object]] = []
    for line in SRC.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        topic, text, lo, hi = (p.strip() for p in line.split("|"))
        lo_s, hi_s = seconds(lo), seconds(hi)
        if not 0 < lo_s < hi_s:
            raise ValueError(f"bad range in {line!r}")
        rows.append({"text": text, "topic": topic, "lo_s": lo_s, "hi_s": hi_s,
                     "lo": lo, "hi": hi, "label": band_label(lo_s, hi_s)})
    texts = [str(r["text"]) for r in rows]
    if len(set(texts)) != len(texts):
        raise ValueError("duplicate texts")
    by_topic: dict[str, list[dict[str, object]]] = {}
    for r in rows:
        by_topic.setdefault(str(r["topic"]), []).append(r)
    for group in by_topic.values():
        group.sort(key=lambda r: hashlib.blake2b(str(r["text"]).encode()).hexdigest())
        for i, r in enumerate(group):
            r["split"] = "test" if i % 3 == 0 else "train"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    n_test = sum(r["split"] == "test" for r in rows)
    print(f"wrote {OUT}: {len(rows)} rows, {len(rows) - n_test} train, {n_test} test, "
          f"{len(by_topic)} topics")


if __name__ == "__main__":
    main()
