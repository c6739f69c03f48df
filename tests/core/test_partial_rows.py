"""A row another client deletes while a search reads it can come back from Chroma as its id
alone (no metadata, no document). It is skipped, never returned as an empty memory."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import scrubjay.store as store_module
from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayMemory
from scrubjay.codec import is_whole_row, rows_from_get
from scrubjay.testing import HashEmbedder

CFG = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"))


def test_an_id_only_row_is_not_a_row() -> None:
    got = {"ids": ["gone", "kept"], "metadatas": [None, {"sj_text": "kept note"}],
           "documents": [None, "kept note"]}
    rows = list(rows_from_get(got, {}, False, {}))
    assert [r.id for r in rows] == ["kept"]
    assert rows[0].text == "kept note"
    assert not is_whole_row(None, "")
    assert not is_whole_row({"sj_pi": 0.5}, "")
    assert is_whole_row({"sj_pi": 0.5}, "a note")


@pytest.mark.parametrize("server", [False, True], ids=["embedded", "server"])
@pytest.mark.parametrize("context", ["", "at the office"])
def test_search_skips_a_row_deleted_while_it_is_read(
        tmp_path: Path, context: str, server: bool, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if server:
        import chromadb

        host, port = request.getfixturevalue("chroma_server")
        where: dict[str, Any] = {"client": chromadb.HttpClient(host=host, port=port),
                                 "namespace": f"partial-{uuid.uuid4().hex[:8]}"}
    else:
        where = {"path": tmp_path / "s"}
    with ScrubJayMemory(embedder=HashEmbedder(dim=64), config=CFG, **where) as mem:
        for i in range(6):
            mem.add(f"note {i} about the topic", context=context)
        real = store_module.query

        def racing(col: Any, **kw: Any) -> Any:  # another client deleted a row meanwhile
            got = real(col, **kw)
            got = dict(got)
            for key in ("metadatas", "documents"):
                if got.get(key) is not None and got[key][0]:
                    got[key] = [[None, *got[key][0][1:]]]
            return got

        monkeypatch.setattr(store_module, "query", racing)
        hits = mem.search("topic", context=context, k=5)
        assert hits
        assert all(h.text for h in hits)
