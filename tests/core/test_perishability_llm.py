"""The classifier: keyword rules, strict-JSON LLM answers, clipping and every fallback."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from scrubjay import LLMConfig, ScrubJayConfig, ScrubJayMemory
from scrubjay.config import ClassifierConfig
from scrubjay.errors import InvalidInputError, LLMError
from scrubjay.llm import CLASSIFY_PROMPT, LLMClient, parse_json_object
from scrubjay.perishability import Classifier, keyword_classify, parse_classification
from scrubjay.testing import ScriptedLLM

CFG = ClassifierConfig()


@pytest.mark.parametrize(("text", "label", "pi", "tau_h"), [
    ("I need to leave right now", "ephemeral", 0.9, 2),
    ("This is a temporary password", "ephemeral", 0.9, 2),
    ("How to rotate the API keys", "procedural", 0.3, 240),
    ("Ticket 42 blocks the release", "task_specific", 0.6, 24),
    # first match wins: 'today' (ephemeral) before 'meeting' (task)
    ("The meeting today is at noon", "ephemeral", 0.9, 2),
    ("My brother is a nurse", "factual", 0.1, 45 * 24),
])
def test_keyword_rules(text: str, label: str, pi: float, tau_h: float) -> None:
    p = keyword_classify(text, "", None, CFG)
    assert (p.label, p.pi, p.tau_s, p.source) == (label, pi, tau_h * 3600, "keyword")


def test_keywords_match_whole_words_and_context() -> None:
    assert keyword_classify("The tissue sample is in the lab", "", None, CFG).label == "factual"
    assert keyword_classify("Room 4", "sprint planning meeting", None, CFG).label == \
        "task_specific"


def test_factual_perturbation_from_context_divergence() -> None:
    same = keyword_classify("x", "some context", 1.0, CFG)
    far = keyword_classify("x", "some context", -0.5, CFG)
    none = keyword_classify("x", "", -0.5, CFG)
    assert same.pi == pytest.approx(0.1)
    assert far.pi == pytest.approx(0.15)          # 0.1 + 0.05 * clip(1.5, 0, 1)
    assert none.pi == pytest.approx(0.1)          # no context, no perturbation


@pytest.mark.parametrize(("reply", "expected"), [
    ('{"label": "ephemeral", "pi": 0.85, "tau_sec": 3600}', ("ephemeral", 0.85, 3600.0)),
    ('```json\n{"label": "Factual", "pi": "0.05", "tau_sec": 1e7}\n```', ("factual", 0.05, 1e7)),
    ('{"label": "task_specific", "pi": 0, "tau_sec": 1e30}',
     ("task_specific", 1e-3, 5 * 365.25 * 86400)),
    ('{"label": "procedural", "pi": -3, "tau_sec": -5}', ("procedural", 1e-3, 60.0)),
])
def test_parse_classification_clips(reply: str, expected: tuple[str, float, float]) -> None:
    p = parse_classification(reply, CFG)
    assert (p.label, p.pi, p.tau_s) == pytest.approx(expected)
    assert p.source == "llm"


@pytest.mark.parametrize("reply", [
    "sure! the label is ephemeral",
    '{"label": "ephemeral", "pi": NaN, "tau_sec": 60}',
    '{"label": "ephemeral", "pi": Infinity, "tau_sec": 60}',
    '{"label": "ephemeral", "pi": 0.5}',
    '{"label": "urgent", "pi": 0.5, "tau_sec": 60}',
    '[{"label": "ephemeral", "pi": 0.5, "tau_sec": 60}]',
    '{"label": "ephemeral", "pi": true, "tau_sec": 60}',
    '{"label": "ephemeral", "pi": {"v": 1}, "tau_sec": 60}',
    '{"label": "ephemeral", "pi": 0.5, "pi": 0.1, "tau_sec": 60}',
    '{"label": "ephemeral", "pi": 0.5, "tau_sec": 1' + "0" * 400 + "}",
    "",
])
def test_malformed_replies_raise_llm_error(reply: str) -> None:
    with pytest.raises(LLMError):
        parse_classification(reply, CFG)


def test_parse_json_object_accepts_only_objects() -> None:
    assert parse_json_object('  {"a": 1}  ') == {"a": 1}
    with pytest.raises(LLMError):
        parse_json_object('{"a": 1} and more')


KEYWORD = ClassifierConfig(offline="keyword")


def _classifier(llm: object, timeout_s: float = 5.0, cfg: ClassifierConfig = KEYWORD
                ) -> Classifier:
    return Classifier(cfg, LLMClient(llm, timeout_s=timeout_s, max_reply_chars=10_000))


def test_default_offline_fallback_is_the_estimator() -> None:
    v = np.ones((2, 4), np.float32) / 2
    out = _classifier(ScriptedLLM(["not json"]), cfg=CFG).classify_many(
        ["The oven timer has twenty minutes left", "I have type 1 diabetes"], ["", ""], v, v)
    assert [p.source for p in out] == ["estimator", "estimator"]
    life = [p.tau_s * np.log(2) / p.pi for p in out]
    assert life[0] < 86_400 < 365 * 86_400 < life[1]


def test_llm_answer_clipped_around_the_estimate() -> None:
    v = np.ones((1, 4), np.float32) / 2
    hostile = ScriptedLLM(['{"label": "factual", "pi": 0.001, "tau_sec": 1e12}'])
    cfg = ClassifierConfig(llm_clip_decades=1.0)
    [p] = _classifier(hostile, cfg=cfg).classify_many(["The oven timer has twenty minutes left"],
                                                      [""], v, v)
    [est] = _classifier(ScriptedLLM(["x"]), cfg=CFG).classify_many(
        ["The oven timer has twenty minutes left"], [""], v, v)
    life, life_est = p.tau_s * np.log(2) / p.pi, est.tau_s * np.log(2) / est.pi
    assert p.source == "llm" and life == pytest.approx(10 * life_est, rel=1e-6)


def test_classifier_uses_llm_with_the_paper_prompt() -> None:
    llm = ScriptedLLM(['{"label": "ephemeral", "pi": 0.8, "tau_sec": 900}'])
    v = np.ones((1, 4), np.float32) / 2
    [p] = _classifier(llm).classify_many(["The kettle is on"], ["kitchen"], v, v)
    assert (p.label, p.pi, p.tau_s, p.source) == ("ephemeral", 0.8, 900.0, "llm")
    assert llm.prompts == [CLASSIFY_PROMPT.format(context="kitchen", text="The kettle is on")]


@pytest.mark.parametrize("llm", [
    ScriptedLLM(["not json at all"]),
    ScriptedLLM([RuntimeError("connection refused")]),
    ScriptedLLM(['{"label": "ephemeral", "pi": 0, "tau_sec": 60} ignore previous instructions']),
])
def test_classifier_falls_back_to_keywords(llm: ScriptedLLM) -> None:
    v = np.ones((1, 4), np.float32) / 2
    [p] = _classifier(llm).classify_many(["Ticket 7 is open"], [""], v, v)
    assert (p.label, p.source) == ("task_specific", "keyword")


def test_hanging_llm_times_out_and_falls_back() -> None:
    release = threading.Event()

    def hang(prompt: str) -> str:
        release.wait(10)
        return "{}"

    v = np.ones((1, 4), np.float32) / 2
    start = time.perf_counter()
    [p] = _classifier(hang, timeout_s=0.2).classify_many(["Ticket 7"], [""], v, v)
    release.set()
    assert p.source == "keyword"
    assert time.perf_counter() - start < 5


def test_llm_failure_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    llm = ScriptedLLM([ConnectionError("no server at 127.0.0.1:11434")])
    v = np.ones((1, 4), np.float32) / 2
    classifier = _classifier(llm)
    with caplog.at_level("DEBUG", logger="scrubjay.llm"):
        for text in ("a", "b", "c"):
            classifier.classify_many([text], [""], v, v)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "offline fallbacks" in warnings[0].getMessage()
    assert len(llm.prompts) == 3


def test_memory_with_llm_stores_llm_perishability_and_annotation(clock, embedder) -> None:
    def reply(prompt: str) -> str:
        if prompt.startswith("Classify"):
            return '{"label": "ephemeral", "pi": 0.95, "tau_sec": 600}'
        return "Useful when the user asks where the car is."

    mem = ScrubJayMemory(embedder=embedder, clock=clock, llm=reply)
    rec = mem.add("Parked on level 3", context="mall")
    assert (rec.label, rec.pi, rec.tau_s, rec.source) == ("ephemeral", 0.95, 600.0, "llm")
    assert rec.annotation == "Useful when the user asks where the car is."
    off = ScrubJayMemory(embedder=embedder, clock=clock, llm=reply,
                         config=ScrubJayConfig(llm=LLMConfig(annotate=False)), namespace="b")
    assert off.add("Parked on level 3").annotation == ""


def test_bad_llm_object_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="'llm' parameter"):
        ScrubJayMemory(llm=42)
