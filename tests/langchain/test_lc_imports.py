"""The public names are pinned; importing the package loads no optional framework."""

from __future__ import annotations

import subprocess
import sys

import pytest

import langchain_scrubjay

EXPECTED = ["ScrubJayRetriever", "ScrubJayStore", "ScrubJaySearchItem", "ScrubJayChatMemory",
            "ScrubJayKVStore", "ScrubJayVectorStore", "create_memory_tools"]


def test_all_is_pinned() -> None:
    assert sorted(langchain_scrubjay.__all__) == sorted(EXPECTED)
    for name in EXPECTED:
        assert getattr(langchain_scrubjay, name) is not None


def test_import_loads_no_optional_framework() -> None:
    code = ("import sys, langchain_scrubjay; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('llama_index', 'langchain_classic', 'langgraph', 'langchain_ollama')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("names", "forbidden"), [
    ("ScrubJayRetriever, ScrubJayStore", "{'llama_index', 'langchain_classic'}"),
    ("ScrubJayKVStore", "{'langgraph', 'langchain_classic', 'llama_index'}"),
])
def test_retriever_import_does_not_load_llama_index_or_classic(names: str,
                                                               forbidden: str) -> None:
    code = (f"import sys; from langchain_scrubjay import {names}; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            f"{forbidden}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
