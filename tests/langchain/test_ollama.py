"""The paper's deployment: real langchain-ollama clients against a loopback Ollama server
(:class:`scrubjay.testing.FakeOllama`: Ollama's ``/api/chat`` and ``/api/embed``, replies chosen
by the paper's prompt that arrives).
"""

from __future__ import annotations

import logging

import pytest
from langchain_ollama import ChatOllama, OllamaEmbeddings
from scrubjay import ScrubJayMemory
from scrubjay.testing import FakeOllama, free_port


@pytest.fixture
def ollama(fake_ollama: FakeOllama) -> str:
    return fake_ollama.url


def test_real_clients_classify_rci_and_fall_back(fake_ollama: FakeOllama, ollama: str,
                                                  clock, caplog) -> None:
    # The one-line wiring documented in docs/langchain.md:
    mem = ScrubJayMemory(llm=ChatOllama(base_url=ollama, model="qwen3:30b", reasoning=False),
                         embedder=OllamaEmbeddings(base_url=ollama, model="nomic-embed-text"),
                         clock=clock)
    rec = mem.add("I parked the car on level 3", context="at the mall")
    assert (rec.source, rec.label, rec.pi, rec.tau_s) == ("llm", "ephemeral", 0.95, 1800.0)
    assert rec.annotation == "The car is parked on level 3."
    paths = [r["path"] for r in fake_ollama.requests]
    assert "/api/embed" in paths and "/api/chat" in paths
    assert {r["model"] for r in fake_ollama.requests if r["path"] == "/api/chat"} == {"qwen3:30b"}

    report = mem.integrate("I parked the car on level 5", context="at the mall")
    assert report.used_llm and report.llm_calls == 1
    assert (report.deltas.delta_value, report.deltas.delta_pi, report.deltas.delta_tau) == \
        (-0.5, 0.2, -0.25)
    assert report.affected_ids == [rec.id]

    fake_ollama.malformed = True
    with caplog.at_level(logging.WARNING, logger="scrubjay.llm"):
        fallback = mem.add("The user is allergic to shellfish", context="dinner")
        bad = mem.integrate("The user is no longer allergic to shellfish")
    assert fallback.source == "estimator" and not bad.used_llm and bad.fallback_reason
    assert len([r for r in caplog.records if r.name == "scrubjay.llm"
                and r.levelno == logging.WARNING]) == 1
    assert mem.search("where is the car parked", k=1)[0].text.startswith("I parked the car on level")


def test_no_server_running_uses_the_fallbacks_and_says_so_once(clock, embedder,
                                                               caplog) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    mem = ScrubJayMemory(llm=ChatOllama(base_url=dead, model="qwen3:30b"), embedder=embedder,
                         clock=clock)
    with caplog.at_level(logging.DEBUG, logger="scrubjay.llm"):
        recs = mem.add_many(["I am parked on level 3 right now", "My sister lives in Oslo"])
        report = mem.integrate("I moved the car to level 5")
        hits = mem.search("where am I parked", k=2)
    assert {r.source for r in recs} == {"estimator"} and recs[0].label == "ephemeral"
    assert not report.used_llm and len(hits) == 2
    warnings = [r for r in caplog.records if r.name == "scrubjay.llm"
                and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "offline fallbacks" in warnings[0].getMessage()
