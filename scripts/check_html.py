"""Fail unless the built book has an HTML page for every entry of _toc.yml."""

import sys
from pathlib import Path

import yaml

root = Path(__file__).resolve().parents[1]
toc = yaml.safe_load((root / "_toc.yml").read_text())
def _files(entries):
    for entry in entries:
        yield entry["file"]
        yield from _files(entry.get("sections", []))


files = [toc["root"]] + [f for part in toc["parts"] for f in _files(part["chapters"])]
missing = [f for f in files if not (root / "_build" / "html" / f"{f}.html").is_file()]
if missing:
    sys.exit(f"missing HTML pages: {missing}")
print(f"[attnbook] all {len(files)} pages built: {', '.join(files)}")
