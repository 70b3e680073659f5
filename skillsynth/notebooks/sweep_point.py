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
strategy = "skillsynth"        # skillsynth | gaia-greedy | cortexprism | pheron | none
thresholds = {"similarity_tau": 0.8, "min_occurrences": 3, "max_recall_body_chars": 1500}
k = 3                          # attempts per family in the history; attempt k+1 is the probe
family = "task"                # family rule: task (same task) or tools (same kind of task)
mode = "json"                  # distillation mode: json (small models) or yaml (GAIA's)
seed = 0                       # bootstrap seed
n_boot = 2000                  # bootstrap resamples per interval
live = False                   # also run the live agent (both arms per probe)
step_limit = 12                # the live agent's most tool calls per arm
world = "replay"               # where live probes run: replay, tau2:airline, tau2:retail
history = "corpus"             # corpus (recorded) or live (the agent's own runs in world)
repeats = 1                    # live runs per arm per probe
temperature = 0.7              # sampling temperature of repeated live runs
policy = True                  # give the live agent the world's policy text
tasks = None                   # only probes of these task ids run live (None: all)
user = None                    # a simulated user's endpoint {base_url, model, backend} (None: solo)
protocol = "strict"            # strict (one pass, attempt k+1 the probe) or rolling (passes over time)
recall_key = "when_to_use"     # recall by: when_to_use (GAIA), goals (member goals) or both
rate = "calls"                 # cluster success signal: calls (GAIA) or session (outcomes)
cadence = 20                   # rolling: a synthesis pass every `cadence` sessions or days
cadence_unit = "sessions"      # rolling: sessions or days
backend = {"backend": "local"} # skillsynth.models.backend.BackendSpec fields
out_dir = "eval/results/example/points/manual"


# %% tags=["imports"]
import pandas as pd

from skillsynth.config import Thresholds
from skillsynth.evaluation import EvalConfig, run_point
from skillsynth.models.backend import BackendSpec, open_clients, open_user

# %% tags=["run"]
cfg = EvalConfig(corpus, strategy=strategy, thresholds=Thresholds().merge(thresholds),
                 k=k, mode=mode, seed=seed, n_boot=n_boot, live=live, step_limit=step_limit,
                 family=family, world=world, history=history, repeats=repeats,
                 temperature=temperature, policy=policy,
                 tasks=None if tasks is None else tuple(tasks), protocol=protocol,
                 recall_key=recall_key, rate=rate, cadence=cadence, cadence_unit=cadence_unit)
u = user or {}
with open_clients(BackendSpec(**backend)) as (llm, embedder), \
        open_user(u.get("base_url"), u.get("model"), backend=u.get("backend", "lemonade"),
                  cache=backend.get("cache")) as user_llm:
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
