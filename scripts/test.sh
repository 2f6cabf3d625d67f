#!/usr/bin/env bash
# Run every test: attnbook's unit tests, the strict book build (which executes every chapter:
# a cell that raises, or a check that fails, stops it), a browser test of the built pages, and a
# second execution of the chapters whose numbers must come out identical.
# Sets up .venv on first use (scripts/env.sh, which also sets the thread defaults: one thread per
# process, so a chapter's numbers do not depend on what runs beside it). The book builds in the
# background (scripts/build-book.sh: chapters side by side, then Sphinx), followed by the browser
# test, while the unit tests run and then the chapters of the second execution run again, as a
# test: nbval executes each notebook under pytest (python -m _ext.nbval_run: pytest --nbval-lax,
# chapters side by side through pytest-xdist), recorded apart (_build/records/check; the book's
# run is _build/records/book); at the end a test compares the two records value by value.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=scripts/tools.sh
. "$(dirname "$0")/tools.sh"
mkdir -p _build
start=$(date +%s)
echo "[attnbook] ruff: lint and format of the package, the benchmark, the build extension, the tests and the chapters"
ruff check attnbook benchmarks _ext tests chapters
ruff format --check attnbook benchmarks _ext tests chapters
# The book, then the browser test of its pages, in the background.
rm -f _build/book.rc _build/browser.rc
(
  set +e
  bash scripts/build-book.sh > _build/book.log 2>&1
  rc=$?
  echo "$rc" > _build/book.rc
  if [ "$rc" -eq 0 ]; then
    python -m pytest -q -p no:cacheprovider tests/delivery/test_browser.py tests/delivery/test_pdf.py \
      > _build/browser.log 2>&1
    echo "$?" > _build/browser.rc
  fi
) &
book_pid=$!
set +e
python -m pytest tests --ignore=tests/delivery/test_browser.py --ignore=tests/delivery/test_pdf.py -p no:cacheprovider -q --durations=15
tests_rc=$?
# The second execution, through nbval: the chapters of ATTNBOOK_CHECK_CHAPTERS ("all" for every
# chapter, about four more minutes here). By default five chapters that between them run every data path
# (synthetic data, IMDB and Yelp from the mirror, IMDB's star ratings) and the count engine,
# the K-class and the two-layer models in training; tests/test_determinism.py runs the
# computations of the other chapters twice, at a small scale, under two hash seeds.
check="$ROOT/_build/records/check"
chapters="${ATTNBOOK_CHECK_CHAPTERS:-01_setup 02_one_step 05c_multiclass 05d_small_dim 05e_xor}"
read -r -a only <<< "$chapters"
echo "[attnbook] executing chapters a second time, through nbval: $chapters (records in $check)"
python -m _ext.nbval_run "$check" --chapters "${only[@]}" ${ATTNBOOK_JOBS:+--jobs "$ATTNBOOK_JOBS"} \
  > _build/check-run.log 2>&1
check_rc=$?
grep -E "^=* ?[0-9]+ (passed|failed)|^\[attnbook\] nbval" _build/check-run.log | tail -n 3
wait "$book_pid"
book_rc=$(cat _build/book.rc 2>/dev/null || echo 1)
set -e
tail -n 25 _build/book.log
if [ "$book_rc" -ne 0 ]; then
  echo "[attnbook] BOOK BUILD FAILED (exit $book_rc); full log in _build/book.log, reports in _build/html/reports"
  grep -E "WARNING|ERROR|Error|FAILED" _build/book.log | head -40 || true
fi
if [ "$check_rc" -ne 0 ]; then
  echo "[attnbook] SECOND EXECUTION FAILED (exit $check_rc); log in _build/check-run.log"
  tail -n 40 _build/check-run.log
fi
browser_rc=0
browser="skipped (needs the book)"
if [ "$book_rc" -eq 0 ]; then
  echo "[attnbook] the built book read in Chromium (screenshots in _build/screenshots) and its PDFs:"
  tail -n 30 _build/browser.log
  browser_rc=$(cat _build/browser.rc 2>/dev/null || echo 1)
  browser="exit $browser_rc"
fi
same_rc=0
same="skipped (needs both executions to pass)"
if [ "$check_rc" -eq 0 ] && [ "$book_rc" -eq 0 ]; then
  echo "[attnbook] comparing the numbers of the two executions; every claim checked"
  set +e
  ATTNBOOK_COMPARE_RECORDS="$ROOT/_build/records/book:$check" \
    python -m pytest -q -s -p no:cacheprovider tests/ext/test_reproducible.py \
      tests/ext/test_dashboard.py -m two_runs
  same_rc=$?
  same="exit $same_rc"
  set -e
fi
echo "[attnbook] tests exit $tests_rc, book exit $book_rc, second execution exit $check_rc," \
  "browser $browser, same numbers $same, $(( $(date +%s) - start )) s"
[ "$tests_rc" -eq 0 ] && [ "$book_rc" -eq 0 ] && [ "$check_rc" -eq 0 ] \
  && [ "$browser_rc" -eq 0 ] && [ "$same_rc" -eq 0 ]
