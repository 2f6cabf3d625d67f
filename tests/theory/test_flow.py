"""Gradient flow on p: stable gradient, log-time integrator, hand-solvable toys."""

import numpy as np
import pytest
import torch

from attnbook.data.selection import assumption_one_data
from attnbook.models.attention import attention_output
from attnbook.models.losses import logistic_loss
from attnbook.theory.flow import (
    FlowBatch,
    FlowPath,
    FlowProblem,
    gradient_flow,
    limit_selection,
    one_step_setting,
    unselected_mass,
    value_gap,
)
from attnbook.theory.max_margin import max_margin_solution

from conftest import random_problem

F64 = torch.float64


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def flow_state(prob, p):
    """The integrator's state of ``prob`` at ``p`` (a batch of one at ``c = 0``)."""
    batch = FlowBatch([prob], [p.to(F64)], [None], [None], prob.device)
    st = batch.state(torch.zeros(1, batch.k, dtype=F64))
    st["grad"] = batch.Q[0] @ st["grad"][0]
    pos = torch.arange(prob.tok.numel()) - prob.counts.indptr[prob.rows]
    st["attention"] = st["pi"][0][prob.rows, pos]
    return batch, st


def p_final(path):
    return torch.from_numpy(path.p[-1].copy())


def test_state_matches_autograd():
    E, p, v, seqs, y = random_problem(seed=1)
    prob = FlowProblem(E, v, seqs, y)
    _, st = flow_state(prob, p)
    pp = p.clone().requires_grad_(True)
    loss = logistic_loss(
        attention_output(E, pp, v, seqs), torch.as_tensor(y, dtype=F64)
    )
    loss.backward()
    assert abs(float(st["loss"][0]) - float(loss.detach())) < 1e-14
    assert float((st["grad"] - pp.grad).abs().max()) < 1e-14
    np.testing.assert_allclose(
        st["f"][0, : prob.n].numpy(), attention_output(E, p, v, seqs), atol=1e-14
    )
    np.testing.assert_allclose(st["attention"].numpy(), prob.attention(p), atol=1e-14)


def test_loss_change_matches_difference():
    E, p, v, seqs, y = random_problem(seed=2)
    prob = FlowProblem(E, v, seqs, y)
    old, st = flow_state(prob, p)
    new, st_new = flow_state(prob, p - 0.1 * st["grad"])
    change = float(st_new["loss"][0] - st["loss"][0])
    zero = torch.zeros(1, old.k, dtype=F64)
    measured = float(old.loss_change(old.state(zero), new.state(zero))[0][0]) / prob.n
    assert abs(measured - change) < 1e-14


def test_gradient_keeps_relative_precision_at_huge_p():
    # one sequence {A, N}, E_A = (1, 0), E_N = 0, b_A = 1, b_N = 0: at p = (x, 0)
    # dL/dx = -sigmoid(-sigmoid(x)) sigmoid(x) (1 - sigmoid(x)) ~ -sigmoid(-1) e^{-x}
    E = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=F64)
    v = torch.tensor([1.0, 0.0], dtype=F64)
    prob = FlowProblem(E, v, [[0, 1]], [1])
    for x in (50.0, 200.0, 600.0):
        g = flow_state(prob, torch.tensor([x, 0.0], dtype=F64))[1]["grad"]
        expected = -_sigmoid(-1.0) * np.exp(-x)
        assert g[1] == 0.0
        assert abs(float(g[0]) / expected - 1) < 1e-12


def test_one_dimensional_rate_by_hand():
    # dx/dt = sigmoid(-sigmoid(x)) sigmoid(x) (1 - sigmoid(x)) -> e^x ~ sigmoid(-1) t,
    # so x(t) - log t -> log sigmoid(-1) = -log(1 + e). Euler in log time has an O(dtau)
    # error.
    E = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=F64)
    v = torch.tensor([1.0, 0.0], dtype=F64)
    dtau = 0.01
    path = gradient_flow(
        E,
        v,
        [[0, 1]],
        [1],
        torch.tensor([0.0, 0.5], dtype=F64),
        log_t_max=30.0,
        dtau=dtau,
    )
    x_end = path.p[-1, 0]
    assert path.p[-1, 1] == 0.5  # the orthogonal coordinate never moves
    assert abs(x_end - np.log(path.t[-1]) + np.log1p(np.e)) < dtau
    assert np.all(np.diff(path.loss) <= 1e-15)  # a descent method
    assert path.rejected == 0


def test_tie_toy_symmetric_and_broken():
    # {A, B, N} with E_A = (1,0), E_B = (0,1), E_N = 0 and b_A = b_B = 1, b_N = 0.
    E = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=F64)
    v = torch.tensor([1.0, 1.0], dtype=F64)
    seqs = [[0, 1, 2]]
    sym = gradient_flow(E, v, seqs, [1], torch.zeros(2, dtype=F64), log_t_max=30.0)
    p_mm = max_margin_solution(E, seqs, [{0, 1}]).p
    np.testing.assert_allclose(p_mm, [1.0, 1.0], atol=1e-7)
    assert sym.cosines(p_mm)[-1] > 1 - 1e-12
    assert [s.tolist() for s in limit_selection(E, p_final(sym), seqs)] == [[0, 1]]
    broken = gradient_flow(
        E, v, seqs, [1], torch.tensor([0.3, -0.2], dtype=F64), log_t_max=30.0
    )
    assert [s.tolist() for s in limit_selection(E, p_final(broken), seqs)] == [[0]]
    p_a = max_margin_solution(E, seqs, [0]).p
    np.testing.assert_allclose(p_a, [1.0, 0.0], atol=1e-7)
    assert broken.cosines(p_a)[-1] > 0.99


def test_small_one_step_instance_converges():
    data = assumption_one_data(
        10,
        n_positive=2,
        n_negative=2,
        n_irrelevant=20,
        length=5,
        rng=np.random.default_rng(0),
    )
    E1, v, p0 = one_step_setting(data, 64, 40.0, seed=0)
    assert value_gap(E1, v, data.counts, data.labels, data.important).min() > 0
    p_mm = torch.as_tensor(max_margin_solution(E1, data.counts, data.important).p)
    path = gradient_flow(
        E1,
        v,
        data.counts,
        data.labels,
        p0,
        log_t_max=40.0,
        selected=data.important,
        direction=p_mm,
    )
    assert path.selected_mass.shape == (len(path.t), data.n)
    assert path.selected_mass[-1].min() > 0.99
    assert path.cosines(p_mm)[-1] > 0.99
    assert path.grad_along.min() > 0
    rest = unselected_mass(E1, p_final(path), data.counts, data.important)
    np.testing.assert_allclose(1 - rest, path.selected_mass[-1], atol=1e-12)
    assert (
        rest > 0
    ).all() and rest.max() < 1e-6  # tiny but resolved, not rounded to zero
    mid = len(path.t) // 4
    p_mid = torch.from_numpy(path.p[mid])
    np.testing.assert_allclose(
        unselected_mass(E1, p_mid, data.counts, data.important)
        + path.selected_mass[mid],
        1.0,
        atol=1e-14,
    )
    again = gradient_flow(E1, v, data.counts, data.labels, p0, log_t_max=40.0)
    np.testing.assert_array_equal(again.p, path.p)  # deterministic


def test_errors():
    E, p, v, seqs, y = random_problem()
    with pytest.raises(ValueError):
        gradient_flow(E, v, seqs, y, p, dtau=0.0)
    with pytest.raises(ValueError):
        gradient_flow(E, v, seqs, y, p[:3])
    with pytest.raises(ValueError):
        FlowProblem(E, v[:2], seqs, y)
    with pytest.raises(RuntimeError):
        gradient_flow(E, v, seqs, y, p, max_steps=3)
    np.testing.assert_allclose(
        FlowPath(
            t=np.zeros(2),
            p=np.array([[0.0, 0.0], [2.0, 0.0]]),
            loss=np.zeros(2),
            selected_mass=np.zeros((2, 0)),
            steps=0,
            rejected=0,
        ).cosines([1.0, 0.0]),
        [0.0, 1.0],
    )
