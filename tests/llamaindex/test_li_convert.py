"""The one mapping between scrubjay values and LlamaIndex nodes, both ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from llama_index.core import Document
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from scrubjay import Hit, InvalidInputError, MemoryRecord

from llamaindex_scrubjay._convert import (
    HIT_KEYS,
    LLM_VISIBLE_KEYS,
    SCRUBJAY_KEYS,
    hit_to_node,
    jsonable,
    node_to_item,
    parse_time,
    record_to_node,
)

REC = MemoryRecord(id="m1", text="I am parked on level 3", context="at the mall",
                   label="ephemeral", pi=0.9, tau_s=7200.0, value=1.0,
                   created_at_s=1_764_000_000.0, metadata={"source_file": "notes.txt", "n": 2})


def _hit() -> Hit:
    # numpy scalars, as the core's arithmetic may produce: they must not leak into LlamaIndex
    return Hit(record=REC, score=np.float64(0.5), paper_score=np.float64(0.5), utility=np.float64(0.8), stale=np.bool_(False),
               what=np.float32(0.25), where=np.float64(1.0), when=np.float64(0.8),
               graph=np.float64(0.0), weights=(np.float64(0.4), np.float64(0.2),
                                               np.float64(0.2), np.float64(0.2)))


def test_record_node_item_round_trip() -> None:
    node = record_to_node(REC)
    assert node.node_id == "m1" and node.text == REC.text
    item = node_to_item(node)
    assert item == {"id": "m1", "text": REC.text, "context": "at the mall",
                    "metadata": {"source_file": "notes.txt", "n": 2},
                    "at": 1_764_000_000.0}


def test_hit_to_node_carries_native_values() -> None:
    nws = hit_to_node(_hit())
    assert isinstance(nws, NodeWithScore) and isinstance(nws.node, TextNode)
    assert type(nws.score) is float and nws.score == 0.5
    meta = nws.node.metadata
    assert set(SCRUBJAY_KEYS) <= set(meta)
    for key in HIT_KEYS:
        assert type(meta[key]) in (float, bool), key
    assert meta["stale"] is False and meta["utility"] == pytest.approx(0.8)
    assert (meta["weight_what"], meta["score_what"]) == (pytest.approx(0.4), pytest.approx(0.25))
    assert meta["memory_id"] == "m1" and meta["label"] == "ephemeral"
    assert type(meta["pi"]) is float and type(meta["tau_s"]) is float
    # a retrieved node goes back in unchanged: scores dropped, context/time/metadata kept
    assert node_to_item(nws) == node_to_item(record_to_node(REC))


def test_llm_sees_context_but_not_scores() -> None:
    text = hit_to_node(_hit()).node.get_content(metadata_mode=MetadataMode.LLM)
    for key in LLM_VISIBLE_KEYS:
        assert f"{key}:" in text
    assert "score_what" not in text and "tau_s" not in text
    assert "source_file: notes.txt" in text


def test_document_metadata_to_memory() -> None:
    when = datetime(2025, 11, 20, 9, 0, tzinfo=UTC)
    doc = Document(text="The supplier meeting is on Friday", id_="doc-1",
                   metadata={"context": "scheduling", "created_at": when.isoformat(),
                             "author": "ana", "when": when, "tags": ("a", "b"),
                             "score": 0.3, "bad": float("nan"), "obj": object})
    item = node_to_item(doc, context="ignored, the node has one")
    assert item["id"] == "doc-1" and item["context"] == "scheduling"
    assert item["at"] == when
    meta = item["metadata"]
    assert meta["author"] == "ana" and meta["when"] == when.isoformat()
    assert meta["tags"] == ["a", "b"] and meta["bad"] == "nan"
    assert meta["obj"] == str(object)
    assert "score" not in meta  # a scrubjay key: recomputed, never stored


def test_default_context_when_node_has_none() -> None:
    assert node_to_item(TextNode(text="x"), context="chat")["context"] == "chat"
    assert "at" not in node_to_item(TextNode(text="x"))


@pytest.mark.parametrize(("raw", "expected"), [
    (1_764_000_000, 1_764_000_000.0),
    ("2025-11-24T16:00:00Z", 1_764_000_000.0),
    ("2025-11-24T17:00:00+01:00", 1_764_000_000.0),
    (datetime(2025, 11, 24, 16, tzinfo=timezone(timedelta(0))), 1_764_000_000.0),
])
def test_parse_time(raw: object, expected: float) -> None:
    out = parse_time(raw)
    assert (out.timestamp() if isinstance(out, datetime) else float(out)) == expected


@pytest.mark.parametrize("raw", ["yesterday", [1], None])
def test_parse_time_rejects(raw: object) -> None:
    with pytest.raises(InvalidInputError, match="created_at"):
        parse_time(raw)


def test_jsonable_numpy_and_depth() -> None:
    assert jsonable(np.float32(0.5)) == 0.5 and type(jsonable(np.int64(3))) is int
    assert jsonable([[[["deep"]]]]) == [[["['deep']"]]]
    assert jsonable({1: {"a": (1, 2)}}) == {"1": {"a": [1, 2]}}


def test_rejects_non_nodes() -> None:
    with pytest.raises(InvalidInputError, match="LlamaIndex nodes"):
        node_to_item("just a string")  # type: ignore[arg-type]
