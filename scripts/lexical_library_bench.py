"""Compare bm25s and tantivy as the lexical index of a memory store (docs/hybrid.md).

Prints, for N short synthetic texts (default 100,000; Zipf words and a few codes, tokenised
with ``scrubjay.lexical.tokenize``): build time, query p50 (top 10 and top 100), the cost of adding 1 and 100 texts
and of deleting 1 from the built index, save + reopen (+ first query) time, disk size, and
what a SIGKILL during a write leaves. Run from the repository root:

    .venv/bin/python scripts/lexical_library_bench.py [--n 100000]

bm25s has no incremental add or delete: both are a rebuild of the whole index (its documented
way), here from the kept token lists. Its save writes several files in turn; tantivy commits.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
from scrubjay.lexical import LexicalIndex, tokenize


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(30_000)]
    ranks = rng.zipf(1.2, size=(n, 12)) % len(vocab)
    texts = []
    for i in range(n):
        words = [vocab[r] for r in ranks[i]]
        words.append(f"LH{i % 9000}")
        texts.append(" ".join(words))
    return texts


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def p50(fn, queries: list[str]) -> float:
    times = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def bench_bm25s(texts: list[str], queries: list[str], work: Path) -> dict[str, float]:
    import bm25s

    toks = [tokenize(t) for t in texts]
    out: dict[str, float] = {}

    def build(tk: list[list[str]]) -> bm25s.BM25:
        m = bm25s.BM25()
        m.index(tk, show_progress=False)
        return m

    t = time.perf_counter()
    model = build(toks)
    out["build_s"] = time.perf_counter() - t
    vocab = model.vocab_dict

    def q(text: str) -> None:
        qt = [w for w in tokenize(text) if w in vocab]
        if qt:
            model.retrieve([qt], k=10, show_progress=False, n_threads=1)

    out["query_p50_ms"] = 1000 * p50(q, queries)

    def q100(text: str) -> None:
        qt = [w for w in tokenize(text) if w in vocab]
        if qt:
            model.retrieve([qt], k=100, show_progress=False, n_threads=1)

    out["query100_p50_ms"] = 1000 * p50(q100, queries)
    t = time.perf_counter()
    build(toks + [tokenize("one more text LH1")])
    out["add1_s"] = time.perf_counter() - t
    t = time.perf_counter()
    build(toks + [tokenize(f"more text {i}") for i in range(100)])
    out["add100_s"] = time.perf_counter() - t
    t = time.perf_counter()
    build(toks[1:])
    out["delete1_s"] = time.perf_counter() - t
    d = work / "bm25s"
    t = time.perf_counter()
    model.save(str(d))
    out["save_s"] = time.perf_counter() - t
    t = time.perf_counter()
    m2 = bm25s.BM25.load(str(d), mmap=True)
    m2.retrieve([[w for w in tokenize(queries[0]) if w in m2.vocab_dict] or ["w1"]], k=10,
                show_progress=False, n_threads=1)
    out["reopen_s"] = time.perf_counter() - t
    out["disk_mb"] = du(d) / 1e6
    return out


def bench_tantivy(texts: list[str], queries: list[str], work: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    rows = [(f"m{i}", t) for i, t in enumerate(texts)]
    folder = work / "tantivy"
    t = time.perf_counter()
    ix = LexicalIndex.open(folder, "bench", list, lambda: rows)
    out["build_s"] = time.perf_counter() - t  # the rebuild path: ids differ from the empty one
    out["query_p50_ms"] = 1000 * p50(lambda s: ix.query(s, 10), queries)
    out["query100_p50_ms"] = 1000 * p50(lambda s: ix.query(s, 100), queries)
    t = time.perf_counter()
    ix.add(["x0"], ["one more text LH1"])
    out["add1_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ix.add([f"y{i}" for i in range(100)], [f"more text {i}" for i in range(100)])
    out["add100_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ix.delete(["m0"])
    out["delete1_s"] = time.perf_counter() - t
    ids = [f"m{i}" for i in range(1, len(texts))] + ["x0"] + [f"y{i}" for i in range(100)]
    ix.close()
    out["save_s"] = 0.0  # every commit is already on disk
    t = time.perf_counter()
    ix = LexicalIndex.open(folder, "bench", lambda: ids, lambda: rows)
    ix.query(queries[0], 10)
    out["reopen_s"] = time.perf_counter() - t
    out["disk_mb"] = du(LexicalIndex.namespace_dir(folder, "bench")) / 1e6
    ix.close()
    return out


_CRASH_CHILD = textwrap.dedent("""
    import sys, time
    lib, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    texts = [f"text number {i} word{i % 97} LH{i}" for i in range(n)]
    if lib == "bm25s":
        import bm25s
        from scrubjay.lexical import tokenize
        toks = [tokenize(t) for t in texts]
        print("ready", flush=True)
        while True:
            m = bm25s.BM25(); m.index(toks, show_progress=False); m.save(path)
    else:
        from scrubjay.lexical import LexicalIndex
        ix = LexicalIndex.open(path, "crash", lambda: [], lambda: [])
        print("ready", flush=True)
        i = 0
        while True:
            ix.add([f"m{i + j}" for j in range(50)], texts[:50]); i += 50
""")


def crash_trials(lib: str, work: Path, trials: int, n: int) -> str:
    """SIGKILL a writer at random moments; count what a reopen finds."""
    rng = np.random.default_rng(1)
    ok = broken = 0
    for trial in range(trials):
        path = work / f"crash-{lib}-{trial}"
        proc = subprocess.Popen([sys.executable, "-c", _CRASH_CHILD, lib, str(path), str(n)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        proc.stdout.readline()
        time.sleep(float(rng.uniform(0.05, 1.0)))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        try:
            if lib == "bm25s":
                import bm25s

                m = bm25s.BM25.load(str(path), mmap=False)
                assert m.scores["num_docs"] == n
            else:
                import tantivy

                idx = tantivy.Index.open(str(LexicalIndex.namespace_dir(path, "crash")
                                             / "index"))
                idx.reload()
                idx.searcher().num_docs  # noqa: B018  # readable
            ok += 1
        except Exception as exc:  # noqa: BLE001  # any failure to load counts
            broken += 1
            print(f"  {lib} trial {trial}: {type(exc).__name__}: {str(exc)[:80]}")
        shutil.rmtree(path, ignore_errors=True)
    return f"{ok} of {trials} reopened, {broken} unreadable"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--crash-trials", type=int, default=10)
    args = ap.parse_args()
    texts = corpus(args.n)
    queries = [" ".join(t.split()[:3]) for t in corpus(200, seed=7)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        res = {"bm25s": bench_bm25s(texts, queries, work),
               "tantivy": bench_tantivy(texts, queries, work)}
        print(f"{args.n} texts; times in seconds unless named")
        keys = list(res["bm25s"])
        print("| measure | " + " | ".join(res) + " | bm25s / tantivy |")
        print("|---|---|---|---|")
        for k in keys:
            a, b = res["bm25s"][k], res["tantivy"][k]
            ratio = f"{a / b:.1f}x" if b > 0 else "-"
            print(f"| {k} | {a:.4g} | {b:.4g} | {ratio} |")
        for lib in ("bm25s", "tantivy"):
            print(f"SIGKILL during writes ({lib}): "
                  f"{crash_trials(lib, work, args.crash_trials, 20_000)}")


if __name__ == "__main__":
    main()
