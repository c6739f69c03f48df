"""Every fenced ```python block of README.md and docs/*.md runs verbatim, in page order.

The blocks of one page share one namespace, as a reader pasting them in order would, and run in
a fresh working directory (they may create ``./memory``). A block whose first line is
``# needs a running Ollama`` runs with ``OLLAMA_HOST`` pointing at a loopback
:class:`~scrubjay.testing.FakeOllama`; one whose first line is ``# needs a Chroma server`` runs
with ``CHROMA_HOST`` / ``CHROMA_PORT`` set to the session's real ``chroma run``. Every other
block runs with both pointing at a closed port, so a block that needs a server without saying
so fails here. Bash blocks are not run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scrubjay.testing import FakeOllama, free_port

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
NEEDS_OLLAMA = "# needs a running Ollama"
NEEDS_CHROMA = "# needs a Chroma server"


def python_blocks(page: Path) -> list[str]:
    return FENCE.findall(page.read_text(encoding="utf-8"))


def needs(block: str) -> set[str]:
    """The servers a block declares in its first lines (one marker a line, at the top)."""
    declared: set[str] = set()
    for line in block.splitlines():
        if line.strip() == NEEDS_OLLAMA:
            declared.add("ollama")
        elif line.strip() == NEEDS_CHROMA:
            declared.add("chroma")
        else:
            break
    return declared


PAGES_WITH_CODE = [p for p in PAGES if python_blocks(p)]




def run_in_order(blocks: list[str], label: str, *, monkeypatch: pytest.MonkeyPatch,
                 request: pytest.FixtureRequest, ollama: FakeOllama) -> dict[str, object]:
    """Run ``blocks`` in one namespace, each with the servers its first lines ask for."""
    dead = free_port()
    namespace: dict[str, object] = {"__name__": "__main__"}
    for n, block in enumerate(blocks, start=1):
        declared = needs(block)
        monkeypatch.setenv("OLLAMA_HOST", ollama.url if "ollama" in declared
                           else f"http://127.0.0.1:{dead}")
        if "chroma" in declared:
            host, port = request.getfixturevalue("chroma_server")
        else:
            host, port = "127.0.0.1", dead
        monkeypatch.setenv("CHROMA_HOST", host)
        monkeypatch.setenv("CHROMA_PORT", str(port))
        exec(compile(block, f"{label}, python block {n}", "exec"), namespace)  # noqa: S102
    return namespace


@pytest.mark.server
@pytest.mark.parametrize("page", PAGES_WITH_CODE,
                         ids=[str(p.relative_to(ROOT)) for p in PAGES_WITH_CODE])
def test_page_snippets_run_in_order(page: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch,
                                    request: pytest.FixtureRequest,
                                    fake_ollama: FakeOllama) -> None:
    monkeypatch.chdir(tmp_path)
    run_in_order(python_blocks(page), page.name, monkeypatch=monkeypatch, request=request,
                 ollama=fake_ollama)


@pytest.mark.server
def test_declared_servers_are_the_ones_reached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               request: pytest.FixtureRequest,
                                               fake_ollama: FakeOllama) -> None:
    monkeypatch.chdir(tmp_path)
    ollama_block = (f"{NEEDS_OLLAMA}\nfrom langchain_ollama import ChatOllama\n"
                    "reply = ChatOllama(model='qwen3:30b').invoke('hello').content\n")
    chroma_block = (f"{NEEDS_CHROMA}\nimport os\nimport chromadb\n"
                    "beat = chromadb.HttpClient(host=os.environ['CHROMA_HOST'],\n"
                    "                           port=int(os.environ['CHROMA_PORT'])).heartbeat()\n")
    ns = run_in_order([ollama_block, chroma_block], "test", monkeypatch=monkeypatch,
                      request=request, ollama=fake_ollama)
    assert ns["reply"] and [r["path"] for r in fake_ollama.requests] == ["/api/chat"]
    assert isinstance(ns["beat"], int)
    undeclared = ollama_block.split("\n", 1)[1]
    with pytest.raises(Exception, match="(?i)connect"):
        run_in_order([undeclared], "test", monkeypatch=monkeypatch, request=request,
                     ollama=fake_ollama)


def test_markers_are_recognised() -> None:
    assert needs("# needs a Chroma server\n# needs a running Ollama\nimport os\n") == {
        "chroma", "ollama"}
    assert needs("import os\n# needs a Chroma server\n") == set()


def test_the_readme_has_snippets() -> None:
    assert python_blocks(ROOT / "README.md")
