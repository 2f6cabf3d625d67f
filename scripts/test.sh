#!/usr/bin/env bash
# Run every test: attnbook's unit tests, every chapter through nbval, and the strict book build.
# Sets up .venv on first use (scripts/env.sh, which also sets the thread defaults: one thread per
# process). The unit tests and nbval run in one pytest process while the book builds beside it
# (two cores, one thread each). Both executions of the chapters record their glued numbers and
# checks (_build/records/nbval, _build/records/book); at the end a test compares the two records
# value by value.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/tools.sh
. "$(dirname "$0")/tools.sh"
mkdir -p _build
start=$(date +%s)
echo "[attnbook] ruff: lint and format of the package, the tests and the chapters"
ruff check attnbook tests chapters
ruff format --check attnbook tests chapters
bash scripts/build-book.sh > _build/book.log 2>&1 &
book_pid=$!
records="$ROOT/_build/records/nbval"
rm -rf "$records"
set +e
ATTNBOOK_RECORD_DIR="$records" ATTNBOOK_RUN_ID="nbval-$start-$$" \
python -m pytest tests chapters --ignore=tests/test_browser.py --nbval-lax \
  --nbval-current-env -p no:cacheprovider -q --durations=15
tests_rc=$?
wait "$book_pid"
book_rc=$?
set -e
tail -n 25 _build/book.log
if [ "$book_rc" -ne 0 ]; then
  echo "[attnbook] BOOK BUILD FAILED (exit $book_rc); full log in _build/book.log, reports in _build/html/reports"
  grep -E "WARNING|ERROR|Error" _build/book.log | head -40 || true
fi
browser_rc=0
browser="skipped (needs the book)"
if [ "$book_rc" -eq 0 ]; then
  echo "[attnbook] reading the built book in Chromium (screenshots in _build/screenshots)"
  set +e
  python -m pytest -q -p no:cacheprovider tests/test_browser.py
  browser_rc=$?
  browser="exit $browser_rc"
  set -e
fi
same_rc=0
same="skipped (needs both runs to pass)"
if [ "$tests_rc" -eq 0 ] && [ "$book_rc" -eq 0 ]; then
  echo "[attnbook] comparing the numbers of the two executions (nbval and book build);" \
    "every claim checked"
  set +e
  ATTNBOOK_COMPARE_RECORDS="$records:$ROOT/_build/records/book" \
    python -m pytest -q -s -p no:cacheprovider tests/test_reproducible.py \
      -m two_runs
  same_rc=$?
  same="exit $same_rc"
  set -e
fi
echo "[attnbook] tests exit $tests_rc, book exit $book_rc, browser $browser," \
  "same numbers $same, $(( $(date +%s) - start )) s"
[ "$tests_rc" -eq 0 ] && [ "$book_rc" -eq 0 ] && [ "$browser_rc" -eq 0 ] \
  && [ "$same_rc" -eq 0 ]
