"""The ``scrubjay`` command line: ``demo``, ``inspect``, ``perishability`` and ``bench``.

Help text is plain: its formatter drops the reST markup (inline literals, roles such as
``:mod:``) that the docstrings and help strings it shows may carry. Output into a pipe closed
early (``scrubjay inspect STORE | head -1``) ends the command quietly, with the exit status a
shell reports for a command killed by ``SIGPIPE``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TextIO

from . import __version__
from .decay import is_stale, utility
from .errors import ScrubJayError

__all__ = ["main"]

DESCRIPTION = ("ScrubJay-MEM, a memory for LLM agents that knows how fast each memory goes "
               "stale: a scripted demo, a look inside a store, the offline perishability "
               "estimator and the benchmarks.")

#: The exit status a shell reports for a command killed by SIGPIPE (128 + 13).
EXIT_CLOSED_PIPE = 141

#: reST roles (a module, a function: ``~`` keeps the last name) and inline literals.
_REST = re.compile(r":[a-z:]+:`(~?)([^`]+)`|``([^`]+)``")


def _plain(text: str) -> str:
    """The text without reST markup, as help shows it.

    >>> _plain("The ``scrubjay`` command; see :mod:`scrubjay.bench` and :func:`~a.b.run`.")
    'The scrubjay command; see scrubjay.bench and run.'
    """
    def one(m: re.Match[str]) -> str:
        if m.group(3) is not None:
            return m.group(3)
        return m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2)

    return _REST.sub(one, text)


class _PlainHelpFormatter(argparse.HelpFormatter):
    """Descriptions, epilogs and argument help without reST markup."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(_plain(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return _plain(super()._expand_help(action))


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose help is plain; its subcommands' parsers are too."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _PlainHelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def _human_s(seconds: float) -> str:
    for unit, size in (("y", 365.25 * 86_400), ("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                  + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """A scripted week: remember, search at each day's end, then RCI and consolidation."""
    from .explain import marker, staleness_in
    from .memory import ScrubJayMemory
    from .testing import WEEK_OF_MEMORIES, FrozenClock

    start = datetime(2026, 11, 23, 0, 0, tzinfo=UTC).timestamp()  # a Monday
    clock = FrozenClock(start)
    queries = [("Where is the user right now?", ""),
               ("What does the user do for a living?", ""),
               ("What is failing in the bridge model?", "debugging the model")]
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
    with tempfile.TemporaryDirectory(prefix="scrubjay-demo-") as tmp:
        path = args.path or tmp
        mem = ScrubJayMemory(path=path, namespace="demo", clock=clock)
        out.write(f"scrubjay demo: a week of an agent's memories\n(embedded Chroma at {path}, "
                  f"embedder {mem.embedder.name}, offline perishability: "
                  f"{mem.config.classifier.offline})\n\n")
        for day, name in enumerate(days):
            for d, hour, text, context in WEEK_OF_MEMORIES:
                if d != day:
                    continue
                clock.set(start + d * 86_400 + hour * 3600)
                rec = mem.add(text, context=context)
                out.write(f"{name} {int(hour):02d}:{round(hour % 1 * 60):02d} remember "
                          f"[{rec.label}, pi={rec.pi:.2f}, tau={_human_s(rec.tau_s)}] "
                          f"{_clip(text, 58)}\n")
            if day not in (0, 1, 4):
                continue
            clock.set(start + day * 86_400 + 18 * 3600)
            out.write(f"\n== {name} 18:00: search, top 2 (score, utility, stale flag) ==\n")
            for q, ctx in queries:
                out.write(f"Q: {q}" + (f"  [context: {ctx}]" if ctx else "") + "\n")
                out.writelines(f"   {h.score:5.3f}  U={h.utility:4.2f}  "
                              f"{'STALE' if h.stale else 'valid'}  {_clip(h.text, 66)}\n" for h in mem.search(q, context=ctx, k=2))
            now = clock()
            stale = [r for r in mem if bool(is_stale(
                utility(r.value, r.pi, r.tau_s, r.created_at_s, now), r.value,
                mem.config.decay.stale_ratio))]
            out.write(f"STALE now ({len(stale)} of {len(mem)}): "
                      + "; ".join(_clip(r.text, 40) for r in stale) + "\n\n")

        clock.set(start + 4 * 86_400 + 19 * 3600)
        question = "Which office is the user working from?"
        news = "The user no longer works from Lisbon; they moved back to the Porto office"
        before = {h.id: h for h in mem.search(question, k=3)}
        report = mem.integrate(news, context="travel planning")
        out.write(f"== Friday 19:00: RCI on {news!r} ==\n")
        out.write(f"deltas dV={report.deltas.delta_value:+.2f} dpi={report.deltas.delta_pi:+.2f} "
                  f"dtau={report.deltas.delta_tau:+.2f} ({report.deltas.summary}); "
                  f"LLM calls: {report.llm_calls}\n")
        for mid, alpha in report.affected:
            rec = mem.get(mid)
            out.write(f"   alpha={alpha:.2f} value->{rec.value:.2f} pi->{rec.pi:.2f} "
                      f"tau->{_human_s(rec.tau_s)}  {_clip(rec.text, 52)}\n")
        out.write(f"Q: {question}\n")
        for h in mem.search(question, k=3):
            was = before.get(h.id)
            prev = f"(before RCI {was.score:5.3f})" if was else "(new memory)       "
            out.write(f"   {h.score:5.3f} {prev}  {'STALE' if h.stale else 'valid'}  "
                      f"{_clip(h.text, 56)}\n")
        clock.set(start + 4 * 86_400 + 20 * 3600)
        news = "The user switched careers and is now a project manager at Arup"
        job = mem.add(news, context="getting to know the user")
        question = "What is the user's job?"
        out.write(f"\n== Friday 20:00: remember {news!r} (a plain add) ==\n"
                  f"Q: {question}  (score = relevance x time factor)\n")
        ranked = mem.search(question, k=len(mem))
        for rank, h in enumerate(ranked, start=1):
            if rank > 2 and h.record.superseded_by != job.id:
                continue
            if rank > 2:
                out.write(f"   ... the memory it replaced, at rank {rank}:\n")
            out.write(f"   {h.score:5.3f} = {h.score / h.time_factor:5.3f} x "
                      f"{h.time_factor:4.2f}  {'STALE' if h.stale else 'valid'}  "
                      f"{_clip(h.text, 56)}\n")
            st = staleness_in(mem, h, clock())
            if st is not None:
                out.write(f"          {marker(st)}\n")
        total = len(mem)
        removed = mem.consolidate(at=start + 60 * 86_400)
        out.write(f"\nConsolidation two months later removes {len(removed)} of {total} "
                  f"memories (utility <= eps and not a graph hub); {len(mem)} remain.\n")
        mem.close()
    return 0


def cmd_inspect(args: argparse.Namespace, out: TextIO) -> int:
    from .config import DecayConfig
    from .memory import ScrubJayMemory

    names = [args.namespace] if args.namespace else ScrubJayMemory.list_namespaces(path=args.path)
    if not names:
        out.write(f"No scrubjay namespaces at {args.path}\n")
        return 0
    for ns in names:
        mem = ScrubJayMemory(path=args.path, namespace=ns, embedder=_NoEmbedder(), create=False)
        try:
            at = mem.now() if args.at is None else args.at
            recs = sorted(mem, key=lambda r: r.created_at_s)
            out.write(f"namespace {ns!r}: {len(recs)} memories (at "
                      f"{datetime.fromtimestamp(at, tz=UTC):%Y-%m-%d %H:%M} UTC)\n")
            if not recs:
                continue
            rows = [["id", "label", "pi", "tau", "utility", "stale", "text"]]
            for r in recs:
                u = float(utility(r.value, r.pi, r.tau_s, r.created_at_s, at))
                stale = bool(is_stale(u, r.value, DecayConfig().stale_ratio))
                rows.append([r.id[:8], r.label, f"{r.pi:.2f}", _human_s(r.tau_s), f"{u:.3f}",
                             "yes" if stale else "no", _clip(r.text, 50)])
            _table(rows, out)
        finally:
            mem.close()
    return 0


def cmd_perishability(args: argparse.Namespace, out: TextIO) -> int:
    import json
    from pathlib import Path

    from .bench.perishability_eval import (
        cross_validate,
        evaluate,
        format_cv,
        format_report,
        retrain,
    )
    from .estimator import save_model

    if args.action == "train":
        model = retrain()
        target = Path(args.out) if args.out else Path(__file__).parent / "data" / \
            "perishability_model.npz"
        save_model(model, str(target))
        out.write(f"trained on the train split; wrote {target}\n")
        return 0
    if args.action == "cv":
        from .bench.lifetimes import cross_validate_nudge, format_nudge_cv

        out.write(format_cv(cross_validate()) + "\n\n")
        out.write(format_nudge_cv(cross_validate_nudge()) + "\n")
        return 0
    if args.action == "lifetimes":
        from .bench.lifetimes import EXAMPLES, evaluate_lifetimes, format_lifetimes

        figures = evaluate_lifetimes()
        report = format_lifetimes(figures, examples=EXAMPLES)
        out.write(report + "\n")
        if args.out:
            folder = Path(args.out)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "lifetimes.md").write_text(report + "\n", encoding="utf-8")
            (folder / "lifetimes.json").write_text(json.dumps(figures, indent=1),
                                                   encoding="utf-8")
            out.write(f"wrote {folder / 'lifetimes.md'}, {folder / 'lifetimes.json'}\n")
        return 0
    result = evaluate()
    out.write(format_report(result) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


class _NoEmbedder:
    """Inspect reads what is stored; it must not need (or load) the embedding model."""

    def __init__(self) -> None:
        self.name = "callable:inspect"

    def embed(self, texts: Sequence[str], *, query: bool = False) -> object:
        raise ScrubJayError("inspect does not embed")


def _quiet_closed_stdout() -> None:
    """Point the process's stdout at ``os.devnull``, so that the interpreter's last flush of
    what a closed pipe did not take raises nothing (the pattern of Python's ``signal`` docs)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor: nothing to flush
        pass


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="scrubjay", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"scrubjay {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    demo = sub.add_parser("demo", help="a scripted week of memories, offline")
    demo.add_argument("--path", help="keep the store in this folder (default: a temp folder)")
    demo.set_defaults(func=cmd_demo)
    ins = sub.add_parser("inspect", help="each memory's label, pi, tau and current utility")
    ins.add_argument("path")
    ins.add_argument("--namespace", "-n")
    ins.add_argument("--at", type=float, help="epoch seconds (default: now)")
    ins.set_defaults(func=cmd_inspect)
    per = sub.add_parser("perishability", help="train or evaluate the offline estimator")
    per.add_argument("action", choices=["evaluate", "train", "cv", "lifetimes"],
                     help="evaluate on the held-out split, retrain, cross-validate on train, or "
                          "measure everyday lifetimes (accuracy, robustness to the context)")
    per.add_argument("--json", help="evaluate: also write the figures as JSON")
    per.add_argument("--out", help="train: where to write the model (default: the package's); "
                                   "lifetimes: a folder for lifetimes.md and lifetimes.json")
    per.set_defaults(func=cmd_perishability)
    try:
        from .bench.cli import add_bench_parser
    except ImportError:
        pass
    else:
        add_bench_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = _parser()
    try:
        try:
            args = parser.parse_args(argv)
        finally:
            sys.stdout.flush()  # what --help or --version wrote, before their exit
        code = int(args.func(args, out))
        out.flush()  # a closed pipe raises here rather than at the interpreter's exit
    except ScrubJayError as exc:
        sys.stderr.write(f"scrubjay: error: {exc}\n")
        return 2
    except BrokenPipeError:  # the reader went away (``| head``): stop, quietly
        _quiet_closed_stdout()
        return EXIT_CLOSED_PIPE
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
