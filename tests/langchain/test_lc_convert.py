"""``_convert``: Hit/MemoryRecord -> Document -> add_many item round trip; native types."""

from __future__ import annotations

from datetime import UTC, datetime

from langchain_core.documents import Document
from scrubjay import ScrubJayMemory

from langchain_scrubjay._convert import (
    document_to_item,
    hit_to_document,
    record_to_document,
    to_user_document,
    user_document_to_item,
)

T0 = 1_764_000_000.0


def test_vector_store_document_round_trip(clock, embedder) -> None:
    from scrubjay.explain import Staleness

    doc = Document("I am parked on level 3", id="car",
                   metadata={"id": 7, "context": "at the mall", "created_at": T0 - 60})
    item = user_document_to_item(doc)
    assert item == {"id": "car", "text": doc.page_content, "context": "at the mall",
                    "at": T0 - 60, "metadata": dict(doc.metadata)}
    rec = ScrubJayMemory(embedder=embedder, clock=clock).add_many([item])[0]
    assert to_user_document(rec) == doc
    marked = to_user_document(rec, Staleness(reason="decayed", since_s=T0))
    assert marked.page_content.startswith("[outdated since ") and marked.metadata["stale"]
    assert user_document_to_item(marked) == item           # marker and stale keys dropped


def test_record_document_round_trip(clock, embedder) -> None:
    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    rec = mem.add("I am parked on level 3", context="at the mall", at=T0 - 60,
                  metadata={"source_doc": "chat.txt", "page": 2})
    item = document_to_item(record_to_document(rec))
    assert item == {"text": rec.text, "context": "at the mall", "at": T0 - 60,
                    "metadata": {"source_doc": "chat.txt", "page": 2}, "id": rec.id}
    again = ScrubJayMemory(embedder=embedder, clock=clock).add_many([item])[0]
    assert (again.id, again.text, again.context, again.created_at_s, dict(again.metadata)) == \
        (rec.id, rec.text, rec.context, rec.created_at_s, dict(rec.metadata))
    mem.close()


def test_hit_document_carries_native_breakdown(clock, embedder) -> None:
    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    mem.add("I am parked on level 3", context="at the mall")
    hit = mem.search("where am I parked", context="at the mall", k=1)[0]
    doc = hit_to_document(hit)
    md = doc.metadata
    assert doc.id == hit.id and doc.page_content == hit.text
    for key in ("pi", "tau_s", "utility", "score", "what", "where", "when", "graph"):
        assert type(md[key]) is float, key
    assert type(md["stale"]) is bool and type(md["label"]) is str
    assert md["score"] == hit.score and md["utility"] == hit.utility
    assert md["weights"] == list(hit.weights) and all(type(w) is float for w in md["weights"])
    mem.close()


def test_document_time_and_context_from_metadata() -> None:
    when = datetime(2025, 11, 1, 12, tzinfo=UTC)
    doc = Document("Ticket BR-212 fails", metadata={"created_at": when.isoformat(),
                                                    "context": "debugging", "team": "A",
                                                    "score": 0.3})
    item = document_to_item(doc)
    assert item["at"] == when and item["context"] == "debugging"
    assert item["metadata"] == {"team": "A"}  # reserved keys (score) never become user metadata
    assert "id" not in item
