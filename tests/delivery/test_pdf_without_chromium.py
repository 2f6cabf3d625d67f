"""No Chromium: the PDF step stops before it starts any print worker, in one line that
names ATTNBOOK_PDF=0 (scripts/build_pdf.py), instead of a traceback from each worker."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.parametrize("check_only", [True, False])
def test_no_chromium_ends_in_one_line_naming_attnbook_pdf(tmp_path, check_only):
    html = tmp_path / "html"
    html.mkdir()
    args = ["--check-chromium"] if check_only else [str(html), "--out", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "scripts/build_pdf.py", *args],
        cwd=ROOT,
        env={**os.environ, "ATTNBOOK_CHROMIUM": str(tmp_path / "no-chromium")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in out, out
    (line,) = [line for line in out.splitlines() if line.strip()]
    assert line.startswith("[attnbook] no PDF can be printed: no Chromium found")
    assert "ATTNBOOK_PDF=0 bash scripts/build-book.sh" in line
    assert "apt-get install -y chromium" in line and "ATTNBOOK_CHROMIUM" in line
