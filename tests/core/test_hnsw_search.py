"""The embedded relevance search above ``scan_max``: HNSW candidates widened until the top k
is provably the exact one (up to HNSW), against the exact scan of the same memories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scrubjay import ScrubJayConfig, ScrubJayMemory, SearchConfig
from scrubjay.config import LLMConfig, RCIConfig
from scrubjay.embedding import CallableEmbedder
from scrubjay.testing import FrozenClock, ScriptedLLM

DIM, N = 32, 500


def _lookup() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((10, DIM))
    unit = lambda v: (v / np.linalg.norm(v)).astype(np.float32)
    lut = {"": np.zeros(DIM, np.float32)}
    for i in range(N):
        lut[f"m{i}"] = unit(centres[i % 10] + 0.5 * rng.standard_normal(DIM))
    for q in range(10):
        lut[f"q{q}"] = unit(centres[q] + 0.5 * rng.standard_normal(DIM))
    return lut


def _open(folder: Path, lut: dict[str, np.ndarray], clock: FrozenClock, **kw: Any
          ) -> ScrubJayMemory:
    return ScrubJayMemory(path=folder, namespace="h", clock=clock,
                          embedder=CallableEmbedder(lambda ts: np.stack([lut[t] for t in ts]),
                                                    name="callable:lookup"), **kw)


def _hits(mem: ScrubJayMemory, k: int, stale: bool) -> list[list[Any]]:
    return [mem.search(f"q{q}", k=k, exclude_stale=stale) for q in range(10)]


def _same(got: list[list[Any]], want: list[list[Any]]) -> None:
    for g, w in zip(got, want, strict=True):
        assert [h.id for h in g] == [h.id for h in w]
        # float32 dot products over a subset vs every row: equal up to summation order
        assert [h.score for h in g] == pytest.approx([h.score for h in w], abs=1e-6)


def test_hnsw_path_equals_the_exact_scan_before_and_after_rci(tmp_path: Path) -> None:
    lut, clock = _lookup(), FrozenClock(1_764_000_000.0)
    mem = _open(tmp_path / "s", lut, clock)
    mem.add_many([{"text": f"m{i}", "at": clock() - (N - i) * 3_600.0, "id": f"m{i:03d}"}
                  for i in range(N)])
    mem.close()
    queried: list[int] = []

    def compare() -> None:
        fast = _open(tmp_path / "s", lut, clock,
                     config=ScrubJayConfig(search=SearchConfig(scan_max=0)))
        real = fast._store.query_scored
        fast._store.query_scored = lambda which, v, n, **kw: (  # type: ignore[method-assign]
            queried.append(n), real(which, v, n, **kw))[1]
        exact = _open(tmp_path / "s", lut, clock,
                      config=ScrubJayConfig(search=SearchConfig(scan_max=None)))
        try:
            for k in (1, 5, 10):
                for stale in (False, True):
                    _same(_hits(fast, k, stale), _hits(exact, k, stale))
        finally:
            fast.close()
            exact.close()

    compare()
    assert queried and min(queried) == 2  # starts from 2k candidates (k = 1)
    # RCI lowers the values of the memories nearest q0..q2 and moves their vectors a little
    # (index rewrites deferred): the cut must widen, and stay exact
    deltas = json.dumps({"delta_value": -0.9, "delta_pi": 0.0, "delta_tau": 0.0,
                         "summary": "superseded"})
    writer = _open(tmp_path / "s", lut, clock, llm=ScriptedLLM([deltas]),
                   config=ScrubJayConfig(llm=LLMConfig(annotate=False),
                                         rci=RCIConfig(eta_what=0.03, theta=0.3)))
    for q in range(3):
        assert writer.integrate(f"q{q}", store=False).affected
    assert float(writer._backend._mirror.drift[: len(writer)].max()) > 0.0
    writer.close()
    queried.clear()
    compare()
    assert max(queried) > 20  # some query had to widen past its first 2k candidates


def test_mirror_maxima_follow_every_write() -> None:
    """The cached (largest value, largest drift) that bounds the candidate cut is recomputed
    after each kind of write, including one that lowers the maximum."""
    from scrubjay.mirror import Mirror
    from scrubjay.types import MemoryRecord

    def rec(i: int, value: float) -> MemoryRecord:
        return MemoryRecord(id=f"r{i}", text="t", context="", label="factual", pi=0.1,
                            tau_s=10.0, value=value, created_at_s=float(i))

    m = Mirror(4)
    assert m.maxima() == (0.0, 0.0)
    vec = np.eye(4, dtype=np.float32)[:3]
    m.append([rec(0, 1.0), rec(1, 2.0), rec(2, 0.5)], vec, np.zeros_like(vec))
    assert m.maxima() == (2.0, 0.0)
    m.update([rec(1, 0.25)], drift=np.array([0.04]))
    assert m.maxima() == (1.0, 0.04)
    m.remove(["r0"])
    assert m.maxima() == (0.5, 0.04)
    m.remove(["r1"])
    assert m.maxima() == (0.5, 0.0)
