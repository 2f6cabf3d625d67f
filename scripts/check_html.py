"""Fail unless the built book has an HTML page for every entry of _toc.yml."""

import sys
from pathlib import Path

import yaml

root = Path(__file__).resolve().parents[1]
toc = yaml.safe_load((root / "_toc.yml").read_text())
files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
missing = [f for f in files if not (root / "_build" / "html" / f"{f}.html").is_file()]
if missing:
    sys.exit(f"missing HTML pages: {missing}")
print(f"[attnbook] all {len(files)} pages built: {', '.join(files)}")
