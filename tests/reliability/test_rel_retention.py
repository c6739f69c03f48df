"""Retention: a protected memory is never removed by consolidation.

Whatever its utility (RCI driven its value to 0, it is ephemeral and decades old, it has no
graph neighbours), a memory with ``metadata={"protected": True}`` or a label in
``RetentionPolicy.protected_labels`` survives every ``consolidate``. Unprotected memories in the
same situation are removed, so the test would notice a consolidation that never prunes.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scrubjay import (
    ClassifierConfig,
    ConsolidationConfig,
    GraphConfig,
    RetentionPolicy,
    ScrubJayConfig,
    ScrubJayMemory,
)
from scrubjay.testing import FrozenClock, HashEmbedder

EXAMPLES = int(os.environ.get("SCRUBJAY_RETENTION_EXAMPLES", "40"))
T0 = 1_764_000_000.0
YEAR = 365 * 86_400.0
TEXTS = ["I am parked on level 3 right now", "the standup moved to 10 today",
         "my sister lives in Oslo", "how to reset the router: hold the button",
         "the meeting is in room 4 this afternoon", "the user is allergic to shellfish"]


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(plan=st.lists(st.tuples(st.sampled_from(TEXTS), st.booleans(),
                               st.floats(min_value=0, max_value=30 * YEAR)),
                     min_size=1, max_size=12),
       rci_hits=st.integers(min_value=0, max_value=4),
       years_later=st.floats(min_value=0, max_value=100),
       protect_label=st.sampled_from([None, "ephemeral", "task_specific", "factual"]),
       no_graph=st.booleans())
def test_protected_memories_survive_any_consolidation(plan, rci_hits, years_later,
                                                      protect_label, no_graph) -> None:
    policy = RetentionPolicy(protected_labels=frozenset({protect_label}) if protect_label
                             else frozenset())
    cfg = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"),
                         consolidation=ConsolidationConfig(retention=policy),
                         graph=GraphConfig(max_neighbors=0) if no_graph else GraphConfig())
    clock = FrozenClock(T0)
    with ScrubJayMemory(embedder=HashEmbedder(), clock=clock, config=cfg) as mem:
        recs = mem.add_many([{"text": text, "at": T0 - age, "metadata": {"protected": prot}}
                             for text, prot, age in plan])
        for _ in range(rci_hits):  # drive values down (invalidating cue words)
            for text in {t for t, _, _ in plan}:
                mem.integrate(f"{text} is no longer true, cancelled", store=False)
        protected = {r.id for r in recs
                     if r.metadata["protected"] is True or r.label == protect_label}
        clock.advance(years_later * YEAR)
        for _ in range(2):
            removed = set(mem.consolidate())
            assert not removed & protected
        assert protected <= {r.id for r in mem}


def test_unprotected_twins_are_removed_but_protected_ones_stay() -> None:
    cfg = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"),
                         graph=GraphConfig(max_neighbors=0))
    clock = FrozenClock(T0)
    with ScrubJayMemory(embedder=HashEmbedder(), clock=clock, config=cfg) as mem:
        kept = mem.add("I am parked on level 3 right now", metadata={"protected": True})
        gone = mem.add("I am parked on level 5 right now", metadata={"protected": False})
        truthy = mem.add("I am parked on level 7 right now", metadata={"protected": "yes"})
        for _ in range(3):
            for level in (3, 5, 7):
                mem.integrate(f"I am parked on level {level} right now: no longer", store=False)
        assert mem.get(kept.id).value < 1.0
        clock.advance(50 * YEAR)
        removed = mem.consolidate()
        assert kept.id not in removed and kept.id in mem
        # only the literal True protects: a truthy string is not a retention flag
        assert gone.id in removed and truthy.id in removed
