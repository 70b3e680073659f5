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
k = 3                          # attempts per family in the history; attempt k+1 is the probe
family = "task"                # family rule: task (same task) or tools (same kind of task)
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
                 k=k, mode=mode, seed=seed, n_boot=n_boot, live=live, step_limit=step_limit,
                 family=family)
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

Left: goal similarity of sessions of the same family against different families (what
clustering compares). Right: each probe's goal against the best synthesized procedure of its
own family and of another family (what recall compares: the distilled when_to_use, not a
goal). A good tau lies above most of each plot's lower mass and below most of its upper mass;
when the two plots disagree, one tau cannot serve both clustering and recall."""),
    ("code", """for png in report.plot_similarity(run, plots):
    display(Image(filename=str(png)))
report.similarity_table(run)"""),
    ("markdown", "## Format validity and floors"),
    ("code", """report.validity_table(run)"""),
    ("markdown", "## Against the committed baseline"),
    ("code", """import pandas as pd

if baseline:
    table = report.baseline_table(run, baseline)
    print(f"{int((~table['ok']).sum()) if len(table) else 0} of {len(table)} baseline "
          f"check(s) failed ({baseline})")
    with pd.option_context("display.max_rows", 1000):
        display(table)
else:
    print("no baseline given")"""),
]

WALKTHROUGH = [
    ("markdown", """# skillsynth walkthrough: from an empty folder to a recalled skill

One stage per section, each one or two library calls and a look at the result. It runs on
the shipped synthetic corpus (`datasets/synthetic-8`: 8 task families, 5 attempts each, with
ground truth) and the embedded models; set `backend` to
`{"backend": "lemonade"}` for Gemma-4 on Lemonade. Run it top to bottom (papermill does in CI)."""),
    ("parameters", """# Parameters (papermill overrides these)
workdir = "eval/results/walkthrough"   # everything this notebook writes goes here (rebuilt)
backend = {"backend": "local"}         # skillsynth.backend.BackendSpec fields
similarity_tau = 0.3                   # MiniLM's scale; GAIA's 0.82 is for its 768-d embedder
min_occurrences = 2
mode = "json"                          # distillation mode: json suits small models
"""),
    ("markdown", "## 0. Models and a fresh folder"),
    ("code", """import contextlib
import shutil
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from skillsynth.backend import BackendSpec, open_clients
from skillsynth.config import Thresholds
from skillsynth.serve import models_home

work = Path(workdir)
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)
stack = contextlib.ExitStack()  # the model servers live until the last cell
llm, embedder = stack.enter_context(open_clients(BackendSpec(
    **({"cache": str(models_home() / "cache.db")} | backend))))
config = Thresholds(similarity_tau=similarity_tau, min_occurrences=min_occurrences)
config"""),
    ("markdown", """## 1. A corpus

A corpus is a GAIA `memory.db` plus a labels file only scoring reads. This rebuilds the
shipped synthetic corpus exactly (its manifest lists the expected statistics); real
trajectories come in with `import_corpus("taubench", ...)` and friends."""),
    ("code", """from skillsynth.corpora import corpus_stats, generate_corpus

gen = generate_corpus(work / "corpus.db", families=8, seed=0, attempts=5)
pd.Series(corpus_stats(gen.db_path).as_dict()).to_frame("synthetic-8")"""),
    ("markdown", """## 2. The 4th-attempt split

Attempts 1-3 of every task go into a fresh history store; attempt 4 is the probe, never
written to a store."""),
    ("code", """from skillsynth.evaluation import build_history, load_split

split = load_split(gen.db_path, k=3)
n = build_history(gen.db_path, split, work / "history.db")
pd.Series({"history sessions": n, "probes": len(split.probes),
           "left out (after the probe)": len(split.left_out)})"""),
    ("markdown", """## 3. Detect

Each session's goal (its first user turn) and its successful span (failed calls and retries
dropped); sessions need `min_steps` successful calls."""),
    ("code", """from skillsynth.detect import extract_sequences
from skillsynth.store import MemoryStore

store = stack.enter_context(MemoryStore.open(work / "history.db"))
detected = extract_sequences(store, config, advance=False)
pd.DataFrame([{"session": s.session_id, "goal": s.goal, "calls": s.attempted_calls,
               "span": " > ".join(c.tool_name for c in s.span)} for s in detected.sequences])"""),
    ("markdown", "## 4. Cluster by goal meaning (average linkage at tau)"),
    ("code", """from skillsynth.cluster import cluster_by_goal

clusters = cluster_by_goal(detected.qualified, embedder, config)
pd.DataFrame([{"size": c.size, "qualified": c.qualified, "success_rate": c.success_rate,
               "reason": c.reason, "goals": " | ".join(c.goals)} for c in clusters])"""),
    ("markdown", """## 5. Distil one cluster

One model call; the prompt shows the representative run's tool names and the other phrasings
(no arguments or results). The answer becomes a `Skill`, rendered as SKILL.md."""),
    ("code", """from skillsynth.distill import build_messages, distill

first = next(c for c in clusters if c.qualified)
print(build_messages(first, mode)[-1]["content"])
d = distill(first, llm, config, mode)
print(f"\\n--- model answer (cached: {d.cached}) ---\\n{d.raw}")"""),
    ("code", """display(Markdown("```markdown\\n" + d.skill.render("agentskills") + "\\n```")
        if d.skill else "the model answered SKIP")"""),
    ("markdown", """## 6. The synthesis pass: detect, cluster, distil, reconcile

What GAIA's maintenance pass does, with #887's floors (LLM down: the pass is skipped and
the store unchanged; a malformed answer skips its cluster)."""),
    ("code", """from skillsynth.embed import check_store_embedder
from skillsynth.synthesize import synthesize_skills

check_store_embedder(store, embedder)
report = synthesize_skills(store, llm, embedder, config, mode=mode)
pd.Series({k: v for k, v in report.as_dict().items() if k != "details"})"""),
    ("code", """pd.DataFrame([{"id": p.id, "name": p.name, "when_to_use": p.when_to_use,
               "tools": ", ".join(p.tools_required), "successes": p.success_count,
               "from_sessions": len(p.provenance.get("from_sessions", []))}
              for p in store.procedures()])"""),
    ("markdown", """## 7. Recall for a probe, and the injected block

A probe's goal is recalled for only now. Recall returns procedures at cosine >= tau; the
planner prompt gets the `RECALLED PROCEDURES` block (bodies cut at `max_recall_body_chars`)
and the skills' tools load first."""),
    ("code", """from skillsynth.inject import inject, tools_for_turn
from skillsynth.recall import recall, skill_from_procedure

goals = MemoryStore.open(gen.db_path, read_only=True).first_user_turns(
    [p.session_id for p in split.probes])
rows = []
for p in split.probes:
    hits = recall(store, embedder, goals[p.session_id].content, config, touch=False)
    rows.append({"family": p.task_id, "goal": goals[p.session_id].content,
                 "recalled": ", ".join(h.procedure.name for h in hits) or "-",
                 "score": round(hits[0].score, 3) if hits else None})
pd.DataFrame(rows)"""),
    ("code", """probe = next((r for r in rows if r["recalled"] != "-"), rows[0])
skills = [skill_from_procedure(h.procedure)
          for h in recall(store, embedder, probe["goal"], config, touch=False)]
print(inject(skills, config) or "(nothing recalled for this goal: no block)")
print("tools loaded:", tools_for_turn(["query_documents"], skills, ["search_file", "read_file"]))"""),
    ("markdown", """## 8. Export and re-read under both profiles

GAIA's #691 profile and agentskills.io's (re-read with the reference parser, skills-ref)."""),
    ("code", """from skillsynth.export import export_skill
from skillsynth.skill import validate_dir

for proc in store.procedures()[:1]:
    for profile in ("gaia691", "agentskills"):
        skill_dir = export_skill(store, proc.id, work / "skills" / profile, profile)
        print(f"{profile}: {skill_dir} errors={validate_dir(skill_dir, profile)}")
        print((skill_dir / "SKILL.md").read_text())"""),
    ("markdown", """## 9. Measure: one evaluation point

The whole protocol in one call: per-probe rows and KPIs with n and 95% bootstrap intervals
(tool steps are a replay **estimate**; see METHODS.md). A sweep runs many of these."""),
    ("code", """from skillsynth.evaluation import EvalConfig, run_point

result = run_point(EvalConfig(str(gen.db_path), thresholds=config, mode=mode), llm, embedder,
                   work / "point")
pd.DataFrame([k.as_dict() for k in result.kpis.values()]).set_index("name")"""),
    ("code", """stack.close()  # stop the model servers"""),
]

TUNING = [
    ("markdown", """# Threshold tuning

Move `similarity_tau`, `min_occurrences`, `min_success_rate`, `max_recall_body_chars`, the
cluster method, top_k and the corpus (a labelled corpus, or your own GAIA `memory.db`,
opened read-only), and watch: the goal-pair similarity histograms with the
tau line and pairwise precision/recall, the clusters that qualify, what each probe would
recall and whether it is right, and the injected prompt size. Goals are embedded once per
corpus; distillations come only from the call cache ("Distil missing" is the one button that
calls the LLM). "Write settings" saves the thresholds as GAIA's `memory_settings.json` block.
Without widgets (papermill) the notebook renders the parameter values once."""),
    ("parameters", """# Parameters (papermill overrides these)
# corpus memory.db files (labels beside them; a GAIA memory.db without labels is read-only
# and shows clusters but no probes); an empty list builds synthetic-8
corpora = []
workdir = "eval/results/tuning"  # where the default corpus and the settings file go
backend = {"backend": "local"}   # skillsynth.backend.BackendSpec fields
similarity_tau = 0.3
min_occurrences = 2
min_success_rate = 0.8
max_recall_body_chars = 1500
recall_top_k = 2
method = "agglomerative"         # agglomerative | gaia-greedy | hdbscan
mode = "json"                    # distillation mode
k = 3                            # history attempts per task; attempt k+1 is the probe
distill_first = True             # fill the cache for the starting thresholds (LLM calls)
# write the starting thresholds as memory_settings.json here; empty: do not
settings_out = ""
interactive = True               # show widgets when ipywidgets is available
# widget values to set once the widgets are shown, as if moved by hand (the view below
# them updates), e.g. {"similarity_tau": 0.5}; used by the tests
move = {}
"""),
    ("code", """import contextlib
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Pretty, display

from skillsynth.backend import BackendSpec, open_clients
from skillsynth.config import Thresholds
from skillsynth.corpora import generate_corpus
from skillsynth.errors import SkillsynthError
from skillsynth.serve import models_home
from skillsynth.tuning import TuningSession, plot_pairs, write_settings_block

work = Path(workdir)
work.mkdir(parents=True, exist_ok=True)
if not corpora:
    default = work / "synthetic-8.db"
    if not default.exists():
        generate_corpus(default, families=8, seed=0, attempts=5)
    corpora = [str(default)]
stack = contextlib.ExitStack()  # the model servers stay up while you tune
llm, embedder = stack.enter_context(open_clients(BackendSpec(
    **({"cache": str(models_home() / "cache.db")} | backend))))
sessions = {}


def session_for(corpus):
    if corpus not in sessions:  # embeds this corpus's goals once
        sessions[corpus] = TuningSession.prepare(corpus, embedder, k=k)
    return sessions[corpus]


start = Thresholds(similarity_tau=similarity_tau, min_occurrences=min_occurrences,
                   min_success_rate=min_success_rate,
                   max_recall_body_chars=max_recall_body_chars, recall_top_k=recall_top_k)
if distill_first:
    print("distilled now:", session_for(corpora[0]).distill_missing(start, llm, method, mode))"""),
    ("code", """def view_parts(corpus, config, method):
    \"\"\"The view at these settings and its parts in display order: headline numbers,
    the similarity histograms, qualified clusters, per-probe recalls, the injected block.\"\"\"
    ts = session_for(corpus)
    view = ts.view(config, method, llm=llm, mode=mode)
    fig, ax = plt.subplots(figsize=(7, 3))
    plot_pairs(ts.pairs, config.similarity_tau, ax=ax)
    plt.close(fig)  # shown through display(), not a second time at the end of the cell
    text = (f"largest injected block: {view.prompt.chars} characters, about "
            f"{view.prompt.tokens_estimate} tokens (estimate: characters / 4), "
            f"{view.prompt.truncated} body(ies) cut\\n\\n"
            + (view.prompt.block or "(nothing recalled at these thresholds)"))
    return view, [view.summary(), fig, view.clusters_frame(ts.families),
                  view.recalls_frame(), Pretty(text)]


view, parts = view_parts(corpora[0], start, method)
for part in parts:
    display(part)
if settings_out:
    print("settings written:", write_settings_block(start, settings_out))"""),
    ("code", """try:
    import ipywidgets as w
except ImportError:
    w = None
if interactive and w is not None:
    c = {"continuous_update": False}
    ui = {"corpus": w.Dropdown(options=corpora, value=corpora[0], description="corpus"),
          "method": w.Dropdown(options=["agglomerative", "gaia-greedy", "hdbscan"],
                               value=method, description="method"),
          "similarity_tau": w.FloatSlider(value=similarity_tau, min=0.0, max=1.0, step=0.01,
                                          description="tau", **c),
          "min_occurrences": w.IntSlider(value=min_occurrences, min=1, max=10,
                                         description="min occ.", **c),
          "min_success_rate": w.FloatSlider(value=min_success_rate, min=0.0, max=1.0,
                                            step=0.05, description="min rate", **c),
          "max_recall_body_chars": w.IntSlider(value=max_recall_body_chars, min=100,
                                               max=5000, step=100, description="body chars",
                                               **c),
          "recall_top_k": w.IntSlider(value=recall_top_k, min=1, max=5, description="top k",
                                      **c)}
    path = w.Text(value=str(work / "memory_settings.json"), description="settings")
    overwrite = w.Checkbox(value=False, description="overwrite")
    save, more = w.Button(description="Write settings"), w.Button(
        description="Distil missing (LLM)")
    status = w.Label()

    def current():
        keys = [k for k in ui if k not in ("corpus", "method")]
        return Thresholds().merge({k: ui[k].value for k in keys})

    slots = []  # one display per part, updated in place (no Output widget to capture into)

    def refresh(_=None):
        _, new_parts = view_parts(ui["corpus"].value, current(), ui["method"].value)
        if not slots:
            slots.extend(display(part, display_id=True) for part in new_parts)
            return
        for slot, part in zip(slots, new_parts):
            slot.update(part)

    def on_save(_):
        try:
            status.value = f"written: {write_settings_block(current(), path.value, overwrite=overwrite.value)}"
        except SkillsynthError as exc:  # shown to the user, not raised inside the widget
            status.value = f"not written: {exc}"

    def on_more(_):
        n = session_for(ui["corpus"].value).distill_missing(current(), llm,
                                                            ui["method"].value, mode)
        status.value = f"distilled {n} cluster(s)"
        refresh()

    for x in ui.values():
        x.observe(refresh, names="value")
    save.on_click(on_save)
    more.on_click(on_more)
    display(w.VBox([w.HBox([ui["corpus"], ui["method"]]),
                    w.HBox([ui["similarity_tau"], ui["min_occurrences"]]),
                    w.HBox([ui["min_success_rate"], ui["max_recall_body_chars"]]),
                    w.HBox([ui["recall_top_k"], more]), w.HBox([path, overwrite, save]),
                    status]))
    refresh()
    for key, value in move.items():
        ui[key].value = value
else:
    print("no widgets here (papermill or ipywidgets missing): the view above is for the "
          "parameter values")"""),
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
    for name, cells in (("sweep_point.ipynb", SWEEP_POINT), ("report.ipynb", REPORT),
                        ("walkthrough.ipynb", WALKTHROUGH), ("tuning.ipynb", TUNING)):
        nbformat.write(build(cells), ROOT / name)
        print(f"wrote {ROOT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
