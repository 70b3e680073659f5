#!/usr/bin/env bash
# Set up skillsynth on a fresh machine and run the main job: the end-to-end KPI run on the
# shipped tau-bench airline corpus with the embedded default models (Qwen2.5-Coder-0.5B and
# all-MiniLM-L6-v2; GAIA's thresholds, 0.5 and the embedder's calibration). It prepares the models,
# runs the sweep eval/sweeps/main.yaml through papermill (import the corpus, then per point:
# the 4th-attempt split, a synthesis pass on the history, recall for every probe, the replay
# estimate, KPIs with bootstrap intervals, floors, SKILL.md round trips), writes the HTML KPI
# report and prints where it is; then the live point (eval/sweeps/main-live.yaml): two tau2
# retail probes run live in the tau2:retail world in both arms by Qwen2.5-Coder-1.5B, scored
# by tau2's evaluators.
# Output: eval/results/main/ and main-live/ (or under $1). Re-running resumes:
# finished points are kept (remove the folder for a fresh run).
set -euo pipefail
. "$(dirname "$0")/_venv.sh" notebooks
RESULTS="${1:-$ROOT/eval/results}"
cd "$ROOT"
skillsynth models prepare
skillsynth models prepare --chat qwen2.5-coder-1.5b   # the live point's agent
skillsynth world prepare
skillsynth models status
skillsynth sweep eval/sweeps/main.yaml --results "$RESULTS"
skillsynth report "$RESULTS/main" --baseline eval/baselines/main.json
skillsynth report "$RESULTS/main" --baseline eval/baselines/main.json \
    --markdown "$RESULTS/main/kpi-summary.md" --command "./scripts/main.sh"   # for a pull request
skillsynth gate "$RESULTS/main"   # validity and floors (no baseline for this corpus yet)
# the live point: two tau2 retail probes run live in tau2:retail, both arms
skillsynth sweep eval/sweeps/main-live.yaml --results "$RESULTS"
skillsynth report "$RESULTS/main-live"
skillsynth gate "$RESULTS/main-live"
echo "main job done: KPI reports at $RESULTS/main/report.html and $RESULTS/main-live/report.html"
echo "the main run's summary for a pull request: $RESULTS/main/kpi-summary.md"
