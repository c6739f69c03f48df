"""Every tutorial notebook executes top to bottom, offline (as CI runs them), none skipped."""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# notebook 00's explanation of a hit's ranking key, one line per hit:
# score S = (a*what W + b*where R) / A * V v / V0 v0 * time f ...
EXPLAINED = re.compile(r"score (-?[\d.]+) = \((-?[\d.]+)\*dense (-?[\d.]+) \+ (-?[\d.]+)\*lexical "
                       r"(-?[\d.]+)\) \* V (-?[\d.]+) / V0 (-?[\d.]+) \* time (-?[\d.]+).*\n"
                       r"\s+dense (-?[\d.]+) = \((-?[\d.]+)\*what (-?[\d.]+) \+ (-?[\d.]+)\*where "
                       r"(-?[\d.]+)\) / (-?[\d.]+)")


def _stream_text(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.get("output_type") == "stream")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path: Path, tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    if path.name.startswith("00_"):
        images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                  if "image/png" in o.get("data", {})]
        assert images, "the decay-curve plot is missing"
        text = _stream_text(nb)
        lifetimes = [line for line in text.splitlines() if ": estimator " in line]
        assert lifetimes and all("| keyword rule " in line for line in lifetimes)
        explained = EXPLAINED.findall(text)
        assert len(explained) >= 3, text
        for fields in explained:
            (score, one_minus_lam, dense, lam, lexical, v, v0, tf, dense2, a, what, b, where,
             a_b) = map(float, fields)
            assert math.isclose(a + b, a_b, abs_tol=2e-4)
            assert math.isclose(one_minus_lam + lam, 1.0, abs_tol=1e-9)
            assert math.isclose(dense, dense2) and math.isclose(
                (a * what + b * where) / a_b, dense, abs_tol=1e-3)
            assert math.isclose((one_minus_lam * dense + lam * lexical) * v / v0 * tf, score,
                                abs_tol=1e-3)
        assert any(float(f[5]) < float(f[6]) for f in explained), "no hit shows a lowered V"


def test_there_are_notebooks() -> None:
    assert any(p.name == "00_core_concepts.ipynb" for p in NOTEBOOKS)


def test_the_test_extra_installs_what_executes_the_notebooks() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    names = {re.split(r"[<>=\[ ]", req, maxsplit=1)[0] for req in extras["test"]}
    assert {"nbclient", "nbformat", "ipykernel", "matplotlib"} <= names


def test_notebooks_are_committed_without_outputs() -> None:
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert not [c for c in nb.cells if c.cell_type == "code" and c.get("outputs")], path.name
