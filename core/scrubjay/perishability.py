"""Perishability classification ``phi(text, context) -> (label, pi, tau)`` (paper §3.2).

Two estimators:

* the chat model, with the paper's prompt (App. F.3) and strict JSON parsing; its numbers are
  clipped (``pi`` to ``[pi_min, 1]``, ``tau`` to ``[tau_min_s, tau_max_s]``) and an unknown label
  is a parse failure;
* the paper's keyword rule, offline and deterministic, used when no chat model is configured or
  when it fails. Keywords match whole words (``issue`` does not match ``tissue``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from .config import LABELS, ClassifierConfig
from .errors import LLMError
from .llm import CLASSIFY_PROMPT, LLMClient, finite_float, parse_json_object
from .types import Perishability

__all__ = ["keyword_classify", "parse_classification", "Classifier"]

logger = logging.getLogger(__name__)


@lru_cache(maxsize=64)
def _keyword_regex(keywords: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(k) for k in keywords)
    return re.compile(rf"\b(?:{alternatives})\b")


def keyword_classify(text: str, context: str, cos_what_where: float | None,
                     cfg: ClassifierConfig) -> Perishability:
    """The paper's keyword fallback (SPEC §2): first matching rule wins, else factual.

    ``cos_what_where`` is ``cos(w_what, w_where)``; for the default (factual) label it perturbs
    pi by ``context_perturbation_max * clip(1 - cos, 0, 1)`` when a context is given.

    >>> keyword_classify("Standup meeting moved to 10", "", None, ClassifierConfig()).label
    'task_specific'
    >>> p = keyword_classify("My sister lives in Oslo", "", None, ClassifierConfig())
    >>> (p.label, p.pi, p.tau_s / 86400)
    ('factual', 0.1, 45.0)
    """
    haystack = f"{text} {context}".lower()
    for rule in cfg.keyword_rules:
        if _keyword_regex(rule.keywords).search(haystack):
            return Perishability(label=rule.label, pi=rule.pi,
                                 tau_s=_clip(rule.tau_s, cfg.tau_min_s, cfg.tau_max_s),
                                 source="keyword")
    pi = cfg.default_pi
    if context.strip() and cos_what_where is not None:
        pi += cfg.context_perturbation_max * _clip(1.0 - cos_what_where, 0.0, 1.0)
    return Perishability(label=cfg.default_label, pi=_clip(pi, cfg.pi_min, 1.0),
                         tau_s=_clip(cfg.default_tau_s, cfg.tau_min_s, cfg.tau_max_s),
                         source="keyword")


def parse_classification(reply: str, cfg: ClassifierConfig) -> Perishability:
    """Parse the model's strict-JSON answer and clip it into range; :class:`LLMError` if off.

    >>> parse_classification('{"label": "ephemeral", "pi": 7, "tau_sec": 1}', ClassifierConfig())
    Perishability(label='ephemeral', pi=1.0, tau_s=60.0, source='llm')
    """
    obj = parse_json_object(reply)
    label = obj.get("label")
    if not isinstance(label, str) or label.strip().lower() not in LABELS:
        raise LLMError(f"The chat model's label must be one of {LABELS}. Got {label!r} instead.")
    pi = finite_float(obj, "pi")
    tau = finite_float(obj, "tau_sec")
    return Perishability(label=label.strip().lower(), pi=_clip(pi, cfg.pi_min, 1.0),
                         tau_s=_clip(tau, cfg.tau_min_s, cfg.tau_max_s), source="llm")


class Classifier:
    """Classifies memories with the chat model when there is one, else offline."""

    def __init__(self, cfg: ClassifierConfig, llm: LLMClient | None = None) -> None:
        self.cfg = cfg
        self.llm = llm

    def classify_many(self, texts: Sequence[str], contexts: Sequence[str],
                      what: NDArray[np.float32], where: NDArray[np.float32]) -> list[Perishability]:
        """One :class:`Perishability` per text (LLM per memory when configured, else offline)."""
        cos = np.einsum("ij,ij->i", what, where)
        out = []
        for i, (text, context) in enumerate(zip(texts, contexts, strict=True)):
            result = self._llm_classify(text, context) if self.llm is not None else None
            out.append(result or keyword_classify(text, context, float(cos[i]), self.cfg))
        return out

    def _llm_classify(self, text: str, context: str) -> Perishability | None:
        assert self.llm is not None
        try:
            reply = self.llm.complete(CLASSIFY_PROMPT.format(context=context, text=text))
        except LLMError:
            return None
        try:
            return parse_classification(reply, self.cfg)
        except LLMError as err:
            self.llm.note_parse_failure(err)
            return None


def _clip(x: float, lo: float, hi: float) -> float:
    return float(min(hi, max(lo, x)))
