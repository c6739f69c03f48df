"""Shared fixtures: a frozen clock, a fast deterministic embedder, real Chroma stores.

``memory_factory`` is parametrised over the embedded store (``PersistentClient`` in a temp
folder) and a real ``chroma run`` server that the session starts on 127.0.0.1.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scrubjay import ScrubJayMemory
from scrubjay.testing import FakeOllama, FrozenClock, HashEmbedder, ollama_server
from scrubjay.testing import chroma_server as start_chroma_server

T0 = 1_764_000_000.0  # 2025-11-24, a fixed "now" for deterministic tests


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A real `chroma run` server on 127.0.0.1 for the whole test session."""
    folder = tmp_path_factory.mktemp("chroma-server")
    with start_chroma_server(folder / "data", log=folder / "server.log") as address:
        yield address


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


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    with ollama_server() as server:
        yield server
