# Sourced by the other scripts: create (once) and update the project's virtual environment.
# Usage: . scripts/_venv.sh [extras]    e.g. ". scripts/_venv.sh dev,notebooks"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
VENV="${SKILLSYNTH_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating virtual environment $VENV"
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -c 'import sys; assert sys.version_info >= (3, 11), "skillsynth needs Python >= 3.11"'
EXTRAS="${1:-}"
echo "== installing skillsynth${EXTRAS:+[$EXTRAS]} and its dependencies"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e "$ROOT${EXTRAS:+[$EXTRAS]}"
export PATH="$VENV/bin:$PATH"
