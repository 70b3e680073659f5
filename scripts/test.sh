#!/usr/bin/env bash
# Set up skillsynth with its test dependencies and run the test suite.
# Extra arguments go to pytest (e.g. scripts/test.sh -k store -x).
set -euo pipefail
. "$(dirname "$0")/_venv.sh" dev,notebooks
cd "$ROOT"
# The real-model tests need llama-server and the embedded models (idempotent; the first
# run builds llama.cpp and converts the embedder, later runs only check).
skillsynth models prepare
python -m pytest "$@"
