"""Flows in a batch against the same flows alone (the batch of one); the integrator's
argument errors; the one-step setting's scales."""

import numpy as np
import pytest
import torch

from attnbook.theory.flow import (
    batched_gradient_flow,
    gradient_flow,
    one_step_setting,
    pair_derivatives,
)

from conftest import assumption_instance, random_problem

F64 = torch.float64

# A flow in a batch of several and the same flow alone (gradient_flow, the batch of one)
# take the same Euler steps (same t0, dtau, acceptance rule); they differ only in the
# order of floating-point operations (padding to the batch's common shapes). Rounding of
# order 1e-16 per step, over a few thousand steps of a contracting flow, stays far below
# 1e-10 relative; a wrong step, rejection or coordinate would show as an O(dtau) = 1e-2
# relative difference.
REL_TOL = 1e-10


def _problems():
    """Mixed sizes: d below and above V, different n and lengths, a zero p0."""
    out = []
    for seed, (dim, n_pairs, length, cls) in enumerate(
        [(8, 10, 5, 1.0), (64, 6, 7, 1.0), (32, 8, 4, 0.0)]
    ):
        data = assumption_instance(seed, n_pairs, length)
        s = one_step_setting(data, dim, 40.0, seed=seed, cls_scale=cls)
        out.append(((s.E1, s.v, data.counts, data.labels, s.p0), data.important))
    return out


def test_batched_matches_single_flows():
    items = _problems()
    problems = [p for p, _ in items]
    selected = [s for _, s in items]
    directions = [torch.ones(p[0].shape[1], dtype=F64) for p in problems]
    batch = batched_gradient_flow(
        problems, log_t_max=30.0, selected=selected, directions=directions
    )
    for (problem, sel), path, q in zip(items, batch, directions):
        single = gradient_flow(
            *problem, log_t_max=30.0, selected=sel, direction=q, n_checkpoints=40
        )
        assert path.t[0] == 0.0 and path.t[-1] == pytest.approx(np.exp(30.0))
        assert (path.steps, path.rejected) == (single.steps, single.rejected)
        scale = np.linalg.norm(single.p[-1])
        assert np.linalg.norm(path.p[-1] - single.p[-1]) <= REL_TOL * scale
        assert abs(path.loss[-1] - single.loss[-1]) <= REL_TOL * single.loss[-1]
        np.testing.assert_allclose(
            path.selected_mass[-1], single.selected_mass[-1], atol=REL_TOL
        )
        assert path.selected_mass.shape == (len(path.t), problem[2].n_sequences)
        assert path.grad_along.shape == path.t.shape
        np.testing.assert_allclose(path.p[0], problem[4].numpy(), atol=0)
        assert np.all(np.diff(path.t) > 0)
        assert np.all(np.diff(path.loss) <= 1e-15)  # a descent method


def test_batched_single_problem_and_random_data():
    E, p, v, seqs, y = random_problem(seed=4)
    (path,) = batched_gradient_flow([(E, v, seqs, y, p)], log_t_max=12.0)
    single = gradient_flow(E, v, seqs, y, p, log_t_max=12.0)
    assert np.linalg.norm(path.p[-1] - single.p[-1]) <= REL_TOL * np.linalg.norm(
        single.p[-1]
    )
    assert path.selected_mass.shape == (0, len(seqs))
    assert path.grad_along.size == 0


def test_batched_checks_only_every_k_steps():
    (problem, _), *_ = _problems()
    few = batched_gradient_flow([problem], log_t_max=20.0, check_every=200)
    many = batched_gradient_flow([problem], log_t_max=20.0, check_every=10)
    assert len(few[0].t) < len(many[0].t)
    np.testing.assert_array_equal(few[0].p[-1], many[0].p[-1])


def test_batched_errors():
    (problem, _), *_ = _problems()
    E, v, seqs, y, p0 = problem
    with pytest.raises(ValueError, match="problems is empty"):
        batched_gradient_flow([])
    with pytest.raises(ValueError, match="p0"):
        batched_gradient_flow([(E, v, seqs, y, p0[:2])])
    with pytest.raises(ValueError, match="p0"):
        batched_gradient_flow([(E, v, seqs, y, p0 * np.nan)])
    with pytest.raises(ValueError, match="log_t_max"):
        batched_gradient_flow([problem], log_t_max=float("inf"))
    with pytest.raises(ValueError, match="check_every"):
        batched_gradient_flow([problem], check_every=0)
    with pytest.raises(ValueError, match="selected"):
        batched_gradient_flow([problem], selected=[None, None])
    with pytest.raises(RuntimeError):
        batched_gradient_flow([problem], max_steps=3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"log_t_max": float("nan")}, "log_t_max"),
        ({"log_t_max": float("inf")}, "log_t_max"),
        ({"dtau": float("inf")}, "dtau"),
    ],
)
def test_gradient_flow_rejects_non_finite_arguments(kwargs, match):
    E, p, v, seqs, y = random_problem()
    with pytest.raises(ValueError, match=match):
        gradient_flow(E, v, seqs, y, p, **kwargs)


def test_gradient_flow_rejects_non_finite_tensors():
    E, p, v, seqs, y = random_problem()
    bad_E = E.clone()
    bad_E[0, 0] = np.inf
    with pytest.raises(ValueError, match="p0"):
        gradient_flow(E, v, seqs, y, p * np.nan)
    with pytest.raises(ValueError, match="E holds"):
        gradient_flow(bad_E, v, seqs, y, p)
    with pytest.raises(ValueError, match="v holds"):
        gradient_flow(E, v * np.nan, seqs, y, p)
    with pytest.raises(ValueError, match="p0"):
        gradient_flow(E, v, seqs, y, p.numpy())


def test_one_step_setting_scales():
    data = assumption_instance(0)
    base = one_step_setting(data, 256, 40.0, seed=1)
    half = one_step_setting(data, 256, 40.0, seed=1, embed_scale=0.5)
    torch.testing.assert_close(half.v, base.v)
    no_p = one_step_setting(data, 256, 40.0, seed=1, cls_scale=0.0)
    assert float(no_p.p0.abs().max()) == 0.0
    zero = one_step_setting(data, 16, 40.0, seed=1, embed_scale=0.0, cls_scale=0.0)
    # from E0 = 0 and p = 0 the step is exactly (eta / 2) alpha_s v: rank one
    assert torch.linalg.matrix_rank(zero.E1) == 1
    with pytest.raises(ValueError, match="embed_scale"):
        one_step_setting(data, 16, 40.0, seed=1, embed_scale=-1.0)
    with pytest.raises(ValueError, match="cls_scale"):
        one_step_setting(data, 16, 40.0, seed=1, cls_scale=float("nan"))


def test_pair_derivatives():
    rng = np.random.default_rng(0)
    for _ in range(20):
        k = int(rng.integers(3, 7))
        out = pair_derivatives(
            rng.normal(size=k), rng.normal(size=k), rng.integers(1, 4, size=k), 1, 0, 1
        )
        assert abs(out["autograd"] - out["general"]) < 1e-14
    # the tie of chapter 3: b_A = b_B = 1, b_N = 0; the two-token form says 0, the
    # general form pi_N (pi_A - pi_B)
    out = pair_derivatives([0.3, -0.2, 0.0], [1.0, 1.0, 0.0], [1, 1, 1], 1, 0, 1)
    assert out["two_token"] == 0.0 and out["general"] > 0
    assert abs(out["autograd"] - out["general"]) < 1e-15
    # when the pair holds all the attention the two forms agree
    out = pair_derivatives([5.0, 4.0, -40.0], [1.0, 0.2, 3.0], [1, 2, 1], -1, 0, 1)
    assert out["other_mass"] < 1e-15
    assert out["two_token"] == pytest.approx(out["general"], rel=1e-12)


def test_batched_stops_at_max_steps_when_asked():
    items = _problems()
    problems = [p for p, _ in items]
    with pytest.raises(RuntimeError, match="iterations reached"):
        batched_gradient_flow(problems, log_t_max=30.0, max_steps=50)
    paths = batched_gradient_flow(
        problems, log_t_max=30.0, max_steps=50, on_max_steps="stop"
    )
    assert all(path.t[-1] < np.exp(30.0) for path in paths)
    assert all(path.steps <= 50 for path in paths)
    with pytest.raises(ValueError, match="on_max_steps"):
        batched_gradient_flow(problems, on_max_steps="ignore")
