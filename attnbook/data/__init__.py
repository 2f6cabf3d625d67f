"""Data: real review corpora (:mod:`~attnbook.data.reviews`,
:mod:`~attnbook.data.corpus`, :mod:`~attnbook.data.mirror`) and synthetic generators
(:mod:`~attnbook.data.synthetic`, :mod:`~attnbook.data.selection`,
:mod:`~attnbook.data.xor`). Imports only :mod:`attnbook.engine` and validation."""
