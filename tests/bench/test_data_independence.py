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


def _rows(name: str = "data/perishability_statements.jsonl") -> list[dict]:
    text = resources.files("scrubjay").joinpath(name).read_text()
    return [{"context": "", **json.loads(line)} for line in text.splitlines() if line.strip()]


#: Every file the offline estimator is trained on: the statements, and the everyday-lifetimes
#: set (``scrubjay.bench.lifetimes``), whose train split it is fitted on too.
TRAINING_FILES = ("data/perishability_statements.jsonl", "bench/data/everyday_lifetimes.jsonl")


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


@pytest.mark.parametrize("name", TRAINING_FILES)
def test_no_tgt_value_occurs_in_the_training_data(name: str) -> None:
    rows = _rows(name)
    assert len(rows) >= (1000 if name == TRAINING_FILES[0] else 200)
    corpus = "\n".join(f"{r['text']} || {r['context']}" for r in rows).lower()
    hits = {}
    for group, values in _vocabulary().items():
        for value in values:
            if re.search(rf"\b{re.escape(value.lower())}\b", corpus):
                hits.setdefault(group, []).append(value)
    assert hits == {}


@pytest.mark.parametrize("name", TRAINING_FILES)
def test_no_tgt_category_or_checkpoint_marker(name: str) -> None:
    corpus = "\n".join(r["text"] + " " + r["context"] for r in _rows(name)).lower()
    for cat in tpl.CATEGORIES:
        for form in {cat.key.lower(), cat.key.replace("_", " ").lower()}:
            assert not re.search(rf"\b{re.escape(form)}\b", corpus), form
    assert "checkpoint p" not in corpus


@pytest.mark.parametrize("split", ["train", "test"])
def test_splits_exist(split: str) -> None:
    assert sum(r["split"] == split for r in _rows()) >= 200
