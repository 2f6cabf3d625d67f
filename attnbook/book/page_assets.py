"""Sphinx extension: each page loads every script once.

Sphinx 7.4 registers an inline script added after the builder started (as
``sphinx_thebe`` adds its ``const THEBE_JS_URL = ...``) twice, once with filename
``None`` and once with ``''``; the browser then stops on "Identifier 'THEBE_JS_URL' has
already been declared". This drops the second copy of any script, identified by its file
and attributes, from every page.
"""

from __future__ import annotations

from typing import Any


def _key(script: Any) -> tuple:
    return (script.filename or "", tuple(sorted(script.attributes.items())))


def dedupe_scripts(
    app: Any, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """Keep the first of identical scripts in ``context["script_files"]``, in order."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app: Any) -> dict:
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
