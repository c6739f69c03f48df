"""Lone surrogates (found by the hostile-input work): rejected before anything is written.

Python strings may hold lone surrogates (``"\\ud800"``) that UTF-8 cannot encode. They used to
pass validation and fail inside Chroma after the where-row was written, with a Chroma encoding
message and an orphan where-row left until the next open.
"""

from __future__ import annotations

import pytest
from scrubjay import ClassifierConfig, InvalidInputError, ScrubJayConfig, ScrubJayMemory
from scrubjay.testing import HashEmbedder

CFG = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"))


@pytest.mark.parametrize("kwargs", [
    {"text": "hello \ud800 there", "context": "a context"},
    {"text": "hello", "context": "ctx \udfff"},
    {"text": "ok", "context": "c", "metadata": {"k": "\ud800"}},
    {"text": "ok", "context": "c", "metadata": {"\ud800": 1}},
    {"text": "ok", "context": "c", "metadata": {"k": ["fine", {"x": "\ud800"}]}},
])
def test_lone_surrogates_are_rejected_before_any_write(tmp_path, kwargs) -> None:
    with ScrubJayMemory(path=tmp_path / "s", embedder=HashEmbedder(), config=CFG) as mem:
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            mem.add(**kwargs)
        assert len(mem) == 0
        assert mem._store.where.count() == 0  # no orphan where-row
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            mem.search("q \ud800")
