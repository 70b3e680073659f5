"""Write the shipped notebooks from their cell sources (run after editing a cell here).

The notebooks stay thin: a ``parameters`` cell of literal defaults (papermill overrides
them), then calls into the skillsynth library. Keeping their source here keeps diffs
readable and outputs out of version control.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1] / "notebooks"

SWEEP_POINT = [
    ("markdown", """# One sweep point

Runs the 4th-attempt protocol once: the history (attempts 1..k of every task) goes into a
fresh store, the strategy synthesizes procedures from it, each probe (attempt k+1) is
recalled for, and tool steps are scored with the replay rule (an **estimate**; see
`METHODS.md`) and, with `live`, measured by the live agent in both arms. `skillsynth sweep` executes this notebook once per grid point."""),
    ("parameters", """# Parameters (papermill overrides these)
corpus = "eval/results/example/corpus/corpus.db"   # a corpus memory.db with its labels file
strategy = "skillsynth"        # skillsynth | gaia-greedy | cortexprism | pheron | none
thresholds = {"similarity_tau": 0.8, "min_occurrences": 3, "max_recall_body_chars": 1500}
k = 3                          # attempts per task in the history; attempt k+1 is the probe
mode = "json"                  # distillation mode: json (small models) or yaml (GAIA's)
seed = 0                       # bootstrap seed
n_boot = 2000                  # bootstrap resamples per interval
live = False                   # also run the live agent (both arms per probe)
step_limit = 12                # the live agent's most tool calls per arm
backend = {"backend": "local"} # skillsynth.backend.BackendSpec fields
out_dir = "eval/results/example/points/manual"
"""),
    ("code", """import pandas as pd

from skillsynth.backend import BackendSpec, open_clients
from skillsynth.config import Thresholds
from skillsynth.evaluation import EvalConfig, run_point

cfg = EvalConfig(corpus, strategy=strategy, thresholds=Thresholds().merge(thresholds),
                 k=k, mode=mode, seed=seed, n_boot=n_boot, live=live, step_limit=step_limit)
with open_clients(BackendSpec(**backend)) as (llm, embedder):
    result = run_point(cfg, llm, embedder, out_dir)
result.summary["split"]"""),
    ("code", """pd.DataFrame([k.as_dict() for k in result.kpis.values()]).set_index("name")"""),
    ("code", """pd.Series(result.summary["floors"], name="behaved (None: not exercised)")"""),
    ("code", """rows = pd.DataFrame([r.as_dict() for r in result.rows])
rows[rows.arm == "memory"][["family", "recalled_right", "steps_recorded", "steps",
                            "steps_method", "prompt_chars"]]"""),
]

REPORT = [
    ("markdown", """# KPI report

The KPIs of one sweep run: per point, with n and 95% bootstrap intervals (resampled by
task family). Tool-step figures come from the replay rule and are **estimates**
(`METHODS.md`). `skillsynth report RUN` executes this notebook and renders it to HTML."""),
    ("parameters", """# Parameters (papermill overrides these)
run_dir = "eval/results/example"    # a sweep's results folder
baseline = ""                       # an eval/baselines/*.json file to compare with ("": none)
plots_dir = ""                      # where PNGs go (default <run_dir>/plots)
"""),
    ("code", """from pathlib import Path

from IPython.display import Image, Markdown, display

from skillsynth.evaluation import report

run = report.load_run(run_dir)
plots = Path(plots_dir or Path(run_dir) / "plots")
display(Markdown(report.describe_run(run)))"""),
    ("markdown", "## KPIs per point"),
    ("code", """report.kpi_table(run)"""),
    ("markdown", "## Peer strategies (same split, same models, same replay rule)"),
    ("code", """report.peer_table(run)"""),
    ("markdown", "## Heatmaps over tau x min_occurrences"),
    ("code", """pngs = report.plot_heatmaps(run, plots)
for png in pngs:
    display(Image(filename=str(png)))
if not pngs:
    print("no heatmap: no strategy was run at two or more values of tau or min_occurrences")"""),
    ("markdown", "## max_recall_body_chars against prompt size and step reduction"),
    ("code", """pngs = report.plot_body_chars(run, plots)
for png in pngs:
    display(Image(filename=str(png)))
if not pngs:
    print("no chart: max_recall_body_chars took one value in this run")"""),
    ("markdown", """## Where tau should sit for this embedder

Goal similarity of sessions of the same task family against different families. A good tau
lies above most of the different-family mass and below most of the same-family mass."""),
    ("code", """for png in report.plot_similarity(run, plots):
    display(Image(filename=str(png)))
report.similarity_table(run)"""),
    ("markdown", "## Format validity and floors"),
    ("code", """report.validity_table(run)"""),
    ("markdown", "## Against the committed baseline"),
    ("code", """report.baseline_table(run, baseline) if baseline else "no baseline given\""""),
]


def build(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    for kind, src in cells:
        if kind == "markdown":
            nb.cells.append(nbformat.v4.new_markdown_cell(src))
        else:
            cell = nbformat.v4.new_code_cell(src)
            if kind == "parameters":
                cell.metadata["tags"] = ["parameters"]
            nb.cells.append(cell)
    for i, cell in enumerate(nb.cells):  # stable ids keep regenerated files diff-free
        cell["id"] = f"cell-{i:02d}"
    return nb


def main() -> int:
    for name, cells in (("sweep_point.ipynb", SWEEP_POINT), ("report.ipynb", REPORT)):
        nbformat.write(build(cells), ROOT / name)
        print(f"wrote {ROOT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
