"""An optional LLM judge for TGT (``--judge llm``), with the heuristic judge as its fallback.

The model is shown the question, the ground-truth value and the answer, and returns strict JSON
``{"contains_value": bool, "judges_valid": bool}``:

- ``contains_value`` replaces the heuristic :func:`~scrubjay.bench.tgt_scoring.factual_correct`.
- ``judges_valid`` replaces the validity judgement only of systems whose judgement is in their
  answer text (the LLM systems, :data:`TEXT_JUDGED_SYSTEMS`). Retrieval systems answer with a
  memory text and give their judgement as a flag, which the judge cannot see and does not
  override.

A failed call or a malformed reply (not strict JSON, missing keys, non-boolean values) falls back
to the heuristic judge for that answer and is counted in :attr:`LLMJudge.fallbacks`. Verdicts are
cached per (question, value, answer) within a run.
"""

from __future__ import annotations

from typing import Any

from scrubjay.bench.llm_systems import as_client
from scrubjay.bench.systems import LLM_SYSTEM_NAMES
from scrubjay.bench.tgt_scoring import QueryResult, factual_correct
from scrubjay.errors import LLMError
from scrubjay.llm import parse_json_object

__all__ = ["JUDGES", "JUDGE_PROMPT", "TEXT_JUDGED_SYSTEMS", "LLMJudge"]

JUDGES = ("heuristic", "llm")
"""Judges the TGT runner accepts."""

TEXT_JUDGED_SYSTEMS = frozenset(LLM_SYSTEM_NAMES)
"""Systems whose validity judgement is read from their answer text."""

JUDGE_PROMPT = (
    "You grade an answer to a question about a person. Return strict JSON: "
    '{{"contains_value": bool, "judges_valid": bool}}. contains_value: whether the answer '
    "states the ground-truth value (same meaning; rewording is fine). judges_valid: false if "
    "the answer says the information is stale, outdated, may have changed or cannot be "
    "confirmed, else true.\nQuestion: {question}\nGround-truth value: {value}\n"
    "Answer: {answer}"
)


class LLMJudge:
    """Grades TGT answers with a chat model; heuristic fallback on malformed replies."""

    name = "llm"

    def __init__(self, llm: Any) -> None:
        self.client = as_client(llm)
        self.calls = 0
        self.fallbacks = 0
        self._cache: dict[tuple[str, str, str], tuple[bool, bool] | None] = {}

    def verdict(self, question: str, value: str, answer: str) -> tuple[bool, bool] | None:
        """``(contains_value, judges_valid)`` from the model, or None on a failure."""
        key = (question, value, answer)
        if key not in self._cache:
            self.calls += 1
            prompt = JUDGE_PROMPT.format(question=question, value=value, answer=answer)
            try:
                obj = parse_json_object(self.client.complete(prompt))
                got = obj.get("contains_value"), obj.get("judges_valid")
                if not all(isinstance(x, bool) for x in got):
                    raise LLMError(f"The judge's JSON needs two booleans. Got {obj!r}.")
                self._cache[key] = (bool(got[0]), bool(got[1]))
            except LLMError as err:
                self.client.note_parse_failure(err)
                self._cache[key] = None
        return self._cache[key]

    def judge(self, result: QueryResult, *, text_judged: bool) -> QueryResult:
        """``result`` with the judge's factual verdict (and validity, if ``text_judged``)."""
        v = self.verdict(result.query.text, result.query.answer_value, result.answer_text)
        if v is None:
            self.fallbacks += 1
            return QueryResult(query=result.query, answer_text=result.answer_text,
                               judged_valid=result.judged_valid,
                               factual=factual_correct(result.answer_text,
                                                       result.query.answer_value))
        contains, valid = v
        return QueryResult(query=result.query, answer_text=result.answer_text,
                           judged_valid=valid if text_judged else result.judged_valid,
                           factual=contains)
