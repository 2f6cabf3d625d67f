#!/usr/bin/env bash
# Build the HTML book into _build/html, strictly, and its PDFs into _build/pdf
# (scripts/build_pdf.py; copied into _build/html/pdf for publishing).
# Sets up .venv on first use (scripts/env.sh, which also sets the thread defaults: one thread per
# process). The chapters whose inputs changed since their record (code cells, the attnbook modules
# they import, the lock, the data, the settings: _ext/input_key.py) execute first, side by side
# (python -m _ext.execution; ATTNBOOK_JOBS at a time, default: one per CPU this process may use);
# the others are reused from _build as they stand. Then Sphinx builds the pages from their outputs.
# `--force` as the first argument executes every chapter; other arguments go to `jupyter-book build`.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/tools.sh
. "$(dirname "$0")/tools.sh"  # Chromium, which prints the PDFs
# A build folder this user cannot write (left, say, by a build run with sudo) stops the
# build here, in one line, instead of in the middle of it.
if [ -e _build ]; then
  blocked=$(find _build \( -type d -o -name '*.lock' \) ! -writable -print -quit 2> /dev/null || true)
  if [ -n "$blocked" ] || [ ! -w _build ]; then
    blocked=${blocked:-_build}
    echo "[attnbook] cannot write $ROOT/$blocked: permission denied (it belongs to" \
      "$(stat -c %U "$blocked"); a build run with sudo leaves it so): give it back with" \
      "\`sudo chown -R $(id -un) $ROOT/_build\` or remove it with \`sudo rm -rf" \
      "$ROOT/_build\`, then build again" >&2
    exit 1
  fi
fi
mkdir -p _build
# One build at a time in this folder: a second one waits up to 30 s, then refuses (the
# execution holds a lock of its own on each records folder as well).
exec 9> _build/build.lock
if command -v flock > /dev/null && ! flock -w 30 9; then
  echo "[attnbook] another build of the book is running in $ROOT (it holds" \
    "_build/build.lock); wait for it to end or stop it, then build again" >&2
  exit 1
fi
# A Chromium to print the PDFs with, found before the chapters execute (one line if not).
if [ "${ATTNBOOK_PDF:-1}" != 0 ]; then
  python scripts/build_pdf.py --check-chromium
fi
force=()
if [ "${1:-}" = --force ]; then
  force=(--force)
  shift
fi
# Every page is written again; Sphinx reads again only the pages whose source or executed
# outputs changed (_ext/sphinxext.py), from their outputs in _build/jupyter_execute.
rm -rf _build/html
start=$(date +%s)
python -m _ext.execution ${ATTNBOOK_JOBS:+--jobs "$ATTNBOOK_JOBS"} ${force[@]+"${force[@]}"}
executed=$(date +%s)
jupyter-book build . -W -n --keep-going "$@"
python scripts/check_html.py
paged=$(date +%s)
# The PDFs of every page and of the whole book, printed from the pages just built
# (ATTNBOOK_PDF=0 leaves them out, e.g. on a machine without Chromium).
if [ "${ATTNBOOK_PDF:-1}" != 0 ]; then
  python scripts/build_pdf.py
else
  echo "[attnbook] ATTNBOOK_PDF=0: no PDF built; the download menus' PDF links stay empty"
fi
echo "[attnbook] book built in $(( $(date +%s) - start )) s" \
  "(chapters executed in $(( executed - start )) s, pages in $(( paged - executed )) s," \
  "PDFs in $(( $(date +%s) - paged )) s)"
