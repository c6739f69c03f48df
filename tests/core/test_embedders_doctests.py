"""Embedder adapters (LangChain, LlamaIndex, callables) and the modules' doctests."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
from scrubjay import EmbeddingError, InvalidInputError, ScrubJayMemory
from scrubjay.embedding import (
    CallableEmbedder,
    LangChainEmbedder,
    LlamaIndexEmbedder,
    WordLlamaEmbedder,
    as_embedder,
)

MODULES = ["types", "decay", "unit", "scoring", "config", "perishability", "rci", "graph", "buffer",
           "consolidation", "memory", "estimator", "codec", "filters", "explain"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(f"scrubjay.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_langchain_embeddings_adapter(clock) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    emb = as_embedder(DeterministicFakeEmbedding(size=32))
    assert isinstance(emb, LangChainEmbedder) and emb.name.startswith("langchain:")
    mem = ScrubJayMemory(embedder=DeterministicFakeEmbedding(size=32), clock=clock)
    rec = mem.add("hello world", context="greeting")
    assert mem.search("hello world", k=1)[0].id == rec.id   # deterministic: same text, same vector


def test_llamaindex_embedding_adapter(clock) -> None:
    from llama_index.core.embeddings import MockEmbedding

    emb = as_embedder(MockEmbedding(embed_dim=16))
    assert isinstance(emb, LlamaIndexEmbedder)
    vecs = emb.embed(["a", "", "b"])
    assert vecs.shape == (3, 16) and not vecs[1].any()
    np.testing.assert_allclose(np.linalg.norm(vecs[[0, 2]], axis=1), 1.0, rtol=1e-6)
    mem = ScrubJayMemory(embedder=MockEmbedding(embed_dim=16), clock=clock)
    mem.add("anything")
    assert len(mem.search("anything", k=1)) == 1


def test_callable_adapter_and_bad_outputs() -> None:
    assert isinstance(as_embedder(lambda texts: np.ones((len(texts), 4))), CallableEmbedder)
    with pytest.raises(EmbeddingError, match="one vector per text"):
        as_embedder(lambda texts: np.ones((1, 4))).embed(["a", "b"])
    with pytest.raises(EmbeddingError, match="NaN"):
        as_embedder(lambda texts: np.full((len(texts), 4), np.inf)).embed(["a"])

    def boom(texts: list[str]) -> None:
        raise OSError("model file missing")

    with pytest.raises(EmbeddingError, match="model file missing"):
        as_embedder(boom).embed(["a"])
    with pytest.raises(InvalidInputError, match="'embedder' parameter"):
        as_embedder(42)


def test_bundled_model_is_loaded_offline() -> None:
    emb = WordLlamaEmbedder()
    vecs = emb.embed(["office is on floor 2 of building A", "office moved out of building A",
                      "my cat likes fish", ""])
    assert vecs.shape == (4, 256)
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2])
    assert not vecs[3].any()


@pytest.mark.parametrize("configured", [False, True])
def test_bundled_model_leaves_the_applications_logging_alone(configured: bool) -> None:
    """``import wordllama`` calls ``logging.basicConfig(level=INFO)``; loading the bundled
    model must not switch on INFO logs (say, one line per Chroma HTTP request) in the
    application, nor drop the handlers it configured. Run in a fresh interpreter, where
    wordllama is not imported yet."""
    import subprocess
    import sys
    import textwrap

    setup = "logging.basicConfig(level=logging.DEBUG)" if configured else ""
    code = textwrap.dedent(f"""
        import logging
        {setup}
        root = logging.getLogger()
        before = (list(root.handlers), root.level)
        from scrubjay.embedding import WordLlamaEmbedder
        WordLlamaEmbedder().embed(["the boiler pressure is fine"])
        import wordllama  # noqa: F401 - imported by the embedder
        assert (list(root.handlers), root.level) == before, (root.handlers, root.level, before)
        print("kept")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "kept", out.stderr


def test_each_distinct_text_reaches_the_model_once(clock) -> None:
    """A batch that repeats a context (one conversation) embeds it once: a remote embedder
    (Ollama) is called for each distinct text only, and every row is still the text's own."""
    seen: list[list[str]] = []

    def model(texts: list[str]) -> np.ndarray:
        seen.append(list(texts))
        return np.stack([np.cos(np.arange(16) * (1 + sum(map(ord, t)) % 97)) for t in texts])

    emb = CallableEmbedder(model, name="callable:counting")
    texts = ["standup", "", "standup", "retro", "standup", "  ", "retro"]
    rows = emb.embed(texts)
    assert seen == [["standup", "retro"]]
    assert np.array_equal(rows[0], rows[2]) and np.array_equal(rows[0], rows[4])
    assert np.array_equal(rows[3], rows[6]) and not np.array_equal(rows[0], rows[3])
    assert not rows[1].any() and not rows[5].any()
    seen.clear()
    mem = ScrubJayMemory(embedder=emb, clock=clock)
    mem.add_many([{"text": f"note {i}", "context": "the weekly standup"} for i in range(6)])
    contexts = [t for call in seen for t in call if t == "the weekly standup"]
    assert contexts == ["the weekly standup"]
    mem.close()


def test_bundled_model_gives_wordllamas_own_vectors_without_its_padded_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled embedder pools the token rows itself (grouped by token count, about three
    times faster than wordllama's padded batches) instead of calling
    ``WordLlamaInference.embed``: the same floats,
    for sentences, non-ASCII text, punctuation only, and texts longer than one gather."""
    from scrubjay import embedding

    emb = WordLlamaEmbedder()
    model = emb._model()
    texts = ["the boiler pressure is fine", "I'm parked outside gate B for ten minutes",
             "héllo wörld ☃ 🎉", "...", "a", "\u212a kelvin", "word " * 20_000,
             "my sister is a nurse in Leeds", "the boiler pressure is fine today"] * 3
    want = model.embed(texts, norm=False)
    monkeypatch.setattr(type(model), "embed", lambda *a, **k: pytest.fail("padded path used"))
    monkeypatch.setattr(embedding, "_ENCODE_CHUNK", 4)  # several tokenizer calls
    got = emb._raw(texts, False)
    np.testing.assert_array_equal(got, want)
    for i in (0, 3, 6):  # one text at a time (a query): its own short path, the same floats
        np.testing.assert_array_equal(emb._raw([texts[i]], True), want[i:i + 1])
    out = emb.embed(texts)
    assert out.shape == (len(texts), 256)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
