"""The README's performance table and docs/performance.md hold what scripts/update_perf_doc.py
formats from the documented run (docs/perf/perf.json and perf.md): no figure edited by hand."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = ("README.md", "docs/performance.md", "docs/perf/perf.json", "docs/perf/perf.md")


def _copy(tmp_path: Path) -> Path:
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def _format(root: Path) -> Path:
    done = subprocess.run([sys.executable, str(ROOT / "scripts/update_perf_doc.py"),
                           "--root", str(root)], check=False, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return root


def test_the_docs_figures_are_the_documented_runs(tmp_path: Path) -> None:
    out = _format(_copy(tmp_path))
    for name in ("README.md", "docs/performance.md"):
        assert (out / name).read_text() == (ROOT / name).read_text(), (
            f"{name} differs from what scripts/update_perf_doc.py formats from docs/perf/")


def test_a_changed_run_changes_the_readme(tmp_path: Path) -> None:
    """The README's table is formatted from perf.md: a different p50 there shows up."""
    _copy(tmp_path)
    md = tmp_path / "docs/perf/perf.md"
    row = next(line for line in md.read_text().splitlines()
               if line.startswith("| 100,000 | embedded |"))
    cells = row.split(" | ")
    cells[4] = "9.99x"
    md.write_text(md.read_text().replace(row, " | ".join(cells)))
    _format(tmp_path)
    readme = (tmp_path / "README.md").read_text()
    assert "| 9.99x |" in readme
    assert "| 9.99x, recall" in (tmp_path / "docs/performance.md").read_text()
    assert "**not met**" in (tmp_path / "docs/performance.md").read_text()


def test_the_performance_page_is_short_and_keeps_no_raw_runs() -> None:
    page = (ROOT / "docs/performance.md").read_text()
    assert len(page.splitlines()) <= 300
    tracked = subprocess.run(["git", "ls-files", "docs/perf"], cwd=ROOT, capture_output=True,
                             text=True, check=False).stdout.split()
    assert not [f for f in tracked if f.startswith("docs/perf/runs/")]
