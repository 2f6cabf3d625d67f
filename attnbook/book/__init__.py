"""What a chapter calls: chapter start (:mod:`~attnbook.book.chapter`), glued numbers
and checks (:mod:`~attnbook.book.checks`, :mod:`~attnbook.book.records`), the run's
environment, figures and tables. The book's build lives in the repository's ``_ext/``.
Layer: the top; may import every layer below it.
"""
