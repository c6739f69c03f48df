"""``scrubjay bench tgt|locomo|factconsolidation|scenario|asof|all|perf|supersession|windows``:
run the benchmarks.

``scenario`` runs the hand-written timelines (:mod:`scrubjay.bench.run_scenario`; the test
ones, or with ``--split train`` the training ones), ``asof`` the as-of probes on
FactConsolidation (:mod:`scrubjay.bench.run_asof`); both have their own systems (ScrubJay-MEM
with plain adds and with ``integrate()``, and their baselines), which ``all`` runs whatever
``--systems`` says. ``--quick`` (shared with ``perf``) runs them at a reduced size.

``perf`` measures cost (latency, ingest, RCI, buffer, memory); see :mod:`scrubjay.bench.perf`.
``supersession`` cross-validates the offline supersession detector on its labelled set and
scores the held-out slots (see :mod:`scrubjay.bench.supersession`); with benchmark data at
hand it also checks it on FactConsolidation's fact pairs.
``windows`` scores the stated-window resolver on its bundled labelled set and compares the time
expression parsers; see :mod:`scrubjay.bench.windows_eval`.

Each command prints its Markdown report and writes it, with a JSON file (and for TGT a PNG),
into ``--out`` (default ``bench-results/``). Third-party data is read from ``--data`` (default
``<repo>/../shared/benchmarks`` when it exists); it is never copied.

``--llm ollama:MODEL[@URL]`` gives TGT a chat model (``langchain_ollama.ChatOllama``): the LLM
systems B1/B6/B7 join the default TGT list, and ``--judge llm`` / ``--naturalise`` become
available. FactConsolidation and LoCoMo score rankings, which the LLM systems do not change
(B6/B7 rank as B3; B1 has none), so ``all`` runs them on TGT only.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

from scrubjay.bench.common import EMBEDDERS, default_data_dir
from scrubjay.bench.perf import add_perf_arguments, cmd_perf
from scrubjay.bench.systems import LLM_SYSTEM_NAMES, SYSTEM_NAMES

__all__ = ["add_bench_parser", "cmd_bench", "make_chat_model"]

BENCHMARKS = ("tgt", "locomo", "factconsolidation", "scenario", "asof", "all", "perf",
              "supersession", "windows")

OWN_SYSTEMS = {"scenario": ("SJ-add", "SJ-integrate", "SJ-add-learned", "SJ-add-nosup"), "asof": ("SJ-add", "SJ-integrate",
                                                                "B3-dense-asof")}
"""Systems only the scenario and as-of benchmarks know."""


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bench`` command to the ``scrubjay`` command line."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "bench", help="quality benchmarks: TGT, LoCoMo, FactConsolidation, scenario "
                      "timelines, as-of probes; "
                      "perf: latency, ingest, RCI, buffer, memory; "
                      "supersession: the offline supersession detector; "
                      "windows: validity windows stated in the text")
    p.add_argument("benchmark", choices=BENCHMARKS)
    p.add_argument("--seeds", type=int, default=5, help="TGT seeds (default 5)")
    p.add_argument("--instances", type=int, default=20, help="TGT instances per seed (20)")
    p.add_argument("--out", default="bench-results", help="output folder (bench-results/)")
    p.add_argument("--data", help="folder holding locomo/ and factconsolidation_sh/ "
                                  "(default: <repo>/../shared/benchmarks)")
    p.add_argument("--embedder", choices=EMBEDDERS, default="wordllama")
    p.add_argument("--systems", help="comma-separated system names (default: each runner's "
                                     f"own list); known: {', '.join(SYSTEM_NAMES)}")
    p.add_argument("--split", choices=("test", "train"), default="test",
                   help="scenario timelines: test (personal, work, trip: the reported figures; "
                        "default) or train (household, student, freelance: written apart, for "
                        "choosing constants by cross-validation)")
    p.add_argument("--locomo-context", default=None,
                   help="LoCoMo memory context template (default '{sample_id} session {n}')")
    p.add_argument("--jobs", type=int, default=2, help="TGT worker processes (default 2)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--llm", metavar="ollama:MODEL[@URL]",
                   help="chat model for TGT's LLM systems (" + ", ".join(LLM_SYSTEM_NAMES)
                   + "), the LLM judge and naturalisation; e.g. ollama:llama3.2:3b or "
                   "ollama:qwen3:30b@http://host:11434")
    p.add_argument("--judge", choices=("heuristic", "llm"), default="heuristic",
                   help="TGT answer judge (default heuristic; llm needs --llm)")
    p.add_argument("--naturalise", action="store_true",
                   help="rewrite TGT memory and query texts with the --llm model first")
    perf = p.add_argument_group("perf (scrubjay bench perf)")
    add_perf_arguments(perf)
    p.set_defaults(func=cmd_bench)
    return p


def _data(args: argparse.Namespace) -> Path:
    data = Path(args.data) if args.data else default_data_dir()
    if data is None or not data.exists():
        raise FileNotFoundError("no benchmark data: pass --data PATH (the folder holding "
                                "locomo/ and factconsolidation_sh/)")
    return data


def make_chat_model(spec: str) -> tuple[Any, str]:
    """``ollama:MODEL[@URL]`` as a ``ChatOllama`` (temperature 0) and its display name."""
    provider, sep, rest = spec.partition(":")
    model, _, url = rest.rpartition("@") if "@" in rest else (rest, "", "")
    if provider != "ollama" or not sep or not model:
        raise ValueError(f"The '--llm' option must look like ollama:MODEL[@URL]. Got {spec!r} "
                         "instead.")
    try:
        from langchain_ollama import ChatOllama
    except ImportError as exc:
        raise RuntimeError("--llm ollama:... needs the package 'langchain-ollama'") from exc
    kwargs: dict[str, Any] = {"model": model, "temperature": 0}
    if url:
        kwargs["base_url"] = url
    return ChatOllama(**kwargs), (f"ollama:{model}" + (f"@{url}" if url else "")
                                  + " (temperature 0)")


def _check_llm_options(args: argparse.Namespace, systems: tuple[str, ...] | None) -> None:
    if getattr(args, "llm", None):
        return
    need = [s for s in systems or () if s in LLM_SYSTEM_NAMES]
    if need:
        raise ValueError(f"systems {need} need a chat model: pass --llm ollama:MODEL[@URL]")
    if getattr(args, "judge", "heuristic") == "llm":
        raise ValueError("--judge llm needs a chat model: pass --llm ollama:MODEL[@URL]")
    if getattr(args, "naturalise", False):
        raise ValueError("--naturalise needs a chat model: pass --llm ollama:MODEL[@URL]")


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    """Run the chosen benchmark(s); print the Markdown and the files written."""
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    if args.benchmark == "perf":
        return cmd_perf(args, out)
    if args.benchmark == "supersession":
        return _cmd_supersession(args, out)
    if args.benchmark == "windows":
        return _cmd_windows(args, out)
    out_dir = Path(args.out)
    systems = tuple(s.strip() for s in args.systems.split(",")) if args.systems else None
    own = OWN_SYSTEMS.get(args.benchmark, ())
    known = SYSTEM_NAMES + LLM_SYSTEM_NAMES + own
    unknown = [s for s in systems or () if s not in known]
    chosen = ("tgt", "factconsolidation", "locomo", "scenario", "asof") \
        if args.benchmark == "all" else (args.benchmark,)
    try:
        if unknown:
            raise ValueError(f"unknown systems {unknown}; known: {', '.join(known)}")
        _check_llm_options(args, systems)
        if args.benchmark not in ("tgt", "all") and getattr(args, "llm", None):
            raise ValueError("--llm is used by TGT only: run 'scrubjay bench tgt' or 'all'")
        llm = make_chat_model(args.llm) if getattr(args, "llm", None) else None
        if args.embedder == "minilm":
            from scrubjay.bench.common import get_embedder

            get_embedder("minilm")  # fail early with a clear message
        for name in chosen:
            if name in OWN_SYSTEMS and args.benchmark == "all":
                paths = _run_one(name, args, None, out_dir)
            elif name != "tgt" and systems and all(s in LLM_SYSTEM_NAMES for s in systems):
                out.write(f"{name}: skipped (the LLM systems are scored on TGT only)\n\n")
                continue
            else:
                paths = _run_one(name, args, systems, out_dir, llm)
            out.write(paths["md"].read_text() + "\n")
            out.write("wrote " + ", ".join(str(p) for p in paths.values()) + "\n\n")
    except (RuntimeError, FileNotFoundError, ValueError) as exc:
        sys.stderr.write(f"scrubjay bench: error: {exc}\n")
        return 2
    return 0


def _cmd_supersession(args: argparse.Namespace, out: TextIO) -> int:
    """``scrubjay bench supersession``: CV on the training slots, figures on the test slots."""
    from scrubjay.bench.supersession import run_supersession, write_supersession

    try:
        if getattr(args, "llm", None):
            raise ValueError("--llm is used by TGT only: the supersession benchmark is offline")
        data = Path(args.data) if args.data else default_data_dir()
        if args.data and not Path(args.data).exists():
            raise FileNotFoundError(f"no benchmark data at {args.data}")
        res = run_supersession(embedder=args.embedder,
                               data_dir=data if data is not None and data.exists() else None)
    except (RuntimeError, FileNotFoundError, ValueError) as exc:
        sys.stderr.write(f"scrubjay bench: error: {exc}\n")
        return 2
    paths = write_supersession(res, Path(args.out))
    out.write(paths["md"].read_text() + "\n")
    out.write("wrote " + ", ".join(str(p) for p in paths.values()) + "\n\n")
    return 0


def _cmd_windows(args: argparse.Namespace, out: TextIO) -> int:
    from scrubjay.bench.windows_eval import run_windows, write_windows

    paths = write_windows(run_windows(), Path(args.out))
    out.write(paths["md"].read_text() + "\n")
    out.write("wrote " + ", ".join(str(p) for p in paths.values()) + "\n")
    return 0


def _run_one(name: str, args: argparse.Namespace, systems: tuple[str, ...] | None,
             out_dir: Path, llm: tuple[Any, str] | None = None) -> dict[str, Path]:
    progress = not args.no_progress
    if name == "tgt":
        from scrubjay.bench.run_tgt import DEFAULT_TGT_SYSTEMS, run_tgt, write_tgt

        extra: dict[str, Any] = {}
        if llm is not None:
            extra = {"llm": llm[0], "llm_name": llm[1], "judge": args.judge,
                     "naturalise": args.naturalise}
        default = None if llm is not None else DEFAULT_TGT_SYSTEMS
        res = run_tgt(systems=systems or default, seeds=args.seeds,
                      instances=args.instances, embedder=args.embedder, jobs=args.jobs,
                      progress=progress, **extra)
        return write_tgt(res, out_dir)
    if systems:  # LLM systems are scored on TGT only (see the module docstring)
        systems = tuple(s for s in systems if s not in LLM_SYSTEM_NAMES)
    if name == "scenario":
        from scrubjay.bench.run_scenario import (
            DEFAULT_SCENARIO_SYSTEMS,
            run_scenario,
            write_scenario,
        )

        res = run_scenario(systems=systems or DEFAULT_SCENARIO_SYSTEMS, embedder=args.embedder,
                           quick=getattr(args, "quick", False),
                           split=getattr(args, "split", "test"), progress=progress)
        return write_scenario(res, out_dir)
    if name == "asof":
        from scrubjay.bench.run_asof import ASOF_SYSTEMS, run_asof, write_asof

        res = run_asof(_data(args), systems=systems or ASOF_SYSTEMS, embedder=args.embedder,
                       quick=getattr(args, "quick", False), progress=progress)
        return write_asof(res, out_dir)
    if name == "factconsolidation":
        from scrubjay.bench.run_factconsolidation import (
            DEFAULT_FC_SYSTEMS,
            run_factconsolidation,
            write_fc,
        )

        res = run_factconsolidation(_data(args), systems=systems or DEFAULT_FC_SYSTEMS,
                                    embedder=args.embedder, progress=progress)
        return write_fc(res, out_dir)
    from scrubjay.bench.run_locomo import DEFAULT_LOCOMO_SYSTEMS, run_locomo, write_locomo

    extra = {"context_template": args.locomo_context} if args.locomo_context else {}
    res = run_locomo(_data(args), systems=systems or DEFAULT_LOCOMO_SYSTEMS,
                     embedder=args.embedder, progress=progress, **extra)
    return write_locomo(res, out_dir)
