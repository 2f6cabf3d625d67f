"""The book's own machinery: chapter start, glued numbers and checks, records, figures,
the claims dashboard and the Sphinx extension.

- :mod:`~attnbook.book.chapter`   -- ``rng, device = start_chapter(name, seed=...,
  workload=...)``; glue a mapping;
- :mod:`~attnbook.book.records`   -- ``glue``, ``check``, and the record of a run;
- :mod:`~attnbook.book.device_runs` -- the records of a CPU and a GPU run compared
  within each value's tolerance;
- :mod:`~attnbook.book.plotting`  -- one figure style and the book's recurring figures;
- :mod:`~attnbook.book.display`   -- texts shaded by per-token weights (HTML);
- :mod:`~attnbook.book.dashboard` -- the claims dashboard built from the records;
- :mod:`~attnbook.book.sphinxext` -- the Sphinx hook that renders it at build time.

Layer: the top, beside :mod:`attnbook.bench`; may import every layer below it.
"""
