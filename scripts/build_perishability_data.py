"""Build ``core/scrubjay/data/perishability_statements.jsonl`` from the hand-written sources.

The statements are written by hand in ``scripts/perishability_src/*.txt`` (one file per domain);
this script only parses them and writes the JSONL. Source format::

    @domain travel
    ## flights                 <- a subtopic (template family); all its rows go to train
    ## ground-transport [test] <- a held-out subtopic; all its rows go to test
    text | lifetime | label | context

``lifetime`` is a number with a unit: ``m`` minutes, ``h`` hours, ``d`` days, ``w`` weeks,
``mo`` months (30 days), ``y`` years (365.25 days). A context of ``-`` means "no context".

Usage: ``python scripts/build_perishability_data.py`` (then run ``check_perishability_data.py``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "scripts" / "perishability_src"
OUT = ROOT / "core" / "scrubjay" / "data" / "perishability_statements.jsonl"

UNIT_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "mo": 30 * 86400, "y": 365.25 * 86400}
LIFETIME_RE = re.compile(r"^(\d+(?:\.\d+)?)(mo|m|h|d|w|y)$")
HEADER_RE = re.compile(r"^##\s+([\w-]+)(\s+\[test\])?\s*$")


def parse_lifetime(token: str) -> int:
    match = LIFETIME_RE.match(token.strip())
    if match is None:
        raise ValueError(f"bad lifetime {token!r}")
    return round(float(match.group(1)) * UNIT_S[match.group(2)])


def parse_file(path: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    domain = None
    subtopic = None
    split = "train"
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") and not line.startswith("##"):
            continue
        where = f"{path.name}:{lineno}"
        if line.startswith("@domain"):
            domain = line.split(None, 1)[1].strip()
            continue
        header = HEADER_RE.match(line)
        if header:
            subtopic = header.group(1)
            split = "test" if header.group(2) else "train"
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) != 4 or domain is None or subtopic is None:
            raise ValueError(f"{where}: cannot parse {line!r}")
        text, lifetime, label, context = parts
        rows.append(
            {
                "text": text,
                "context": "" if context == "-" else context,
                "label": label,
                "lifetime_s": parse_lifetime(lifetime),
                "domain": domain,
                "split": split,
                "_subtopic": f"{domain}/{subtopic}",
                "_where": where,
            }
        )
    return rows


def main() -> int:
    rows: list[dict[str, object]] = []
    for path in sorted(SRC.glob("*.txt")):
        rows.extend(parse_file(path))
    keys = ("text", "context", "label", "lifetime_s", "domain", "split")
    with OUT.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps({k: row[k] for k in keys}, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} rows to {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
