"""Build ``notebooks/03_benchmarks.ipynb`` (without outputs) from the cells below.

Usage: ``python scripts/build_benchmarks_notebook.py``. CI executes the notebook
(``tests/notebooks/test_notebooks.py``); it runs a small TGT in well under a minute.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

OUT = Path(__file__).resolve().parent.parent / "notebooks" / "03_benchmarks.ipynb"

CELLS = [
    new_markdown_cell(
        "# 03 · Benchmarks: the Temporal Generalization Test\n\n"
        "TGT (paper §4.2) gives each system a pool of 96 memories written in one morning and "
        "asks 66 questions at five retention intervals, I1 (same day) to I5 (40-60 days "
        "later; I3 and I5 are held out). A system answers with its top-1 memory and a validity "
        "judgement; *combined* accuracy needs both right. Here: 1 seed x 4 instances and a few "
        "systems, so the numbers are noisy. `scrubjay bench tgt` runs the full 5 x 20 with "
        "95% intervals over seeds (see `docs/benchmarks.md`)."),
    new_code_cell(
        "from scrubjay.bench.run_tgt import run_tgt, tgt_markdown, plot_intervals\n"
        "res = run_tgt(systems=('B3-dense', 'B5-dense-recency', 'SJ-full', 'SJ-no-decay'),\n"
        "              seeds=1, instances=4, embedder='wordllama', jobs=1, progress=False)\n"
        "print(tgt_markdown(res))"),
    new_markdown_cell(
        "Accuracy per interval, like the paper's Figure 2. The dotted grey line is the "
        "always-valid floor: the true answer, always judged valid."),
    new_code_cell(
        "from pathlib import Path\n"
        "from IPython.display import Image, display\n"
        "plot_intervals(res, Path('tgt_intervals.png'))\n"
        "display(Image('tgt_intervals.png'))"),
    new_markdown_cell(
        "What a system sees is `scrubjay.bench.tgt.system_view(instance)`: memory id, text, "
        "context and creation time, query text and time; never the memory's type, its "
        "validity or its true pi and tau."),
]


def main() -> None:
    nb = new_notebook(cells=CELLS, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}})
    OUT.write_text(nbformat.writes(nb))


if __name__ == "__main__":
    main()
