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
# Byte-compile the environment once: a sweep starts a fresh kernel per point, and where
# PYTHONDONTWRITEBYTECODE is set nothing else writes .pyc files, so every kernel would
# recompile pandas and scipy (about 2 s per point). A file that fails to compile is only
# slower to import, so a non-zero status here is reported and not fatal.
"$VENV/bin/python" -m compileall -q -j 0 "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null \
    || echo "== note: some files in the environment did not byte-compile (imports are slower)"
