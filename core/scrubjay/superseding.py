"""Supersession on add: which older memories a batch of new ones replaces, and the marks.

After a batch is stored, each new memory is compared with its nearest memories by what-cosine
(``SupersessionConfig.candidates`` of them, from :meth:`Backend.nearest`; the batch's own
earlier items are among them, since the batch is stored already). The offline detector
(:func:`scrubjay.supersession.score_candidates`) judges each pair:

* a candidate told before the new memory (or at the same time, earlier in the batch) is
  superseded by the new one when the detector says so;
* a candidate told *after* it (a memory added late, with an ``at`` in the past) supersedes the
  new one under the same rule, the roles swapped, so the order of the adds does not matter;
* a memory already superseded keeps its first replacement.

With a chat model and ``SupersessionConfig.confirm``, every pair scoring at least the model's
``llm_floor`` goes into ONE prompt for the whole batch, and the model's answers decide; when it
fails, times out or answers badly, the offline decision (score at least ``threshold``) is kept.

A superseded memory keeps its row: it gets ``superseded_by`` (the replacing memory's id) and
``invalidated_at_s`` (the replacing memory's time), so it is stale with the reason
"superseded" from then on, and an as-of search before then still sees it as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from .config import ScrubJayConfig
from .errors import LLMError, ScrubJayError
from .llm import LLMClient
from .mirror import Rows
from .supersession import (
    DEFAULT_MODEL,
    Statement,
    Supersession,
    SupersessionModel,
    build_confirmation_prompt,
    confirm_or_fallback,
    detect_supersessions,
    score_candidates,
)
from .types import MemoryRecord
from .update_model import UpdateModel, default_update_model

if TYPE_CHECKING:
    from .backends import Backend

__all__ = ["Mark", "detector", "replaced_rows", "supersede_batch", "supersede_stored"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Mark:
    """``old`` is superseded by ``new``, for ``reason`` (the detector's, or the model's)."""

    old: str
    new: str
    at_s: float
    """The replacing memory's time: the old one's ``invalidated_at_s``."""
    reason: str
    score: float


# a pair to judge: (the later memory, the earlier one)
_Pair = tuple[Statement, Statement]


def _statement(rec: MemoryRecord, what: NDArray[np.float32] | None) -> Statement:
    return Statement(id=rec.id, text=rec.text, what=what, recorded_at_s=rec.created_at_s)


def _pairs(records: Sequence[MemoryRecord], what: NDArray[np.float32],
           nearest: Sequence[Rows]) -> list[_Pair]:
    """The (later, earlier) pairs a batch asks about, each once."""
    order = {r.id: i for i, r in enumerate(records)}
    seen: set[tuple[str, str]] = set()
    out: list[_Pair] = []
    for i, (rec, rows) in enumerate(zip(records, nearest, strict=True)):
        new = _statement(rec, what[i])
        for j, cand in enumerate(rows.records):
            if cand.id == rec.id:
                continue
            k = order.get(cand.id)
            later_in_batch = k is not None and k > i
            if cand.created_at_s < rec.created_at_s or (
                    cand.created_at_s == rec.created_at_s and not later_in_batch):
                pair = (new, _statement(cand, rows.what[j]))
            elif k is None:  # a stored memory told after this one
                pair = (_statement(cand, rows.what[j]), new)
            else:
                continue  # the later batch item asks about this pair itself
            key = (pair[0].id, pair[1].id)
            if key not in seen:
                seen.add(key)
                out.append(pair)
    return out


def detector(config: ScrubJayConfig) -> SupersessionModel | UpdateModel:
    """The offline detector ``config.supersession.detector`` names."""
    return default_update_model() if config.supersession.detector == "learned" \
        else DEFAULT_MODEL


def replaced_rows(id: str, text: str, what: NDArray[np.float32], at_s: float, rows: Rows,
                  config: ScrubJayConfig) -> NDArray[np.bool_]:
    """Which of ``rows`` the offline detector judges the statement ``text`` (told at ``at_s``)
    to replace (told before it, the same slot, a new value): the rows an RCI event without a
    cue word updates."""
    new = Statement(id=id, text=text, what=what, recorded_at_s=at_s)
    model = detector(config)
    hits = detect_supersessions(new, [_statement(r, rows.what[j])
                                      for j, r in enumerate(rows.records)], model=model)
    ids = {h.old_id for h in hits}
    return np.array([r.id in ids for r in rows.records], dtype=bool)


def _decide(pairs: list[_Pair], llm: LLMClient | None, config: ScrubJayConfig
            ) -> list[tuple[_Pair, Supersession]]:
    """The pairs that are supersessions, offline or confirmed by the chat model."""
    model = detector(config)
    floor = model.llm_floor if llm is not None and config.supersession.confirm \
        else model.threshold
    # one score_candidates per new memory: it reads the new memory's claim once
    olds: dict[str, dict[str, Statement]] = {}
    news: dict[str, Statement] = {}
    for new, old in pairs:
        news[new.id] = new
        olds.setdefault(new.id, {})[old.id] = old
    proposals: dict[str, list[tuple[Statement, Supersession, _Pair]]] = {}
    for nid, by_id in olds.items():
        new = news[nid]
        for hit in score_candidates(new, list(by_id.values()), model=model):
            if hit.score >= floor:
                old = by_id[hit.old_id]
                proposals.setdefault(nid, []).append((old, hit, (new, old)))
    if not proposals:
        return []
    order = list(proposals)
    if llm is None or not config.supersession.confirm:
        return [(pair, hit) for nid in order for _, hit, pair in proposals[nid]]
    batch = [(news[nid], [(old, hit) for old, hit, _ in proposals[nid]]) for nid in order]
    reply: str | None
    try:
        reply = llm.complete(build_confirmation_prompt(batch))
    except LLMError as err:
        logger.debug("supersession confirmation failed, offline decision kept: %s", err)
        reply = None
    decisions, why = confirm_or_fallback(reply, batch, model=model)
    if why is not None and reply is not None:
        llm.note_parse_failure(LLMError(why))
    out: list[tuple[_Pair, Supersession]] = []
    for nid, kept in zip(order, decisions, strict=True):
        by_old = {hit.old_id: hit for hit in kept}
        out.extend((pair, by_old[old.id]) for old, _, pair in proposals[nid]
                   if old.id in by_old)
    return out


def supersede_batch(records: Sequence[MemoryRecord], what: NDArray[np.float32],
                    nearest: Sequence[Rows], known: dict[str, MemoryRecord],
                    llm: LLMClient | None, config: ScrubJayConfig
                    ) -> tuple[list[MemoryRecord], list[Mark]]:
    """``(records to rewrite, marks)`` for a stored batch: each superseded memory with its
    ``superseded_by`` and ``invalidated_at_s`` set (a memory already superseded, or replaced
    twice, keeps its earliest replacement).

    ``nearest`` holds each new record's nearest stored memories (:meth:`Backend.nearest`);
    ``known`` maps ids to their current records (the batch and those rows).
    """
    decided = _decide(_pairs(records, what, nearest), llm, config)
    best: dict[str, Mark] = {}
    for (new, old), hit in decided:
        mark = Mark(old=old.id, new=new.id, at_s=new.recorded_at_s, reason=hit.reason,
                    score=hit.score)
        prev = best.get(old.id)
        if prev is None or (mark.at_s, mark.new) < (prev.at_s, prev.new):
            best[old.id] = mark
    changed: list[MemoryRecord] = []
    marks: list[Mark] = []
    for old_id in sorted(best):
        rec = known.get(old_id)
        mark = best[old_id]
        if rec is None or (rec.superseded_by is not None and rec.invalidated_at_s is not None
                           and rec.invalidated_at_s <= mark.at_s):
            continue
        changed.append(replace(rec, superseded_by=mark.new, invalidated_at_s=mark.at_s))
        marks.append(mark)
    return changed, marks


def supersede_stored(backend: Backend, records: list[MemoryRecord], what: NDArray[np.float32],
                     llm: LLMClient | None, config: ScrubJayConfig) -> list[MemoryRecord]:
    """Mark the memories a stored batch replaces (:func:`supersede_batch` over the batch's
    nearest memories) in ``backend``; returns the batch's records as they now are (a
    late-told one may be superseded itself)."""
    nearest = backend.nearest(what, config.supersession.candidates + 1)
    known = {r.id: r for rows in nearest for r in rows.records}
    known.update((r.id, r) for r in records)
    changed, _ = supersede_batch(records, what, nearest, known, llm, config)
    if not changed:
        return records
    try:
        backend.mark(changed)
    except ScrubJayError as err:
        err.add_note(f"The {len(records)} new memories are stored; marking the "
                     f"{len(changed)} older ones they replace failed. Adding the same "
                     f"memories again (with their ids) marks them.")
        raise
    updated = {r.id: r for r in changed}
    return [updated.get(r.id, r) for r in records]
