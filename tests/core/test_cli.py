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
    # a plain add of a job change: the new job first, the old one ranked below and marked
    job = text[text.index("What is the user's job?"):]
    first, old = job.index("now a project manager"), job.index("structural engineer")
    assert first < old and "STALE  The user is a structural engineer" in job
    assert "superseded by: The user switched careers" in job[old:]
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
    from scrubjay.clients import EmbeddedClients

    EmbeddedClients.acquire(str(tmp_path / "empty"))  # a Chroma store without namespaces
    EmbeddedClients.release(str(tmp_path / "empty"))
    out = io.StringIO()
    assert main(["inspect", str(tmp_path / "empty")], out=out) == 0
    assert "No scrubjay namespaces" in out.getvalue()
    # a folder without a store is an error, and is not created
    assert main(["inspect", str(tmp_path / "none")], out=io.StringIO()) == 2
    assert not (tmp_path / "none").exists()


def test_version_prints_the_package_version(capsys) -> None:
    import importlib.metadata

    import pytest
    import scrubjay

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"scrubjay {scrubjay.__version__}"
    assert scrubjay.__version__ == importlib.metadata.version("scrubjay-mem")


_REST_MARKUP = re.compile(r"``|:[a-z]+:`")


def test_help_shows_no_rest_markup(capsys) -> None:
    import pytest

    for command in ([], ["demo"], ["inspect"], ["perishability"], ["bench"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        text = capsys.readouterr().out
        assert "usage: scrubjay" in text
        assert not _REST_MARKUP.search(text), (command, text)


def test_the_help_formatter_drops_markup_from_any_subcommand() -> None:
    """Help strings written as docstrings are (``:mod:`` roles, inline literals) read plain."""
    import argparse
    import doctest

    from scrubjay import cli

    assert doctest.testmod(cli).failed == 0
    parser = cli._Parser(prog="x", description="Runs ``x`` (see :mod:`scrubjay.bench`).")
    sub = parser.add_subparsers(parser_class=cli._Parser)
    child = sub.add_parser("child", help="the ``child`` one",
                           description="Uses :func:`~scrubjay.bench.perf.run_perf`.")
    child.add_argument("--flag", help="turns ``flag`` on")
    assert isinstance(child.formatter_class(prog="x"), argparse.HelpFormatter)
    top, inner = parser.format_help(), child.format_help()
    assert "Runs x (see scrubjay.bench)." in top and "the child one" in top
    assert "Uses run_perf." in inner and "turns flag on" in inner
    assert not _REST_MARKUP.search(top + inner)


def _store_with_many_memories(path) -> str:
    from scrubjay import ClassifierConfig, ScrubJayConfig

    mem = ScrubJayMemory(path=path, namespace="many", embedder=HashEmbedder(),
                         clock=FrozenClock(1_764_000_000), config=ScrubJayConfig(
                             classifier=ClassifierConfig(offline="keyword")))
    mem.add_many([f"note {i}: the quarterly plan moves to room {i % 40}" for i in range(400)])
    mem.close()
    return str(path)


def test_a_pipe_closed_early_ends_quietly(tmp_path) -> None:
    """``scrubjay ... | head -1``: the reader is gone before the command writes (its read end
    is closed at once; the command takes far longer to import), and the command's output
    (400 rows for inspect, more than a pipe's buffer) meets a closed pipe: no traceback, no
    "Exception ignored" at exit; inspect ends with the exit status of a command killed by
    SIGPIPE."""
    import subprocess
    import sys

    store = _store_with_many_memories(tmp_path / "s")
    for args in (["inspect", store], ["--help"], ["--version"]):
        proc = subprocess.Popen([sys.executable, "-m", "scrubjay.cli", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipe" not in err, (args, err)
        assert err == "", (args, err)
        # argparse drops what it cannot print (--help, --version); inspect stops at the pipe
        assert code == (141 if args[0] == "inspect" else 0), (args, code, err)
