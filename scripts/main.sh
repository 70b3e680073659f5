#!/usr/bin/env bash
# Set up skillsynth on a fresh machine and run the main job.
# For now the main job is the built-in demo (store, SKILL.md profiles, validators); it grows
# into the end-to-end KPI run as the pipeline lands. Output: eval/results/demo/.
set -euo pipefail
. "$(dirname "$0")/_venv.sh" notebooks
OUT="${1:-$ROOT/eval/results/demo}"
skillsynth --help
skillsynth models prepare
skillsynth models status
skillsynth demo "$OUT" --overwrite
skillsynth db info "$OUT/memory.db"
