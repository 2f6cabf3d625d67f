# Sourced by the other scripts: create .venv (once), install requirements, activate it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[attnbook] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=".venv/.requirements.sha"
want="$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[attnbook] installing requirements into .venv"
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet -r requirements.txt
  python -m pip check
  echo "$want" > "$stamp"
fi
export PYTHONHASHSEED=0
# No MPLBACKEND here: a Jupyter kernel that inherits MPLBACKEND=Agg shows no figures, and the
# book's figure labels then go undefined. Without a display matplotlib picks Agg by itself.
