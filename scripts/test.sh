#!/usr/bin/env bash
# Set up skillsynth with its test dependencies and run the test suite.
# Extra arguments go to pytest (e.g. scripts/test.sh -k store -x).
set -euo pipefail
. "$(dirname "$0")/_venv.sh" dev,notebooks
cd "$ROOT"
python -m pytest "$@"
