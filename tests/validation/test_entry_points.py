"""The checks the entry points make before any compiled pass, case by case.

Each case names the entry point, the bad argument and the exception expected
(``TypeError`` for a wrong type, ``ValueError`` for a wrong value; the type errors are
also ``ValueError``s, see :class:`attnbook.validation.ArgumentTypeError`) and a part
of its message, which must name the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.experiments.curves import evaluate_binary
from attnbook.models.attention import attention_output, count_heads_output
from attnbook.models.losses import accuracy, logistic_loss
from attnbook.models.training import binary_loss_closure, fit
from attnbook.theory.one_step import one_gradient_step

F64 = torch.float64
E = torch.randn(5, 3, dtype=F64, generator=torch.Generator().manual_seed(0))
p = torch.ones(3, dtype=F64)
v = torch.ones(3, dtype=F64)
COUNTS = TokenCounts.from_sequences([np.array([0, 1]), np.array([4, 4])], 5)
LARGER = TokenCounts.from_sequences([np.array([0, 7]), np.array([4])], 8)
PARAMS = {"E": E, "p": p, "v": v}
Y = torch.tensor([1.0, -1.0], dtype=F64)
Y01 = torch.tensor([1.0, 0.0], dtype=F64)


def _nan(t):
    t = t.clone()
    t.view(-1)[0] = float("nan")
    return t


def _fit(**options):
    q = p.clone().requires_grad_()
    return fit({"p": q}, lambda: (q**2).sum(), steps=2, lr=0.1, **options)


CASES = {
    # the count engine: counts over another vocabulary (a SIGSEGV before), NaN, types
    "counts over a larger vocabulary": (
        lambda: attention_output(E, p, v, LARGER),
        ValueError,
        "counts was built for a vocabulary of 8 tokens, but E has 5 rows",
    ),
    "heads: counts over a larger vocabulary": (
        lambda: count_heads_output(E, p, v[:, None], LARGER),
        ValueError,
        "vocabulary of 8",
    ),
    "heads: a list for counts": (
        lambda: count_heads_output(E, p, v[:, None], [np.array([0])]),
        TypeError,
        "counts must be a TokenCounts",
    ),
    "heads: W 1-D": (
        lambda: count_heads_output(E, p, v, COUNTS),
        ValueError,
        r"W must be a \(d, K\)",
    ),
    "heads: W of another d": (
        lambda: count_heads_output(E, p, torch.ones(4, 2, dtype=F64), COUNTS),
        ValueError,
        r"W must have shape \(3, K\)",
    ),
    "NaN in E": (
        lambda: attention_output(_nan(E), p, v, COUNTS),
        ValueError,
        "E holds 1 non-finite",
    ),
    "inf in p": (
        lambda: attention_output(E, p * float("inf"), v, COUNTS),
        ValueError,
        "p holds 3 non-finite",
    ),
    "NaN in v": (
        lambda: attention_output(E, p, _nan(v), COUNTS),
        ValueError,
        "W holds 1 non-finite",
    ),
    "scores overflow": (
        lambda: attention_output(E * 1e300, p * 1e300, v, COUNTS),
        ValueError,
        "overflow",
    ),
    "E float16": (
        lambda: attention_output(E.half(), p.half(), v.half(), COUNTS),
        TypeError,
        "E has dtype torch.float16",
    ),
    "E sparse": (
        lambda: attention_output(E.to_sparse(), p, v, COUNTS),
        TypeError,
        "E must be a dense tensor",
    ),
    # losses and labels: one label policy, one shape
    "accuracy (n,) against (n, 1)": (
        lambda: accuracy(Y, Y[:, None]),
        ValueError,
        r"outputs \(2,\) and labels \(2, 1\) differ in shape",
    ),
    "accuracy 0/1": (lambda: accuracy(Y, Y01), ValueError, r"2\*y - 1"),
    "logistic_loss 0/1": (lambda: logistic_loss(Y, Y01), ValueError, r"2\*y - 1"),
    "logistic_loss NaN output": (
        lambda: logistic_loss(_nan(Y), Y),
        ValueError,
        "f holds 1 non-finite",
    ),
    "evaluate_binary 0/1": (
        lambda: evaluate_binary(PARAMS, COUNTS, Y01),
        ValueError,
        r"2\*y - 1",
    ),
    "binary_loss_closure 0/1": (
        lambda: binary_loss_closure(PARAMS, COUNTS, Y01),
        ValueError,
        r"2\*y - 1",
    ),
    "binary_loss_closure larger vocabulary": (
        lambda: binary_loss_closure(PARAMS, LARGER, Y),
        ValueError,
        "vocabulary of 8",
    ),
    # training
    "fit eval_every=0": (
        lambda: _fit(eval_every=0),
        ValueError,
        "eval_every must be positive",
    ),
    "fit trainable as a string": (
        lambda: _fit(trainable="p"),
        TypeError,
        "trainable must be a tuple of parameter names",
    ),
    "fit NaN lr": (
        lambda: fit(
            {"p": p.clone().requires_grad_()}, lambda: p.sum(), steps=1, lr=float("nan")
        ),
        ValueError,
        "lr must be a positive finite number",
    ),
    # the one-step theory
    "one_gradient_step NumPy E": (
        lambda: one_gradient_step({"E": E.numpy(), "p": p, "v": v}, COUNTS, Y, 0.5),
        TypeError,
        "E must be a torch tensor, got ndarray",
    ),
    "one_gradient_step unknown method": (
        lambda: one_gradient_step(PARAMS, COUNTS, Y, 0.5, method="exact"),
        ValueError,
        "method must be",
    ),
    # the counts
    "select with float rows": (
        lambda: COUNTS.select(np.array([0.7])),
        TypeError,
        "integer row numbers",
    ),
    "from_pairs with a negative token": (
        lambda: TokenCounts.from_pairs(np.array([0, 1]), np.array([0, -1]), 2, 5),
        ValueError,
        r"tokens must lie in \[0, 5\)",
    ),
    "to an unknown device": (
        lambda: COUNTS.to("gpu7"),
        ValueError,
        "is not a torch device",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_entry_point_refuses(case):
    call, kind, message = CASES[case]
    with pytest.raises(kind, match=message):
        call()


def test_type_errors_are_value_errors_too():
    """Code that catches ``ValueError`` for every bad input (the book's checks) still
    sees a wrong type."""
    with pytest.raises(ValueError):
        one_gradient_step({"E": E.numpy(), "p": p, "v": v}, COUNTS, Y, 0.5)
