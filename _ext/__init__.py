"""The book's build machinery, a Sphinx local extension of this repository (not part
of the installed package :mod:`attnbook`).

``_config.yml`` loads it with ``sphinx: local_extensions: {_ext: ./}``: Jupyter Book
puts the repository root on ``sys.path`` and Sphinx calls :func:`setup` below, which
loads the two extensions proper. Scripts and tests import its modules from the
repository root (``python -m _ext.execution``).

- :mod:`_ext.execution`, :mod:`_ext.chapter_run`, :mod:`_ext.run_guard` -- the
  chapters executed side by side into the Jupyter cache before the build, one process
  and one kernel each;
- :mod:`_ext.record_files` -- the records of a run read, verified and compared;
  :mod:`_ext.device_runs` -- a CPU and a GPU run compared within tolerances;
- :mod:`_ext.claims` -- the claims C1-C7, read from ``chapters/claims.yml``;
  :mod:`_ext.claim_status`, :mod:`_ext.dashboard`, :mod:`_ext.dashboard_audit`,
  :mod:`_ext.notebooks` -- their rows and statuses from the records;
- :mod:`_ext.pages` -- the dashboard and the run report as page content;
- :mod:`_ext.paper_map`, :mod:`_ext.paper_map_ext`, :mod:`_ext.paper_map_svg` --
  the map of the book's results;
- :mod:`_ext.sphinxext` -- the Sphinx hooks that render them at build time;
  :mod:`_ext.page_assets` -- scripts and PDF links of every page;
  :mod:`_ext.bibstyle` -- the author-year bibliography style; ``static/`` -- its CSS.

Layer: above :mod:`attnbook` (imports :mod:`attnbook.book.record_paths`
and :mod:`attnbook.book.records`); nothing in
:mod:`attnbook` imports it.
"""

from __future__ import annotations

from typing import Any


def setup(app: Any) -> dict:
    """Load the book's Sphinx extensions: the dashboard, run report and paper map
    (:mod:`_ext.sphinxext`), and the pages' scripts and PDF links
    (:mod:`_ext.page_assets`)."""
    app.setup_extension("_ext.sphinxext")
    app.setup_extension("_ext.page_assets")
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
