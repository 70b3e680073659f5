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
# # skillsynth walkthrough: from an empty folder to a recalled skill
#
# One stage per section, each one or two library calls and a look at the result. It runs on
# the shipped synthetic corpus (`datasets/synthetic-8`: 8 task families, 5 attempts each, with
# ground truth) and the embedded models; set `backend` to
# `{"backend": "lemonade"}` for Gemma-4 on Lemonade. Run it top to bottom (papermill does in CI).

# %% tags=["parameters"]
# Parameters (papermill overrides these)
workdir = "eval/results/walkthrough"   # everything this notebook writes goes here (rebuilt)
backend = {"backend": "local"}         # skillsynth.models.backend.BackendSpec fields
# None: the embedder's calibration (MiniLM: similarity 0.31, recall 0.24, reconcile 0.74);
# GAIA's 0.82 was set for its 768-d embedder and clusters almost nothing on MiniLM
similarity_tau = None
min_occurrences = 2
mode = "json"                          # distillation mode: json suits small models


# %% [markdown]
# ## 0. Models and a fresh folder

# %%
import contextlib
import shutil
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from skillsynth.config import gaia_memory_disabled, load_thresholds
from skillsynth.models.backend import BackendSpec, open_clients
from skillsynth.models.serve import default_cache_path

work = Path(workdir)
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)
stack = contextlib.ExitStack()  # the model servers live until the last cell
llm, embedder = stack.enter_context(open_clients(BackendSpec(
    **({"cache": str(default_cache_path())} | backend))))
# the thresholds of this run: GAIA's defaults, the embedder's calibrated taus, our values
config = load_thresholds(env={}, embedder=embedder.embedder_id, calibrated=True, overrides={
    "similarity_tau": similarity_tau, "min_occurrences": min_occurrences})
config

# %% [markdown]
# ## 1. A corpus
#
# A corpus is a GAIA `memory.db` plus a labels file only scoring reads. This rebuilds the
# shipped synthetic corpus exactly (its manifest lists the expected statistics); real
# trajectories come in with `import_corpus("taubench", ...)` and friends.

# %%
from skillsynth.corpora import corpus_stats, generate_corpus

gen = generate_corpus(work / "corpus.db", families=8, seed=0, attempts=5)
pd.Series(corpus_stats(gen.db_path).as_dict()).to_frame("synthetic-8")

# %% [markdown]
# ## 2. The 4th-attempt split
#
# Attempts 1-3 of every task go into a fresh history store; attempt 4 is the probe, never
# written to a store.

# %%
from skillsynth.evaluation import build_history, load_split

split = load_split(gen.db_path, k=3)
n = build_history(gen.db_path, split, work / "history.db")
pd.Series({"history sessions": n, "probes": len(split.probes),
           "left out (after the probe)": len(split.left_out)})

# %% [markdown]
# ## 3. Detect
#
# Each session's goal (its first user turn) and its successful span (failed calls and retries
# dropped); sessions need `min_steps` successful calls.

# %%
from skillsynth.pipeline.detect import extract_sequences
from skillsynth.store import MemoryStore

store = stack.enter_context(MemoryStore.open(work / "history.db"))
detected = extract_sequences(store, config, advance=False)
pd.DataFrame([{"session": s.session_id, "goal": s.goal, "calls": s.attempted_calls,
               "span": " > ".join(c.tool_name for c in s.span)} for s in detected.sequences])

# %% [markdown]
# ## 4. Cluster by goal meaning (average linkage at tau)

# %%
from skillsynth.pipeline.cluster import cluster_by_goal

clusters = cluster_by_goal(detected.qualified, embedder, config)
pd.DataFrame([{"size": c.size, "qualified": c.qualified, "success_rate": c.success_rate,
               "reason": c.reason, "goals": " | ".join(c.goals)} for c in clusters])

# %% [markdown]
# ## 5. Distil one cluster
#
# One model call; the prompt shows the representative run's tool names and the other phrasings
# (no arguments or results). The answer becomes a `Skill`, rendered as SKILL.md.

# %%
from skillsynth.pipeline.distill import build_messages, distill

first = next(c for c in clusters if c.qualified)
print(build_messages(first, mode)[-1]["content"])
d = distill(first, llm, config, mode)
print(f"\n--- model answer (cached: {d.cached}) ---\n{d.raw}")

# %%
display(Markdown("```markdown\n" + d.skill.render("agentskills") + "\n```")
        if d.skill else "the model answered SKIP")

# %% [markdown]
# ## 6. The synthesis pass: detect, cluster, distil, reconcile
#
# What GAIA's maintenance pass does, with #887's floors (LLM down: the pass is skipped and
# the store unchanged; a malformed answer skips its cluster).

# %%
from skillsynth.models.embed import check_store_embedder
from skillsynth.pipeline.synthesize import synthesize_skills

check_store_embedder(store, embedder)
report = synthesize_skills(store, llm, embedder, config, mode=mode,
                           memory_disabled=gaia_memory_disabled())
pd.Series({k: v for k, v in report.as_dict().items() if k != "details"})

# %%
pd.DataFrame([{"id": p.id, "name": p.name, "when_to_use": p.when_to_use,
               "tools": ", ".join(p.tools_required), "successes": p.success_count,
               "from_sessions": len(p.provenance.get("from_sessions", []))}
              for p in store.procedures()])

# %% [markdown]
# ## 7. Recall for a probe, and the injected block
#
# A probe's goal is recalled for only now. Recall returns procedures at cosine >= tau; the
# planner prompt gets the `RECALLED PROCEDURES` block (bodies cut at `max_recall_body_chars`)
# and the skills' tools load first.

# %%
from skillsynth.pipeline.inject import inject, tools_for_turn
from skillsynth.pipeline.recall import recall, skill_from_procedure

goals = MemoryStore.open(gen.db_path, read_only=True).first_user_turns(
    [p.session_id for p in split.probes])
rows = []
for p in split.probes:
    hits = recall(store, embedder, goals[p.session_id].content, config, touch=False)
    rows.append({"family": p.task_id, "goal": goals[p.session_id].content,
                 "recalled": ", ".join(h.procedure.name for h in hits) or "-",
                 "score": round(hits[0].score, 3) if hits else None})
pd.DataFrame(rows)

# %%
probe = next((r for r in rows if r["recalled"] != "-"), rows[0])
skills = [skill_from_procedure(h.procedure)
          for h in recall(store, embedder, probe["goal"], config, touch=False)]
print(inject(skills, config) or "(nothing recalled for this goal: no block)")
print("tools loaded:", tools_for_turn(["query_documents"], skills, ["search_file", "read_file"]))

# %% [markdown]
# ## 8. Export and re-read under both profiles
#
# GAIA's #691 profile and agentskills.io's (re-read with the reference parser, skills-ref).

# %%
from skillsynth.pipeline.export import export_skill
from skillsynth.pipeline.skill import validate_dir

for proc in store.procedures()[:1]:
    for profile in ("gaia691", "agentskills"):
        skill_dir = export_skill(store, proc.id, work / "skills" / profile, profile)
        print(f"{profile}: {skill_dir} errors={validate_dir(skill_dir, profile)}")
        print((skill_dir / "SKILL.md").read_text())

# %% [markdown]
# ## 9. Measure: one evaluation point
#
# The whole protocol in one call: per-probe rows and KPIs with n and 95% bootstrap intervals
# (tool steps are a replay **estimate**; see METHODS.md). A sweep runs many of these.

# %%
from skillsynth.evaluation import EvalConfig, run_point

result = run_point(EvalConfig(str(gen.db_path), thresholds=config, mode=mode), llm, embedder,
                   work / "point")
pd.DataFrame([k.as_dict() for k in result.kpis.values()]).set_index("name")

# %%
stack.close()  # stop the model servers
