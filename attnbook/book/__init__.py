"""What a chapter calls: chapter start, glued numbers and checks, records, figures and
tables.

- :mod:`~attnbook.book.chapter`   -- ``rng, device = start_chapter(name, seed=...,
  workload=...)``; glue a mapping;
- :mod:`~attnbook.book.checks`    -- ``check``, a block of one-line ``checks`` and
  ``compare_with_paper``: a statistic against its threshold, recorded;
- :mod:`~attnbook.book.records`   -- ``glue`` and the record of a run;
- :mod:`~attnbook.book.environment` -- the software, hardware and data of a run, kept
  in its record;
- :mod:`~attnbook.book.plotting`  -- one figure style, legible layouts, the figure
  audit and the book's recurring figures;
- :mod:`~attnbook.book.figure_check` -- a figure fitted to the column and audited;
- :mod:`~attnbook.book.theory_figures`, :mod:`~attnbook.book.selection_figures` --
  the figures of the theory chapters; :mod:`~attnbook.book.real_figures`,
  :mod:`~attnbook.book.protocol_figures`, :mod:`~attnbook.book.extension_figures` --
  those of the real-data and extension chapters;
- :mod:`~attnbook.book.controls`  -- the controls of the extension chapters, checked
  and drawn;
- :mod:`~attnbook.book.tables`    -- tables with readable names and integer formats.

The build of the book (the chapters' execution, the records read back, the claims
dashboard, the paper map, the Sphinx extension) is not part of the package: it lives
beside the chapters, in the repository's ``_ext/``.

Layer: the top; may import every layer below it.
"""
