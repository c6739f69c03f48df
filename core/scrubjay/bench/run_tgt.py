"""Run the Temporal Generalization Test (TGT, SPEC §10) on every system.

Protocol: for each seed, :func:`scrubjay.bench.tgt.generate` builds the instances; each system
gets a fresh copy per instance, is given :func:`~scrubjay.bench.tgt.system_view` only (memory id,
text, context, creation time; query text and time: no type, validity or true pi/tau), indexes
the memories with their creation times, and answers every query with its top-1 memory text and
its validity judgement at the query time. :func:`scrubjay.bench.tgt_scoring.score` scores each
(system, seed); :func:`~scrubjay.bench.tgt_scoring.aggregate_seeds` gives mean and 95%
t-interval over seeds. Outputs: a Markdown report, ``tgt.json`` and ``tgt_intervals.png``.

With a chat model (``llm=``: a LangChain chat model or a callable ``str -> str``) the LLM systems
B1/B6/B7 can run (``scrubjay.bench.llm_systems``), answers can be graded by the LLM judge
(``judge="llm"``, ``scrubjay.bench.llm_judge``) and the texts naturalised first
(``naturalise=True``, ``scrubjay.bench.tgt_naturalise``). LLM systems run in this process, one
after the other; the others keep the worker pool. The report then gains an "LLM settings" line
and the JSON an ``llm`` entry; without a chat model neither appears.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, cast

from scrubjay.bench import tgt_scoring as ts
from scrubjay.bench.common import environment, get_embedder, md_table, pct, write_json
from scrubjay.bench.systems import (
    LLM_SYSTEM_NAMES,
    SYSTEM_NAMES,
    MemoryItem,
    close_system,
    make_system,
    settings,
)
from scrubjay.bench.tgt import TGTConfig, generate, system_view

__all__ = ["DEFAULT_TGT_LLM_SYSTEMS", "DEFAULT_TGT_SYSTEMS", "answer_instance", "plot_intervals", "run_tgt", "tgt_markdown"]

logger = logging.getLogger(__name__)

DEFAULT_TGT_SYSTEMS = tuple(s for s in SYSTEM_NAMES if s != "SJ-no-rci")
"""TGT has no update events, so SJ-no-rci would repeat SJ-full; it is left out."""

DEFAULT_TGT_LLM_SYSTEMS = DEFAULT_TGT_SYSTEMS + LLM_SYSTEM_NAMES
"""The default list when a chat model is given."""

_EMBEDDERS: dict[str, Any] = {}


def _embedder(name: Any) -> Any:
    if not isinstance(name, str):
        return get_embedder(name)
    if name not in _EMBEDDERS:
        _EMBEDDERS[name] = get_embedder(name)
    return _EMBEDDERS[name]


def answer_instance(system: Any, view: Any) -> list[tuple[str, str, bool]]:
    """Index one instance's visible memories in ``system``; answer its queries (top-1).

    Returns ``(query_id, answer_text, judged_valid)`` per query, in query order.
    """
    system.index([MemoryItem(m.memory_id, m.text, m.context, m.created_at_s)
                  for m in view.memories])
    out = []
    for q in view.queries:
        top = system.answer(q.text, q.time_s, k=1)
        out.append((q.query_id, top[0].text if top else "", bool(top[0].judged_valid)
                    if top else True))
    return out


def _run_unit(system_name: str, seed: int, n_instances: int, embedder_name: str,
              instances: list[Any] | None = None, llm: Any = None,
              ) -> tuple[str, int, list[tuple[int, str, str, bool]], float, int]:
    """One (system, seed): rows ``(instance, query id, answer, judged_valid)``, seconds and
    the system's failed chat-model calls. ``instances`` defaults to the generated ones."""
    t0 = time.perf_counter()
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s logs each index at DEBUG
    emb = _embedder(embedder_name)
    rows: list[tuple[int, str, str, bool]] = []
    failures = 0
    if instances is None:
        instances = generate(TGTConfig(n_instances=n_instances, seed=seed))
    for inst in instances:
        system = make_system(system_name, emb, seed=seed * 1000 + inst.instance_id, llm=llm)
        try:
            for qid, text, valid in answer_instance(system, system_view(inst)):
                rows.append((inst.instance_id, qid, text, valid))
            failures += getattr(system, "llm_failures", 0)
        finally:
            close_system(system)
    return system_name, seed, rows, time.perf_counter() - t0, failures


def _check_llm_args(systems: Sequence[str], llm: Any, judge: str, naturalise: bool) -> None:
    from scrubjay.bench.llm_judge import JUDGES

    if judge not in JUDGES:
        raise ValueError(f"The 'judge' parameter of run_tgt must be one of {JUDGES}. Got "
                         f"{judge!r} instead.")
    if llm is not None:
        return
    need = [s for s in systems if s in LLM_SYSTEM_NAMES]
    if need:
        raise ValueError(f"systems {need} need a chat model: pass --llm ollama:MODEL[@URL] "
                         "(llm= in Python)")
    if judge == "llm":
        raise ValueError("--judge llm needs a chat model: pass --llm ollama:MODEL[@URL]")
    if naturalise:
        raise ValueError("--naturalise needs a chat model: pass --llm ollama:MODEL[@URL]")


def run_tgt(*, systems: Sequence[str] | None = None, seeds: int = 5,
            instances: int = 20, embedder: str = "wordllama", jobs: int = 1,
            progress: bool = True, llm: Any = None, llm_name: str | None = None,
            judge: str = "heuristic", naturalise: bool = False) -> dict[str, Any]:
    """Run TGT; returns the JSON-ready results (see the module docstring).

    ``systems`` defaults to :data:`DEFAULT_TGT_SYSTEMS`, or :data:`DEFAULT_TGT_LLM_SYSTEMS`
    when ``llm`` is given. ``llm_name`` is how the report names the model.
    """
    from tqdm import tqdm

    if systems is None:
        systems = DEFAULT_TGT_SYSTEMS if llm is None else DEFAULT_TGT_LLM_SYSTEMS
    systems = tuple(systems)
    _check_llm_args(systems, llm, judge, naturalise)
    client = None
    if llm is not None:
        from scrubjay.bench.llm_systems import as_client

        client = as_client(llm)
    t_start = time.perf_counter()
    per_seed_instances = {seed: generate(TGTConfig(n_instances=instances, seed=seed))
                          for seed in range(seeds)}
    naturaliser = None
    if naturalise:
        from scrubjay.bench.tgt_naturalise import Naturaliser

        naturaliser = Naturaliser(client)
        per_seed_instances = {seed: naturaliser.instances(insts)
                              for seed, insts in per_seed_instances.items()}
    given = per_seed_instances if naturalise else None
    units = [(s, seed) for seed in range(seeds) for s in systems]
    results: dict[tuple[str, int], list[tuple[int, str, str, bool]]] = {}
    seconds: dict[str, float] = {s: 0.0 for s in systems}
    failures: dict[str, int] = {s: 0 for s in systems}
    bar = tqdm(total=len(units), desc="TGT (system x seed)", disable=not progress)

    def record(out: tuple[str, int, list[tuple[int, str, str, bool]], float, int]) -> None:
        name, seed, rows, sec, failed = out
        results[(name, seed)] = rows
        seconds[name] += sec
        failures[name] += failed
        bar.update(1)

    local = [u for u in units if u[0] in LLM_SYSTEM_NAMES]
    pooled = [u for u in units if u[0] not in LLM_SYSTEM_NAMES]
    if jobs > 1 and pooled:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = [pool.submit(_run_unit, s, seed, instances, embedder,
                                   given[seed] if given else None)
                       for s, seed in pooled]
            for fut in futures:
                record(fut.result())
    else:
        local = units
    for s, seed in local:
        record(_run_unit(s, seed, instances, embedder, given[seed] if given else None,
                         client if s in LLM_SYSTEM_NAMES else None))
    bar.close()

    llm_judge = None
    if judge == "llm":
        from scrubjay.bench.llm_judge import TEXT_JUDGED_SYSTEMS, LLMJudge

        llm_judge = LLMJudge(client)
    reports: dict[str, list[ts.TGTReport]] = {s: [] for s in systems}
    for seed in range(seeds):
        queries = {(inst.instance_id, q.query_id): q for inst in per_seed_instances[seed]
                   for q in inst.queries}
        for s in systems:
            graded = (ts.QueryResult(query=queries[(i, qid)], answer_text=text,
                                     judged_valid=valid)
                      for i, qid, text, valid in results[(s, seed)])
            if llm_judge is not None:
                graded = (llm_judge.judge(r, text_judged=s in TEXT_JUDGED_SYSTEMS)
                          for r in graded)
            reports[s].append(ts.score(graded))
    floor = [ts.score(ts.always_valid_results(per_seed_instances[seed])) for seed in range(seeds)]

    def agg_json(reps: list[ts.TGTReport]) -> dict[str, Any]:
        a = ts.aggregate_seeds(reps)

        def ci(m: ts.MeanCI) -> dict[str, float]:
            return {"mean": m.mean, "lo": m.lo, "hi": m.hi, "half_width": m.half_width}
        return {
            "combined": ci(a.combined), "factual": ci(a.factual), "staleness": ci(a.staleness),
            "tgs": ci(a.tgs), "gen_gap": ci(a.gen_gap),
            "per_interval": {k: ci(m) for k, m in a.per_interval},
            "per_type": {g.key: {"combined": sum(
                next(x.combined for x in r.per_type if x.key == g.key) for r in reps) / len(reps)}
                for g in reps[0].per_type},
            "per_seed": [{"combined": r.combined, "factual": r.factual,
                          "staleness": r.staleness, "tgs": r.tgs, "gen_gap": r.gen_gap,
                          "per_interval": {g.key: {"n": g.n, "factual": g.factual,
                                                   "staleness": g.staleness,
                                                   "combined": g.combined}
                                           for g in r.per_interval},
                          "per_type": {g.key: {"n": g.n, "factual": g.factual,
                                               "staleness": g.staleness,
                                               "combined": g.combined}
                                       for g in r.per_type}}
                         for r in reps],
        }

    out: dict[str, Any] = {
        "benchmark": "TGT",
        "seeds": seeds, "instances_per_seed": instances,
        "queries_per_seed": reports[systems[0]][0].n_queries if systems else 0,
        "embedder": embedder if isinstance(embedder, str) else getattr(embedder, "name", "?"),
        "settings": settings(),
        "environment": environment(),
        "seconds_total": time.perf_counter() - t_start,
        "seconds_per_system": seconds,
        "always_valid_floor": agg_json(floor),
        "systems": {s: agg_json(reports[s]) for s in systems},
    }
    if llm is not None:
        from scrubjay.bench.llm_systems import LLM_MAX_REPLY_CHARS, LLM_TIMEOUT_S, RAG_K

        out["llm"] = {
            "model": llm_name or getattr(llm, "model", None) or type(llm).__name__,
            "judge": judge,
            "judge_calls": llm_judge.calls if llm_judge else 0,
            "judge_fallbacks": llm_judge.fallbacks if llm_judge else 0,
            "naturalise": naturalise,
            "naturalisation": naturaliser.stats() if naturaliser else None,
            "rag_k": RAG_K,
            "timeout_s": LLM_TIMEOUT_S,
            "max_reply_chars": LLM_MAX_REPLY_CHARS,
            "system_call_failures": {s: failures[s] for s in systems
                                     if s in LLM_SYSTEM_NAMES},
            "floor_judge": "heuristic",
        }
    return out


def _ci(d: dict[str, float], scale: float = 100.0, digits: int = 1) -> str:
    mean, hw = d["mean"], d["half_width"]
    if hw is None or math.isnan(hw):
        return f"{scale * mean:.{digits}f}"
    return f"{scale * mean:.{digits}f} ± {scale * hw:.{digits}f}"


def tgt_markdown(res: dict[str, Any]) -> str:
    """The Markdown report of :func:`run_tgt`'s result."""
    rows = []
    named = [("always-valid floor (true answer, judged valid)", res["always_valid_floor"])]
    named += list(res["systems"].items())
    for name, r in named:
        rows.append([name, _ci(r["combined"]), _ci(r["factual"]), _ci(r["staleness"]),
                     _ci(r["tgs"], 1.0, 3), _ci(r["gen_gap"], 1.0, 3)])
    head = (f"TGT: {res['seeds']} seeds x {res['instances_per_seed']} instances "
            f"({res['queries_per_seed']} queries per seed), embedder {res['embedder']}; "
            "mean ± 95% t-interval half-width over seeds.\n\n")
    t1 = md_table(["system", "combined %", "factual %", "staleness %", "TGS", "GenGap"], rows)
    ivs = list(res["always_valid_floor"]["per_interval"])
    rows2 = [[name] + [_ci(r["per_interval"][k]) for k in ivs] for name, r in named]
    t2 = md_table(["Acc(I_k) combined %"] + [f"{k}{' (held out)' if k in ('I3', 'I5') else ''}"
                                             for k in ivs], rows2)
    types = list(next(iter(res["systems"].values()))["per_type"]) if res["systems"] else []
    rows3 = [[name] + [pct(r["per_type"][t]["combined"]) for t in types]
             for name, r in res["systems"].items()]
    t3 = md_table(["combined % by hidden type (mean over seeds)"] + types, rows3)
    st = res["settings"]
    notes = (f"\n\nSettings: B5 T = {st['b5_recency_T_days']:g} days; stale threshold "
             f"{st['stale_ratio']:g} for every time-aware system; LangChain decay_rate "
             f"{st['langchain_decay_rate']:g}; LlamaIndex time_decay "
             f"{st['llamaindex_time_decay']:g}; their access refresh "
             f"{'on' if st['time_weighted_refresh_on_access'] else 'off'}; "
             f"RRF k = {st['rrf_k']}; ScrubJay-MEM: default ScrubJayConfig; buffer {st['buffer']}. Run time "
             f"{res['seconds_total']:.0f} s.")
    return head + t1 + "\n\n" + t2 + "\n\n" + t3 + notes + _llm_notes(res) + "\n"


def _llm_notes(res: dict[str, Any]) -> str:
    """The "LLM settings" paragraph (empty without a chat model)."""
    lm = res.get("llm")
    if not lm:
        return ""
    judge = (f"LLM judge ({lm['judge_calls']} calls, {lm['judge_fallbacks']} fallbacks to the "
             "heuristic judge on malformed or failed replies; the floor row is graded by the "
             "heuristic judge)" if lm["judge"] == "llm" else "heuristic judge")
    nat = lm.get("naturalisation")
    if lm["naturalise"] and nat:
        natural = (f"texts naturalised by the model ({nat['memory_fallbacks']} of "
                   f"{nat['memories']} memories and {nat['query_fallbacks']} of "
                   f"{nat['queries']} queries kept as templates after a failed check or call)")
    else:
        natural = "template texts (not naturalised)"
    fails = ", ".join(f"{s} {n}" for s, n in lm["system_call_failures"].items()) or "none run"
    return (f"\n\nLLM settings: chat model {lm['model']}; {judge}; {natural}; B6/B7 retrieve "
            f"the dense top {lm['rag_k']}; call timeout {lm['timeout_s']:g} s, replies over "
            f"{lm['max_reply_chars']} characters count as failures; failed system calls "
            f"(answered with an empty text): {fails}.")


def plot_intervals(res: dict[str, Any], path: Path) -> None:
    """Accuracy (combined) per interval per system, with 95% intervals (paper Figure 2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ivs = list(res["always_valid_floor"]["per_interval"])
    fig, ax = plt.subplots(figsize=(10, 4.8))
    x = list(range(len(ivs)))
    series = [("always-valid floor", res["always_valid_floor"])] + list(res["systems"].items())
    colors = cast(Any, plt.get_cmap("tab20")).colors  # a ListedColormap
    markers = "osD^v<>ph*Xd"
    for j, (name, r) in enumerate(series):
        means = [100 * r["per_interval"][k]["mean"] for k in ivs]
        hws = [r["per_interval"][k]["half_width"] for k in ivs]
        err = [0.0 if h is None or math.isnan(h) else 100 * h for h in hws]
        if name.startswith("always"):
            style: dict[str, Any] = {"linestyle": ":", "color": "grey", "linewidth": 1.5}
        elif name == "SJ-full":
            style = {"color": "black", "linewidth": 2.8}
        else:
            style = {"color": colors[(2 * j) % 20 if j < 10 else (2 * j + 1) % 20],
                     "linewidth": 1.2}
        ax.errorbar(x, means, yerr=err, marker=markers[j % len(markers)], capsize=3,
                    label=name, **style)
    for i, k in enumerate(ivs):
        if k in ("I3", "I5"):
            ax.axvspan(i - 0.3, i + 0.3, color="0.92", zorder=0)
    ax.set_xticks(x, [f"{k}\n(held out)" if k in ("I3", "I5") else k for k in ivs])
    ax.set_ylabel("combined accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"TGT accuracy per retention interval ({res['seeds']} seeds x "
                 f"{res['instances_per_seed']} instances, {res['embedder']})")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_tgt(res: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write ``tgt.md``, ``tgt.json`` and ``tgt_intervals.png`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"md": out_dir / "tgt.md", "json": out_dir / "tgt.json",
             "png": out_dir / "tgt_intervals.png"}
    paths["md"].write_text(tgt_markdown(res))
    write_json(paths["json"], res)
    plot_intervals(res, paths["png"])
    return paths
