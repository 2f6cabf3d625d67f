"""The one validation module: its helpers, its place at the bottom of the package, and
entry points that check their arguments once.

The counts of checks are taken with a profiler hook that records every call of a
function of :mod:`attnbook.validation` during one call of an entry point.
"""

from __future__ import annotations

import ast
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from attnbook import validation
from attnbook.engine.counts import TokenCounts, as_token_counts
from attnbook.models import losses
from attnbook.models.attention import (
    attention_output,
    dense_attention_output,
)
from attnbook.models.parameters import init_parameters
from attnbook.models.training import binary_loss_closure
from attnbook.validation import (
    ArgumentTypeError,
    as_signed_labels,
    check_count,
    check_finite,
    check_finite_real,
    check_finite_scores,
    check_float_dtype,
    check_float_tensor,
    check_generator,
    check_head_matrix,
    check_instance,
    check_outputs_and_labels,
    check_parameter_dict,
    check_parameters,
    check_positive_real,
    check_sequences,
    check_vocabulary,
)

PACKAGE = Path(__file__).resolve().parents[2] / "attnbook"
F64 = torch.float64
GEN = torch.Generator().manual_seed(3)
E = torch.randn(6, 3, dtype=F64, generator=GEN)
p = torch.randn(3, dtype=F64, generator=GEN)
v = torch.randn(3, dtype=F64, generator=GEN)
SEQS = [np.array([0, 1, 1, 5]), np.array([2, 3])]
COUNTS = TokenCounts.from_sequences(SEQS, 6)
Y = torch.tensor([1.0, -1.0], dtype=F64)


def _checks_run(call) -> Counter:
    """How many times each function of attnbook.validation runs during ``call()``
    (helpers called by helpers included)."""
    calls: Counter = Counter()
    target = validation.__file__

    def hook(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename == target and code.co_name[0] != "<":
            calls[code.co_name] += 1

    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(None)
    return calls


# ----------------------------------------------------------------- the module itself
def test_validation_imports_nothing_of_attnbook():
    tree = ast.parse((PACKAGE / "validation.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("attnbook"), node.module
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("attnbook") for a in node.names)


def test_each_generic_check_is_defined_once_in_the_package():
    names = {
        "check_count",
        "check_float_tensor",
        "check_finite",
        "check_finite_scores",
        "check_parameters",
        "check_head_matrix",
        "check_parameter_dict",
        "as_signed_labels",
        "check_outputs_and_labels",
    }
    where: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in names:
                where.setdefault(node.name, []).append(path.name)
    assert where == {name: ["validation.py"] for name in names}


def test_losses_keep_no_cache_of_checked_labels():
    assert not any(
        isinstance(value, dict) and not name.startswith("__")
        for name, value in vars(losses).items()
    )
    y = Y.clone()
    f = torch.tensor([0.5, -0.5], dtype=F64)
    assert math.isfinite(float(losses.logistic_loss(f, y)))
    y[0] = 0.0  # changed in place after a successful check: checked again
    with pytest.raises(ValueError, match=r"2\*y - 1"):
        losses.logistic_loss(f, y)


# --------------------------------------------------------------------- the helpers
@pytest.mark.parametrize(
    "call, kind, message",
    [
        (lambda: check_count(True, "n"), TypeError, "n must be an integer"),
        (lambda: check_count(2.0, "n"), TypeError, "n must be an integer"),
        (lambda: check_count(0, "n"), ValueError, "n must be positive, got 0"),
        (lambda: check_count(-1, "n", 0), ValueError, "n must be non-negative"),
        (lambda: check_count(1, "k", 2), ValueError, "k must be >= 2"),
        (lambda: check_positive_real(0.0, "lr"), ValueError, "lr must be a positive"),
        (lambda: check_positive_real(math.inf, "lr"), ValueError, "positive finite"),
        (lambda: check_positive_real(True, "lr"), ValueError, "lr must be"),
        (lambda: check_finite_real("1", "lo"), TypeError, "lo must be a number"),
        (lambda: check_finite_real(math.nan, "lo"), ValueError, "lo must be finite"),
        (lambda: check_generator(3), TypeError, "rng must be a numpy.random.Gen"),
        (lambda: check_instance([], TokenCounts, "c"), TypeError, "c must be a Token"),
        (lambda: check_float_dtype(torch.int64), TypeError, "dtype must be torch.fl"),
        (lambda: check_float_tensor(np.ones(2), "x"), TypeError, "x must be a torch"),
        (lambda: check_float_tensor(torch.ones(2).half(), "x"), TypeError, "float16"),
        (
            lambda: check_float_tensor(torch.ones(2, 2).to_sparse(), "x"),
            TypeError,
            "x must be a dense tensor",
        ),
        (
            lambda: check_finite(a=torch.ones(2), b=torch.tensor([1.0, math.nan])),
            ValueError,
            r"b holds 1 non-finite value\(s\) \(1 NaN\)",
        ),
        (
            lambda: check_finite_scores(torch.tensor([math.inf]), E=torch.ones(2)),
            ValueError,
            "the scores computed from E overflow",
        ),
        (lambda: check_parameters(E[:, :0], p[:0], v[:0]), ValueError, "E must have"),
        (lambda: check_parameters(E, p[:2], v), ValueError, r"p must have shape \(3"),
        (lambda: check_parameters(E, p.float(), v), ValueError, "share one dtype"),
        (lambda: check_head_matrix(v, E), ValueError, r"W must be a \(d, K\)"),
        (
            lambda: check_head_matrix(torch.ones(4, 1, dtype=F64), E),
            ValueError,
            r"W must have shape \(3, K\)",
        ),
        (
            lambda: check_parameter_dict({"E": E}, lambda d: {"p": (d,)}, "toy"),
            ValueError,
            r"toy parameters lack \['p'\]",
        ),
        (
            lambda: check_parameter_dict(
                {"E": E, "p": v[:2]}, lambda d: {"p": (d,)}, ""
            ),
            ValueError,
            r"p must have shape \(3,\)",
        ),
        (lambda: check_vocabulary(8, 5), ValueError, "counts was built for a voc"),
        (
            lambda: check_vocabulary(8, 5, "PairBlocks"),
            ValueError,
            "PairBlocks was built for a vocabulary of 8 tokens, but E has 5 rows",
        ),
        (
            lambda: TokenCounts.from_sequences(np.ones((2, 2), int), 5),
            ValueError,
            "a list",
        ),
        (lambda: TokenCounts.from_sequences([], 5), ValueError, "sequences is empty"),
        (
            lambda: TokenCounts.from_sequences([[1]], 0),
            ValueError,
            "vocab_size must be pos",
        ),
        (
            lambda: TokenCounts.from_sequences([[1], []], 5),
            ValueError,
            "sequence 1 is empty",
        ),
        (
            lambda: TokenCounts.from_sequences([[0.5]], 5),
            ValueError,
            "must be integers",
        ),
        (lambda: check_sequences([[1, 5]], 5), ValueError, "token id 5, outside"),
        (lambda: check_sequences([[-1]], 5), ValueError, "token id -1, outside"),
        (lambda: as_signed_labels([0, 1]), ValueError, r"2\*y - 1"),
        (lambda: as_signed_labels(["a"]), ValueError, "numbers in"),
        (lambda: as_signed_labels([1, -1], n=3), ValueError, "2 labels for 3"),
        (
            lambda: check_outputs_and_labels(Y, Y[:, None]),
            ValueError,
            r"outputs \(2,\) and labels \(2, 1\) differ in shape",
        ),
        (lambda: check_outputs_and_labels(Y.long(), Y), TypeError, "f has dtype"),
    ],
)
def test_helper_refuses(call, kind, message):
    with pytest.raises(kind, match=message):
        call()


def test_type_errors_are_value_errors():
    assert issubclass(ArgumentTypeError, TypeError)
    assert issubclass(ArgumentTypeError, ValueError)


def test_helpers_pass_good_arguments_through():
    assert check_count(np.int64(3), "n") == 3 and type(check_count(3, "n")) is int
    assert check_positive_real(np.float32(0.5), "eta") == 0.5
    assert check_finite_real(-2, "lo") == -2.0
    assert check_float_tensor(E, "E") is E
    assert check_float_dtype(torch.float32) is torch.float32
    check_parameters(E, p, v)
    check_head_matrix(v[:, None], E)
    arrays = check_sequences([[1, 2], torch.tensor([0])], 3)
    assert [a.dtype for a in arrays] == [np.int64, np.int64]
    y = check_outputs_and_labels(Y.float(), [1, -1])
    assert y.dtype == torch.float32 and y.tolist() == [1.0, -1.0]
    assert as_signed_labels(np.array([1, -1])).dtype == F64


# -------------------------------------------------------- entry points check once
def test_attention_output_checks_each_argument_once():
    calls = _checks_run(lambda: attention_output(E, p, v, SEQS))
    assert calls == Counter(
        check_parameters=1,  # E, p, v
        check_float_tensor=3,  # within it
        check_sequences=1,  # the sequences
        _as_int_array=len(SEQS),
    )


def test_a_training_closure_checks_once_when_built_and_never_per_step():
    params = init_parameters(6, 3, generator=torch.Generator().manual_seed(0))
    built = _checks_run(lambda: binary_loss_closure(params, COUNTS, Y))
    assert built["check_parameter_dict"] == 1 and built["as_signed_labels"] == 1
    loss = binary_loss_closure(params, COUNTS, Y)
    assert _checks_run(lambda: loss().backward()) == Counter()


def test_counts_built_from_checked_input_are_valid_without_a_second_check():
    """The structures built without re-checking (from checked sequences, by select
    and to) satisfy every invariant the public constructor checks."""
    counts = as_token_counts(SEQS, 6)
    for c in (counts, counts.select([1, 0, 1]), counts.to("cpu")):
        again = TokenCounts(c.indptr, c.token_ids, c.counts, c.vocab_size)
        assert torch.equal(again.to_dense(), c.to_dense())
    assert torch.equal(counts.to_dense(), COUNTS.to_dense())
    pairs = TokenCounts.from_pairs(np.array([1, 0, 1]), np.array([2, 0, 2]), 2, 6)
    assert pairs.to_sequences()[1].tolist() == [2, 2]
    with pytest.raises(ValueError, match="every sequence must hold at least one"):
        TokenCounts.from_pairs(np.array([0, 0]), np.array([1, 2]), 2, 6)


def test_one_check_finds_a_nan_of_the_parameters():
    bad = E.clone()
    bad[4, 1] = math.nan
    with pytest.raises(ValueError, match="E holds 1 non-finite"):
        attention_output(bad, p, v, SEQS)
    with pytest.raises(ValueError, match="E holds 1 non-finite"):
        dense_attention_output(bad, p, v, SEQS)


def test_softmax_stays_finite_at_a_huge_cls_norm():
    big = p / p.norm() * 1e12
    f = attention_output(E, big, v, SEQS)
    assert bool(torch.isfinite(f).all())
    b = E @ v  # the outputs are convex combinations of the values E_s . v
    for i, seq in enumerate(SEQS):
        assert b[seq].min() - 1e-12 <= f[i] <= b[seq].max() + 1e-12
