"""ScrubJayMemory end to end on a real Chroma: embedded (PersistentClient) and `chroma run`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from datetime import UTC

import numpy as np
import pytest
from scrubjay import (
    BufferConfig,
    ConsolidationConfig,
    EmbedderMismatchError,
    InvalidInputError,
    InvalidNamespaceError,
    MemoryNotFoundError,
    RetentionPolicy,
    ScrubJayConfig,
    ScrubJayError,
    ScrubJayMemory,
    SearchConfig,
    StoreLockedError,
)
from scrubjay.backends.mirrored import MirroredBackend
from scrubjay.decay import utility
from scrubjay.ranking import Query
from scrubjay.scoring import adaptive_weights
from scrubjay.snapshot import snapshot_path
from scrubjay.testing import HashEmbedder

HOUR, DAY = 3600.0, 86_400.0

FACTS = [
    ("The user's sister lives in Oslo", "family chat"),
    ("The user is parked on level 3 right now", "at the mall"),
    ("Ticket 88: the login page crashes on Safari", "debugging the web app"),
    ("How to deploy: run make release then tag the commit", "release work"),
    ("The user drinks green tea without sugar", "ordering coffee"),
    ("The project kickoff meeting is in room 12", "planning the project"),
]


def fill(mem: ScrubJayMemory, clock) -> list:
    recs = []
    for text, ctx in FACTS:
        recs.append(mem.add(text, context=ctx))
        clock.advance(minutes=10)
    return recs


def test_round_trip_get_len_iter_delete(memory_factory, clock) -> None:
    mem = memory_factory()
    recs = fill(mem, clock)
    assert len(mem) == len(FACTS)
    assert {r.id for r in mem} == {r.id for r in recs}
    got = mem.get(recs[0].id)
    assert got == recs[0]
    assert recs[0].id in mem and "nope" not in mem
    mem.delete(recs[0].id)
    assert len(mem) == len(FACTS) - 1
    with pytest.raises(MemoryNotFoundError, match="No memory with id"):
        mem.get(recs[0].id)
    with pytest.raises(KeyError):          # MemoryNotFoundError is also a KeyError
        mem.delete(recs[0].id)


def test_hit_breakdown_adds_up(memory_factory, clock) -> None:
    mem = memory_factory()
    recs = fill(mem, clock)
    parked = next(r for r in mem if r.text.startswith("The user is parked"))
    # (a search sees the memories told by its time: ask once all are told)
    hits = mem.search("where is the user parked", context="at the mall", k=3,
                      at=recs[-1].created_at_s + 60)
    assert hits[0].id == parked.id and len(hits) == 3
    for h in hits:
        a, b, g, d = h.weights
        assert sum(h.weights) == pytest.approx(1.0)
        assert h.paper_score == pytest.approx(a * h.what + b * h.where + g * h.when + d * h.graph)
        # default ranking: dense relevance mixed by the adaptive weights, fused with the
        # lexical channel, times V / V0, times the time factor (at most 1: time reorders only
        # memories of comparable relevance)
        dense = (a * h.what + b * h.where) / (a + b)
        lam = h.lexical_weight
        assert h.score == pytest.approx(((1 - lam) * dense + lam * h.lexical) * h.record.value
                                        * h.time_factor)
        assert 0.0 < h.time_factor <= 1.0
        assert h.when == h.utility
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def _reference_scores(mem: ScrubJayMemory, query: str, context: str, t_q: float) -> dict:
    """Eq. 5-8 computed naively in Python from the mirror and the networkx graph."""
    emb = mem.embedder
    e_q, c_q = emb.embed([query])[0], emb.embed([context])[0]
    view = mem._backend._mirror.view()
    newest = max(r.created_at_s for r in view.records)
    w = adaptive_weights(query, float(np.linalg.norm(e_q)), float(np.linalg.norm(c_q)),
                         t_q - newest, mem.config.weights)
    sp, u = {}, {}
    for i, r in enumerate(view.records):
        u[r.id] = r.value * math.exp(-r.pi * max(0.0, t_q - r.created_at_s) / r.tau_s)
        sp[r.id] = (w[0] * float(view.what[i] @ e_q) + w[1] * float(view.where[i] @ c_q)
                    + w[2] * u[r.id])
    out = {}
    for r in view.records:
        phi = sum(d["weight"] * sp[j] * u[j] for j, d in mem.graph.g[r.id].items())
        out[r.id] = sp[r.id] + w[3] * phi
    return out


def test_search_is_exact_against_naive_reference(clock, tmp_path) -> None:
    rng = np.random.default_rng(7)
    words = ["alpha", "beta", "gamma", "delta", "office", "car", "key", "meeting", "tea", "oslo", "level", "room", "ticket"]
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(32), clock=clock,
                         config=ScrubJayConfig(search=SearchConfig(ranking="paper")))
    for _ in range(300):
        text = " ".join(rng.choice(words, size=4))
        ctx = " ".join(rng.choice(words, size=2)) if rng.random() < 0.7 else ""
        mem.add(text, context=ctx)
        clock.advance(seconds=float(rng.uniform(0, 3 * HOUR)))
    clock.advance(days=2)
    for query, ctx in [("office key", ""), ("tea room", "meeting ticket"), ("related car", "")]:
        ref = _reference_scores(mem, query, ctx, clock())
        hits = mem.search(query, context=ctx, k=10)
        best = sorted(ref.items(), key=lambda kv: -kv[1])[:10]
        assert [h.score for h in hits] == pytest.approx([s for _, s in best], abs=1e-5)
        for h in hits:
            assert h.score == pytest.approx(ref[h.id], abs=1e-5)


@pytest.mark.parametrize("lexical", [False, True])
def test_server_matches_embedded_when_candidates_cover(clock, tmp_path, chroma_server,
                                                       lexical) -> None:
    """A server without a mirror (the client/server default) ranks as an embedded store, with
    the lexical channel and without it."""
    import chromadb

    emb = HashEmbedder(32)
    cfg = ScrubJayConfig(search=SearchConfig(lexical=lexical))
    local = ScrubJayMemory(path=tmp_path / "e", embedder=emb, clock=clock, config=cfg)
    remote = ScrubJayMemory(client=chromadb.HttpClient(host=chroma_server[0],
                                                       port=chroma_server[1]),
                            namespace=f"parity-{lexical}", embedder=emb, clock=clock,
                            config=cfg)
    assert type(remote._backend).__name__ == "ServerBackend"
    remote.forget_namespace()
    items = [{"text": f"{a} {b}", "context": c, "at": clock() - i * 600, "id": f"m{i}"}
             for i, (a, b, c) in enumerate([("office", "key K7", "work"), ("car", "park", ""),
                                            ("tea", "green", "cafe"), ("key", "car", "work"),
                                            ("office", "tea", "cafe"), ("park", "level", "")])]
    local.add_many(items)
    remote.add_many(items)
    for q in ["office key", "car", "green tea", "K7"]:
        for ctx in ("work", ""):
            a = [(h.id, round(h.score, 6), round(h.lexical, 6), h.lexical_weight)
                 for h in local.search(q, context=ctx, k=4)]
            b = [(h.id, round(h.score, 6), round(h.lexical, 6), h.lexical_weight)
                 for h in remote.search(q, context=ctx, k=4)]
            assert a == b
            assert any(lex > 0 for _, _, lex, _ in a) == lexical
    remote.forget_namespace()
    local.close()
    remote.close()


def test_server_with_a_mirror_matches_embedded_with_the_lexical_channel(clock, tmp_path,
                                                                       chroma_server) -> None:
    import chromadb

    emb = HashEmbedder(32)
    local = ScrubJayMemory(path=tmp_path / "e", embedder=emb, clock=clock)
    remote = ScrubJayMemory(client=chromadb.HttpClient(host=chroma_server[0],
                                                       port=chroma_server[1]),
                            namespace="parity-lex", embedder=emb, clock=clock,
                            config=ScrubJayConfig(search=SearchConfig(mirror=True)))
    remote.forget_namespace()
    items = [{"text": f"{a} {b}", "context": c, "at": clock() - i * 600, "id": f"m{i}"}
             for i, (a, b, c) in enumerate([("office", "key K7", "work"), ("car", "park", ""),
                                            ("tea", "green", "cafe"), ("key", "car", "work"),
                                            ("office", "tea", "cafe"), ("park", "level", "")])]
    local.add_many(items)
    remote.add_many(items)
    for q in ["office key", "K7", "green tea"]:
        a = [(h.id, round(h.score, 6), h.lexical) for h in local.search(q, context="work", k=4)]
        b = [(h.id, round(h.score, 6), h.lexical) for h in remote.search(q, context="work", k=4)]
        assert a == b
        assert any(lex > 0 for _, _, lex in a)
    remote.forget_namespace()
    local.close()
    remote.close()


@pytest.mark.parametrize(("offline", "schedule"), [
    # the paper's keyword rule: ephemeral stale after 1.5 h, factual after 312 days
    ("keyword", [(10 * 60, (False, False)), (1 * DAY, (True, False)),
                 (200 * DAY, (True, False)), (400 * DAY, (True, True))]),
    # the trained estimator: a dentist visit lasts minutes to hours, a birthplace a lifetime
    ("estimator", [(60, (False, False)), (1 * DAY, (True, False)),
                   (400 * DAY, (True, False)), (20 * 365 * DAY, (True, False))]),
])
def test_ephemeral_memory_turns_stale_long_before_factual(memory_factory, clock, offline,
                                                          schedule) -> None:
    from scrubjay import ClassifierConfig

    mem = memory_factory(config=ScrubJayConfig(classifier=ClassifierConfig(offline=offline)))
    eph = mem.add("I am at the dentist right now")
    fact = mem.add("My mother was born in Porto")
    assert (eph.source, fact.source) == (offline, offline)
    for age, expect in schedule:
        hits = {h.id: h for h in mem.search("mother dentist", k=2, at=clock() + age)}
        assert (hits[eph.id].stale, hits[fact.id].stale) == expect, age


def test_namespaces_are_isolated(memory_factory, clock) -> None:
    alice, bob = memory_factory("alice"), memory_factory("bob")
    a = alice.add("alice likes jazz")
    b = bob.add("bob likes jazz")
    assert [h.id for h in alice.search("jazz", k=5)] == [a.id]
    assert [h.id for h in bob.search("jazz", k=5)] == [b.id]
    with pytest.raises(MemoryNotFoundError):
        alice.get(b.id)
    with pytest.raises(MemoryNotFoundError):
        bob.delete(a.id)


@pytest.mark.parametrize("namespace", ["", "a/b", "../x", "x" * 49, "sj_x_what ", 3, "é"])
def test_bad_namespaces(namespace) -> None:
    with pytest.raises(InvalidNamespaceError):
        ScrubJayMemory(namespace=namespace, embedder=HashEmbedder())


BAD_ADDS = [
    ({"text": ""}, "non-empty"),
    ({"text": "   "}, "non-empty"),
    ({"text": 5}, "must be a str"),
    ({"text": "x" * 100_001}, "at most"),
    ({"text": "a\x00b"}, "NUL"),
    ({"text": "ok", "context": 3}, "must be a str"),
    ({"text": "ok", "at": float("nan")}, "finite"),
    ({"text": "ok", "at": float("inf")}, "finite"),
    ({"text": "ok", "at": -1}, "finite time >= 0"),
    ({"text": "ok", "at": "yesterday"}, "epoch seconds"),
    ({"text": "ok", "at": True}, "epoch seconds"),
    ({"text": "ok", "at": 10**13}, "future"),
    ({"text": "ok", "metadata": ["a"]}, "mapping"),
    ({"text": "ok", "metadata": {"k": float("nan")}}, "finite"),
    ({"text": "ok", "metadata": {"k": object()}}, "JSON values"),
    ({"text": "ok", "metadata": {1: "a"}}, "str keys"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_ADDS)
def test_bad_input_is_rejected_and_nothing_is_lost(memory_factory, clock, kwargs,
                                                   message) -> None:
    mem = memory_factory()
    kept = mem.add("the spare key is under the mat")
    with pytest.raises(InvalidInputError, match=message):
        mem.add(**kwargs)
    with pytest.raises(ValueError):  # also a builtin ValueError
        mem.add(**kwargs)
    assert [r.id for r in mem] == [kept.id]
    assert mem.search("spare key", k=1)[0].id == kept.id


def test_an_integrate_that_would_store_a_future_memory_changes_nothing(memory_factory) -> None:
    """``integrate(store=True)`` stores the news at ``at``; a time the add refuses is refused
    before the event updates anything (it used to update the related memories, then raise
    from the add)."""
    mem = memory_factory()
    mem.add_many([f"The user's sister lives in Oslo, note {i}" for i in range(3)])
    before = {r.id: r for r in mem}
    with pytest.raises(InvalidInputError, match="future"):
        mem.integrate("The user's sister no longer lives in Oslo", at=mem.now() + 86_400)
    assert {r.id: r for r in mem} == before


def test_naive_datetime_rejected_aware_accepted(memory_factory, clock) -> None:
    from datetime import datetime

    mem = memory_factory()
    with pytest.raises(InvalidInputError, match="aware datetime"):
        mem.add("x", at=datetime(2025, 1, 1))
    rec = mem.add("x", at=datetime(2025, 1, 1, tzinfo=UTC))
    assert rec.created_at_s == datetime(2025, 1, 1, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"query": ""}, "non-empty"), ({"query": None}, "must be a str"),
    ({"query": "x", "k": 0}, "in \\[1, 10000\\]"), ({"query": "x", "k": 2.5}, "int"),
    ({"query": "x", "at": float("nan")}, "finite"), ({"query": "x", "context": 1}, "str"),
])
def test_bad_search_arguments(memory_factory, kwargs, message) -> None:
    mem = memory_factory()
    mem.add("something")
    with pytest.raises(InvalidInputError, match=message):
        mem.search(**kwargs)


def test_add_many_is_all_or_nothing(memory_factory) -> None:
    mem = memory_factory()
    with pytest.raises(InvalidInputError):
        mem.add_many(["one", {"text": "two"}, {"text": ""}])
    assert len(mem) == 0
    recs = mem.add_many(["one", {"text": "two", "context": "c", "metadata": {"src": "x"}}])
    assert [r.text for r in recs] == ["one", "two"] and recs[1].metadata == {"src": "x"}
    with pytest.raises(InvalidInputError, match="twice"):
        mem.add_many([{"text": "a", "id": "same"}, {"text": "b", "id": "same"}])
    with pytest.raises(InvalidInputError, match="Unknown keys"):
        mem.add_many([{"txt": "a"}])
    with pytest.raises(InvalidInputError):
        mem.add_many("not a list")


def test_add_with_existing_id_replaces(memory_factory) -> None:
    mem = memory_factory()
    mem.add_many([{"text": "old text", "id": "fixed"}])
    mem.add_many([{"text": "new text", "id": "fixed"}])
    assert len(mem) == 1 and mem.get("fixed").text == "new text"


def test_embedder_that_fails_loses_nothing(memory_factory, clock) -> None:
    from scrubjay.errors import EmbeddingError

    mem = memory_factory()
    kept = mem.add("keep me")
    mem._embedder = HashEmbedder(64)
    mem._embedder.fn = lambda texts: [[float("nan")] * 64 for _ in texts]
    with pytest.raises(EmbeddingError, match="NaN"):
        mem.add("poison")
    assert [r.id for r in mem] == [kept.id]


def test_prepare_buffer_serves_task_queries(memory_factory, clock) -> None:
    mem = memory_factory(config=ScrubJayConfig())
    fill(mem, clock)
    for i in range(30):
        mem.add(f"unrelated filler memory number {i} about gardening")
    ids = mem.prepare("fix the Safari login crash", context="debugging the web app", k=8)
    assert len(ids) == 8
    hits = mem.search("login page crashes on Safari", context="debugging the web app", k=1)
    assert hits[0].from_buffer and hits[0].text.startswith("Ticket 88")
    # below theta_B the buffer is skipped and the full store answers
    strict = memory_factory("strict", config=ScrubJayConfig(buffer=BufferConfig(theta=5.0)))
    fill(strict, clock)
    strict.prepare("fix the Safari login crash", context="debugging the web app", k=2)
    miss = strict.search("green tea without sugar", k=1)
    assert not miss[0].from_buffer and miss[0].text.startswith("The user drinks green tea")
    assert strict.buffer is not None and miss[0].id not in strict.buffer.ids
    mem.clear_buffer()
    assert mem.buffer is None


def test_consolidation_keeps_hubs_and_protected(memory_factory, clock) -> None:
    cfg = ScrubJayConfig(consolidation=ConsolidationConfig(
        retention=RetentionPolicy(protected_labels=frozenset({"procedural"}))))
    mem = memory_factory(config=cfg)
    eph = mem.add("the kettle is on right now")
    clock.advance(days=2)   # > Delta_T: no temporal edge to what follows
    prot = mem.add("the user's insulin dose changes right now", metadata={"protected": True})
    clock.advance(days=2)
    proc = mem.add("how to reset the router: hold the button")
    clock.advance(days=2)
    fact = mem.add("the user was born in Lima")
    clock.advance(days=2)
    # an ephemeral memory created beside a durable one is a hub (temporal edge): it survives
    hub = mem.add("the user is waiting at gate 4 right now")
    anchor = mem.add("the user's passport number ends in 4471")
    assert mem.graph.neighbors(hub.id) if isinstance(mem._backend, MirroredBackend) else True
    removed = mem.consolidate(at=clock() + 30 * DAY)
    assert removed == [eph.id]
    assert {r.id for r in mem} == {prot.id, proc.id, fact.id, hub.id, anchor.id}
    assert mem.consolidate(at=clock() + 30 * DAY) == []


def test_delete_removes_from_graph_buffer_and_chroma(memory_factory, clock) -> None:
    mem = memory_factory()
    a = mem.add("alpha beta gamma", context="ctx")
    b = mem.add("alpha beta delta", context="ctx")
    mem.prepare("alpha", k=2)
    mem.delete(a.id)
    assert a.id not in mem.buffer.ids
    assert mem._store.get([a.id]) == []
    assert mem._store.where.get(ids=[a.id])["ids"] == []
    if isinstance(mem._backend, MirroredBackend):
        assert a.id not in mem.graph
    stored_edges = json.loads(mem._store.get([b.id])[0].meta["sj_edges"])
    assert all(e[0] != a.id for e in stored_edges)


def test_forget_namespace(memory_factory) -> None:
    mem = memory_factory()
    other = memory_factory("other")
    mem.add("secret one")
    other.add("kept")
    mem.forget_namespace()
    assert len(mem) == 0 and mem.search("secret", k=1) == []
    assert len(other) == 1
    mem.add("works again")
    assert len(mem) == 1


def test_server_search_does_not_pull_the_collection(clock, chroma_server) -> None:
    import chromadb

    cfg = ScrubJayConfig(search=SearchConfig(candidates=40))
    mem = ScrubJayMemory(client=chromadb.HttpClient(host=chroma_server[0], port=chroma_server[1]),
                         namespace="bulk", embedder=HashEmbedder(32), clock=clock, config=cfg)
    mem.forget_namespace()
    mem.add_many([{"text": f"note {i} about topic {i % 17}", "at": clock() - i}
                  for i in range(400)])
    target = mem.add("zebra crossing marker paint")
    fetched: list[int] = []
    real_get = mem._store.get
    mem._store.get = lambda ids, **kw: (fetched.append(len(ids)), real_get(ids, **kw))[1]
    mem._store.iter_all = None  # would raise if called
    hits = mem.search("zebra crossing marker paint", k=5)
    assert len(hits) == 5 and hits[0].id == target.id
    assert sum(fetched) <= 40 + 5 * 16   # candidates, then the graph neighbours of the top k
    mem.forget_namespace()


REOPEN = textwrap.dedent("""
    import json, sys
    from scrubjay import ScrubJayMemory
    from scrubjay.testing import HashEmbedder, FrozenClock
    kind, target, ns = sys.argv[1], sys.argv[2], sys.argv[3]
    if kind == "server":
        import chromadb
        host, port = target.split(":")
        kw = {"client": chromadb.HttpClient(host=host, port=int(port))}
    else:
        kw = {"path": target}
    mem = ScrubJayMemory(namespace=ns, embedder=HashEmbedder(64), clock=FrozenClock(0), **kw)
    out = []
    for q, c in [("where is the user parked", "at the mall"), ("login crash", ""),
                 ("deploy steps", "release work")]:
        out.append([[h.id, round(h.score, 9), h.stale, h.graph] for h in
                    mem.search(q, context=c, k=4, at=float(sys.argv[4]))])
    out.append(sorted((r.id, r.label, r.pi, r.tau_s, r.value) for r in mem))
    out.append(list(mem.buffer.ids) if mem.buffer else None)
    print(json.dumps(out))
""")


def test_reopen_in_fresh_process_gives_identical_results(backend, tmp_path, clock,
                                                         request) -> None:
    if backend == "server":
        import chromadb

        host, port = request.getfixturevalue("chroma_server")
        kw = {"client": chromadb.HttpClient(host=host, port=port)}
        target, ns = f"{host}:{port}", "reopen"
    else:
        kw, target, ns = {"path": tmp_path / "store"}, str(tmp_path / "store"), "reopen"
    mem = ScrubJayMemory(namespace=ns, embedder=HashEmbedder(64), clock=clock, **kw)
    mem.forget_namespace()
    fill(mem, clock)
    mem.integrate("The user moved the car to level 5 instead", context="at the mall")
    at = clock() + 3 * HOUR

    def snapshot(m: ScrubJayMemory) -> list:
        out = []
        for q, c in [("where is the user parked", "at the mall"), ("login crash", ""),
                     ("deploy steps", "release work")]:
            out.append([[h.id, round(h.score, 9), h.stale, h.graph] for h in
                        m.search(q, context=c, k=4, at=at)])
        out.append(sorted([r.id, r.label, r.pi, r.tau_s, r.value] for r in m))
        out.append(list(m.buffer.ids) if m.buffer else None)
        return out

    mem.prepare("find the car", context="at the mall", k=3)
    before = json.loads(json.dumps(snapshot(mem)))
    assert before[-1] and len(before[-1]) == 3
    mem.close()
    proc = subprocess.run([sys.executable, "-c", REOPEN, backend, target, ns, str(at)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    after = json.loads(proc.stdout)
    after[-2] = [list(x) for x in after[-2]]
    assert after == before


def test_second_process_cannot_open_embedded_store(tmp_path, embedder) -> None:
    mem = ScrubJayMemory(path=tmp_path / "locked", embedder=embedder)
    code = ("from scrubjay import ScrubJayMemory, StoreLockedError\n"
            "from scrubjay.testing import HashEmbedder\n"
            f"try:\n    ScrubJayMemory(path={str(tmp_path / 'locked')!r}, embedder=HashEmbedder())\n"
            "except StoreLockedError as e:\n    print('LOCKED', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.stdout.startswith("LOCKED") and "chroma run" in proc.stdout
    mem.close()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0 and "LOCKED" not in proc.stdout
    assert issubclass(StoreLockedError, ScrubJayError)


def test_reopen_with_another_embedder_fails_clearly(tmp_path) -> None:
    mem = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(64))
    mem.add("hello")
    mem.close()
    with pytest.raises(EmbedderMismatchError, match="hash-bow-64"):
        ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(32))
    again = ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(64))
    assert len(again) == 1


def test_default_embedder_is_the_bundled_offline_model(tmp_path) -> None:
    mem = ScrubJayMemory(path=tmp_path / "d")
    assert mem.embedder.name == "wordllama-l2-supercat-256"
    mem.add("The office moved to the second floor of building A")
    mem.add("My favourite fruit is mango")
    assert mem.search("Which floor is the office on?", k=1)[0].text.startswith("The office")


def test_query_time_before_creation_counts_as_age_zero(memory_factory, clock) -> None:
    mem = memory_factory()
    rec = mem.add("x marks the spot")
    # a search before the memory was told does not see it (as-of semantics, docs/ranking.md)
    assert mem.search("x marks", k=1, at=clock() - 1000) == []
    assert mem.utility_of(rec.id, at=clock() - 1000) == pytest.approx(
        float(utility(1.0, rec.pi, rec.tau_s, 0, 0)))
    hit = mem.search("x marks", k=1, at=clock())[0]
    assert hit.utility == pytest.approx(float(utility(1.0, rec.pi, rec.tau_s, 0, 0)))


def test_in_memory_instances_are_independent(embedder) -> None:
    a = ScrubJayMemory(embedder=embedder)
    b = ScrubJayMemory(embedder=embedder)
    a.add("only in a")
    assert len(a) == 1 and len(b) == 0 and b.search("only in a", k=1) == []
    a.close()
    assert len(b) == 0


def test_relevance_ranking_keeps_stale_but_relevant_memories_and_sinks_superseded(
        memory_factory, clock) -> None:
    mem = memory_factory()
    parked = mem.add("the car is parked on level 3 right now", context="mall")
    mem.add("my sister lives in Oslo")
    clock.advance(days=2)
    top = mem.search("where is the car parked", k=1)[0]
    assert top.id == parked.id and top.stale          # relevant, honestly flagged stale
    fresh = mem.search("where is the car parked", k=1, exclude_stale=True)
    assert len(fresh) == 1 and fresh[0].id != parked.id and not fresh[0].stale
    # RCI lowers the old memory's value: the replacement now ranks first
    mem.integrate("the car is parked on level 5 now", context="mall")
    hits = mem.search("where is the car parked", k=2)
    assert hits[0].text == "the car is parked on level 5 now" and hits[1].id == parked.id
    paper = memory_factory("paper", config=ScrubJayConfig.paper())
    assert paper.config.search.ranking == "paper"
    assert paper.config.classifier.offline == "keyword"


def test_records_read_back_after_reopen_are_bit_identical(memory_factory) -> None:
    """Chroma keeps 15 significant digits of a metadata float; records hold exactly that, so
    a restart does not change a timestamp, pi, tau or value by a last bit."""
    mem = memory_factory()
    at = 1_763_996_543.1234567  # 17 significant digits, as time.time() gives
    added = [mem.add(f"note {i} about the boiler pressure", at=at + i / 7) for i in range(20)]
    mem.integrate("The boiler pressure was fixed by the engineer", at=at + 100.0 / 3)
    before = {r.id: r for r in mem}
    mem.close()
    again = memory_factory()
    after = {r.id: r for r in again}
    assert after == before and {r.id for r in added} <= set(after)


def test_buffered_hits_equal_the_full_ranking_of_the_buffered_rows(tmp_path, clock,
                                                                    embedder) -> None:
    """The buffer's gathered block (rows and neighbours kept from prepare()) ranks exactly as
    the full path's ``_rank`` over the same rows, also after writes that touch those rows."""
    mem = ScrubJayMemory(path=tmp_path / "b", embedder=embedder, clock=clock,
                         config=ScrubJayConfig(buffer=BufferConfig(theta=-1.0)))
    fill(mem, clock)
    for i in range(12):
        mem.add(f"Ticket {90 + i}: the login page crashes on Safari build {i}",
                context="debugging the web app")
        mem.add(f"note {i} about the garden and the login page", context="weekend")
    mem.prepare("fix the Safari login crash", context="debugging the web app", k=12)

    def check(query: str, context: str, k: int) -> None:
        hits = mem.search(query, context=context, k=k)
        assert hits and all(h.from_buffer for h in hits)
        mirror = mem._backend._mirror
        rows = mirror.view().take([mirror.row_of[i] for i in mem.buffer.ids])
        e_q = mem._embed([query], query=True)[0]
        c_q = mem._embed([context], query=True)[0]
        ref = mem._backend.rank(rows, Query(e_q=e_q, c_q=c_q, weights=np.array(hits[0].weights),
                                            k=k, t_q=clock()), from_buffer=True)
        assert [h.id for h in hits] == [h.id for h in ref]
        for h, r in zip(hits, ref):  # the same arithmetic: the same floats, not just close
            assert h == r
            assert (h.score, h.graph, h.what, h.where, h.utility, h.stale) == (
                r.score, r.graph, r.what, r.where, r.utility, r.stale)
        assert any(h.graph > 0 for h in hits)  # the neighbours' S'U entered the scores

    check("login page crashes on Safari", "debugging the web app", 5)
    check("Safari build crash", "", 3)
    # writes that touch buffered rows and their neighbours: the block is gathered again
    mem.integrate("Ticket 95: the login page crash on Safari is fixed now", store=True)
    check("login page crashes on Safari", "debugging the web app", 5)
    mem.add("Ticket 200: the login page crashes on Safari again", context="debugging the web app")
    clock.advance(hours=3)
    check("login page crashes on Safari", "debugging the web app", 5)
    mem.delete(mem.buffer.ids[0])
    check("login page crashes on Safari", "debugging the web app", 5)
    mem.close()


def test_new_hit_equals_the_keyword_constructor() -> None:
    """Searches build hits with types.new_hit (slot setters); it must give the same object as
    Hit(...), pickle alike and stay frozen."""
    import pickle

    from scrubjay.types import Hit, MemoryRecord, new_hit

    rec = MemoryRecord(id="a", text="t", context="", label="factual", pi=0.1, tau_s=10.0,
                       value=1.0, created_at_s=0.0)
    w = (0.4, 0.2, 0.2, 0.2)
    fast = new_hit(rec, 0.75, 0.5, True, 0.3, 0.1, 0.05, w, True)
    slow = Hit(record=rec, score=0.75, paper_score=0.75, utility=0.5, stale=True, what=0.3,
               where=0.1, when=0.5, graph=0.05, weights=w, from_buffer=True)
    assert fast == slow and repr(fast) == repr(slow)
    assert pickle.loads(pickle.dumps(fast)) == slow
    with pytest.raises(AttributeError):
        fast.score = 1.0  # type: ignore[misc]


def test_rows_leave_out_empty_fields_and_read_back_the_same(memory_factory) -> None:
    """A memory without context, annotation or user metadata is written without those keys
    (Chroma writes one row per key); it reads back, after a reopen, like one that has them."""
    mem = memory_factory()
    plain = mem.add("the printer on floor 2 is jammed")
    full = mem.add("the printer on floor 3 works", context="office", metadata={"room": "3.1"})
    stored = {row.id: row.meta for row in mem._store.get([plain.id, full.id])}
    assert not {"sj_ctx", "sj_ann", "sj_meta"} & set(stored[plain.id])
    assert {"sj_ctx", "sj_meta", "sj_label", "sj_pi", "sj_tau", "sj_value", "sj_t",
            "sj_edges"} <= set(stored[full.id])
    mem.close()
    again = memory_factory()
    assert again.get(plain.id) == plain
    assert (plain.context, plain.annotation, plain.metadata) == ("", "", {})
    assert again.get(full.id) == full and full.metadata == {"room": "3.1"}


class _FailingSecondAdd:
    """A what collection whose second ``add`` raises, as a write cut short part-way (and,
    with ``deletes_fail``, every ``delete`` too: the clean-up after it fails as well)."""

    def __init__(self, col: object, *, deletes_fail: bool = False) -> None:
        self._col, self.adds, self._deletes_fail = col, 0, deletes_fail

    def __getattr__(self, name: str) -> object:
        return getattr(self._col, name)

    def add(self, **kwargs: object) -> None:
        self.adds += 1
        if self.adds == 2:
            raise RuntimeError("disk full")
        self._col.add(**kwargs)

    def delete(self, **kwargs: object) -> None:
        if self._deletes_fail:
            raise RuntimeError("disk full")
        self._col.delete(**kwargs)


def test_a_retry_after_a_write_cut_short_stores_the_retried_rows(memory_factory,
                                                                  monkeypatch) -> None:
    """New rows are written with Chroma's add, which ignores an id that already has a row.
    A batch whose write failed after its first part landed (and whose clean-up failed too)
    must still be stored as retried, not as the rows of the failed attempt."""
    import scrubjay.store as store_module

    monkeypatch.setattr(store_module, "_UPDATE_BATCH", 2)  # a batch of 4 writes in two parts
    mem = memory_factory()
    kept = mem.add("The user's sister lives in Oslo", context="family chat")
    failing = _FailingSecondAdd(mem._store.what, deletes_fail=True)
    real, mem._store.what = mem._store.what, failing
    ids = [f"n{i}" for i in range(4)]
    with pytest.raises(ScrubJayError):
        mem.add_many([{"text": f"first draft {i}", "id": ids[i]} for i in range(4)])
    assert real.get(ids=ids[:2])["ids"], "the first part landed before the failure"
    mem._store.what = real
    mem.add_many([{"text": f"final note {i}", "id": ids[i]} for i in range(4)])
    got = real.get(ids=ids, include=["metadatas"])
    assert {rid: _row_parts(m)[1] for rid, m in zip(got["ids"], got["metadatas"], strict=True)} \
        == {ids[i]: f"final note {i}" for i in range(4)}
    assert [mem.get(i).text for i in ids] == [f"final note {i}" for i in range(4)]
    assert len(mem) == 5 and mem.get(kept.id) == kept



def test_a_batch_that_failed_part_way_leaves_no_rows_behind(memory_factory,
                                                             monkeypatch) -> None:
    """Items without ids get generated ones, which no retry can reach: when their write
    fails after its first part landed, the rows that landed are deleted again, so that the
    batch that raised shows up neither in Chroma nor after a reopen."""
    import scrubjay.store as store_module

    monkeypatch.setattr(store_module, "_UPDATE_BATCH", 2)  # a batch of 4 writes in two parts
    mem = memory_factory()
    kept = mem.add("The user's sister lives in Oslo", context="family chat")
    linked = mem.add("The user's sister moved to Oslo in May", context="family chat")
    kept = mem.get(kept.id)  # as the second add left it (it may mark the first superseded)
    failing = _FailingSecondAdd(mem._store.what)
    real, mem._store.what = mem._store.what, failing
    with pytest.raises(ScrubJayError):
        mem.add_many([{"text": f"The user's sister visits Oslo on day {i}",
                       "context": "family chat"} for i in range(4)])
    assert failing.adds == 2, "the first part was written before the failure"
    mem._store.what = real
    assert sorted(real.get()["ids"]) == sorted([kept.id, linked.id])
    assert sorted(mem._store.where.get()["ids"]) == sorted([kept.id, linked.id])
    assert len(mem) == 2
    edges = _adjacency(mem, kept.id)
    assert [e[0] for e in json.loads(edges)] == [linked.id]
    mem.close()
    again = memory_factory()
    assert len(again) == 2
    assert {h.id for h in again.search("sister Oslo visit", k=10)} == {kept.id, linked.id}
    assert again.get(kept.id) == kept
    assert _adjacency(again, kept.id) == edges


class _FailingOnce:
    """A collection whose ``nth`` call of ``method`` raises (a transient failure)."""

    def __init__(self, col: object, method: str, nth: int = 1) -> None:
        self._col, self._method, self._nth, self.calls = col, method, nth, 0

    def __getattr__(self, name: str) -> object:
        real = getattr(self._col, name)
        if name != self._method:
            return real

        def call(**kwargs: object) -> object:
            self.calls += 1
            if self.calls == self._nth:
                raise RuntimeError("disk full")
            return real(**kwargs)
        return call


def _reopen_cold(memory_factory, mem):
    """Close ``mem`` and open its store again; an embedded one without the snapshot that
    ``close()`` writes, so that the mirror and graph come from Chroma and the edge file."""
    path = mem._store.path
    mem.close()
    if path is not None:
        snapshot_path(path, mem.namespace).unlink(missing_ok=True)
    return memory_factory()


def _graph_view(mem, ids) -> dict[str, list[str]]:
    """Each memory's neighbours, as the open memory's graph and as its store list them."""
    return {i: [sorted(j for j, _ in mem._backend.graph.neighbors(i)) if isinstance(mem._backend, MirroredBackend) else None,
                sorted(e[0] for e in json.loads(_adjacency(mem, i)))] for i in ids}


@pytest.mark.parametrize("collection, method", [("what", "add"), ("where", "delete")],
                         ids=["the write fails", "the delete fails part-way"])
def test_a_replacement_that_fails_keeps_the_old_version(memory_factory, collection,
                                                        method) -> None:
    """An item whose id is stored replaces that memory: the old version is deleted before
    the batch is linked and written. When the delete or the write fails, the old version
    (its row, where row, metadata, RCI state and edges, and its neighbours' edges to it) is
    written back, so the open memory and a reopen of it answer as before the batch."""
    mem = memory_factory()
    fact = mem.add("The user's sister lives in Oslo", context="family chat",
                   metadata={"source": "chat"}, )
    near = mem.add("The user's sister moved to Oslo in May", context="family chat")
    other = mem.add("The user's sister works at a hospital in Oslo")
    mem.integrate("The user's sister no longer lives in Oslo")  # an RCI state on the rows
    before, n = mem.get(fact.id), len(mem)
    graph = _graph_view(mem, [fact.id, near.id, other.id])
    assert any(fact.id in v[1] for v in graph.values()), "the memories are linked"
    hits = [(h.id, round(h.score, 9)) for h in mem.search("where does the sister live", k=3)]
    where_ids = sorted(mem._store.where.get()["ids"])
    assert fact.id in where_ids
    real = getattr(mem._store, collection)
    failing = _FailingOnce(real, method)
    setattr(mem._store, collection, failing)
    with pytest.raises(ScrubJayError):
        mem.add_many([{"id": fact.id, "text": "The user's sister lives in Bergen now"},
                      {"text": "The user's sister visits Bergen in June"}])
    setattr(mem._store, collection, real)
    assert len(mem) == n
    assert mem.get(fact.id) == before
    assert _graph_view(mem, [fact.id, near.id, other.id]) == graph
    assert sorted(mem._store.where.get()["ids"]) == where_ids
    assert [(h.id, round(h.score, 9))
            for h in mem.search("where does the sister live", k=3)] == hits
    assert failing.calls == 2, "the batch's call failed, the restore's landed"
    again = _reopen_cold(memory_factory, mem)
    assert len(again) == n and again.get(fact.id) == before
    assert _graph_view(again, [fact.id, near.id, other.id]) == graph
    assert [(h.id, round(h.score, 9))
            for h in again.search("where does the sister live", k=3)] == hits
    # and the replacement, retried on a store that writes, lands
    again.add_many([{"id": fact.id, "text": "The user's sister lives in Bergen now"}])
    assert again.get(fact.id).text == "The user's sister lives in Bergen now"
    assert len(again) == n


def test_an_rci_update_that_fails_part_way_leaves_the_memory_as_the_store_holds_it(
        memory_factory, monkeypatch) -> None:
    """RCI writes its updates in calls of up to ``_UPDATE_BATCH`` rows. When a later call
    fails, the earlier ones have landed: the open memory must then answer with what the
    store holds (as a cold reopen does), not with the state before the event."""
    import scrubjay.store as store_module

    monkeypatch.setattr(store_module, "_UPDATE_BATCH", 2)
    monkeypatch.setattr(store_module, "_WRITE_BATCH", 2)  # the calls that rewrite vectors
    mem = memory_factory()
    recs = mem.add_many([f"The user's sister lives in Oslo, note {i}" for i in range(6)])
    before = {r.id: mem.get(r.id) for r in recs}
    real = mem._store.what
    failing = _FailingOnce(real, "update", nth=2)
    mem._store.what = failing
    with pytest.raises(ScrubJayError):
        mem.integrate("The user's sister no longer lives in Oslo", store=False)
    mem._store.what = real
    assert failing.calls == 2, "one update call landed before the failure"
    now = {r.id: mem.get(r.id) for r in recs}
    assert 0 < sum(now[i] != before[i] for i in now) < len(recs), "a part of the event landed"
    hits = [(h.id, round(h.score, 9)) for h in mem.search("where does the sister live", k=6)]
    again = _reopen_cold(memory_factory, mem)
    assert {r.id: again.get(r.id) for r in recs} == now
    assert [(h.id, round(h.score, 9))
            for h in again.search("where does the sister live", k=6)] == hits


def test_an_rci_event_run_again_after_failing_part_way_updates_each_memory_once(
        memory_factory, monkeypatch) -> None:
    """The same event (text, context, time) run again after an update that failed part-way
    completes it: the memories that took it are skipped, not updated twice, so the store ends
    as one clean run leaves it; and the error said which time to pass."""
    import scrubjay.store as store_module

    monkeypatch.setattr(store_module, "_UPDATE_BATCH", 2)
    monkeypatch.setattr(store_module, "_WRITE_BATCH", 2)
    items = [{"id": f"m{i}", "text": f"The user's sister lives in Oslo, note {i}"}
             for i in range(6)]
    news = "The user's sister no longer lives in Oslo"
    control = memory_factory("control")
    control.add_many(items)
    at = control.now()
    assert len(control.integrate(news, context="family chat", store=False).affected) == 6
    expected = {i["id"]: control.get(i["id"]) for i in items}
    query = "where does the sister live"
    expected_hits = [(h.id, round(h.score, 9)) for h in control.search(query, k=6)]

    mem = memory_factory()
    mem.add_many(items)
    real = mem._store.what
    mem._store.what = failing = _FailingOnce(real, "update", nth=2)
    with pytest.raises(ScrubJayError) as caught:
        mem.integrate(news, context="family chat", store=False)
    mem._store.what = real
    assert failing.calls == 2, "one update call landed before the failure"
    assert f"at={at!r}" in "".join(caught.value.__notes__)

    report = mem.integrate(news, context="family chat", at=at, store=False)
    assert 0 < len(report.already_applied) < 6
    assert sorted([*report.affected_ids, *report.already_applied]) == sorted(expected)
    assert {i: mem.get(i) for i in expected} == expected
    assert [(h.id, round(h.score, 9)) for h in mem.search(query, k=6)] == expected_hits
    # once more: nothing left to do, no LLM call, nothing changes
    again = mem.integrate(news, context="family chat", at=at, store=False)
    assert again.affected == () and len(again.already_applied) == 6 and again.llm_calls == 0
    assert {i: mem.get(i) for i in expected} == expected
    cold = _reopen_cold(memory_factory, mem)
    assert {i: cold.get(i) for i in expected} == expected
    assert [(h.id, round(h.score, 9)) for h in cold.search(query, k=6)] == expected_hits


def test_an_rci_event_that_stored_its_news_run_again_stores_nothing_twice(
        memory_factory) -> None:
    """With ``store=True`` a retry of a call that did everything (a caller that retries on a
    timeout) returns the memory the first run stored: no second copy, and the stored news is
    not updated by its own event."""
    mem = memory_factory()
    mem.add_many([f"The user's sister lives in Oslo, note {i}" for i in range(3)])
    news, at = "The user's sister no longer lives in Oslo", mem.now()
    first = mem.integrate(news, context="family chat", at=at)
    state = {r.id: r for r in mem}
    again = mem.integrate(news, context="family chat", at=at)
    assert first.stored is not None and again.stored == first.stored
    assert {r.id: r for r in mem} == state and len(mem) == 4
    assert again.affected == () and sorted(again.already_applied) == sorted(first.affected_ids)
    assert first.stored.id not in again.already_applied
    assert mem.get(first.stored.id).updated_at_s is None


def test_the_same_text_at_another_time_is_another_rci_event(memory_factory) -> None:
    """The retry key is the whole event: the same news learnt at another time, or in another
    context, updates the memories again."""
    mem = memory_factory()
    mem.add_many([{"id": f"m{i}", "text": f"The user's sister lives in Oslo, note {i}"}
                  for i in range(3)])
    news = "The user's sister no longer lives in Oslo"
    now = mem.now()
    first = mem.integrate(news, at=now - 60, store=False)
    value = {i: mem.get(i).value for i in first.affected_ids}
    second = mem.integrate(news, at=now, store=False)
    third = mem.integrate(news, context="family chat", at=now, store=False)
    assert first.affected_ids and second.already_applied == third.already_applied == ()
    assert set(second.affected_ids) == set(third.affected_ids) == set(first.affected_ids)
    assert all(mem.get(i).value < value[i] for i in value)


def test_a_batch_whose_state_write_fails_is_stored_and_shown(memory_factory, caplog,
                                                              backend) -> None:
    """After the rows and edges of a batch are written, the namespace's state records its
    newest time (a hint for adaptive weights): a server store with each batch, an embedded
    one (held by one process) at close. When that write fails, the batch is stored all the
    same: add_many returns it and the open memory shows it, as a reopen does, rather than
    raising over rows that stay in Chroma (and, with generated ids, would come back after a
    reopen as memories the caller was told were not stored)."""
    mem = memory_factory()
    now = mem.now()
    first = mem.add("The user's sister lives in Oslo", context="family chat", at=now - 300)
    real = mem._store.what
    failing = _FailingOnce(real, "modify")
    mem._store.what = failing
    with caplog.at_level("WARNING", logger="scrubjay.memory"):
        recs = mem.add_many([{"text": "The user's sister moved to Bergen in May",
                              "at": now - 200},
                             {"text": "The user's sister visits Oslo in June", "at": now - 100}])
    assert failing.calls == (0 if backend == "embedded" else 1)
    ids = {first.id, *(r.id for r in recs)}
    assert {r.id for r in mem} == ids
    hits = [(h.id, round(h.score, 9)) for h in mem.search("where does the sister live", k=3)]
    with caplog.at_level("WARNING", logger="scrubjay.memory"):
        again = _reopen_cold(memory_factory, mem)  # an embedded store's write fails here
    assert failing.calls == 1 and "newest time" in caplog.text
    assert {r.id for r in again} == ids
    assert [(h.id, round(h.score, 9))
            for h in again.search("where does the sister live", k=3)] == hits


def test_the_newest_time_is_kept_across_a_reopen_after_the_newest_memory_is_deleted(
        memory_factory, backend) -> None:
    """The adaptive weights read the time since the newest memory. The namespace's state keeps
    it (an embedded store writes it once, at close, not with every add: a collection update
    was about a tenth of an add), so a reopen weighs a query as the open memory did, even
    after the newest memory was deleted."""
    mem = memory_factory()
    now = mem.now()
    mem.add("The user's sister lives in Oslo", context="family chat", at=now - 7 * 86_400)
    real = mem._store.what  # (the first write also records the embedder in the state)
    mem._store.what = counting = _FailingOnce(real, "modify", nth=0)  # counts, never fails
    newest = mem.add("The user's sister visits Oslo in June", at=now - 60)
    assert counting.calls == (0 if backend == "embedded" else 1)
    mem.delete(newest.id)
    mem._store.what = real
    query = "what is the latest about the sister"
    hits = [(h.id, round(h.score, 9), h.weights) for h in mem.search(query, k=3)]
    again = _reopen_cold(memory_factory, mem)
    assert [(h.id, round(h.score, 9), h.weights) for h in again.search(query, k=3)] == hits


def test_a_delete_whose_buffer_state_write_fails_is_not_reported_as_failed(
        memory_factory, caplog) -> None:
    """Deleting a buffered memory rewrites the prospective buffer's stored state after the
    rows are gone. When only that write fails, the delete has happened: it returns, the
    memory is gone from the open memory and its buffer, and a reopen (whose stored buffer
    still lists the id) neither finds nor serves it."""
    mem = memory_factory()
    recs = mem.add_many([f"Ticket {i}: the login page crashes on Safari" for i in range(6)])
    buffered = mem.prepare("fix the Safari login crash", k=4)
    gone = buffered[0]
    real = mem._store.what
    failing = _FailingOnce(real, "modify")
    mem._store.what = failing
    with caplog.at_level("WARNING", logger="scrubjay.memory"):
        mem.delete(gone)
    mem._store.what = real
    assert failing.calls == 1 and "prospective buffer" in caplog.text
    assert len(mem) == len(recs) - 1 and gone not in mem.buffer.ids
    again = _reopen_cold(memory_factory, mem)
    assert gone in again.buffer.ids, "the stored buffer was not rewritten"
    assert len(again) == len(recs) - 1
    assert gone not in {h.id for h in again.search("Safari login crash", k=3)}


def test_a_prepare_whose_state_write_fails_changes_nothing(memory_factory) -> None:
    """prepare() stores the buffer's state before the open memory uses it: when that write
    fails, the error is raised and the buffer is the one before the call, in the open
    memory as after a reopen."""
    mem = memory_factory()
    mem.add_many([f"Ticket {i}: the login page crashes on Safari" for i in range(6)]
                 + [f"The user's garden note {i}" for i in range(6)])
    mem.prepare("fix the Safari login crash", k=4)
    before = mem.buffer
    real = mem._store.what
    mem._store.what = _FailingOnce(real, "modify")
    with pytest.raises(ScrubJayError):
        mem.prepare("plant the garden", k=4)
    mem._store.what = real
    assert mem.buffer == before
    again = _reopen_cold(memory_factory, mem)
    assert again.buffer == before


class _CountingAdds:
    """A what collection that records the size of each ``add`` call."""

    def __init__(self, col: object) -> None:
        self._col, self.sizes = col, []

    def __getattr__(self, name: str) -> object:
        return getattr(self._col, name)

    def add(self, **kwargs: object) -> None:
        self.sizes.append(len(kwargs["ids"]))  # type: ignore[arg-type]
        self._col.add(**kwargs)


def test_a_batch_within_the_clients_limit_is_one_chroma_add(memory_factory) -> None:
    """Chroma's add costs less in one call than in several of the same rows (2,000 rows in one
    call took about 0.2 s per 10,000 less than two calls of 1,000): a batch goes in calls of up
    to 5,000 rows, within the limit
    the client reports."""
    mem = memory_factory()
    counting = _CountingAdds(mem._store.what)
    mem._store.what = counting
    mem.add_many([f"note number {i} about the quarterly plan" for i in range(1_500)])
    assert counting.sizes == [1_500]
    mem._store._max_batch = 600  # a client whose limit is lower
    mem.add_many([f"second note {i} about the release" for i in range(1_300)])
    assert counting.sizes == [1_500, 600, 600, 100]
    assert len(mem) == 2_800

def _row_parts(meta: dict) -> list[str]:
    """A raw schema 4 row's ``sj_row``: [perishability JSON, text]."""
    return meta["sj_row"].split("\x1f", 1)


def _adjacency(mem, mid: str) -> str:
    """A memory's stored adjacency (``sj_edges`` JSON) as the store reads it: from Chroma's
    row against a server, from the edge file in an embedded store."""
    return mem._store.get([mid])[0].meta.get("sj_edges", "[]")


def _reopen_with_old_row(memory_factory, mem, rec, row_id: str, text: str,
                         meta: dict, *, schema: int):
    """Write a row as an older schema did (the text as Chroma's document, ``meta`` as given)
    beside ``rec``, with ``rec``'s vector; record that schema; reopen the memory."""
    vec = mem._store.what.get(ids=[rec.id], include=["embeddings"])["embeddings"][0]
    mem._store.what.add(ids=[row_id], embeddings=[vec], documents=[text], metadatas=[meta])
    mem._store.set_state(sj_schema=schema)
    mem.close()
    return memory_factory()


def test_perishability_is_one_packed_key_and_schema_1_rows_still_read(memory_factory) -> None:
    """Chroma writes a row per metadata key: a memory's label, pi, tau, value and source share
    one JSON key. A row of schema 1 (a key each) reads back the same; the namespace's recorded
    schema is raised by the first write of this version."""
    from scrubjay.store import SCHEMA_VERSION

    mem = memory_factory()
    rec = mem.add("the user is parked on level 3 right now", context="at the mall")
    raw = mem._store.what.get(ids=[rec.id], include=["metadatas"])["metadatas"][0]
    assert not {"sj_label", "sj_pi", "sj_tau", "sj_value", "sj_src"} & set(raw)
    packed = json.loads(_row_parts(raw)[0])
    # schema 6: an embedded store's time is in the payload, a server's row keeps its key
    assert packed.pop("t", None) == (rec.created_at_s if not mem._backend.server else None)
    assert packed == {"label": rec.label, "pi": rec.pi, "tau": rec.tau_s, "value": rec.value,
                      "source": rec.source}
    # a memory as schema 1 wrote it, beside
    old_meta = {"sj_label": "factual", "sj_pi": 0.05, "sj_tau": 1e9, "sj_value": 0.7,
                "sj_t": rec.created_at_s - 60.0, "sj_src": "llm", "sj_edges": "[]"}
    again = _reopen_with_old_row(memory_factory, mem, rec, "schema1", "the sister is in Oslo",
                                 old_meta, schema=1)
    assert again.get(rec.id) == rec
    old = again.get("schema1")
    assert (old.label, old.pi, old.tau_s, old.value, old.source) == ("factual", 0.05, 1e9, 0.7,
                                                                      "llm")
    assert "schema1" in {h.id for h in again.search("sister Oslo", k=5)}
    assert again._store.state()["sj_schema"] == 1  # reading leaves it alone
    again.add("the meeting moved to room 12")
    assert again._store.state()["sj_schema"] == SCHEMA_VERSION


def test_the_text_is_metadata_not_a_document_and_schema_2_rows_still_read(memory_factory
                                                                          ) -> None:
    """Since schema 3 a memory's text is metadata and no Chroma document is written (Chroma
    would index it for full-text search, 12-19% of each write, and scrubjay never queries it).
    A row of schema 2 (the text as the document) reads back the same: by id, by search, after
    a reopen, and after a new memory's edges rewrite its metadata."""
    mem = memory_factory()
    rec = mem.add("the user is parked on level 3 right now", context="at the mall")
    raw = mem._store.what.get(ids=[rec.id], include=["metadatas", "documents"])
    assert raw["documents"] == [None]
    assert _row_parts(raw["metadatas"][0])[1] == rec.text
    assert "sj_text" not in mem.get(rec.id).metadata
    old_meta = {"sj_perish": json.dumps({"label": "factual", "pi": 0.05, "tau": 1e9,
                                         "value": 0.7, "source": "keyword"}),
                "sj_t": rec.created_at_s - 60.0, "sj_edges": "[]"}
    again = _reopen_with_old_row(memory_factory, mem, rec, "schema2", "the car is on level 3",
                                 old_meta, schema=2)
    assert again.get(rec.id) == rec
    assert again.get("schema2").text == "the car is on level 3"
    hits = {h.id: h.text for h in again.search("where is the car parked", k=5)}
    assert hits.get("schema2") == "the car is on level 3"
    assert hits.get(rec.id) == rec.text
    new = again.add("the car on level 3 is the red one")
    stored = again._store.what.get(ids=["schema2"], include=["metadatas", "documents"])
    assert new.id in _adjacency(again, "schema2")  # its edges were rewritten
    assert stored["documents"] == ["the car is on level 3"]
    assert again.get("schema2").text == "the car is on level 3"
    assert again.get(rec.id).text == rec.text


def test_text_and_perishability_share_one_key_and_schema_3_rows_still_read(
        memory_factory) -> None:
    """Schema 4 writes a memory's perishability and text as ONE metadata key, ``sj_row``
    (Chroma's write costs per key), and its adjacency apart, which linking rewrites alone. A text holding the separator reads back whole. A row of schema 3 (``sj_perish``
    and ``sj_text`` keys) reads back the same, before and after a new memory links to it."""
    mem = memory_factory()
    odd = "a text\x1fwith the separator\x1f twice"
    rec = mem.add("the user is parked on level 3 right now", context="at the mall")
    sep = mem.add(odd)
    raw = mem._store.what.get(ids=[rec.id, sep.id], include=["metadatas"])["metadatas"]
    assert not {"sj_text", "sj_perish"} & set(raw[0])
    perish, text = _row_parts(raw[0])
    assert (json.loads(perish)["label"], text) == (rec.label, rec.text)
    assert sep.id in {e[0] for e in json.loads(_adjacency(mem, rec.id))}  # rewritten then
    assert _row_parts(raw[1])[1] == odd
    old_meta = {"sj_perish": json.dumps({"label": "factual", "pi": 0.05, "tau": 1e9,
                                         "value": 0.7, "source": "keyword"}),
                "sj_t": rec.created_at_s - 60.0, "sj_edges": "[]",
                "sj_text": "the car is on level 3"}
    again = _reopen_with_old_row(memory_factory, mem, rec, "schema3", "ignored", old_meta,
                                 schema=3)
    assert again.get(rec.id) == rec and again.get(sep.id).text == odd
    old = again.get("schema3")
    assert (old.text, old.label, old.pi, old.value) == ("the car is on level 3", "factual",
                                                         0.05, 0.7)
    new = again.add("the car on level 3 is the red one")
    stored = again._store.what.get(ids=["schema3"], include=["metadatas"])["metadatas"][0]
    assert new.id in _adjacency(again, "schema3") and "sj_row" not in stored
    again.close()
    final = memory_factory()
    assert final.get("schema3") == old
    assert final.get(new.id).text == new.text


def test_a_text_of_the_largest_size_round_trips_as_metadata(memory_factory) -> None:
    """The longest text accepted (100,000 characters, non-ASCII included) is stored in the
    ``sj_text`` metadata key and read back exactly, before and after a reopen."""
    from scrubjay._validation import MAX_TEXT_CHARS

    text = ("caf\u00e9 \u6771\u4eac \U0001f600 " * MAX_TEXT_CHARS)[:MAX_TEXT_CHARS - 1] + "."
    assert len(text) == MAX_TEXT_CHARS
    mem = memory_factory()
    rec = mem.add(text, context="a long note")
    assert mem.get(rec.id).text == text
    mem.close()
    assert memory_factory().get(rec.id).text == text


def test_a_namespace_of_a_newer_schema_is_refused(memory_factory) -> None:
    from scrubjay.store import SCHEMA_VERSION

    mem = memory_factory()
    mem.add("the user drinks green tea")
    mem._store.set_state(sj_schema=SCHEMA_VERSION + 1)
    mem.close()
    with pytest.raises(ScrubJayError, match="newer scrubjay-mem"):
        memory_factory()


def test_stored_edges_keep_seven_decimals_and_read_back_as_linked(memory_factory) -> None:
    """An edge's weight and components are rounded to ``EDGE_DECIMALS`` when computed, so
    the adjacency JSON carries short numbers (the server rewrites hundreds of rows of it
    per batch) and a reopen reads back exactly the weights the linking used."""
    from scrubjay.graph import EDGE_DECIMALS

    mem = memory_factory("decimals")
    items = [{"text": f"standup notes {i % 3} item {i}", "context": "desk" if i % 2 else "",
              "at": 1_763_990_000.0 + 97.3 * i, "id": f"e{i}"} for i in range(30)]
    mem.add_many(items[:20])
    mem.add_many(items[20:])
    for i in range(30, 34):  # one at a time, too
        mem.add(f"standup notes {i % 3} item {i}", at=1_763_990_000.0 + 97.3 * i)
    stored = {r.id: json.loads(r.meta["sj_edges"]) for r in mem._store.get([m.id for m in mem])}
    numbers = [x for edges in stored.values() for e in edges for x in e[1:]]
    assert len(numbers) > 100 and any(0 < x < 1 and x not in (0.3, 0.4) for x in numbers)
    assert all(round(x, EDGE_DECIMALS) == x and len(repr(float(x))) <= 9 for x in numbers)
    if isinstance(mem._backend, MirroredBackend):  # the graph in memory holds what was stored
        held = {i: [[j, *(float(d[k]) for k in ("weight", "semantic", "contextual",
                                                  "temporal"))]
                    for j, d in sorted(mem._backend.graph.g._adj[i].items())] for i in stored}
        assert held == stored
