"""Scenario benchmark: is the memory a person wants now ranked first, and the outdated ones flagged?

Three hand-written test timelines ship as package data (``scrubjay/bench/data/scenarios/``):
a personal assistant over four weeks, a work assistant, a trip. Three training timelines,
written apart from them in other domains (``scenarios_train/``: a family home, a university
term, a freelancer's month), are loaded with ``split="train"``: constants are chosen on them by
cross-validation, never on the test figures. Each is a list of events in time order. A
**memory** event carries its text, time and context and, written next to it before any system
was run, its ground truth: the ``slot`` it fills (parking, today's Wi-Fi, the job ...), the
memories it ``supersedes`` and, when the text states one, the time its window ``ends_at``.
A **question** event, asked at its own time, names the memory a person wants ``want`` and the
memories that are ``outdated`` then (superseded, or past their window):
:func:`check_timeline` verifies that ``outdated`` is exactly what the memories' annotations
imply.

Each system sees the events in order: memories are added at their time, questions are asked at
theirs and answered with the top ``TOP_K`` memories. A question **passes** when the wanted memory
is first AND every outdated memory in the top ``TOP_K`` is flagged stale (a system without a
stale flag flags none). Reported per timeline and overall: the pass share, current@1 (wanted
first), the stale-flagged rate (outdated memories in the top ``TOP_K`` that are flagged, over
all outdated memories there) and the false-stale rate (questions whose wanted memory is in the
top ``TOP_K`` but flagged stale: a system flagging everything would otherwise look perfect).
Two diagnostics tell relevance failures from time failures: slot@1 (the first memory is about
the question's slot, current or not) and outdated-first (an outdated memory is first).

Systems: ``SJ-add`` (:class:`~scrubjay.ScrubJayMemory` through its public API: ``add_many`` with
``at`` = the memory's time, ``search`` with ``at`` = the question's time), ``SJ-integrate`` (the
same, with ``integrate()`` instead of the add for the memories that update a slot, i.e. those
with a non-empty ``supersedes``: what a caller who knows "this is an update" would do), two
ablations of the add (``SJ-add-learned``: ``SupersessionConfig(detector="learned")``;
``SJ-add-nosup``: supersession on add off) and the
baselines of :mod:`scrubjay.bench.systems` (default: ``B3-dense``, ``B2-bm25``,
``B5-dense-recency``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from scrubjay.bench.common import environment, get_embedder, md_table, pct, write_json
from scrubjay.bench.systems import SYSTEM_NAMES, MemoryItem, close_system, make_system

__all__ = ["DEFAULT_SCENARIO_SYSTEMS", "QUICK_QUESTIONS", "SCENARIO_NAMES", "SJ_MODES", "TOP_K",
           "TRAIN_SCENARIO_NAMES", "QuestionScore", "ScenarioMemory", "ScenarioQuestion",
           "ScrubJayTimelineSystem",
           "Timeline", "check_timeline", "load_timeline", "load_timelines", "outdated_at",
           "run_scenario", "scenario_markdown", "score_question", "summarise", "truncate",
           "write_scenario"]

TOP_K = 3
"""How many hits each question looks at (chosen: what an assistant shows or reads)."""

SCENARIO_NAMES = ("personal", "work", "trip")
"""The shipped test timelines, in report order."""

TRAIN_SCENARIO_NAMES = ("household", "student", "freelance")
"""The shipped training timelines (``scrubjay/bench/data/scenarios_train/*.json``), written
apart from the test ones in other domains: constants are chosen on them by cross-validation,
never on the test figures."""

_SPLITS = {"test": ("scenarios", SCENARIO_NAMES), "train": ("scenarios_train",
                                                             TRAIN_SCENARIO_NAMES)}

SJ_MODES = ("SJ-add", "SJ-integrate", "SJ-add-learned", "SJ-add-nosup")
"""ScrubJay-MEM with plain adds, and with ``integrate()`` for the memories that update a slot."""

DEFAULT_SCENARIO_SYSTEMS = (*SJ_MODES, "B3-dense", "B2-bm25", "B5-dense-recency")
"""ScrubJay-MEM in both modes; flat dense, BM25, and dense with one global recency decay
(the one baseline here with a stale flag)."""

QUICK_QUESTIONS = 6
"""Questions per timeline in the reduced size (``--quick``): the events up to the sixth."""


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioMemory:
    """A memory event and the ground truth written beside it."""

    id: str
    at_s: float
    text: str
    context: str = ""
    slot: str
    """What it is about (one value at a time: today's parking spot, the current job ...)."""
    supersedes: tuple[str, ...] = ()
    """Earlier memories of the same slot it replaces."""
    ends_at_s: float | None = None
    """When the window its text states ends (today's password: midnight), if it states one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioQuestion:
    """A question event: what a person wants at ``at_s`` and what is outdated then."""

    id: str
    at_s: float
    text: str
    context: str = ""
    want: str
    outdated: tuple[str, ...] = ()


Event = ScenarioMemory | ScenarioQuestion


@dataclass(frozen=True, kw_only=True, slots=True)
class Timeline:
    """One scenario: its events in time order."""

    name: str
    title: str = ""
    events: tuple[Event, ...] = ()

    @property
    def memories(self) -> list[ScenarioMemory]:
        return [e for e in self.events if isinstance(e, ScenarioMemory)]

    @property
    def questions(self) -> list[ScenarioQuestion]:
        return [e for e in self.events if isinstance(e, ScenarioQuestion)]


def _epoch(stamp: str) -> float:
    """An ISO-8601 time with its zone (``...Z``) as epoch seconds."""
    t = datetime.fromisoformat(stamp)
    if t.tzinfo is None:
        raise ValueError(f"The time {stamp!r} of a scenario event must carry its zone (Z).")
    return t.timestamp()


def _event(raw: dict[str, Any]) -> Event:
    kind = raw.get("kind")
    mid, at_s, text = str(raw["id"]), _epoch(raw["at"]), str(raw["text"])
    context = str(raw.get("context", ""))
    if kind == "memory":
        ends = raw.get("ends_at")
        return ScenarioMemory(id=mid, at_s=at_s, text=text, context=context,
                              slot=str(raw["slot"]),
                              supersedes=tuple(raw.get("supersedes", ())),
                              ends_at_s=_epoch(ends) if ends else None)
    if kind == "question":
        return ScenarioQuestion(id=mid, at_s=at_s, text=text, context=context,
                                want=str(raw["want"]), outdated=tuple(raw.get("outdated", ())))
    raise ValueError(f"The 'kind' of scenario event {raw.get('id')!r} must be 'memory' or "
                     f"'question'. Got {kind!r} instead.")


def load_timeline(source: str | Path | dict[str, Any]) -> Timeline:
    """A timeline from a JSON file, or from its already-parsed content."""
    raw = source if isinstance(source, dict) else json.loads(Path(source).read_text())
    return Timeline(name=str(raw["name"]), title=str(raw.get("title", "")),
                    events=tuple(_event(e) for e in raw["events"]))


def load_timelines(names: Iterable[str] | None = None, *, split: str = "test") -> list[Timeline]:
    """The shipped timelines of ``split`` (``"test"``: :data:`SCENARIO_NAMES`, ``"train"``:
    :data:`TRAIN_SCENARIO_NAMES`) called ``names`` (default: all of that split)."""
    if split not in _SPLITS:
        raise ValueError(f"The scenario split must be one of {tuple(_SPLITS)}. Got {split!r} "
                         "instead.")
    folder, allowed = _SPLITS[split]
    base = resources.files("scrubjay.bench").joinpath("data", folder)
    out = []
    for name in allowed if names is None else names:
        if name not in allowed:
            raise ValueError(f"The {split} scenario names must be among {allowed}. Got "
                             f"{name!r} instead.")
        out.append(load_timeline(json.loads(base.joinpath(f"{name}.json").read_text())))
    return out


def outdated_at(timeline: Timeline, at_s: float, slot: str) -> set[str]:
    """The memories of ``slot`` recorded by ``at_s`` that are outdated then, by the annotations:
    superseded by a memory recorded by ``at_s``, or past the end of their stated window."""
    known = [m for m in timeline.memories if m.at_s <= at_s]
    replaced = {old for m in known for old in m.supersedes}
    return {m.id for m in known if m.slot == slot and (
        m.id in replaced or (m.ends_at_s is not None and m.ends_at_s <= at_s))}


def check_timeline(timeline: Timeline) -> list[str]:
    """Every way the timeline's ground truth contradicts itself (empty when it is sound).

    Events in time order, unique ids; each question's wanted and outdated memories exist and
    were recorded before it; the wanted one is not outdated; ``outdated`` is exactly
    :func:`outdated_at` for the wanted memory's slot; a memory supersedes only earlier memories
    of its own slot; a window ends after the memory was recorded.
    """
    problems: list[str] = []
    ids = [e.id for e in timeline.events]
    if len(set(ids)) != len(ids):
        problems.append(f"{timeline.name}: duplicate ids")
    times = [e.at_s for e in timeline.events]
    if times != sorted(times):
        problems.append(f"{timeline.name}: events not in time order")
    mems = {m.id: m for m in timeline.memories}
    for m in mems.values():
        for old in m.supersedes:
            o = mems.get(old)
            if o is None or o.at_s >= m.at_s or o.slot != m.slot:
                problems.append(f"{m.id}: supersedes {old!r}, not an earlier memory of its slot")
        if m.ends_at_s is not None and m.ends_at_s <= m.at_s:
            problems.append(f"{m.id}: its window ends before it was recorded")
    for q in timeline.questions:
        named = (q.want, *q.outdated)
        missing = [i for i in named if i not in mems or mems[i].at_s >= q.at_s]
        if missing:
            problems.append(f"{q.id}: {missing} not recorded before the question")
            continue
        expected = outdated_at(timeline, q.at_s, mems[q.want].slot)
        if q.want in expected:
            problems.append(f"{q.id}: the wanted memory {q.want!r} is outdated then")
        if set(q.outdated) != expected:
            problems.append(f"{q.id}: outdated {sorted(q.outdated)} but the annotations "
                            f"imply {sorted(expected)}")
    return problems


def truncate(timeline: Timeline, n_questions: int) -> Timeline:
    """The timeline's events up to its ``n_questions``-th question (the reduced size)."""
    events: list[Event] = []
    seen = 0
    for e in timeline.events:
        if seen >= n_questions:
            break
        events.append(e)
        seen += isinstance(e, ScenarioQuestion)
    return Timeline(name=timeline.name, title=timeline.title, events=tuple(events))


# ---------------------------------------------------------------------------------------------
# Scoring (pure)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class QuestionScore:
    """How one answer fared."""

    passed: bool
    """Wanted memory first, and every outdated memory in the top k flagged stale."""
    current_at_1: bool
    outdated_in_top: int
    outdated_flagged: int
    want_flagged_stale: bool
    """The wanted memory is in the top k but flagged stale."""
    outdated_first: bool
    """An outdated memory is ranked first (the time went wrong)."""
    slot_first: bool
    """The first memory is about the question's slot, current or not (the relevance went
    right): with ``current_at_1`` and ``outdated_first`` it tells relevance failures from
    time failures."""


def score_question(ranking: Sequence[str], stale: Sequence[bool], want: str,
                   outdated: Iterable[str], k: int = TOP_K,
                   slot_ids: Iterable[str] = ()) -> QuestionScore:
    """Score one ranked answer (ids best first, with each one's stale flag).

    ``slot_ids``: the memories of the wanted memory's slot recorded so far (for
    :attr:`QuestionScore.slot_first`; the wanted and outdated ones count in any case).

    >>> s = score_question(["new", "old"], [False, True], "new", ["old"])
    >>> s.passed, s.outdated_in_top, s.outdated_flagged
    (True, 1, 1)
    >>> score_question(["new", "old"], [False, False], "new", ["old"]).passed
    False
    >>> score_question(["new", "x", "y", "old"], [False] * 4, "new", ["old"]).passed
    True
    """
    top, flags = list(ranking[:k]), list(stale[:k])
    old = set(outdated)
    in_top = [flag for mid, flag in zip(top, flags, strict=True) if mid in old]
    first = bool(top) and top[0] == want
    want_stale = any(flag for mid, flag in zip(top, flags, strict=True) if mid == want)
    same_slot = {want, *old, *slot_ids}
    return QuestionScore(passed=first and all(in_top), current_at_1=first,
                         outdated_in_top=len(in_top), outdated_flagged=sum(in_top),
                         want_flagged_stale=want_stale,
                         outdated_first=bool(top) and top[0] in old,
                         slot_first=bool(top) and top[0] in same_slot)


def summarise(scores: Sequence[QuestionScore]) -> dict[str, Any]:
    """Shares over a list of question scores (NaN where a share has no denominator)."""
    n = len(scores)
    in_top = sum(s.outdated_in_top for s in scores)
    nan = float("nan")
    return {"n_questions": n,
            "passed": sum(s.passed for s in scores) / n if n else nan,
            "current@1": sum(s.current_at_1 for s in scores) / n if n else nan,
            "outdated_in_top": in_top,
            "stale_flagged": sum(s.outdated_flagged for s in scores) / in_top if in_top else nan,
            "false_stale": sum(s.want_flagged_stale for s in scores) / n if n else nan,
            "outdated_first": sum(s.outdated_first for s in scores) / n if n else nan,
            "slot@1": sum(s.slot_first for s in scores) / n if n else nan}


# ---------------------------------------------------------------------------------------------
# Systems
# ---------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class ScrubJayTimelineSystem:
    """:class:`~scrubjay.ScrubJayMemory` driven through its public API along a timeline.

    ``remember`` adds a memory at its time (``add_many`` with the event's id) or, with
    ``integrate=True``, runs ``integrate(text, context, at, store=True)`` and remembers the id
    the stored memory got. ``ask`` searches at the question's time. A frozen clock follows the
    events (never moved backwards, so an as-of probe is a search with an earlier ``at``).
    """

    embedder: Any
    config: Any = None
    ids: dict[str, str] = field(default_factory=dict)
    """Stored id -> event id (they differ for memories stored by ``integrate``)."""

    def __post_init__(self) -> None:
        from scrubjay import ScrubJayMemory
        from scrubjay.testing import FrozenClock

        self.clock = FrozenClock(0.0)
        self.mem = ScrubJayMemory(embedder=self.embedder, config=self.config, clock=self.clock)

    def _tick(self, at_s: float) -> None:
        self.clock.set(max(self.clock(), at_s))

    def remember(self, memory_id: str, text: str, context: str, at_s: float, *,
                 integrate: bool = False) -> None:
        self._tick(at_s)
        if integrate:
            report = self.mem.integrate(text, context=context, at=at_s, store=True)
            if report.stored is not None:
                self.ids[report.stored.id] = memory_id
            return
        self.mem.add_many([{"id": memory_id, "text": text, "context": context, "at": at_s}])
        self.ids[memory_id] = memory_id

    def remember_many(self, items: Sequence[MemoryItem]) -> None:
        """Plain adds of several memories in one batch."""
        if not items:
            return
        self._tick(max(m.created_at_s for m in items))
        self.mem.add_many([{"id": m.id, "text": m.text, "context": m.context,
                            "at": m.created_at_s} for m in items])
        self.ids.update({m.id: m.id for m in items})

    def ask(self, query: str, context: str, at_s: float, k: int) -> list[tuple[str, bool]]:
        """``(event id, stale)`` of the top ``k`` memories, best first."""
        self._tick(at_s)
        hits = self.mem.search(query, context=context, k=k, at=at_s)
        return [(self.ids.get(h.id, h.id), bool(h.stale)) for h in hits]

    def close(self) -> None:
        self.mem.close()


def _answers(name: str, timeline: Timeline, embedder: Any) -> list[list[tuple[str, bool]]]:
    """Run one system along one timeline: each question's top ``TOP_K`` (id, stale flag)."""
    out: list[list[tuple[str, bool]]] = []
    if name in SJ_MODES:
        from scrubjay import ScrubJayConfig, SupersessionConfig

        sup = {"SJ-add-learned": SupersessionConfig(detector="learned"),
               "SJ-add-nosup": SupersessionConfig(enabled=False)}.get(name)
        sj = ScrubJayTimelineSystem(
            embedder=embedder, config=ScrubJayConfig(supersession=sup) if sup else None)
        try:
            for e in timeline.events:
                if isinstance(e, ScenarioMemory):
                    sj.remember(e.id, e.text, e.context, e.at_s,
                                integrate=name == "SJ-integrate" and bool(e.supersedes))
                else:
                    out.append(sj.ask(e.text, e.context, e.at_s, TOP_K))
        finally:
            sj.close()
        return out
    system = make_system(name, embedder, seed=0)
    try:
        for e in timeline.events:
            if isinstance(e, ScenarioMemory):
                system.index([MemoryItem(e.id, e.text, e.context, e.at_s)])
            else:
                out.append([(a.id, not a.judged_valid)
                            for a in system.answer(e.text, e.at_s, k=TOP_K)])
    finally:
        close_system(system)
    return out


# ---------------------------------------------------------------------------------------------
# Runner and report
# ---------------------------------------------------------------------------------------------


def run_scenario(*, systems: Sequence[str] = DEFAULT_SCENARIO_SYSTEMS,
                 embedder: Any = "wordllama", quick: bool = False,
                 timelines: Sequence[Timeline] | None = None, split: str = "test",
                 progress: bool = True) -> dict[str, Any]:
    """Run every system along every timeline; returns JSON-ready results.

    ``quick`` keeps each timeline's events up to its :data:`QUICK_QUESTIONS`-th question.
    ``split`` chooses the shipped timelines when ``timelines`` is not given: ``"test"`` (the
    reported figures) or ``"train"`` (for choosing constants by cross-validation).
    """
    from tqdm import tqdm

    unknown = [s for s in systems if s not in SJ_MODES + SYSTEM_NAMES]
    if unknown:
        raise ValueError(f"unknown scenario systems {unknown}; known: "
                         f"{', '.join(SJ_MODES + SYSTEM_NAMES)}")
    tls = list(timelines) if timelines is not None else load_timelines(split=split)
    if quick:
        tls = [truncate(t, QUICK_QUESTIONS) for t in tls]
    for t in tls:
        problems = check_timeline(t)
        if problems:
            raise ValueError(f"timeline {t.name!r} is inconsistent: {problems}")
    emb = get_embedder(embedder)
    t_start = time.perf_counter()
    results: dict[str, Any] = {}
    bar = tqdm(total=len(systems) * len(tls), desc="scenario", disable=not progress)
    for name in systems:
        t0 = time.perf_counter()
        per_tl: dict[str, Any] = {}
        every: list[QuestionScore] = []
        for tl in tls:
            answers = _answers(name, tl, emb)
            slot_of = {m.id: m.slot for m in tl.memories}
            scores = [score_question([a[0] for a in ans], [a[1] for a in ans], q.want,
                                     q.outdated, slot_ids=[i for i, _ in ans
                                                           if slot_of.get(i) == slot_of[q.want]])
                      for ans, q in zip(answers, tl.questions, strict=True)]
            every += scores
            per_tl[tl.name] = {**summarise(scores), "questions": [
                {"id": q.id, "want": q.want, "outdated": list(q.outdated),
                 "top": [{"id": i, "stale": s} for i, s in ans], "passed": sc.passed,
                 "slot_first": sc.slot_first, "outdated_first": sc.outdated_first}
                for q, ans, sc in zip(tl.questions, answers, scores, strict=True)]}
            bar.update(1)
        results[name] = {"overall": summarise(every), "timelines": per_tl,
                         "seconds": time.perf_counter() - t0}
    bar.close()
    return {"benchmark": "scenario", "split": split if timelines is None else "given",
            "quick": quick, "top_k": TOP_K, "embedder": emb.name,
            "timelines": {t.name: {"title": t.title, "n_memories": len(t.memories),
                                   "n_questions": len(t.questions)} for t in tls},
            "environment": environment(), "seconds_total": time.perf_counter() - t_start,
            "systems": results}


def scenario_markdown(res: dict[str, Any]) -> str:
    """The Markdown report of :func:`run_scenario`."""
    names = list(res["timelines"])
    n_q = sum(t["n_questions"] for t in res["timelines"].values())
    n_m = sum(t["n_memories"] for t in res["timelines"].values())
    k = res["top_k"]
    rows = []
    for name, r in res["systems"].items():
        o = r["overall"]
        rows.append([name, pct(o["passed"]), pct(o["current@1"]), pct(o["slot@1"]),
                     pct(o["outdated_first"]),
                     f"{pct(o['stale_flagged'])} ({o['outdated_in_top']})",
                     pct(o["false_stale"]),
                     *[pct(r["timelines"][t]["passed"]) for t in names]])
    split = " (training split)" if res.get("split") == "train" else ""
    head = (f"Scenario timelines{split}{' (quick)' if res['quick'] else ''}: {len(names)} "
            "timelines, "
            f"{n_m} memories, {n_q} questions; embedder {res['embedder']}. A question passes "
            f"when the wanted memory is first and every outdated memory in the top {k} is "
            "flagged stale. slot@1: the first memory is about the right thing, current or not; "
            "outdated first: an outdated memory is first. stale-flagged: outdated memories in "
            f"the top {k} flagged stale (their number in brackets); false stale: questions whose wanted memory is in the top {k} "
            "but flagged stale. Target for ScrubJay-MEM: passed >= 90%.\n\n")
    table = md_table(["system", "passed %", "current@1 %", "slot@1 %", "outdated first %",
                      "stale-flagged %", "false stale %",
                      *[f"passed % ({t}, {res['timelines'][t]['n_questions']} q)"
                        for t in names]], rows)
    return head + table + f"\n\nRun time {res['seconds_total']:.0f} s.\n"


def write_scenario(res: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write ``scenario.md`` and ``scenario.json`` into ``out_dir``; a run on the training
    split writes ``scenario-train.md`` and ``scenario-train.json``, so that it never
    overwrites the test report in the same folder."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "scenario-train" if res.get("split") == "train" else "scenario"
    paths = {"md": out_dir / f"{stem}.md", "json": out_dir / f"{stem}.json"}
    paths["md"].write_text(scenario_markdown(res))
    write_json(paths["json"], res)
    return paths
