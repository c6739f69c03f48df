"""Temporal Generalization Test (TGT): a deterministic, seeded generator (template mode).

TGT (paper §4.2 and Appendix B) asks whether a memory system knows, at query time, if
a stored fact is still valid. Each *instance* has its own pool of memories, all created
in session 0, and 66 queries issued at five retention intervals I1..I5 (two of them,
I3 and I5, held out). A query's ground truth is the target memory's attribute value and
a validity bit taken from a type x interval schedule.

Time unit
---------
Intervals are given in *sessions*; the generator works in seconds. One session is
``SESSION_LENGTH_S = 86_400`` seconds (one day). The paper never states a session
length; one day is chosen because the paper's own stale-distractor example is "the
user's location 'today' is no longer current because the session is one day later"
(App. B.4). Every time in this module is ``created_at_s + offset_sessions * 86_400``.

What a system may see
---------------------
:class:`TGTInstance` holds the full ground truth (type, category, pi/tau, validity).
A system under test must only be given :func:`system_view`, which keeps memory id,
text, context and creation time, and query id, text and time. Memory order, memory ids
and the checkpoint tags are shuffled so that position does not reveal the type;
queries are sorted by time for the same reason.

Reconstructions and choices (the extracted paper lost several tables)
---------------------------------------------------------------------
- Validity schedule (Table 5 missing): A valid at I1-I2, B at I1-I3, C at I1-I4,
  D at I1-I5, the staircase consistent with the paper's audit (42 of 60 base queries
  valid, 63.6% always-valid floor, no stale base query at I1 or I2).
- pi ranges follow Table 6 as given in the project brief; tau ranges are chosen (see
  ``TYPE_SPECS``).
- Vocabulary *sizes* follow App. B.6; the words themselves did not survive extraction
  and are chosen here (``_tgt_templates.py``). Three small pools are not in the paper's
  list and are marked there.
- Checkpoint tags keep the paper's surface form ``P{pool_id}-{type_id}{index}`` but, by
  default, the ``{type_id}`` slot is a shuffled block letter (K, L, M, N) rather than
  the memory type, because the literal form would print the hidden label into the
  text a system reads. ``TGTConfig(reveal_type_in_checkpoint=True)`` restores it.

Examples
--------
>>> instances = generate(TGTConfig(n_instances=1, seed=0))
>>> len(instances[0].memories), len(instances[0].queries)
(96, 66)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scrubjay.bench._tgt_templates import (
    CATEGORY_BY_KEY,
    FUTURE_TASKS,
    NAMES,
    OFFICE_AREAS,
    PROJECT_CODENAMES,
)

__all__ = [
    "CATEGORY_KEYS",
    "DEFAULT_INTERVALS",
    "FORMAT_VERSION",
    "FUTURE_TASKS",
    "MEMORY_TYPES",
    "QUERY_KINDS",
    "SESSION_LENGTH_S",
    "TYPE_SPECS",
    "VALIDITY_SCHEDULE",
    "RetentionInterval",
    "SystemView",
    "TGTConfig",
    "TGTInstance",
    "TGTMemory",
    "TGTQuery",
    "TypeSpec",
    "VisibleMemory",
    "VisibleQuery",
    "export_json",
    "generate",
    "load_json",
    "main",
    "strip_checkpoint",
    "system_view",
]

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------

SESSION_LENGTH_S = 86_400
"""Length of one session in seconds (chosen: one day; see the module docstring)."""

T0_S = 1_767_225_600.0
"""Default start of session 0 in UTC epoch seconds (chosen: 2026-01-01T00:00:00Z)."""

CREATION_WINDOW_S = 4 * 3_600
"""All memories are created within this many seconds of t0 (chosen: one morning's
conversation, well inside session 0)."""

FORMAT_NAME = "scrubjay-tgt"
"""Identifier written into exported JSON files."""

FORMAT_VERSION = 1
"""Version of the exported JSON layout; :func:`load_json` refuses other versions."""

MEMORY_TYPES = ("A", "B", "C", "D")
"""Perishability classes, most to least perishable (paper App. B.1)."""

QUERY_KINDS = ("factual", "staleness", "prospective")
"""The three query templates of App. B.3, in the paper's order."""

QUERY_TEMPLATES = {
    "factual": "What is {subject}'s {attribute}?",
    "staleness": "Has {subject}'s {attribute} changed recently?",
    "prospective": "What should I remember about {subject}'s {attribute} for {future_task}?",
}
"""Query templates, verbatim from App. B.3 (``attribute_label`` renamed ``attribute``)."""

CHECKPOINT_TEMPLATE = "This was logged in checkpoint P{pool_id}-{type_id}{index:02d}."
"""Checkpoint sentence appended to every memory (App. B.5; two-digit index chosen)."""

CHECKPOINT_BLOCKS = ("K", "L", "M", "N")
"""Letters used in the checkpoint's type slot when the type is masked (chosen: letters
that cannot be mistaken for the type labels A-D)."""

CHECKPOINT_RE = re.compile(r"\s*This was logged in checkpoint P\d+-[A-Z]\d+\.\s*$")
"""Matches the checkpoint sentence at the end of a memory text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionInterval:
    """A retention interval in sessions (paper App. B.2, Table 7).

    Parameters
    ----------
    name : str
        ``"I1"`` .. ``"I5"``.
    lo_sessions, hi_sessions : float
        Query offsets are drawn uniformly from ``[lo_sessions, hi_sessions)``.
    held_out : bool
        True for intervals never available for calibration (I3, I5).
    """

    name: str
    lo_sessions: float
    hi_sessions: float
    held_out: bool

    def __post_init__(self) -> None:
        if not 0.0 <= self.lo_sessions < self.hi_sessions:
            raise ValueError(
                f"The 'lo_sessions' and 'hi_sessions' parameters of RetentionInterval must "
                f"satisfy 0 <= lo < hi. Got ({self.lo_sessions}, {self.hi_sessions}) instead."
            )


DEFAULT_INTERVALS = (
    RetentionInterval(name="I1", lo_sessions=0.0, hi_sessions=1.0, held_out=False),
    RetentionInterval(name="I2", lo_sessions=3.0, hi_sessions=5.0, held_out=False),
    RetentionInterval(name="I3", lo_sessions=8.0, hi_sessions=12.0, held_out=True),
    RetentionInterval(name="I4", lo_sessions=20.0, hi_sessions=25.0, held_out=False),
    RetentionInterval(name="I5", lo_sessions=40.0, hi_sessions=60.0, held_out=True),
)
"""The five intervals of App. B.2 / SPEC §10."""

VALIDITY_SCHEDULE = (
    ("A", ("I1", "I2")),
    ("B", ("I1", "I2", "I3")),
    ("C", ("I1", "I2", "I3", "I4")),
    ("D", ("I1", "I2", "I3", "I4", "I5")),
)
"""Intervals at which a memory of each type is valid (SPEC §10 reconstruction of the
missing Table 5; consistent with the 42/60 valid base queries of App. B.9)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeSpec:
    """Ground-truth description of one perishability class.

    Parameters
    ----------
    type_id : str
        ``"A"`` .. ``"D"``.
    name : str
        Human name of the class.
    categories : tuple of str
        The five categories of the class (App. B.1).
    pi_range : tuple of float
        Uniform range of the true perishability coefficient pi (Table 6).
    tau_range_sessions : tuple of float
        Uniform range of the true utility horizon tau, in sessions.
    """

    type_id: str
    name: str
    categories: tuple[str, ...]
    pi_range: tuple[float, float]
    tau_range_sessions: tuple[float, float]


# pi ranges: paper Table 6 (as quoted in the project brief).
# tau ranges: chosen (Table 6's tau column is lost); each spans from the upper end of the
# last interval at which the type is valid to the lower end of the first interval at which
# it is not, so that exp(-pi * dt / tau) ranks the schedule correctly. D has no invalid
# interval; its range starts at I5's upper end.
TYPE_SPECS = (
    TypeSpec(
        type_id="A",
        name="ephemeral",
        categories=(
            "current_location",
            "todays_plan",
            "transient_mood",
            "immediate_context",
            "real_time_status",
        ),
        pi_range=(0.80, 0.95),
        tau_range_sessions=(5.0, 8.0),
    ),
    TypeSpec(
        type_id="B",
        name="session-specific",
        categories=(
            "project_decision",
            "meeting_outcome",
            "recent_preference_shift",
            "active_bug",
            "short_term_goal",
        ),
        pi_range=(0.55, 0.75),
        tau_range_sessions=(12.0, 20.0),
    ),
    TypeSpec(
        type_id="C",
        name="durable preference",
        categories=(
            "food_preference",
            "communication_style",
            "tool_preference",
            "working_hours",
            "aesthetic_preference",
        ),
        pi_range=(0.15, 0.35),
        tau_range_sessions=(25.0, 40.0),
    ),
    TypeSpec(
        type_id="D",
        name="stable knowledge",
        categories=("occupation", "location", "long_term_goal", "family_info", "education"),
        pi_range=(0.02, 0.10),
        tau_range_sessions=(60.0, 120.0),
    ),
)
"""The taxonomy of App. B.1 with ground-truth pi/tau ranges."""

CATEGORY_KEYS = tuple(c for spec in TYPE_SPECS for c in spec.categories)
"""All twenty category keys, grouped by type."""


# ---------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TGTConfig:
    """Configuration of the TGT generator (template mode).

    Parameters
    ----------
    n_instances : int
        Number of instances, each with its own memory pool (App. B.5: 20 pools for
        20 instances).
    memories_per_type : int
        Memories per perishability class in each pool (24, App. B.11). At most 60, so
        that every (subject, category) pair in a pool is distinct.
    seed : int
        Seed; instance ``i`` draws from ``SeedSequence([seed, i])``, so the first
        instances do not depend on ``n_instances``.
    session_length_s : float
        Seconds per session (``SESSION_LENGTH_S``).
    t0_s : float
        UTC epoch seconds at which session 0 starts.
    intervals : tuple of RetentionInterval
        Retention intervals (``DEFAULT_INTERVALS``).
    validity_schedule : tuple of (str, tuple of str)
        For each type, the interval names at which it is valid (``VALIDITY_SCHEDULE``).
    n_stale_distractors : int
        Stale-distractor queries per instance (6, App. B.4). Distractor ``k`` has
        template ``QUERY_KINDS[k % 3]`` and interval
        ``stale_distractor_intervals[(k // 3) % len(...)]``; the three queries of one
        group of three share a target.
    stale_distractor_intervals : tuple of str
        Intervals receiving distractors (``("I1", "I2")``).
    reveal_type_in_checkpoint : bool
        If True, checkpoint tags carry the real type letter, as the paper's literal
        format does (this leaks the label into the text). Default False.
    """

    n_instances: int = 20
    memories_per_type: int = 24
    seed: int = 0
    session_length_s: float = SESSION_LENGTH_S
    t0_s: float = T0_S
    intervals: tuple[RetentionInterval, ...] = DEFAULT_INTERVALS
    validity_schedule: tuple[tuple[str, tuple[str, ...]], ...] = VALIDITY_SCHEDULE
    n_stale_distractors: int = 6
    stale_distractor_intervals: tuple[str, ...] = ("I1", "I2")
    reveal_type_in_checkpoint: bool = False

    def __post_init__(self) -> None:
        n_categories = len(TYPE_SPECS[0].categories)
        _check(self.n_instances >= 1, "n_instances", "an int >= 1", self.n_instances)
        _check(
            n_categories <= self.memories_per_type <= n_categories * len(NAMES),
            "memories_per_type",
            f"an int in [{n_categories}, {n_categories * len(NAMES)}]",
            self.memories_per_type,
        )
        _check(self.session_length_s > 0, "session_length_s", "> 0", self.session_length_s)
        _check(self.n_stale_distractors >= 0, "n_stale_distractors", ">= 0",
               self.n_stale_distractors)
        names = [iv.name for iv in self.intervals]
        _check(len(set(names)) == len(names) and len(names) > 0, "intervals",
               "a non-empty tuple with distinct names", names)
        schedule_types = [t for t, _ in self.validity_schedule]
        _check(sorted(schedule_types) == sorted(MEMORY_TYPES), "validity_schedule",
               f"one entry per type {MEMORY_TYPES}", schedule_types)
        for _, valid in self.validity_schedule:
            _check(set(valid) <= set(names), "validity_schedule",
                   f"interval names among {names}", valid)
        _check(set(self.stale_distractor_intervals) <= set(names)
               and (self.n_stale_distractors == 0 or len(self.stale_distractor_intervals) > 0),
               "stale_distractor_intervals", f"interval names among {names}",
               self.stale_distractor_intervals)

    def is_valid(self, type_id: str, interval: str) -> bool:
        """Return the schedule's validity of a ``type_id`` memory queried at ``interval``."""
        return interval in dict(self.validity_schedule)[type_id]


@dataclass(frozen=True, slots=True, kw_only=True)
class TGTMemory:
    """One memory of a pool, with its hidden ground truth.

    Parameters
    ----------
    memory_id : str
        Opaque id, ``p{pool}-m{position:03d}``; position is a shuffled order.
    text : str
        Templated sentence ending with the checkpoint sentence.
    context : str
        Where the memory came from (conversation or workspace); names no type.
    created_at_s : float
        Creation time, UTC epoch seconds, inside session 0.
    type_id, category : str
        Hidden: perishability class and category.
    subject, attribute, value : str
        Hidden slots: whose fact, which attribute (the noun phrase queries use), and
        the attribute value (a substring of ``text``).
    checkpoint : str
        The checkpoint tag, e.g. ``"P3-L07"``.
    true_pi, true_tau_sessions : float
        Hidden ground-truth decay parameters drawn from the type's ranges.
    """

    memory_id: str
    text: str
    context: str
    created_at_s: float
    type_id: str
    category: str
    subject: str
    attribute: str
    value: str
    checkpoint: str
    true_pi: float
    true_tau_sessions: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TGTQuery:
    """One query with its ground truth.

    Parameters
    ----------
    query_id : str
        Opaque id, ``p{pool}-q{rank:03d}`` where rank is the order by time.
    text : str
        The query text.
    time_s : float
        Query time, UTC epoch seconds: target creation time + offset.
    kind : str
        One of ``QUERY_KINDS``.
    interval : str
        Retention interval name.
    held_out : bool
        Whether the interval is held out.
    offset_sessions : float
        Sampled offset from the target's creation, in sessions.
    target_memory_id : str
        The memory holding the answer.
    type_id, category : str
        The target's class and category.
    answer_value : str
        Ground-truth answer (the target's attribute value).
    ground_truth_valid : bool
        Schedule validity, False for stale distractors.
    is_distractor : bool
        True for the stale-distractor queries of App. B.4.
    """

    query_id: str
    text: str
    time_s: float
    kind: str
    interval: str
    held_out: bool
    offset_sessions: float
    target_memory_id: str
    type_id: str
    category: str
    answer_value: str
    ground_truth_valid: bool
    is_distractor: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TGTInstance:
    """One TGT instance: a memory pool and its queries.

    Parameters
    ----------
    instance_id : int
        Index within the generated set.
    pool_id : int
        Memory pool id (one pool per instance, so equal to ``instance_id``).
    seed : int
        The generator seed.
    memories : tuple of TGTMemory
        Sorted by creation time (a shuffled order with respect to type).
    queries : tuple of TGTQuery
        Sorted by query time.
    """

    instance_id: int
    pool_id: int
    seed: int
    memories: tuple[TGTMemory, ...]
    queries: tuple[TGTQuery, ...]

    def memory(self, memory_id: str) -> TGTMemory:
        """Return the memory with id ``memory_id`` (``KeyError`` if absent)."""
        for m in self.memories:
            if m.memory_id == memory_id:
                return m
        raise KeyError(memory_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class VisibleMemory:
    """The part of a memory a system under test may see."""

    memory_id: str
    text: str
    context: str
    created_at_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class VisibleQuery:
    """The part of a query a system under test may see."""

    query_id: str
    text: str
    time_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemView:
    """Everything a system under test is given for one instance."""

    instance_id: int
    memories: tuple[VisibleMemory, ...]
    queries: tuple[VisibleQuery, ...]


# ---------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------


def generate(config: TGTConfig | None = None) -> list[TGTInstance]:
    """Generate TGT instances in template mode.

    Parameters
    ----------
    config : TGTConfig, optional
        Generator settings; the defaults give the paper's 20 x (96 memories, 66 queries).

    Returns
    -------
    list of TGTInstance
        ``config.n_instances`` instances. The result is a pure function of ``config``.

    Notes
    -----
    Per instance: for each category, distinct subjects are drawn without replacement,
    so every (subject, category) pair, and so every memory text, is unique. For each
    type, target memories are drawn from a shuffled order of the type's memories, one per
    (interval, type) pair, without replacement across intervals and distractor groups
    (the pool is re-shuffled only once exhausted, App. B.5). Each query draws its own
    offset uniformly in its interval: ``time_s = created_at_s + offset * session_length_s``.
    """
    config = TGTConfig() if config is None else config
    instances = [_generate_instance(config, i) for i in range(config.n_instances)]
    logger.debug("generated %d TGT instances (seed=%d)", len(instances), config.seed)
    return instances


@dataclass(frozen=True, slots=True, kw_only=True)
class _Draft:
    """A memory before its shuffled position is known (private)."""

    type_id: str
    type_index: int
    category: str
    subject: str
    attribute: str
    value: str
    body: str
    context: str
    true_pi: float
    true_tau_sessions: float


def _generate_instance(config: TGTConfig, index: int) -> TGTInstance:
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, index]))
    pool_id = index
    drafts = [d for spec in TYPE_SPECS for d in _draft_type(rng, spec, config.memories_per_type)]

    # Shuffle positions so that memory id, checkpoint block, creation order and list
    # order carry no information about the type.
    n = len(drafts)
    position = rng.permutation(n)
    offsets = np.sort(rng.uniform(0.0, CREATION_WINDOW_S, size=n))
    memories: list[TGTMemory | None] = [None] * n
    by_draft: list[TGTMemory] = []
    for k, draft in enumerate(drafts):
        pos = int(position[k])
        if config.reveal_type_in_checkpoint:
            block, idx = draft.type_id, draft.type_index
        else:
            block = CHECKPOINT_BLOCKS[pos // config.memories_per_type]
            idx = pos % config.memories_per_type
        tag = CHECKPOINT_TEMPLATE.format(pool_id=pool_id, type_id=block, index=idx)
        mem = TGTMemory(
            memory_id=f"p{pool_id}-m{pos:03d}",
            text=f"{draft.body} {tag}",
            context=draft.context,
            created_at_s=round(config.t0_s + float(offsets[pos]), 3),
            type_id=draft.type_id,
            category=draft.category,
            subject=draft.subject,
            attribute=draft.attribute,
            value=draft.value,
            checkpoint=tag.removeprefix("This was logged in checkpoint ").rstrip("."),
            true_pi=draft.true_pi,
            true_tau_sessions=draft.true_tau_sessions,
        )
        memories[pos] = mem
        by_draft.append(mem)

    queries = _make_queries(rng, config, pool_id, by_draft)
    return TGTInstance(
        instance_id=index,
        pool_id=pool_id,
        seed=config.seed,
        memories=tuple(m for m in memories if m is not None),
        queries=queries,
    )


def _draft_type(rng: np.random.Generator, spec: TypeSpec, count: int) -> list[_Draft]:
    """Draft ``count`` memories of one type, spread evenly over its categories."""
    n_cat = len(spec.categories)
    extra = set(rng.permutation(n_cat)[: count % n_cat].tolist())
    drafts: list[_Draft] = []
    for c, key in enumerate(spec.categories):
        cat = CATEGORY_BY_KEY[key]
        n_here = count // n_cat + (1 if c in extra else 0)
        subjects = rng.choice(len(NAMES), size=n_here, replace=False)
        for s_idx in subjects:
            subject = NAMES[int(s_idx)]
            v_idx = int(rng.integers(len(cat.values)))
            alt_idx = (v_idx + 1 + int(rng.integers(len(cat.values) - 1))) % len(cat.values)
            codename = PROJECT_CODENAMES[int(rng.integers(len(PROJECT_CODENAMES)))]
            area = OFFICE_AREAS[int(rng.integers(len(OFFICE_AREAS)))]
            ctx_template = cat.contexts[int(rng.integers(len(cat.contexts)))]
            slots = {
                "s": subject,
                "v": cat.values[v_idx],
                "alt": cat.values[alt_idx],
                "codename": codename,
                "area": area,
            }
            drafts.append(
                _Draft(
                    type_id=spec.type_id,
                    type_index=len(drafts),
                    category=key,
                    subject=subject,
                    attribute=cat.attribute,
                    value=cat.values[v_idx],
                    body=cat.template.format(**slots),
                    context=ctx_template.format(**slots),
                    true_pi=round(float(rng.uniform(*spec.pi_range)), 6),
                    true_tau_sessions=round(float(rng.uniform(*spec.tau_range_sessions)), 6),
                )
            )
    return drafts


def _target_stream(rng: np.random.Generator, pool: Sequence[TGTMemory]) -> Iterator[TGTMemory]:
    """Yield targets without replacement, re-shuffling only when the pool is exhausted."""
    while True:
        for k in rng.permutation(len(pool)):
            yield pool[int(k)]


def _make_queries(
    rng: np.random.Generator,
    config: TGTConfig,
    pool_id: int,
    memories: Sequence[TGTMemory],
) -> tuple[TGTQuery, ...]:
    streams = {
        t: _target_stream(rng, [m for m in memories if m.type_id == t]) for t in MEMORY_TYPES
    }
    intervals = {iv.name: iv for iv in config.intervals}
    raw: list[dict[str, Any]] = []

    def add(target: TGTMemory, iv: RetentionInterval, kind: str, distractor: bool) -> None:
        offset = float(rng.uniform(iv.lo_sessions, iv.hi_sessions))
        future_task = FUTURE_TASKS[int(rng.integers(len(FUTURE_TASKS)))]
        text = QUERY_TEMPLATES[kind].format(
            subject=target.subject, attribute=target.attribute, future_task=future_task
        )
        raw.append(
            {
                "text": text,
                "time_s": round(target.created_at_s + offset * config.session_length_s, 3),
                "kind": kind,
                "interval": iv.name,
                "held_out": iv.held_out,
                "offset_sessions": offset,
                "target_memory_id": target.memory_id,
                "type_id": target.type_id,
                "category": target.category,
                "answer_value": target.value,
                "ground_truth_valid": (
                    False if distractor else config.is_valid(target.type_id, iv.name)
                ),
                "is_distractor": distractor,
            }
        )

    for type_id in MEMORY_TYPES:
        for iv in config.intervals:
            target = next(streams[type_id])
            for kind in QUERY_KINDS:
                add(target, iv, kind, distractor=False)

    # Stale distractors (App. B.4): groups of up to three queries (one per kind) sharing
    # a fresh Type-A target, the groups cycling over the distractor intervals.
    n_kinds = len(QUERY_KINDS)
    for group in range(-(-config.n_stale_distractors // n_kinds)):
        target = next(streams["A"])
        name = config.stale_distractor_intervals[group % len(config.stale_distractor_intervals)]
        n_here = min(n_kinds, config.n_stale_distractors - group * n_kinds)
        for kind in QUERY_KINDS[:n_here]:
            add(target, intervals[name], kind, distractor=True)

    raw.sort(key=lambda q: (q["time_s"], q["text"]))
    return tuple(
        TGTQuery(query_id=f"p{pool_id}-q{rank:03d}", **q) for rank, q in enumerate(raw)
    )


# ---------------------------------------------------------------------------
# Views, persistence
# ---------------------------------------------------------------------------


def strip_checkpoint(text: str) -> str:
    """Return a memory text without its trailing checkpoint sentence.

    >>> strip_checkpoint("Leo's home city is Osaka. This was logged in checkpoint P0-K03.")
    "Leo's home city is Osaka."
    """
    return CHECKPOINT_RE.sub("", text)


def system_view(instance: TGTInstance) -> SystemView:
    """Return what a system under test may see of ``instance``.

    Memories keep id, text, context and creation time; queries keep id, text and time.
    Type, category, validity, pi/tau, interval and answers are dropped.
    """
    return SystemView(
        instance_id=instance.instance_id,
        memories=tuple(
            VisibleMemory(
                memory_id=m.memory_id, text=m.text, context=m.context, created_at_s=m.created_at_s
            )
            for m in instance.memories
        ),
        queries=tuple(
            VisibleQuery(query_id=q.query_id, text=q.text, time_s=q.time_s)
            for q in instance.queries
        ),
    )


def _config_to_json(config: TGTConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def export_json(
    instances: Sequence[TGTInstance], path: str | Path, *, config: TGTConfig | None = None
) -> None:
    """Write ``instances`` (with full ground truth) to ``path`` as one JSON file.

    Parameters
    ----------
    instances : sequence of TGTInstance
        The frozen benchmark.
    path : str or Path
        Destination file.
    config : TGTConfig, optional
        Recorded for provenance only.
    """
    payload = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "config": None if config is None else _config_to_json(config),
        "instances": [dataclasses.asdict(inst) for inst in instances],
    }
    Path(path).write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")


def load_json(path: str | Path) -> list[TGTInstance]:
    """Read instances written by :func:`export_json`.

    Raises
    ------
    ValueError
        If the file is not a TGT file of version ``FORMAT_VERSION``.
    """
    payload = json.loads(Path(path).read_text(encoding="utf-8"))
    if payload.get("format") != FORMAT_NAME or payload.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"The file {str(path)!r} must be a {FORMAT_NAME!r} file of format_version "
            f"{FORMAT_VERSION}. Got format={payload.get('format')!r}, "
            f"format_version={payload.get('format_version')!r} instead."
        )
    return [
        TGTInstance(
            instance_id=d["instance_id"],
            pool_id=d["pool_id"],
            seed=d["seed"],
            memories=tuple(TGTMemory(**m) for m in d["memories"]),
            queries=tuple(TGTQuery(**q) for q in d["queries"]),
        )
        for d in payload["instances"]
    ]


def _check(ok: bool, name: str, expected: str, got: object) -> None:
    if not ok:
        raise ValueError(
            f"The {name!r} parameter of TGTConfig must be {expected}. Got {got!r} instead."
        )


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Generate a TGT set, write it as JSON and print its audit table.

    ``python -m scrubjay.bench.tgt --seed 0 --out tgt_seed0.json``

    Returns 0 if every required audit check passes, 1 otherwise.
    """
    from scrubjay.bench.tgt_scoring import audit, format_audit  # scoring imports this module

    parser = argparse.ArgumentParser(prog="python -m scrubjay.bench.tgt", description=main.__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--n-instances", type=int, default=20)
    parser.add_argument("--reveal-type-in-checkpoint", action="store_true")
    args = parser.parse_args(argv)
    config = TGTConfig(
        seed=args.seed,
        n_instances=args.n_instances,
        reveal_type_in_checkpoint=args.reveal_type_in_checkpoint,
    )
    instances = generate(config)
    export_json(instances, args.out, config=config)
    report = audit(instances, config=config)
    sys.stdout.write(format_audit(report) + "\n")
    sys.stdout.write(f"wrote {args.out}\n")
    return 0 if report.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
