"""The public names are pinned; importing the package loads no optional framework."""

from __future__ import annotations

import subprocess
import sys

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


def test_retriever_import_does_not_load_llama_index_or_classic() -> None:
    code = ("import sys; from langchain_scrubjay import ScrubJayRetriever, ScrubJayStore; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'llama_index', 'langchain_classic'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
