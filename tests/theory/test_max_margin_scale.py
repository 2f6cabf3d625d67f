"""The max-margin solver does not depend on the scale of E, and near-tied embeddings do
not make a separable selection look inseparable."""

import numpy as np
import pytest
from scipy.optimize import linprog

from attnbook.engine.counts import as_token_counts
from attnbook.theory.max_margin import (
    kkt_residuals,
    max_margin_solution,
    selection_constraints,
)

# Rounding E * scale changes each entry by at most one ulp (1e-16 relative); the
# solution of the scaled problem then moves by that times the problem's condition, far
# below 1e-9 here. The solver itself stops at a duality gap of 1e-8 and the active-set
# refinement brings the solution to rounding level, so 1e-9 separates a scale-free
# solver (~1e-15 measured) from the unscaled one (errors of 1e-5 at scale 1e2 up to 6e2
# at 1e10, and "infeasible" at 1e-6).
RTOL = 1e-9
SCALES = [10.0**k for k in range(-10, 11)] + [1e-20, 1e20]


def _separable(seed: int = 0, V: int = 40, d: int = 60, n: int = 30):
    """A random problem whose selection follows one ranking of the tokens (separable, d
    >= V)."""
    gen = np.random.default_rng(seed)
    E = gen.normal(size=(V, d))
    seqs = [gen.choice(V, size=gen.integers(2, 8), replace=False) for _ in range(n)]
    rank = gen.permutation(V)
    return E, seqs, [s[np.argmax(rank[s])] for s in seqs]


E_BASE, SEQS, SEL = _separable()


def _residual(sol) -> float:
    """The largest KKT residual, each scale-free: ``kkt_residuals`` gives the
    complementary one in the units of lambda (which scales as 1 / scale^2); divided by
    ``|p|^2 = sum_k lambda_k D_k . p`` it no longer depends on the scale."""
    res = kkt_residuals(sol)
    res["complementary"] /= float(sol.p @ sol.p)
    return max(res.values())


@pytest.fixture(scope="module")
def unscaled():
    return max_margin_solution(E_BASE, SEQS, SEL)


@pytest.mark.parametrize("scale", SCALES, ids=lambda s: f"{s:.0e}")
def test_solution_scales_as_one_over_the_scale(unscaled, scale):
    sol = max_margin_solution(E_BASE * scale, SEQS, SEL)
    err = np.linalg.norm(scale * sol.p - unscaled.p) / np.linalg.norm(unscaled.p)
    assert err <= RTOL
    assert _residual(sol) <= RTOL
    # p = D^T lambda: D -> c D and p -> p / c give lambda -> lambda / c^2
    np.testing.assert_allclose(
        sol.dual * scale**2, unscaled.dual, atol=RTOL * np.abs(unscaled.dual).max()
    )


# Tokens 0 = (2, 0), 1 = (0, 1), 2 = (0, 0), 3 = (-1, 0), and 4 = (0, 0) + eps * u:
# nearly tied with token 2. Constraints: 2 p1 >= 1, p2 >= 1, 3 p1 >= 1 and, from the
# sequence [4, 2] that selects 4, eps u . p >= 1.
E_TOY = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0], [-1.0, 0.0]])
TOY_SEQS, TOY_SEL = [[0, 2], [1, 2, 2], [0, 3], [4, 2]], [0, 1, 0, 4]
EPSILONS = [1e-3, 1e-6, 1e-9, 1e-12]


def _near_tie(eps: float, u) -> np.ndarray:
    return np.vstack([E_TOY, eps * np.asarray(u, dtype=float)])


@pytest.mark.parametrize("eps", EPSILONS)
def test_near_tie_along_p2(eps):
    # u = (0, 1): the short row and 2 p1 >= 1 are active, p = (1/2, 1/eps)
    sol = max_margin_solution(_near_tie(eps, [0.0, 1.0]), TOY_SEQS, TOY_SEL)
    np.testing.assert_allclose(sol.p, [0.5, 1.0 / eps], rtol=RTOL)
    assert _residual(sol) <= RTOL


@pytest.mark.parametrize("eps", EPSILONS)
def test_near_tie_alone(eps):
    # u = (0.3, 1): only the short row is active, p = u / (eps |u|^2)
    u = np.array([0.3, 1.0])
    sol = max_margin_solution(_near_tie(eps, u), TOY_SEQS, TOY_SEL)
    np.testing.assert_allclose(sol.p, u / (eps * (u @ u)), rtol=RTOL)
    assert _residual(sol) <= RTOL


@pytest.mark.parametrize("seed", range(12))
def test_infeasible_only_when_a_linear_program_agrees(seed):
    # random selections, separable or not (d is often below the number of tokens): the
    # solver calls a problem infeasible exactly when an independent LP (HiGHS on D p >=
    # 1) does
    gen = np.random.default_rng(100 + seed)
    V, d = int(gen.integers(5, 50)), int(gen.integers(2, 40))
    E = gen.normal(size=(V, d))
    seqs = [
        gen.choice(V, size=gen.integers(2, min(8, V)), replace=False) for _ in range(30)
    ]
    rank = gen.permutation(V)
    sel = [s[np.argmax(rank[s])] for s in seqs]
    won, lost, _ = selection_constraints(as_token_counts(seqs, V), sel)
    D = E[won] - E[lost]
    lp = linprog(
        np.zeros(d),
        A_ub=-D,
        b_ub=-np.ones(len(D)),
        bounds=[(None, None)] * d,
        method="highs",
    )
    assert lp.status in (0, 2)  # solved or infeasible
    if lp.status == 2:
        with pytest.raises(ValueError, match="infeasible"):
            max_margin_solution(E, seqs, sel)
    else:
        sol = max_margin_solution(E, seqs, sel)
        assert _residual(sol) <= RTOL


def test_non_finite_embeddings_are_refused():
    E = E_TOY.copy()
    E[1, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        max_margin_solution(E, TOY_SEQS[:3], TOY_SEL[:3])
    with pytest.raises(ValueError, match="too large"):
        max_margin_solution(
            E_TOY * 8e307, TOY_SEQS[:3], TOY_SEL[:3]
        )  # E_0 - E_3 overflows
