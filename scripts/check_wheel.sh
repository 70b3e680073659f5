#!/usr/bin/env bash
# Build skillsynth's wheel, install it into a fresh virtual environment outside the
# checkout, and run what an installed user runs: a sweep, the report and the gate on it,
# and the walkthrough notebook (all found as package data, not in a checkout).
# Usage: scripts/check_wheel.sh   (after scripts/test.sh has prepared the models)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "== building the wheel"
"$ROOT/.venv/bin/python" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" "$ROOT"
echo "== installing $(basename "$WORK"/dist/*.whl) into a fresh environment"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --upgrade pip
"$WORK/venv/bin/python" -m pip install --quiet "$WORK"/dist/skillsynth-*.whl
cd "$WORK"   # nothing of the checkout is on the path from here on
SK="$WORK/venv/bin/skillsynth"
"$WORK/venv/bin/python" - <<'PY'
import skillsynth, sys
from skillsynth.evaluation.sweeps.notebooks import find_notebook
where = skillsynth.__file__
assert "site-packages" in where, f"not the installed wheel: {where}"
for name in ("sweep_point.ipynb", "report.ipynb", "walkthrough.ipynb", "tuning.ipynb"):
    assert "site-packages" in str(find_notebook(name)), find_notebook(name)
print("installed:", where)
PY
"$SK" models prepare --chat smollm2-135m --chat qwen2.5-coder-0.5b
"$SK" sweep "$ROOT/eval/sweeps/ci.yaml" --results "$WORK/results"
"$SK" gate "$WORK/results/ci" --baseline "$ROOT/eval/baselines/ci.json"
"$SK" report "$WORK/results/ci" --baseline "$ROOT/eval/baselines/ci.json"
test -s "$WORK/results/ci/report.html"
"$WORK/venv/bin/python" - <<'PY'
from pathlib import Path
from skillsynth.evaluation.sweeps.notebooks import execute_notebook, find_notebook
work = Path.cwd() / "walk"
execute_notebook(find_notebook("walkthrough.ipynb"), Path.cwd() / "walkthrough.ipynb",
                 {"workdir": str(work)}, cwd=Path.cwd(), timeout_s=600)
assert (work / "point" / "summary.json").exists()
print("walkthrough ran from the installed wheel")
PY
echo "wheel check passed: sweep, gate, report and walkthrough from an installed wheel"
