"""The lexical channel inside the memory: fused ranking, the breakdown, the index's life cycle
(reopen, a failed or killed write, delete, purge, forget) and bad queries, on every backend
that has it."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from scrubjay import ScrubJayConfig, ScrubJayMemory, SearchConfig
from scrubjay.errors import ConfigError
from scrubjay.lexical import LexicalIndex, tokenize
from scrubjay.testing import HashEmbedder

T0 = 1_764_000_000.0

# Flight codes: a hashing embedder of words sees each code as one unrelated word, so dense
# relevance between "LH4417" and the memory holding it is that of any other flight memory.
FLIGHTS = [f"Booked flight {code} to {city} for the conference"
           for code, city in [("LH4417", "Berlin"), ("BA2290", "London"), ("AF1187", "Paris"),
                              ("KL0643", "Amsterdam"), ("IB3321", "Madrid"),
                              ("LX1602", "Zurich"), ("OS0221", "Vienna"),
                              ("SK1470", "Oslo")]]


def _dictionary_holds(folder: Path, word: str) -> bool:
    """Whether a term is in the default namespace's term dictionary on disk (deleted
    documents' terms included; tantivy compresses it, so a byte scan cannot tell)."""
    import tantivy

    path = LexicalIndex.namespace_dir(folder, "default") / "index"
    terms = tantivy.Index.open(str(path)).searcher().terms_with_prefix("body", word)
    return any(t == word for t, _ in terms)


def _fill(mem: ScrubJayMemory) -> None:
    mem.add_many([{"text": t, "at": T0 + 60 * i} for i, t in enumerate(FLIGHTS)])


def test_a_code_in_the_query_finds_its_memory_and_the_hit_says_why(tmp_path: Path) -> None:
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64))
    _fill(mem)
    for text in FLIGHTS:
        code = text.split()[2]
        hits = mem.search(f"which flight is {code}?", at=T0 + 3600, k=3)
        assert hits[0].text == text
        assert hits[0].lexical > 0.9  # nearly all of the query's information
        assert all(h.lexical < 0.5 for h in hits[1:])  # "flight" only
        dense = sum(hits[0].weights[:2]) and (
            (hits[0].weights[0] * hits[0].what + hits[0].weights[1] * hits[0].where)
            / (hits[0].weights[0] + hits[0].weights[1]))
        lam = mem.config.search.lexical_weight
        assert hits[0].lexical_weight == lam
        fused = (1 - lam) * dense + lam * hits[0].lexical
        assert hits[0].score == pytest.approx(
            fused * hits[0].record.value / mem.config.decay.default_value
            * hits[0].time_factor)
    mem.close()


def test_without_the_lexical_channel_dense_relevance_alone_ranks(tmp_path: Path) -> None:
    """The feature's own baseline: without the lexical channel the code does not decide."""
    cfg = ScrubJayConfig(search=SearchConfig(lexical=False))
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64), config=cfg)
    _fill(mem)
    firsts = [mem.search(f"which flight is {t.split()[2]}?", at=T0 + 3600, k=1)[0].text
              for t in FLIGHTS]
    assert sum(f == t for f, t in zip(firsts, FLIGHTS, strict=True)) < len(FLIGHTS)
    assert all(h.lexical == 0.0 for h in mem.search("LH4417", at=T0 + 3600, k=8))
    mem.close()


def test_lexical_weight_is_validated() -> None:
    with pytest.raises(ConfigError, match="lexical_weight"):
        SearchConfig(lexical_weight=1.5)
    with pytest.raises(ConfigError, match="lexical"):
        SearchConfig(lexical="yes")  # type: ignore[arg-type]


def test_delete_forget_and_purge_reach_the_lexical_index(tmp_path: Path) -> None:
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64))
    _fill(mem)
    gone = mem.search("LH4417", at=T0 + 3600, k=1)[0]
    mem.delete(gone.id)
    assert all(h.id != gone.id and h.lexical < 0.5
               for h in mem.search("LH4417", at=T0 + 3600, k=8))
    folder = tmp_path / "s" / "scrubjay-lexical"
    assert _dictionary_holds(folder, "lh4417")  # a delete alone leaves the term in the files
    assert mem.purge() is True
    assert not _dictionary_holds(folder, "lh4417")  # the purge rewrote the index without it
    assert _dictionary_holds(folder, "ba2290")
    assert mem.search("BA2290", at=T0 + 3600, k=1)[0].lexical > 0.9
    mem.forget_namespace()
    mem.add("Booked flight LH4417 again", at=T0 + 7200)
    hits = mem.search("LH4417", at=T0 + 7300, k=5)
    assert [h.text for h in hits] == ["Booked flight LH4417 again"]
    assert hits[0].lexical > 0.9
    mem.close()


def test_reopen_keeps_the_index_and_a_lost_one_is_rebuilt(tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64))
    _fill(mem)
    mem.close()
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64))
    assert mem.search("AF1187", at=T0 + 3600, k=1)[0].lexical > 0.9
    mem.close()
    ns_dir = LexicalIndex.namespace_dir(tmp_path / "s" / "scrubjay-lexical", "default")
    (ns_dir / "manifest.json").unlink()
    with caplog.at_level(logging.WARNING, logger="scrubjay.lexical"):
        mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64))
    assert "rebuilt" in caplog.text
    assert mem.search("AF1187", at=T0 + 3600, k=1)[0].text == FLIGHTS[2]
    mem.close()


def test_a_failed_index_write_keeps_the_memory_and_the_next_open_repairs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64))
    _fill(mem)

    def full_disk(self: LexicalIndex, ids: object, texts: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(LexicalIndex, "add", full_disk)
    with caplog.at_level(logging.WARNING, logger="scrubjay"):
        rec = mem.add("Booked flight QF0001 to Sydney", at=T0 + 3600)
    assert "lexical index" in caplog.text and "QF0001" not in caplog.text
    assert mem.get(rec.id).text == "Booked flight QF0001 to Sydney"  # stored all the same
    hits = mem.search("QF0001", at=T0 + 7200, k=3)  # dense relevance alone meanwhile
    assert all(h.lexical == 0.0 for h in hits)
    mem.close()
    monkeypatch.undo()
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64))
    hit = mem.search("QF0001", at=T0 + 7200, k=1)[0]
    assert hit.id == rec.id and hit.lexical > 0.9
    mem.close()


_WRITER = textwrap.dedent("""
    import sys
    from scrubjay import ScrubJayMemory
    from scrubjay.testing import HashEmbedder
    mem = ScrubJayMemory(path=sys.argv[1], embedder=HashEmbedder(dim=64))
    i = len(mem)
    while True:
        mem.add(f"parcel code ZQ{i:05d} arrived", at=1764000000.0 + i)
        print(i, flush=True)
        i += 1
""")


@pytest.mark.slow
def test_sigkill_during_adds_leaves_every_acknowledged_memory_findable(tmp_path: Path) -> None:
    store = tmp_path / "s"
    acknowledged: set[int] = set()
    for trial in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(store)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        seen = 0
        while seen < 5 + 3 * trial and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line:
                acknowledged.add(int(line))
                seen += 1
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    mem = ScrubJayMemory(path=store, embedder=HashEmbedder(dim=64))
    for i in sorted(acknowledged):
        hit = mem.search(f"ZQ{i:05d}", at=T0 + 10_000, k=1)[0]
        assert hit.text == f"parcel code ZQ{i:05d} arrived" and hit.lexical > 0.9
    mem.close()


@pytest.mark.parametrize("query", [
    "the and of", "?!...", "   ", "x" * 10_000, "飞机 LH4417", "✈️ 🙂", "東京",
])
def test_bad_queries_still_answer(tmp_path: Path, query: str) -> None:
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64))
    _fill(mem)
    mem.add("我在东京大学读书", at=T0 + 1000)
    mem.add("good news ✈️", at=T0 + 1001)
    if not query.strip():
        query = query + "a"  # an empty query is refused by the facade; "a" is a stop word
    hits = mem.search(query, at=T0 + 3600, k=3)
    assert len(hits) == 3
    terms = set(tokenize(query))
    if not terms:
        assert all(h.lexical == 0.0 for h in hits)
    if "lh4417" in terms:
        assert hits[0].text == FLIGHTS[0]
    if "東京" in query:
        assert hits[0].text == "我在东京大学读书" or hits[0].lexical == 0.0
    if "✈" in query:
        assert hits[0].text == "good news ✈️"
    mem.close()


@pytest.mark.parametrize("mirror", [True, None], ids=["mirror", "no-mirror"])
def test_a_server_client_sees_another_process_words(chroma_server: tuple[str, int],
                                                    mirror: bool | None) -> None:
    """Server mode, with a mirror and without one (the default): another client's adds and
    deletes reach this one's lexical channel before its next search, and a client opened on
    a namespace that holds memories builds its index from their texts."""
    import uuid

    import chromadb
    from scrubjay.changelog import LOG_KEEP_S

    host, port = chroma_server
    cfg = ScrubJayConfig(search=SearchConfig(mirror=mirror))
    ns = f"lex-{uuid.uuid4().hex[:8]}"

    def client() -> ScrubJayMemory:
        return ScrubJayMemory(client=chromadb.HttpClient(host=host, port=port), namespace=ns,
                              embedder=HashEmbedder(dim=64), config=cfg)

    a, b = client(), client()
    assert (type(b._backend).__name__ == "ServerBackend") == (mirror is None)
    _fill(a)
    hit = b.search("KL0643", at=T0 + 3600, k=1)[0]
    assert hit.text == FLIGHTS[3] and hit.lexical > 0.9
    assert hit.lexical_weight == cfg.search.lexical_weight
    a.delete(hit.id)
    assert all(h.id != hit.id for h in b.search("KL0643", at=T0 + 3600, k=8))
    index = b._backend._lexical.index
    assert index is not None and hit.id not in index and len(index) == len(FLIGHTS) - 1
    c = client()  # opened on stored memories: its index is read from their texts
    assert c.search("SK1470", at=T0 + 3600, k=1)[0].lexical > 0.9
    # a client whose last sync is older than the log keeps: it rebuilds its index whole
    cursor = c._backend._log_cursor
    assert cursor is not None
    cursor.synced_at -= LOG_KEEP_S
    a.add("Booked flight TP0099 to Lisbon", at=T0 + 7200)
    found = c.search("TP0099", at=T0 + 7300, k=1)[0]
    assert found.text == "Booked flight TP0099 to Lisbon" and found.lexical > 0.9
    a.forget_namespace()
    for m in (a, b, c):
        m.close()


def test_a_local_store_without_a_mirror_ranks_with_the_lexical_channel(tmp_path: Path) -> None:
    """``SearchConfig(mirror=False)`` over a folder: the server backend on local Chroma, its
    lexical index built in RAM at open."""
    cfg = ScrubJayConfig(search=SearchConfig(mirror=False))
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64), config=cfg)
    assert type(mem._backend).__name__ == "ServerBackend"
    _fill(mem)
    mem.close()
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(dim=64), config=cfg)
    for text in FLIGHTS:
        hit = mem.search(text.split()[2], at=T0 + 3600, k=1)[0]
        assert hit.text == text and hit.lexical > 0.9
    mem.delete(hit.id)
    assert all(h.id != hit.id and h.lexical < 0.5
               for h in mem.search(text.split()[2], at=T0 + 3600, k=8))
    mem.forget_namespace()
    assert mem.search("LH4417", at=T0 + 3600, k=3) == []
    mem.close()


def test_a_server_lexical_hit_deleted_behind_the_index_is_skipped(chroma_server: tuple[str, int]
                                                                  ) -> None:
    """A lexical hit whose rows went from Chroma before the index heard of it (another client's
    delete, not yet read from the change log): Chroma refuses a query restricted to an id it
    lacks, so the search reads the hits another way and answers without the gone memory."""
    import uuid

    import chromadb

    host, port = chroma_server
    mem = ScrubJayMemory(client=chromadb.HttpClient(host=host, port=port),
                         namespace=f"lex-{uuid.uuid4().hex[:8]}", embedder=HashEmbedder(dim=64))
    _fill(mem)
    mem.add_many([{"text": f"Booked flight LH4417 again for {ctx or 'later'}", "context": ctx,
                   "at": T0 + 600} for ctx in ("", "the conference")])
    gone = mem.search("LH4417", at=T0 + 3600, k=1)[0]
    mem._store.what.delete(ids=[gone.id])  # behind scrubjay's back: the index still holds it
    mem._store.where.delete(ids=[gone.id])
    for ctx in ("", "the conference"):
        hits = mem.search("LH4417", context=ctx, at=T0 + 3600, k=3)
        assert gone.id not in [h.id for h in hits] and hits[0].lexical > 0.5
    mem.forget_namespace()
    mem.close()
