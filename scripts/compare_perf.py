"""Compare ``scrubjay bench perf`` between two checkouts of scrubjay, measured in one run.

    python scripts/compare_perf.py --before ../before --after . --sizes 1000,10000 \
        --rounds 2 --out bench-results/compare

Each round runs the benchmark from both checkouts, the first side alternating by round (the
checkout's ``core`` folder first on ``PYTHONPATH``, the same interpreter and packages), so that
both meet the same machine load; the table gives each figure's median over the rounds and the
change. The figures are ratios against raw Chroma (or embedding + Chroma add) measured beside
scrubjay in the same process, so a noisy machine moves both sides of each ratio alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any


def _figures(perf: dict[str, Any]) -> dict[str, float]:
    """The figures compared: search p50 against a raw Chroma query per size and mode, ingest
    per memory against embedding + Chroma add, the buffer's speed-up, RCI against one update."""
    out: dict[str, float] = {}
    for n, row in perf.get("search", {}).get("by_n", {}).items():
        for mode in ("embedded", "server", "server_mirror"):
            if isinstance(row.get(mode), dict) and "p50_vs_chroma" in row[mode]:
                out[f"search {mode} n={n} p50 / chroma"] = float(row[mode]["p50_vs_chroma"])
    ingest = perf.get("ingest", {})
    for mode, part in (("embedded", ingest), ("server", ingest.get("server", {}))):
        for name in ("synthetic", "bundled"):
            got = part.get(name) if isinstance(part, dict) else None
            if isinstance(got, dict) and got.get("embed_plus_chroma_add_per_s"):
                out[f"ingest {mode} {name} s per memory / raw"] = (
                    float(got["embed_plus_chroma_add_per_s"]) / float(got["sj_per_s"]))
    buffer = perf.get("buffer", {})
    if "speedup_p50" in buffer:
        out["buffer speed-up (higher is better)"] = float(buffer["speedup_p50"])
    rci = perf.get("rci", {})
    if "largest_vs_chroma_update" in rci:
        out["rci largest event / one update"] = float(rci["largest_vs_chroma_update"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="checkout of the code before the change")
    p.add_argument("--after", default=".", help="checkout of the code after (default: .)")
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--mode", default="both", choices=("embedded", "server", "both"))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", default="bench-results/compare")
    args = p.parse_args(argv)
    out = Path(args.out)
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for r in range(args.rounds):
        # Alternate which side runs first, so that a drift within a round (cache, heat, a
        # neighbour's load) does not always fall on the same side.
        for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
            tree = Path(getattr(args, side)).resolve()
            dest = out / f"{side}-{r}"
            env = {**os.environ, "PYTHONPATH": f"{tree / 'core'}{os.pathsep}{tree}"}
            cmd = [sys.executable, "-m", "scrubjay.cli", "bench", "perf", "--sizes", args.sizes,
                   "--mode", args.mode, "--out", str(dest), "--no-progress"]
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
            runs[side].append(_figures(json.loads((dest / "perf.json").read_text())))
    keys = [k for k in runs["after"][0] if all(k in f for s in runs.values() for f in s)]
    lines = ["| figure | before | after | change |", "|---|---|---|---|"]
    for key in keys:
        b = statistics.median(f[key] for f in runs["before"])
        a = statistics.median(f[key] for f in runs["after"])
        lines.append(f"| {key} | {b:.3f} | {a:.3f} | {100 * (a / b - 1):+.1f}% |")
    lines.append("")
    lines.append("Per round (before / after):")
    for key in keys:
        pairs = ", ".join(f"{b[key]:.2f}/{a[key]:.2f}" for b, a in zip(runs["before"], runs["after"]))
        lines.append(f"- {key}: {pairs}")
    table = "\n".join(lines)
    print(table)
    (out / "compare.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
