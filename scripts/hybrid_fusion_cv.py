"""Choose the lexical/dense fusion on the training split only (docs/hybrid.md).

Training split: LoCoMo conversations 1-5 (the first five in file order) and TGT seeds 5-9
(``scrubjay bench tgt`` reports seeds 0..seeds-1, i.e. 0-4 by default). Nothing here reads
LoCoMo conversations 6-10 or TGT seeds 0-4.

For every training query it keeps the dense what-cosine of every memory and the BM25 scores of
the lexical candidates (``scrubjay.lexical``, top ``LEXICAL_CANDIDATES``), then scores each
fusion family over a grid:

- ``convex-idf``: ``(1 - lam) cos + lam min(1, BM25 / sum idf)`` (``lexical_score_idf``);
- ``convex-max``: ``(1 - lam) cos + lam BM25 / max BM25`` (``scrubjay.fusion.fuse`` of
  ``lexical_score``, the one used);
- ``rrf``: ``w / (k + r_lex) + (1 - w) / (k + r_dense)`` (``scrubjay.fusion.weighted_rrf``).

Objective: LoCoMo evidence recall@5 over the training questions, under the constraint that TGT
top-1 factual accuracy on the training seeds is not below BM25's there. It prints the best
setting of each family on all five training conversations and a leave-one-conversation-out
estimate (the setting chosen on four, scored on the fifth). Run from the repository root:

    .venv/bin/python scripts/hybrid_fusion_cv.py --data ../shared/benchmarks [--embedder minilm]
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
from scrubjay.bench import tgt_scoring as ts
from scrubjay.bench.common import get_embedder
from scrubjay.bench.run_locomo import build_conversation, load_locomo
from scrubjay.bench.tgt import TGTConfig, generate, system_view
from scrubjay.fusion import LEXICAL_CANDIDATES, fuse, lexical_score, lexical_score_idf, weighted_rrf
from scrubjay.lexical import LexicalIndex

TRAIN_CONVERSATIONS = 5
TRAIN_SEEDS = (5, 6, 7, 8, 9)


def _query_rows(ids: list[str], texts: list[str], queries: list[str], emb: Any
                ) -> list[dict[str, Any]]:
    vecs = emb.embed(texts)
    ix = LexicalIndex.in_memory(zip(ids, texts, strict=True))
    pos = {m: i for i, m in enumerate(ids)}
    qv = emb.embed(queries, query=True)
    rows = []
    for q, e in zip(queries, qv, strict=True):
        lids, lsc = ix.query(q, LEXICAL_CANDIDATES)
        bm = np.zeros(len(ids))
        rank_l = np.zeros(len(ids), dtype=np.int64)
        for r, (m, s) in enumerate(zip(lids, lsc, strict=True), start=1):
            bm[pos[m]] = s
            rank_l[pos[m]] = r
        rows.append({"cos": np.asarray(vecs @ e, dtype=np.float64), "bm25": bm,
                     "rank_l": rank_l, "idf": ix.idf_sum(q)})
    ix.close()
    return rows


def _dense_rank(cos: np.ndarray) -> np.ndarray:
    order = np.lexsort((np.arange(len(cos)), -cos))
    rank = np.empty(len(cos), dtype=np.int64)
    rank[order] = np.arange(1, len(cos) + 1)
    return rank


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    return np.lexsort((np.arange(len(scores)), -scores))[:k]


def locomo_rows(data: str, emb: Any) -> list[list[dict[str, Any]]]:
    samples = load_locomo(data)[:TRAIN_CONVERSATIONS]
    convs = []
    for s in samples:
        memories, questions, _, _ = build_conversation(s)
        ids = [m.id for m in memories]
        rows = _query_rows(ids, [m.text for m in memories], [q["question"] for q in questions],
                           emb)
        for r, q in zip(rows, questions, strict=True):
            r["evidence"] = np.array([ids.index(e) for e in q["evidence"]])
            r["dense_rank"] = _dense_rank(r["cos"])
        convs.append(rows)
    return convs


def tgt_rows(emb: Any) -> list[tuple[Any, list[str], list[dict[str, Any]]]]:
    out = []
    for seed in TRAIN_SEEDS:
        for inst in generate(TGTConfig(n_instances=20, seed=seed)):
            view = system_view(inst)
            texts = [m.text for m in view.memories]
            rows = _query_rows([m.memory_id for m in view.memories], texts,
                               [q.text for q in view.queries], emb)
            for r in rows:
                r["dense_rank"] = _dense_rank(r["cos"])
            out.append((inst, texts, rows))
    return out


Scorer = Callable[[dict[str, Any]], np.ndarray]


def families() -> dict[str, list[tuple[str, Scorer]]]:
    lams = [round(x, 2) for x in np.arange(0.0, 1.0001, 0.05)]
    fam: dict[str, list[tuple[str, Scorer]]] = {"convex-idf": [], "convex-max": [], "rrf": []}
    for lam in lams:
        fam["convex-idf"].append((f"lam={lam}", lambda r, lam=lam: fuse(
            r["cos"], lexical_score_idf(r["bm25"], r["idf"]), lam)))
        fam["convex-max"].append((f"lam={lam}", lambda r, lam=lam: fuse(
            r["cos"], lexical_score(r["bm25"]), lam)))
    for k, w in itertools.product((5, 10, 20, 30, 60, 100), lams[1:-1]):
        fam["rrf"].append((f"k={k},w={w}", lambda r, k=k, w=w: weighted_rrf(
            r["rank_l"], r["dense_rank"], k=k, lexical_weight=w)))
    return fam


def locomo_recall(convs: list[list[dict[str, Any]]], scorer: Scorer, k: int = 5) -> float:
    tot = n = 0.0
    for rows in convs:
        for r in rows:
            top = set(_top(scorer(r), k).tolist())
            tot += len(top & set(r["evidence"].tolist())) / len(r["evidence"])
            n += 1
    return tot / n


def tgt_factual(tgt: list[tuple[Any, list[str], list[dict[str, Any]]]], scorer: Scorer) -> float:
    results = []
    for inst, texts, rows in tgt:
        for q, r in zip(inst.queries, rows, strict=True):
            results.append(ts.QueryResult(query=q, answer_text=texts[int(_top(scorer(r), 1)[0])],
                                          judged_valid=True))
    return ts.score(results).factual


def _best(labels: list[str], per_conv: dict[str, list[float]], sizes: list[int],
          held: int | None) -> str:
    """The label with the best recall on the training conversations other than ``held``."""
    keep = [i for i in range(len(sizes)) if i != held]

    def obj(label: str) -> float:
        return sum(per_conv[label][i] for i in keep) / sum(sizes[i] for i in keep)
    return max(labels, key=obj)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/benchmarks")
    ap.add_argument("--embedder", default="wordllama")
    args = ap.parse_args()
    emb = get_embedder(args.embedder)
    convs = locomo_rows(args.data, emb)
    tgt = tgt_rows(emb)

    def bm25_only(r: dict[str, Any]) -> np.ndarray:
        return r["bm25"] - 1e-9 * r["dense_rank"]  # BM25, ties by dense

    base_loc = locomo_recall(convs, bm25_only)
    base_tgt = tgt_factual(tgt, bm25_only)
    dense_loc = locomo_recall(convs, lambda r: r["cos"])
    print(f"training split: LoCoMo conversations 1-{TRAIN_CONVERSATIONS} "
          f"({sum(len(c) for c in convs)} questions), TGT seeds {TRAIN_SEEDS}; "
          f"embedder {emb.name}")
    print(f"lexical only: LoCoMo R@5 {base_loc:.4f}, TGT factual {base_tgt:.4f}; "
          f"dense only: LoCoMo R@5 {dense_loc:.4f}")
    print("| family | chosen on all 5 | train R@5 | TGT factual | leave-one-out R@5 |")
    print("|---|---|---|---|---|")
    for name, grid in families().items():
        tgt_ok = {label: tgt_factual(tgt, f) >= base_tgt - 1e-12 for label, f in grid}
        per_conv = {label: [locomo_recall([c], f) * len(c) for c in convs] for label, f in grid}
        sizes = [len(c) for c in convs]

        ok = [lb for lb, _ in grid if tgt_ok[lb]] or [lb for lb, _ in grid]
        chosen = _best(ok, per_conv, sizes, None)
        loo = sum(per_conv[_best(ok, per_conv, sizes, h)][h]
                  for h in range(len(convs))) / sum(sizes)
        f = dict(grid)[chosen]
        print(f"| {name} | {chosen} | {sum(per_conv[chosen]) / sum(sizes):.4f} | "
              f"{tgt_factual(tgt, f):.4f} | {loo:.4f} |")


if __name__ == "__main__":
    main()
