"""Shared fixtures: a frozen clock, a fast deterministic embedder, real Chroma stores.

``memory_factory`` is parametrised over the embedded store (``PersistentClient`` in a temp
folder) and a real ``chroma run`` server that the session starts on 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scrubjay import ScrubJayMemory
from scrubjay.testing import FrozenClock, HashEmbedder

T0 = 1_764_000_000.0  # 2025-11-24, a fixed "now" for deterministic tests


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chroma_executable() -> str:
    exe = Path(sys.executable).with_name("chroma")
    if exe.exists():
        return str(exe)
    found = shutil.which("chroma")
    if not found:
        raise RuntimeError("the `chroma` command (from chromadb) is not installed")
    return found


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A real `chroma run` server on 127.0.0.1 for the whole test session."""
    folder = tmp_path_factory.mktemp("chroma-server")
    port = _free_port()
    log = open(folder / "server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([_chroma_executable(), "run", "--path", str(folder / "data"),
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    import chromadb

    deadline = time.time() + 60
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            break
        except Exception:
            if proc.poll() is not None or time.time() > deadline:
                log.close()
                raise RuntimeError("chroma run did not start: "
                                   + (folder / "server.log").read_text()[-2000:]) from None
            time.sleep(0.2)
    yield "127.0.0.1", port
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder(dim=64)


@pytest.fixture(params=["embedded", "server"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def memory_factory(backend: str, tmp_path: Path, request: pytest.FixtureRequest,
                   clock: FrozenClock, embedder: HashEmbedder
                   ) -> Iterator[Callable[..., ScrubJayMemory]]:
    """Build memories on the parametrised backend; all share one store per test."""
    made: list[ScrubJayMemory] = []
    prefix = uuid.uuid4().hex[:8]
    client = None
    if backend == "server":
        import chromadb

        host, port = request.getfixturevalue("chroma_server")
        client = chromadb.HttpClient(host=host, port=port)

    def make(namespace: str = "test", **kwargs: Any) -> ScrubJayMemory:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("embedder", embedder)
        if backend == "server":
            mem = ScrubJayMemory(client=client, namespace=f"{prefix}-{namespace}", **kwargs)
        else:
            mem = ScrubJayMemory(path=tmp_path / "store", namespace=namespace, **kwargs)
        made.append(mem)
        return mem

    yield make
    for mem in made:
        mem.close()
