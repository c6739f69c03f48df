"""The lexical channel (scrubjay.lexical) and the fusion (scrubjay.fusion).

Tokenisation on hostile input, add/delete/query, persistence, rebuild on a mismatch, a SIGKILL
during writes, the purge byte scan, and the fusion against its slow reference.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from scrubjay.errors import InvalidInputError, StoreError, StoreLockedError
from scrubjay.fusion import (
    fuse,
    fuse_reference,
    lexical_score,
    weighted_rrf,
    weighted_rrf_reference,
)
from scrubjay.lexical import (
    COMMIT_DELAY_S,
    MAX_QUERY_TOKENS,
    LexicalIndex,
    id_checksum,
    query_terms,
    tokenize,
)

ROWS = [
    ("m1", "I parked the car at spot D3 on level two"),
    ("m2", "Meeting moved to room 2.20 at 10:30"),
    ("m3", "My flight is LH123 to Frankfurt"),
    ("m4", "Dinner at Zuni Cafe with Mel"),
    ("m5", "我喜欢北京烤鸭"),
    ("m6", "東京タワーに行きました"),
    ("m7", "the party was great 🎉🎉 and the pizza 🍕"),
]


def _ids(rows: list[tuple[str, str]]) -> list[str]:
    return [i for i, _ in rows]


# -- tokenisation -------------------------------------------------------------------------


def test_tokenize_keeps_codes_and_numbers_whole() -> None:
    assert tokenize("spot D3, room 2.20 at 10:30, flight LH123, 1,000 km, covid-19") == [
        "spot", "d3", "room", "2.20", "10:30", "flight", "lh123", "1,000", "km", "covid-19"]


def test_tokenize_normalises_and_lowercases() -> None:
    # full-width letters and digits (NFKC), case folding, a trailing full stop
    assert tokenize("ＬＨ１２３ Straße Zuni.") == ["lh123", "strasse", "zuni"]
    assert tokenize("well-known e-mail") == ["well", "known", "e", "mail"]


def test_stop_words_and_punctuation_only() -> None:
    assert tokenize("the and of to is it") == []
    assert tokenize("?!... -- ,,, ;;") == []
    assert tokenize("") == []


def test_chinese_and_japanese_bigrams() -> None:
    assert tokenize("我喜欢北京烤鸭") == ["我喜", "喜欢", "欢北", "北京", "京烤", "烤鸭"]
    assert tokenize("東京タワー") == ["東京", "京タ", "タワ", "ワー"]
    assert tokenize("猫") == ["猫"]
    # mixed with Latin text: each run on its own
    assert tokenize("Tokyo東京2026") == ["tokyo", "東京", "2026"]


def test_emoji_are_tokens() -> None:
    assert tokenize("great 🎉🎉 pizza 🍕") == ["great", "🎉", "🎉", "pizza", "🍕"]
    assert tokenize("👍🏽") == ["👍"]  # the skin tone modifier is dropped
    assert tokenize("👨‍👩‍👧") == ["👨", "👩", "👧"]  # zero-width joiners dropped


def test_long_query_is_bounded() -> None:
    words = [f"word{i}" for i in range(3000)]
    text = " ".join(words)
    assert len(text.encode()) > 10_000
    terms = query_terms(text)
    assert terms == words[:MAX_QUERY_TOKENS]
    assert query_terms("a a b b c") == ["b", "c"]  # "a" is a stop word; duplicates once


# -- queries ------------------------------------------------------------------------------


@pytest.fixture
def index() -> LexicalIndex:
    return LexicalIndex.in_memory(ROWS, namespace="t")


@pytest.mark.parametrize(("query", "best"), [
    ("where did I park? spot D3", "m1"),
    ("which room, 2.20?", "m2"),
    ("flight lh123", "m3"),
    ("zuni cafe", "m4"),
    ("北京烤鸭", "m5"),
    ("東京タワー", "m6"),
    ("🍕", "m7"),
    ("ＬＨ１２３", "m3"),
])
def test_query_finds_the_memory(index: LexicalIndex, query: str, best: str) -> None:
    ids, scores = index.query(query, 3)
    assert ids[0] == best
    assert scores == sorted(scores, reverse=True) and scores[0] > 0


@pytest.mark.parametrize("query", ["the and of", "?!?", "", "   ", "and 🙂 the"])
def test_queries_without_terms_or_matches_answer_empty(index: LexicalIndex, query: str) -> None:
    assert index.query(query, 5) == ([], [])


def test_ten_kilobyte_query_answers(index: LexicalIndex) -> None:
    ids, _ = index.query("zuni " + "lorem ipsum dolor " * 700, 5)
    assert ids == ["m4"]


def test_n_is_honoured_and_zero_is_empty(index: LexicalIndex) -> None:
    assert len(index.query("the party pizza spot room flight zuni", 2)[0]) == 2
    assert index.query("zuni", 0) == ([], [])


def test_add_replaces_and_delete_removes(index: LexicalIndex) -> None:
    assert len(index) == len(ROWS)
    index.add(["m4"], ["Lunch at Chez Panisse"])  # same id: replaced, not doubled
    assert len(index) == len(ROWS)
    assert index.query("zuni", 5) == ([], [])
    assert index.query("panisse", 5)[0] == ["m4"]
    index.delete(["m4", "unknown"])
    assert len(index) == len(ROWS) - 1 and "m4" not in index
    assert index.query("panisse", 5) == ([], [])
    assert index.checksum == id_checksum(i for i in _ids(ROWS) if i != "m4")
    with pytest.raises(InvalidInputError):
        index.add(["a", "b"], ["only one"])


def test_clear_and_close(index: LexicalIndex) -> None:
    index.clear()
    assert len(index) == 0 and index.query("zuni", 5) == ([], [])
    index.add(["x"], ["zuni again"])
    assert index.query("zuni", 5)[0] == ["x"]
    index.close()
    with pytest.raises(StoreError):
        index.query("zuni", 5)


def test_checksum_is_order_independent() -> None:
    assert id_checksum(["a", "b", "c"]) == id_checksum(["c", "a", "b"])
    assert id_checksum(["a", "b"]) != id_checksum(["a", "c"])


# -- persistence --------------------------------------------------------------------------


class _Store:
    """What the memory's store gives the index: its ids and its rows."""

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.rows = dict(rows)
        self.rows_calls = 0

    def ids(self) -> list[str]:
        return list(self.rows)

    def all_rows(self) -> list[tuple[str, str]]:
        self.rows_calls += 1
        return list(self.rows.items())

    def open(self, folder: Path, namespace: str = "ns") -> LexicalIndex:
        return LexicalIndex.open(folder, namespace, self.ids, self.all_rows)


def test_round_trip_without_rebuild(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = _Store([])
    ix = store.open(tmp_path)  # empty: created
    ix.add(_ids(ROWS), [t for _, t in ROWS])
    ix.delete(["m2"])
    store.rows = dict(ROWS)
    del store.rows["m2"]
    before = {q: ix.query(q, 5) for q in ("spot d3", "zuni", "北京", "🍕", "room 2.20")}
    ix.close()
    store.rows_calls = 0
    with caplog.at_level(logging.WARNING, logger="scrubjay.lexical"):
        again = store.open(tmp_path)
    assert store.rows_calls == 0 and not caplog.records  # the manifest matched: no rebuild
    assert {q: again.query(q, 5) for q in before} == before
    assert len(again) == len(ROWS) - 1
    again.add(["m9"], ["a new note about spot D3"])  # writable after reopen
    assert set(again.query("d3", 5)[0]) == {"m1", "m9"}
    again.close()


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    store = _Store(ROWS)
    ix = store.open(tmp_path)
    with pytest.raises(StoreLockedError):
        store.open(tmp_path)
    ix.close()
    store.open(tmp_path).close()  # free again once closed


def test_namespaces_share_a_folder_apart(tmp_path: Path) -> None:
    a, b = _Store([("x", "alpha words")]), _Store([("x", "beta words")])
    ia, ib = a.open(tmp_path, "A"), b.open(tmp_path, "B")
    assert ia.query("alpha", 5)[0] == ["x"] and ib.query("alpha", 5) == ([], [])
    ia.close()
    ib.close()


def test_rebuild_when_the_store_differs(tmp_path: Path,
                                        caplog: pytest.LogCaptureFixture) -> None:
    store = _Store(ROWS)
    store.open(tmp_path).close()
    assert store.rows_calls == 1  # built from the rows
    store.rows["m8"] = "a memory the index never saw: quokka"
    del store.rows["m1"]
    with caplog.at_level(logging.WARNING, logger="scrubjay.lexical"):
        ix = store.open(tmp_path)
    assert store.rows_calls == 2 and "rebuilt" in caplog.text
    assert ix.query("quokka", 5)[0] == ["m8"] and ix.query("spot d3", 5) == ([], [])
    ix.close()


def test_rebuild_when_the_files_are_damaged(tmp_path: Path) -> None:
    store = _Store(ROWS)
    store.open(tmp_path).close()
    folder = LexicalIndex.namespace_dir(tmp_path, "ns")
    (folder / "manifest.json").write_text("{not json")
    ix = store.open(tmp_path)
    assert store.rows_calls == 2 and ix.query("zuni", 5)[0] == ["m4"]
    ix.close()
    for f in (folder / "index").iterdir():
        if f.name.endswith(".idx") or f.name.endswith(".term") or f.name == "meta.json":
            f.write_bytes(b"garbage")
    ix = store.open(tmp_path)
    assert store.rows_calls == 3 and ix.query("zuni", 5)[0] == ["m4"]
    ix.close()


_CHILD = textwrap.dedent("""
    import os, sys
    from scrubjay.lexical import LexicalIndex
    folder, store_file = sys.argv[1], sys.argv[2]
    def ids():
        try:
            return [l for l in open(store_file).read().split("\\n") if l]
        except FileNotFoundError:
            return []
    rows = lambda: [(i, f"note {i} about topic{i}") for i in ids()]
    ix = LexicalIndex.open(folder, "crash", ids, rows)
    n = len(ids())
    print("ready", flush=True)
    while True:
        batch = [f"m{n + j}" for j in range(20)]
        with open(store_file, "a") as fh:  # the store (Chroma) is written first
            fh.write("\\n".join(batch) + "\\n"); fh.flush(); os.fsync(fh.fileno())
        ix.add(batch, [f"note {i} about topic{i}" for i in batch])
        if n and n % 100 == 0:
            ix.delete([f"m{n - 50}"])
            lines = [l for l in open(store_file).read().split("\\n") if l and l != f"m{n - 50}"]
            with open(store_file + ".tmp", "w") as fh:  # the store's delete: atomic
                fh.write("\\n".join(lines) + "\\n"); fh.flush(); os.fsync(fh.fileno())
            os.replace(store_file + ".tmp", store_file)
        n += 20
""")


@pytest.mark.parametrize("delay_s", [0.05, 0.3, 0.8])
def test_sigkill_during_writes_then_reopen_repairs(tmp_path: Path, delay_s: float) -> None:
    store_file = tmp_path / "store-ids.txt"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path / "lex"),
                             str(store_file)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay_s)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    ids = [line for line in store_file.read_text().split("\n") if line] \
        if store_file.exists() else []
    ix = LexicalIndex.open(tmp_path / "lex", "crash", lambda: ids,
                           lambda: [(i, f"note {i} about topic{i}") for i in ids])
    assert ix.checksum == id_checksum(ids)
    for i in (ids[0], ids[len(ids) // 2], ids[-1]) if ids else ():
        assert ix.query(f"topic{i}", 1)[0] == [i]
    assert ix.query("topicnothere", 5) == ([], [])
    ix.close()


# -- group commit -------------------------------------------------------------------------


def test_a_burst_of_adds_shares_commits_and_every_read_sees_them(tmp_path: Path) -> None:
    store = _Store(ROWS)
    ix = store.open(tmp_path)
    before = ix.commits
    for i in range(50):  # adds in a loop: staged, no commit of their own
        ix.add([f"b{i}"], [f"burst note {i} code Q{i}X"])
    assert ix.commits - before <= 1  # at most the timer's, if it ran meanwhile
    assert ix.query("q49x", 5)[0] == ["b49"]  # a read commits what is staged first
    ix.delete(["b49"])
    assert ix.query("q49x", 5) == ([], [])  # and sees a staged delete
    for i in range(20):  # add then read, as a check after each write would
        ix.add([f"c{i}"], [f"checked note R{i}Y"])
        assert ix.query(f"r{i}y", 5)[0] == [f"c{i}"]
        assert ix.idf_sum(f"r{i}y") > 0
    ix.close()


def test_a_restored_replacement_leaves_the_scores_as_they_were(tmp_path: Path) -> None:
    """A failed replacement deletes a memory and writes it back: the index must score as
    before (tantivy keeps a deleted document in BM25's statistics until a merge)."""
    store = _Store([])
    ix = store.open(tmp_path)
    ix.add(_ids(ROWS), [t for _, t in ROWS])  # one commit: one segment of seven
    before = ix.query("parked at spot d3 level", 7), ix.idf_sum("parked spot zuni")
    commits = ix.commits
    ix.delete(["m1"])
    ix.add(["m1"], [dict(ROWS)["m1"]])
    assert (ix.query("parked at spot d3 level", 7), ix.idf_sum("parked spot zuni")) == before
    assert ix.commits == commits  # nothing to apply: no commit
    ix.add(["m1"], ["now a memory about a quokka"])  # a real replacement still lands
    assert ix.query("quokka", 5)[0] == ["m1"] and ix.query("spot d3", 5)[0] != ["m1"]
    ix.close()


def test_the_timer_commits_what_is_staged_without_a_read(tmp_path: Path) -> None:
    store = _Store(ROWS)
    ix = store.open(tmp_path)
    before = ix.commits
    ix.add(["t1"], ["a note the timer commits: wombat"])
    deadline = time.monotonic() + 20 * COMMIT_DELAY_S + 5
    while ix.commits == before and time.monotonic() < deadline:
        time.sleep(COMMIT_DELAY_S / 4)
    assert ix.commits == before + 1
    manifest = (LexicalIndex.namespace_dir(tmp_path, "ns") / "manifest.json").read_text()
    assert str(len(ROWS) + 1) in manifest  # committed and recorded on disk
    ix.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_does_not_commit_its_parents_staged_changes(tmp_path: Path) -> None:
    from scrubjay import lexical

    store = _Store(ROWS)
    ix = store.open(tmp_path)
    manifest = LexicalIndex.namespace_dir(tmp_path, "ns") / "manifest.json"
    before = manifest.read_text()
    ix.add(["f1"], ["staged before the fork: narwhal"])
    pid = os.fork()
    if pid == 0:  # the child's exit hook must leave the parent's writer alone (its
        code = 1  # commit there panics in tantivy: the writer's threads did not survive)
        try:
            lexical._commit_at_exit()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert manifest.read_text() == before  # nothing committed by the child
    assert ix.query("narwhal", 5)[0] == ["f1"]  # the parent commits it
    assert manifest.read_text() != before
    ix.close()


_EXIT_CHILD = textwrap.dedent("""
    import os, signal, sys
    from scrubjay.lexical import LexicalIndex
    folder, how = sys.argv[1], sys.argv[2]
    ix = LexicalIndex.open(folder, "exit", lambda: [], lambda: [])
    ix.add(["m1"], ["a note staged at exit: platypus"])
    if how == "kill":  # within the commit delay
        os.kill(os.getpid(), signal.SIGKILL)
    # "exit": the interpreter ends without close(); its atexit hook commits
""")


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_staged_changes_at_exit_are_committed_and_at_a_kill_rebuilt(
        tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture) -> None:
    proc = subprocess.run([sys.executable, "-c", _EXIT_CHILD, str(tmp_path), how],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == (-signal.SIGKILL if how == "kill" else 0), proc.stderr
    calls: list[int] = []

    def rows() -> list[tuple[str, str]]:
        calls.append(1)
        return [("m1", "a note staged at exit: platypus")]

    with caplog.at_level(logging.WARNING, logger="scrubjay.lexical"):
        ix = LexicalIndex.open(tmp_path, "exit", lambda: ["m1"], rows)
    assert ix.query("platypus", 5)[0] == ["m1"]
    assert bool(calls) == (how == "kill")  # a clean exit needs no rebuild; a kill does
    ix.close()


# -- purge --------------------------------------------------------------------------------


def _files_holding(folder: Path, needle: bytes) -> list[Path]:
    return [f for f in folder.rglob("*") if f.is_file() and needle in f.read_bytes()]


def _dictionary_holds(folder: Path, namespace: str, word: str) -> bool:
    """Whether the term is in any segment's term dictionary on disk (deleted documents'
    terms included: tantivy compresses its dictionary, so a plain byte scan cannot see a
    term even while it is live; reading the dictionary can)."""
    import tantivy

    path = LexicalIndex.namespace_dir(folder, namespace) / "index"
    if not path.exists():
        return False
    terms = tantivy.Index.open(str(path)).searcher().terms_with_prefix("body", word)
    return any(t == word for t, _ in terms)


def test_purge_clear_and_drop_leave_no_trace(tmp_path: Path) -> None:
    secret = "xylophonequokka"
    store = _Store([*ROWS, ("s1", f"the code word is {secret}")])
    ix = store.open(tmp_path)
    ix.add(["s2"], [f"{secret} again"])
    assert _dictionary_holds(tmp_path, "ns", secret)
    ix.delete(["s1", "s2"])
    del store.rows["s1"]
    assert ix.query(secret, 5) == ([], [])
    assert _dictionary_holds(tmp_path, "ns", secret)  # a delete alone leaves the term
    ix.purge(store.all_rows)
    assert not _dictionary_holds(tmp_path, "ns", secret)
    assert _files_holding(tmp_path, secret.encode()) == []
    assert ix.query("zuni", 5)[0] == ["m4"]  # the live memories survive
    assert _dictionary_holds(tmp_path, "ns", "zuni")

    ix.add(["s3"], [f"{secret} once more"])
    ix.clear()
    assert not _dictionary_holds(tmp_path, "ns", secret)
    assert _files_holding(tmp_path, secret.encode()) == []
    assert len(ix) == 0
    ix.add(["s4"], [f"{secret} and more"])
    ix.drop()
    assert _files_holding(tmp_path, secret.encode()) == []
    assert not LexicalIndex.namespace_dir(tmp_path, "ns").exists()
    assert list(tmp_path.iterdir()) == []


# -- fusion -------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_fuse_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 50
    dense = rng.uniform(-1, 1, n)
    bm25 = np.where(rng.random(n) < 0.6, 0.0, rng.exponential(3.0, n))
    for lam in (0.0, 0.3, 0.75, 1.0):
        fast = fuse(dense, lexical_score(bm25), lam)
        slow = fuse_reference(dense.tolist(), bm25.tolist(), lam)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
    assert np.all(fuse(dense, lexical_score(np.zeros(n)), 0.75) == 0.25 * dense)


@pytest.mark.parametrize("seed", range(5))
def test_weighted_rrf_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    rl = np.where(rng.random(n) < 0.5, 0, rng.permutation(n) + 1)
    rd = rng.permutation(n) + 1
    for k, w in ((60, 0.5), (10, 0.9), (1, 0.1)):
        np.testing.assert_allclose(weighted_rrf(rl, rd, k=k, lexical_weight=w),
                                   weighted_rrf_reference(rl.tolist(), rd.tolist(), k=k,
                                                          lexical_weight=w), atol=1e-15)


def test_fuse_rejects_a_weight_outside_the_unit_interval() -> None:
    with pytest.raises(ValueError, match="lexical_weight"):
        fuse([0.1], [0.2], 1.5)


def test_lexical_score_bounds() -> None:
    ell = lexical_score([5.0, 2.5, 0.0, -1.0])
    assert ell.tolist() == [1.0, 0.5, 0.0, 0.0]
    assert lexical_score([2.0], top=4.0).tolist() == [0.5]


def test_a_release_inside_acquire_does_not_deadlock(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory collected by the GC releases its index from ``__del__``, which can run while
    this thread is inside ``acquire`` (it hung a CI run): the release must not wait on the
    lock ``acquire`` holds."""
    import threading

    store = _Store([("a", "the red car")])
    first = LexicalIndex.acquire(tmp_path / "one", "ns", store.ids, store.all_rows)
    real_open = LexicalIndex.open.__func__  # type: ignore[attr-defined]

    def open_releasing(cls: type[LexicalIndex], *args: object) -> LexicalIndex:
        first.release()  # what a finaliser does, on this thread, mid-acquire
        return real_open(cls, *args)  # type: ignore[no-any-return]

    monkeypatch.setattr(LexicalIndex, "open", classmethod(open_releasing))
    out: list[LexicalIndex] = []
    worker = threading.Thread(target=lambda: out.append(LexicalIndex.acquire(
        tmp_path / "two", "ns", store.ids, store.all_rows)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "acquire deadlocked on a release made inside it"
    assert first._closed and len(out) == 1 and not out[0]._closed
    out[0].release()
