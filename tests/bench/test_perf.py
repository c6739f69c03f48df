"""`scrubjay bench perf --quick` end to end: every section present, sane counts (no timings)."""

from __future__ import annotations

import io
import json
import math

import pytest
from scrubjay.cli import main

pytestmark = pytest.mark.slow


def test_perf_quick_writes_every_section(tmp_path) -> None:
    out = io.StringIO()
    code = main(["bench", "perf", "--quick", "--no-progress", "--out", str(tmp_path)],
                out=out)
    assert code == 0
    res = json.loads((tmp_path / "perf.json").read_text())
    assert {"search", "ingest", "rci", "buffer", "memory"} <= set(res)
    assert (tmp_path / "perf.png").stat().st_size > 0
    assert "scrubjay bench perf" in (tmp_path / "perf.md").read_text()
    assert "overhead without the graph" in (tmp_path / "perf.md").read_text()
    assert "server, with a mirror" in (tmp_path / "perf.md").read_text()
    for row in res["search"]["by_n"].values():
        for mode in ("embedded", "server"):
            r = row[mode]
            assert r["sj"]["p50_ms"] > 0 and r["chroma"]["p50_ms"] > 0
        assert 0.0 <= row["embedded"]["recall_at_k"] <= 1.0
        assert 0.0 <= row["server"]["recall_at_k"] <= 1.0   # against a mirror-backed scan
        mirrored = row["server_mirror"]  # a process with a mirror on the same server
        assert mirrored["sj"]["p50_ms"] > 0 and mirrored["open_s"] > 0
        assert 0.0 <= mirrored["recall_at_k"] <= 1.0
    assert res["rci"]["llm_calls_per_event"] == [1] * len(res["rci"]["events"])
    for ev in res["rci"]["events"]:
        assert ev["affected"] == ev["target_affected"]
    assert 0.0 <= res["buffer"]["hit_rate"] <= 1.0
    for name in ("synthetic", "bundled"):
        assert math.isfinite(res["ingest"][name]["overhead"])
        assert math.isfinite(res["ingest"][name]["overhead_vs_text_as_meta"])
        assert math.isfinite(res["ingest"]["server"][name]["overhead"])
        for mode_rows in (res["ingest"], res["ingest"]["server"]):  # the graph's share
            assert math.isfinite(mode_rows[name]["overhead_without_graph"])
            assert math.isfinite(mode_rows[name]["overhead_without_graph_vs_text_as_meta"])
            assert mode_rows[name]["without_graph_per_s"] > 0
        assert res["ingest"]["server"][name]["sj_per_s"] > 0
        assert math.isfinite(res["ingest"]["server"][name]["overhead_with_mirror"])
        assert res["ingest"]["server"][name]["single"]["with_mirror"]["p50_ms"] > 0
        # the lexical channel's cost at add time, against the same memory without it
        assert res["ingest"][name]["without_lexical_per_s"] > 0
        assert math.isfinite(res["ingest"][name]["lexical_ratio"])
        assert res["ingest"][name]["single"]["without_lexical"]["p50_ms"] > 0
        assert math.isfinite(res["ingest"][name]["single"]["lexical_ratio_p50"])
    assert "lexical channel's cost at add time" in (tmp_path / "perf.md").read_text()
    for mode_rows in (res["ingest"], res["ingest"]["server"]):  # one add at a time
        for name in ("synthetic", "bundled"):
            one = mode_rows[name]["single"]
            assert one["sj"]["p50_ms"] > 0 and one["embed_plus_chroma_add"]["p50_ms"] > 0
    assert res["ingest"]["single"] == 20
    texts = res["ingest"]["texts"]  # memory-like sentences, not the corpus's placeholders
    assert texts["share_at_or_above_theta_s"] < 0.01 and texts["mean_chars"] > 40
    assert res["memory"]["n"] == max(int(n) for n in res["search"]["by_n"])
    assert res["memory"]["disk_bytes_per_memory"] > 0


def test_ingest_texts_are_distinct_memory_like_sentences_with_a_realistic_spread() -> None:
    """The ingest section's texts: distinct, the same on every run, as long as the shipped
    statements, and under the bundled model almost never as similar as theta_S, where the
    placeholders "memory {i} topic {c}" put half of all pairs above it (every new memory then
    had thousands of semantic edge candidates, a graph no real store has)."""
    from scrubjay.bench.perf import Corpus, ingest_texts, text_similarity

    texts = ingest_texts(5_000)
    assert len(set(texts)) == 5_000 and texts == ingest_texts(5_000)
    assert ingest_texts(5_000, seed=1) != texts
    real = text_similarity(texts, 0.75, sample=1_000)
    placeholders = text_similarity(Corpus(1_000).texts, 0.75, sample=1_000)
    assert 45 < real["mean_chars"] < 80
    assert real["share_at_or_above_theta_s"] < 0.001
    assert placeholders["share_at_or_above_theta_s"] > 0.3
    assert real["cos_median"] < 0.2
    with pytest.raises(ValueError):
        ingest_texts(2_030 * 2_030 + 1)
