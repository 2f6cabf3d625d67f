"""Tables for the reader: readable names, integers as integers, fixed digits."""

from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd


def _is_integer(column: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(column) and not pd.api.types.is_bool_dtype(
        column
    )


def readable_table(
    frame: pd.DataFrame,
    names: Mapping[str, str] | None = None,
    *,
    digits: int | Mapping[str, int | str] = 3,
    integers: Iterable[str] = (),
    index_name: str | None = None,
):
    """A ``Styler`` of ``frame``: columns and index levels renamed by ``names``, integer
    columns and those named in ``integers`` with thousands separators, other numbers
    with ``digits`` decimals (or per column; a string is a format like ``".1e"``)."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    names = dict(names or {})
    shown = frame.rename(columns=names)
    if shown.index.names and any(n in names for n in shown.index.names if n):
        shown.index = shown.index.set_names(
            [names.get(n, n) for n in shown.index.names]
        )
    if index_name is not None:
        shown.index.name = index_name
    integers = set(integers)
    unknown = integers - set(shown.columns)
    if unknown:
        raise ValueError(f"integers names columns the table does not have: {unknown}")
    formats = {}
    for col in shown.columns:
        column = shown[col]
        if col in integers or _is_integer(column):
            formats[col] = "{:,.0f}"
        elif pd.api.types.is_float_dtype(column):
            d = digits.get(col, 3) if isinstance(digits, Mapping) else digits
            if isinstance(d, str):
                formats[col] = f"{{:{d}}}"
                continue
            formats[col] = f"{{:.{int(d)}f}}"
    return shown.style.format(formats, na_rep="–")
