"""The perishability training data (issue 8) shares no vocabulary with the TGT generator.

TGT scores stay honest only if an estimator trained on our statements never saw TGT's
categories, names or values. This test reads the generator's own vocabularies, so it follows
any change to them.
"""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest
from scrubjay.bench import _tgt_templates as tpl


def _rows() -> list[dict]:
    text = resources.files("scrubjay").joinpath("data/perishability_statements.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _vocabulary() -> dict[str, tuple[str, ...]]:
    groups = {}
    for name in dir(tpl):
        value = getattr(tpl, name)
        if name.isupper() and isinstance(value, tuple) and value and all(
                isinstance(v, str) for v in value):
            groups[name] = value
    return groups


def test_vocabulary_is_found() -> None:
    groups = _vocabulary()
    for expected in ("NAMES", "CITIES", "COMPANIES", "UNIVERSITIES", "FOODS", "CHILD_NAMES",
                     "BUILD_STATUSES", "MOOD_DESCRIPTORS"):
        assert expected in groups


def test_no_tgt_value_occurs_in_the_training_data() -> None:
    rows = _rows()
    assert len(rows) >= 1000
    corpus = "\n".join(f"{r['text']} || {r['context']}" for r in rows).lower()
    hits = {}
    for group, values in _vocabulary().items():
        for value in values:
            if re.search(rf"\b{re.escape(value.lower())}\b", corpus):
                hits.setdefault(group, []).append(value)
    assert hits == {}


def test_no_tgt_category_or_checkpoint_marker() -> None:
    corpus = "\n".join(r["text"] + " " + r["context"] for r in _rows()).lower()
    for cat in tpl.CATEGORIES:
        for form in {cat.key.lower(), cat.key.replace("_", " ").lower()}:
            assert not re.search(rf"\b{re.escape(form)}\b", corpus), form
    assert "checkpoint p" not in corpus


@pytest.mark.parametrize("split", ["train", "test"])
def test_splits_exist(split: str) -> None:
    assert sum(r["split"] == split for r in _rows()) >= 200
