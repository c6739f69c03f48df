"""Helpers for tests, notebooks and examples: a deterministic embedder, a frozen clock, a
scripted chat model, a small corpus, and loopback servers (a real ``chroma run``, an
Ollama-speaking stand-in) on 127.0.0.1. Nothing here touches the network.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .embedding import CallableEmbedder

__all__ = ["WEEK_OF_MEMORIES", "FakeOllama", "FrozenClock", "HashEmbedder", "ScriptedLLM",
           "chroma_server", "free_port", "ollama_server"]

_TOKEN = re.compile(r"[a-z0-9]+")


class HashEmbedder(CallableEmbedder):
    """Bag-of-words hashing embedder: texts sharing words get similar vectors.

    Deterministic across processes and platforms (blake2b of each lower-cased token), fast, and
    good enough to make retrieval tests meaningful without a model.
    """

    def __init__(self, dim: int = 64) -> None:
        super().__init__(self._embed, name=f"hash-bow-{dim}")
        self.dim = dim

    def _embed(self, texts: list[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            tokens = _TOKEN.findall(text.lower()) or ["<empty>"]
            for tok in tokens:
                h = hashlib.blake2b(tok.encode(), digest_size=8).digest()
                j = int.from_bytes(h[:4], "little") % self.dim
                sign = 1.0 if h[4] & 1 else -1.0
                out[i, j] += sign
        return out


class FrozenClock:
    """A clock that only moves when told: ``clock()`` returns epoch seconds."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float = 0.0, *, minutes: float = 0.0, hours: float = 0.0,
                days: float = 0.0) -> float:
        with self._lock:
            self._now += seconds + 60 * minutes + 3600 * hours + 86_400 * days
            return self._now

    def set(self, t: float) -> None:
        with self._lock:
            self._now = float(t)


class ScriptedLLM:
    """A chat-model stand-in: a callable ``prompt -> reply`` with a call log.

    ``replies`` is either a list (served in order, the last one repeated) or a function of the
    prompt. A reply that is an exception instance is raised instead.
    """

    def __init__(self, replies: Sequence[str | BaseException] | Callable[[str], str]) -> None:
        self.replies = replies
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if callable(self.replies):
            return self.replies(prompt)
        reply = self.replies[min(len(self.prompts) - 1, len(self.replies) - 1)]
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def invoke(self, prompt: Any) -> str:
        return self(str(prompt))


#: A scripted week of an agent's memories: (day offset, hour, text, context).
WEEK_OF_MEMORIES: tuple[tuple[int, float, str, str], ...] = (
    (0, 9.0, "The user is a structural engineer who designs bridges", "getting to know the user"),
    (0, 9.1, "The user prefers answers with metric units", "getting to know the user"),
    (0, 9.5, "Right now the user is sitting in room 4B for a design review",
     "morning design review"),
    (0, 10.0, "How to export the load report: open Tools, choose Export, then pick PDF",
     "helping with the analysis software"),
    (0, 14.0, "The user's task today is to finish the pedestrian bridge load calculation",
     "planning the work day"),
    (1, 8.5, "The user is temporarily working from the Lisbon office", "travel planning"),
    (1, 11.0, "Ticket BR-212: the deflection check fails for span 3", "debugging the model"),
    (2, 9.0, "The user's daughter starts school in September", "small talk"),
    (3, 16.0, "The meeting with the steel supplier is on Friday at 3 pm", "scheduling"),
    (4, 10.0, "The user is allergic to shellfish", "booking a team dinner"),
)


def corpus_texts(items: Iterable[tuple[int, float, str, str]] = WEEK_OF_MEMORIES) -> list[str]:
    return [text for _, _, text, _ in items]


def _chroma_executable() -> str:
    exe = Path(sys.executable).with_name("chroma")
    if exe.exists():
        return str(exe)
    found = shutil.which("chroma")
    if not found:
        raise RuntimeError("the `chroma` command (from chromadb) is not installed")
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (just now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def chroma_server(folder: str | os.PathLike[str], log: str | os.PathLike[str] | None = None,
                  timeout_s: float = 60.0) -> Iterator[tuple[str, int]]:
    """A real ``chroma run`` server on 127.0.0.1 (a free port) over ``folder`` for the
    ``with`` block; yields ``(host, port)``. Its output goes to ``log`` (default: a file
    beside ``folder``); a server that does not answer within ``timeout_s`` raises
    ``RuntimeError`` with the log's tail."""
    from .clients import http_client

    folder = Path(folder)
    port = free_port()
    log_path = Path(log) if log is not None else folder.parent / f"chroma-{port}.log"
    out = open(log_path, "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen([_chroma_executable(), "run", "--path", str(folder),
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    try:
        deadline = time.time() + timeout_s
        while True:
            try:
                http_client("127.0.0.1", port).heartbeat()
                break
            except Exception:  # noqa: BLE001 - any error of a server still starting
                if proc.poll() is not None or time.time() > deadline:
                    out.flush()
                    raise RuntimeError("chroma run did not start: "
                                       + log_path.read_text()[-2000:]) from None
                time.sleep(0.2)
        yield "127.0.0.1", port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()


OLLAMA_CLASSIFY_REPLY = '{"label": "ephemeral", "pi": 0.95, "tau_sec": 1800}'
"""What :class:`FakeOllama` answers to the paper's perishability prompt."""
OLLAMA_RCI_REPLY = ('{"delta_value": -0.5, "delta_pi": 0.2, "delta_tau": -0.25, '
                    '"summary": "moved the car"}')
"""What :class:`FakeOllama` answers to the paper's RCI prompt."""
OLLAMA_OTHER_REPLY = "The car is parked on level 3."
"""What :class:`FakeOllama` answers to any other prompt (an annotation, a chat turn)."""
OLLAMA_MALFORMED_REPLY = "Sure! I think it is ephemeral, maybe."


class FakeOllama(ThreadingHTTPServer):
    """An Ollama-speaking HTTP server on 127.0.0.1 (a free port) for tests and doc snippets.

    It answers ``POST /api/chat`` (streamed NDJSON or one JSON object, as the client asks)
    with a reply chosen by the paper's prompt that arrives, ``POST /api/embed`` with
    :class:`HashEmbedder` vectors, and any ``GET`` (``/api/version``, ``/api/tags``) with a
    version. ``requests`` logs every POST body with its path; set ``malformed`` to answer every
    chat off-format. Use :func:`ollama_server` to run one for a ``with`` block.
    """

    def __init__(self, dim: int = 32) -> None:
        super().__init__(("127.0.0.1", 0), _OllamaHandler)
        self.embedder = HashEmbedder(dim)
        self.requests: list[dict[str, Any]] = []
        self.malformed = False

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, the ``base_url`` / ``OLLAMA_HOST`` of this server."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reply_to(self, prompt: str) -> str:
        if self.malformed:
            return OLLAMA_MALFORMED_REPLY
        if prompt.startswith("Classify memory perishability"):
            return OLLAMA_CLASSIFY_REPLY
        if prompt.startswith("Given new information"):
            return OLLAMA_RCI_REPLY
        return OLLAMA_OTHER_REPLY


class _OllamaHandler(BaseHTTPRequestHandler):
    server: FakeOllama

    def log_message(self, format: str, *args: Any) -> None:  # keep the output quiet
        pass

    def _send(self, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # the name http.server calls
        self._send(json.dumps({"version": "0.12.0", "models": []}).encode())

    def do_POST(self) -> None:  # the name http.server calls
        length = int(self.headers.get("Content-Length") or 0)
        req: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
        self.server.requests.append({"path": self.path, **req})
        if self.path == "/api/embed":
            texts = req["input"] if isinstance(req["input"], list) else [req["input"]]
            vecs = self.server.embedder.embed(texts).tolist()
            self._send(json.dumps({"model": req["model"], "embeddings": vecs}).encode())
            return
        text = self.server.reply_to(str(req["messages"][-1]["content"]))
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


@contextlib.contextmanager
def ollama_server(dim: int = 32) -> Iterator[FakeOllama]:
    """A :class:`FakeOllama` serving on 127.0.0.1 for the ``with`` block."""
    server = FakeOllama(dim)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
