"""The argument checks of attnbook, in one place: each raises a ``ValueError`` (or
:class:`ArgumentTypeError`, both a ``TypeError`` and a ``ValueError``) naming the
argument at fault. An entry point checks its arguments once; inner functions take
``check_input=False``. The checks of the review data (a split's columns, and its counts
against the ones the data set is known to hold) name the file at fault. Imports nothing
of attnbook.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

import numpy as np
import torch

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "ArgumentTypeError",
    "FLOAT_DTYPES",
    "check_count",
    "check_instance",
    "check_positive_real",
    "check_finite_real",
    "check_generator",
    "check_float_dtype",
    "check_float_tensor",
    "check_finite",
    "check_finite_scores",
    "check_parameters",
    "check_head_matrix",
    "check_parameter_dict",
    "check_vocabulary",
    "check_sequences",
    "as_signed_labels",
    "check_outputs_and_labels",
    "IMDB_CLASS_COUNTS",
    "YELP_STAR_COUNTS",
    "DatasetUnavailableError",
    "check_imdb_columns",
    "check_column",
    "known_shape",
    "verify_split",
]

FLOAT_DTYPES = (torch.float32, torch.float64)

T = TypeVar("T")


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type or dtype (a ``ValueError`` too: the book's checks
    catch ``ValueError`` for every bad input)."""


# ---------------------------------------------------------------------- numbers
def check_instance(value: object, kind: type[T], name: str) -> T:
    """``value`` if it is a ``kind``, else :class:`ArgumentTypeError` naming it."""
    if not isinstance(value, kind):
        raise ArgumentTypeError(
            f"{name} must be a {kind.__name__}, got {type(value).__name__}"
        )
    return value


def check_count(value: object, name: str, minimum: int = 1) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) >= ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(
            f"{name} must be an integer, got {type(value).__name__} {value!r}"
        )
    if value < minimum:
        least = {0: "non-negative", 1: "positive"}.get(minimum, f">= {minimum}")
        raise ValueError(f"{name} must be {least}, got {value}")
    return int(value)


def check_positive_real(
    value: object, name: str, what: str = "a positive finite number"
) -> float:
    """``value`` as a ``float`` if it is a positive finite real (not a bool)."""
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Real)
        or not 0 < value < math.inf
    ):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return float(value)


def check_finite_real(value: object, name: str) -> float:
    """``value`` as a ``float`` if it is a finite real number (not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def check_generator(rng: object) -> np.random.Generator:
    """``rng`` if it is a ``numpy.random.Generator``; raise otherwise."""
    if not isinstance(rng, np.random.Generator):
        raise ArgumentTypeError(
            "rng must be a numpy.random.Generator (see "
            f"attnbook.runtime.seed_everything), got {type(rng).__name__}"
        )
    return rng


# ---------------------------------------------------------------------- tensors
def check_float_dtype(dtype: object, name: str = "dtype") -> torch.dtype:
    """``dtype`` if it is ``torch.float32`` or ``torch.float64``; raise otherwise."""
    if dtype not in FLOAT_DTYPES:
        raise ArgumentTypeError(
            f"{name} must be torch.float32 or torch.float64, got {dtype}"
        )
    return dtype  # type: ignore[return-value]


def check_float_tensor(t: object, name: str) -> torch.Tensor:
    """``t`` if it is a dense float32 or float64 torch tensor."""
    if not isinstance(t, torch.Tensor):
        raise ArgumentTypeError(
            f"{name} must be a torch tensor, got {type(t).__name__}"
        )
    if t.dtype not in FLOAT_DTYPES:
        raise ArgumentTypeError(
            f"{name} has dtype {t.dtype}; use torch.float32 or torch.float64"
        )
    if t.layout != torch.strided:
        raise ArgumentTypeError(f"{name} must be a dense tensor, got layout {t.layout}")
    return t


def check_finite(**tensors: torch.Tensor) -> None:
    """Raise ``ValueError`` naming the first of ``tensors`` that holds NaN or inf."""
    for name, t in tensors.items():
        bad = ~torch.isfinite(t.detach())
        if bool(bad.any()):
            n_nan = int(torch.isnan(t.detach()).sum())
            raise ValueError(
                f"{name} holds {int(bad.sum())} non-finite value(s) ({n_nan} NaN); "
                "every entry must be finite"
            )


def check_finite_scores(scores: torch.Tensor, **inputs: torch.Tensor) -> None:
    """Raise ``ValueError`` when ``scores`` computed from ``inputs`` hold NaN or inf,
    naming the input at fault or the overflow (spares a pass over ``E``)."""
    if bool(torch.isfinite(scores).all()):
        return
    check_finite(**inputs)
    raise ValueError(
        f"the scores computed from {', '.join(inputs)} overflow the range of "
        f"{scores.dtype}; rescale them"
    )


# ------------------------------------------------------------ model parameters
def check_parameters(E: object, p: object, v: object) -> None:
    """Raise unless ``E`` is (V, d) and ``p``, ``v`` are (d,) float tensors of one
    dtype on one device."""
    E, p, v = (check_float_tensor(t, n) for n, t in (("E", E), ("p", p), ("v", v)))
    if E.ndim != 2 or E.shape[0] == 0 or E.shape[1] == 0:
        raise ValueError(
            f"E must have shape (V, d) with V, d > 0, got {tuple(E.shape)}"
        )
    d = E.shape[1]
    for name, t in (("p", p), ("v", v)):
        if t.shape != (d,):
            raise ValueError(
                f"{name} must have shape ({d},) to match E, got {tuple(t.shape)}"
            )
    if not (E.dtype == p.dtype == v.dtype):
        raise ValueError(
            f"E, p, v must share one dtype, got {E.dtype}, {p.dtype}, {v.dtype}"
        )
    if not (E.device == p.device == v.device):
        raise ValueError(
            f"E, p, v must be on one device, got {E.device}, {p.device}, {v.device}"
        )


def check_head_matrix(W: object, E: torch.Tensor) -> None:
    """Raise unless ``W`` is a float ``(d, K)`` tensor, ``K >= 1``, of ``E``'s ``d``."""
    W = check_float_tensor(W, "W")
    if W.ndim != 2 or W.shape[1] == 0:
        raise ValueError(f"W must be a (d, K) tensor with K >= 1, got {tuple(W.shape)}")
    if isinstance(E, torch.Tensor) and E.ndim == 2 and W.shape[0] != E.shape[1]:
        raise ValueError(
            f"W must have shape ({E.shape[1]}, K) to match E, got {tuple(W.shape)}"
        )


def check_parameter_dict(
    params: object,
    shapes: Callable[[int], dict[str, tuple[int, ...]]],
    model: str,
) -> None:
    """Raise unless ``params`` holds a float ``E`` (V, d) and a tensor of ``E``'s dtype
    and device for every ``name: shape`` of ``shapes(d)``."""
    if not isinstance(params, Mapping):
        raise ArgumentTypeError(
            f"{model} parameters must be a mapping of names to tensors, got "
            f"{type(params).__name__}"
        )
    missing = [k for k in ("E", *shapes(1)) if k not in params]
    if missing:
        raise ValueError(
            f"{model} parameters lack {missing}; expected {['E', *shapes(1)]}"
        )
    E = check_float_tensor(params["E"], "E")
    if E.ndim != 2 or min(E.shape) == 0:
        raise ValueError("E must be a (V, d) tensor with V, d > 0")
    for name, shape in shapes(E.shape[1]).items():
        t = check_float_tensor(params[name], name)
        if tuple(t.shape) != shape:
            raise ValueError(
                f"{name} must have shape {shape} to match E, got {tuple(t.shape)}"
            )
        if t.dtype != E.dtype or t.device != E.device:
            raise ValueError(
                f"{name} must share E's dtype ({E.dtype}) and device ({E.device})"
            )


# ------------------------------------------------------------- token sequences
def check_vocabulary(built_for: int, vocab_size: int, name: str = "counts") -> None:
    """Raise unless ``name``, built for ``built_for`` tokens, fits ``E``'s rows."""
    if built_for != vocab_size:
        raise ValueError(
            f"{name} was built for a vocabulary of {built_for} tokens, but E has "
            f"{vocab_size} rows"
        )


def _as_int_array(seq: object, index: int) -> np.ndarray:
    """One sequence as a 1-D int64 array."""
    tensor = isinstance(seq, torch.Tensor)
    arr = seq.detach().cpu().numpy() if tensor else np.asarray(seq)
    if arr.size == 0 and arr.ndim == 1 and not tensor:
        arr = arr.astype(np.int64)  # an empty list
    if arr.dtype.kind not in "iu":
        raise ValueError(
            f"sequence {index} has dtype {arr.dtype}; token ids must be integers"
        )
    if arr.ndim != 1:
        raise ValueError(f"sequence {index} must be 1-D, got shape {tuple(arr.shape)}")
    return arr.astype(np.int64, copy=False)


def check_sequences(sequences: object, vocab_size: int) -> list[np.ndarray]:
    """The sequences as int64 arrays, checked: a non-empty list of non-empty 1-D integer
    sequences with ids in ``[0, vocab_size)`` (``vocab_size`` a checked ``int``)."""
    if isinstance(sequences, (np.ndarray, torch.Tensor)) or not isinstance(
        sequences, Sequence
    ):
        raise ValueError(
            "sequences must be a list of 1-D integer arrays or tensors "
            f"(one per sequence), got {type(sequences).__name__}"
        )
    if len(sequences) == 0:
        raise ValueError("sequences is empty: at least one sequence is needed")
    arrays = [_as_int_array(seq, i) for i, seq in enumerate(sequences)]
    for i, arr in enumerate(arrays):
        if arr.size == 0:
            raise ValueError(
                f"sequence {i} is empty: every sequence needs at least one token"
            )
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"sequence {i} holds token id {bad}, outside the vocabulary [0, "
                f"{vocab_size})"
            )
    return arrays


# ----------------------------------------------------------------------- labels
def as_signed_labels(
    labels: object, n: int | None = None, *, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Labels as a float tensor of +-1 (``n`` of them when given); {0, 1} refused."""
    if isinstance(labels, torch.Tensor):
        y = labels.detach()
    else:
        arr = np.asarray(labels)
        if arr.dtype == object or arr.dtype.kind not in "iuf":
            raise ValueError(
                f"labels must be numbers in {{-1, +1}}, got dtype {arr.dtype}"
            )
        y = torch.from_numpy(arr.astype(np.float64))
    if y.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {tuple(y.shape)}")
    if y.numel() == 0:
        raise ValueError("labels are empty")
    if n is not None and y.numel() != n:
        raise ValueError(f"{y.numel()} labels for {n} sequences: lengths must match")
    bad = (y != 1) & (y != -1)
    if bool(bad.any()):
        raise ValueError(
            f"labels must be -1 or +1; found {y[bad][0].item()!r} "
            "(map {0, 1} labels with 2*y - 1)"
        )
    return y.to(dtype)


def check_outputs_and_labels(f: object, y: object) -> torch.Tensor:
    """The labels ``y`` (one +-1 per entry of the 1-D outputs ``f``) as ``f``'s dtype
    and device."""
    f = check_float_tensor(f, "f")
    shape = tuple(getattr(y, "shape", (len(y),) if hasattr(y, "__len__") else ()))
    if tuple(f.shape) != shape:
        raise ValueError(
            f"outputs {tuple(f.shape)} and labels {shape} differ in shape: pass one "
            "label per output, both 1-D"
        )
    if f.ndim != 1:
        raise ValueError(f"outputs must be 1-D, got shape {tuple(f.shape)}")
    return as_signed_labels(y, f.shape[0], dtype=f.dtype).to(f.device)


# ----------------------------------------------------------------- review data
#: Reviews per class (0 negative, 1 positive) of an IMDB split, per kept star of Yelp's.
IMDB_CLASS_COUNTS: Mapping[str, Mapping[int, int]] = {
    "train": {0: 12_500, 1: 12_500},
    "test": {0: 12_500, 1: 12_500},
}
YELP_STAR_COUNTS: Mapping[str, Mapping[int, int]] = {
    "train": {1: 1_777, 2: 1_425, 4: 4_568, 5: 6_213},
    "test": {1: 444, 2: 356, 4: 1_142, 5: 1_553},
}
_REBUILD = (
    "rebuild the mirror (python -m attnbook.data.mirror FOLDER --imdb-archive "
    "aclImdb_v1.tar.gz --yelp-from-hub, from a complete download) or copy its files "
    "again"
)


class DatasetUnavailableError(RuntimeError):
    """Raised when a dataset is neither in the local mirror nor reachable on the hub."""


def check_imdb_columns(table: pa.Table, where: str) -> dict[str, Any]:
    """The checked ``text``, ``label`` and (if present) ``rating`` columns of IMDB."""
    label = check_column(table, "label", where, (0, 1), "0 (negative) or 1 (positive)")
    cols = {"text": check_column(table, "text", where), "label": label}
    if "rating" in table.column_names:  # the mirror's, from the original archive
        cols["rating"] = check_column(
            table, "rating", where, range(1, 11), "IMDB ratings 1 to 10"
        )
    return cols


def check_column(
    table: pa.Table,
    column: str,
    where: str,
    allowed: Sequence[int] | None = None,
    meaning: str = "",
) -> Any:
    """Column ``column`` (``text`` present too): strings, or int64 among ``allowed``;
    a ``ValueError`` naming ``where`` and the column otherwise."""
    import pyarrow as pa  # here, not at the top: only the review data needs it

    missing = sorted({"text", column} - set(table.column_names))
    if missing:
        raise DatasetUnavailableError(f"{where} lacks the columns {missing}")
    col, at = table.column(column), f"{where}: column {column!r}"
    if allowed is None:
        right_type, kind = col.type in (pa.string(), pa.large_string()), "strings"
    else:
        right_type, kind = pa.types.is_integer(col.type), f"integers ({meaning})"
    if not right_type:
        raise ValueError(f"{at} must hold {kind}, got {col.type}")
    if col.null_count:
        raise ValueError(f"{at} has {col.null_count} missing values")
    if allowed is None:
        return col
    values = col.to_numpy().astype(np.int64)
    bad = np.flatnonzero(~np.isin(values, allowed))
    if bad.size:
        found = np.unique(values[bad])[:5].tolist()
        raise ValueError(
            f"{at} must hold {meaning}; found {found} ({bad.size} rows, first row "
            f"{bad[0]})"
        )
    return values


def known_shape(name: str, split: str) -> Mapping[int, int]:
    """Reviews per class (IMDB, 0/1) or per kept star (Yelp) a whole split holds."""
    return (IMDB_CLASS_COUNTS if name == "imdb" else YELP_STAR_COUNTS)[split]


def verify_split(
    name: str, split: str, values: object, where: str, ratings: object = None
) -> None:
    """``ValueError`` unless the labels (IMDB) or kept stars (Yelp) have the counts of
    :func:`known_shape`, and each IMDB label is the one its rating (if given) fixes."""
    want = dict(known_shape(name, split))
    keys, counts = np.unique(np.asarray(values), return_counts=True)
    found = dict(zip(keys.tolist(), counts.tolist()))
    if found != want:
        n, n_want = sum(found.values()), sum(want.values())
        top = 1 if name == "imdb" else 4  # the smallest positive label or star
        pos, pos_want = (
            sum(c for k, c in d.items() if k >= top) for d in (found, want)
        )
        problems = []
        if n < n_want:
            problems.append(f"{n_want - n:,} of its {n_want:,} reviews are missing")
        elif n > n_want:
            problems.append(
                f"it has {n - n_want:,} reviews too many (duplicated rows?)"
            )
        if pos in (0, n):
            problems.append("it holds one class only")
        else:
            problems.append(f"{pos / n:.1%} positive, against {pos_want / n_want:.1%}")
        kind = "class" if name == "imdb" else "star"
        problems.append(f"reviews per {kind}: {found}, against {want}")
        raise ValueError(
            f"{where} is not the whole {name} {split} split: {'; '.join(problems)}. "
            f"The file is cut short, duplicated or of another corpus: {_REBUILD}."
        )
    if ratings is None:
        return
    labels, ratings = np.asarray(values), np.asarray(ratings)
    bad = np.flatnonzero(labels != np.select([ratings >= 7, ratings <= 4], [1, 0], -1))
    if bad.size:
        i = bad[0]
        raise ValueError(
            f"{where}: {bad.size:,} of its {labels.size:,} rows have a label that "
            "disagrees with their rating (rating >= 7 positive (1), rating <= 4 "
            f"negative (0), 5 and 6 absent; first row {i}: label {labels[i]}, rating "
            f"{ratings[i]}). The labels were inverted, shuffled among the rows or "
            f"taken from another corpus: {_REBUILD}."
        )
