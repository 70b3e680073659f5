#!/usr/bin/env bash
# Build skillsynth's wheel, install it into a fresh virtual environment outside the
# checkout, and run what an installed user runs: a sweep, the report and the gate on it,
# and the walkthrough notebook (all found as package data, not in a checkout: the wheel
# carries the top-level notebooks/ as skillsynth/notebooks/, and papermill's record in each
# executed notebook must name that installed copy).
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
"$WORK/venv/bin/python" - "$ROOT/notebooks" <<'PY'
import sys
from pathlib import Path
import skillsynth
from skillsynth.evaluation.sweeps.notebooks import find_notebook, notebooks_folder
where = skillsynth.__file__
assert "site-packages" in where, f"not the installed wheel: {where}"
folder = notebooks_folder()
assert "site-packages" in str(folder), folder
def files(d):
    return {p.name: p.read_bytes() for p in Path(d).iterdir() if p.suffix in (".ipynb", ".py")}
checkout, shipped = files(sys.argv[1]), files(folder)
assert shipped == checkout, ("the wheel's notebooks differ from notebooks/: "
                             f"{sorted(set(shipped) ^ set(checkout)) or 'contents'}")
for name in sorted(n for n in shipped if n.endswith(".ipynb")):
    assert find_notebook(name) == folder / name, find_notebook(name)
print("installed:", where, "notebooks:", folder)
PY
"$SK" models prepare --chat smollm2-135m --chat qwen2.5-coder-0.5b
"$SK" sweep "$ROOT/eval/sweeps/ci.yaml" --results "$WORK/results"
"$SK" gate "$WORK/results/ci" --baseline "$ROOT/eval/baselines/ci.json"
"$SK" report "$WORK/results/ci" --baseline "$ROOT/eval/baselines/ci.json"
test -s "$WORK/results/ci/report.html"
"$WORK/venv/bin/python" - <<'PY'
import json
from pathlib import Path
run = Path("results/ci")
executed = [run / "report.ipynb", *sorted(run.glob("points/*/point.ipynb"))]
assert len(executed) > 1, executed
for nb in executed:  # papermill records the notebook it ran
    source = json.loads(nb.read_text())["metadata"]["papermill"]["input_path"]
    assert "site-packages" in source, f"{nb} ran {source}, not the installed wheel's notebook"
print("the sweep and the report ran the installed wheel's notebooks")
PY
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
