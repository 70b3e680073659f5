#!/usr/bin/env bash
# Leave-one-corpus-out validation of the embedded embedder's calibration method on the four
# shipped labelled corpora: for each corpus, calibrate on the other three, then run the
# held-out corpus's strict point at that proposal and at GAIA's thresholds. Writes
# eval/results/leave-one-out/leave-one-out.{md,json} and records the result in the shipped
# calibration's `validation` (run scripts/calibrate.sh first so that file was made by the
# method validated). Exit status 1 unless the proposal holds on every held-out corpus.
# Needs `skillsynth models prepare`. Measured: 3 minutes on 2 cores with the call cache warm
# from the main job's sweeps (several times that with it empty); finished points are kept on a
# re-run.
# Usage: scripts/validate-calibration.sh [extra `skillsynth validate-calibration` options]
set -euo pipefail
. "$(dirname "$0")/_venv.sh" notebooks
cd "$ROOT"
OUT=eval/results/leave-one-out
C="$OUT/corpora"
mkdir -p "$C"
[ -f "$C/synthetic-8.db" ] || skillsynth corpus generate "$C/synthetic-8.db" --families 8 \
    --seed 0 --attempts 5
[ -f "$C/taubench-airline.db" ] || skillsynth corpus import --format taubench \
    datasets/taubench-airline-gpt4o/gpt-4o-airline.json.gz "$C/taubench-airline.db"
[ -f "$C/tau2-airline.db" ] || skillsynth corpus import --format tau2 \
    datasets/tau2-airline/*1trials.json.gz "$C/tau2-airline.db" \
    --tasks datasets/tau2-airline/tasks_airline_HEAD.json.gz
[ -f "$C/tau2-retail.db" ] || skillsynth corpus import --format tau2 \
    datasets/tau2-retail/*1trials.json.gz "$C/tau2-retail.db" \
    --tasks datasets/tau2-retail/tasks_retail_HEAD.json.gz
# The same family rules as scripts/calibrate.sh: synthetic by task, the real corpora by tools.
skillsynth validate-calibration "$C/synthetic-8.db" "$C/taubench-airline.db::tools" \
    "$C/tau2-airline.db::tools" "$C/tau2-retail.db::tools" --out "$OUT" \
    --calibration skillsynth/data/calibration/all-MiniLM-L6-v2-f16.json "$@"
