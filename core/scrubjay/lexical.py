"""The lexical channel: a BM25 full-text index of memory texts, kept beside Chroma.

Chroma's local mode has no sparse index, so the words of each memory are indexed here, with
`tantivy <https://github.com/quickwit-oss/tantivy-py>`_ (a persistent, incremental full-text
index with deletes; the choice between it and ``bm25s`` was measured, see docs/hybrid.md).
Scores are tantivy's BM25 (``k1 = 1.2``, ``b = 0.75``) over the tokens of :func:`tokenize`.

Tokenisation
------------
:func:`tokenize` turns a text into index terms, the same way for memories and queries:

1. Unicode NFKC normalisation (full-width ``ＬＨ１２３`` becomes ``LH123``, ligatures split),
   then case folding (``str.casefold``: lower case, ``ß`` -> ``ss``).
2. Letters and digits form words. Words joined by one of ``. , : / -`` stay one token when the
   joined span holds a digit, so numbers and codes are kept whole (``2.20``, ``10:30``,
   ``1,000``, ``covid-19``); without a digit they split (``well-known`` -> ``well``,
   ``known``). ``D3`` and ``LH123`` are words already. Apostrophes split (``Mel's`` ->
   ``mel``, ``s``; ``s`` is a stop word).
3. Chinese, Japanese and Korean runs (Han, Hiragana, Katakana, Hangul), written without spaces,
   become overlapping character bigrams (``东京大学`` -> ``东京``, ``京大``, ``大学``); a
   one-character run is its own token.
4. Each symbol character of Unicode category ``So`` (emoji, ``©``) is a token of its own; skin
   tone modifiers, variation selectors and zero-width joiners are dropped, so ``👍🏽`` is ``👍``.
5. The small English stop word list :data:`STOP_WORDS` is dropped; all other punctuation is a
   separator.

A query is cut to its first :data:`MAX_QUERY_TOKENS` distinct tokens (a 10 kB query costs as
much as a 128-word one), and one whose tokens are all stop words or punctuation has no lexical
hits (an empty answer, not an error).

Storage and consistency
-----------------------
:meth:`LexicalIndex.open` keeps one namespace in ``folder/ns-<sha256 of the namespace>/``: a
tantivy index (a stored ``id`` field and the unstored ``body`` terms) and ``manifest.json``
(the namespace, the number of ids and an order-independent checksum of the id set, written
atomically after each tantivy commit).

:meth:`~LexicalIndex.add` and :meth:`~LexicalIndex.delete` stage their changes in tantivy's
writer; the commit follows (group commit, as Lucene's refresh): on a background timer at most
:data:`COMMIT_DELAY_S` after the first staged change, at once when :data:`MAX_STAGED` changes
are staged, before any read (:meth:`~LexicalIndex.query` and :meth:`~LexicalIndex.idf_sum`
see every change made before them), and in :meth:`~LexicalIndex.flush`,
:meth:`~LexicalIndex.close` and at interpreter exit. A burst of adds thus shares one commit
(a commit costs about 10 ms on this machine, for one text or for a thousand), and the commit
of an agent's add runs while the agent does something else. Each commit is atomic: after a
SIGKILL at any point the index holds the last committed state. An index in RAM
(:meth:`~LexicalIndex.in_memory`) commits each change at once: its commit writes no file, so
there is no ``fsync`` to share. On open, the manifest is compared with the ids
the store holds (``expected_ids``) and with the index's document count; when they differ, or
the index cannot be read, the namespace is rebuilt from the ``(id, text)`` rows the store
gives (``rows``). A crash with changes staged, or between a tantivy commit and the manifest
write, therefore costs a rebuild, never a wrong answer. The caller writes the store (Chroma)
first and this index second:
the check compares id sets, so a crash between the two is seen through the ids. A text replaced
under an id the index already has is not seen by it: after a crash between the store's update
and the index's, the index keeps the old text for that id until :meth:`~LexicalIndex.purge`
or a rebuild, unless the caller re-adds the updated rows (e.g. from its change log) on open.

Deleting removes a memory from every answer at once; its terms stay in tantivy's segment files
until :meth:`~LexicalIndex.purge` rewrites the namespace from the live rows (as Chroma's own
files need ``purge()``); :meth:`~LexicalIndex.clear` and :meth:`~LexicalIndex.drop` remove the
files themselves. :meth:`LexicalIndex.in_memory` keeps everything in RAM (server mode: rebuilt
from Chroma's documents when a process opens the memory).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import math
import os
import re
import shutil
import threading
import unicodedata
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from .errors import InvalidInputError, StoreError, StoreLockedError

__all__ = [
    "COMMIT_DELAY_S",
    "MAX_QUERY_TOKENS",
    "MAX_STAGED",
    "STOP_WORDS",
    "LexicalIndex",
    "id_checksum",
    "query_terms",
    "tokenize",
]

logger = logging.getLogger(__name__)

MAX_QUERY_TOKENS = 128
"""Distinct query tokens kept, in order of first occurrence (chosen: a long question has about
30 content words; 128 bounds a pasted 10 kB query to a few milliseconds)."""

STOP_WORDS = frozenset("""
a an and are as at be been but by can could did do does doing for from had has have having he
her hers him his how i if in into is it its itself just me my myself no nor not of on or our
ours s she should so some such t than that the their theirs them then there these they this
those to too very was we were what when where which while who whom why will with would you
your yours ll re ve d m don doesn didn isn wasn aren weren won
""".split())  # noqa: SIM905  # a word list reads best as words
"""A small English stop word list (chosen: function words only, so that no name or content
word is ever dropped; the contraction tails ``s``, ``t``, ``ll``, ... are here because an
apostrophe splits a word)."""

COMMIT_DELAY_S = 0.2
"""Seconds from the first staged change to its background commit (chosen: an agent's turn,
an LLM call, takes seconds, so its add is committed before its next search; adds in a loop
come faster than this and share a commit; a SIGKILL within it costs a rebuild on open)."""

COMMIT_THREAD_NAME = "scrubjay-lexical-commit"
"""The name of the short-lived thread that runs a background commit."""

MAX_STAGED = 10_000
"""Staged changes that are committed at once, without waiting for the timer (chosen: bounds
the writer's buffered documents to a few MB, well inside :data:`WRITER_HEAP_BYTES`)."""

WRITER_HEAP_BYTES = 32_000_000
"""tantivy writer heap (chosen: its floor is 15 MB per thread; one thread)."""

_CJK = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
        "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f")
_TOKEN_RE = re.compile(
    rf"(?P<cjk>[{_CJK}]+)"
    rf"|(?P<word>[^\W_{_CJK}]+(?:[.,:/\-][^\W_{_CJK}]+)*)"
    r"|(?P<sym>[^\w\s])")
_SPLIT_RE = re.compile(r"[.,:/\-]")
_DIGIT_RE = re.compile(r"\d")


def tokenize(text: str) -> list[str]:
    """Index terms of ``text``, in order (see the module docstring for the rules).

    >>> tokenize("Parked at spot D3, room 2.20 -- flight LH123!")
    ['parked', 'spot', 'd3', 'room', '2.20', 'flight', 'lh123']
    >>> tokenize("东京大学 👍🏽 well-known")
    ['东京', '京大', '大学', '👍', 'well', 'known']
    >>> tokenize("the of and ?!")
    []
    """
    out: list[str] = []
    for m in _TOKEN_RE.finditer(unicodedata.normalize("NFKC", text).casefold()):
        kind = m.lastgroup
        tok = m.group()
        if kind == "cjk":
            out.extend([tok] if len(tok) == 1 else
                       [tok[i:i + 2] for i in range(len(tok) - 1)])
        elif kind == "word":
            if _DIGIT_RE.search(tok) is None and _SPLIT_RE.search(tok) is not None:
                out.extend(p for p in _SPLIT_RE.split(tok) if p and p not in STOP_WORDS)
            elif tok not in STOP_WORDS:
                out.append(tok)
        elif unicodedata.category(tok) == "So":
            out.append(tok)
    return out


def query_terms(text: str, max_tokens: int = MAX_QUERY_TOKENS) -> list[str]:
    """The distinct tokens of a query, first occurrences first, at most ``max_tokens``.

    >>> query_terms("room 2.20, room 2.20 and the room")
    ['room', '2.20']
    """
    return list(dict.fromkeys(tokenize(text)))[:max_tokens]


_MASK = (1 << 64) - 1


def _id_hash(id: str) -> int:
    return int.from_bytes(hashlib.blake2b(id.encode(), digest_size=8).digest(), "big")


def id_checksum(ids: Iterable[str]) -> tuple[int, int]:
    """``(count, checksum)`` of a set of ids: the sum of their 64-bit BLAKE2b hashes modulo
    2**64, so it does not depend on order and can be updated by adding and subtracting.

    >>> id_checksum(["a", "b"]) == id_checksum(["b", "a"])
    True
    """
    n = total = 0
    for i in ids:
        n += 1
        total = (total + _id_hash(i)) & _MASK
    return n, total


def _tantivy() -> Any:
    import tantivy

    return tantivy


def _schema() -> Any:
    tv = _tantivy()
    sb = tv.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
    return sb.build()


RowsFn = Callable[[], Iterable[tuple[str, str]]]
"""Gives every ``(id, text)`` row of a namespace (the store's documents)."""


class LexicalIndex:
    """A BM25 index of ``(id, text)`` pairs for one namespace; see the module docstring.

    Construct with :meth:`open` (a folder) or :meth:`in_memory`. Methods are thread-safe; one
    object writes a namespace folder at a time (tantivy's writer lock, released by the
    operating system when its process dies; a second :meth:`open` raises
    :class:`~scrubjay.errors.StoreLockedError`).

    >>> ix = LexicalIndex.in_memory([("m1", "parked at spot D3"), ("m2", "lunch at Zuni Cafe")])
    >>> ix.query("where is spot D3?", 5)[0]
    ['m1']
    >>> ix.query("the and of", 5)
    ([], [])
    """

    def __init__(self, *, index: Any, path: Path | None, namespace: str,
                 ids: set[str]) -> None:
        self._index = index
        self._path = path
        self._namespace = namespace
        self._schema = index.schema
        try:
            self._writer = index.writer(WRITER_HEAP_BYTES, 1)
        except ValueError as exc:
            raise StoreLockedError(f"another LexicalIndex writes {path} (in this process or "
                                   "another): close it first") from exc
        self._ids = ids
        self._count, self._checksum = id_checksum(ids)
        self._lock = threading.RLock()
        # committed ids -> hash of their indexed terms (None: committed before this object)
        self._hash: dict[str, int | None] = dict.fromkeys(ids)
        # staged changes, applied to tantivy at the commit: id -> (hash, terms) or None (gone)
        self._pending: dict[str, tuple[int, str] | None] = {}
        self._timer: threading.Timer | None = None
        self._commits = 0
        self._lock_fd: int | None = None
        self._closed = False
        self._failed = False  # a commit failed: refuse further calls until a reopen
        self._pid = os.getpid()  # a fork's child never commits its parent's writer
        self._shared_key: str | None = None
        _OPEN.add(self)

    # -- construction ---------------------------------------------------------------------

    @staticmethod
    def namespace_dir(folder: str | os.PathLike[str], namespace: str) -> Path:
        """Where :meth:`open` keeps ``namespace`` inside ``folder``."""
        digest = hashlib.sha256(namespace.encode()).hexdigest()[:16]
        return Path(folder) / f"ns-{digest}"

    @classmethod
    def in_memory(cls, rows: Iterable[tuple[str, str]] = (), *,
                  namespace: str = "") -> LexicalIndex:
        """An index held in RAM, filled with ``rows``."""
        ix = cls(index=_tantivy().Index(_schema()), path=None, namespace=namespace, ids=set())
        ix._add_rows(rows)
        return ix

    @classmethod
    def open(cls, folder: str | os.PathLike[str], namespace: str,
             expected_ids: Callable[[], Iterable[str]], rows: RowsFn) -> LexicalIndex:
        """Open (or create) ``namespace`` in ``folder``, consistent with the store.

        ``expected_ids()`` gives the ids the store holds; when their count or checksum differs
        from the manifest, the manifest from the index, or the index cannot be read, the
        namespace is rebuilt from ``rows()`` (logged at WARNING).
        """
        if not isinstance(namespace, str):
            raise InvalidInputError(f"The 'namespace' parameter of LexicalIndex.open must be a "
                                    f"str. Got {namespace!r} instead.")
        path = cls.namespace_dir(folder, namespace)
        lock = _lock(path)
        try:
            ix = cls._open_locked(path, namespace, expected_ids, rows)
        except BaseException:
            os.close(lock)
            raise
        ix._lock_fd = lock
        return ix

    @classmethod
    def acquire(cls, folder: str | os.PathLike[str], namespace: str,
                expected_ids: Callable[[], Iterable[str]], rows: RowsFn) -> LexicalIndex:
        """:meth:`open`, shared by every caller in this process over the same folder and
        namespace (several memories over one embedded store): the first call opens and checks
        the index, later ones get the same object; :meth:`release` closes it after the last."""
        key = str(cls.namespace_dir(Path(folder).resolve(), namespace))
        with _SHARED_LOCK:
            held = _SHARED.get(key)
            if held is not None and not held[0]._closed:
                held[1] += 1
                shared: LexicalIndex = held[0]
                return shared
            ix = cls.open(folder, namespace, expected_ids, rows)
            ix._shared_key = key
            _SHARED[key] = [ix, 1]
            return ix

    def release(self) -> None:
        """Give back an index from :meth:`acquire` (closed with its last holder); an index
        from :meth:`open` or :meth:`in_memory` is closed."""
        key = self._shared_key
        if key is not None:
            with _SHARED_LOCK:
                held = _SHARED.get(key)
                if held is not None and held[0] is self:
                    held[1] -= 1
                    if held[1] > 0:
                        return
                    del _SHARED[key]
        self.close()

    @classmethod
    def _open_locked(cls, path: Path, namespace: str, expected_ids: Callable[[], Iterable[str]],
                     rows: RowsFn) -> LexicalIndex:
        _finish_swap(path)
        count, checksum = id_checksum(expected_ids())
        manifest = _read_manifest(path)
        reason = None
        if manifest is None:
            reason = "no manifest"
        elif manifest.get("namespace") != namespace:
            reason = "manifest of another namespace"
        elif (manifest.get("count"), manifest.get("checksum")) != (count, checksum):
            reason = (f"the store holds {count} ids, the index {manifest.get('count')} "
                      "(or another set)")
        index = None
        if reason is None:
            try:
                index = _tantivy().Index.open(str(path / "index"))
                index.reload()
                if index.searcher().num_docs != count:
                    reason = f"the index holds {index.searcher().num_docs} documents, not {count}"
            except (OSError, ValueError) as exc:
                reason = f"the index cannot be read ({exc})"
        if reason is not None:
            if manifest is not None or path.exists():
                logger.warning("lexical index of namespace %r rebuilt: %s", namespace, reason)
            return cls._build(path, namespace, rows())
        assert index is not None
        ix = cls(index=index, path=path, namespace=namespace, ids=set())
        ix._ids = ix._read_ids()
        ix._hash = dict.fromkeys(ix._ids)
        ix._count, ix._checksum = count, checksum
        return ix

    @classmethod
    def _build(cls, path: Path, namespace: str, rows: Iterable[tuple[str, str]]) -> LexicalIndex:
        """A fresh namespace at ``path`` from ``rows``: built aside, then swapped in."""
        tmp = path.with_name(path.name + ".new")
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "index").mkdir(parents=True)
        try:
            index = _tantivy().Index(_schema(), path=str(tmp / "index"))
            ix = cls(index=index, path=tmp, namespace=namespace, ids=set())
            ix._add_rows(rows)
            ix._commit()
            ix._release()  # releases the writer and its lock
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot build the lexical index in {tmp}") from exc
        _swap_in(tmp, path)
        index = _tantivy().Index.open(str(path / "index"))
        built = cls(index=index, path=path, namespace=namespace, ids=ix._ids)
        built._hash = ix._hash
        built._write_manifest()
        return built

    # -- writes ---------------------------------------------------------------------------

    def add(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Index ``texts`` under ``ids`` (an id already present is replaced); committed with
        the changes staged around it (see the module docstring)."""
        if len(ids) != len(texts):
            raise InvalidInputError(f"The 'texts' parameter of LexicalIndex.add must have one "
                                    f"text per id. Got {len(texts)} texts for {len(ids)} ids "
                                    "instead.")
        self._add_rows(zip(ids, texts, strict=True))

    def _add_rows(self, rows: Iterable[tuple[str, str]]) -> None:
        last = {str(i): " ".join(tokenize(text)) for i, text in rows}
        with self._lock:
            self._check_open()
            if not last:
                return
            for i, body in last.items():
                if i not in self._ids:
                    self._ids.add(i)
                    self._count += 1
                    self._checksum = (self._checksum + _id_hash(i)) & _MASK
                self._pending[i] = (hash(body), body)
            self._stage()

    def delete(self, ids: Iterable[str]) -> None:
        """Remove ``ids`` from every answer (unknown ids are ignored; the next read does not
        see them); committed like :meth:`add`. Their terms stay in the files until
        :meth:`purge`."""
        with self._lock:
            self._check_open()
            gone = [str(i) for i in dict.fromkeys(ids) if str(i) in self._ids]
            if not gone:
                return
            for i in gone:
                self._pending[i] = None
                self._ids.discard(i)
                self._count -= 1
                self._checksum = (self._checksum - _id_hash(i)) & _MASK
            self._stage()

    def clear(self) -> None:
        """Remove every document and, for a folder, every file that held one."""
        with self._lock:
            self._check_open()
            if self._path is None:
                self._cancel_timer()
                self._pending.clear()
                self._writer.delete_all_documents()
                self._ids.clear()
                self._hash.clear()
                self._count, self._checksum = 0, 0
                self._commit(force=True)
                return
            self._release()
            shutil.rmtree(self._path, ignore_errors=True)
            fresh = self._build(self._path, self._namespace, ())
            self._adopt(fresh)

    def purge(self, rows: RowsFn) -> None:
        """Rewrite the namespace from the live ``rows()`` of the store, so that no file holds
        the terms of a deleted memory (a folder index; an in-memory one is left as it is)."""
        with self._lock:
            self._check_open()
            if self._path is None:
                return
            self._release()
            self._adopt(self._build(self._path, self._namespace, rows()))

    def drop(self) -> None:
        """Delete the namespace's folder and close the index."""
        with self._lock:
            if not self._closed:
                self._release()
                self._closed = True
            if self._path is not None:
                shutil.rmtree(self._path, ignore_errors=True)
                shutil.rmtree(self._path.with_name(self._path.name + ".new"),
                              ignore_errors=True)
                self._path.with_name(self._path.name + ".lock").unlink(missing_ok=True)
            self._unlock()

    def flush(self) -> None:
        """Commit the staged changes now (a no-op when there are none)."""
        with self._lock:
            self._check_open()
            if self._pending:
                self._commit()

    def close(self) -> None:
        """Commit the staged changes and release the writer (and its lock). Further calls
        raise :class:`StoreError`. A commit that fails here is logged, not raised: the next
        open sees the missing changes and rebuilds."""
        with self._lock:
            if not self._closed:
                if self._pending:
                    try:
                        self._commit()
                    except StoreError as exc:
                        logger.warning("the lexical index of namespace %r could not commit "
                                       "on close (%s); the next open rebuilds it",
                                       self._namespace, exc.__cause__)
                self._release()
                self._closed = True
            self._unlock()

    # -- reads ----------------------------------------------------------------------------

    def query(self, text: str, n: int) -> tuple[list[str], list[float]]:
        """The ``n`` best ``(ids, scores)`` for ``text`` by BM25, best first.

        A query with no index term (only stop words, punctuation, or nothing) has no hits.
        Ties keep tantivy's order (by document address).
        """
        if n <= 0:
            return [], []
        terms = query_terms(text)
        if not terms:
            return [], []
        tv = _tantivy()
        with self._lock:
            self._check_open()
            if not self._ids:
                return [], []
            if self._pending:
                self._commit()
            q = tv.Query.boolean_query([
                (tv.Occur.Should, tv.Query.term_query(self._schema, "body", t)) for t in terms])
            searcher = self._index.searcher()
            hits = searcher.search(q, limit=int(n), count=False).hits
            ids = [str(searcher.doc(addr)["id"][0]) for _, addr in hits]
            return ids, [float(s) for s, _ in hits]

    def idf_sum(self, text: str) -> float:
        """The summed BM25 idf ``ln(1 + (N - n_t + 0.5) / (n_t + 0.5))`` of the query's terms
        (:func:`query_terms`), the normaliser of :func:`scrubjay.fusion.lexical_score`; 0 for
        a query without index terms or an empty index."""
        terms = query_terms(text)
        with self._lock:
            self._check_open()
            if not terms or not self._ids:
                return 0.0
            if self._pending:
                self._commit()
            searcher = self._index.searcher()
            n = searcher.num_docs
            total = 0.0
            for t in terms:
                df = searcher.doc_freq("body", t)
                total += math.log1p((n - df + 0.5) / (df + 0.5))
            return total

    def __len__(self) -> int:
        return self._count

    def __contains__(self, id: object) -> bool:
        return id in self._ids

    @property
    def commits(self) -> int:
        """tantivy commits this object has made (for monitoring)."""
        return self._commits

    @property
    def checksum(self) -> tuple[int, int]:
        """``(count, checksum)`` of the indexed ids (:func:`id_checksum`)."""
        return self._count, self._checksum

    # -- internals ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the lexical index is closed")
        if self._failed:
            raise StoreError("a commit of the lexical index failed; its staged changes are "
                             "lost: reopen it (the open rebuilds it from the store)")

    def _writer_failed(self) -> None:
        """After a failed commit: the index holds its last commit, the staged changes are
        lost. This object refuses further calls, and the manifest goes, so that the next open
        rebuilds the namespace from the store."""
        self._failed = True
        with contextlib.suppress(Exception):
            self._writer.rollback()
        if self._path is not None:
            with contextlib.suppress(OSError):
                (self._path / "manifest.json").unlink()

    def _stage(self) -> None:
        """After a change is staged: commit now past :data:`MAX_STAGED` changes or in RAM,
        else make sure the background commit is due (called under the lock)."""
        if len(self._pending) >= MAX_STAGED or self._path is None:
            self._commit()
        elif self._timer is None:
            self._timer = threading.Timer(COMMIT_DELAY_S, self._timed_commit)
            self._timer.name = COMMIT_THREAD_NAME
            self._timer.daemon = True
            self._timer.start()

    def _timed_commit(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed or self._writer is None or not self._pending:
                return
            try:
                self._commit()
            except StoreError as exc:  # the next read, flush or close tries again and raises
                logger.warning("background commit of the lexical index of namespace %r "
                               "failed: %s", self._namespace, exc.__cause__)

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _commit(self, *, force: bool = False) -> None:
        """Apply the staged changes to tantivy and commit them. A change that leaves an id as
        committed (deleted, then added again with the same terms, as a failed replacement's
        restore does) is dropped, so that it leaves no deleted document in BM25's statistics;
        with nothing left to apply there is no commit, unless ``force``."""
        self._cancel_timer()
        tv = _tantivy()
        pending, self._pending = self._pending, {}
        ops = 0
        try:
            for i, change in pending.items():
                committed = i in self._hash
                if change is not None and committed and self._hash[i] == change[0]:
                    continue
                if committed:
                    self._writer.delete_documents_by_term("id", i)
                    del self._hash[i]
                    ops += 1
                if change is not None:
                    self._writer.add_document(tv.Document(id=i, body=change[1]))
                    self._hash[i] = change[0]
                    ops += 1
            if not (ops or force):
                return
            self._writer.commit()
        except (OSError, ValueError, RuntimeError) as exc:
            self._writer_failed()
            raise StoreError("the lexical index could not commit") from exc
        self._commits += 1
        self._index.reload()
        if self._path is not None:
            self._write_manifest()

    def _write_manifest(self) -> None:
        assert self._path is not None
        data = {"namespace": self._namespace, "count": self._count,
                "checksum": self._checksum}
        tmp = self._path / "manifest.json.tmp"
        with open(tmp, "w") as fh:
            json.dump(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self._path / "manifest.json")

    def _read_ids(self) -> set[str]:
        tv = _tantivy()
        searcher = self._index.searcher()
        n = searcher.num_docs
        if n == 0:
            return set()
        hits = searcher.search(tv.Query.all_query(), limit=n, count=False).hits
        return {str(searcher.doc(addr)["id"][0]) for _, addr in hits}

    def _release(self) -> None:
        """Let go of the writer; changes still staged are dropped (callers commit first, or
        rebuild from the store)."""
        self._cancel_timer()
        self._pending.clear()
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.wait_merging_threads()

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)

    def _adopt(self, other: LexicalIndex) -> None:
        self._index, self._schema, self._writer = other._index, other._schema, other._writer
        self._ids, self._count, self._checksum = other._ids, other._count, other._checksum
        self._hash, self._pending, self._failed = other._hash, {}, False
        self._commits += other._commits
        _OPEN.discard(other)


_SHARED: dict[str, list[Any]] = {}
"""Indexes opened by :meth:`LexicalIndex.acquire`: namespace folder -> [index, holders]."""
_SHARED_LOCK = threading.RLock()
"""Re-entrant: a garbage-collected memory's ``__del__`` can release its index while this thread
is inside :meth:`LexicalIndex.acquire` (for example during a rebuild of another namespace)."""

_OPEN: weakref.WeakSet[LexicalIndex] = weakref.WeakSet()
"""Every index of this process, so that interpreter exit commits what they staged."""


@atexit.register
def _commit_at_exit() -> None:
    for ix in list(_OPEN):
        if ix._pid != os.getpid():  # inherited through fork: the parent's to commit
            continue
        with contextlib.suppress(StoreError), ix._lock:
            if not ix._closed and ix._writer is not None and ix._pending:
                ix._commit()


def _lock(path: Path) -> int:
    """Hold ``<namespace dir>.lock`` (``flock``, exclusive) so that one object at a time checks,
    rebuilds and writes the namespace; the operating system releases it when a process dies."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise StoreLockedError(f"another LexicalIndex writes {path} (in this process or "
                               "another): close it first") from exc
    return fd


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _swap_in(tmp: Path, path: Path) -> None:
    """Replace ``path`` by the complete build ``tmp``: the old folder is renamed aside first,
    so that at every instant one complete version exists (see :func:`_finish_swap`)."""
    old = path.with_name(path.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def _finish_swap(path: Path) -> None:
    """Tidy what a crash inside :func:`_swap_in` or a build left: a half-built ``.new`` is
    removed; an ``.old`` is removed once ``path`` exists (else it is put back)."""
    shutil.rmtree(path.with_name(path.name + ".new"), ignore_errors=True)
    old = path.with_name(path.name + ".old")
    if old.exists():
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(old, path)
