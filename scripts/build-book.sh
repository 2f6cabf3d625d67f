#!/usr/bin/env bash
# Build the HTML book (executing every chapter) into _build/html, strictly.
# Sets up .venv on first use (scripts/env.sh, which also sets the thread defaults: one thread per
# process). Extra arguments go to `jupyter-book build`.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "$0")/env.sh"
rm -rf _build/html _build/jupyter_execute
start=$(date +%s)
jupyter-book build . -W -n --keep-going "$@"
python scripts/check_html.py
echo "[attnbook] book built in $(( $(date +%s) - start )) s"
