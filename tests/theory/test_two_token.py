"""The two-token reduction of the flow on p: its loss and slope, the collapse threshold,
the rest point, and the reduction against the full flow at E0 = 0."""

import numpy as np
import pytest
import torch

from attnbook.data.selection import assumption_one_data
from attnbook.theory.flow import batched_gradient_flow
from attnbook.theory.flow_analysis import one_step_setting
from attnbook.theory.frequency import average_signed_frequency
from attnbook.theory.two_token import (
    collapse_threshold,
    reduced_flow,
    reduced_loss,
    reduced_rest_point,
    reduced_slope,
    rest_point_mass,
)


def test_slope_is_the_derivative_of_the_loss():
    u = np.linspace(-6, 6, 25)
    h = 1e-6
    for value in (0.5, 3.0, 8.0):
        numeric = (
            (reduced_loss(u + h, value, 8) - reduced_loss(u - h, value, 8)) / 2 / h
        )
        assert np.allclose(reduced_slope(u, value, 8), numeric, atol=1e-8)
    # symmetric in u, flat at 0
    assert np.allclose(reduced_loss(u, 3.0, 8), reduced_loss(-u, 3.0, 8))
    assert reduced_slope(0.0, 3.0, 8) == 0.0


def test_loss_limits():
    # the symmetric point: l(B / T); the collapsed state: (l(B) + log 2) / 2
    value = 2.0
    assert reduced_loss(0.0, value, 8) == pytest.approx(np.log1p(np.exp(-value / 8)))
    far = reduced_loss(60.0, value, 8)
    assert far == pytest.approx(0.5 * (np.log1p(np.exp(-value)) + np.log(2)))


def test_collapse_threshold_and_rest_point():
    b_c = collapse_threshold(8)
    assert 4.5 < b_c < 4.65
    # below the threshold the slope is negative on the whole half-line, above it rises
    u = np.linspace(1e-3, 40, 4001)
    assert (reduced_slope(u, 0.99 * b_c, 8) < 0).all()
    assert np.isinf(reduced_rest_point(0.99 * b_c, 8))
    rest = reduced_rest_point(1.2 * b_c, 8)
    assert 0 < rest < 40
    assert abs(reduced_slope(rest, 1.2 * b_c, 8)) < 1e-6
    # the threshold grows with the length, roughly like 2 log T
    thresholds = [collapse_threshold(t) for t in (4, 16, 64)]
    assert thresholds == sorted(thresholds)
    assert all(1.8 < b / np.log(t) < 2.8 for b, t in zip(thresholds, (4, 16, 64)))


def test_rest_point_mass_is_the_weaker_class_share():
    b_c = collapse_threshold(8)
    assert rest_point_mass(0.99 * b_c, 8) == 0.0  # no rest point: the class is lost
    masses = [rest_point_mass(b, 8) for b in (4.6, 5.0, 6.0, 8.0)]
    assert masses == sorted(masses) and 0 < masses[0] < 1e-3 and masses[-1] < 0.5
    rest = reduced_rest_point(5.0, 8)
    assert masses[1] == pytest.approx(1 / (1 + 7 * np.exp(rest)))


def test_argument_errors():
    with pytest.raises(ValueError, match="length"):
        reduced_loss(0.0, 1.0, 1)
    with pytest.raises(ValueError, match="value"):
        reduced_slope(0.0, -1.0, 8)
    with pytest.raises(ValueError, match="t_end"):
        reduced_flow(0.1, 1.0, 8, 1.0, float("nan"))


@pytest.mark.parametrize("value", [2.0, 6.0])
def test_reduction_matches_the_flow_on_p(value):
    data = assumption_one_data(20, rng=np.random.default_rng(0))
    alpha = average_signed_frequency(data.counts, data.labels, data.vocab_size)
    alpha_star = float(alpha[data.important].abs().min())
    s = one_step_setting(
        data, 64, 2 * value / alpha_star, seed=0, embed_scale=0.0, cls_scale=0.01
    )
    (path,) = batched_gradient_flow(
        [(s.E1, s.v, data.counts, data.labels, s.p0)],
        log_t_max=8.0,
        selected=[data.important],
        max_steps=3000,
        on_max_steps="stop",
    )
    v = s.v.numpy()
    u = value * (path.p @ v)
    measured = value * float(v @ v)
    # every embedding lies on v: the flow has one coordinate
    assert torch.linalg.matrix_rank(s.E1).item() == 1
    expected = reduced_flow(u[0], measured, 8, measured**2 / float(v @ v), path.t[-1])
    assert abs(u[-1] - expected) <= 0.02  # Euler's error, of order dtau
