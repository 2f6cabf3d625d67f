"""An author-year bibliography style, to match the book's author-year citations.

Registers with pybtex (the bibliography engine of ``sphinxcontrib-bibtex``) the
formatting style ``attnbook_authoryear``: the entries of the ``unsrt`` style, sorted by
author, year and title, each labelled "Wu et al., 2025" instead of a number.
``_config.yml`` selects it with ``bibtex_default_style``; :mod:`_ext.sphinxext`
registers it when the book is built.
"""

from __future__ import annotations

from collections import Counter
from string import ascii_lowercase

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle

__all__ = ["STYLE", "author_year_label", "register"]

STYLE = "attnbook_authoryear"


def _last_name(person) -> str:
    return str(Text.from_latex(" ".join(person.last_names)))


def author_year_label(entry) -> str:
    """``"Wu et al., 2025"`` (three or more authors), ``"Maas and Daly, 2011"``, or
    ``"Vaswani, 2017"``; the editors when there is no author."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_name(p) for p in persons]
    if not names:
        who = entry.fields.get("organization", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    """Author-year labels; two entries with one label get "2023a", "2023b"."""

    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [author_year_label(e) for e in entries]
        repeated = Counter(labels)
        seen: Counter = Counter()
        for label in labels:
            if repeated[label] > 1:
                suffix = ascii_lowercase[seen[label]]
                seen[label] += 1
                label += suffix
            yield label


class AuthorYearStyle(UnsrtStyle):
    """The ``unsrt`` entries with author-year labels, sorted by author, year, title."""

    default_label_style = STYLE
    default_sorting_style = "author_year_title"


def register() -> None:
    """Make ``attnbook_authoryear`` known to pybtex (idempotent)."""
    register_plugin("pybtex.style.labels", STYLE, AuthorYearLabels, force=True)
    register_plugin("pybtex.style.formatting", STYLE, AuthorYearStyle, force=True)
