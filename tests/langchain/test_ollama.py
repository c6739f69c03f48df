"""The paper's deployment: real langchain-ollama clients against a loopback Ollama server.

The server speaks Ollama's ``POST /api/chat`` (streamed NDJSON or one JSON object, as the client
asks) and ``POST /api/embed``; replies are chosen by the paper's prompt that arrives.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from langchain_ollama import ChatOllama, OllamaEmbeddings
from scrubjay import ScrubJayMemory
from scrubjay.testing import HashEmbedder

CLASSIFY = '{"label": "ephemeral", "pi": 0.95, "tau_sec": 1800}'
RCI = '{"delta_value": -0.5, "delta_pi": 0.2, "delta_tau": -0.25, "summary": "moved the car"}'


class FakeOllama(BaseHTTPRequestHandler):
    malformed = False
    requests: ClassVar[list[dict[str, Any]]] = []
    _hash = HashEmbedder(32)

    def log_message(self, *args: Any) -> None:  # keep the test output quiet
        pass

    def _send(self, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # /api/version, /api/tags
        self._send(json.dumps({"version": "0.12.0", "models": []}).encode())

    def do_POST(self) -> None:
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        type(self).requests.append({"path": self.path, **req})
        if self.path == "/api/embed":
            texts = req["input"] if isinstance(req["input"], list) else [req["input"]]
            vecs = self._hash.embed(texts).tolist()
            self._send(json.dumps({"model": req["model"], "embeddings": vecs}).encode())
            return
        prompt = req["messages"][-1]["content"]
        if type(self).malformed:
            text = "Sure! I think it is ephemeral, maybe."
        elif prompt.startswith("Classify memory perishability"):
            text = CLASSIFY
        elif prompt.startswith("Given new information"):
            text = RCI
        else:
            text = "The car is parked on level 3."
        done = {"model": req["model"], "created_at": "2025-11-24T00:00:00Z", "done": True,
                "done_reason": "stop", "message": {"role": "assistant", "content": ""}}
        if req.get("stream", True):
            chunk = {**done, "done": False, "message": {"role": "assistant", "content": text}}
            del chunk["done_reason"]
            body = (json.dumps(chunk) + "\n" + json.dumps(done) + "\n").encode()
            self._send(body, "application/x-ndjson")
        else:
            self._send(json.dumps({**done, "message": {"role": "assistant",
                                                       "content": text}}).encode())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def ollama() -> Iterator[str]:
    FakeOllama.malformed = False
    FakeOllama.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOllama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_real_clients_classify_rci_and_fall_back(ollama: str, clock, caplog) -> None:
    # The one-line wiring documented in docs/langchain.md:
    mem = ScrubJayMemory(llm=ChatOllama(base_url=ollama, model="qwen3:30b", reasoning=False),
                         embedder=OllamaEmbeddings(base_url=ollama, model="nomic-embed-text"),
                         clock=clock)
    rec = mem.add("I parked the car on level 3", context="at the mall")
    assert (rec.source, rec.label, rec.pi, rec.tau_s) == ("llm", "ephemeral", 0.95, 1800.0)
    assert rec.annotation == "The car is parked on level 3."
    paths = [r["path"] for r in FakeOllama.requests]
    assert "/api/embed" in paths and "/api/chat" in paths
    assert {r["model"] for r in FakeOllama.requests if r["path"] == "/api/chat"} == {"qwen3:30b"}

    report = mem.integrate("I parked the car on level 5", context="at the mall")
    assert report.used_llm and report.llm_calls == 1
    assert (report.deltas.delta_value, report.deltas.delta_pi, report.deltas.delta_tau) == \
        (-0.5, 0.2, -0.25)
    assert report.affected_ids == [rec.id]

    FakeOllama.malformed = True
    with caplog.at_level(logging.WARNING, logger="scrubjay.llm"):
        fallback = mem.add("The user is allergic to shellfish", context="dinner")
        bad = mem.integrate("The user is no longer allergic to shellfish")
    assert fallback.source == "estimator" and not bad.used_llm and bad.fallback_reason
    assert len([r for r in caplog.records if r.name == "scrubjay.llm"
                and r.levelno == logging.WARNING]) == 1
    assert mem.search("where is the car parked", k=1)[0].text.startswith("I parked the car on level")


def test_no_server_running_uses_the_fallbacks_and_says_so_once(clock, embedder,
                                                               caplog) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"
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
