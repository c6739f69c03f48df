"""Reading never creates: a missing store folder or namespace is a clear error, and the disk is
left as it was (``scrubjay inspect``, ``list_namespaces``, ``ScrubJayMemory(create=False)``)."""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path

import pytest
from scrubjay import NamespaceNotFoundError, ScrubJayMemory
from scrubjay.cli import main
from scrubjay.clients import ephemeral_client
from scrubjay.testing import HashEmbedder


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _inspect(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["inspect", *argv], out=out), out.getvalue()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    mem = ScrubJayMemory(path=path, embedder=HashEmbedder())
    mem.add("I keep the spare key under the blue pot")
    mem.close()
    return path


def test_inspect_of_a_missing_folder_fails_and_creates_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _inspect(str(tmp_path / "typo" / "path"))
    assert code != 0
    assert "no scrubjay store" in capsys.readouterr().err
    assert _tree(tmp_path) == []


def test_inspect_of_a_missing_namespace_fails_and_creates_nothing(
        store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _tree(store)
    code, _ = _inspect(str(store), "-n", "typo")
    assert code != 0
    assert "'typo' does not exist" in capsys.readouterr().err
    assert _tree(store) == before
    assert ScrubJayMemory.list_namespaces(path=store) == ["default"]
    code, text = _inspect(str(store))
    assert code == 0 and "typo" not in text and "blue pot" in text


def test_list_namespaces_of_a_missing_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(NamespaceNotFoundError):
        ScrubJayMemory.list_namespaces(path=tmp_path / "missing")
    assert _tree(tmp_path) == []


def test_open_for_reading_does_not_create(tmp_path: Path, store: Path) -> None:
    with pytest.raises(NamespaceNotFoundError, match="no scrubjay store"):
        ScrubJayMemory(path=tmp_path / "missing", embedder=HashEmbedder(), create=False)
    assert not (tmp_path / "missing").exists()
    before = _tree(store)
    with pytest.raises(LookupError, match="'other' does not exist"):
        ScrubJayMemory(path=store, namespace="other", embedder=HashEmbedder(), create=False)
    assert _tree(store) == before
    assert ScrubJayMemory.list_namespaces(path=store) == ["default"]
    # the failed open released its share of the folder: it opens again, for reading
    mem = ScrubJayMemory(path=store, embedder=HashEmbedder(), create=False)
    try:
        assert [r.text for r in mem] == ["I keep the spare key under the blue pot"]
    finally:
        mem.close()


def test_open_for_reading_through_a_client(tmp_path: Path) -> None:
    client = ephemeral_client()
    name = f"ro{uuid.uuid4().hex[:8]}"
    with pytest.raises(NamespaceNotFoundError):
        ScrubJayMemory(client=client, namespace=name, embedder=HashEmbedder(), create=False)
    assert name not in ScrubJayMemory.list_namespaces(client=client)


def test_create_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        ScrubJayMemory(path=tmp_path, embedder=HashEmbedder(), create="no")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []
