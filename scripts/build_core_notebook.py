"""Build ``notebooks/00_core_concepts.ipynb`` (committed without outputs) from the cells below.

Usage: ``python scripts/build_core_notebook.py``. CI executes the notebook
(``tests/notebooks/test_notebooks.py``), which also checks the printed score arithmetic.
"""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

OUT = Path(__file__).resolve().parent.parent / "notebooks" / "00_core_concepts.ipynb"

INTRO = """\
# scrubjay core concepts

Every memory carries a **perishability** `pi` and a **utility horizon** `tau`; its utility decays as
`U = V * exp(-pi * age / tau)` (paper §3.2), and a memory is **stale** once `U / V < 0.5`. This
notebook runs offline on the embedded defaults: an in-memory Chroma, the bundled `wordllama`
embedder and, without an LLM, the trained offline estimator of perishability."""

IMPORTS = """\
import math

import matplotlib.pyplot as plt
import numpy as np
from scrubjay import ScrubJayMemory
from scrubjay.config import ClassifierConfig
from scrubjay.decay import utility
from scrubjay.perishability import keyword_classify
from scrubjay.testing import FrozenClock"""

DECAY_MD = """\
## 1. Decay curves: the default estimator and the paper's keyword rule
Solid lines: the lifetime `ScrubJayMemory.add` gives each statement by default (no LLM: the
trained estimator, `ClassifierConfig(offline="estimator")`). Dashed lines: the paper's keyword
fallback (`offline="keyword"`) for the same statement. The grey line is the stale threshold."""

DECAY = """\
examples = ["I am at the gym right now", "Ticket 12 needs a review",
            "How to renew the passport: book online", "My brother lives in Quito"]
default = ScrubJayMemory(clock=FrozenClock(1_764_000_000))   # what `add` does by default
ages_h = np.logspace(-1, 5, 300)
fig, ax = plt.subplots(figsize=(7, 4))
for colour, text in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], examples):
    rec = default.add(text)
    assert rec.source == "estimator"
    kw = keyword_classify(text, "", None, ClassifierConfig())
    print(f"{text!r}: estimator {rec.label} pi={rec.pi:.2f} tau={rec.tau_s / 3600:.3g} h | "
          f"keyword rule {kw.label} pi={kw.pi:.2f} tau={kw.tau_s / 3600:.3g} h")
    ax.plot(ages_h, utility(1.0, rec.pi, rec.tau_s, 0.0, ages_h * 3600), c=colour,
            label=f"{text[:28]}: estimator ({rec.label})")
    ax.plot(ages_h, utility(1.0, kw.pi, kw.tau_s, 0.0, ages_h * 3600), c=colour, ls="--",
            label=f"keyword rule ({kw.label})")
ax.axhline(0.5, c="gray", lw=0.8)
ax.set_xscale("log"); ax.set_xlabel("age (hours)"); ax.set_ylabel("U / V")
ax.legend(fontsize=7); ax.set_title("Utility decay: default estimator (solid) vs keyword rule (dashed)")
plt.show()
default.close()"""

SCORE_MD = """\
## 2. A score, explained
With the default `SearchConfig(ranking="relevance")` a hit's `score`, the key it was ranked by, is
its relevance times its value against the default value:
`score = ((1 - lam)*dense + lam*lexical) * V / V0 * time`. `dense = (a*what + b*where) / (a + b)`
mixes the what and where similarities by the query-adaptive weights `a`, `b` of Eq. 6;
`lexical` (`hit.lexical`) is the share of the query's words the memory matches by BM25 and
`lam` (`hit.lexical_weight`) its weight, 0 when no memory shares a word with the query
(docs/hybrid.md); `time` (`hit.time_factor`, at most 1)
puts the newer of two comparable memories first and a stale one below a current one
(docs/ranking.md); `stale` and `stale_reason` say why a memory is outdated.
The paper's additive Eq. 5 score, `a*what + b*where + g*U + d*graph`, is kept as
`hit.paper_score` (and is the ranking key with `ranking="paper"`)."""

SCORE = """\
def explain(mem, hit):
    \"\"\"The ranking key recomputed from the hit's own fields, printed as a sum that adds up.\"\"\"
    a, b, g, d = hit.weights
    v, v0 = hit.record.value, mem.config.decay.default_value
    dense = (a * hit.what + b * hit.where) / (a + b)
    lam = hit.lexical_weight   # the lexical channel's share (0 when the query had no lexical hit)
    key = ((1 - lam) * dense + lam * hit.lexical) * v / v0 * hit.time_factor
    assert math.isclose(key, hit.score, rel_tol=1e-6, abs_tol=1e-9), (key, hit.score)
    paper = a * hit.what + b * hit.where + g * hit.when + d * hit.graph
    assert math.isclose(paper, hit.paper_score, rel_tol=1e-6, abs_tol=1e-9)
    print(f"score {hit.score:.4f} = ({1 - lam:.2f}*dense {dense:.4f} + {lam:.2f}*lexical "
          f"{hit.lexical:.4f}) * V {v:.4f} / V0 {v0:.4f} * time {hit.time_factor:.4f}"
          f"  stale={hit.stale} | {hit.text}")
    print(f"    dense {dense:.4f} = ({a:.4f}*what {hit.what:.4f} + {b:.4f}*where "
          f"{hit.where:.4f}) / {a + b:.4f}")
    print(f"    paper_score {hit.paper_score:.3f} = ... + {g:.2f}*U {hit.when:.2f}"
          f" + {d:.2f}*graph {hit.graph:.2f}")


clock = FrozenClock(1_764_000_000)
mem = ScrubJayMemory(clock=clock)   # in-memory Chroma, bundled embedder, offline estimator
mem.add("The user is parked on level 3 of the mall garage right now", context="shopping trip")
mem.add("The user's car is a blue hatchback", context="getting to know the user")
mem.add("The user's office is on floor 2 of building A", context="onboarding")
clock.advance(hours=3)
for h in mem.search("Where is the user's car?", context="shopping trip", k=3):
    explain(mem, h)"""

RCI_MD = """\
## 3. Retroactive Contextual Integration (RCI)
New information updates every related memory with one set of deltas: one LLM call per event, or
the offline parser here. A memory whose value RCI lowered sinks: the `V / V0` factor of its score."""

RCI = """\
before = {r.id: r for r in mem}
report = mem.integrate("The office moved out of building A to building C", context="onboarding")
print("deltas:", report.deltas, "| used LLM:", report.used_llm, "| LLM calls:", report.llm_calls)
for mid, alpha in report.affected:
    old, new = before[mid], mem.get(mid)
    print(f"alpha={alpha:.2f}  V {old.value:.2f}->{new.value:.2f}  pi {old.pi:.2f}->{new.pi:.2f}  "
          f"tau {old.tau_s/86400:.1f}d->{new.tau_s/86400:.1f}d  | {new.text}")
assert report.llm_calls == 0 and report.affected"""

AFTER = """\
for h in mem.search("Which building is the office in?", context="onboarding", k=2):
    explain(mem, h)"""

CELLS = [nbf.v4.new_markdown_cell(INTRO), nbf.v4.new_code_cell(IMPORTS),
         nbf.v4.new_markdown_cell(DECAY_MD), nbf.v4.new_code_cell(DECAY),
         nbf.v4.new_markdown_cell(SCORE_MD), nbf.v4.new_code_cell(SCORE),
         nbf.v4.new_markdown_cell(RCI_MD), nbf.v4.new_code_cell(RCI),
         nbf.v4.new_code_cell(AFTER)]

if __name__ == "__main__":
    nb = nbf.v4.new_notebook(cells=CELLS, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}})
    nbf.write(nb, OUT)
    print(OUT)
