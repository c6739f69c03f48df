"""ScrubJayMemory.search(query_vector=...): a caller's embedding instead of the query's."""

from __future__ import annotations

import pytest
from scrubjay import InvalidInputError, ScrubJayMemory


def test_search_by_vector_ranks_as_the_text_does(memory_factory, embedder) -> None:
    mem: ScrubJayMemory = memory_factory()
    assert mem.search("", query_vector=[1.0] * embedder.dim) == []     # empty store
    mem.add_many(["The user likes green tea", "The meeting moved to Friday",
                  "The user's sister lives in Oslo"])
    query = "which tea does the user like"
    by_text = mem.search(query, k=3)
    vector = embedder.embed([query], query=True)[0] * 3.0            # any norm
    by_vector = mem.search(query, k=3, query_vector=vector)
    assert [h.id for h in by_vector] == [h.id for h in by_text]
    assert [h.what for h in by_vector] == pytest.approx([h.what for h in by_text], abs=1e-5)
    assert mem.search("", k=1, query_vector=vector)[0].text == "The user likes green tea"
    for bad in ([1.0, 2.0], [0.0] * embedder.dim, [float("nan")] * embedder.dim, "x"):
        with pytest.raises(InvalidInputError, match="query_vector"):
            mem.search("", query_vector=bad)
    with pytest.raises(InvalidInputError):
        mem.search("")
