"""Supersession on every add: the older memory of a slot is marked, kept, and ranks below."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scrubjay import ScrubJayConfig, ScrubJayMemory, SupersessionConfig
from scrubjay.supersession import DEFAULT_MODEL, Statement, detect_supersessions
from scrubjay.testing import ScriptedLLM
from scrubjay.update_model import default_update_model

T0 = 1_700_000_000.0
DAY = 86_400.0


ON = ScrubJayConfig(supersession=SupersessionConfig(enabled=True))


def _mem(path: Path, **kwargs: object) -> ScrubJayMemory:
    kwargs.setdefault("config", ON)
    return ScrubJayMemory(path=path, namespace="alice", **kwargs)  # type: ignore[arg-type]


def test_a_paraphrased_job_change_supersedes_the_old_job(tmp_path: Path) -> None:
    with _mem(tmp_path / "s") as mem:
        old = mem.add("I work as a software engineer at Acme Corp", at=T0)
        new = mem.add("I changed jobs, I now work at Globex as a data engineer", at=T0 + DAY)
        got = mem.get(old.id)
        assert got.superseded_by == new.id
        assert got.invalidated_at_s == new.created_at_s
        assert mem.get(new.id).superseded_by is None
        hits = mem.search("where do I work?", k=2, at=T0 + 2 * DAY)
        assert [h.id for h in hits] == [new.id, old.id]
        assert hits[1].stale and hits[1].stale_reason == "superseded"
        assert not hits[0].stale


def test_the_mark_persists_and_the_old_memory_is_kept(tmp_path: Path) -> None:
    with _mem(tmp_path / "s") as mem:
        old = mem.add("I parked on level 2, spot B17", at=T0)
        new = mem.add("I parked on level 3, spot D3", at=T0 + DAY)
    with _mem(tmp_path / "s") as mem:
        assert len(mem) == 2
        assert mem.get(old.id).superseded_by == new.id
        # before the new memory was told, the old one was current
        before = mem.search("where did I park?", k=1, at=T0 + 60)
        assert [h.id for h in before] == [old.id] and not before[0].stale


def test_things_that_coexist_are_not_superseded(tmp_path: Path) -> None:
    with _mem(tmp_path / "s") as mem:
        tea = mem.add("I like tea", at=T0)
        coffee = mem.add("I like coffee", at=T0 + DAY)
        son = mem.add("My son is called Tom", at=T0 + 2 * DAY)
        mem.add("My other son is called Ben", at=T0 + 3 * DAY)
        assert all(mem.get(i).superseded_by is None for i in (tea.id, coffee.id, son.id))


def test_within_a_batch_and_out_of_order(tmp_path: Path) -> None:
    with _mem(tmp_path / "s") as mem:
        recs = mem.add_many([
            {"text": "The design review is in room 2.10", "at": T0, "id": "r1"},
            {"text": "The design review moved to room 2.20", "at": T0 + 3600, "id": "r2"},
        ])
        assert mem.get("r1").superseded_by == "r2"
        assert recs[0].superseded_by == "r2"  # add_many returns the records as they now are
        # a memory told earlier but added later is superseded by the stored newer one
        late = mem.add("I parked on level 4, spot A1", at=T0 + 10)
        mem.add("I parked on level 1, spot C9", at=T0 + 20)
        older = mem.add("I parked on level 6, spot E2", at=T0 + 5)
        assert older.superseded_by == late.id
        assert mem.get(late.id).superseded_by is not None


def test_on_by_default_off_switch_and_paper_config(tmp_path: Path) -> None:
    for i, (config, on) in enumerate((
            (ScrubJayConfig(), True),
            (ScrubJayConfig(supersession=SupersessionConfig(detector="learned")), True),
            (ScrubJayConfig(supersession=SupersessionConfig(enabled=False)), False),
            (ScrubJayConfig.paper(), False))):
        with _mem(tmp_path / f"s{i}", config=config) as mem:
            old = mem.add("The meeting is in room 1.14", at=T0)
            new = mem.add("the meeting moved to room 2.20", at=T0 + DAY)
            assert mem.get(old.id).superseded_by == (new.id if on else None)


def test_enumerations_of_one_template_are_not_replacements(tmp_path: Path) -> None:
    with _mem(tmp_path / "s") as mem:
        mem.add_many([{"text": f"a note {i} about topic {i % 4} and the project",
                       "at": T0 + i * 600.0, "id": f"a{i}"} for i in range(10)])
        assert all(r.superseded_by is None for r in mem)
        assert mem.search("note 3 about topic 3", k=1)[0].id == "a3"


ECHO = ("user: I am parked on level 3 right now\nassistant: user: I am parked on level 3 "
        "right now\nassistant: \nuser: My sister lives in Oslo\nassistant:")


@pytest.mark.parametrize(("old", "new", "replaces"), [
    # numbers after a word that numbers things name another thing, even in a slot's sentence
    ("My meeting is in room 4 on day 1", "My meeting is in room 4 on day 2", False),
    # a text quoting another (a chat turn echoed with its role) restates it
    ("I am parked on level 3 right now", ECHO, False),
    # two speakers' "I" are two people
    (("Melanie: Absolutely, Caroline! I cherish time with family. It's when I really feel "
     "alive and happy."), ("Caroline: I 100% agree, Mel. Hanging with loved ones is amazing and "
     "brings so much happiness."), False),
    # a passage of several sentences without a shared slot or an update cue is no update
    ("Caroline: Nah, I haven't. I've been busy painting - here's something I just finished.",
     "Caroline: Thanks, Melanie! I painted it after I visited the beach last week.", False),
    (("Melanie: Caroline, that's great! The blue's really powerful, huh? How'd you feel while "
     "painting it?"), ("Melanie: Wow, Caroline, that's great! Art's awesome for showing us who "
     "we really are."), False),
    # two passages: an update cue in one does not say which claim of the other it updates
    ("Sam: Great to hear from you! I finally finished the garden shed. It took three weekends.",
     "Sam: So much is new since we talked. I started a pottery class and it is great fun.",
     False),
    # a question states no value
    ("Melanie: Summer Sounds played an awesome pop song.", "Melanie: What music do you play?",
     False),
    # while a new value, or an update cue, still replaces
    ("Caroline: I'm planning to go to the support group on Friday.",
     "Caroline: I moved the support group visit to Saturday.", True),
    ("I parked on level 2", "I parked on level 3", True),
    ("The team lunch is on Thursday", "Change of plans! The team lunch moved to Friday.", True),
    ("I am parked on level 3 right now", "I moved the car, I am parked on level 5 now", True),
])
@pytest.mark.parametrize("detector", ["rules", "learned"])
def test_numbered_things_and_restatements_are_not_replacements(old: str, new: str,
                                                               replaces: bool,
                                                               detector: str) -> None:
    model = DEFAULT_MODEL if detector == "rules" else default_update_model()
    v = np.ones(8, np.float32)  # the worst case: the embedder calls them identical
    hits = detect_supersessions(Statement(id="n", text=new, what=v, recorded_at_s=2.0),
                                [Statement(id="o", text=old, what=v, recorded_at_s=1.0)],
                                model=model)
    assert bool(hits) is replaces


def _confirm(answer: bool) -> ScriptedLLM:
    def reply(prompt: str) -> str:
        if "NEW 0" not in prompt:  # annotation or classification: no usable answer
            return "not json"
        pairs = [line.split('"')[1] for line in prompt.splitlines()
                 if line.strip().startswith("OLD ")]
        return json.dumps({"decisions": [{"new": 0, "old": p, "supersedes": answer}
                                         for p in pairs]})
    return ScriptedLLM(reply)


@pytest.mark.parametrize("answer", [True, False])
def test_a_chat_model_confirms_in_one_call(tmp_path: Path, answer: bool) -> None:
    llm = _confirm(answer)
    with _mem(tmp_path / "s", llm=llm) as mem:
        old = mem.add("I parked on level 2, spot B17", at=T0)
        n_before = len(llm.prompts)
        mem.add("I parked on level 3, spot D3", at=T0 + DAY)
        asks = [p for p in llm.prompts[n_before:] if "NEW 0" in p]
        assert len(asks) == 1
        assert (mem.get(old.id).superseded_by is not None) is answer


def test_a_failing_chat_model_falls_back_to_the_offline_decision(tmp_path: Path) -> None:
    llm = ScriptedLLM([RuntimeError("down")])
    with _mem(tmp_path / "s", llm=llm) as mem:
        old = mem.add("I parked on level 2, spot B17", at=T0)
        new = mem.add("I parked on level 3, spot D3", at=T0 + DAY)
        assert mem.get(old.id).superseded_by == new.id


def test_invalid_config() -> None:
    from scrubjay.errors import ScrubJayError

    with pytest.raises(ScrubJayError):
        SupersessionConfig(candidates=-1)
