"""The count engine's gradient stays accurate at any ``||p||``.

Once attention is one-hot, the derivative of ``f_i`` in a token's score is
``pi_s (b_s - f_i)``, exponentially small; formed as a difference of two products it
would be rounding error ``eps |b|``, which the gradient of ``E`` multiplies by
``||p||``. The engine forms it relative to each row's top-scoring token
(:mod:`attnbook.models.attention`).

The problems put ``p`` along the first axis, so that every implementation computes the
same scores ``a_s = p_0 E_s0`` (one rounding), and give the tokens of a row scores
``step`` apart. With ``step = 100`` the other tokens carry ``pi <= e^-100 ~ 4e-44``: the
dense reference's own cancellation error is then ``4e-44 |b| ||p|| <= 1e-27 |b|`` at
``||p|| = 1e16`` and it is exact for these tests. Eight levels (spread 700) send rows
to the per-row shift; four levels (spread 300 < 354 in float64) keep the
vocabulary-wide shift. A row shares the score rounding and then sums at most ten terms
per coefficient, so ``1e-12`` relative leaves three orders of magnitude; the former
formula erred by about ``eps ||p||`` relative (``1e-8`` at ``1e8``).
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import attention_output, dense_attention_output
from attnbook.models.losses import logistic_loss
from attnbook.models.multiclass import cross_entropy_loss, multiclass_output
from attnbook.theory.one_step import one_gradient_step

NORMS = (1e4, 1e8, 1e12, 1e16)


def _problem(
    norm, levels, step, seed=0, V=12, d=6, n=25, dtype=torch.float64, repeats=False
):
    g = np.random.default_rng(seed)
    E = g.normal(size=(V, d))
    E[:, 0] = step * g.integers(0, levels, size=V) / norm
    p = np.zeros(d)
    p[0] = norm
    v = g.normal(size=d)
    seqs = []
    for _ in range(n):  # distinct levels within a row: one top token per row
        by_level = {}
        for s in g.permutation(V)[: g.integers(2, 7)]:
            by_level.setdefault(E[s, 0], s)
        distinct = np.array(list(by_level.values()))
        seqs.append(g.choice(distinct, size=g.integers(2, 11)) if repeats else distinct)
    y = np.where(g.random(n) < 0.5, -1.0, 1.0)
    t = lambda a: torch.tensor(a, dtype=dtype)  # noqa: E731
    return t(E), t(p), t(v), seqs, t(y)


def _grads(fn, E, p, v, seqs, y):
    leaves = [x.clone().requires_grad_(True) for x in (E, p, v)]
    logistic_loss(fn(*leaves, seqs), y).backward()
    return [x.grad for x in leaves]


def _rel(a, b):
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("levels", [4, 8], ids=["vocabulary-shift", "row-shift"])
def test_gradient_matches_dense_reference_at_large_p(norm, levels):
    for seed in range(3):
        E, p, v, seqs, y = _problem(norm, levels, 100.0, seed)
        engine = _grads(attention_output, E, p, v, seqs, y)
        dense = _grads(dense_attention_output, E, p, v, seqs, y)
        assert _rel(engine[0], dense[0]) < 1e-12  # E
        assert _rel(engine[2], dense[2]) < 1e-12  # v
        # dp is exponentially small (one-hot rows): compare it on the scale of dE
        assert float((engine[1] - dense[1]).norm()) < 1e-12 * float(dense[0].norm())


@pytest.mark.parametrize("norm", NORMS)
def test_multiclass_gradient_at_large_p(norm):
    E, p, _, seqs, _ = _problem(norm, 8, 100.0, seed=4)
    W = torch.from_numpy(np.random.default_rng(1).normal(size=(E.shape[1], 3)))
    labels = torch.from_numpy(np.random.default_rng(2).integers(0, 3, len(seqs)))

    def dense(E, p, W, seqs):
        return torch.stack(
            [dense_attention_output(E, p, W[:, k], seqs) for k in range(3)], 1
        )

    grads = []
    for fn in (multiclass_output, dense):
        leaves = [x.clone().requires_grad_(True) for x in (E, p, W)]
        cross_entropy_loss(fn(*leaves, seqs), labels).backward()
        grads.append([x.grad for x in leaves])
    assert _rel(grads[0][0], grads[1][0]) < 1e-12
    assert _rel(grads[0][2], grads[1][2]) < 1e-12


def _exact_gradient_of_E(E, p, v, seqs, y):
    """``dL/dE`` in 60-digit arithmetic from the float64 inputs (the truth)."""
    mpmath.mp.dps = 60
    Em = [[mpmath.mpf(float(x)) for x in row] for row in E.tolist()]
    pm = [mpmath.mpf(float(x)) for x in p.tolist()]
    vm = [mpmath.mpf(float(x)) for x in v.tolist()]
    a = [mpmath.fsum(r[j] * pm[j] for j in range(len(pm))) for r in Em]
    b = [mpmath.fsum(r[j] * vm[j] for j in range(len(vm))) for r in Em]
    grad = [[mpmath.mpf(0)] * len(pm) for _ in Em]
    for seq, yi in zip(seqs, y.tolist()):
        toks = [int(t) for t in seq]
        top = max(a[t] for t in toks)
        w = [mpmath.exp(a[t] - top) for t in toks]
        pi = [x / mpmath.fsum(w) for x in w]
        f = mpmath.fsum(q * b[t] for q, t in zip(pi, toks))
        g = -yi / (1 + mpmath.exp(yi * f)) / len(seqs)
        for q, t in zip(pi, toks):
            for j in range(len(pm)):
                grad[t][j] += g * q * ((b[t] - f) * pm[j] + vm[j])
    return torch.tensor([[float(x) for x in row] for row in grad], dtype=E.dtype)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("levels, step", [(4, 40.0), (30, 20.0)])
def test_gradient_against_exact_arithmetic_when_nearly_one_hot(norm, levels, step):
    """Steps of 20 and 40 leave the other tokens ``e^-20`` and ``e^-40`` of the mass:
    the dense reference is then off by ``e^-40 |b| ||p||`` (3% at ``1e16``), the
    engine must not be."""
    E, p, v, seqs, y = _problem(norm, levels, step, seed=5, V=30, repeats=True)
    engine = _grads(attention_output, E, p, v, seqs, y)[0]
    assert _rel(engine, _exact_gradient_of_E(E, p, v, seqs, y)) < 1e-12


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("levels, step", [(3, 20.0), (8, 100.0)])
def test_float32_gradient_at_large_p(norm, levels, step):
    """float32 against a float64 reference on the same (float32) inputs. Three levels
    20 apart (spread 40 < 43.7, float32's limit for the vocabulary-wide shift) leave
    ``pi_o ~ e^-20``; the float32 scores round by ``6e-8 |a| <= 3e-6``, which moves the
    p-part of the gradient (``pi_o ||p|| |b| <= 0.2 |dE|`` up to ``1e8``, and the same
    relative amount beyond) by that much: ``1e-5`` bounds it. The former formula erred
    by ``6e-8 ||p||`` relative (7 at ``1e8``)."""
    E, p, v, seqs, y = _problem(norm, levels, step, seed=3, dtype=torch.float32)
    engine = _grads(attention_output, E, p, v, seqs, y)
    dense = _grads(dense_attention_output, E.double(), p.double(), v.double(), seqs, y)
    assert _rel(engine[0].double(), dense[0]) < 1e-5


def test_one_step_coefficients_at_large_p():
    """The closed-form step (row-shift formula) equals autograd's step through the
    engine at ``||p|| = 1e12``."""
    E, p, v, seqs, y = _problem(1e12, 8, 100.0, seed=6)
    counts = TokenCounts.from_sequences(seqs, E.shape[0])
    params = {"E": E, "p": p, "v": v}
    closed = one_gradient_step(params, counts, y, 1.0)
    auto = one_gradient_step(params, counts, y, 1.0, method="autograd")
    assert _rel(closed - E, auto - E) < 1e-12
