"""The max-margin solver: hand-solvable instances, KKT conditions, errors."""

import numpy as np
import pytest
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.theory.max_margin import (
    kkt_residuals,
    max_margin_solution,
    selection_constraints,
    selection_sets,
)

# Tokens 0 = (2, 0), 1 = (0, 1), 2 = (0, 0), 3 = (-1, 0).
E_TOY = torch.tensor(
    [[2.0, 0.0], [0.0, 1.0], [0.0, 0.0], [-1.0, 0.0]], dtype=torch.float64
)
SEQ_TOY = [[0, 2], [1, 2, 2], [0, 3]]
SEL_TOY = [0, 1, 0]


def test_toy_by_hand():
    # constraints 2 p1 >= 1, p2 >= 1, 3 p1 >= 1  ->  p = (1/2, 1); multipliers 1/4, 1, 0
    sol = max_margin_solution(E_TOY, SEQ_TOY, SEL_TOY)
    np.testing.assert_allclose(sol.p, [0.5, 1.0], atol=1e-7)
    lam = dict(zip(zip(sol.winners.tolist(), sol.losers.tolist()), sol.dual))
    np.testing.assert_allclose(
        [lam[(0, 2)], lam[(1, 2)], lam[(0, 3)]], [0.25, 1.0, 0.0], atol=1e-7
    )
    assert sol.support.sum() == 2


def test_a_float32_embedding():
    p = max_margin_solution(E_TOY.float(), SEQ_TOY, SEL_TOY).p
    assert p.dtype == np.float64 and p.shape == (2,)
    np.testing.assert_allclose(p, [0.5, 1.0], atol=1e-5)


def test_set_selection_by_hand():
    # sequence {0, 1, 2} selecting {0, 1}: both must beat token 2 -> p = (1/2, 1) again
    p = max_margin_solution(E_TOY, [[0, 1, 2]], [{0, 1}]).p
    np.testing.assert_allclose(p, [0.5, 1.0], atol=1e-7)


@pytest.mark.parametrize("seed", range(4))
def test_kkt_random(seed):
    gen = np.random.default_rng(seed)
    V, d, n = 40, 60, 30
    E = torch.from_numpy(gen.normal(size=(V, d)))
    seqs = [gen.choice(V, size=gen.integers(2, 8), replace=False) for _ in range(n)]
    # select by a global ranking of the tokens (consistent, hence separable when d >= V)
    rank = gen.permutation(V)
    top = [s[np.argsort(-rank[s])] for s in seqs]
    sel = [t[0] if i % 3 else list(t[:2]) for i, t in enumerate(top)]
    sol = max_margin_solution(E, seqs, sel)
    res = kkt_residuals(sol)
    assert res["primal"] <= 1e-6
    assert res["dual"] == 0.0 and sol.dual.min() >= 0
    assert res["complementary"] <= 1e-6
    assert res["stationarity"] <= 1e-6
    margins = sol.differences @ sol.p  # every constraint's score gap
    assert margins.min() >= 1 - 1e-6
    # optimality: shrinking p breaks feasibility, i.e. the smallest margin is exactly
    # one
    assert abs(margins.min() - 1) <= 1e-6


def test_infeasible_raises():
    # token 0 must beat 1 in one sequence and 1 must beat 0 in another: impossible
    with pytest.raises(ValueError, match="infeasible"):
        max_margin_solution(E_TOY, [[0, 1], [0, 1]], [0, 1])
    # identical embeddings cannot be separated
    E = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="identical"):
        max_margin_solution(E, [[0, 1]], [0])


def test_input_errors():
    with pytest.raises(ValueError, match="do not occur"):
        max_margin_solution(E_TOY, SEQ_TOY, [3, 1, 0])
    with pytest.raises(ValueError, match="lengths must match"):
        max_margin_solution(E_TOY, SEQ_TOY, [0, 1])
    with pytest.raises(ValueError, match="nothing to separate"):
        max_margin_solution(E_TOY, [[0, 2]], [[0, 2]])
    with pytest.raises(ValueError, match="empty"):
        selection_sets([[]], 1)


def test_constraints_deduplicated():
    counts = TokenCounts.from_sequences([[0, 2], [0, 2, 2], [1, 2]], 4)
    w, lose, rows = selection_constraints(counts, [0, 0, 1])
    assert sorted(zip(w.tolist(), lose.tolist())) == [(0, 2), (1, 2)]
    assert rows.tolist() == [0, 2]
