"""The scenario timelines (their ground truth), the scenario runner and the as-of probes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from scrubjay.bench.run_asof import (
    Probe,
    make_probes,
    quick_subset,
    run_asof,
    score_probes,
)
from scrubjay.bench.run_factconsolidation import T0_S, memory_id_of
from scrubjay.bench.run_scenario import (
    QUICK_QUESTIONS,
    SCENARIO_NAMES,
    TRAIN_SCENARIO_NAMES,
    ScenarioMemory,
    check_timeline,
    load_timeline,
    load_timelines,
    outdated_at,
    run_scenario,
    scenario_markdown,
    score_question,
    truncate,
)
from scrubjay.testing import HashEmbedder

REPO = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO / "core" / "scrubjay" / "bench" / "data" / "scenarios"
TRAIN_DIR = SCENARIO_DIR.with_name("scenarios_train")
EVERY_TIMELINE = [("test", n) for n in SCENARIO_NAMES] + [("train", n)
                                                          for n in TRAIN_SCENARIO_NAMES]
DATA_CANDIDATES = (REPO.parent / "shared" / "benchmarks", Path("/work/shared/benchmarks"))
DATA = next((p for p in DATA_CANDIDATES
             if (p / "factconsolidation_sh" / "sh_6k_gt.json").exists()), None)
needs_data = pytest.mark.skipif(DATA is None, reason="shared/benchmarks not beside the repo")


# --------------------------------------------------------------------- the shipped timelines
def _raw(name: str, split: str = "test") -> dict[str, Any]:
    folder = TRAIN_DIR if split == "train" else SCENARIO_DIR
    data: dict[str, Any] = json.loads((folder / f"{name}.json").read_text())
    return data


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    w = _words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def test_three_timelines_with_at_least_100_questions() -> None:
    assert sorted(p.stem for p in SCENARIO_DIR.glob("*.json")) == sorted(SCENARIO_NAMES)
    tls = load_timelines()
    assert [t.name for t in tls] == list(SCENARIO_NAMES)
    assert sum(len(t.questions) for t in tls) >= 100
    for t in tls:
        assert len(t.questions) >= 30 and len(t.memories) >= 30
        # most questions test supersession or an ended window, some test coexisting facts
        with_outdated = sum(bool(q.outdated) for q in t.questions)
        assert 0.4 * len(t.questions) <= with_outdated < len(t.questions)


def test_training_timelines_are_separate_and_do_not_leak_test_text() -> None:
    assert sorted(p.stem for p in TRAIN_DIR.glob("*.json")) == sorted(TRAIN_SCENARIO_NAMES)
    train = load_timelines(split="train")
    assert [t.name for t in train] == list(TRAIN_SCENARIO_NAMES)
    assert len(train) >= 3 and sum(len(t.questions) for t in train) >= 100
    for t in train:
        assert len(t.questions) >= 35 and len(t.memories) >= 30
        with_outdated = sum(bool(q.outdated) for q in t.questions)
        assert 0.4 * len(t.questions) <= with_outdated < len(t.questions)
    # no text of a training timeline equals, or shares five words in a row with, a test one
    test_texts = {e.text for t in load_timelines() for e in t.events}
    test_grams = set().union(*(_ngrams(x, 5) for x in test_texts))
    for t in train:
        for e in t.events:
            assert e.text not in test_texts, (t.name, e.id)
            assert not _ngrams(e.text, 5) & test_grams, (t.name, e.id)


def test_load_timelines_checks_the_split_and_its_names() -> None:
    assert [t.name for t in load_timelines(["student"], split="train")] == ["student"]
    with pytest.raises(ValueError, match="split must be one of"):
        load_timelines(split="validation")
    with pytest.raises(ValueError, match="train scenario names must be among"):
        load_timelines(["personal"], split="train")
    with pytest.raises(ValueError, match="test scenario names must be among"):
        load_timelines(["household"])


@pytest.mark.parametrize(("split", "name"), EVERY_TIMELINE)
def test_every_named_memory_exists_and_was_recorded_before_the_question(split: str,
                                                                        name: str) -> None:
    # read from the raw JSON, independently of the loader
    events = _raw(name, split)["events"]
    recorded: dict[str, str] = {}
    for e in events:
        assert e["kind"] in ("memory", "question")
        assert e["at"].endswith("Z")
        if e["kind"] == "memory":
            assert e["id"] not in recorded
            recorded[e["id"]] = e["at"]
            continue
        for mid in (e["want"], *e.get("outdated", ())):
            assert mid in recorded, (e["id"], mid)
            assert recorded[mid] < e["at"], (e["id"], mid)  # same zone: ISO order is time order
        assert e["want"] not in e.get("outdated", ())
    stamps = [e["at"] for e in events]
    assert stamps == sorted(stamps)


@pytest.mark.parametrize(("split", "name"), EVERY_TIMELINE)
def test_ground_truth_is_consistent_with_the_memory_annotations(split: str, name: str) -> None:
    (tl,) = load_timelines([name], split=split)
    assert check_timeline(tl) == []


@pytest.mark.parametrize(("split", "name"), EVERY_TIMELINE)
def test_questions_do_not_copy_the_wanted_memory(split: str, name: str) -> None:
    (tl,) = load_timelines([name], split=split)
    mems = {m.id: m for m in tl.memories}
    for q in tl.questions:
        assert not _ngrams(q.text, 3) & _ngrams(mems[q.want].text, 3), q.id


def test_check_timeline_finds_broken_ground_truth() -> None:
    good = {"name": "x", "events": [
        {"kind": "memory", "id": "a", "at": "2026-01-01T08:00:00Z", "slot": "s", "text": "A"},
        {"kind": "memory", "id": "b", "at": "2026-01-02T08:00:00Z", "slot": "s",
         "supersedes": ["a"], "text": "B"},
        {"kind": "question", "id": "q", "at": "2026-01-02T09:00:00Z", "text": "Q",
         "want": "b", "outdated": ["a"]}]}
    assert check_timeline(load_timeline(good)) == []
    missing = json.loads(json.dumps(good))
    missing["events"][2]["outdated"] = []
    assert "imply ['a']" in check_timeline(load_timeline(missing))[0]
    future = json.loads(json.dumps(good))
    future["events"][2]["want"] = "c"
    assert "not recorded before" in check_timeline(load_timeline(future))[0]
    wants_old = json.loads(json.dumps(good))
    wants_old["events"][2].update(want="a", outdated=["a"])
    assert any("is outdated" in p for p in check_timeline(load_timeline(wants_old)))


def test_outdated_at_follows_supersession_and_windows() -> None:
    tl = load_timeline({"name": "x", "events": [
        {"kind": "memory", "id": "w1", "at": "2026-01-01T09:00:00Z", "slot": "wifi",
         "ends_at": "2026-01-02T00:00:00Z", "text": "password today is one"},
        {"kind": "memory", "id": "w2", "at": "2026-01-03T09:00:00Z", "slot": "wifi",
         "text": "password is two"}]})
    day = 86_400.0
    t1 = tl.memories[0].at_s
    assert outdated_at(tl, t1 + 3600, "wifi") == set()          # inside w1's window
    assert outdated_at(tl, t1 + day, "wifi") == {"w1"}          # w1's window has ended
    assert outdated_at(tl, t1 + day, "other") == set()
    assert isinstance(tl.memories[1], ScenarioMemory) and tl.memories[1].ends_at_s is None


# ---------------------------------------------------------------------------------- scoring
def test_score_question_hand_examples() -> None:
    # wanted first, the outdated one in the top 3 flagged: passes
    s = score_question(["new", "x", "old"], [False, False, True], "new", ["old"])
    assert (s.passed, s.current_at_1, s.outdated_in_top, s.outdated_flagged) == (True, True, 1, 1)
    # the outdated one not flagged: fails, though the wanted one is first
    s = score_question(["new", "old"], [False, False], "new", ["old"])
    assert (s.passed, s.current_at_1, s.outdated_flagged) == (False, True, 0)
    # the outdated one first (even flagged): fails
    s = score_question(["old", "new"], [True, False], "new", ["old"])
    assert (s.passed, s.current_at_1, s.outdated_first, s.slot_first) == (False, False, True,
                                                                         True)
    # another slot first: a relevance failure, not a time failure
    s = score_question(["other", "new"], [False, False], "new", ["old"])
    assert (s.current_at_1, s.outdated_first, s.slot_first) == (False, False, False)
    # a memory of the slot that is neither wanted nor outdated (tomorrow's hotel) counts
    assert score_question(["later"], [False], "new", [], slot_ids=["later"]).slot_first
    # an outdated memory beyond the top 3 does not count
    assert score_question(["new", "a", "b", "old"], [False] * 4, "new", ["old"]).passed
    # a wanted memory flagged stale still passes, but is counted as a false stale
    s = score_question(["new"], [True], "new", [])
    assert s.passed and s.want_flagged_stale
    assert not score_question([], [], "new", []).passed


TINY = {"name": "tiny", "title": "hand-built", "events": [
    {"kind": "memory", "id": "car-1", "at": "2026-01-05T08:00:00Z", "slot": "car",
     "text": "car on level two"},
    {"kind": "memory", "id": "kid", "at": "2026-01-05T08:05:00Z", "slot": "kid",
     "text": "daughter called Maya"},
    {"kind": "memory", "id": "car-2", "at": "2026-01-06T08:00:00Z", "slot": "car",
     "supersedes": ["car-1"], "text": "car moved to level five spot nine"},
    {"kind": "question", "id": "q1", "at": "2026-01-06T09:00:00Z", "text": "Maya daughter",
     "want": "kid"},
    {"kind": "question", "id": "q2", "at": "2026-01-06T10:00:00Z", "text": "level five",
     "want": "car-2", "outdated": ["car-1"]},
    {"kind": "question", "id": "q3", "at": "2026-01-06T11:00:00Z", "text": "level two",
     "want": "car-2", "outdated": ["car-1"]}]}


def test_runner_scores_a_tiny_timeline_with_a_known_answer() -> None:
    tl = load_timeline(TINY)
    assert check_timeline(tl) == []
    res = run_scenario(systems=("B2-bm25",), embedder=HashEmbedder(dim=32), timelines=[tl],
                       progress=False)
    o = res["systems"]["B2-bm25"]["overall"]
    # BM25: q1 ranks kid first (no outdated memory); q2 ranks car-2 first but car-1 is in the
    # top 3 and BM25 flags nothing; q3 ranks car-1 ("level two") first.
    assert o["n_questions"] == 3
    assert o["current@1"] == pytest.approx(2 / 3)
    assert o["passed"] == pytest.approx(1 / 3)
    assert o["outdated_in_top"] == 2 and o["stale_flagged"] == 0.0 and o["false_stale"] == 0.0
    assert o["outdated_first"] == pytest.approx(1 / 3) and o["slot@1"] == 1.0
    qs = res["systems"]["B2-bm25"]["timelines"]["tiny"]["questions"]
    assert [q["passed"] for q in qs] == [True, False, False]
    assert [q["top"][0]["id"] for q in qs] == ["kid", "car-2", "car-1"]


def test_runner_quick_on_the_shipped_timelines_reports_every_metric() -> None:
    res = run_scenario(embedder=HashEmbedder(dim=64), quick=True, progress=False)
    assert set(res["systems"]) == {"SJ-add", "SJ-integrate", "SJ-add-learned", "SJ-add-nosup",
                                   "B3-dense", "B2-bm25", "B5-dense-recency"}
    assert all(t["n_questions"] == QUICK_QUESTIONS for t in res["timelines"].values())
    for name, r in res["systems"].items():
        o = r["overall"]
        assert o["n_questions"] == QUICK_QUESTIONS * len(SCENARIO_NAMES)
        for key in ("passed", "current@1", "false_stale", "outdated_first", "slot@1"):
            assert 0.0 <= o[key] <= 1.0
        assert o["passed"] <= o["current@1"] <= o["slot@1"]
        assert o["current@1"] + o["outdated_first"] <= o["slot@1"] + 1e-9
        for tl_res in r["timelines"].values():  # the stored answers re-score to the verdicts
            for q in tl_res["questions"]:
                s = score_question([h["id"] for h in q["top"]], [h["stale"] for h in q["top"]],
                                   q["want"], q["outdated"])
                assert s.passed == q["passed"], (name, q["id"])
        if name.startswith("B"):  # no stale flag: nothing flagged
            assert o["false_stale"] == 0.0
            assert o["outdated_in_top"] == 0 or o["stale_flagged"] == 0.0


def test_runner_loads_the_training_split() -> None:
    # the split's plumbing only: which timelines ran, not how well
    res = run_scenario(systems=["B3-dense"], embedder=HashEmbedder(dim=32), quick=True,
                       split="train", progress=False)
    assert res["split"] == "train"
    assert list(res["timelines"]) == list(TRAIN_SCENARIO_NAMES)
    assert set(res["systems"]) == {"B3-dense"}
    assert set(res["systems"]["B3-dense"]["timelines"]) == set(TRAIN_SCENARIO_NAMES)
    assert res["systems"]["B3-dense"]["overall"]["n_questions"] == (
        QUICK_QUESTIONS * len(TRAIN_SCENARIO_NAMES))
    assert "training split" in scenario_markdown(res)


def test_truncate_keeps_the_events_up_to_the_nth_question() -> None:
    (tl,) = load_timelines(["trip"])
    short = truncate(tl, 2)
    assert len(short.questions) == 2 and short.events[-1] is short.questions[-1]
    assert short.events == tl.events[:len(short.events)]


# ---------------------------------------------------------------------------------- as-of
def test_probes_fall_between_and_after() -> None:
    probes = make_probes([{"question": "q", "old_seq": 2, "gt_seq": 6},
                          {"question": "control", "gt_seq": 3}], last_serial=9)
    assert [p.kind for p in probes] == ["between", "between", "after", "after"]
    t2, t6 = T0_S + 120, T0_S + 360
    assert all(t2 < p.at_s < t6 and p.expect == "fact-2" for p in probes[:2])
    assert all(p.at_s > t6 and p.expect == "fact-6" for p in probes[2:])
    r = score_probes(["fact-2", "fact-6", "fact-6", None], probes)
    assert (r["asof@1"], r["between@1"], r["after@1"]) == (0.5, 0.5, 0.5)
    assert score_probes([], [])["n_probes"] == 0
    assert score_probes(["a"], [Probe("q", 0.0, "a", "after")])["between@1"] != 0.0  # NaN


def _synthetic_facts() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    texts = ["the sky is green", "Alice works at Acme in Springfield near the river",
             "bread is made of flour", "the cat sleeps on the mat",
             "Alice works at Globex", "the moon orbits the earth"]
    facts = [{"serial": i, "fact": t} for i, t in enumerate(texts)]
    return facts, [{"question": "Alice works at which company?", "old_seq": 1, "gt_seq": 4},
                   {"question": "what is bread made of?", "gt_seq": 2}]


def test_asof_known_answer_on_synthetic_facts() -> None:
    facts, questions = _synthetic_facts()
    res = run_asof(facts=facts, questions=questions, embedder=HashEmbedder(dim=64),
                   progress=False)
    assert res["n_probes"] == 4 and res["n_pairs"] == 1
    dense, asof = res["systems"]["B3-dense"], res["systems"]["B3-dense-asof"]
    # the new fact is the closer one: flat dense always returns it, even before it was told;
    # hiding what was recorded after the probe gives the old one between, the new one after
    assert (dense["between@1"], dense["after@1"]) == (0.0, 1.0)
    assert (asof["between@1"], asof["after@1"], asof["asof@1"]) == (1.0, 1.0, 1.0)
    for name in ("SJ-add", "SJ-integrate"):
        assert 0.0 <= res["systems"][name]["asof@1"] <= 1.0


def test_asof_quick_subset_keeps_the_probed_facts() -> None:
    facts = [{"serial": i, "fact": f"fact {i}"} for i in range(100)]
    qs = [{"question": f"q{i}", "old_seq": i, "gt_seq": i + 50} for i in range(1, 20)]
    fs, sub = quick_subset(facts, qs, n_pairs=3)
    assert len(sub) == 3
    kept = {f["serial"] for f in fs}
    assert {1, 51, 2, 52, 3, 53} <= kept and len(kept) < 20
    assert memory_id_of(51) == "fact-51"


@needs_data
def test_asof_quick_on_factconsolidation_and_the_cli(tmp_path: Path) -> None:
    from scrubjay.cli import main

    out = tmp_path / "res"
    assert main(["bench", "asof", "--quick", "--data", str(DATA), "--out", str(out),
                 "--no-progress"]) == 0
    res = json.loads((out / "asof.json").read_text())
    assert res["quick"] and res["n_probes"] == 4 * res["n_pairs"] > 0
    assert set(res["systems"]) == {"SJ-add", "SJ-integrate", "B3-dense", "B3-dense-asof"}
    assert "as-of@1" in (out / "asof.md").read_text()


def test_scenario_cli_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scrubjay.cli import main

    out = tmp_path / "res"
    assert main(["bench", "scenario", "--quick", "--systems", "SJ-add,B2-bm25", "--out",
                 str(out), "--no-progress"]) == 0
    assert "| SJ-add |" in capsys.readouterr().out
    assert "{" not in (out / "scenario.md").read_text()  # every field formatted
    res = json.loads((out / "scenario.json").read_text())
    assert res["quick"] and set(res["systems"]) == {"SJ-add", "B2-bm25"}
    assert main(["bench", "scenario", "--systems", "nope", "--out", str(out)]) == 2
    assert res["split"] == "test"
    assert main(["bench", "asof", "--systems", "B2-bm25", "--quick", "--out", str(out),
                 "--data", str(tmp_path)]) == 2


def test_scenario_cli_passes_the_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import scrubjay.bench.run_scenario as rs
    from scrubjay.cli import main

    seen: list[str] = []
    real = rs.run_scenario

    def fake(**kw: Any) -> dict[str, Any]:  # the real runner, on a hash embedder
        seen.append(kw["split"])
        res: dict[str, Any] = real(**{**kw, "embedder": HashEmbedder(dim=32),
                                      "systems": ("B2-bm25",)})
        return res

    monkeypatch.setattr(rs, "run_scenario", fake)
    assert main(["bench", "scenario", "--quick", "--split", "train", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    assert seen == ["train"]
    assert json.loads((tmp_path / "scenario-train.json").read_text())["split"] == "train"
    assert not (tmp_path / "scenario.json").exists()  # the test report's name is not taken
    with pytest.raises(SystemExit):
        main(["bench", "scenario", "--split", "dev"])
