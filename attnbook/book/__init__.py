"""What a chapter calls: its start, glued numbers and checks, records, figures and
tables. The top layer; the book's build lives in the repository's ``_ext/``."""
