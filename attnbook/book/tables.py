"""Tables for the reader: readable names, integers as integers, fixed digits."""

from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd
from pandas.api.types import is_bool_dtype, is_float_dtype, is_integer_dtype


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
    shown.index = shown.index.set_names([names.get(n, n) for n in shown.index.names])
    if index_name is not None:
        shown.index.name = index_name
    integers = set(integers)
    unknown = integers - set(shown.columns)
    if unknown:
        raise ValueError(f"integers names columns the table does not have: {unknown}")
    formats = {}
    for col in shown.columns:
        kind = shown[col].dtype
        if col in integers or (is_integer_dtype(kind) and not is_bool_dtype(kind)):
            formats[col] = "{:,.0f}"
        elif is_float_dtype(kind):
            d = digits.get(col, 3) if isinstance(digits, Mapping) else digits
            formats[col] = f"{{:{d}}}" if isinstance(d, str) else f"{{:.{int(d)}f}}"
    return shown.style.format(formats, na_rep="–")
