"""Numbers into prose, and the book's checks.

:func:`glue` stores a value for ``{glue:text}`` roles when MyST-NB is present (the book build)
and does nothing otherwise (Colab, plain Jupyter). :func:`check` asserts a measured statistic
against the threshold the text justifies, glues the value, and records the outcome.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["start_chapter", "glue", "check", "Check", "CHECKS"]


_CHAPTER: dict[str, str | None] = {"name": None}


def start_chapter(name: str) -> None:
    """Declare which chapter the following glued numbers and checks belong to.

    Every chapter calls this once, in its first visible code cell, with its notebook's stem
    (for example ``"01_setup"``).
    """
    if not isinstance(name, str) or not name:
        raise ValueError("chapter name must be a non-empty string")
    _CHAPTER["name"] = name
    CHECKS.clear()


def glue(name: str, value: object) -> None:
    """Make ``value`` available to ``{glue:text}`name``` in this notebook (no-op without MyST-NB)."""
    try:
        from myst_nb import glue as _glue
    except ImportError:  # Colab and plain Jupyter: nothing to glue into
        return
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy / torch scalars render as plain numbers
    _glue(name, value, display=False)


@dataclass(frozen=True)
class Check:
    """One verified statement: the statistic, its threshold and the outcome."""

    chapter: str | None
    name: str
    value: float
    threshold: float
    relation: str
    passed: bool
    claim: str | None = None


CHECKS: list[Check] = []

_RELATIONS = {">=": lambda x, t: x >= t, "<=": lambda x, t: x <= t}


def check(
    name: str,
    value: float,
    threshold: float,
    relation: str = ">=",
    *,
    claim: str | None = None,
) -> float:
    """Assert ``value <relation> threshold``, glue ``value`` as ``name`` and record the check.

    Raises ``AssertionError`` (failing the notebook and the build) when the check fails, and
    ``ValueError`` for an unknown relation or a non-finite value.
    """
    if relation not in _RELATIONS:
        raise ValueError(f"relation must be one of {sorted(_RELATIONS)}, got {relation!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"check {name!r}: measured value is not finite ({value})")
    passed = bool(_RELATIONS[relation](value, float(threshold)))
    CHECKS.append(Check(_CHAPTER["name"], name, value, float(threshold), relation, passed, claim))
    glue(name, value)
    assert passed, f"check {name!r} failed: measured {value:.6g}, required {relation} {threshold:.6g}"
    return value
