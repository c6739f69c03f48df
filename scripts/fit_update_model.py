"""Refit the learned supersession model and write ``core/scrubjay/data/update_model.json``.

    python scripts/fit_update_model.py          # writes the file
    python scripts/fit_update_model.py --check  # exits 1 when the file differs from a refit

The fit uses the training slots of ``bench/data/supersession_pairs.tsv`` with their pool of
hard negatives only (see :func:`scrubjay.bench.supersession.choose_update_model`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scrubjay.bench.common import get_embedder
from scrubjay.bench.supersession import choose_update_model, load_pairs, split, with_pool

TARGET = Path(__file__).resolve().parents[1] / "core" / "scrubjay" / "data" / "update_model.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    emb = get_embedder("wordllama")
    train, _ = split(load_pairs())
    model, cv = choose_update_model(with_pool(train, emb), emb)
    text = model.to_json()
    if args.check:
        same = TARGET.exists() and json.loads(TARGET.read_text()) == json.loads(text)
        print("update_model.json matches a refit" if same else "update_model.json is stale")
        return 0 if same else 1
    TARGET.write_text(text)
    print(f"wrote {TARGET} (ridge {cv['ridge']}, threshold {cv['threshold']}, CV precision "
          f"{cv['cv_precision']:.3f}, recall {cv['cv_recall']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
