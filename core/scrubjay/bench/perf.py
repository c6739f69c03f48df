"""``scrubjay bench perf``: the cost of the memory (docs/performance.md reports a run).

Every figure is a count or a ratio against a baseline timed in the same process, because the
machine is noisy. Vectors are precomputed and clustered (256-d, a few hundred unit centres plus
noise, normalised), fed through a dict-lookup embedder so that embedding costs a lookup; texts
are ``"memory {i} topic {c}"``, except in ``ingest``, where the estimator reads each text and
the bundled model embeds it: there they are memory-like sentences (:func:`ingest_texts`).

Sections (each a key of the JSON):

* ``search``: p50/p95 of ``ScrubJayMemory.search`` at each N against a raw Chroma top-k query on
  the same collection, a numpy brute-force scan, LangChain's ``TimeWeightedVectorStoreRetriever``
  and LlamaIndex's ``TimeWeightedPostprocessor``; the recall@k of the fast path against the
  exact scan over all memories (for the server, a mirror-backed memory on the same server);
  embedded and/or server mode.
* ``ingest``: memories/s of ``add_many`` (synthetic vectors and the bundled embedder) against
  embedding plus a raw Chroma add of the same records; embedded and/or server mode. The
  floor: the rows scrubjay wrote, replayed into a fresh collection (the cost of its metadata
  in Chroma, without computing it). Then ``single`` memories added one ``add`` at a time (an
  agent's turn) against a raw one-row add.
* ``rci``: ``integrate`` latency against the number of affected memories, LLM calls per event,
  and the 10k case against one raw Chroma metadata update of 10k records.
* ``buffer``: hit rate and latency of buffered searches on a task-focused query stream.
* ``memory``: RSS and disk bytes per memory, and the time to reopen the largest store.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from numpy.typing import NDArray

from ..clients import http_client, persistent_client
from ..testing import chroma_server

__all__ = ["add_perf_arguments", "cmd_perf", "run_perf", "write_perf"]

DIM = 256
#: Cluster centres of the synthetic corpus (chosen: "a few hundred topics").
CENTRES = 300
#: Per-coordinate noise around a centre (chosen: members ~0.8 cosine to their centre).
NOISE = 0.045
K = 10
T0 = 1_700_000_000.0
QUICK_SIZES = (300, 1_000)


# ---------------------------------------------------------------------------- data
class Corpus:
    """Clustered unit vectors and their texts; ``embed`` is the dict-lookup embedder."""

    def __init__(self, n: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.centres = _unit(rng.standard_normal((CENTRES, DIM)).astype(np.float32))
        self.topic = rng.integers(0, CENTRES, n)
        self.vectors = _unit(self.centres[self.topic]
                             + NOISE * rng.standard_normal((n, DIM)).astype(np.float32))
        self.texts = [f"memory {i} topic {c}" for i, c in enumerate(self.topic)]
        self.lut: dict[str, NDArray[np.float32]] = dict(zip(self.texts, self.vectors,
                                                            strict=True))
        self.lut[""] = np.zeros(DIM, np.float32)
        self.rng = rng

    def queries(self, count: int, prefix: str = "query") -> list[str]:
        """Query texts near random centres (registered in the lookup)."""
        out = []
        for j in range(count):
            c = int(self.rng.integers(0, CENTRES))
            v = _unit(self.centres[c] + NOISE * self.rng.standard_normal(DIM).astype(np.float32))
            text = f"{prefix} {j} topic {c}"
            self.lut[text] = v
            out.append(text)
        return out

    def near_centres(self, count: int) -> NDArray[np.float32]:
        """``count`` fresh vectors, each near a random centre, like the corpus's own."""
        c = self.rng.integers(0, CENTRES, count)
        return _unit(self.centres[c]
                     + NOISE * self.rng.standard_normal((count, DIM)).astype(np.float32))

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        zero = self.lut[""]
        return np.stack([self.lut.get(t, zero) for t in texts])

    def items(self, lo: int, hi: int) -> list[dict[str, Any]]:
        return [{"text": self.texts[i], "at": T0 + i, "id": f"m{i}"} for i in range(lo, hi)]


def ingest_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct memory-like sentences for the ingest section: the first half (by words)
    of one shipped perishability statement joined to the second half of another, ``n`` of the
    2,030 x 2,030 pairs drawn without replacement.

    The estimator reads every text and the bundled model embeds it, so both costs depend on
    what the texts are like: these have the statements' length (about 62 characters) and
    words, and, under the bundled model, a spread of similarities like real memories' (a
    median cosine near 0.03, about 3 pairs in 100,000 at theta_S = 0.75 or more), where the
    corpus's ``"memory {i} topic {c}"`` put half of all pairs above theta_S and so gave every
    new memory thousands of semantic edge candidates (:func:`text_similarity`).
    """
    from ..estimator import load_statements

    heads, tails = [], []
    for row in load_statements():
        words = row["text"].split()
        heads.append(" ".join(words[:len(words) // 2]))
        tails.append(" ".join(words[len(words) // 2:]))
    m = len(heads)
    if n > m * m:
        raise ValueError(f"at most {m * m} ingest texts, got n = {n}")
    pick = np.random.default_rng(seed).choice(m * m, n, replace=False)
    out: list[str] = []
    seen: set[str] = set()
    for i, p in enumerate(pick.tolist()):
        text = f"{heads[p // m]} {tails[p % m]}"
        if text in seen:  # two pairs can join to the same string (statements share words)
            text = f"{text} ({i})"
        seen.add(text)
        out.append(text)
    return out


def text_similarity(texts: list[str], theta: float, sample: int = 2_000,
                    seed: int = 0) -> dict[str, float]:
    """The bundled model's pairwise cosines over a sample of ``texts`` (median, 99th
    percentile, the share of pairs at ``theta`` or more) and the mean length of all of them."""
    from scrubjay.embedding import WordLlamaEmbedder

    rng = np.random.default_rng(seed)
    part = [texts[i] for i in sorted(rng.choice(len(texts), min(sample, len(texts)),
                                                replace=False).tolist())]
    v = np.asarray(WordLlamaEmbedder().embed(part), np.float64)
    cos = (v @ v.T)[np.triu_indices(len(part), 1)]
    return {"sample": len(part), "cos_median": float(np.median(cos)),
            "cos_p99": float(np.quantile(cos, 0.99)),
            "share_at_or_above_theta_s": float(np.mean(cos >= theta)), "theta_s": theta,
            "mean_chars": float(np.mean([len(t) for t in texts]))}


def _unit(x: NDArray[np.float32]) -> NDArray[np.float32]:
    return np.asarray(x / np.linalg.norm(x, axis=-1, keepdims=True), dtype=np.float32)


def _pct(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples) * 1e3
    return {"p50_ms": float(np.percentile(a, 50)), "p95_ms": float(np.percentile(a, 95))}


def _timed(fn: Callable[[], Any], repeats: int) -> list[float]:
    fn()  # warm up
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _timed_alternating(first: Callable[[], Any], second: Callable[[], Any], repeats: int,
                   run: int = 1) -> tuple[list[float], list[float]]:
    """:func:`_timed` for two functions that alternate, so that both see the same machine
    load: call by call, or by runs of ``run`` calls (each function then timed inside a stream
    of its own calls, as a query stream would call it)."""
    first()
    second()
    a: list[float] = []
    b: list[float] = []
    while len(a) < repeats:
        for fn, out in ((first, a), (second, b)):
            for _ in range(min(run, repeats - len(out))):
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
    return a, b


def _bar(total: int, enabled: bool, desc: str) -> Any:
    if not enabled:
        return contextlib.nullcontext(None)
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False)


def _tick(bar: Any, msg: str | None = None) -> None:
    if bar is not None:
        if msg:
            bar.set_postfix_str(msg)
        bar.update(1)


def _clock(at: float) -> Callable[[], float]:
    return lambda: at


def _memory(path: Path | None, corpus: Corpus, *, client: Any = None, llm: Any = None,
            config: Any = None, namespace: str = "default") -> Any:
    from scrubjay import ScrubJayConfig, ScrubJayMemory
    from scrubjay.config import LLMConfig
    from scrubjay.embedding import CallableEmbedder

    cfg = config or ScrubJayConfig(llm=LLMConfig(annotate=False))
    return ScrubJayMemory(path=path, client=client, namespace=namespace, llm=llm, config=cfg,
                          embedder=CallableEmbedder(corpus.embed, name="callable:perf-lookup"),
                          clock=_clock(T0 + len(corpus.texts) + 3600.0))


def _build(mem: Any, corpus: Corpus, n: int, batch: int, bar: Any = None) -> float:
    t = time.perf_counter()
    for lo in range(0, n, batch):
        mem.add_many(corpus.items(lo, min(n, lo + batch)))
    if bar is not None:
        bar.set_postfix_str(f"built {n}")
    return time.perf_counter() - t


# ---------------------------------------------------------------------------- search
def _copy_to(src: Any, dst_client: Any, batch: int = 1_000) -> None:
    """Copy a namespace's two collections (as ScrubJay wrote them, with the adjacency of an
    embedded store's edge file as each row's ``sj_edges`` and, from schema 6, its creation
    time as ``sj_t``, a key of its own that a server's reads by time filter on) into another
    client."""
    for col in (src.what, src.where):
        dst = dst_client.get_or_create_collection(col.name, embedding_function=None,
                                                  configuration={"hnsw": {"space": "cosine"}},
                                                  metadata=col.metadata or None)
        offset = 0
        while True:
            got = col.get(include=["embeddings", "metadatas", "documents"], limit=batch,
                          offset=offset)
            if not got["ids"]:
                break
            kw: dict[str, Any] = {"ids": got["ids"], "embeddings": got["embeddings"]}
            if col is src.what:  # an embedded store's adjacency is in its edge file
                edges = src.edges_of(got["ids"])
                times = {r.id: r.meta["sj_t"] for r in src.get(got["ids"])}
                got["metadatas"] = [{**(m or {}), "sj_t": times[i],
                                     **({"sj_edges": edges[i]} if i in edges else {})}
                                    for i, m in zip(got["ids"], got["metadatas"], strict=True)]
            if any(got["metadatas"] or []):
                kw["metadatas"] = got["metadatas"]
            if any(d for d in got["documents"] or []):
                kw["documents"] = got["documents"]
            dst.add(**kw)
            offset += batch


def _langchain_latency(corpus: Corpus, n: int, queries: list[str], k: int) -> list[float]:
    from langchain_classic.retrievers import TimeWeightedVectorStoreRetriever
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    class Lookup(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            rows: list[list[float]] = corpus.embed(texts).tolist()
            return rows

        def embed_query(self, text: str) -> list[float]:
            row: list[float] = corpus.embed([text])[0].tolist()
            return row

    class CosineStore(InMemoryVectorStore):
        """InMemoryVectorStore's scores are cosine similarities already: the identity."""

        def _select_relevance_score_fn(self) -> Callable[[float], float]:
            return lambda s: s

    store = CosineStore(Lookup())
    retriever = TimeWeightedVectorStoreRetriever(vectorstore=store, decay_rate=0.01, k=k)
    from datetime import datetime, timedelta

    base = datetime(2023, 11, 14)
    for lo in range(0, n, 5_000):
        retriever.add_documents([Document(page_content=corpus.texts[i],
                                          metadata={"last_accessed_at":
                                                    base + timedelta(seconds=i),
                                                    "created_at": base + timedelta(seconds=i)})
                                 for i in range(lo, min(n, lo + 5_000))])
    it = iter(queries * 2)
    return _timed(lambda: retriever.invoke(next(it)), len(queries))


def _llamaindex_latency(corpus: Corpus, n: int, queries: list[str], k: int) -> list[float]:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.postprocessor import TimeWeightedPostprocessor
    from llama_index.core.schema import QueryBundle, TextNode

    nodes = [TextNode(text=corpus.texts[i], id_=f"m{i}", embedding=corpus.vectors[i].tolist(),
                      metadata={"__last_accessed__": T0 + i}) for i in range(n)]
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=DIM))
    retriever = index.as_retriever(similarity_top_k=4 * k)
    post = TimeWeightedPostprocessor(time_decay=0.99, top_k=k)
    it = iter(queries * 2)

    def once() -> None:
        q = next(it)
        bundle = QueryBundle(query_str=q, embedding=corpus.embed([q])[0].tolist())
        post.postprocess_nodes(retriever.retrieve(bundle), query_bundle=bundle)
    return _timed(once, len(queries))


def _search_one(mem: Any, corpus: Corpus, queries: list[str], k: int,
                exact: Any = None) -> dict[str, Any]:
    """sj search vs raw Chroma on the same collection; recall of the fast path vs exact.

    The exact reference is the scan over every memory (``scan_max=None``): the same memory
    with that config when it has a mirror (embedded), else ``exact``, a mirror-backed memory
    on the same client (server).
    """
    it = iter(queries * 2)
    col = mem._store.what  # the same collection ScrubJay queries
    vecs = iter([corpus.embed([q])[0] for q in queries] * 2)
    sj, chroma = _timed_alternating(
        lambda: mem.search(next(it), k=k),
        lambda: col.query(query_embeddings=[next(vecs)], n_results=k,
                          include=["distances", "metadatas", "documents"]),
        len(queries))
    recall = None
    if getattr(mem._backend, "_mirror", None) is not None or exact is not None:
        found = sum(len({h.id for h in mem.search(q, k=k)} & _exact_ids(exact or mem, q, k))
                    for q in queries)
        recall = found / (k * len(queries))
    return {"sj": _pct(sj), "chroma": _pct(chroma), "recall_at_k": recall}


def _exact_ids(mem: Any, query: str, k: int) -> set[str]:
    """Ids of the exact scan over every memory of a mirror-backed ``mem``."""
    fast_cfg = mem.config
    mem.config = replace(fast_cfg, search=replace(fast_cfg.search, scan_max=None))
    try:
        return {h.id for h in mem.search(query, k=k)}
    finally:
        mem.config = fast_cfg


def _mirrored_config() -> Any:
    """Server mode with a mirror of the namespace in the process (``SearchConfig(mirror=True)``),
    kept current by the namespace's change log."""
    from scrubjay import ScrubJayConfig
    from scrubjay.config import LLMConfig, SearchConfig

    return ScrubJayConfig(llm=LLMConfig(annotate=False), search=SearchConfig(mirror=True))


def _exact_reference(corpus: Corpus, client: Any) -> Any:
    """A memory on ``client`` with a mirror that scans every memory (the recall reference)."""
    from scrubjay import ScrubJayConfig
    from scrubjay.config import LLMConfig, SearchConfig

    return _memory(None, corpus, client=client,
                   config=ScrubJayConfig(llm=LLMConfig(annotate=False),
                                         search=SearchConfig(mirror=True, scan_max=None)))


def run_search(corpus: Corpus, sizes: list[int], modes: list[str], work: Path, *, k: int,
               queries: int, baseline_queries: int, batch: int, bar: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"k": k, "queries": queries, "by_n": {}}
    qs = corpus.queries(queries)
    for n in sizes:
        row: dict[str, Any] = {"n": n}
        path = work / f"store-{n}"
        mem = _memory(path, corpus)
        row["build_s"] = _build(mem, corpus, n, batch, bar)
        _tick(bar, f"search n={n}")
        mat = corpus.vectors[:n]
        vecs = iter([corpus.embed([q])[0] for q in qs] * 2)

        def scan(mat: Any = mat, vecs: Any = vecs) -> None:  # this size's matrix and queries
            s = mat @ next(vecs)
            np.argpartition(-s, k - 1)[:k]
        row["numpy_scan"] = _pct(_timed(scan, queries))
        if "embedded" in modes:
            row["embedded"] = _search_one(mem, corpus, qs, k)
        mem.close()
        if "embedded" in modes:  # the same store, ranked without the lexical channel
            plain = _memory(path, corpus, config=_no_lexical_config())
            row["embedded_no_lexical"] = _search_one(plain, corpus, qs, k)
            plain.close()
        if "server" in modes:
            server_dir = work / f"server-{n}"
            server_dir.mkdir(parents=True, exist_ok=True)
            with chroma_server(server_dir) as (host, port):
                client = http_client(host, port)
                src = _memory(path, corpus)
                _copy_to(src._store, client)
                src.close()
                t = time.perf_counter()  # the open reads every text (the lexical index)
                remote = _memory(None, corpus, client=client)
                opened = time.perf_counter() - t
                exact = _exact_reference(corpus, client)
                row["server"] = {**_search_one(remote, corpus, qs, k, exact=exact),
                                 "open_s": opened}
                exact.close()
                remote.close()
                # a process with a mirror on the server (the change log keeps it current)
                t = time.perf_counter()
                mirrored = _memory(None, corpus, client=client, config=_mirrored_config())
                opened = time.perf_counter() - t
                row["server_mirror"] = {**_search_one(mirrored, corpus, qs, k),
                                        "open_s": opened}
                mirrored.close()
            shutil.rmtree(server_dir, ignore_errors=True)
        _tick(bar, f"baselines n={n}")
        bq = qs[:baseline_queries]
        row["langchain_time_weighted"] = _pct(_langchain_latency(corpus, n, bq, k))
        row["llamaindex_time_weighted"] = _pct(_llamaindex_latency(corpus, n, bq, k))
        for mode in _MODE_LABELS:
            if mode in row:
                row[mode]["p50_vs_chroma"] = row[mode]["sj"]["p50_ms"] / \
                    row[mode]["chroma"]["p50_ms"]
        out["by_n"][str(n)] = row
    return out


# ---------------------------------------------------------------------------- ingest
def run_ingest(corpus: Corpus, n: int, work: Path, *, batch: int, bar: Any,
               modes: list[str] | None = None, single: int = 200) -> dict[str, Any]:
    """``add_many`` against embedding plus a raw Chroma add of the same records, per embedder
    (synthetic lookups, the bundled model) and mode; embedded figures at the top level,
    server ones under ``"server"``. Then ``single`` memories added one at a time (an agent's
    turn) against a raw add of one row."""
    from scrubjay.config import GraphConfig

    out: dict[str, Any] = {"n": n, "batch": batch, "single": single}
    texts = ingest_texts(n + single)
    # the synthetic embedder looks each text up: memory i gets the corpus's vector i (the
    # one-at-a-time adds after the bulk load: fresh points near random centres)
    corpus.lut.update(zip(texts[:n], corpus.vectors[:n], strict=True))
    corpus.lut.update(zip(texts[n:], corpus.near_centres(single), strict=True))
    items = [{"text": texts[i], "at": T0 + i, "id": f"m{i}"} for i in range(n + single)]
    out["texts"] = {"kind": "recombined perishability statements (ingest_texts)",
                    **text_similarity(texts, GraphConfig().theta_semantic)}
    # the bundled model loads once per process (the estimator's too): not a per-memory cost
    from scrubjay.embedding import WordLlamaEmbedder
    WordLlamaEmbedder().embed(["warm up"])
    for mode in modes or ["embedded"]:
        with contextlib.ExitStack() as stack:
            client = None
            if mode == "server":
                host, port = stack.enter_context(chroma_server(work / "ingest-server"))
                client = http_client(host, port)
            for name in ("synthetic", "bundled"):
                raw_client = client or persistent_client(str(work / f"ingest-raw-{name}"))
                got = _ingest_one(corpus, name, raw_client, items, n, batch, client,
                                  work / f"ingest-sj-{name}")
                (out if mode == "embedded" else out.setdefault("server", {}))[name] = got
                _tick(bar, f"ingest {name} ({mode})")
                _tick(bar, f"ingest {name} ({mode})")
    return out


class _OwnCaches:
    """Each memory its own cache of :func:`scrubjay.supersession.parse_claim` while it is
    timed, as if each ran in its own process: with the one module cache, the first memory to
    add a text would parse it and the others, alternating with it on the same texts, would
    find its claim cached."""

    def __init__(self) -> None:
        from scrubjay import supersession

        self._module: Any = supersession
        self._caches: dict[int, Callable[[str], Any]] = {}

    @contextlib.contextmanager
    def of(self, mem: Any) -> Any:
        sup = self._module
        cache = self._caches.get(id(mem))
        if cache is None:
            cache = functools.lru_cache(maxsize=sup.CLAIM_CACHE)(sup.parse_claim.__wrapped__)
            self._caches[id(mem)] = cache
        saved, sup.parse_claim = sup.parse_claim, cache
        try:
            yield
        finally:
            sup.parse_claim = saved

    def timed(self, mem: Any, method: str, *args: Any, **kwargs: Any) -> float:
        """Seconds ``mem.<method>(*args, **kwargs)`` takes with ``mem``'s own claim cache."""
        call = getattr(mem, method)
        with self.of(mem):
            t = time.perf_counter()
            call(*args, **kwargs)
            return time.perf_counter() - t


def _ingest_one(corpus: Corpus, name: str, raw_client: Any, items: list[dict[str, Any]],
                n: int, batch: int, client: Any, path: Path) -> dict[str, Any]:
    """One embedder in one mode: raw adds and ``add_many`` alternate batch by batch over the
    first ``n`` items, so that both see the same machine load; then the rest one at a time,
    ``add`` and a raw one-row add alternating call by call."""
    from scrubjay import ScrubJayConfig, ScrubJayMemory
    from scrubjay.config import GraphConfig, LLMConfig
    from scrubjay.embedding import WordLlamaEmbedder

    # the same memory without the graph (max_neighbors=0: no linking, no adjacency), in its
    # own folder: what the paper's graph costs at add time, measured in the same alternation
    flat = ScrubJayConfig(llm=LLMConfig(annotate=False), graph=GraphConfig(max_neighbors=0))
    flat_path = None if client else path.with_name(path.name + "-no-graph")
    # embedded, also the memory without the lexical channel (its own folder): what the
    # full-text index costs at add time, measured in the same alternation
    no_lex_path = None if client else path.with_name(path.name + "-no-lexical")
    # against a server, also a process that keeps a mirror (its own namespace, same batches)
    mirrored: Any = None
    no_lex: Any = None
    if name == "synthetic":
        def embed(ts: list[str]) -> Any:
            return corpus.embed(ts)
        mem = _memory(None if client else path, corpus, client=client, namespace="ingest")
        no_graph = _memory(flat_path, corpus, client=client, config=flat,
                           namespace="ingest-no-graph")
        if client is not None:
            mirrored = _memory(None, corpus, client=client, config=_mirrored_config(),
                               namespace="ingest-mirror")
        else:
            no_lex = _memory(no_lex_path, corpus, config=_no_lexical_config(),
                             namespace="ingest-no-lexical")
    else:
        model = WordLlamaEmbedder()

        def embed(ts: list[str]) -> Any:
            return model.embed(ts)
        mem, no_graph = (ScrubJayMemory(path=p, client=client, namespace=ns, embedder=model,
                                        config=cfg, clock=_clock(T0 + len(items) + 3600))
                         for p, ns, cfg in (
                             (None if client else path, "ingest-bundled",
                              ScrubJayConfig(llm=LLMConfig(annotate=False))),
                             (flat_path, "ingest-bundled-no-graph", flat)))
        if client is not None:
            mirrored = ScrubJayMemory(client=client, namespace="ingest-bundled-mirror",
                                      embedder=model, config=_mirrored_config(),
                                      clock=_clock(T0 + len(items) + 3600))
        else:
            no_lex = ScrubJayMemory(path=no_lex_path, namespace="ingest-bundled-no-lexical",
                                    embedder=model, config=_no_lexical_config(),
                                    clock=_clock(T0 + len(items) + 3600))
    # the write alone: the Chroma rows scrubjay wrote (text, perishability, ... as metadata;
    # an embedded store keeps the adjacency in its edge file, not replayed)
    # replayed into a fresh collection, without the work that computed them; and a second
    # baseline, the raw add with its text as metadata as scrubjay keeps it (no document)
    col, as_meta, replay = (raw_client.get_or_create_collection(
        f"{name}-{role}", embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
        for role in ("raw", "raw-text-as-meta", "replay"))
    raw_s = meta_s = sj_s = replay_s = raw_cpu_s = flat_s = mirror_s = no_lex_s = 0.0
    one_sj: list[float] = []
    one_raw: list[float] = []
    one_mirror: list[float] = []
    one_no_lex: list[float] = []
    own = _OwnCaches()
    try:
        for lo in range(0, n, batch):
            part = items[lo:min(n, lo + batch)]
            t, cpu = time.perf_counter(), _cpu_s()
            vec = np.asarray(embed([p["text"] for p in part]), dtype=np.float32)
            col.add(ids=[p["id"] for p in part], embeddings=vec,
                    documents=[p["text"] for p in part],
                    metadatas=[{"t": p["at"]} for p in part])
            raw_s += time.perf_counter() - t
            raw_cpu_s += _cpu_s() - cpu
            t = time.perf_counter()
            vec = np.asarray(embed([p["text"] for p in part]), dtype=np.float32)
            as_meta.add(ids=[p["id"] for p in part], embeddings=vec,
                        metadatas=[{"t": p["at"], "text": p["text"]} for p in part])
            meta_s += time.perf_counter() - t
            sj_s += own.timed(mem, "add_many", part)
            flat_s += own.timed(no_graph, "add_many", part)
            if mirrored is not None:
                mirror_s += own.timed(mirrored, "add_many", part)
            if no_lex is not None:
                no_lex_s += own.timed(no_lex, "add_many", part)
            rows = mem._store.what.get(ids=[p["id"] for p in part],
                                       include=["embeddings", "documents", "metadatas"])
            kw = {"documents": rows["documents"]} if any(rows["documents"]) else {}
            t = time.perf_counter()
            replay.upsert(ids=rows["ids"], embeddings=rows["embeddings"],
                          metadatas=rows["metadatas"], **kw)
            replay_s += time.perf_counter() - t
        for p in items[n:]:
            t = time.perf_counter()
            vec = np.asarray(embed([p["text"]]), dtype=np.float32)
            col.add(ids=[p["id"]], embeddings=vec, documents=[p["text"]],
                    metadatas=[{"t": p["at"]}])
            one_raw.append(time.perf_counter() - t)
            one_sj.append(own.timed(mem, "add", p["text"], at=p["at"]))
            if mirrored is not None:
                one_mirror.append(own.timed(mirrored, "add", p["text"], at=p["at"]))
            if no_lex is not None:
                one_no_lex.append(own.timed(no_lex, "add", p["text"], at=p["at"]))
    finally:
        mem.close()
        no_graph.close()
        for other in (mirrored, no_lex):
            if other is not None:
                other.close()
    single: dict[str, Any] = {}
    if one_sj:
        single = {"sj": {**_pct(one_sj), "mean_ms": 1e3 * float(np.mean(one_sj))},
                  "embed_plus_chroma_add": {**_pct(one_raw),
                                            "mean_ms": 1e3 * float(np.mean(one_raw))},
                  "ratio_p50": float(np.median(one_sj) / np.median(one_raw))}
        if one_mirror:
            single["with_mirror"] = {**_pct(one_mirror),
                                     "mean_ms": 1e3 * float(np.mean(one_mirror))}
            single["ratio_p50_with_mirror"] = float(np.median(one_mirror) / np.median(one_raw))
        if one_no_lex:
            single["without_lexical"] = {**_pct(one_no_lex),
                                         "mean_ms": 1e3 * float(np.mean(one_no_lex))}
            # the lexical channel's cost on one add: with it over without it
            single["lexical_ratio_p50"] = float(np.median(one_sj) / np.median(one_no_lex))
    mirror = {} if mirrored is None else {"with_mirror_per_s": n / mirror_s,
                                          "overhead_with_mirror": mirror_s / raw_s - 1.0}
    if no_lex is not None:
        mirror.update(without_lexical_per_s=n / no_lex_s, lexical_ratio=sj_s / no_lex_s)
    return {"single": single, **mirror,
            "sj_per_s": n / sj_s, "embed_plus_chroma_add_per_s": n / raw_s,
            "overhead": sj_s / raw_s - 1.0,
            "without_graph_per_s": n / flat_s,
            "overhead_without_graph": flat_s / raw_s - 1.0,
            "embed_plus_chroma_add_text_as_meta_per_s": n / meta_s,
            "overhead_vs_text_as_meta": sj_s / meta_s - 1.0,
            # the memory without the graph against that add: what classifying each memory and
            # writing its perishability costs over the bare write, with no linking at all
            "overhead_without_graph_vs_text_as_meta": flat_s / meta_s - 1.0,
            "same_rows_write_per_s": n / replay_s,
            "same_rows_write_overhead": replay_s / raw_s - 1.0,
            # CPU seconds of this process (Chroma's threads included) per second of raw add
            "raw_add_cores_busy": raw_cpu_s / raw_s}


def _pct_or_dash(x: float | None) -> str:
    """A ratio minus one as a signed percentage; ``-`` for a figure an older run lacks."""
    return "-" if x is None else f"{100 * x:+.0f}%"


def _cpu_s() -> float:
    """User plus system CPU time of this process, all its threads."""
    return time.process_time()


# ---------------------------------------------------------------------------- RCI
class CountingLLM:
    """A chat-model stand-in that answers RCI prompts with fixed deltas and counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, prompt: str) -> str:
        self.calls += 1
        return json.dumps({"delta_value": -0.5, "delta_pi": 0.1, "delta_tau": -0.2,
                           "summary": "superseded"})


def run_rci(work: Path, *, counts: list[int], bar: Any) -> dict[str, Any]:
    """Clusters of exactly ``m`` near-duplicates; an event at a cluster's centre affects them."""
    from scrubjay import ScrubJayConfig
    from scrubjay.config import LLMConfig

    rng = np.random.default_rng(1)
    centres = _unit(rng.standard_normal((len(counts), DIM)).astype(np.float32))
    corpus = Corpus(0)
    vecs, texts = [], []
    for c, m in enumerate(counts):
        v = _unit(centres[c] + 0.01 * rng.standard_normal((m, DIM)).astype(np.float32))
        for j in range(m):
            texts.append(f"rci {c} member {j}")
            vecs.append(v[j])
            corpus.lut[texts[-1]] = v[j]
    for c in range(len(counts)):
        corpus.lut[f"event {c}"] = centres[c]
    corpus.texts = texts
    total = len(texts)
    # built without a chat model (offline classifier), then reopened with the counting one,
    # so that only RCI calls it
    mem = _memory(work / "rci", corpus)
    for lo in range(0, total, 2_000):
        mem.add_many([{"text": texts[i], "at": T0 + i, "id": f"r{i}"}
                      for i in range(lo, min(total, lo + 2_000))])
    mem.close()
    llm = CountingLLM()
    mem = _memory(work / "rci", corpus, llm=llm,
                  config=ScrubJayConfig(llm=LLMConfig(annotate=False)))
    _tick(bar, "rci store")
    rows = []
    for c, m in enumerate(counts):
        before = llm.calls
        t = time.perf_counter()
        report = mem.integrate(f"event {c}", store=False)
        dt = time.perf_counter() - t
        rows.append({"target_affected": m, "affected": len(report.affected),
                     "llm_calls": llm.calls - before, "latency_ms": dt * 1e3})
    mem.close()
    _tick(bar, "rci events")
    # the baseline: one raw Chroma metadata update of the largest count of records
    m = max(counts)
    client = persistent_client(str(work / "rci-raw"))
    col = client.get_or_create_collection("raw", embedding_function=None,
                                          configuration={"hnsw": {"space": "cosine"}})
    ids = [f"x{i}" for i in range(m)]
    vec = np.asarray(vecs[:m], np.float32)
    step = 5_000
    for lo in range(0, m, step):
        col.add(ids=ids[lo:lo + step], embeddings=vec[lo:lo + step],
                metadatas=[{"v": 1.0}] * len(ids[lo:lo + step]))
    t = time.perf_counter()
    for lo in range(0, m, step):
        col.update(ids=ids[lo:lo + step], metadatas=[{"v": 0.5}] * len(ids[lo:lo + step]))
    raw_ms = (time.perf_counter() - t) * 1e3
    big = next(r for r in rows if r["target_affected"] == m)
    return {"events": rows, "chroma_update_ms": raw_ms, "largest": m,
            "largest_vs_chroma_update": big["latency_ms"] / raw_ms,
            "llm_calls_per_event": [r["llm_calls"] for r in rows]}


# ---------------------------------------------------------------------------- buffer
def run_buffer(corpus: Corpus, n: int, work: Path, *, queries: int, bar: Any) -> dict[str, Any]:
    mem = _memory(work / f"store-{n}", corpus)
    topic = int(np.bincount(corpus.topic[:n]).argmax())
    task = f"task topic {topic}"
    corpus.lut[task] = corpus.centres[topic]
    rng = np.random.default_rng(2)
    stream = []
    for j in range(queries):  # task-focused: every query is about the task's topic
        text = f"focused {j} topic {topic}"
        corpus.lut[text] = _unit(corpus.centres[topic]
                                 + NOISE * rng.standard_normal(DIM).astype(np.float32))
        stream.append(text)
    mem.prepare(task)
    hits = [mem.search(q, k=K)[0].from_buffer for q in stream]
    state = mem.buffer

    def full_search(query: str) -> list[Any]:  # the same query with the buffer set aside
        mem._buffer = None
        try:
            hits: list[Any] = mem.search(query, k=K)
            return hits
        finally:
            mem._buffer = state

    if any(h.from_buffer for q in stream[:5] for h in full_search(q)):
        raise RuntimeError("the full search of the buffer benchmark was served by the buffer")

    it_b, it_f = iter(stream * 4), iter(stream * 4)
    buffered, full = _timed_alternating(lambda: mem.search(next(it_b), k=K),
                                    lambda: full_search(next(it_f)), queries, run=20)
    # each buffered search right after a full one: the block is no longer in the CPU caches
    cold_b, cold_f = _timed_alternating(lambda: mem.search(next(it_b), k=K),
                                    lambda: full_search(next(it_f)), queries)
    mem.close()
    _tick(bar, "buffer")
    b, f = _pct(buffered), _pct(full)
    cb, cf = _pct(cold_b), _pct(cold_f)
    return {"n": n, "queries": queries, "hit_rate": sum(hits) / len(hits), "buffered": b,
            "full": f, "speedup_p50": f["p50_ms"] / b["p50_ms"],
            "alternating": {"buffered": cb, "full": cf,
                            "speedup_p50": cf["p50_ms"] / cb["p50_ms"]}}


# ---------------------------------------------------------------------------- memory
_REOPEN = """
import json, sys, time, psutil
sys.path[:0] = {paths!r}
import numpy as np
proc = psutil.Process()
import scrubjay, chromadb
from scrubjay import ScrubJayMemory
from scrubjay.embedding import CallableEmbedder
rss0 = proc.memory_info().rss
t = time.perf_counter()
mem = ScrubJayMemory(path={path!r}, embedder=CallableEmbedder(lambda ts: np.zeros((len(ts), 256),
                     np.float32), name="callable:perf-lookup"))
dt = time.perf_counter() - t
n = len(mem)
print(json.dumps({{"n": n, "open_s": dt, "rss_delta": proc.memory_info().rss - rss0}}))
"""


def run_memory(n: int, work: Path, bar: Any) -> dict[str, Any]:
    folder = work / f"store-{n}"
    disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    code = _REOPEN.format(paths=[p for p in sys.path if p], path=str(folder))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=1_800)
    got = json.loads(res.stdout.strip().splitlines()[-1])
    _tick(bar, "memory")
    return {"n": got["n"], "disk_bytes_per_memory": disk / max(1, n),
            "rss_bytes_per_memory": got["rss_delta"] / max(1, got["n"]),
            "reopen_s": got["open_s"]}


# ---------------------------------------------------------------------------- driver
def run_perf(*, sizes: list[int], modes: list[str], out_dir: Path, progress: bool = True,
             queries: int = 100, baseline_queries: int = 20, batch: int = 2_000,
             rci_counts: list[int] | None = None, ingest_n: int | None = None,
             single_adds: int = 200) -> dict[str, Any]:
    """Run every section; returns the JSON-able result (``write_perf`` writes it)."""
    import logging

    for name in ("chromadb", "httpx", "llama_index"):
        logging.getLogger(name).setLevel(logging.ERROR)
    sizes = sorted(sizes)
    top = sizes[-1]
    rci_counts = rci_counts or [1, 10, 100, 1_000, 10_000]
    ingest_n = ingest_n or min(top, 10_000)
    corpus = Corpus(top)
    steps = 3 * len(sizes) + 4 * len(modes) + 3 + 1 + 1
    work = Path(tempfile.mkdtemp(prefix="sj-perf-"))
    try:
        with _bar(steps, progress, "bench perf") as bar:
            t0 = time.perf_counter()
            result: dict[str, Any] = {
                "command": "scrubjay bench perf " + " ".join(sys.argv[3:])
                if sys.argv[1:3] == ["bench", "perf"] else None,
                "nproc": os.cpu_count(), "dim": DIM, "centres": CENTRES, "k": K}
            result["search"] = run_search(corpus, sizes, modes, work, k=K, queries=queries,
                                          baseline_queries=baseline_queries, batch=batch,
                                          bar=bar)
            result["buffer"] = run_buffer(corpus, top, work, queries=queries, bar=bar)
            result["memory"] = run_memory(top, work, bar)
            result["ingest"] = run_ingest(corpus, ingest_n, work, batch=batch, bar=bar,
                                          modes=modes, single=single_adds)
            result["rci"] = run_rci(work, counts=rci_counts, bar=bar)
            result["wall_s"] = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


_MODE_LABELS = {"embedded": "embedded", "embedded_no_lexical": "embedded, no lexical channel",
                "server": "server", "server_mirror": "server, with a mirror"}


def _no_lexical_config() -> Any:
    from scrubjay import ScrubJayConfig
    from scrubjay.config import LLMConfig, SearchConfig

    return ScrubJayConfig(llm=LLMConfig(annotate=False), search=SearchConfig(lexical=False))


def _table(res: dict[str, Any]) -> str:
    lines = [f"## scrubjay bench perf ({res['nproc']} cores, k={res['k']})", "",
             ("| N | mode | sj p50/p95 ms | chroma p50/p95 ms | sj/chroma p50 | recall@k | "
              "numpy scan p50 | LangChain TW p50 | LlamaIndex TW p50 |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for n, row in res["search"]["by_n"].items():
        for mode, label in _MODE_LABELS.items():
            if mode not in row:
                continue
            r = row[mode]
            rec = "-" if r["recall_at_k"] is None else f"{r['recall_at_k']:.3f}"
            lines.append(
                f"| {int(n):,} | {label} | {r['sj']['p50_ms']:.2f} / {r['sj']['p95_ms']:.2f} | "
                f"{r['chroma']['p50_ms']:.2f} / {r['chroma']['p95_ms']:.2f} | "
                f"{r['p50_vs_chroma']:.2f}x | {rec} | {row['numpy_scan']['p50_ms']:.2f} | "
                f"{row['langchain_time_weighted']['p50_ms']:.1f} | "
                f"{row['llamaindex_time_weighted']['p50_ms']:.1f} |")
    ing = res["ingest"]
    lines += ["", f"Ingest ({ing['n']:,} memories, batches of {ing['batch']:,}):", "",
              ("| mode | embedder | sj memories/s | embed + Chroma add /s | overhead | "
               "overhead without the graph | "
               "Chroma write of sj's rows alone | the add with the text as metadata /s | "
               "overhead over it | without the graph, over it |"),
              "|---|---|---|---|---|---|---|---|---|---|"]
    for mode, rows in (("embedded", ing), ("server", ing.get("server", {}))):
        for name in ("synthetic", "bundled"):
            if name in rows:
                r = rows[name]
                lines.append(f"| {mode} | {name} | {r['sj_per_s']:.0f} | "
                             f"{r['embed_plus_chroma_add_per_s']:.0f} | "
                             f"{100 * r['overhead']:.0f}% | "
                             f"{_pct_or_dash(r.get('overhead_without_graph'))} | "
                             f"{100 * r['same_rows_write_overhead']:+.0f}% | "
                             f"{r['embed_plus_chroma_add_text_as_meta_per_s']:.0f} | "
                             f"{100 * r['overhead_vs_text_as_meta']:.0f}% | "
                             f"{_pct_or_dash(r.get('overhead_without_graph_vs_text_as_meta'))} |")
                if "overhead_with_mirror" in r:
                    lines.append(f"| {mode}, with a mirror | {name} | "
                                 f"{r['with_mirror_per_s']:.0f} | "
                                 f"{r['embed_plus_chroma_add_per_s']:.0f} | "
                                 f"{100 * r['overhead_with_mirror']:.0f}% | - | - | - | - | - |")
    singles = [(mode, name, rows[name]["single"])
               for mode, rows in (("embedded", ing), ("server", ing.get("server", {})))
               for name in ("synthetic", "bundled") if rows.get(name, {}).get("single")]
    if singles:
        lines += ["", (f"One memory at a time after the bulk load ({ing['single']:,} `add` calls, "
                       "each after a raw one-row add):"), "",
                  ("| mode | embedder | sj `add` p50 / p95 / mean ms | embed + Chroma add of one "
                   "row p50 / mean ms | p50 ratio |"),
                  "|---|---|---|---|---|"]
        for mode, name, r in singles:
            sj, raw = r["sj"], r["embed_plus_chroma_add"]
            lines.append(f"| {mode} | {name} | {sj['p50_ms']:.1f} / {sj['p95_ms']:.1f} / "
                         f"{sj['mean_ms']:.1f} | {raw['p50_ms']:.1f} / {raw['mean_ms']:.1f} | "
                         f"{r['ratio_p50']:.2f}x |")
            if "with_mirror" in r:
                wm = r["with_mirror"]
                lines.append(f"| {mode}, with a mirror | {name} | {wm['p50_ms']:.1f} / "
                             f"{wm['p95_ms']:.1f} / {wm['mean_ms']:.1f} | {raw['p50_ms']:.1f} / "
                             f"{raw['mean_ms']:.1f} | {r['ratio_p50_with_mirror']:.2f}x |")
    lex = [(name, ing[name]) for name in ("synthetic", "bundled")
           if "lexical_ratio" in ing.get(name, {})]
    if lex:
        lines += ["", ("The lexical channel's cost at add time (embedded; the same batches and "
                       "one-at-a-time adds into a memory without it, alternating):"), "",
                  ("| embedder | add_many memories/s with / without | per memory, with over "
                   "without | one `add` p50 ms with / without | ratio |"),
                  "|---|---|---|---|---|"]
        for name, r in lex:
            one = r.get("single", {})
            wo = one.get("without_lexical")
            lines.append(f"| {name} | {r['sj_per_s']:.0f} / {r['without_lexical_per_s']:.0f} | "
                         f"{r['lexical_ratio']:.2f}x | "
                         + (f"{one['sj']['p50_ms']:.1f} / {wo['p50_ms']:.1f} | "
                            f"{one['lexical_ratio_p50']:.2f}x |" if wo else "- | - |"))
    if "synthetic" in ing:
        busy = ing["synthetic"]["raw_add_cores_busy"]
        lines += ["", (f"The embedded raw Chroma add kept {busy:.2f} of {res['nproc']} cores "
                       "busy (CPU time of the process over wall time).")]
    rci = res["rci"]
    lines += ["", "RCI:", "", "| affected | LLM calls | latency ms |", "|---|---|---|"]
    for r in rci["events"]:
        lines.append(f"| {r['affected']:,} | {r['llm_calls']} | {r['latency_ms']:.1f} |")
    lines += ["", (f"{rci['largest']:,} affected vs one Chroma metadata update of "
                   f"{rci['largest']:,} records ({rci['chroma_update_ms']:.0f} ms): "
                   f"{rci['largest_vs_chroma_update']:.2f}x")]
    b = res["buffer"]
    lines += ["", (f"Buffer at N={b['n']:,}: hit rate {b['hit_rate']:.2f}; buffered p50 "
                   f"{b['buffered']['p50_ms']:.2f} ms vs full p50 {b['full']['p50_ms']:.2f} ms "
                   f"({b['speedup_p50']:.1f}x), each timed inside a stream of its own calls")]
    if "alternating" in b:
        alt = b["alternating"]
        lines += ["", ("Buffer, each buffered search right after a full one (CPU caches cold): "
                       f"buffered p50 {alt['buffered']['p50_ms']:.2f} ms vs full p50 "
                       f"{alt['full']['p50_ms']:.2f} ms ({alt['speedup_p50']:.1f}x)")]
    m = res["memory"]
    lines += ["", (f"Memory at N={m['n']:,}: {m['rss_bytes_per_memory']:.0f} B/memory RSS, "
                   f"{m['disk_bytes_per_memory']:.0f} B/memory on disk; reopen {m['reopen_s']:.2f} s")]
    return "\n".join(lines) + "\n"


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_n = res["search"]["by_n"]
    ns = [int(n) for n in by_n]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    series: dict[str, list[float]] = {}
    for n in by_n:
        row = by_n[n]
        for mode in ("embedded", "server"):
            if mode in row:
                series.setdefault(f"scrubjay {mode}", []).append(row[mode]["sj"]["p50_ms"])
                series.setdefault(f"raw Chroma ({mode})", []).append(
                    row[mode]["chroma"]["p50_ms"])
        if "server_mirror" in row:  # the raw query is the server's, plotted above
            series.setdefault("scrubjay server, with a mirror", []).append(
                row["server_mirror"]["sj"]["p50_ms"])
        series.setdefault("numpy scan", []).append(row["numpy_scan"]["p50_ms"])
        series.setdefault("LangChain time-weighted", []).append(
            row["langchain_time_weighted"]["p50_ms"])
        series.setdefault("LlamaIndex time-weighted", []).append(
            row["llamaindex_time_weighted"]["p50_ms"])
    for name, ys in series.items():
        ax.loglog(ns, ys, marker="o", label=name)
    ax.set_xlabel("memories N")
    ax.set_ylabel("search latency p50 (ms)")
    ax.set_title(f"search cost vs N (k={res['k']}, {res['nproc']} cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_perf(res: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "perf.json", "md": out_dir / "perf.md",
             "png": out_dir / "perf.png"}
    paths["json"].write_text(json.dumps(res, indent=2) + "\n")
    paths["md"].write_text(_table(res))
    _plot(res, paths["png"])
    return paths


def add_perf_arguments(p: Any) -> None:
    p.add_argument("--sizes", default="1000,10000,100000",
                   help="comma-separated store sizes for search (default 1000,10000,100000)")
    p.add_argument("--million", action="store_true", help="also measure N = 1,000,000")
    p.add_argument("--mode", choices=("embedded", "server", "both"), default="both")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes (for tests; scenario and asof: a reduced size too)")
    p.add_argument("--queries", type=int, default=100, help="timed queries per size (100)")


def cmd_perf(args: argparse.Namespace, out: TextIO) -> int:
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.million:
        sizes.append(1_000_000)
    modes = ["embedded", "server"] if args.mode == "both" else [args.mode]
    kw: dict[str, Any] = {}
    if args.quick:
        sizes = list(QUICK_SIZES)
        kw = {"queries": 10, "baseline_queries": 3, "batch": 250,
              "rci_counts": [1, 10, 100], "ingest_n": 300, "single_adds": 20}
    else:
        kw = {"queries": args.queries}
    res = run_perf(sizes=sizes, modes=modes, out_dir=Path(args.out),
                   progress=not args.no_progress, **kw)
    paths = write_perf(res, Path(args.out))
    out.write(paths["md"].read_text() + "\n")
    out.write("wrote " + ", ".join(str(p) for p in paths.values()) + "\n")
    return 0
