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
# # One sweep point
#
# Runs the 4th-attempt protocol once. Strict: the history (attempts 1..k of every task) goes
# into a fresh store, the strategy synthesizes procedures from it, each probe (attempt k+1)
# is recalled for. Rolling: sessions are replayed in time order, a pass runs every `cadence`
# sessions, and every attempt after the k-th is a probe before it joins the history. Tool
# steps are scored with the replay rule (an **estimate**; see
# `METHODS.md`) and, with `live`, measured by the live agent in both arms. `skillsynth sweep` executes this notebook once per grid point.

# %% tags=["parameters"]
# Parameters (papermill overrides these)
corpus = "eval/results/example/corpus/corpus.db"   # a corpus memory.db with its labels file
thresholds = {"similarity_tau": 0.8, "min_occurrences": 3, "max_recall_body_chars": 1500}
options = {}                   # the point's options (PointOptions; a missing key takes its default)
user = None                    # a simulated user: {base_url, model, backend}, "agent" (the agent's model), None (solo)
backend = {"backend": "local"} # skillsynth.models.backend.BackendSpec fields
out_dir = "eval/results/example/points/manual"


# %% tags=["imports"]
import pandas as pd

from skillsynth.config import Thresholds
from skillsynth.evaluation import EvalConfig, PointOptions, run_point
from skillsynth.models.backend import BackendSpec, open_clients, point_user

# %% [markdown]
# Every option, its value here and what it does (declared once, in `PointOptions`):

# %%
opts = PointOptions.from_mapping(options, source="the notebook's options parameter")
pd.DataFrame([{"option": n, "value": getattr(opts, n), "what it does": PointOptions.doc(n)}
              for n in PointOptions.names()]).set_index("option")

# %% tags=["run"]
cfg = EvalConfig(corpus, thresholds=Thresholds().merge(thresholds), **opts.to_json())
with open_clients(BackendSpec(**backend)) as (llm, embedder), \
        point_user(user, llm, cache=backend.get("cache")) as user_llm:
    result = run_point(cfg, llm, embedder, out_dir, user=user_llm)
result.summary["split"]

# %%
pd.DataFrame([k.as_dict() for k in result.kpis.values()]).set_index("name")

# %%
pd.Series(result.summary["floors"], name="behaved (None: not exercised)")

# %%
rows = pd.DataFrame([r.as_dict() for r in result.rows])
rows[rows.arm == "memory"][["family", "recalled_right", "steps_recorded", "steps",
                            "steps_method", "prompt_chars"]]
