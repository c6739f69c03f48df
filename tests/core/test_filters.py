"""scrubjay.filters answers as a plain Chroma collection does, and names what it refuses."""

from __future__ import annotations

import uuid
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from scrubjay import FilterError
from scrubjay.filters import check_filter, matches, top_matching

METADATA: list[dict[str, Any]] = [
    {"kind": "fact", "year": 2021, "score": 0.5, "pinned": True},
    {"kind": "plan", "year": 2024, "score": 2.5},
    {"kind": "fact", "year": 2025.0, "pinned": False},
    {"kind": "task", "score": 1},
    {"year": 1, "pinned": 1},
    {"kind": "Fact", "year": True},
    {"other": "x"},
]

#: Filters a Chroma collection accepts (one field or one logical operator per mapping).
CHROMA_FILTERS: list[dict[str, Any]] = [
    {"kind": "fact"}, {"kind": {"$eq": "fact"}}, {"kind": {"$ne": "fact"}},
    {"year": 2025}, {"year": 2025.0}, {"year": {"$eq": 1}}, {"pinned": True}, {"pinned": 1},
    {"pinned": {"$ne": True}}, {"year": {"$gt": 2021}}, {"year": {"$gte": 2021}},
    {"year": {"$lt": 2021}}, {"year": {"$lte": 2021.0}}, {"score": {"$gt": 0.5}},
    {"score": {"$lte": 1}}, {"kind": {"$in": ["fact", "task"]}}, {"year": {"$in": [1, 2024]}},
    {"pinned": {"$in": [True]}}, {"kind": {"$nin": ["fact"]}}, {"year": {"$nin": [2021, 1]}},
    {"$and": [{"kind": "fact"}, {"year": {"$gte": 2022}}]},
    {"$or": [{"kind": "plan"}, {"pinned": True}]},
    {"$or": [{"$and": [{"kind": "fact"}, {"score": {"$lt": 1}}]}, {"year": {"$lt": 10}}]},
    {"$and": [{"kind": {"$ne": "fact"}}, {"score": {"$gte": 1}}]},
]


@pytest.fixture(scope="module")
def collection() -> Any:
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    col = client.create_collection(f"filters-{uuid.uuid4().hex[:8]}", embedding_function=None)
    col.add(ids=[str(i) for i in range(len(METADATA))], metadatas=METADATA,
            embeddings=[[1.0, float(i)] for i in range(len(METADATA))],
            documents=["doc"] * len(METADATA))
    return col


@pytest.mark.parametrize("where", CHROMA_FILTERS, ids=str)
def test_same_answer_as_a_chroma_collection(collection: Any, where: dict[str, Any]) -> None:
    want = sorted(collection.get(where=where)["ids"], key=int)
    got = [str(i) for i, meta in enumerate(METADATA) if matches(meta, where)]
    assert got == want


@pytest.mark.parametrize("op", ["$contains", "$not_contains", "$not", "$regex", "$exists"])
def test_an_unsupported_operator_raises_naming_it(op: str) -> None:
    for where in ({"kind": {op: "fact"}}, {op: [{"kind": "fact"}]}):
        with pytest.raises(FilterError, match=rf"'\{op}'"):
            matches(METADATA[0], where)


@pytest.mark.parametrize("where", [
    {"year": {"$gt": "2020"}}, {"year": {"$gt": True}}, {"kind": {"$in": []}},
    {"kind": {"$in": ["fact", 1]}}, {"kind": {"$in": "fact"}}, {"$and": []},
    {"$or": {"kind": "fact"}}, {"kind": {"$eq": "fact", "other": 1}}, ["kind"],
])
def test_bad_operands_raise(where: Any) -> None:
    with pytest.raises(FilterError):
        check_filter(where)
    assert issubclass(FilterError, ValueError)


def test_extensions_for_json_values() -> None:
    value = {"kind": "fact", "n": 3, "tags": {"topic": "car", "level": 3}, "seen": [1, 2]}
    assert matches(value, {"kind": "fact", "n": {"$gt": 1, "$lt": 5}})      # implicit $and
    assert not matches(value, {"kind": "fact", "n": {"$gt": 3}})
    assert matches(value, {"tags": {"topic": "car"}})                       # nested, partial
    assert matches(value, {"tags": {"level": {"$gte": 3}}})
    assert not matches(value, {"tags": {"topic": "bike"}})
    assert matches(value, {"seen": [1, 2]}) and not matches(value, {"seen": [2, 1]})
    assert matches(value, {"$and": [{"kind": "fact"}]})                     # one filter is fine
    assert matches(value, None) and matches(value, {})


def test_top_matching_widens_until_k_pass() -> None:
    ranking = list(range(100))
    asked: list[int] = []

    def search(n: int) -> list[int]:
        asked.append(n)
        return ranking[:n]

    assert top_matching(search, 3, 100, lambda x: x % 10 == 0) == [0, 10, 20]
    assert asked == [12, 48]
    assert top_matching(search, 5, 100, lambda x: x > 1000) == []
