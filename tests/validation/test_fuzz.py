"""Property-based fuzz of the public entry points of the counts, the models, the
one-step theory, the experiments' statistics and the benchmark's command line.

Every example draws a small valid problem (vocabulary, dimension, sequences, parameters
in float32 or float64, labels) and then either leaves one argument as it is or replaces
it by a corrupted version: a wrong type, dtype, shape or vocabulary, token ids out of
range, NaN or infinity, {0, 1} labels, labels of another shape... Some replacements are
valid (a list instead of counts where both are accepted, a transposed-strides ``E``);
each says so. The rule:

- a valid call returns finite values, and finite gradients where it is differentiable
  (no NaN from finite input);
- an invalid call raises ``ValueError`` or ``TypeError`` with a message;
- any other exception fails the test, and a crash (a signal) would end the run.

Examples are derandomized and bounded (about 40 per entry point, sizes below ten), so
the file runs in well under a minute.
"""

from __future__ import annotations

import contextlib
import io
import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnbook.engine.counts import TokenCounts, as_token_counts
from attnbook.experiments.curves import evaluate_binary
from attnbook.experiments.extensions import (
    bin_monotonicity,
    class_importance,
    trend_statistics,
)
from attnbook.experiments.importance import (
    bin_statistics,
    bootstrap_rank_correlation,
    document_class_counts,
    spearman,
    token_importance,
    within_bin_spread,
)
from attnbook.models.attention import (
    attention_output,
    attention_weights,
    count_heads_output,
    dense_attention_output,
)
from attnbook.models.losses import accuracy, logistic_loss
from attnbook.models.mlp_head import (
    dense_mlp_attention_output,
    init_mlp_head,
    mlp_attention_output,
    token_value_scores,
)
from attnbook.models.multiclass import (
    as_class_labels,
    cross_entropy_loss,
    multiclass_output,
)
from attnbook.models.parameters import init_parameters
from attnbook.models.training import binary_loss_closure, fit
from attnbook.models.two_layer import (
    dense_two_layer_output,
    init_two_layer,
    two_layer_output,
)
from attnbook.theory.frequency import average_signed_frequency
from attnbook.theory.one_step import (
    class_signed_frequency,
    one_gradient_step,
    one_gradient_step_multiclass,
    one_step_coefficients,
    pearson,
    predicted_class_alignment,
    predicted_pearson,
)
from benchmarks.cli import main as bench_main

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
ERRORS = (ValueError, TypeError)
EXAMPLES: dict[str, int] = {}  # calls per entry point (printed at the end)
VALID: dict[str, int] = {}  # of which with valid arguments


# ------------------------------------------------------------------- checking outcomes
def _finite(x: object, where: str = "output") -> None:
    """Every number in ``x`` (tensors, arrays, floats, containers) is finite."""
    if isinstance(x, torch.Tensor):
        assert bool(torch.isfinite(x.detach()).all()), f"non-finite {where}: {x}"
    elif isinstance(x, np.ndarray):
        if x.dtype.kind in "fc":
            assert np.isfinite(x).all(), f"non-finite {where}: {x}"
    elif isinstance(x, float):
        assert math.isfinite(x), f"non-finite {where}: {x}"
    elif isinstance(x, dict):
        for k, value in x.items():
            _finite(value, f"{where}[{k!r}]")
    elif isinstance(x, (tuple, list)):
        for k, value in enumerate(x):
            _finite(value, f"{where}[{k}]")


def outcome(name: str, call: Callable[[], object], valid: bool, leaves=()) -> None:
    """Run ``call``: a valid call must give finite values and finite gradients in
    ``leaves``; an invalid one a ``ValueError``/``TypeError`` with a message."""
    EXAMPLES[name] = EXAMPLES.get(name, 0) + 1
    VALID[name] = VALID.get(name, 0) + bool(valid)
    try:
        out = call()
        if valid and isinstance(out, torch.Tensor) and out.requires_grad:
            out.sum().backward()
    except ERRORS as err:
        assert not valid, f"{name}: valid input refused: {err!r}"
        assert str(err), f"{name}: error without a message"
        return
    assert valid, f"{name}: invalid input accepted"
    _finite(out, name)
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor) and leaf.grad is not None:
            _finite(leaf.grad, f"{name} gradient")


# --------------------------------------------------------------------- the problems
@dataclass
class Case:
    """One small problem; ``valid`` says whether the arguments are all acceptable."""

    E: object
    p: object
    v: object
    W: object
    data: object  # a TokenCounts, unless replaced
    seqs: list
    y: object
    classes: object
    V: int
    K: int
    valid: bool = True
    corrupted: str = "none"


@st.composite
def cases(draw, p_scales=(0.0, 0.1, 1.0, 30.0, 1e4)) -> Case:
    V = draw(st.integers(1, 8))
    d = draw(st.integers(1, 5))
    n = draw(st.integers(1, 6))
    K = draw(st.integers(2, 3))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    gen = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    t = lambda a: torch.tensor(a, dtype=dtype)  # noqa: E731
    seqs = [gen.integers(0, V, size=gen.integers(1, 6)) for _ in range(n)]
    return Case(
        E=t(gen.normal(size=(V, d))),
        p=t(gen.normal(size=d) * draw(st.sampled_from(p_scales))),
        v=t(gen.normal(size=d)),
        W=t(gen.normal(size=(d, K))),
        data=TokenCounts.from_sequences(seqs, V),
        seqs=seqs,
        y=torch.tensor(np.where(gen.random(n) < 0.5, -1.0, 1.0), dtype=torch.float64),
        classes=torch.from_numpy(gen.integers(0, K, size=n)),
        V=V,
        K=K,
    )


def _with_first(t: torch.Tensor, value: float) -> torch.Tensor:
    out = t.clone()
    out.reshape(-1)[0] = value
    return out


def _other(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float32 else torch.float32


def _longer(t: torch.Tensor, axis: int) -> torch.Tensor:
    """``t`` one longer along ``axis`` (the axis of length ``d``)."""
    return torch.cat((t, t.narrow(axis, 0, 1)), dim=axis)


# name -> (replacement, valid); every tensor replacement of E, p and v
def _tensor_mutations(t: torch.Tensor, name: str) -> dict[str, tuple[object, bool]]:
    matrix = t.ndim == 2
    out = {
        "numpy": (t.numpy(), False),
        "integer": (t.long(), False),
        "float16": (t.half(), False),
        "complex": (t.to(torch.complex64), False),
        "other float dtype": (t.to(_other(t.dtype)), False),
        "NaN": (_with_first(t, math.nan), False),
        "+inf": (_with_first(t, math.inf), False),
        "-inf": (_with_first(t, -math.inf), False),
        "d + 1": (_longer(t, 0 if name != "E" else 1), False),
        "extra axis": (t[None], False),
        "list": (t.tolist(), False),
    }
    if matrix:
        out["1-D"] = (t[0], False)
        out["no rows"] = (t[:0], False)
        out["sparse"] = (t.to_sparse(), False)
        out["transposed strides"] = (t.t().contiguous().t(), True)
    else:
        out["scalar"] = (t[0], False)
    return out


def _data_mutations(c: Case) -> dict[str, tuple[object, bool | None]]:
    """Replacements of the data argument; ``None`` as validity: valid exactly where the
    entry point accepts lists of sequences as well as counts."""
    s = c.seqs
    return {
        "counts over a larger vocabulary": (
            TokenCounts.from_sequences(s, c.V + 3),
            False,
        ),
        "list of sequences": (s, None),
        "token id V": ([*s[:-1], np.append(s[-1], c.V)], False),
        "negative token id": ([np.array([-1]), *s[1:]], False),
        "empty sequence": ([np.array([], dtype=np.int64), *s], False),
        "float token ids": ([x.astype(float) + 0.5 for x in s], False),
        "no sequences": ([], False),
        "a string": ("0 1 2", False),
        "a 2-D array": (np.zeros((2, 3), dtype=np.int64), False),
    }


def _label_mutations(c: Case) -> dict[str, tuple[object, bool]]:
    y = c.y
    y01 = (y + 1) / 2
    y01[0] = 0.0  # at least one 0, so that the labels are never all +1
    n = y.shape[0]
    return {
        "0/1 labels": (y01, False),
        "a column (n, 1)": (y[:, None], False),
        "one label short": (y[:-1], False),
        "one label more": (torch.cat((y, y[:1])), False),
        "NaN label": (_with_first(y, math.nan), False),
        "labels 2": (torch.full((n,), 2.0, dtype=y.dtype), False),
        "text labels": (np.array(["pos"] * n), False),
        "a list": (y.tolist(), True),
        "int64 tensor": (y.long(), True),
        "float32 tensor": (y.float(), True),
    }


def _class_mutations(c: Case) -> dict[str, tuple[object, bool]]:
    z = c.classes
    return {
        "class K": (torch.full_like(z, c.K), False),
        "class -1": (_with_first(z, -1), False),
        "float classes": (z.double(), False),
        "one class short": (z[:-1], False),
        "a list": (z.tolist(), True),
    }


def corrupt(c: Case, slot: str, draw, accepts_lists: bool) -> Case:
    """``c`` with the argument ``slot`` replaced by a drawn mutation (or not)."""
    if slot == "data":
        options = _data_mutations(c)
    elif slot == "y":
        options = _label_mutations(c)
    elif slot == "classes":
        options = _class_mutations(c)
    else:
        options = _tensor_mutations(getattr(c, slot), slot)
    keep = ["none"] * (len(options) // 2)  # about one call in three stays valid
    name = draw(st.sampled_from([*keep, *sorted(options)]))
    if name == "none":
        return c
    value, valid = options[name]
    if valid is None:
        valid = accepts_lists
    return replace(c, **{slot: value}, valid=valid, corrupted=f"{slot}: {name}")


def _leaves(c: Case, names=("E", "p", "v", "W")) -> dict[str, object]:
    """The float tensors among the arguments, as leaves that require a gradient."""
    out = {}
    for name in names:
        t = getattr(c, name)
        float_tensor = isinstance(t, torch.Tensor) and t.dtype.is_floating_point
        if float_tensor and t.layout == torch.strided and t.dtype != torch.float16:
            t = t.detach().requires_grad_(True)
        out[name] = t
    return out


# ------------------------------------------------------------ the models' entry points
def _params(c: Case, a: dict, head: str = "v") -> dict[str, object]:
    return {"E": a["E"], "p": a["p"], head: a[head]}


MODEL_ENTRY_POINTS = {
    # name: (call(c, a), slots, accepts lists of sequences[, replacements valid here])
    "attention_output": (
        lambda c, a: attention_output(a["E"], a["p"], a["v"], c.data),
        ("E", "p", "v", "data"),
        True,
    ),
    "dense_attention_output": (
        lambda c, a: dense_attention_output(a["E"], a["p"], a["v"], c.data),
        ("E", "p", "v", "data"),
        True,  # (counts are a sequence-like object it refuses: see below)
    ),
    "count_heads_output": (
        lambda c, a: count_heads_output(a["E"], a["p"], a["W"], c.data),
        ("E", "p", "W", "data"),
        False,
    ),
    "multiclass_output": (
        lambda c, a: multiclass_output(a["E"], a["p"], a["W"], c.data),
        ("E", "p", "W", "data"),
        True,
    ),
    "attention_weights": (
        lambda c, a: attention_weights(a["E"], a["p"], c.seqs[0]),
        ("E", "p"),
        True,
    ),
    "logistic_loss": (
        lambda c, a: logistic_loss(
            attention_output(a["E"], a["p"], a["v"], c.seqs), c.y
        ),
        ("v", "y"),
        True,
    ),
    "accuracy": (
        lambda c, a: accuracy(attention_output(a["E"], a["p"], a["v"], c.seqs), c.y),
        ("p", "y"),
        True,
    ),
    "cross_entropy_loss": (
        lambda c, a: cross_entropy_loss(
            multiclass_output(a["E"], a["p"], a["W"], c.seqs), c.classes
        ),
        ("W", "classes"),
        True,
    ),
    "as_class_labels": (
        lambda c, a: as_class_labels(c.classes, c.K, len(c.seqs)),
        ("classes",),
        True,
    ),
    "evaluate_binary": (
        lambda c, a: evaluate_binary(_params(c, a), c.data, c.y),
        ("E", "p", "v", "data", "y"),
        False,
    ),
    "binary_loss_closure": (
        lambda c, a: binary_loss_closure(_params(c, a), c.data, c.y)(),
        ("E", "p", "v", "data", "y"),
        False,
    ),
    "one_step_coefficients": (
        lambda c, a: one_step_coefficients(a["E"], a["p"], a["v"], c.data, c.y),
        ("E", "p", "v", "data", "y"),
        True,
    ),
    "one_gradient_step": (
        lambda c, a: one_gradient_step(_params(c, a), c.data, c.y, 0.5),
        ("E", "p", "v", "data", "y"),
        True,
    ),
    "one_gradient_step autograd": (
        lambda c, a: one_gradient_step(
            _params(c, a), c.data, c.y, 0.5, method="autograd"
        ),
        ("E", "p", "v", "data", "y"),
        True,
    ),
    "one_gradient_step_multiclass": (
        lambda c, a: one_gradient_step_multiclass(
            _params(c, a, "W"), c.data, c.classes, 0.5
        ),
        ("E", "p", "W", "data", "classes"),
        True,
    ),
    "average_signed_frequency": (
        lambda c, a: average_signed_frequency(c.data, c.y, c.V),
        ("data", "y"),
        True,
    ),
    "class_signed_frequency": (
        lambda c, a: class_signed_frequency(c.data, c.classes, c.K, c.V),
        ("data", "classes"),
        True,
    ),
    "predicted_class_alignment": (
        lambda c, a: predicted_class_alignment(
            class_signed_frequency(c.seqs, c.classes, c.K, c.V), a["W"], 0.5
        ),
        ("W", "classes"),
        True,
        {"W: other float dtype", "W: transposed strides", "W: d + 1"},
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_ENTRY_POINTS))
@FUZZ
@given(case=cases(), data=st.data())
def test_model_entry_points(name, case, data):
    call, slots, accepts_lists, *loose = MODEL_ENTRY_POINTS[name]
    slot = data.draw(st.sampled_from(slots))
    c = corrupt(case, slot, data.draw, accepts_lists)
    if loose and c.corrupted in loose[0]:
        c = replace(c, valid=True)
    if name == "dense_attention_output" and isinstance(c.data, TokenCounts):
        c = replace(c, data=c.seqs) if c.valid else c  # it takes lists only
    a = _leaves(c)
    outcome(name, lambda: call(c, a), c.valid, a.values())


# ------------------------------------------------- the two-layer and MLP-head models
@pytest.mark.parametrize("model", ["two-layer", "MLP-head"])
@FUZZ
@given(case=cases(p_scales=(0.0, 1.0, 30.0)), data=st.data(), dense=st.booleans())
def test_dict_models(model, case, data, dense):
    init = init_two_layer if model == "two-layer" else init_mlp_head
    gen = torch.Generator().manual_seed(0)
    V, d = case.E.shape
    params = init(V, d, generator=gen, dtype=case.E.dtype)
    name = data.draw(st.sampled_from(sorted(params)))
    options = _tensor_mutations(params[name].detach(), name)
    options.update({f"none {k}": (params[name], True) for k in range(len(options))})
    options["a list instead of the dict"] = (list(params.values()), False)
    options["missing"] = (None, False)
    which = data.draw(st.sampled_from(sorted(options)))
    value, valid = options[which]
    if which == "a list instead of the dict":
        arg = value
    else:
        arg = {k: t for k, t in params.items() if k != name or value is not None}
        if value is not None:
            arg[name] = value
    if model == "two-layer":
        fn = dense_two_layer_output if dense else two_layer_output
        outcome(model, lambda: fn(arg, case.seqs), valid)
    else:
        fn = dense_mlp_attention_output if dense else mlp_attention_output
        outcome(model, lambda: fn(arg, case.seqs), valid)
        outcome(model, lambda: token_value_scores(arg), valid)


# ------------------------------------------------------------------------ the counts
@FUZZ
@given(
    rows=st.lists(st.integers(-2, 6), max_size=12),
    tokens=st.lists(st.integers(-2, 9), max_size=12),
    n=st.integers(-1, 6),
    V=st.one_of(st.integers(1, 9), st.integers(-1, 0), st.floats(0, 9), st.booleans()),
    make_valid=st.booleans(),
)
def test_counts_from_pairs(rows, tokens, n, V, make_valid):
    if make_valid:  # half of the draws: valid ones
        n, V = max(1, n), V if type(V) is int and V > 0 else 4
        rows = [r % n for r in rows] + list(range(n))
        tokens = [t % V for t in tokens[: len(rows)]]
        tokens += [0] * (len(rows) - len(tokens))
    valid = (
        isinstance(V, int)
        and not isinstance(V, bool)
        and V >= 1
        and n >= 1
        and len(rows) == len(tokens)
        and all(0 <= r < n for r in rows)
        and all(0 <= t < V for t in tokens)
        and set(rows) == set(range(n))
    )
    outcome(
        "TokenCounts.from_pairs", lambda: _counts_summary(rows, tokens, n, V), valid
    )


def _counts_summary(rows, tokens, n, V) -> list[float]:
    c = TokenCounts.from_pairs(np.array(rows, dtype=np.int64), np.array(tokens), n, V)
    return [float(c.lengths.sum()), float(c.to_dense().sum())]


@FUZZ
@given(
    case=cases(), index=st.lists(st.integers(-3, 8), max_size=6), as_float=st.booleans()
)
def test_counts_select_and_padding(case, index, as_float):
    c = case.data
    if len(index) % 2:  # half of the draws: row numbers in range
        index = [i % c.n_sequences for i in index]
    arr = np.array(index, dtype=float if as_float else np.int64)
    valid = (
        not as_float and len(index) > 0 and all(0 <= i < c.n_sequences for i in index)
    )
    outcome("TokenCounts.select", lambda: c.select(arr).to_dense(), valid)
    outcome("as_token_counts", lambda: as_token_counts(c, case.V + 1), False)


# ---------------------------------------------------------------------------- training
@FUZZ
@given(
    option=st.sampled_from(
        [
            ("steps", 3, True),
            ("steps", -1, False),
            ("steps", 2.5, False),
            ("eval_every", 0, False),
            ("eval_every", 2, True),
            ("lr", 0.0, False),
            ("lr", math.nan, False),
            ("lr", 0.1, True),
            ("trainable", "Ep", False),
            ("trainable", ("E",), True),
            ("trainable", ("q",), False),
            ("optimizer", "gd", True),
            ("optimizer", "sgdm", False),
            ("optimizer", None, False),
            ("evaluate", "not callable", False),
        ]
    ),
    case=cases(p_scales=(0.1, 1.0)),
)
def test_fit_arguments(option, case):
    key, value, valid = option
    params = {
        k: t.clone().requires_grad_(True)
        for k, t in zip("Epv", (case.E, case.p, case.v))
    }
    loss = binary_loss_closure(params, case.data, case.y)
    kwargs = dict(steps=2, lr=0.05, evaluate=lambda: {"loss": float(loss())})
    kwargs[key] = value
    outcome("fit", lambda: fit(params, loss, **kwargs).loss, valid)


@FUZZ
@given(
    V=st.one_of(st.integers(1, 5), st.integers(-1, 0), st.floats(1, 5), st.booleans()),
    d=st.integers(-1, 5),
    scale=st.sampled_from([1.0, 0.5, 3.0, 0.0, -1.0, math.inf, math.nan, "1"]),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.int64, torch.float16]),
    make_valid=st.booleans(),
)
def test_init_parameters(V, d, scale, dtype, make_valid):
    if make_valid:  # half of the draws: valid ones
        V, d, scale, dtype = 3, max(d, 1), 1.0, torch.float64
    valid = (
        type(V) is int
        and V >= 1
        and d >= 1
        and scale in (1.0, 0.5, 3.0)
        and dtype in (torch.float32, torch.float64)
    )
    outcome(
        "init_parameters",
        lambda: init_parameters(V, d, scale=scale, dtype=dtype),
        valid,
    )


# ---------------------------------------------------------- statistics of the chapters
def _array_arguments():
    good = st.lists(st.floats(-1, 1), min_size=3, max_size=30)
    bad = st.sampled_from(
        [
            [0.1, math.nan, 0.3],
            [0.1, math.inf, 0.3],
            [],
            [[0.1, 0.2], [0.3, 0.4]],
            ["a", "b", "c"],
            [1 + 2j, 0.5, 0.2],
        ]
    )
    return st.one_of(good.map(lambda x: (x, True)), bad.map(lambda x: (x, False)))


@FUZZ
@given(x=_array_arguments(), y=_array_arguments(), n_bins=st.sampled_from([4, 0, 2.5]))
def test_statistics(x, y, n_bins):
    (xs, x_ok), (ys, y_ok) = x, y
    same = x_ok and y_ok and len(xs) == len(ys)
    bins_ok = n_bins == 4
    varied = same and len(set(xs)) > 2 and len(set(ys)) > 2
    rng = np.random.default_rng(0)
    outcome(
        "bin_statistics",
        lambda: _counted(bin_statistics(xs, ys, n_bins)),
        same and bins_ok,
    )
    if varied:
        outcome("within_bin_spread", lambda: within_bin_spread(xs, ys, n_bins), bins_ok)
        outcome("spearman", lambda: spearman(xs, ys), True)
        outcome("pearson", lambda: pearson(xs, ys), True)
        outcome(
            "bootstrap_rank_correlation",
            lambda: bootstrap_rank_correlation(xs, ys, 20, rng).estimate,
            True,
        )
    if not same:
        for fn in (spearman, bin_statistics):
            outcome(fn.__name__, lambda fn=fn: fn(xs, ys), False)
    flat = _reals(xs)  # predicted_pearson flattens its argument
    outcome(
        "predicted_pearson",
        lambda: predicted_pearson(xs, 0.5, 1.0, 4),
        flat is not None and flat.size >= 2 and np.isfinite(flat).all(),
    )


def _reals(x: object) -> np.ndarray | None:
    try:
        return np.asarray(x, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return None


def _counted(frame) -> np.ndarray:
    return frame["count"].to_numpy().astype(float)


@FUZZ
@given(case=cases(), data=st.data())
def test_importance(case, data):
    c = corrupt(case, data.draw(st.sampled_from(["data", "y"])), data.draw, True)
    if c.corrupted == "data: counts over a larger vocabulary":
        c = replace(c, valid=True)  # no embedding here: any vocabulary will do
    if c.valid and not isinstance(c.data, TokenCounts):
        c = replace(c, valid=False)  # the statistics take counts only
    outcome(
        "document_class_counts", lambda: document_class_counts(c.data, c.y), c.valid
    )
    labels = np.asarray(c.y, dtype=float) if c.valid else None
    both = c.valid and len(set(labels.tolist())) == 2
    outcome(
        "token_importance",
        lambda: _occurring(token_importance(c.data, c.y)[:, None]),
        both,  # a single class: importance is undefined, and says so
    )
    data_ok = isinstance(c.data, TokenCounts) and (c.valid or c.corrupted[:2] == "y:")
    all_classes = data_ok and len(set(case.classes.tolist())) == case.K
    outcome(
        "class_importance",
        lambda: _occurring(class_importance(c.data, case.classes, case.K)),
        all_classes,  # a class that never occurs has no importance, and says so
    )


def _occurring(importance: np.ndarray) -> np.ndarray:
    """Tokens in no document have NaN importance (documented); the others must be
    finite."""
    return importance[~np.isnan(importance).all(axis=1)]


@FUZZ
@given(
    values=st.lists(st.floats(-5, 5), min_size=40, max_size=80),
    shape=st.sampled_from(["monotone", "u", "flat"]),
    n_boot=st.sampled_from([20, 5, 20.5]),
)
def test_trend_statistics(values, shape, n_boot):
    rng = np.random.default_rng(1)
    imp = np.linspace(-1, 1, len(values))
    valid = shape != "flat" and n_boot == 20 and np.std(values) > 0
    outcome(
        "trend_statistics",
        lambda: trend_statistics(
            imp, values, rng, shape=shape, n_boot=n_boot, min_count=2
        ),
        valid,
    )
    outcome(
        "bin_monotonicity", lambda: bin_monotonicity(imp, values, min_count=0), False
    )


# ------------------------------------------------------- the benchmark's command line
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(
    argv=st.sampled_from(
        [
            ["--dim", "0"],
            ["--dim", "-4"],
            ["--docs", "0"],
            ["--repeats", "0"],
            ["--usual-repeats", "-1"],
            ["--max-positions", "0"],
            ["--two-layer-docs", "0"],
            ["--two-layer-dim", "0"],
            ["--min-df", "0"],
            ["--device", "gpu7"],
            ["--device", "meta"],
            ["--dataset", "sst2"],
            ["--dim", "x"],
            ["--unknown"],
        ]
    )
)
def test_benchmark_command_line_usage_errors(argv):
    EXAMPLES["bench main"] = EXAMPLES.get("bench main", 0) + 1
    err = io.StringIO()
    with pytest.raises(SystemExit) as info, contextlib.redirect_stderr(err):
        bench_main(argv)
    assert info.value.code == 2
    text = err.getvalue()
    assert "usage:" in text and "error:" in text and "Traceback" not in text


def test_zz_report_example_counts(capsys):
    """The number of examples each entry point was fuzzed with (``-s`` shows it)."""
    with capsys.disabled():
        total, valid = sum(EXAMPLES.values()), sum(VALID.values())
        print(
            f"\nfuzz: {total} calls ({valid} valid, {total - valid} invalid) over "
            f"{len(EXAMPLES)} entry points"
        )
        for name, count in sorted(EXAMPLES.items()):
            print(f"  {name:32s} {count:4d} calls, {VALID.get(name, 0):4d} valid")
