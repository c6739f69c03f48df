"""The public surface of llamaindex_scrubjay and its import hygiene."""

from __future__ import annotations

import subprocess
import sys

import llamaindex_scrubjay

EXPECTED = {"ScrubJayRetriever", "ScrubJayMemoryBlock", "as_scrubjay_embedder"}


def test_all_is_pinned() -> None:
    assert set(llamaindex_scrubjay.__all__) == EXPECTED
    for name in llamaindex_scrubjay.__all__:
        assert hasattr(llamaindex_scrubjay, name)


def test_import_loads_no_langchain() -> None:
    code = ("import sys\n"
            "import llamaindex_scrubjay\n"
            "bad = sorted({m.split('.')[0] for m in sys.modules\n"
            "              if m.split('.')[0].startswith(('langchain', 'langgraph'))})\n"
            "print(repr(bad))\n"
            "print('llama_index.core' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "True"]


def test_class_names() -> None:
    from llamaindex_scrubjay import ScrubJayMemoryBlock, ScrubJayRetriever

    assert ScrubJayRetriever.class_name() == "ScrubJayRetriever"
    assert ScrubJayMemoryBlock.class_name() == "ScrubJayMemoryBlock"
