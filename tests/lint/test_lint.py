"""The code stays clean under the linters the project pins (``ruff``, ``mypy --strict``).

Both read their settings from ``pyproject.toml``; a finding fails the suite with the tool's
own report, so a change that breaks a rule or a type is fixed where it is made.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, check=False)


def test_ruff_finds_nothing() -> None:
    proc = _run("ruff", "check", ".")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_mypy_strict_finds_nothing() -> None:
    proc = _run("mypy")  # files and strictness: [tool.mypy] in pyproject.toml
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout
