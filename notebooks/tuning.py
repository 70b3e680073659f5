# ---
# jupyter:
#   jupytext:
#     notebook_metadata_filter: kernelspec,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Threshold tuning
#
# Move `similarity_tau`, `min_occurrences`, `min_success_rate`, `max_recall_body_chars`, the
# cluster method, top_k and the corpus (a labelled corpus, or your own GAIA `memory.db`,
# opened read-only), and watch: the goal-pair similarity histograms with the
# tau line and pairwise precision/recall, the clusters that qualify, what each probe would
# recall and whether it is right, and the injected prompt size. Goals are embedded once per
# corpus; distillations come only from the call cache ("Distil missing" is the one button that
# calls the LLM). "Write settings" saves the thresholds as GAIA's `memory_settings.json` block.
# Without widgets (papermill) the notebook renders the parameter values once.

# %% tags=["parameters"]
# Parameters (papermill overrides these)
# corpus memory.db files (labels beside them; a GAIA memory.db without labels is read-only
# and shows clusters but no probes); an empty list builds synthetic-8
corpora = []
workdir = "eval/results/tuning"  # where the default corpus and the settings file go
backend = {"backend": "local"}   # skillsynth.models.backend.BackendSpec fields
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

# %%
import contextlib
from pathlib import Path

from skillsynth.config import Thresholds
from skillsynth.corpora import generate_corpus
from skillsynth.evaluation.tuning.app import TuningApp
from skillsynth.evaluation.tuning.session import write_settings_block
from skillsynth.models.backend import BackendSpec, open_clients
from skillsynth.models.serve import default_cache_path

work = Path(workdir)
work.mkdir(parents=True, exist_ok=True)
if not corpora:
    default = work / "synthetic-8.db"
    if not default.exists():
        generate_corpus(default, families=8, seed=0, attempts=5)
    corpora = [str(default)]
stack = contextlib.ExitStack()  # the model servers stay up while you tune
llm, embedder = stack.enter_context(open_clients(BackendSpec(
    **({"cache": str(default_cache_path())} | backend))))
app = TuningApp(corpora, llm, embedder, k=k, mode=mode)  # goals embedded once per corpus
start = Thresholds(similarity_tau=similarity_tau, min_occurrences=min_occurrences,
                   min_success_rate=min_success_rate,
                   max_recall_body_chars=max_recall_body_chars, recall_top_k=recall_top_k)
if distill_first:
    print("distilled now:", app.session(corpora[0]).distill_missing(start, llm, method, mode))

# %% [markdown]
# The view at the parameters' values: headline numbers, the goal-pair histograms with the tau
# line, the qualifying clusters, each probe's recall, and the largest injected block.

# %%
view = app.render(corpora[0], start, method)
if settings_out:
    print("settings written:", write_settings_block(start, settings_out))

# %% [markdown]
# The same view under widgets: every move re-renders it in place.

# %%
try:
    import ipywidgets
except ImportError:
    ipywidgets = None
if interactive and ipywidgets is not None:
    app.show(start, method, work / "memory_settings.json")
else:
    print("no widgets here (papermill or ipywidgets missing): the view above is for the "
          "parameter values")
