"""`scrubjay demo` and `scrubjay inspect` run offline on the embedded defaults."""

from __future__ import annotations

import io
import re

from scrubjay import ScrubJayMemory
from scrubjay.cli import main
from scrubjay.testing import FrozenClock, HashEmbedder


def test_demo_runs_offline_and_shows_staleness_and_rci(tmp_path) -> None:
    out = io.StringIO()
    assert main(["demo", "--path", str(tmp_path / "demo")], out=out) == 0
    text = out.getvalue()
    assert "wordllama" in text and "STALE" in text and "valid" in text
    assert "RCI" in text and "LLM calls: 0" in text
    m = re.search(r"removes (\d+) of (\d+) memories", text)
    assert m and 0 < int(m.group(1)) < int(m.group(2))
    # the demo's store persists when --path is given, and inspect reads it
    out2 = io.StringIO()
    assert main(["inspect", str(tmp_path / "demo")], out=out2) == 0
    assert "namespace 'demo'" in out2.getvalue() and "ephemeral" in out2.getvalue()


def test_inspect_lists_label_pi_tau_utility(tmp_path) -> None:
    clock = FrozenClock(1_764_000_000)
    from scrubjay import ClassifierConfig, ScrubJayConfig

    mem = ScrubJayMemory(path=tmp_path / "s", namespace="alice", embedder=HashEmbedder(),
                         clock=clock, config=ScrubJayConfig(
                             classifier=ClassifierConfig(offline="keyword")))
    mem.add("parked on level 3 right now")
    mem.add("born in Lima")
    mem.close()
    out = io.StringIO()
    assert main(["inspect", str(tmp_path / "s"), "--namespace", "alice",
                 "--at", str(1_764_000_000 + 86_400)], out=out) == 0
    lines = out.getvalue().splitlines()
    eph = next(line for line in lines if "parked" in line)
    fact = next(line for line in lines if "Lima" in line)
    assert "ephemeral" in eph and "0.90" in eph and "2.0h" in eph and " yes " in eph
    assert "factual" in fact and "45.0d" in fact and " no " in fact


def test_inspect_empty_folder(tmp_path) -> None:
    out = io.StringIO()
    assert main(["inspect", str(tmp_path / "none")], out=out) == 0
    assert "No scrubjay namespaces" in out.getvalue()
