#!/usr/bin/env bash
# Recalibrate the embedded embedder's thresholds and write the shipped calibration
# (skillsynth/data/calibration/<embedder>.json): similarity_tau from goal pairs of the four
# shipped labelled corpora, recall_tau and reconcile_tau from a synthesis pass on each
# corpus's history with the default embedded chat model. Needs `skillsynth models prepare`.
# About 10 minutes on 2 cores with an empty call cache; seconds when cached.
# Usage: scripts/calibrate.sh [extra `skillsynth calibrate` options, e.g. --model NAME]
#   scripts/calibrate.sh --backend lemonade   GAIA's own embedder (EmbeddingGemma-300m) and
#       Gemma-4 on a running Lemonade Server: writes
#       skillsynth/data/calibration/embeddinggemma-300m-GGUF.json (what
#       `similarity_tau: calibrated` reads on that backend: eval/sweeps/lemonade-gaia-questions.yaml)
#       and GAIA's settings block, eval/results/calibration/memory_settings.json.
set -euo pipefail
. "$(dirname "$0")/_venv.sh" notebooks
cd "$ROOT"
OUT=eval/results/calibration
rm -rf "$OUT" && mkdir -p "$OUT"
skillsynth corpus generate "$OUT/synthetic-8.db" --families 8 --seed 0 --attempts 5
skillsynth corpus import --format taubench datasets/taubench-airline-gpt4o/gpt-4o-airline.json.gz \
    "$OUT/taubench-airline.db"
skillsynth corpus import --format tau2 datasets/tau2-airline/*1trials.json.gz "$OUT/tau2-airline.db" \
    --tasks datasets/tau2-airline/tasks_airline_HEAD.json.gz
skillsynth corpus import --format tau2 datasets/tau2-retail/*1trials.json.gz "$OUT/tau2-retail.db" \
    --tasks datasets/tau2-retail/tasks_retail_HEAD.json.gz
# Families: synthetic by task (paraphrases of one task); the real corpora by the tools
# rule (their repeated trials share one goal text, so only kinds of task give pairs).
# The shipped file is named after the embedder that ran: the embedded MiniLM, or Lemonade's
# EmbeddingGemma (or --embed-model) with --backend lemonade, by its recorded id (Lemonade's
# `user.X` is recorded as X; skillsynth.models.llm.canonical_model_id).
EMBEDDER=all-MiniLM-L6-v2-f16
EXTRA=()
for ((i = 1; i <= $#; i++)); do
    case "${!i}" in
        --backend) j=$((i + 1)); [ "${!j:-}" = lemonade ] && EMBEDDER=embeddinggemma-300m-GGUF \
                       && EXTRA=(--write-settings "$OUT/memory_settings.json") ;;
        --backend=lemonade) EMBEDDER=embeddinggemma-300m-GGUF
                            EXTRA=(--write-settings "$OUT/memory_settings.json") ;;
    esac
done
for ((i = 1; i <= $#; i++)); do
    case "${!i}" in
        --embed-model) j=$((i + 1)); EMBEDDER="${!j}" ;;
        --embed-model=*) EMBEDDER="${!i#--embed-model=}" ;;
    esac
done
EMBEDDER="${EMBEDDER#user.}"
skillsynth calibrate "$OUT/synthetic-8.db" "$OUT/taubench-airline.db::tools" \
    "$OUT/tau2-airline.db::tools" "$OUT/tau2-retail.db::tools" \
    --out "skillsynth/data/calibration/$EMBEDDER.json" ${EXTRA[@]+"${EXTRA[@]}"} "$@"
