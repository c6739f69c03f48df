"""Namespace isolation under a randomised workload.

Several users share one embedded store folder and one vocabulary (so any leak would show up as
a hit). Adds, deletes and queries are interleaved at random; every answer of the core API, the
LangChain retriever, the LlamaIndex retriever and the LangGraph store must come from the
asking namespace only. ``SCRUBJAY_ISOLATION_QUERIES`` (default 10000) sets the total number of
queries, split between the four paths (40/25/25/10 %); ``SCRUBJAY_ISOLATION_SEED`` the seed.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayMemory
from scrubjay.testing import FrozenClock, HashEmbedder

QUERIES = int(os.environ.get("SCRUBJAY_ISOLATION_QUERIES", "10000"))
SEED = int(os.environ.get("SCRUBJAY_ISOLATION_SEED", "11"))
USERS = ("alice", "bob", "carol", "dave", "erin", "frank")
WORDS = ("garden", "taxes", "piano", "flight", "doctor", "dinner", "meeting", "password",
         "address", "salary", "birthday", "allergy", "car", "school", "bank", "lease")
CFG = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"))


def _text(rng: random.Random) -> str:
    return " ".join(rng.sample(WORDS, 3)) + f" {rng.randrange(1000)}"


def test_randomised_multi_namespace_workload_never_leaks(tmp_path: Path) -> None:
    from langchain_scrubjay import ScrubJayRetriever as LCRetriever
    from langchain_scrubjay import ScrubJayStore
    from llamaindex_scrubjay import ScrubJayRetriever as LIRetriever

    rng = random.Random(SEED)
    clock = FrozenClock(1_764_000_000.0)
    folder = tmp_path / "store"
    mems = {u: ScrubJayMemory(path=folder, namespace=u, embedder=HashEmbedder(), clock=clock,
                              config=CFG) for u in USERS}
    owned: dict[str, set[str]] = {u: set() for u in USERS}
    lc = {u: LCRetriever(memory=mems[u], k=8) for u in USERS}
    li = {u: LIRetriever(mems[u], similarity_top_k=8) for u in USERS}
    lg = ScrubJayStore(path=folder, embedder=HashEmbedder(), clock=clock, config=CFG)
    lg_keys: dict[str, set[str]] = {u: set() for u in USERS}
    for u in USERS:  # a common starting corpus
        owned[u] |= {r.id for r in mems[u].add_many([_text(rng) for _ in range(40)])}
        for i in range(10):
            lg.put(("users", u, "notes"), f"k{i}", {"text": _text(rng)})
            lg_keys[u].add(f"k{i}")

    counts = {"core": 0, "langchain": 0, "llamaindex": 0, "langgraph": 0}
    hits_checked = 0
    leaks = 0
    started = time.monotonic()
    # the LangGraph store lists the backend's namespaces on every search (slow): a smaller share
    share = {"core": 0.4, "langchain": 0.25, "llamaindex": 0.25, "langgraph": 0.1}
    while sum(counts.values()) < QUERIES:
        u = rng.choice(USERS)
        roll = rng.random()
        if roll < 0.01:  # writes interleaved with the queries
            owned[u].add(mems[u].add(_text(rng), context=rng.choice(["", "home", "work"])).id)
            continue
        if roll < 0.015 and owned[u]:
            mid = rng.choice(sorted(owned[u]))
            mems[u].delete(mid)
            owned[u].discard(mid)
            continue
        query = " ".join(rng.sample(WORDS, 2))
        path = rng.choice([p for p, n in counts.items() if n < share[p] * QUERIES]
                          or list(counts))
        if path == "core":
            ids = [h.id for h in mems[u].search(query, k=8, context=rng.choice(["", "home"]))]
        elif path == "langchain":
            docs = (lc[u].invoke(query) if rng.random() < 0.8
                    else asyncio.run(lc[u].ainvoke(query)))
            ids = [d.metadata["id"] for d in docs]
        elif path == "llamaindex":
            ids = [n.node.node_id for n in li[u].retrieve(query)]
        else:
            items = lg.search(("users", u), query=query, limit=8)
            ids = [it.key for it in items]
            leaks += sum(1 for it in items if tuple(it.namespace) != ("users", u, "notes"))
            leaks += sum(1 for k in ids if k not in lg_keys[u])
            counts[path] += 1
            hits_checked += len(ids)
            continue
        counts[path] += 1
        hits_checked += len(ids)
        leaks += sum(1 for mid in ids if mid not in owned[u])
        assert ids, "a namespace with memories answers every query"
    for u in USERS:  # the final state: each namespace holds exactly its own memories
        assert {r.id for r in mems[u]} == owned[u]
    lg.close()
    for m in mems.values():
        m.close()
    print(f"\nRELIABILITY isolation: namespaces={len(USERS)} queries={sum(counts.values())} "
          f"{counts} hits_checked={hits_checked} cross_namespace_results={leaks} "
          f"seconds={time.monotonic() - started:.1f}")
    assert leaks == 0
