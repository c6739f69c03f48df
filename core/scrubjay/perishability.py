"""Perishability classification ``phi(text, context) -> (label, pi, tau)`` (paper §3.2).

Two estimators:

* the chat model, with the paper's prompt (App. F.3) and strict JSON parsing; its numbers are
  clipped (``pi`` to ``[pi_min, 1]``, ``tau`` to ``[tau_min_s, tau_max_s]``) and an unknown label
  is a parse failure. One memory is asked with the paper's prompt; a batch of several in one
  call per ``batch_items`` memories (:data:`~scrubjay.llm.CLASSIFY_MANY_PROMPT`), and an answer
  that fails for one memory falls back for that memory only;
* offline, when no chat model is configured or it fails: the trained estimator of
  :mod:`scrubjay.estimator` (default), or the paper's keyword rule (``offline="keyword"``), whose
  keywords match whole words (``issue`` does not match ``tissue``).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .config import LABELS, ClassifierConfig
from .errors import LLMError
from .llm import (
    CLASSIFY_MANY_PROMPT,
    CLASSIFY_PROMPT,
    LLMClient,
    finite_float,
    memories_block,
    parse_json_object,
)
from .types import Perishability

__all__ = ["Classifier", "keyword_classify", "parse_classification",
           "parse_classifications"]

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
    return _classification_of(parse_json_object(reply), cfg)


def parse_classifications(reply: str, n: int, cfg: ClassifierConfig
                          ) -> list[Perishability | LLMError]:
    """Parse the answer to :data:`~scrubjay.llm.CLASSIFY_MANY_PROMPT` for ``n`` memories.

    :class:`LLMError` if the reply is not ``{"memories": [...]}`` with ``n`` entries; else one
    :class:`Perishability` per entry, or the :class:`LLMError` of an entry that is off.

    >>> parse_classifications('{"memories": [{"label": "factual", "pi": 0.1, "tau_sec": 1e6},'
    ...                       ' {"label": "soon"}]}', 2, ClassifierConfig())[1]
    LLMError("The chat model's label must be one of the four labels.")
    """
    obj = parse_json_object(reply)
    entries = obj.get("memories")
    if set(obj) != {"memories"} or not isinstance(entries, list) or len(entries) != n:
        raise LLMError(f"The chat model's reply must be {{\"memories\": [...]}} with {n} "
                       "entries.")
    out: list[Perishability | LLMError] = []
    for entry in entries:
        try:
            if not isinstance(entry, dict):
                raise LLMError("Each of the chat model's memories must be a JSON object.")
            out.append(_classification_of(entry, cfg))
        except LLMError as err:
            out.append(err)
    return out


def _classification_of(obj: dict[str, Any], cfg: ClassifierConfig) -> Perishability:
    label = obj.get("label")
    if not isinstance(label, str) or label.strip().lower() not in LABELS:
        # not the label itself: a model may echo the memory there
        raise LLMError("The chat model's label must be one of the four labels.")
    pi = finite_float(obj, "pi")
    tau = finite_float(obj, "tau_sec")
    return Perishability(label=label.strip().lower(), pi=_clip(pi, cfg.pi_min, 1.0),
                         tau_s=_clip(tau, cfg.tau_min_s, cfg.tau_max_s), source="llm")


#: Memories per estimator call (the rows do not depend on it: every feature is computed per
#: text). The estimator scores sparsely, so a call's temporaries are small (about 13 MB of
#: gathered weight rows per 2,048 memories), and each call has a fixed cost (a tokenizer
#: call, a scan per cue pattern): a batch of 10,000 is classified in 0.98 s with 2,048, 1.23
#: s with 256 (``python`` timing of ``classify_many``).
ESTIMATE_CHUNK = 2048


class _KnownVectors:
    """An embedder that answers from rows already computed by the same model.

    ``known`` maps a tuple of texts to their rows (as the wrapped embedder would return them:
    wordllama embeds each text independently of its batch); any other input is embedded.
    """

    def __init__(self, embedder: Any, known: dict[tuple[str, ...], NDArray[np.float32]]) -> None:
        self.inner = embedder
        self.name = embedder.name
        self.known = known

    def embed(self, texts: Sequence[str], *, query: bool = False) -> NDArray[np.float32]:
        got = self.known.get(tuple(texts))
        if got is not None and not query:
            return got
        out: NDArray[np.float32] = self.inner.embed(texts, query=query)
        return out


class Classifier:
    """Classifies memories with the chat model when there is one, else offline.

    The offline estimate is the trained estimator (default) or the keyword rule
    (``ClassifierConfig(offline="keyword")``).
    """

    def __init__(self, cfg: ClassifierConfig, llm: LLMClient | None = None, *,
                 stale_ratio: float = 0.5, batch_items: int = 32) -> None:
        self.cfg = cfg
        self.llm = llm
        self.stale_ratio = stale_ratio
        self.batch_items = batch_items

    def classify_many(self, texts: Sequence[str], contexts: Sequence[str],
                      what: NDArray[np.float32], where: NDArray[np.float32], *,
                      vectors_by: str | None = None) -> list[Perishability]:
        """One :class:`Perishability` per text (the LLM when configured, else offline).

        ``vectors_by``: the name of the embedder that produced ``what`` from exactly ``texts``
        and ``where`` from ``contexts``; when it is the estimator's own embedder, the estimator
        reuses those rows instead of embedding the texts a second time.
        """
        llm = (self._llm_classify_many(texts, contexts) if self.llm is not None
               else [None] * len(texts))
        need_offline = [i for i, p in enumerate(llm) if p is None]
        need_estimate = list(range(len(texts))) if (
            self.cfg.offline == "estimator" and (need_offline or self.cfg.llm_clip_decades)) \
            else []
        estimates = dict(zip(need_estimate, self._estimate(
            [texts[i] for i in need_estimate], [contexts[i] for i in need_estimate],
            (what[need_estimate], where[need_estimate]) if vectors_by else None, vectors_by),
            strict=True))
        cos = np.einsum("ij,ij->i", what, where)
        out: list[Perishability] = []
        for i, p in enumerate(llm):
            if p is not None:
                out.append(self._clip_to_estimate(p, estimates.get(i)))
            elif i in estimates:
                out.append(estimates[i])
            else:
                out.append(keyword_classify(texts[i], contexts[i], float(cos[i]), self.cfg))
        return out

    def _estimate(self, texts: list[str], contexts: list[str],
                  vectors: tuple[NDArray[np.float32], NDArray[np.float32]] | None = None,
                  vectors_by: str | None = None) -> list[Perishability]:
        if not texts:
            return []
        from .estimator import lifetime_to_perishability, load_default_model

        model, embedder = load_default_model()
        log_life: list[float] = []
        labels: list[str] = []
        for lo in range(0, len(texts), ESTIMATE_CHUNK):
            part_t, part_c = texts[lo:lo + ESTIMATE_CHUNK], contexts[lo:lo + ESTIMATE_CHUNK]
            known = embedder
            if vectors is not None and vectors_by == embedder.name:
                known = _KnownVectors(embedder, {
                    tuple(part_t): vectors[0][lo:lo + ESTIMATE_CHUNK],
                    tuple(part_c): vectors[1][lo:lo + ESTIMATE_CHUNK]})
            ll, lab = model.predict(part_t, part_c, known)
            log_life.extend(float(x) for x in ll)
            labels.extend(lab)
        return [lifetime_to_perishability(10.0 ** ll, label, stale_ratio=self.stale_ratio,
                                          tau_min_s=self.cfg.tau_min_s,
                                          tau_max_s=self.cfg.tau_max_s, pi_min=self.cfg.pi_min)
                for ll, label in zip(log_life, labels, strict=True)]

    def _clip_to_estimate(self, p: Perishability, est: Perishability | None) -> Perishability:
        d = self.cfg.llm_clip_decades
        if d is None or est is None:
            return p
        k = math.log(1.0 / self.stale_ratio)
        life_est = est.tau_s * k / est.pi
        life_llm = p.tau_s * k / p.pi
        life = min(life_est * 10 ** d, max(life_est / 10 ** d, life_llm))
        tau = _clip(life * p.pi / k, self.cfg.tau_min_s, self.cfg.tau_max_s)
        # when tau hits its bounds, pi moves instead, so that the memory still turns stale at
        # the clipped lifetime
        pi = _clip(tau * k / life, self.cfg.pi_min, 1.0)
        return Perishability(label=p.label, pi=pi, tau_s=tau, source="llm")

    def _llm_classify_many(self, texts: Sequence[str], contexts: Sequence[str]
                           ) -> list[Perishability | None]:
        """The model's answer per memory (None where it failed): one memory with the paper's
        prompt, more in one call per ``batch_items``."""
        assert self.llm is not None
        if len(texts) == 1:
            return [self._llm_classify(texts[0], contexts[0])]
        out: list[Perishability | None] = []
        for lo in range(0, len(texts), self.batch_items):
            part_t, part_c = texts[lo:lo + self.batch_items], contexts[lo:lo + self.batch_items]
            try:
                reply = self.llm.complete(CLASSIFY_MANY_PROMPT.format(
                    memories=memories_block(part_t, part_c)))
            except LLMError:
                out.extend([None] * len(part_t))
                continue
            try:
                answers = parse_classifications(reply, len(part_t), self.cfg)
            except LLMError as err:
                self.llm.note_parse_failure(err)
                out.extend([None] * len(part_t))
                continue
            for answer in answers:
                if isinstance(answer, LLMError):
                    self.llm.note_parse_failure(answer)
                    out.append(None)
                else:
                    out.append(answer)
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
